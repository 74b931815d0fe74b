//! The primary's side of a stateful member: batches run strictly in version order from the
//! current state, answered at once (NSPB, checkpoints, solo) or after the backup applied them
//! (Remus); each new version is handed to the backup (or the solo rule) and the update stage waits
//! until the backup is close enough behind; the shipper thread sends state tuples.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::wire::encode_columns;
use weir_hams::journal::Event as JournalEvent;
use weir_hams::protocol::{
    encode_frame, member_key, Assign, Mode, Refusal, RunHeader, RunReply, StateHeader,
};
use weir_hams::Seq;
use weir_operators::stateful::state::{NodeState, StateUpdate};
use weir_operators::stateful::step::{row_hashes, row_summaries, seeded_order};
use zenoh::query::Query;
use zenoh::Wait;

use super::{
    lock, put, refuse, state_hash, tuple_frame, Context, Control, Delivery, RunCall, Ship,
    MAX_UNACKED, REPLIES_KEPT,
};

pub(super) fn run_loop(ctx: &Context, rx: &Receiver<RunCall>, ships: &Sender<Ship>) {
    let mut waiting: BTreeMap<Seq, RunCall> = BTreeMap::new();
    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(call) => {
                waiting.insert(call.header.seq, call);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(call) = rx.try_recv() {
            waiting.insert(call.header.seq, call);
        }
        while let Some((&seq, _)) = waiting.first_key_value() {
            let inner = lock(&ctx.shared);
            let epoch = inner.epoch();
            let primary = inner.is_primary();
            let version = inner.version;
            let cached = inner.replies.get(&seq).cloned();
            drop(inner);
            let Some(call) = waiting.remove(&seq) else {
                break;
            };
            if !primary || call.header.epoch != epoch {
                refuse(
                    &call.query,
                    Refusal::Fenced,
                    format!(
                        "batch for epoch {} refused: this member is at epoch {epoch}{}",
                        call.header.epoch,
                        if primary { "" } else { " and not primary" }
                    ),
                );
                continue;
            }
            if seq <= version {
                // A resend: answer with what was sent, never run twice.
                match cached {
                    Some(body) => reply_run(&call.query, body),
                    // Not a failover matter: the rows cannot be answered consistently any more.
                    None => refuse(
                        &call.query,
                        Refusal::Inference,
                        format!("batch {seq} already ran and its reply is no longer kept"),
                    ),
                }
                continue;
            }
            if seq != version + 1 {
                waiting.insert(seq, call);
                break;
            }
            run_one(ctx, call, ships);
        }
    }
}

fn reply_run(query: &Query, body: Vec<u8>) {
    if let Err(e) = query.reply(query.key_expr().clone(), body).wait() {
        debug!(error = %e, "Could not answer a batch.");
    }
}

fn run_one(ctx: &Context, call: RunCall, ships: &Sender<Ship>) {
    let RunCall {
        header,
        inputs,
        query,
    } = call;
    let (assign, state) = {
        let inner = lock(&ctx.shared);
        (inner.assign.clone(), Arc::clone(&inner.current))
    };
    let Some(assign) = assign else { return };
    let mut by_name: BTreeMap<String, TensorColumn> = inputs.into_iter().collect();
    let mut columns = Vec::with_capacity(assign.inputs.len());
    for name in &assign.inputs {
        match by_name.remove(name) {
            Some(c) => columns.push(c),
            None => {
                refuse(
                    &query,
                    Refusal::Invalid,
                    format!("model `{}` needs input `{name}`", ctx.model),
                );
                return;
            }
        }
    }
    let rows = columns.first().map_or(0, TensorColumn::len);
    if let Some(controls) = &header.sequences {
        if let Err(e) = controls.check(rows) {
            refuse(&query, Refusal::Invalid, e);
            return;
        }
    }
    let choice = ctx.options.perturb.then(|| {
        weir_hams::protocol::value_hash(
            format!("{}/{}/{}", assign.node_id, header.seq, header.epoch).as_bytes(),
        )
    });
    let order = choice.map(|seed| seeded_order(rows, seed));
    let result = {
        let mut runner = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
        match runner.as_mut() {
            Some(m) => m.step(
                &columns,
                &state,
                header.sequences.as_ref(),
                order.as_deref(),
            ),
            None => {
                refuse(&query, Refusal::UnknownModel, "model not loaded".into());
                return;
            }
        }
    };
    if !ctx.options.compute.is_zero() {
        std::thread::sleep(ctx.options.compute);
    }
    let step = match result {
        Ok(r) => r,
        Err(e) => {
            // The rows failed; the version still advances (unchanged state) so the sequence
            // stays dense for the backup and for the batches behind this one.
            let tuple = state_tuple(&header, Vec::new(), Vec::new());
            let mut inner = lock(&ctx.shared);
            if inner.retain_made(&tuple, &state) {
                inner.version = header.seq;
            }
            let backup = inner.backup_prefix();
            drop(inner);
            let unchanged = match state.as_ref() {
                NodeState::Sequences(_) => StateUpdate::Delta(Arc::default()),
                NodeState::Whole(_) => StateUpdate::Replace(Arc::clone(&state)),
            };
            hand_over(
                ctx,
                ships,
                &assign,
                backup.as_deref(),
                tuple,
                (state, unchanged),
                Vec::new(),
            );
            refuse(&query, Refusal::Inference, e.to_string());
            return;
        }
    };
    let outputs = step.outputs;
    let next = step.next;
    let hashes = row_hashes(&outputs, rows);
    let (row_labels, row_coarse) = if ctx.journal.enabled() {
        row_summaries(&outputs, rows)
    } else {
        (Vec::new(), Vec::new())
    };
    let produced = JournalEvent::Produced {
        node: assign.node_id,
        epoch: header.epoch,
        seq: header.seq,
        request_ids: header.request_ids.clone(),
        row_hashes: hashes.clone(),
        row_labels,
        row_coarse,
        choice,
        state_hash: if ctx.journal.enabled() {
            state_hash(&next)
        } else {
            0
        },
        replied_at_us: 0,
    };
    if let Some(seed) = choice {
        debug!(model = %ctx.model, seq = header.seq, epoch = header.epoch, seed, "Rows run in a perturbed order.");
    }
    let named = assign
        .outputs
        .iter()
        .map(String::as_str)
        .zip(outputs.iter());
    let body = match encode_columns(named) {
        Ok(b) => encode_frame(
            &RunReply {
                epoch: header.epoch,
                seq: header.seq,
                refused: step.refused,
            },
            &b,
        ),
        Err(e) => {
            refuse(&query, Refusal::Inference, e.to_string());
            return;
        }
    };
    let tuple = state_tuple(&header, header.request_ids.clone(), hashes);
    // Retained and routed under one lock: a role change (going solo, re-protection, rollback)
    // sees this version either in the primary buffer or not at all, never half-handed over.
    let backup = {
        let mut inner = lock(&ctx.shared);
        inner.retain_made(&tuple, &next);
        inner.backup_prefix()
    };
    let speculative = assign.mode != Mode::Remus || backup.is_none();
    let mut replied_at_us = 0;
    if speculative {
        // NSPB (and solo): outputs go at once; durability follows.
        reply_run(&query, body.clone());
        replied_at_us = weir_hams::journal::now_us();
    }
    hand_over(
        ctx,
        ships,
        &assign,
        backup.as_deref(),
        tuple,
        (Arc::clone(&next), step.update),
        body.clone(),
    );
    // The update stage: wait until the backup is close enough behind (NSPB) or has applied this
    // very version (Remus), unless the role changes meanwhile.
    let mut inner = lock(&ctx.shared);
    if backup.is_some() && matches!(assign.mode, Mode::Nspb | Mode::Remus) {
        inner.shipped = header.seq;
        loop {
            let fenced = inner.epoch() != header.epoch || !inner.is_primary();
            let solo = inner.backup_prefix().is_none();
            let caught_up = match assign.mode {
                Mode::Remus => inner.acked >= header.seq,
                _ => (inner.shipped - inner.acked) < MAX_UNACKED as u64,
            };
            if fenced || solo || caught_up {
                break;
            }
            let (guard, _) = ctx
                .shared
                .1
                .wait_timeout(inner, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner());
            inner = guard;
        }
    }
    if inner.epoch() == header.epoch && inner.is_primary() {
        inner.current = next;
        inner.version = header.seq;
        inner.replies.insert(header.seq, body.clone());
        while inner.replies.len() > REPLIES_KEPT {
            inner.replies.pop_first();
        }
    }
    drop(inner);
    if !speculative {
        reply_run(&query, body);
        replied_at_us = weir_hams::journal::now_us();
    }
    if ctx.journal.enabled() {
        let mut produced = produced;
        if let JournalEvent::Produced {
            replied_at_us: at, ..
        } = &mut produced
        {
            *at = replied_at_us;
        }
        ctx.journal.record(&produced);
    }
}

/// The state tuple of batch `header` (the rows' ids and output hashes for the journal).
fn state_tuple(header: &RunHeader, request_ids: Vec<u64>, row_hashes: Vec<u64>) -> StateHeader {
    StateHeader {
        epoch: header.epoch,
        seq: header.seq,
        deps: header.deps.clone(),
        request_ids,
        row_hashes,
        full: false,
        state_bytes: 0,
    }
}

/// Where a version goes after its batch ran (`made`: the version, and the update a backup makes
/// it from the version before): to the backup (NSPB, Remus; under checkpoints only every
/// `checkpoint_every` versions, whole), or to the solo rule when there is no backup.
fn hand_over(
    ctx: &Context,
    ships: &Sender<Ship>,
    assign: &Assign,
    backup: Option<&str>,
    mut tuple: StateHeader,
    made: (Arc<NodeState>, StateUpdate),
    reply: Vec<u8>,
) {
    let (state, update) = made;
    let ship = |tuple: StateHeader, state: StateUpdate, reply: Vec<u8>| {
        if let Some(b) = backup {
            let _ = ships.send(Ship {
                key: member_key(b, &ctx.model, "state"),
                header: tuple,
                state,
                reply,
            });
        }
    };
    match (assign.mode, backup) {
        (Mode::None, _) | (Mode::Checkpoint, None) => {}
        (Mode::Checkpoint, Some(_)) => {
            if tuple.seq.is_multiple_of(assign.checkpoint_every.max(1)) {
                tuple.full = true;
                tuple.deps.clear();
                ship(tuple, StateUpdate::Replace(state), Vec::new());
            }
        }
        (Mode::Nspb | Mode::Remus, Some(_)) => ship(tuple, update, reply),
        (Mode::Nspb | Mode::Remus, None) => {
            let _ = ctx.control.send(Control::SoloProduced(tuple));
        }
    }
}

pub(super) fn ship_loop(ctx: &Context, rx: &Receiver<Ship>) {
    let send = |ship: Ship| {
        put(
            ctx,
            ship.key,
            tuple_frame(ship.header, &ship.state, &ship.reply),
            Delivery::Wait,
        )
    };
    // Chaos (`reorder_messages`): every other tuple waits for the next one and goes after it,
    // or alone after a few milliseconds when no next one comes.
    let mut held: Option<Ship> = None;
    loop {
        let next = match held {
            Some(_) => rx.recv_timeout(Duration::from_millis(5)),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(ship) => {
                if !ctx.options.state_delay.is_zero() {
                    std::thread::sleep(ctx.options.state_delay);
                }
                if !ctx.options.reorder_messages {
                    send(ship);
                } else if let Some(first) = held.take() {
                    send(ship);
                    send(first);
                } else {
                    held = Some(ship);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(first) = held.take() {
                    send(first);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(first) = held.take() {
                    send(first);
                }
                return;
            }
        }
    }
}
