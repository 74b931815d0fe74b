//! HAMS's manager on the graph process: roles, detection and recovery over zenoh ("HAMS: High
//! Availability for Distributed Machine Learning Service Graphs", §III-A and §IV-E).
//!
//! The manager gives each stateful node that runs on executors a primary and a backup, watches
//! its members' liveliness and its proxy's suspicions, and when a primary fails drives the
//! recovery: the backup's promotion, the rollback of every node that consumed speculative output,
//! the retry of every request whose path was rolled back, and the re-protection of nodes left
//! without a backup.
//!
//! It is a crate of its own rather than a part of `weir-executor` or of the facade. The executor
//! crate keeps what is on the data path: the zenoh transport of the nodes' batches, which reads
//! the member sessions the manager records. The facade only wires parts together. The manager is
//! a protocol with its own state machine (roles per epoch, failure events, the recovery's
//! fixpoint) over the engine's runtime (retries, durability announcements), the operators'
//! proxies and the executors' member sessions, and none of those depends on it.
//!
//! **Made before the graph.** A [`Coordinator`] exists before anything that reports to the
//! manager: the stateful proxies take its suspicion queue in their constructors
//! ([`Coordinator::suspicions`]), and the reply table its release hook
//! ([`Coordinator::release_hook`], which frees the proxies' records of a released reply and
//! journals it). [`Coordinator::start`] then takes the running graph, assigns the first roles and
//! starts the manager's thread.
//!
//! - `roles.rs`: each node's primary, backup and epoch ([`Roles`]), where they are kept
//!   ([`RoleStore`]), and the assignments that tell the members;
//! - `detection.rs`: what gives a failure away, and the one queue every event goes through;
//! - `recovery.rs`: the failover of a primary, step by step ([`Recovery`]);
//! - `readmission.rs`: a replaced primary that never died (partitioned, paused) fenced and made
//!   a backup again once it is heard from, its assignment sent off the manager's thread.

mod detection;
mod readmission;
mod recovery;
mod roles;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, Sender};
use weir_engine::dataflow::egress::ReleaseHook;
use weir_engine::request::original_id;
use weir_engine::runtime::GraphRuntime;
use weir_executor::client::MemberSessions;
use weir_hams::journal::{Event as JournalEvent, Journal};
use weir_hams::{Epoch, NodeId};
use weir_operators::stateful::{StatefulNodeHandle, SuspicionSink};
use zenoh::pubsub::Subscriber;
use zenoh::{Session, Wait};

use detection::Event;
pub use recovery::Recovery;
pub use roles::{InMemoryRoles, RoleStore, Roles};

/// Errors starting the manager.
#[derive(Debug, thiserror::Error)]
#[error("HAMS: {0}")]
pub struct ManagerError(pub String);

/// The manager's parts that exist before the graph runs: its event queue and the journal of
/// released replies.
pub struct Coordinator {
    graph: String,
    events: Sender<Event>,
    queue: Receiver<Event>,
    /// Where released replies are journaled (`WEIR_HAMS_JOURNAL`, or [`HamsManager::journal_to`]).
    journal: Arc<Mutex<Journal>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator")
            .field("graph", &self.graph)
            .finish()
    }
}

impl Coordinator {
    /// The coordinator of graph `graph`'s manager.
    pub fn new(graph: &str) -> Coordinator {
        let (events, queue) = unbounded::<Event>();
        Coordinator {
            graph: graph.to_string(),
            events,
            queue,
            journal: Arc::new(Mutex::new(Journal::from_env(&format!(
                "released-{graph}-{}",
                std::process::id()
            )))),
        }
    }

    /// Where a stateful node's proxy reports a primary it could not reach: the manager's queue.
    pub fn suspicions(&self) -> SuspicionSink {
        let events = self.events.clone();
        Arc::new(move |s| {
            let _ = events.send(Event::Suspect(s));
        })
    }

    /// The reply table's hook for released replies: each of `nodes` drops its record of the
    /// reply's request, and the release is journaled with the (version, row hash) it passed at
    /// each node.
    pub fn release_hook(&self, nodes: Vec<Arc<StatefulNodeHandle>>) -> ReleaseHook {
        let journal = Arc::clone(&self.journal);
        Box::new(move |response| {
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
        })
    }

    /// Takes charge of `nodes` (the stateful nodes that run on executors) of the running graph
    /// `runtime`: waits up to `wait_alive` for their members, assigns the first member of each
    /// the primary role and the second the backup role, and starts watching. `members` is shared
    /// with the nodes' transport, which takes a batch's reply only from the session its
    /// primary's assignment reply came from.
    ///
    /// # Errors
    /// When a node's first member does not come alive or refuses its role, or zenoh fails.
    pub fn start(
        self,
        session: &Session,
        nodes: Vec<Arc<StatefulNodeHandle>>,
        members: MemberSessions,
        runtime: Arc<GraphRuntime>,
        wait_alive: Duration,
    ) -> Result<HamsManager, ManagerError> {
        let state = Arc::new(State {
            session: session.clone(),
            graph: self.graph,
            nodes,
            roles: Box::new(InMemoryRoles::default()),
            alive: Mutex::new(HashMap::new()),
            heard: Mutex::new(HashMap::new()),
            replaced: Mutex::new(HashMap::new()),
            readmitting: Mutex::new(HashSet::new()),
            events: self.events.clone(),
            members,
            runtime,
            recoveries: Mutex::new(Vec::new()),
            journal: self.journal,
        });
        let subscribers = detection::watch(&state, &self.events)?;
        for h in &state.nodes {
            state.initial_roles(h, wait_alive)?;
        }
        let s = Arc::clone(&state);
        let queue = self.queue;
        let thread = std::thread::Builder::new()
            .name(format!("hams-manager-{}", state.graph))
            .spawn(move || s.run(&queue))
            .map_err(|e| ManagerError(format!("spawning the manager: {e}")))?;
        Ok(HamsManager {
            state,
            events: self.events,
            thread: Some(thread),
            subscribers,
        })
    }
}

/// What the manager's thread and its zenoh callbacks share.
struct State {
    session: Session,
    graph: String,
    nodes: Vec<Arc<StatefulNodeHandle>>,
    roles: Box<dyn RoleStore>,
    alive: Mutex<HashMap<String, bool>>,
    /// When each member's load report (its heartbeat) last arrived.
    heard: Mutex<HashMap<String, Instant>>,
    /// Members replaced as primary while holding their liveliness, with the time after which a
    /// heartbeat shows them reachable again (`readmission.rs`).
    replaced: Mutex<HashMap<String, Instant>>,
    /// Replaced members whose re-admission is in flight off the manager's thread
    /// (`readmission.rs`).
    readmitting: Mutex<HashSet<String>>,
    /// The manager's own queue, where work done off its thread reports back.
    events: Sender<Event>,
    /// Each member's session, as its assignment replies name it.
    members: MemberSessions,
    /// The running graph: retries of rolled-back requests, durability announcements.
    runtime: Arc<GraphRuntime>,
    recoveries: Mutex<Vec<Recovery>>,
    journal: Arc<Mutex<Journal>>,
}

impl State {
    fn handle(&self, node: NodeId) -> Option<&Arc<StatefulNodeHandle>> {
        self.nodes.iter().find(|h| h.node_id == node)
    }
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

impl HamsManager {
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
