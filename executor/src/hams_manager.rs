//! HAMS on the graph process: the zenoh transport of stateful nodes' batches, and the manager
//! that assigns primary and backup roles, detects failures and drives recovery (note §2.7–2.9).
//!
//! **Detection.** A primary is suspected when one of its batches gets no answer within the
//! node's `detect_ms`, or is refused for a stale epoch, and declared dead at once when its
//! liveliness token disappears (a killed process's link drops). A dead backup turns its primary
//! *solo*. Suspicions of an epoch already replaced are ignored (de-duplication).
//!
//! **Recovery of a failed primary F** (one at a time, on the manager's thread):
//! 1. pause F's proxy; promote F's backup at epoch + 1 (it drops unapplied states and answers
//!    with its applied version, the *cut*);
//! 2. roll F's proxy back to the cut: every request whose rows F ran above it runs again from the
//!    ingress under its next attempt id, which makes every row of its old attempt stale (dropped
//!    wherever met, its held reply discarded);
//! 3. fixpoint ([`weir_hams::rollback::rollback_set`]): every other replicated node sent a batch
//!    depending on a version above a cut is rolled back by promoting *its* backup (R8), or, when
//!    that backup is gone too (the note's Fig. 6 case), by rolling its primary back to the state
//!    it retained at its durable version and running it solo at the next epoch (R7);
//! 4. resume every paused proxy on its new primary: batches at or below a cut are resent and
//!    answered from the outputs the promoted backup kept;
//! 5. off the critical path: each rolled-back node's old primary (alive and well) becomes its new
//!    backup by a whole-state transfer; F runs solo until a member of F comes (back) alive, which
//!    is made its backup (re-protection, R14). F's old primary is never reused while it holds its
//!    liveliness: a stalled process (SIGSTOP) would only block the recovery.
//!
//! The manager is a single thread of the graph process here; its state (roles, epochs) sits
//! behind the [`RoleStore`] trait so that a replicated log (an existing Raft library) can back it
//! later, as the paper's SMR-replicated manager does (R19 is waived with a single manager).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use tracing::{debug, error, info, warn};
use weir_connectors::echo::quote;
use weir_engine::batch::TensorColumn;
use weir_engine::request::original_id;
use weir_engine::runtime::GraphRuntime;
use weir_engine::spec::ReplicationMode;
use weir_engine::validate::ReplicaTarget;
use weir_engine::wire::{decode_columns, encode_columns};
use weir_hams::journal::{Event as JournalEvent, Journal};
use weir_hams::protocol::{
    decode_frame, durable_key_all, encode_frame, member_key, Assign, AssignReply, Durable, Mode,
    Refusal, RefusalReply, Role, RunHeader, RunReply,
};
use weir_hams::rollback::rollback_set;
use weir_hams::{Epoch, NodeId, Seq};
use weir_operators::stateful::{
    RunDone, RunFailure, StatefulNodeHandle, StatefulTransport, Suspicion,
};
use zenoh::pubsub::Subscriber;
use zenoh::query::{ConsolidationMode, QueryTarget, Reply};
use zenoh::sample::SampleKind;
use zenoh::session::ZenohId;
use zenoh::{Session, Wait};

use crate::client::{columns_in_order, AnswerSlot, Completions};

/// How long a role assignment may take.
const ASSIGN_TIMEOUT: Duration = Duration::from_secs(3);

/// The zenoh session of each stateful member (by executor key prefix), learnt from the reply to
/// its latest role assignment; a batch's reply is taken only from its primary's session. Shared
/// by the manager, which fills it, and the transport, which reads it.
#[derive(Debug, Clone, Default)]
pub struct MemberSessions(Arc<Mutex<HashMap<String, ZenohId>>>);

impl MemberSessions {
    fn set(&self, prefix: &str, zid: ZenohId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(prefix.to_string(), zid);
    }

    fn get(&self, prefix: &str) -> Option<ZenohId> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prefix)
            .copied()
    }
}

/// Runs stateful nodes' batches on their primaries over zenoh.
pub struct ZenohStatefulTransport {
    session: Session,
    completions: Completions,
    members: MemberSessions,
}

impl ZenohStatefulTransport {
    pub(crate) fn new(session: Session, completions: Completions, members: MemberSessions) -> Self {
        ZenohStatefulTransport {
            session,
            completions,
            members,
        }
    }
}

/// The take-once end of one batch's query.
struct RunEnd {
    slot: AnswerSlot<Result<Vec<TensorColumn>, RunFailure>>,
    outputs: Vec<String>,
    /// Rows sent: the reply must carry one per row.
    rows: usize,
    /// The primary's session (from its assignment reply); replies from any other are dropped.
    primary: Option<ZenohId>,
}

impl RunEnd {
    fn finish(&self, outcome: Result<Vec<TensorColumn>, RunFailure>) {
        self.slot.finish(outcome);
    }

    fn on_reply(&self, reply: Reply) {
        let replier = reply.replier_id().map(|id| id.zid());
        // zenoh's own end of the query (its timeout) names no replier: no answer, as below.
        if replier.is_some() && replier != self.primary {
            debug!(replier = ?replier, "A batch reply from a session that is not the primary's, dropped.");
            return;
        }
        let outcome = match reply.result() {
            Ok(sample) => self.decode(&sample.payload().to_bytes()),
            Err(err) => {
                let body = err.payload().to_bytes();
                match serde_json::from_slice::<RefusalReply>(&body) {
                    Ok(r) if r.refusal == Refusal::Fenced => {
                        Err(RunFailure::Lost(quote(&r.message).into_owned()))
                    }
                    Ok(r) => Err(RunFailure::Failed(quote(&r.message).into_owned())),
                    Err(_) => Err(RunFailure::Lost(
                        quote(&String::from_utf8_lossy(&body)).into_owned(),
                    )),
                }
            }
        };
        self.finish(outcome);
    }

    fn decode(&self, bytes: &[u8]) -> Result<Vec<TensorColumn>, RunFailure> {
        let bad = |m: String| RunFailure::Failed(format!("the primary replied {m}"));
        let (_reply, body): (RunReply, &[u8]) =
            decode_frame(bytes).map_err(|e| bad(e.to_string()))?;
        let columns = decode_columns(body).map_err(|e| bad(e.to_string()))?;
        let columns = columns_in_order(columns, &self.outputs)
            .map_err(|name| bad(format!("without output `{name}`")))?;
        match columns.iter().find(|c| c.len() != self.rows) {
            Some(c) => Err(bad(format!("{} rows for the {} sent", c.len(), self.rows))),
            None => Ok(columns),
        }
    }
}

impl Drop for RunEnd {
    fn drop(&mut self) {
        self.finish(Err(RunFailure::Lost("no answer from the primary".into())));
    }
}

impl StatefulTransport for ZenohStatefulTransport {
    fn run(
        &self,
        node: &StatefulNodeHandle,
        primary: &str,
        header: RunHeader,
        inputs: Vec<TensorColumn>,
        done: RunDone,
    ) {
        let columns =
            match encode_columns(node.inputs.iter().map(String::as_str).zip(inputs.iter())) {
                Ok(c) => c,
                Err(e) => {
                    done(Err(RunFailure::Failed(format!("encoding the inputs: {e}"))));
                    return;
                }
            };
        let body = encode_frame(&header, &columns);
        let end = Arc::new(RunEnd {
            slot: AnswerSlot::new(done, self.completions.clone()),
            outputs: node.outputs.clone(),
            rows: inputs.first().map_or(0, TensorColumn::len),
            primary: self.members.get(primary),
        });
        let on_reply = Arc::clone(&end);
        let sent = self
            .session
            .get(member_key(primary, &node.node, "run"))
            .payload(body)
            .target(QueryTarget::All)
            .consolidation(ConsolidationMode::None)
            .timeout(node.spec.detect)
            .callback(move |reply| on_reply.on_reply(reply))
            .wait();
        drop(end);
        if let Err(e) = sent {
            warn!(node = %node.node, error = %e, "Batch not sent.");
        }
    }
}

/// One completed failover, for logs, metrics and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// The node whose primary failed.
    pub node: String,
    /// What gave it away.
    pub reason: String,
    /// When the manager learnt of it.
    pub detected_at: Instant,
    /// Time from detection to every proxy resumed (promotion, rollback, retries).
    pub protocol: Duration,
    /// Every node rolled back, with its cut.
    pub rolled_back: Vec<(String, Seq)>,
    /// Requests run again.
    pub retried: usize,
    /// Under checkpoints: batches replayed from the checkpoint.
    pub replayed: u64,
}

/// One stateful node's roles: what every replica of a replicated manager must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// The epoch of the current primary.
    pub epoch: Epoch,
    /// The primary's key prefix.
    pub primary: Option<String>,
    /// The backup's key prefix (none: the primary runs solo).
    pub backup: Option<String>,
    /// Every executor that may serve the node, in the graph's order.
    pub members: Vec<String>,
}

/// Where the manager keeps each node's [`Roles`]. Every change goes through [`RoleStore::set`]
/// and is made before the recovery step that depends on it, so a store that writes through a
/// replicated log (an existing Raft library: the paper's SMR manager, note §1.3) lets a new
/// manager leader resume from the last committed roles. [`InMemoryRoles`] is the single-process
/// store this issue ships.
pub trait RoleStore: Send + Sync {
    /// The roles of `node`.
    fn get(&self, node: NodeId) -> Option<Roles>;
    /// Records the roles of `node`.
    fn set(&self, node: NodeId, roles: Roles);
}

/// The single-process [`RoleStore`].
#[derive(Debug, Default)]
pub struct InMemoryRoles(Mutex<HashMap<NodeId, Roles>>);

impl RoleStore for InMemoryRoles {
    fn get(&self, node: NodeId) -> Option<Roles> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node)
            .cloned()
    }

    fn set(&self, node: NodeId, roles: Roles) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, roles);
    }
}

enum Event {
    Suspect(Suspicion),
    Alive(String),
    Gone(String),
    Durable(Durable),
    Stop,
}

struct State {
    session: Session,
    graph: String,
    nodes: Vec<Arc<StatefulNodeHandle>>,
    roles: Box<dyn RoleStore>,
    alive: Mutex<HashMap<String, bool>>,
    /// Each member's session, as its assignment replies name it.
    members: MemberSessions,
    runtime: OnceLock<Arc<GraphRuntime>>,
    recoveries: Mutex<Vec<Recovery>>,
    /// Where released replies are journaled (`WEIR_HAMS_JOURNAL`, or [`HamsManager::journal_to`]).
    journal: Arc<Mutex<Journal>>,
}

/// The HAMS manager of one graph process.
pub struct HamsManager {
    state: Arc<State>,
    events: Sender<Event>,
    thread: Option<JoinHandle<()>>,
    subscribers: Vec<Subscriber<()>>,
}

impl std::fmt::Debug for HamsManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HamsManager")
            .field("graph", &self.state.graph)
            .finish()
    }
}

/// Errors starting the manager.
#[derive(Debug, thiserror::Error)]
#[error("HAMS: {0}")]
pub struct ManagerError(pub String);

fn mode_of(h: &StatefulNodeHandle) -> Mode {
    match h.spec.mode {
        ReplicationMode::None => Mode::None,
        ReplicationMode::Nspb => Mode::Nspb,
        ReplicationMode::Remus => Mode::Remus,
        ReplicationMode::Checkpoint => Mode::Checkpoint,
    }
}

impl HamsManager {
    /// Takes charge of `nodes` (the stateful nodes that run on executors) of graph `graph`:
    /// waits up to `wait_alive` for their members, assigns the first member of each the primary
    /// role and the second the backup role, and starts watching.
    ///
    /// # Errors
    /// When a node's first member does not come alive or refuses its role.
    pub fn start(
        session: &Session,
        graph: &str,
        nodes: Vec<Arc<StatefulNodeHandle>>,
        members: MemberSessions,
        wait_alive: Duration,
    ) -> Result<HamsManager, ManagerError> {
        let (tx, rx) = unbounded::<Event>();
        let state = Arc::new(State {
            session: session.clone(),
            graph: graph.to_string(),
            nodes,
            roles: Box::new(InMemoryRoles::default()),
            alive: Mutex::new(HashMap::new()),
            members,
            runtime: OnceLock::new(),
            recoveries: Mutex::new(Vec::new()),
            journal: Arc::new(Mutex::new(Journal::from_env(&format!(
                "released-{graph}-{}",
                std::process::id()
            )))),
        });
        let mut subscribers = Vec::new();
        let zerr = |e: zenoh::Error| ManagerError(format!("zenoh: {e}"));
        let events = tx.clone();
        subscribers.push(
            session
                .declare_subscriber(durable_key_all(graph))
                .callback(move |sample| {
                    if let Ok(d) = serde_json::from_slice::<Durable>(&sample.payload().to_bytes()) {
                        let _ = events.send(Event::Durable(d));
                    }
                })
                .wait()
                .map_err(zerr)?,
        );
        let mut members: Vec<String> = Vec::new();
        for h in &state.nodes {
            for m in &h.members {
                if let ReplicaTarget::Remote(e) = m {
                    if !members.contains(&e.key_prefix) {
                        members.push(e.key_prefix.clone());
                    }
                }
            }
        }
        for prefix in &members {
            let events = tx.clone();
            let p = prefix.clone();
            let alive_map = Arc::clone(&state);
            subscribers.push(
                session
                    .liveliness()
                    .declare_subscriber(format!("{prefix}/alive"))
                    .history(true)
                    .callback(move |sample| {
                        let up = sample.kind() == SampleKind::Put;
                        alive_map
                            .alive
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(p.clone(), up);
                        let _ = events.send(if up {
                            Event::Alive(p.clone())
                        } else {
                            Event::Gone(p.clone())
                        });
                    })
                    .wait()
                    .map_err(zerr)?,
            );
        }
        for h in &state.nodes {
            let events = tx.clone();
            h.set_suspects(Box::new(move |s| {
                let _ = events.send(Event::Suspect(s));
            }));
            state.initial_roles(h, wait_alive)?;
        }
        let s = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name(format!("hams-manager-{graph}"))
            .spawn(move || s.run(&rx))
            .map_err(|e| ManagerError(format!("spawning the manager: {e}")))?;
        Ok(HamsManager {
            state,
            events: tx,
            thread: Some(thread),
            subscribers,
        })
    }

    /// Connects the manager to the running graph: stale-row checks, retries, the release gate's
    /// announcements, and the journal of released replies (which also frees the proxies' records).
    pub fn attach(&self, runtime: Arc<GraphRuntime>) {
        for h in &self.state.nodes {
            h.set_replies(Arc::clone(runtime.replies()));
        }
        let nodes = self.state.nodes.clone();
        let journal = Arc::clone(&self.state.journal);
        runtime
            .replies()
            .set_release_hook(Box::new(move |response| {
                let original = original_id(response.request_id);
                let mut passed = Vec::new();
                for h in &nodes {
                    if let Some((seq, hash)) = h.on_release(original) {
                        passed.push((h.node_id, seq, hash));
                    }
                }
                let journal = journal.lock().unwrap_or_else(|p| p.into_inner());
                if journal.enabled() {
                    journal.record(&JournalEvent::Released {
                        request_id: original,
                        passed,
                    });
                }
            }));
        let _ = self.state.runtime.set(runtime);
    }

    /// Journals released replies into `<dir>/released-<graph>.jsonl` from now on.
    pub fn journal_to(&self, dir: &std::path::Path) {
        *self.state.journal.lock().unwrap_or_else(|p| p.into_inner()) =
            Journal::at(dir, &format!("released-{}", self.state.graph));
    }

    /// Every failover so far.
    pub fn recoveries(&self) -> Vec<Recovery> {
        self.state
            .recoveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Each node's (name, epoch, primary, backup) now.
    pub fn roles(&self) -> Vec<(String, Epoch, Option<String>, Option<String>)> {
        let roles = &self.state.roles;
        self.state
            .nodes
            .iter()
            .filter_map(|h| {
                roles
                    .get(h.node_id)
                    .map(|r| (h.node.clone(), r.epoch, r.primary.clone(), r.backup.clone()))
            })
            .collect()
    }
}

impl Drop for HamsManager {
    fn drop(&mut self) {
        for s in self.subscribers.drain(..) {
            let _ = s.undeclare().wait();
        }
        let _ = self.events.send(Event::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl State {
    fn handle(&self, node: NodeId) -> Option<&Arc<StatefulNodeHandle>> {
        self.nodes.iter().find(|h| h.node_id == node)
    }

    fn is_alive(&self, prefix: &str) -> bool {
        self.alive
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prefix)
            .copied()
            .unwrap_or(false)
    }

    fn assign(
        &self,
        h: &StatefulNodeHandle,
        prefix: &str,
        epoch: Epoch,
        role: Role,
    ) -> Result<AssignReply, String> {
        self.send_assignment(h, prefix, epoch, role, None)
    }

    /// Sends member `prefix` of node `h` its role at `epoch` (with `rollback_to`, a primary's
    /// rollback to its retained state) and waits for its answer.
    fn send_assignment(
        &self,
        h: &StatefulNodeHandle,
        prefix: &str,
        epoch: Epoch,
        role: Role,
        rollback_to: Option<Seq>,
    ) -> Result<AssignReply, String> {
        let mut a = Assign {
            graph: self.graph.clone(),
            node_id: h.node_id,
            epoch,
            role,
            mode: mode_of(h),
            state: h.spec.state.clone(),
            inputs: h.inputs.clone(),
            outputs: h.outputs.clone(),
            checkpoint_every: h.spec.checkpoint_every,
            rollback_to,
            signature: None,
        };
        let key = member_key(prefix, &h.node, "assign");
        if let Some(secret) = weir_hams::control_auth::key() {
            a.signature = Some(weir_hams::control_auth::sign(secret, &key, &a));
        }
        let body = serde_json::to_vec(&a).map_err(|e| e.to_string())?;
        let replies = self
            .session
            .get(key)
            .payload(body)
            .target(QueryTarget::BestMatching)
            .timeout(ASSIGN_TIMEOUT)
            .wait()
            .map_err(|e| e.to_string())?;
        match replies.recv() {
            Ok(reply) => match reply.result() {
                Ok(sample) => {
                    let taken = serde_json::from_slice::<AssignReply>(&sample.payload().to_bytes())
                        .map_err(|e| format!("bad assignment reply: {e}"))?;
                    if let Some(id) = reply.replier_id() {
                        self.members.set(prefix, id.zid());
                    }
                    Ok(taken)
                }
                Err(err) => Err(String::from_utf8_lossy(&err.payload().to_bytes()).into_owned()),
            },
            Err(_) => Err(format!("`{prefix}` did not answer its role assignment")),
        }
    }

    fn initial_roles(
        &self,
        h: &Arc<StatefulNodeHandle>,
        wait_alive: Duration,
    ) -> Result<(), ManagerError> {
        let members: Vec<String> = h
            .members
            .iter()
            .filter_map(|m| match m {
                ReplicaTarget::Remote(e) => Some(e.key_prefix.clone()),
                ReplicaTarget::Local => None,
            })
            .collect();
        let Some(primary) = members.first().cloned() else {
            return Err(ManagerError(format!("node `{}` has no executor", h.node)));
        };
        let deadline = Instant::now() + wait_alive;
        while !members.iter().all(|m| self.is_alive(m)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !self.is_alive(&primary) {
            return Err(ManagerError(format!(
                "node `{}`: executor `{primary}` is not alive",
                h.node
            )));
        }
        let epoch = 1;
        let backup = members
            .get(1)
            .filter(|b| h.spec.has_backup() && self.is_alive(b))
            .cloned();
        if let Some(b) = &backup {
            self.assign(
                h,
                b,
                epoch,
                Role::Backup {
                    primary: primary.clone(),
                },
            )
            .map_err(|e| ManagerError(format!("node `{}`: backup `{b}`: {e}", h.node)))?;
        } else if h.spec.has_backup() {
            warn!(node = %h.node, "The backup is not alive: the primary starts solo.");
        }
        self.assign(
            h,
            &primary,
            epoch,
            Role::Primary {
                backup: backup.clone(),
            },
        )
        .map_err(|e| ManagerError(format!("node `{}`: primary `{primary}`: {e}", h.node)))?;
        self.roles.set(
            h.node_id,
            Roles {
                epoch,
                primary: Some(primary.clone()),
                backup,
                members,
            },
        );
        h.assign_primary(epoch, primary);
        Ok(())
    }

    fn roles_of(&self, node: NodeId) -> Option<Roles> {
        self.roles.get(node)
    }

    fn set_roles(&self, node: NodeId, roles: Roles) {
        self.roles.set(node, roles);
    }

    fn run(&self, rx: &Receiver<Event>) {
        while let Ok(event) = rx.recv() {
            match event {
                Event::Stop => return,
                Event::Durable(d) => {
                    if let Some(h) = self.handle(d.node) {
                        h.on_durable(d.seq);
                    }
                    if let Some(rt) = self.runtime.get() {
                        rt.announce_durable(d);
                    }
                }
                Event::Suspect(s) => {
                    let current = self.roles_of(s.node).map(|r| r.epoch);
                    if current == Some(s.epoch) {
                        self.failover(s.node, &format!("suspected: {}", s.why));
                    }
                }
                Event::Gone(prefix) => self.on_gone(&prefix),
                Event::Alive(prefix) => self.on_alive(&prefix),
            }
        }
    }

    fn on_gone(&self, prefix: &str) {
        for h in self.nodes.clone() {
            let Some(r) = self.roles_of(h.node_id) else {
                continue;
            };
            if r.primary.as_deref() == Some(prefix) {
                self.failover(h.node_id, &format!("`{prefix}` lost its liveliness"));
            } else if r.backup.as_deref() == Some(prefix) {
                // The primary goes on solo until a new backup is installed.
                let primary = r.primary.clone().unwrap_or_default();
                match self.assign(&h, &primary, r.epoch, Role::Primary { backup: None }) {
                    Ok(_) => {
                        info!(node = %h.node, backup = %prefix, "Backup lost: primary runs solo.");
                        self.set_roles(h.node_id, Roles { backup: None, ..r });
                    }
                    Err(e) => warn!(node = %h.node, error = %e, "Could not make the primary solo."),
                }
            }
        }
    }

    fn on_alive(&self, prefix: &str) {
        for h in self.nodes.clone() {
            let Some(r) = self.roles_of(h.node_id) else {
                continue;
            };
            let is_member = r.members.iter().any(|m| m == prefix);
            let has_role =
                r.primary.as_deref() == Some(prefix) || r.backup.as_deref() == Some(prefix);
            if !is_member || has_role || r.backup.is_some() || !h.spec.has_backup() {
                continue;
            }
            let Some(primary) = r.primary.clone() else {
                continue;
            };
            self.protect(&h, &r, &primary, prefix);
        }
    }

    /// Makes `backup` the backup of `primary` (the primary sends it its whole state).
    fn protect(&self, h: &StatefulNodeHandle, r: &Roles, primary: &str, backup: &str) {
        let role = Role::Backup {
            primary: primary.to_string(),
        };
        if let Err(e) = self.assign(h, backup, r.epoch, role) {
            warn!(node = %h.node, %backup, error = %e, "Re-protection: the new backup refused.");
            return;
        }
        let role = Role::Primary {
            backup: Some(backup.to_string()),
        };
        match self.assign(h, primary, r.epoch, role) {
            Ok(_) => {
                info!(node = %h.node, %primary, %backup, epoch = r.epoch, "Re-protected: a new backup took the whole state.");
                self.set_roles(
                    h.node_id,
                    Roles {
                        backup: Some(backup.to_string()),
                        ..r.clone()
                    },
                );
            }
            Err(e) => warn!(node = %h.node, error = %e, "Re-protection: the primary refused."),
        }
    }

    /// Promotes node `n`'s backup at the next epoch (it runs solo). Returns the cut, the epoch,
    /// the new primary and the old primary, or `None` when no backup can take over.
    fn promote(&self, h: &StatefulNodeHandle) -> Option<(Seq, Epoch, String, Option<String>)> {
        let r = self.roles_of(h.node_id)?;
        let backup = r.backup.clone().filter(|b| self.is_alive(b))?;
        h.pause();
        let epoch = r.epoch + 1;
        let cut = match self.assign(h, &backup, epoch, Role::Primary { backup: None }) {
            Ok(reply) => reply.applied,
            Err(e) => {
                error!(node = %h.node, %backup, error = %e, "The backup refused promotion.");
                return None;
            }
        };
        let roles = Roles {
            epoch,
            primary: Some(backup.clone()),
            backup: None,
            members: r.members.clone(),
        };
        self.set_roles(h.node_id, roles);
        Some((cut, epoch, backup, r.primary.clone()))
    }

    /// R7: node `h` consumed speculative input that is being rolled back, and has no live backup
    /// to promote (it died with the upstream primary: the note's Fig. 6 case). Its primary goes
    /// back to the state it retained at its durable version (the primary buffer rule) and runs
    /// on solo at the next epoch. Returns the version it went back to, the epoch and the primary.
    fn roll_back_primary(&self, h: &StatefulNodeHandle) -> Option<(Seq, Epoch, String)> {
        let r = self.roles_of(h.node_id)?;
        let primary = r.primary.clone().filter(|p| self.is_alive(p))?;
        h.pause();
        let epoch = r.epoch + 1;
        let role = Role::Primary { backup: None };
        let to = h.status().durable;
        let cut = match self.send_assignment(h, &primary, epoch, role, Some(to)) {
            Ok(reply) => reply.applied,
            Err(e) => {
                error!(node = %h.node, %primary, error = %e, "The primary could not roll back.");
                return None;
            }
        };
        info!(node = %h.node, %primary, to = cut, epoch, "No backup to promote: the primary rolled back to its retained state.");
        self.set_roles(
            h.node_id,
            Roles {
                epoch,
                primary: Some(primary.clone()),
                backup: None,
                members: r.members,
            },
        );
        Some((cut, epoch, primary))
    }

    fn record(&self, recovery: Recovery) {
        info!(node = %recovery.node, reason = %recovery.reason, protocol_ms = recovery.protocol.as_secs_f64() * 1e3, rolled_back = ?recovery.rolled_back, retried = recovery.retried, "Failover done.");
        self.recoveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(recovery);
    }

    fn failover(&self, failed: NodeId, reason: &str) {
        let Some(h) = self.handle(failed).cloned() else {
            return;
        };
        let detected_at = Instant::now();
        let roles = self.roles_of(failed);
        let no_backup = roles
            .as_ref()
            .is_none_or(|r| r.backup.as_ref().is_none_or(|b| !self.is_alive(b)));
        let primary_alive = roles
            .as_ref()
            .and_then(|r| r.primary.as_ref())
            .is_some_and(|p| self.is_alive(p));
        if no_backup && primary_alive {
            // Nothing to promote, and the primary is there: it is slow, not gone; its proxy
            // sends the lost batches again.
            debug!(node = %h.node, %reason, "Primary suspected without a backup to promote; batches are resent.");
            return;
        }
        let Some((cut, epoch, primary, _failed_primary)) = self.promote(&h) else {
            error!(node = %h.node, %reason, "Primary lost and no live backup: the node's requests wait for an executor.");
            return;
        };
        if !h.replicated() {
            // Checkpoints: the promoted backup holds the last checkpoint; the proxy replays every
            // batch since then (replies already given stand, whatever the replay computes).
            h.rollback_to_checkpoint(cut, epoch);
            h.assign_primary(epoch, primary);
            self.record(Recovery {
                node: h.node.clone(),
                reason: reason.to_string(),
                detected_at,
                protocol: detected_at.elapsed(),
                rolled_back: vec![(h.node.clone(), cut)],
                retried: 0,
                replayed: h.status().last_seq.saturating_sub(cut),
            });
            return;
        }
        let mut resumed: BTreeMap<NodeId, (Epoch, String)> = BTreeMap::new();
        resumed.insert(failed, (epoch, primary));
        let mut retried = 0usize;
        let runtime = self.runtime.get().cloned();
        let mut retry = |ids: Vec<u64>| {
            if let Some(rt) = &runtime {
                for id in ids {
                    if rt.retry(id) {
                        retried += 1;
                    }
                }
            }
        };
        retry(h.rollback(cut, epoch));
        let candidates: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.replicated() && n.node_id != failed)
            .map(|n| n.node_id)
            .collect();
        let mut later: Vec<(NodeId, Seq, Epoch)> = Vec::new();
        // Rolled-back nodes' old primaries are healthy: they become the new backups (R8), once
        // every proxy runs again (a whole-state transfer is off the recovery's critical path).
        let mut demoted: Vec<(NodeId, String)> = Vec::new();
        let cuts = rollback_set(
            failed,
            cut,
            &candidates,
            |n| self.handle(n).map(|q| q.sent_deps()).unwrap_or_default(),
            |n| {
                let Some(q) = self.handle(n) else { return 0 };
                // R8: the backup is promoted when it lives; R7: otherwise the primary rolls back.
                if let Some((cut, epoch, primary, old)) = self.promote(q) {
                    later.push((n, cut, epoch));
                    resumed.insert(n, (epoch, primary));
                    if let Some(old) = old {
                        demoted.push((n, old));
                    }
                    return cut;
                }
                match self.roll_back_primary(q) {
                    Some((cut, epoch, primary)) => {
                        later.push((n, cut, epoch));
                        resumed.insert(n, (epoch, primary));
                        cut
                    }
                    None => {
                        error!(node = %q.node, "A downstream node consumed speculative output but has neither a backup nor a primary to roll back.");
                        Seq::MAX
                    }
                }
            },
        );
        for (n, cut, epoch) in later {
            if let Some(q) = self.handle(n) {
                retry(q.rollback(cut, epoch));
            }
        }
        for (n, (epoch, primary)) in &resumed {
            if let Some(q) = self.handle(*n) {
                q.assign_primary(*epoch, primary.clone());
            }
        }
        let recovery = Recovery {
            node: h.node.clone(),
            reason: reason.to_string(),
            detected_at,
            protocol: detected_at.elapsed(),
            rolled_back: cuts
                .iter()
                .filter_map(|(n, c)| self.handle(*n).map(|q| (q.node.clone(), *c)))
                .collect(),
            retried,
            replayed: 0,
        };
        self.record(recovery);
        for (n, old) in demoted {
            let (Some(q), Some(r)) = (self.handle(n).cloned(), self.roles_of(n)) else {
                continue;
            };
            if let (Some(primary), true) = (r.primary.clone(), self.is_alive(&old)) {
                self.protect(&q, &r, &primary, &old);
            }
        }
    }
}
