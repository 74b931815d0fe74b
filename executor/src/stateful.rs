//! A stateful model on an executor process (HAMS's proxy, note §1.3): the member of a stateful
//! node's replica pair, primary or backup as the graph's manager assigns it.
//!
//! Three threads, so nothing waits on zenoh's callback threads:
//! - the **run** thread (primary) runs batches strictly in sequence order from the current state
//!   version, answers each batch's query, and hands the new version to the shipper;
//! - the **shipper** sends state tuples to the backup (after `--state-delay-ms`, which emulates a
//!   slow state link for tests and benchmarks);
//! - the **control** thread takes role assignments, state tuples (backup: Algorithm 2 through
//!   [`ApplyQueue`]), durability announcements and apply acknowledgements.
//!
//! Modes: under NSPB the run thread answers a batch as soon as it is computed (speculative
//! output), ships its state while the next batch computes, and moves on to the new version (the
//! update stage) once fewer than [`MAX_UNACKED`] versions wait for the backup (the primary keeps
//! every unacknowledged version: note §2.6's buffer rule, bounded). Under Remus it answers only
//! after the backup applied the version. A primary without a backup runs *solo* (note §2.9 gap 5):
//! its own versions count as durable once their dependencies are, and it announces them itself.
//! A promoted backup drops unapplied tuples (gap 4) and re-announces its applied version (gap 8).
//! Every call and message carries an epoch; stale ones are refused or dropped (fencing).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use tracing::{debug, info, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::onnx::{read_metadata, ElementType};
use weir_engine::tensor::Dim;
use weir_engine::wire::{decode_columns, encode_columns};
use weir_hams::durability::{ApplyQueue, DurableView};
use weir_hams::journal::{Event as JournalEvent, Journal};
use weir_hams::protocol::{
    decode_frame, durable_key, durable_key_all, encode_frame, f32_bytes, f32_values, member_key,
    Applied, Assign, AssignReply, Durable, Mode, Refusal, RefusalReply, Role, RunHeader, RunReply,
    StateHeader,
};
use weir_hams::{Epoch, Seq};
use weir_operators::model::stateful_step::{
    row_hashes, seeded_order, StateSlot, StateVersion, StatefulModel,
};
use weir_operators::model::OrtRuntime;
use zenoh::pubsub::Subscriber;
use zenoh::query::{Query, Queryable};
use zenoh::{Session, Wait};

/// State versions a primary may run ahead of its backup's acknowledgements.
pub const MAX_UNACKED: usize = 8;

/// Replies kept for answering a resent batch.
const REPLIES_KEPT: usize = 64;

/// How a stateful member runs.
#[derive(Debug, Clone, Default)]
pub struct StatefulOptions {
    /// Intra-op threads of its session.
    pub threads: usize,
    /// Run each batch's rows in a seeded order chosen per (node, version, epoch) and journal the
    /// choice: the non-determinism a GPU's reduction order or a racy interleaving would bring.
    pub perturb: bool,
    /// Delay before each state tuple is sent (a slow state link).
    pub state_delay: Duration,
    /// Emulated extra compute per batch (a sleep after the real ONNX Runtime call, before the
    /// reply): the regime of the paper's GPU models, whose batches take tens to hundreds of ms,
    /// without spending this machine's two cores on it (notes/hams.md §5.2's method).
    pub compute: Duration,
}

/// Errors starting a member.
#[derive(Debug, thiserror::Error)]
#[error("stateful model `{model}`: {message}")]
pub struct MemberError {
    /// Model name.
    pub model: String,
    /// Why.
    pub message: String,
}

type Shared = Arc<(Mutex<Inner>, Condvar)>;

/// The member's protocol state.
struct Inner {
    assign: Option<Assign>,
    /// Primary: last version produced; backup: last applied.
    version: Seq,
    current: Arc<StateVersion>,
    view: DurableView,
    /// Backup: received tuples (payload = state); solo primary: own versions (payload `None`).
    apply: ApplyQueue<Option<Arc<StateVersion>>>,
    /// Primary: the highest version the backup applied, and the versions shipped since.
    acked: Seq,
    shipped: Seq,
    replies: BTreeMap<Seq, Vec<u8>>,
}

impl Inner {
    fn epoch(&self) -> Epoch {
        self.assign.as_ref().map_or(0, |a| a.epoch)
    }

    fn backup_prefix(&self) -> Option<String> {
        match self.assign.as_ref().map(|a| &a.role) {
            Some(Role::Primary { backup }) => backup.clone(),
            _ => None,
        }
    }

    fn is_primary(&self) -> bool {
        matches!(
            self.assign.as_ref().map(|a| &a.role),
            Some(Role::Primary { .. })
        )
    }
}

enum Control {
    Assign(Assign, Query),
    /// A state tuple: header, state (flat), the batch's reply frame.
    State(StateHeader, Arc<StateVersion>, Vec<u8>),
    Applied(Applied),
    Durable(Durable),
    /// The solo primary produced a version (it becomes durable once its dependencies are).
    SoloProduced(StateHeader),
    Stop,
}

struct Ship {
    key: String,
    header: StateHeader,
    state: Arc<StateVersion>,
    reply: Vec<u8>,
}

struct RunCall {
    header: RunHeader,
    inputs: Vec<(String, TensorColumn)>,
    query: Query,
}

/// One stateful model served by an executor process.
pub struct StatefulMember {
    model: String,
    control: Sender<Control>,
    runs: Option<Sender<RunCall>>,
    ships: Option<Sender<Ship>>,
    threads: Vec<JoinHandle<()>>,
    queryables: Vec<Queryable<()>>,
    subscribers: Vec<Subscriber<()>>,
}

impl std::fmt::Debug for StatefulMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulMember")
            .field("model", &self.model)
            .finish()
    }
}

/// What the threads share besides the protocol state.
struct Context {
    executor: String,
    model: String,
    path: PathBuf,
    session: Session,
    options: StatefulOptions,
    shared: Shared,
    runner: Mutex<Option<StatefulModel>>,
    journal: Journal,
    control: Sender<Control>,
}

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    shared.0.lock().unwrap_or_else(|p| p.into_inner())
}

fn refuse(query: &Query, refusal: Refusal, message: String) {
    let body = serde_json::to_vec(&RefusalReply { refusal, message }).unwrap_or_default();
    if let Err(e) = query.reply_err(body).wait() {
        debug!(error = %e, "Could not send a refusal.");
    }
}

impl StatefulMember {
    /// The model's name.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Serves stateful model `model` (file `path`) on `session` under executor `prefix`. The
    /// model is loaded at its first role assignment, which names its state tensors.
    ///
    /// # Errors
    /// When the model file cannot be read or zenoh refuses a declaration.
    pub fn start(
        session: &Session,
        executor: &str,
        prefix: &str,
        model: &str,
        path: PathBuf,
        options: StatefulOptions,
    ) -> Result<StatefulMember, MemberError> {
        let bad = |message: String| MemberError {
            model: model.to_string(),
            message,
        };
        read_metadata(&path).map_err(|e| bad(e.to_string()))?;
        let (control_tx, control_rx) = unbounded::<Control>();
        let (run_tx, run_rx) = unbounded::<RunCall>();
        let (ship_tx, ship_rx) = unbounded::<Ship>();
        let shared: Shared = Arc::new((
            Mutex::new(Inner {
                assign: None,
                version: 0,
                current: Arc::new(Vec::new()),
                view: DurableView::default(),
                apply: ApplyQueue::new(0, 0),
                acked: 0,
                shipped: 0,
                replies: BTreeMap::new(),
            }),
            Condvar::new(),
        ));
        let ctx = Arc::new(Context {
            executor: executor.to_string(),
            model: model.to_string(),
            path,
            session: session.clone(),
            options,
            shared,
            runner: Mutex::new(None),
            journal: Journal::from_env(&format!("{executor}-{model}-{}", std::process::id())),
            control: control_tx.clone(),
        });
        let mut queryables = Vec::new();
        let mut subscribers = Vec::new();
        let declare_err = |e: zenoh::Error| bad(format!("zenoh: {e}"));
        let tx = run_tx.clone();
        queryables.push(
            session
                .declare_queryable(member_key(prefix, model, "run"))
                .callback(move |query| on_run(&tx, query))
                .wait()
                .map_err(declare_err)?,
        );
        let tx = control_tx.clone();
        queryables.push(
            session
                .declare_queryable(member_key(prefix, model, "assign"))
                .callback(move |query| on_assign(&tx, query))
                .wait()
                .map_err(declare_err)?,
        );
        let tx = control_tx.clone();
        subscribers.push(
            session
                .declare_subscriber(member_key(prefix, model, "state"))
                .callback(move |sample| {
                    let bytes = sample.payload().to_bytes();
                    match decode_frame::<StateHeader>(&bytes) {
                        Ok((h, payload)) => {
                            let (state, reply) = payload.split_at(h.state_bytes.min(payload.len()));
                            match f32_values(state) {
                                Some(flat) => {
                                    let reply = reply.to_vec();
                                    let _ = tx.send(Control::State(h, Arc::new(vec![flat]), reply));
                                }
                                None => warn!("A state tuple's payload is not f32 data; dropped."),
                            }
                        }
                        Err(e) => warn!(error = %e, "An undecodable state tuple; dropped."),
                    }
                })
                .wait()
                .map_err(declare_err)?,
        );
        let tx = control_tx.clone();
        subscribers.push(
            session
                .declare_subscriber(member_key(prefix, model, "applied"))
                .callback(move |sample| {
                    if let Ok(a) = serde_json::from_slice::<Applied>(&sample.payload().to_bytes()) {
                        let _ = tx.send(Control::Applied(a));
                    }
                })
                .wait()
                .map_err(declare_err)?,
        );
        let mut threads = Vec::new();
        let c = Arc::clone(&ctx);
        threads.push(spawn(format!("hams-control-{model}"), move || {
            control_loop(&c, &control_rx)
        })?);
        let c = Arc::clone(&ctx);
        let ships = ship_tx.clone();
        threads.push(spawn(format!("hams-run-{model}"), move || {
            run_loop(&c, &run_rx, &ships)
        })?);
        let c = Arc::clone(&ctx);
        threads.push(spawn(format!("hams-ship-{model}"), move || {
            ship_loop(&c, &ship_rx)
        })?);
        // The control thread declares the durability subscriber at the first assignment, when
        // the graph's name is known; it needs the session and a sender of its own.
        Ok(StatefulMember {
            model: model.to_string(),
            control: control_tx,
            runs: Some(run_tx),
            ships: Some(ship_tx),
            threads,
            queryables,
            subscribers,
        })
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, MemberError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| MemberError {
            model: name,
            message: format!("spawning a thread: {e}"),
        })
}

impl Drop for StatefulMember {
    fn drop(&mut self) {
        for q in self.queryables.drain(..) {
            let _ = q.undeclare().wait();
        }
        for s in self.subscribers.drain(..) {
            let _ = s.undeclare().wait();
        }
        self.runs = None;
        self.ships = None;
        let _ = self.control.send(Control::Stop);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn on_run(tx: &Sender<RunCall>, query: Query) {
    let Some(payload) = query.payload() else {
        refuse(
            &query,
            Refusal::Invalid,
            "the run carries no payload".into(),
        );
        return;
    };
    let bytes = payload.to_bytes();
    let decoded = decode_frame::<RunHeader>(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|(h, body)| {
            decode_columns(body)
                .map(|c| (h, c))
                .map_err(|e| e.to_string())
        });
    match decoded {
        Ok((header, inputs)) => {
            let _ = tx.send(RunCall {
                header,
                inputs,
                query,
            });
        }
        Err(e) => refuse(&query, Refusal::Invalid, format!("undecodable run: {e}")),
    }
}

fn on_assign(tx: &Sender<Control>, query: Query) {
    let parsed = query
        .payload()
        .map(|p| serde_json::from_slice::<Assign>(&p.to_bytes()));
    match parsed {
        Some(Ok(a)) => {
            let _ = tx.send(Control::Assign(a, query));
        }
        Some(Err(e)) => refuse(&query, Refusal::Invalid, format!("bad assignment: {e}")),
        None => refuse(
            &query,
            Refusal::Invalid,
            "the assignment carries no payload".into(),
        ),
    }
}

/// Loads the model for the layout `a` names, once.
fn ensure_model(ctx: &Context, a: &Assign) -> Result<(), String> {
    let mut runner = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
    if runner.is_some() {
        return Ok(());
    }
    let meta = read_metadata(&ctx.path).map_err(|e| e.to_string())?;
    let mut outputs = Vec::new();
    for name in &a.outputs {
        let info = meta
            .outputs
            .iter()
            .find(|o| &o.name == name)
            .ok_or_else(|| format!("the model has no output `{name}`"))?;
        match info.element {
            ElementType::Supported(d) => outputs.push((name.clone(), d)),
            _ => return Err(format!("output `{name}` is not an f32 or i64 tensor")),
        }
    }
    let batched = meta
        .inputs
        .iter()
        .filter(|i| a.inputs.contains(&i.name))
        .all(|i| i.dims.first() == Some(&Dim::Dynamic));
    let runtime = OrtRuntime::get().map_err(|e| e.to_string())?;
    let slots = a
        .state
        .iter()
        .map(|s| StateSlot {
            input: s.input.clone(),
            output: s.output.clone(),
            shape: s.shape.clone(),
        })
        .collect();
    let model = StatefulModel::load(
        &runtime,
        &ctx.model,
        &ctx.path,
        ctx.options.threads.max(1),
        batched,
        a.inputs.clone(),
        outputs,
        slots,
    )
    .map_err(|e| e.to_string())?;
    let mut inner = lock(&ctx.shared);
    if inner.current.is_empty() {
        inner.current = Arc::new(model.initial_state());
    }
    drop(inner);
    *runner = Some(model);
    Ok(())
}

/// Sends a protocol message. Blocking congestion control: zenoh's default for puts drops samples
/// when a link's queue is full, and a lost state tuple, acknowledgement or durability announcement
/// would stall the protocol (a backup applies versions strictly in order).
fn put(ctx: &Context, key: String, body: Vec<u8>) {
    let sent = ctx
        .session
        .put(key, body)
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .wait();
    if let Err(e) = sent {
        debug!(error = %e, "A HAMS message could not be sent.");
    }
}

fn announce(ctx: &Context, graph: &str, d: Durable) {
    put(
        ctx,
        durable_key(graph, d.node),
        serde_json::to_vec(&d).unwrap_or_default(),
    );
}

fn state_payload(state: &StateVersion) -> Vec<u8> {
    let flat: Vec<f32> = state.iter().flatten().copied().collect();
    f32_bytes(&flat)
}

/// A state tuple's wire form: header (with the state's length), state, reply.
fn tuple_frame(mut header: StateHeader, state: &StateVersion, reply: &[u8]) -> Vec<u8> {
    let mut payload = state_payload(state);
    header.state_bytes = payload.len();
    payload.extend_from_slice(reply);
    encode_frame(&header, &payload)
}

fn control_loop(ctx: &Context, rx: &Receiver<Control>) {
    let mut durable_sub: Option<Subscriber<()>> = None;
    while let Ok(msg) = rx.recv() {
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
                take_role(ctx, a, &query);
            }
            Control::State(h, state, reply) => {
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() {
                    continue;
                }
                let state = split_state(&inner, state);
                if !reply.is_empty() && h.epoch >= inner.epoch() {
                    // Kept for a promoted future: a resent batch is answered, not run again.
                    inner.replies.insert(h.seq, reply);
                    while inner.replies.len() > REPLIES_KEPT {
                        inner.replies.pop_first();
                    }
                }
                let offer = inner.apply.offer(h, Some(state));
                debug!(?offer, "State tuple offered.");
                drop(inner);
                drain(ctx);
            }
            Control::Applied(a) => {
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() && a.epoch == inner.epoch() && a.seq > inner.acked {
                    inner.acked = a.seq;
                    ctx.shared.1.notify_all();
                }
            }
            Control::Durable(d) => {
                lock(&ctx.shared).view.announce(d);
                drain(ctx);
            }
            Control::SoloProduced(h) => {
                let mut inner = lock(&ctx.shared);
                if inner.is_primary() && inner.backup_prefix().is_none() && h.epoch == inner.epoch()
                {
                    inner.apply.offer(h, None);
                }
                drop(inner);
                drain(ctx);
            }
        }
    }
    if let Some(s) = durable_sub {
        let _ = s.undeclare().wait();
    }
}

/// A state tuple arrives as one flat vector; cut it into the node's state tensors.
fn split_state(inner: &Inner, state: Arc<StateVersion>) -> Arc<StateVersion> {
    let Some(a) = &inner.assign else {
        return state;
    };
    let flat = state.first().cloned().unwrap_or_default();
    let mut out = Vec::with_capacity(a.state.len());
    let mut offset = 0;
    for s in &a.state {
        let n: usize = s.shape.iter().product();
        out.push(
            flat.get(offset..offset + n)
                .map(<[f32]>::to_vec)
                .unwrap_or_default(),
        );
        offset += n;
    }
    Arc::new(out)
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
        let primary = match &a.role {
            Role::Backup { primary } => Some(primary.clone()),
            Role::Primary { .. } => None,
        };
        if let Some(state) = payload {
            inner.current = state;
            inner.version = h.seq;
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
        });
        announce(
            ctx,
            &a.graph,
            Durable {
                node: a.node_id,
                epoch,
                seq: h.seq,
            },
        );
        if let Some(primary) = primary {
            put(
                ctx,
                member_key(&primary, &ctx.model, "applied"),
                serde_json::to_vec(&Applied { epoch, seq: h.seq }).unwrap_or_default(),
            );
        }
    }
}

fn take_role(ctx: &Context, a: Assign, query: &Query) {
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
                reannounce = Some(applied);
            } else {
                // Re-protection: own versions not yet durable stay queued for the solo rule.
                let applied = inner.apply.applied();
                inner.apply.reset(a.epoch, applied);
            }
            inner.acked = inner.version;
            inner.shipped = inner.version;
            if let Some(b) = backup {
                full = Some(Ship {
                    key: member_key(b, &ctx.model, "state"),
                    header: StateHeader {
                        epoch: a.epoch,
                        seq: inner.version,
                        deps: Vec::new(),
                        request_ids: Vec::new(),
                        row_hashes: Vec::new(),
                        full: true,
                        state_bytes: 0,
                    },
                    state: Arc::clone(&inner.current),
                    reply: Vec::new(),
                });
            }
            role_name = if backup.is_some() {
                "primary"
            } else {
                "solo primary"
            };
        }
        Role::Backup { .. } => {
            // A demoted primary's versions were speculative: the new primary's whole state
            // overwrites them (R8). A fresh backup starts from version 0 like its primary.
            inner.apply.reset(a.epoch, 0);
            inner.replies.clear();
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
        // Straight from this thread: a whole-state transfer must not wait behind a delayed link.
        put(
            ctx,
            ship.key,
            tuple_frame(ship.header, &ship.state, &ship.reply),
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

fn run_loop(ctx: &Context, rx: &Receiver<RunCall>, ships: &Sender<Ship>) {
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
    let choice = ctx.options.perturb.then(|| {
        weir_hams::protocol::value_hash(
            format!("{}/{}/{}", assign.node_id, header.seq, header.epoch).as_bytes(),
        )
    });
    let order = choice.map(|seed| seeded_order(rows, seed));
    let result = {
        let mut runner = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
        match runner.as_mut() {
            Some(m) => m.run(&columns, &state, order.as_deref()),
            None => {
                refuse(&query, Refusal::UnknownModel, "model not loaded".into());
                return;
            }
        }
    };
    if !ctx.options.compute.is_zero() {
        std::thread::sleep(ctx.options.compute);
    }
    let (outputs, next) = match result {
        Ok(r) => r,
        Err(e) => {
            // The rows failed; the version still advances (unchanged state) so the sequence
            // stays dense for the backup and for the batches behind this one.
            let mut inner = lock(&ctx.shared);
            if inner.epoch() == header.epoch && inner.is_primary() {
                inner.version = header.seq;
            }
            let backup = inner.backup_prefix();
            drop(inner);
            let tuple = StateHeader {
                epoch: header.epoch,
                seq: header.seq,
                deps: header.deps.clone(),
                request_ids: Vec::new(),
                row_hashes: Vec::new(),
                full: false,
                state_bytes: 0,
            };
            hand_over(
                ctx,
                ships,
                &assign,
                backup.as_deref(),
                tuple,
                state,
                Vec::new(),
            );
            refuse(&query, Refusal::Inference, e.to_string());
            return;
        }
    };
    let hashes = row_hashes(&outputs, rows);
    ctx.journal.record(&JournalEvent::Produced {
        node: assign.node_id,
        epoch: header.epoch,
        seq: header.seq,
        request_ids: header.request_ids.clone(),
        row_hashes: hashes.clone(),
        choice,
    });
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
            },
            &b,
        ),
        Err(e) => {
            refuse(&query, Refusal::Inference, e.to_string());
            return;
        }
    };
    let next = Arc::new(next);
    let tuple = StateHeader {
        epoch: header.epoch,
        seq: header.seq,
        deps: header.deps.clone(),
        request_ids: header.request_ids.clone(),
        row_hashes: hashes,
        full: false,
        state_bytes: 0,
    };
    let backup = lock(&ctx.shared).backup_prefix();
    let speculative = assign.mode != Mode::Remus || backup.is_none();
    if speculative {
        // NSPB (and solo): outputs go at once; durability follows.
        reply_run(&query, body.clone());
    }
    hand_over(
        ctx,
        ships,
        &assign,
        backup.as_deref(),
        tuple,
        Arc::clone(&next),
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
    }
}

/// Where a version goes after its batch ran: to the backup (NSPB, Remus; under checkpoints only
/// every `checkpoint_every` versions, whole), or to the solo rule when there is no backup.
fn hand_over(
    ctx: &Context,
    ships: &Sender<Ship>,
    assign: &Assign,
    backup: Option<&str>,
    mut tuple: StateHeader,
    state: Arc<StateVersion>,
    reply: Vec<u8>,
) {
    let ship = |tuple: StateHeader, reply: Vec<u8>| {
        if let Some(b) = backup {
            let _ = ships.send(Ship {
                key: member_key(b, &ctx.model, "state"),
                header: tuple,
                state: Arc::clone(&state),
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
                ship(tuple, Vec::new());
            }
        }
        (Mode::Nspb | Mode::Remus, Some(_)) => ship(tuple, reply),
        (Mode::Nspb | Mode::Remus, None) => {
            let _ = ctx.control.send(Control::SoloProduced(tuple));
        }
    }
}

fn ship_loop(ctx: &Context, rx: &Receiver<Ship>) {
    while let Ok(ship) = rx.recv() {
        if !ctx.options.state_delay.is_zero() {
            std::thread::sleep(ctx.options.state_delay);
        }
        put(
            ctx,
            ship.key,
            tuple_frame(ship.header, &ship.state, &ship.reply),
        );
    }
}
