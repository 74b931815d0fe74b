//! The control thread of a stateful member: role assignments (promotion, demotion,
//! re-protection), state tuples applied by Algorithm 2 (backup) or the solo rule (primary without
//! a backup), durability announcements and apply acknowledgements.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tracing::{debug, info, warn};
use weir_hams::durability::Offer;
use weir_hams::journal::Event as JournalEvent;
use weir_hams::protocol::{
    durable_key_all, member_key, Applied, Assign, AssignReply, Durable, Mode, Refusal, Role,
    StateHeader,
};
use weir_hams::{Epoch, Seq};
use weir_operators::stateful::state::{NodeState, StateUpdate};
use zenoh::pubsub::Subscriber;
use zenoh::query::Query;
use zenoh::Wait;

use super::repair::{whole_state, Repair};
use super::{
    announce, check_layout, ensure_model, lock, put, refuse, state_hash, tuple_frame, Context,
    Control, Delivery, Inner, Ship, REPLIES_KEPT,
};

/// How often the control thread looks at its backup's progress when no message comes.
const TICK: Duration = Duration::from_millis(50);

pub(super) fn control_loop(ctx: &Context, rx: &Receiver<Control>, ships: Sender<Ship>) {
    let mut durable_sub: Option<Subscriber<()>> = None;
    let mut repair = Repair::new(ships);
    loop {
        let msg = match rx.recv_timeout(TICK) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => {
                repair.tick(ctx);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Control::Stop => break,
            Control::Assign(a, query) => {
                if durable_sub.is_none() {
                    let tx = ctx.control.clone();
                    durable_sub = ctx
                        .session
                        .declare_subscriber(durable_key_all(&a.graph))
                        .callback(move |sample| {
                            if let Ok(d) =
                                serde_json::from_slice::<Durable>(&sample.payload().to_bytes())
                            {
                                let _ = tx.send(Control::Durable(d));
                            }
                        })
                        .wait()
                        .map_err(|e| warn!(error = %e, "No durability subscription."))
                        .ok();
                }
                take_role(ctx, *a, &query);
                // A primary gone solo may hold versions whose dependencies are durable already.
                drain(ctx);
            }
            Control::State(h, state, reply, arrived) => {
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() {
                    continue;
                }
                let Some(a) = &inner.assign else {
                    debug!("A state tuple before any role; dropped.");
                    continue;
                };
                let state = match StateUpdate::decode(
                    &state,
                    h.full,
                    &a.state,
                    a.sequences.as_ref(),
                ) {
                    Ok(s) => s,
                    Err(e) => {
                        warn!(error = %e, "A state tuple that does not fit the node's layout; dropped.");
                        continue;
                    }
                };
                if !reply.is_empty() && h.epoch >= inner.epoch() {
                    // Kept for a promoted future: a resent batch is answered, not run again.
                    inner.replies.insert(h.seq, reply);
                    while inner.replies.len() > REPLIES_KEPT {
                        inner.replies.pop_first();
                    }
                }
                inner.received_at.insert(h.seq, arrived);
                while inner.received_at.len() > REPLIES_KEPT {
                    inner.received_at.pop_first();
                }
                let offer = inner.apply.offer(h, Some(state));
                debug!(?offer, "State tuple offered.");
                let again = match (offer, inner.assign.clone()) {
                    (Offer::Duplicate, Some(a)) => Some((a, inner.apply.applied())),
                    _ => None,
                };
                drop(inner);
                if let Some((a, applied)) = again {
                    // A version applied already: its acknowledgement or announcement may be what
                    // was lost (the primary re-ships when it hears none; `repair.rs`).
                    acknowledge(ctx, &a, a.epoch, applied);
                }
                drain(ctx);
            }
            Control::Applied(a) => {
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() && a.epoch == inner.epoch() && a.seq > inner.acked {
                    inner.acked = a.seq;
                    inner.durable_up_to(a.seq);
                    ctx.shared.1.notify_all();
                    let target = inner.assign.as_ref().map(|s| (s.graph.clone(), s.node_id));
                    drop(inner);
                    // The backup announces what it applied; the primary, having heard it, does
                    // too, so a reply does not wait on the one link from backup to graph.
                    if let Some((graph, node)) = target {
                        announce(
                            ctx,
                            &graph,
                            Durable {
                                node,
                                epoch: a.epoch,
                                seq: a.seq,
                            },
                        );
                    }
                }
            }
            Control::Durable(d) => {
                lock(&ctx.shared).view.announce(d);
                drain(ctx);
            }
            Control::SoloProduced(h) => {
                // Made while solo, so never shipped: the solo rule makes it durable even when a
                // backup was assigned between the run thread's hand-over and this message (the
                // backup's whole-state transfer covers it too, but the journal, like the design
                // in `change_backup`, counts each solo version as applied by the solo rule; when
                // this was dropped, 1 full test run in ~12 showed released versions no one applied).
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() && h.epoch == inner.epoch() {
                    inner.apply.offer(h, None);
                }
                drop(inner);
                drain(ctx);
            }
        }
        repair.tick(ctx);
    }
    if let Some(s) = durable_sub {
        let _ = s.undeclare().wait();
    }
}

/// Applies every tuple whose turn has come (backup) or marks own versions durable (solo).
fn drain(ctx: &Context) {
    loop {
        let mut inner = lock(&ctx.shared);
        let Some(a) = inner.assign.clone() else {
            return;
        };
        let view = inner.view.clone();
        let Some((h, payload)) = inner.apply.next_ready(&view) else {
            return;
        };
        let applied = payload.map(|update| update.apply(&inner.current));
        let state_hash = match &applied {
            Some(state) if ctx.journal.enabled() => state_hash(state),
            _ => 0,
        };
        let received_at_us = inner.received_at.remove(&h.seq).unwrap_or(0);
        match applied {
            Some(state) => {
                inner.current = state;
                inner.version = h.seq;
            }
            // The solo rule made one of the primary's own versions durable.
            None => inner.durable_up_to(h.seq),
        }
        let epoch = inner.epoch();
        drop(inner);
        ctx.journal.record(&JournalEvent::Applied {
            node: a.node_id,
            epoch,
            seq: h.seq,
            durable_then: h.deps.iter().map(|&(n, _)| (n, view.durable(n))).collect(),
            deps: h.deps.clone(),
            request_ids: h.request_ids.clone(),
            row_hashes: h.row_hashes.clone(),
            full: h.full,
            state_hash,
            member: ctx.executor.clone(),
            received_at_us,
        });
        acknowledge(ctx, &a, epoch, h.seq);
    }
}

/// Announces version `seq` of `a`'s node durable and, on a backup, acknowledges it to the primary.
fn acknowledge(ctx: &Context, a: &Assign, epoch: Epoch, seq: Seq) {
    announce(
        ctx,
        &a.graph,
        Durable {
            node: a.node_id,
            epoch,
            seq,
        },
    );
    if let Role::Backup { primary } = &a.role {
        put(
            ctx,
            member_key(primary, &ctx.model, "applied"),
            serde_json::to_vec(&Applied { epoch, seq }).unwrap_or_default(),
            Delivery::OrDrop,
        );
    }
}

/// The primary goes back to the version it retained at `to` (or at its own durable floor, when
/// that is later); everything it made after is void. This is the correlated failure of "HAMS:
/// High Availability for Distributed Machine Learning Service Graphs" §IV-C (Fig. 6): its input
/// was rolled back and its backup is gone too. Returns the version it is at now.
fn roll_back(inner: &mut Inner, a: &Assign, to: Seq) -> Result<Seq, String> {
    let target = to.max(inner.floor());
    let Some((_, state)) = inner.retained.get(&target).cloned() else {
        return Err(format!(
            "cannot roll back to version {target}: the primary buffer holds {:?}",
            inner.retained.keys().collect::<Vec<_>>()
        ));
    };
    info!(
        from = inner.version,
        to = target,
        epoch = a.epoch,
        "Primary rolled back to its retained state."
    );
    inner.current = state;
    inner.version = target;
    inner.retained.retain(|&s, _| s <= target);
    inner.durable_up_to(target);
    inner.replies.retain(|&s, _| s <= target);
    inner.apply.reset(a.epoch, target);
    Ok(target)
}

/// The primary keeps its state and gets a new backup, or none (solo). The durable floor stays.
/// Going solo, the versions above it (shipped to a backup that is gone) become durable by the
/// solo rule. Getting a backup after solo, the versions the solo rule still holds stay queued
/// and become durable by it as before (each journaled as applied, which the release rule checks
/// per version); the new backup's whole-state transfer covers the versions after them.
fn change_backup(inner: &mut Inner, a: &Assign, solo: bool) {
    if !solo {
        return;
    }
    let floor = inner.floor();
    inner.apply.reset(a.epoch, floor);
    let undurable: Vec<StateHeader> = inner
        .retained
        .range(floor + 1..)
        .map(|(_, (h, _))| StateHeader {
            epoch: a.epoch,
            ..h.clone()
        })
        .collect();
    for h in undurable {
        inner.apply.offer(h, None);
    }
}

fn take_role(ctx: &Context, a: Assign, query: &Query) {
    if let Err(e) = check_layout(ctx, &a) {
        warn!(executor = %ctx.executor, model = %ctx.model, reason = %e, "Assignment refused: its layout is not the model's.");
        refuse(query, Refusal::Invalid, e);
        return;
    }
    if let Err(e) = ensure_model(ctx, &a) {
        refuse(query, Refusal::UnknownModel, e);
        return;
    }
    let mut inner = lock(&ctx.shared);
    if a.epoch < inner.epoch() {
        let message = format!(
            "assignment for epoch {} after epoch {}",
            a.epoch,
            inner.epoch()
        );
        drop(inner);
        refuse(query, Refusal::Fenced, message);
        return;
    }
    let was_primary = inner.is_primary();
    let mut full: Option<Ship> = None;
    let mut reannounce = None;
    let role_name;
    match &a.role {
        Role::Primary { backup } => {
            if !was_primary {
                // Promotion: what was applied is the new primary's state; what waited is void.
                let applied = inner.version;
                inner.apply.reset(a.epoch, applied);
                inner.assign = Some(a.clone());
                inner.retain_only_current();
                reannounce = Some(applied);
            } else if let Some(to) = a.rollback_to {
                match roll_back(&mut inner, &a, to) {
                    Ok(target) => reannounce = Some(target),
                    Err(message) => {
                        drop(inner);
                        refuse(query, Refusal::Inference, message);
                        return;
                    }
                }
            } else {
                change_backup(&mut inner, &a, backup.is_none());
            }
            inner.acked = inner.floor();
            inner.shipped = inner.version;
            // The latest version made (possibly still in the run thread's update stage),
            // applied by the new backup once everything it depends on is durable.
            full = backup
                .as_deref()
                .and_then(|b| whole_state(&inner, &ctx.model, b, a.epoch));
            role_name = match (backup.is_some(), a.rollback_to.is_some()) {
                (true, _) => "primary",
                (false, false) => "solo primary",
                (false, true) => "rolled-back solo primary",
            };
        }
        Role::Backup { .. } => {
            // A demoted primary's versions were speculative: the new primary's whole state
            // overwrites them (HAMS §IV-E: full states are replicated, so an old primary becomes
            // a backup by overwriting). A fresh backup starts from version 0 like its primary.
            inner.apply.reset(a.epoch, 0);
            inner.replies.clear();
            inner.retained.clear();
            if a.sequences.is_some() {
                // Deltas apply onto the version before them: until the new primary's table
                // arrives, the base is the initial one (a primary still at version 0 sends
                // deltas from it), never this member's own speculative table.
                inner.current = Arc::new(NodeState::initial(&a.state, a.sequences.as_ref()));
            }
            role_name = "backup";
        }
    }
    let reply = AssignReply {
        applied: inner.version,
        epoch: a.epoch,
    };
    inner.assign = Some(a.clone());
    ctx.shared.1.notify_all();
    drop(inner);
    info!(executor = %ctx.executor, model = %ctx.model, role = role_name, epoch = a.epoch, applied = reply.applied, "HAMS role taken.");
    ctx.journal.record(&JournalEvent::Role {
        node: a.node_id,
        member: ctx.executor.clone(),
        epoch: a.epoch,
        role: role_name.to_string(),
        applied: reply.applied,
    });
    if let Some(ship) = full {
        // Straight from this thread: a whole-state transfer must not wait behind a delayed link
        // (nor block this thread on a dark one: a dropped one is shipped again, `repair.rs`).
        put(
            ctx,
            ship.key,
            tuple_frame(ship.header, &ship.state, &ship.reply),
            Delivery::OrDrop,
        );
    }
    if let (Some(seq), true) = (reannounce, a.mode != Mode::None) {
        announce(
            ctx,
            &a.graph,
            Durable {
                node: a.node_id,
                epoch: a.epoch,
                seq,
            },
        );
    }
    let body = serde_json::to_vec(&reply).unwrap_or_default();
    if let Err(e) = query.reply(query.key_expr().clone(), body).wait() {
        debug!(error = %e, "Could not answer an assignment.");
    }
}
