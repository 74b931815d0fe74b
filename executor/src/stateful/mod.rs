//! A stateful model on an executor process, with what the paper calls its proxy's state manager
//! ("HAMS: High Availability for Distributed Machine Learning Service Graphs", §III-A): the member
//! of a stateful node's replica pair, primary or backup as the graph's manager assigns it.
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
//! update stage) once fewer than [`MAX_UNACKED`] versions wait for the backup (HAMS §III-B,
//! §IV-C). The primary keeps every version its backup has not applied, so that it can roll back
//! when its input is rolled back and its backup is gone too (HAMS §IV-C); [`MAX_UNACKED`] bounds
//! them. Under Remus it answers only after the backup applied the version. A primary without a
//! backup runs *solo*: its own versions count as durable once their dependencies are, and it
//! announces them itself (the paper leaves open how a node goes on without a backup; waiting
//! for one would stall every reply that depends on the node). A promoted backup drops the tuples
//! it received and did not apply (no later node was told of them) and announces its applied
//! version again, so a downstream backup waiting for it from the old backup hears it from the
//! new primary. Every call and message carries an epoch; stale ones are refused or dropped
//! (fencing).
//!
//! A per-sequence node's state is a table of sequences (`weir_operators::stateful::sequences`):
//! each batch still makes one version, its rows naming their sequences in the run header, and
//! the primary ships only the batch's delta (a new backup gets the whole table), which the backup
//! applies onto the version before it, strictly in order as Algorithm 2 already requires.
//!
//! This module starts a member and holds what its threads share; `control.rs` is the control
//! thread, `primary.rs` the run and shipper threads, `repair.rs` what repairs a lost protocol
//! message (a primary re-ships to a backup that acknowledges nothing; every member announces its
//! durable version again now and then).

mod control;
mod layout;
mod primary;
mod repair;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{unbounded, Sender};
use tracing::{debug, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::onnx::{read_metadata, ElementType, ModelMetadata};
use weir_engine::tensor::Dim;
use weir_engine::wire::decode_columns;
use weir_hams::durability::{ApplyQueue, DurableView};
use weir_hams::journal::Journal;
use weir_hams::protocol::{
    decode_frame, durable_key, encode_frame, member_key, Applied, Assign, Durable, Refusal,
    RefusalReply, Role, RunHeader, StateHeader,
};
use weir_hams::{Epoch, Seq};
use weir_operators::model::OrtRuntime;
use weir_operators::stateful::state::{NodeState, StateUpdate};
use weir_operators::stateful::step::{fixed_batch_axis, StatefulModel};
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
    /// reply): the regime of the paper's GPU models (HAMS §VI-A), whose batches take tens to
    /// hundreds of ms, without spending the machine's cores on it.
    pub compute: Duration,
    /// Chaos for tests: send every protocol message (state tuple, acknowledgement, durability
    /// announcement) twice; receivers must act on each once.
    pub duplicate_messages: bool,
    /// Chaos for tests: swap every other pair of state tuples on the way to the backup; the
    /// backup must apply them in order all the same.
    pub reorder_messages: bool,
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
    current: Arc<NodeState>,
    view: DurableView,
    /// Backup: received tuples (payload = the update); solo primary: own versions (`None`).
    apply: ApplyQueue<Option<StateUpdate>>,
    /// Primary: the highest version the backup applied, and the versions shipped since.
    acked: Seq,
    shipped: Seq,
    replies: BTreeMap<Seq, Vec<u8>>,
    /// Primary: the primary buffer (HAMS §IV-C). The state at the durable floor (the version
    /// its backup applied, or its solo rule made durable) and every version made since, with its
    /// state tuple's header (its dependencies). From it the primary rolls back when its backup is
    /// gone and its input is rolled back, goes solo without losing track of undurable versions,
    /// and hands a new backup its latest version. At most [`MAX_UNACKED`] versions above the
    /// floor with a backup; without one, as many as wait for upstream durability.
    retained: BTreeMap<Seq, (StateHeader, Arc<NodeState>)>,
    /// Backup: when each pending state tuple arrived (journal only).
    received_at: BTreeMap<Seq, u64>,
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

    /// The durable floor of the primary buffer.
    fn floor(&self) -> Seq {
        self.retained
            .first_key_value()
            .map_or(self.version, |(&s, _)| s)
    }

    /// Version `seq` is durable: older retained versions are no longer needed.
    fn durable_up_to(&mut self, seq: Seq) {
        if self.retained.contains_key(&seq) {
            self.retained = self.retained.split_off(&seq);
        }
    }

    /// Puts the version `tuple` made (`state`) into the primary buffer, if this member is still
    /// the primary of the tuple's epoch; returns whether it is.
    fn retain_made(&mut self, tuple: &StateHeader, state: &Arc<NodeState>) -> bool {
        let current = self.epoch() == tuple.epoch && self.is_primary();
        if current {
            self.retained
                .insert(tuple.seq, (tuple.clone(), Arc::clone(state)));
        }
        current
    }

    /// Starts the primary buffer over with the current state as its floor.
    fn retain_only_current(&mut self) {
        let header = StateHeader {
            epoch: self.epoch(),
            seq: self.version,
            deps: Vec::new(),
            request_ids: Vec::new(),
            row_hashes: Vec::new(),
            full: true,
            state_bytes: 0,
        };
        self.retained = BTreeMap::from([(self.version, (header, Arc::clone(&self.current)))]);
    }

    fn is_primary(&self) -> bool {
        matches!(
            self.assign.as_ref().map(|a| &a.role),
            Some(Role::Primary { .. })
        )
    }
}

enum Control {
    Assign(Box<Assign>, Query),
    /// A state tuple: header, state bytes (decoded by the assignment's layout), the batch's
    /// reply frame, when it arrived (µs).
    State(StateHeader, Vec<u8>, Vec<u8>, u64),
    Applied(Applied),
    Durable(Durable),
    /// The solo primary produced a version (it becomes durable once its dependencies are).
    SoloProduced(StateHeader),
    Stop,
}

struct Ship {
    key: String,
    header: StateHeader,
    state: StateUpdate,
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
    /// The model file's declared inputs and outputs: what every assignment is checked against.
    meta: ModelMetadata,
    /// The layout the loaded model was shaped by (set with `runner`).
    layout: Mutex<Option<layout::Layout>>,
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
        let meta = read_metadata(&path).map_err(|e| bad(e.to_string()))?;
        let (control_tx, control_rx) = unbounded::<Control>();
        let (run_tx, run_rx) = unbounded::<RunCall>();
        let (ship_tx, ship_rx) = unbounded::<Ship>();
        let shared: Shared = Arc::new((
            Mutex::new(Inner {
                assign: None,
                version: 0,
                current: Arc::new(NodeState::Whole(Vec::new())),
                view: DurableView::default(),
                apply: ApplyQueue::new(0, 0),
                acked: 0,
                shipped: 0,
                replies: BTreeMap::new(),
                retained: BTreeMap::new(),
                received_at: BTreeMap::new(),
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
            meta,
            layout: Mutex::new(None),
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
        let assign_key = member_key(prefix, model, "assign");
        if weir_hams::control_auth::key().is_none() {
            warn!(%model, "No control key (--control-key-file): HAMS role assignments are not authenticated; any peer that reaches this executor can assign roles.");
        }
        let own_key = assign_key.clone();
        queryables.push(
            session
                .declare_queryable(assign_key)
                .callback(move |query| on_assign(&tx, &own_key, query))
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
                        Ok((h, payload)) if h.state_bytes <= payload.len() => {
                            let (state, reply) = payload.split_at(h.state_bytes);
                            let _ = tx.send(Control::State(
                                h,
                                state.to_vec(),
                                reply.to_vec(),
                                weir_hams::journal::now_us(),
                            ));
                        }
                        Ok(_) => warn!("A state tuple shorter than its header says; dropped."),
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
        let ships = ship_tx.clone();
        threads.push(spawn(format!("hams-control-{model}"), move || {
            control::control_loop(&c, &control_rx, ships)
        })?);
        let c = Arc::clone(&ctx);
        let ships = ship_tx.clone();
        threads.push(spawn(format!("hams-run-{model}"), move || {
            primary::run_loop(&c, &run_rx, &ships)
        })?);
        let c = Arc::clone(&ctx);
        threads.push(spawn(format!("hams-ship-{model}"), move || {
            primary::ship_loop(&c, &ship_rx)
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

fn on_assign(tx: &Sender<Control>, own_key: &str, query: Query) {
    let parsed = query
        .payload()
        .map(|p| serde_json::from_slice::<Assign>(&p.to_bytes()));
    match parsed {
        Some(Ok(a)) => {
            if let Some(secret) = weir_hams::control_auth::key() {
                if !weir_hams::control_auth::verify(secret, own_key, &a) {
                    warn!(key = %own_key, epoch = a.epoch, signed = a.signature.is_some(), "Assignment refused: no valid signature under the control key.");
                    refuse(
                        &query,
                        Refusal::Unauthenticated,
                        "the assignment is not signed with this executor's control key".into(),
                    );
                    return;
                }
            }
            let _ = tx.send(Control::Assign(Box::new(a), query));
        }
        Some(Err(e)) => refuse(&query, Refusal::Invalid, format!("bad assignment: {e}")),
        None => refuse(
            &query,
            Refusal::Invalid,
            "the assignment carries no payload".into(),
        ),
    }
}

/// Checks `a`'s layout against the model file (see [`layout`]).
fn check_layout(ctx: &Context, a: &Assign) -> Result<(), String> {
    layout::check_assign(&ctx.meta, a)
}

/// Loads the model for the layout `a` names (already checked by [`check_layout`]), once; a later
/// assignment must name the layout the model was loaded with.
fn ensure_model(ctx: &Context, a: &Assign) -> Result<(), String> {
    let wanted = layout::Layout::of(a);
    let mut runner = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
    let mut loaded = ctx.layout.lock().unwrap_or_else(|p| p.into_inner());
    if runner.is_some() {
        return match loaded.as_ref() {
            Some(l) if *l == wanted => Ok(()),
            _ => Err("the assignment names another layout than the member's".to_string()),
        };
    }
    let meta = &ctx.meta;
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
    let slots = a.state.clone();
    let mut model = StatefulModel::load(
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
    model = model.with_constants(weir_engine::stateful::constant_tensors(meta, &a.constants)?);
    if let Some(layout) = &a.sequences {
        let one_per_call = fixed_batch_axis(meta, &a.state, layout.batch_axis);
        model = model.per_sequence(layout.clone(), one_per_call);
    }
    let mut inner = lock(&ctx.shared);
    if inner.version == 0 {
        inner.current = Arc::new(model.initial_state());
    }
    drop(inner);
    *runner = Some(model);
    *loaded = Some(wanted);
    Ok(())
}

/// How a protocol message meets a full link queue.
#[derive(Debug, Clone, Copy)]
enum Delivery {
    /// Waits for room: what the shipper thread sends to the one backup, in order (state tuples,
    /// and the whole states a silent backup is re-shipped); its wait is the back-pressure the
    /// update stage's [`MAX_UNACKED`] bounds.
    Wait,
    /// Dropped: everything the control thread sends (acknowledgements, durability announcements
    /// to every subscriber, a new backup's whole state). One subscriber behind a dark link would
    /// otherwise block the thread that makes every other member's versions durable; what is
    /// dropped is repaired (`repair.rs`).
    OrDrop,
}

/// Sends a protocol message (twice under `duplicate_messages`, a test of idempotence).
fn put(ctx: &Context, key: String, body: Vec<u8>, delivery: Delivery) {
    let congestion = match delivery {
        Delivery::Wait => zenoh::qos::CongestionControl::Block,
        Delivery::OrDrop => zenoh::qos::CongestionControl::Drop,
    };
    let copies = if ctx.options.duplicate_messages { 2 } else { 1 };
    for _ in 0..copies {
        let sent = ctx
            .session
            .put(key.clone(), body.clone())
            .congestion_control(congestion)
            .wait();
        if let Err(e) = sent {
            debug!(error = %e, "A HAMS message could not be sent.");
        }
    }
}

fn announce(ctx: &Context, graph: &str, d: Durable) {
    put(
        ctx,
        durable_key(graph, d.node),
        serde_json::to_vec(&d).unwrap_or_default(),
        Delivery::OrDrop,
    );
}

/// The journal's hash of a state version (its whole wire bytes).
fn state_hash(state: &NodeState) -> u64 {
    state.hash()
}

/// A state tuple's wire form: header (with the state's length), state, reply.
fn tuple_frame(mut header: StateHeader, state: &StateUpdate, reply: &[u8]) -> Vec<u8> {
    let mut payload = state.encode();
    header.state_bytes = payload.len();
    payload.extend_from_slice(reply);
    encode_frame(&header, &payload)
}
