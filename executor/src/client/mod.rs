//! The graph side: replicas of model nodes that run on remote executors, reached over one zenoh
//! session per graph process.
//!
//! [`ZenohReplicas`] opens the session (connecting to every executor endpoint the graph names) and
//! makes a [`RemoteReplica`] per (node, executor). A replica sends each job as one zenoh query
//! carrying the input columns, with the node's timeout. The query ends in one of three ways: a
//! reply (outputs, decoded and checked against the node's outputs), a reply error (an `overloaded`
//! executor is *unavailable*, so the pool tries another replica; any other error the executor sent is
//! the job's error), or no answer from the executor — it died, its link dropped, or the timeout
//! passed (zenoh then replies with its own error `Timeout`, which is not an executor's) — which is
//! *unavailable*. The end of a query is seen when zenoh drops the reply callback (`answer`), so
//! every dispatch is answered exactly once.
//!
//! Liveness follows the executor's liveliness token `<prefix>/alive`: it disappears when the
//! executor's link drops (SIGKILL closes its sockets) and reappears when it restarts, which also
//! clears the pool's set-aside state for it. A link that goes dark while both ends run keeps the
//! token for zenoh's whole lease, so the executor's load reports serve as a heartbeat too: a
//! replica silent for [`link::SILENCE_LIMIT`] takes no work until it is heard again (`link`).
//! Any error reply that is not a weir document is zenoh's, a transport failure: *unavailable*.
//!
//! Replies are hostile until checked. Beside `alive` the executor declares `<prefix>/zid/<zid>`
//! naming its zenoh session; a reply from any other session (a rogue queryable on the same key)
//! counts as no reply, and the replica is alive only while both tokens are seen (an access
//! control list stops other sessions declaring them). A reply's columns must be the node's
//! outputs with their element types, the per-row shape the model file declares where its
//! dimensions are fixed, and one row per row sent: anything else is the job's error.
//!
//! A node with `batch: false` sends its queries with the selector parameter `batch=false`: the
//! executor refuses them unless it too calls the model without a batch dimension, rather than
//! run a request's tensors with a batch dimension added.
//!
//! Stateful nodes' batches (HAMS) go over the same session through [`ZenohStatefulTransport`];
//! model-less serving's load and unload commands through [`variants::send_command`], and its
//! control plane learns of remote workers and their instances through [`workers::WorkerWatch`].

mod answer;
mod hams;
pub mod link;
pub mod variants;
pub mod workers;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{info, warn};
use weir_engine::batch::TensorColumn;
use weir_engine::validate::{CallShape, RemoteExecutor};
use weir_operators::model::replicas::JobTiming;
use weir_operators::model::{
    ExecError, ExecutorConfig, ExecutorReport, Replica, ReplicaDone, ReplicaError,
};
use weir_operators::RemoteReplicaSource;
use zenoh::pubsub::Subscriber;
use zenoh::query::{ConsolidationMode, QueryTarget};
use zenoh::sample::SampleKind;
use zenoh::session::ZenohId;
use zenoh::{Session, Wait};

use crate::payload;
use crate::reply_check::{output_checks, OutputCheck};
use weir_connectors::zenoh_peer::{open_peer, SessionError};

pub use hams::{MemberSessions, ZenohStatefulTransport};

use answer::QueryEnd;
pub(crate) use answer::{columns_in_order, AnswerSlot};

/// Jobs a remote replica holds at once unless configured otherwise.
pub const DEFAULT_REMOTE_CAPACITY: usize = 16;

/// Work handed out of zenoh's callbacks: zenoh may hold internal locks while it runs a callback
/// (or drops one), so nothing that could call back into zenoh — the replica pool re-dispatching a
/// job, a revived replica taking work — may run there. One thread per graph process runs it.
#[derive(Clone)]
pub(crate) struct Completions {
    tx: crossbeam_channel::Sender<Box<dyn FnOnce() + Send>>,
}

impl Completions {
    pub(crate) fn start() -> Completions {
        let (tx, rx) = crossbeam_channel::unbounded::<Box<dyn FnOnce() + Send>>();
        let spawned = std::thread::Builder::new()
            .name("weir-remote-completions".into())
            .spawn(move || {
                while let Ok(work) = rx.recv() {
                    work();
                }
            });
        if let Err(e) = spawned {
            warn!(error = %e, "No completion thread; remote answers run inline.");
        }
        Completions { tx }
    }

    /// Runs `work` on the completion thread (inline if that thread is gone).
    pub(crate) fn run(&self, work: Box<dyn FnOnce() + Send>) {
        if let Err(crossbeam_channel::SendError(work)) = self.tx.send(work) {
            work();
        }
    }
}

/// The graph's zenoh session and the remote replicas made on it.
pub struct ZenohReplicas {
    completions: Completions,
    session: Session,
    /// How long to wait at start for each executor's liveliness.
    wait_alive: Duration,
    /// Jobs each remote replica holds at once.
    capacity: usize,
    /// Per-job timeout.
    timeout: Duration,
    /// Stateful members' sessions, filled by the HAMS manager and read by its transport.
    members: MemberSessions,
}

impl std::fmt::Debug for ZenohReplicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZenohReplicas")
            .field("zid", &self.session.zid().to_string())
            .finish()
    }
}

impl ZenohReplicas {
    /// Opens a peer session that connects to `connect` (every executor endpoint) and listens on
    /// `listen` (for executors started with `--connect`).
    ///
    /// # Errors
    /// When zenoh cannot start (a malformed endpoint, a taken listen port).
    pub fn open(listen: &[String], connect: &[String]) -> Result<ZenohReplicas, SessionError> {
        Ok(ZenohReplicas {
            completions: Completions::start(),
            session: open_peer(listen, connect)?,
            wait_alive: Duration::from_secs(15),
            capacity: DEFAULT_REMOTE_CAPACITY,
            timeout: Duration::from_secs(5),
            members: MemberSessions::default(),
        })
    }

    /// Sets how long start-up waits for each executor to be alive.
    pub fn with_wait_alive(mut self, wait: Duration) -> Self {
        self.wait_alive = wait;
        self
    }

    /// Sets the per-job timeout used when a node does not set one.
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The session (for connectors sharing it).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The stateful members' sessions, for the HAMS manager to fill.
    pub fn member_sessions(&self) -> MemberSessions {
        self.members.clone()
    }
}

impl RemoteReplicaSource for ZenohReplicas {
    fn stateful_transport(&self) -> Option<Arc<dyn weir_operators::stateful::StatefulTransport>> {
        Some(Arc::new(ZenohStatefulTransport::new(
            self.session.clone(),
            self.completions.clone(),
            self.members.clone(),
        )))
    }

    fn replica(
        &self,
        executor: &RemoteExecutor,
        config: &ExecutorConfig,
    ) -> Result<Arc<dyn Replica>, ExecError> {
        let replica = RemoteReplica::connect(
            &self.session,
            &self.completions,
            executor,
            config,
            self.capacity,
            config.timeout.unwrap_or(self.timeout),
        )?;
        let deadline = Instant::now() + self.wait_alive;
        while !replica.is_alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !replica.is_alive() {
            return Err(ExecError::Unavailable {
                node: config.node.clone(),
                message: format!(
                    "executor `{}` ({}) did not come alive within {:?}; start it with \
                     `weir executor --name {} --model {}=<file>{}`",
                    executor.name,
                    executor.alive_key(),
                    self.wait_alive,
                    executor.name,
                    config.node,
                    executor
                        .endpoint
                        .as_ref()
                        .map(|e| format!(" --listen {e}"))
                        .unwrap_or_default()
                ),
            });
        }
        info!(node = %config.node, executor = %executor.name, "Remote replica alive.");
        Ok(replica)
    }
}

type Revival = Box<dyn Fn() + Send + Sync>;

/// State shared with the liveliness callbacks.
struct Liveness {
    /// Both tokens seen (the replica takes work).
    alive: AtomicBool,
    /// The `alive` token, and the session the `zid` token names.
    seen: Mutex<(bool, Option<ZenohId>)>,
    /// Replies from another session, dropped.
    foreign_replies: std::sync::atomic::AtomicU64,
    revivals: Arc<Mutex<Vec<Revival>>>,
    /// The executor's last sign of life (load report or reply).
    heartbeat: link::Heartbeat,
    /// Its newest load report's figures for the node's model.
    report: link::LastReport,
}

impl Liveness {
    /// Applies one token change; returns `Some(true)` when the replica came alive, `Some(false)`
    /// when it went away.
    fn update(&self, change: impl FnOnce(&mut (bool, Option<ZenohId>))) -> Option<bool> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        change(&mut seen);
        let now = seen.0 && seen.1.is_some();
        let was = self.alive.swap(now, Ordering::AcqRel);
        (was != now).then_some(now)
    }

    fn executor_zid(&self) -> Option<ZenohId> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Runs the revival callbacks (out of zenoh's callback).
    fn revive(&self, out_of_zenoh: &Completions) {
        let revivals = Arc::clone(&self.revivals);
        out_of_zenoh.run(Box::new(move || {
            let revivals = revivals.lock().unwrap_or_else(|p| p.into_inner());
            for r in revivals.iter() {
                r();
            }
        }));
    }

    /// A sign of life from the executor: ends a heartbeat silence (the replica takes work again).
    fn sign_of_life(&self, out_of_zenoh: &Completions, node: &str, executor: &str) {
        if self.heartbeat.heard() && self.alive.load(Ordering::Acquire) {
            info!(%node, %executor, "Executor heard again after a silence; it takes work again.");
            self.revive(out_of_zenoh);
        }
    }
}

/// The zenoh id a `<prefix>/zid/<zid>` token names.
fn token_zid(key: &str) -> Option<ZenohId> {
    key.rsplit('/').next()?.parse().ok()
}

/// One model node's replica on one remote executor.
pub struct RemoteReplica {
    name: String,
    node: String,
    session: Session,
    key: String,
    inputs: Vec<String>,
    outputs: Vec<OutputCheck>,
    capacity: usize,
    timeout: Duration,
    liveness: Arc<Liveness>,
    completions: Completions,
    _liveliness: Subscriber<()>,
    _zid: Subscriber<()>,
    _heartbeat: Subscriber<()>,
}

impl RemoteReplica {
    /// Follows `executor`'s liveliness and prepares to send `config.node`'s jobs to it.
    ///
    /// # Errors
    /// When the liveliness subscriber cannot be declared.
    fn connect(
        session: &Session,
        completions: &Completions,
        executor: &RemoteExecutor,
        config: &ExecutorConfig,
        capacity: usize,
        timeout: Duration,
    ) -> Result<Arc<RemoteReplica>, ExecError> {
        let liveness = Arc::new(Liveness {
            alive: AtomicBool::new(false),
            seen: Mutex::new((false, None)),
            foreign_replies: std::sync::atomic::AtomicU64::new(0),
            revivals: Arc::new(Mutex::new(Vec::new())),
            heartbeat: link::Heartbeat::new(),
            report: link::LastReport::default(),
        });
        let on_change = {
            let watched = Arc::clone(&liveness);
            let out_of_zenoh = completions.clone();
            let (node, name) = (config.node.clone(), executor.name.clone());
            move |changed: Option<bool>| match changed {
                Some(true) => {
                    info!(%node, executor = %name, "Executor alive.");
                    watched.heartbeat.heard();
                    watched.revive(&out_of_zenoh);
                }
                Some(false) => warn!(%node, executor = %name, "Executor gone (liveliness lost)."),
                None => {}
            }
        };
        let unavailable = |e: zenoh::Error| ExecError::Unavailable {
            node: config.node.clone(),
            message: format!("following executor `{}`: {e}", executor.name),
        };
        let watched = Arc::clone(&liveness);
        let report = on_change.clone();
        let subscriber = session
            .liveliness()
            .declare_subscriber(executor.alive_key())
            .history(true)
            .callback(move |sample| {
                let put = sample.kind() == SampleKind::Put;
                report(watched.update(|seen| seen.0 = put));
            })
            .wait()
            .map_err(unavailable)?;
        let watched = Arc::clone(&liveness);
        let zid_subscriber = session
            .liveliness()
            .declare_subscriber(format!("{}/zid/*", executor.key_prefix))
            .history(true)
            .callback(move |sample| {
                let Some(zid) = token_zid(sample.key_expr().as_str()) else {
                    return;
                };
                let put = sample.kind() == SampleKind::Put;
                on_change(watched.update(|seen| match (put, seen.1) {
                    (true, _) => seen.1 = Some(zid),
                    (false, Some(known)) if known == zid => seen.1 = None,
                    (false, _) => {}
                }));
            })
            .wait()
            .map_err(unavailable)?;
        let (watched, out_of_zenoh) = (Arc::clone(&liveness), completions.clone());
        let (node, name) = (config.node.clone(), executor.name.clone());
        let heartbeat = session
            .declare_subscriber(format!("{}/load", executor.key_prefix))
            .callback(move |sample| {
                watched.report.keep(&sample.payload().to_bytes(), &node);
                watched.sign_of_life(&out_of_zenoh, &node, &name);
            })
            .wait()
            .map_err(unavailable)?;
        Ok(Arc::new(RemoteReplica {
            name: executor.name.clone(),
            node: config.node.clone(),
            session: session.clone(),
            key: match config.call {
                // The executor checks it calls the model the same way (`server::UNBATCHED_PARAMETER`).
                CallShape::Unbatched => format!(
                    "{}?{}=false",
                    executor.model_key(&config.node),
                    crate::server::UNBATCHED_PARAMETER
                ),
                _ => executor.model_key(&config.node),
            },
            inputs: config.inputs.clone(),
            outputs: output_checks(config),
            capacity,
            timeout,
            liveness,
            completions: completions.clone(),
            _liveliness: subscriber,
            _zid: zid_subscriber,
            _heartbeat: heartbeat,
        }))
    }
}

impl Replica for RemoteReplica {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_alive(&self) -> bool {
        if !self.liveness.alive.load(Ordering::Acquire) {
            return false;
        }
        let (silent, first) = self.liveness.heartbeat.check_silence();
        if first {
            warn!(node = %self.node, executor = %self.name,
                quiet_ms = self.liveness.heartbeat.quiet_for().as_millis() as u64,
                "No heartbeat from the executor: its link is taken for dead until it is heard again.");
        }
        !silent
    }

    fn executor_report(&self) -> Option<ExecutorReport> {
        let heard_ago = self.liveness.heartbeat.quiet_for();
        Some(self.liveness.report.read(heard_ago))
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn dispatch(&self, inputs: Vec<TensorColumn>, timing: JobTiming, done: ReplicaDone) {
        let (_, deadline, trace) = timing;
        // The executor is told how long the client still waits, not when: no clocks need agree.
        let mut selector = self.key.clone();
        // Zenoh's selector parameters are `;`-separated (`key?a=1;b=2`).
        let mut sep = if self.key.contains('?') { ';' } else { '?' };
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now()).as_millis();
            selector.push_str(&format!("{sep}{}={left}", crate::server::BUDGET_PARAMETER));
            sep = ';';
        }
        // A sampled request's job: the executor's span goes under this node's.
        if let Some(t) = &trace {
            selector.push_str(&format!(
                "{sep}{}={}",
                crate::server::TRACE_PARAMETER,
                t.parent.traceparent()
            ));
        }
        let body = match payload::encode(self.inputs.iter().map(String::as_str).zip(inputs.iter()))
        {
            Ok(b) => b,
            Err(e) => {
                done(Err(ReplicaError::Failed(ExecError::Inference {
                    node: self.node.clone(),
                    message: format!("encoding the inputs: {e}"),
                })));
                return;
            }
        };
        let end = Arc::new(QueryEnd {
            slot: AnswerSlot::new(done, self.completions.clone()),
            outputs: self.outputs.clone(),
            rows: inputs.first().map_or(0, TensorColumn::len),
            deadline,
            node: self.node.clone(),
            replica: self.name.clone(),
            liveness: Arc::clone(&self.liveness),
            timeout: self.timeout,
            completions: self.completions.clone(),
        });
        let on_reply = Arc::clone(&end);
        let sent = self
            .session
            .get(&selector)
            .payload(body)
            // Every queryable on the key: the executor's reply is told apart by its session, so
            // a rogue queryable on the same key can neither take the job nor answer it.
            .target(QueryTarget::All)
            .consolidation(ConsolidationMode::None)
            .timeout(self.timeout)
            .callback(move |reply| on_reply.on_reply(reply))
            .wait();
        drop(end);
        if let Err(e) = sent {
            warn!(node = %self.node, replica = %self.name, error = %e, "Query not sent.");
        }
    }

    fn on_revival(&self, callback: Box<dyn Fn() + Send + Sync>) {
        self.liveness
            .revivals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(callback);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zid_tokens_parse_and_garbage_does_not() {
        let zid: ZenohId = "a1b2c3".parse().unwrap();
        assert_eq!(token_zid("weir/executor/e1/zid/a1b2c3"), Some(zid));
        assert_eq!(token_zid("weir/executor/e1/zid/not-hex"), None);
    }
}
