//! The graph-side proxy of one stateful node: sequence numbers, the record of every row's output
//! until its reply leaves, the batches not yet durable, and the failover controls.
//!
//! Shared by the node's timely operator (which sends and records) and the HAMS manager (which
//! pauses, rolls back and resumes it); everything sits behind one mutex, so a rollback and the
//! operator's "is this row live, then send it" never interleave: a row of an attempt a rollback
//! made stale is never sent afterwards, so no speculative input outlives the rollback ("HAMS:
//! High Availability for Distributed Machine Learning Service Graphs", §IV-E).
//!
//! A node on executors is built with its [`ManagerLinks`]: the request log it reads liveness
//! from, and the manager's queue it reports suspicions to. Both exist before the proxy.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use timely::scheduling::SyncActivator;
use tracing::info;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::dataflow::egress::RequestLog;
use weir_engine::placement::ReplicaTarget;
use weir_engine::request::original_id;
use weir_engine::stateful::StatefulNode;
use weir_hams::protocol::Dep;
use weir_hams::{Epoch, NodeId, Seq};

/// The outcome of [`StatefulNodeHandle::begin`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// Numbered: (seq, epoch, primary).
    Sent(Seq, Epoch, String),
    /// Failover in progress: try later.
    Paused,
    /// A row went stale since it was filtered: filter again.
    Stale,
}

/// Where a proxy's suspicions go (the manager's queue).
pub type SuspicionSink = Arc<dyn Fn(Suspicion) + Send + Sync>;

/// What a stateful node on executors shares with the graph's HAMS manager, given to its proxy
/// at construction.
#[derive(Clone)]
pub struct ManagerLinks {
    /// The graph's request log: rows of a request's superseded attempts are stale.
    pub requests: Arc<RequestLog>,
    /// The manager's queue, where the operator reports a primary it could not reach.
    pub suspicions: SuspicionSink,
}

impl std::fmt::Debug for ManagerLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerLinks")
            .field("requests", &self.requests)
            .finish()
    }
}

/// The operator reports a primary it could not reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspicion {
    /// The node.
    pub node: NodeId,
    /// The epoch of the primary suspected.
    pub epoch: Epoch,
    /// What happened.
    pub why: String,
}

struct Processed {
    seq: Seq,
    row: Batch,
    hash: u64,
}

struct Sent {
    ids: Vec<u64>,
    deps: Vec<Dep>,
}

struct ProxyState {
    /// Under checkpoints: every batch's inputs since the last checkpoint, for replay.
    replay_log: BTreeMap<Seq, (Vec<u64>, Vec<TensorColumn>)>,
    /// Under checkpoints, after a failover: the versions to replay.
    replay: Option<std::ops::RangeInclusive<Seq>>,
    epoch: Epoch,
    primary: Option<String>,
    paused: bool,
    last_seq: Seq,
    durable: Seq,
    processed: HashMap<u64, Processed>,
    sent: BTreeMap<Seq, Sent>,
}

/// A stateful node as the graph process sees it.
pub struct StatefulNodeHandle {
    /// Node id.
    pub node: String,
    /// Lineage id.
    pub node_id: NodeId,
    /// State and replication settings.
    pub spec: StatefulNode,
    /// Its replicas, `[primary, backup]` at start.
    pub members: Vec<ReplicaTarget>,
    /// Row inputs, in the model's order (state inputs excluded).
    pub inputs: Vec<String>,
    /// Row outputs, in the model's order (state outputs excluded).
    pub outputs: Vec<String>,
    /// Most rows per batch.
    pub max_batch: usize,
    /// Lineage ids of every replicated stateful node (this one's dependencies are on the others).
    pub replicated: Vec<NodeId>,
    state: Mutex<ProxyState>,
    activator: Mutex<Option<SyncActivator>>,
    /// The manager's links (none: the node runs in this process, unmanaged).
    links: Option<ManagerLinks>,
}

impl std::fmt::Debug for StatefulNodeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulNodeHandle")
            .field("node", &self.node)
            .finish()
    }
}

/// What the manager sees of a proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyStatus {
    /// Current epoch.
    pub epoch: Epoch,
    /// Current primary.
    pub primary: Option<String>,
    /// Whether sending is paused.
    pub paused: bool,
    /// Last batch numbered.
    pub last_seq: Seq,
    /// Highest durable version heard of.
    pub durable: Seq,
    /// Rows recorded (waiting for their replies to leave).
    pub recorded: usize,
    /// Batches sent and not yet durable.
    pub undurable: usize,
}

impl StatefulNodeHandle {
    /// A proxy for node `node`, paused until the manager names a primary; `links` for a node
    /// on executors, which the graph's manager drives.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: String,
        node_id: NodeId,
        spec: StatefulNode,
        members: Vec<ReplicaTarget>,
        inputs: Vec<String>,
        outputs: Vec<String>,
        max_batch: usize,
        replicated: Vec<NodeId>,
        links: Option<ManagerLinks>,
    ) -> Self {
        StatefulNodeHandle {
            node,
            node_id,
            spec,
            members,
            inputs,
            outputs,
            max_batch: max_batch.max(1),
            replicated,
            state: Mutex::new(ProxyState {
                replay_log: BTreeMap::new(),
                replay: None,
                epoch: 0,
                primary: None,
                paused: true,
                last_seq: 0,
                durable: 0,
                processed: HashMap::new(),
                sent: BTreeMap::new(),
            }),
            activator: Mutex::new(None),
            links,
        }
    }

    fn lock(&self) -> MutexGuard<'_, ProxyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        if let Some(a) = self
            .activator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            let _ = a.activate();
        }
    }

    /// Whether the node's state is replicated (replies wait for durability, failover applies).
    pub fn replicated(&self) -> bool {
        self.spec.replicated()
    }

    /// The operator registers how to wake it.
    pub fn set_activator(&self, activator: SyncActivator) {
        *self.activator.lock().unwrap_or_else(|p| p.into_inner()) = Some(activator);
    }

    /// Whether the graph's HAMS manager drives this node (it runs on executors).
    pub fn is_managed(&self) -> bool {
        self.links.is_some()
    }

    /// Whether a row of request attempt `id` is live (stale rows are dropped). Every row of an
    /// unmanaged node is: nothing rolls it back.
    pub fn is_live(&self, id: u64) -> bool {
        self.links.as_ref().is_none_or(|l| l.requests.is_live(id))
    }

    /// Names the primary at `epoch` and resumes sending.
    pub fn assign_primary(&self, epoch: Epoch, primary: String) {
        let mut s = self.lock();
        s.epoch = epoch;
        s.primary = Some(primary);
        s.paused = false;
        drop(s);
        self.wake();
    }

    /// Stops sending new batches (failover in progress).
    pub fn pause(&self) {
        self.lock().paused = true;
    }

    /// The proxy's state.
    pub fn status(&self) -> ProxyStatus {
        let s = self.lock();
        ProxyStatus {
            epoch: s.epoch,
            primary: s.primary.clone(),
            paused: s.paused,
            last_seq: s.last_seq,
            durable: s.durable,
            recorded: s.processed.len(),
            undurable: s.sent.len(),
        }
    }

    /// Numbers the next batch of rows `ids` depending on `deps`: [`Begin::Sent`] with (seq, epoch,
    /// primary), unless paused or a row has gone stale. Liveness is checked under the proxy's
    /// lock, so a rollback never misses a batch that carried a row it killed (see the module doc).
    pub fn begin(&self, ids: Vec<u64>, deps: Vec<Dep>) -> Begin {
        let mut s = self.lock();
        if s.paused {
            return Begin::Paused;
        }
        let Some(primary) = s.primary.clone() else {
            return Begin::Paused;
        };
        if ids.iter().any(|&id| !self.is_live(id)) {
            return Begin::Stale;
        }
        s.last_seq += 1;
        let seq = s.last_seq;
        if self.replicated() {
            s.sent.insert(seq, Sent { ids, deps });
        }
        Begin::Sent(seq, s.epoch, primary)
    }

    /// (epoch, last numbered, paused, primary) now.
    pub fn position(&self) -> (Epoch, Seq, bool, Option<String>) {
        let s = self.lock();
        (s.epoch, s.last_seq, s.paused, s.primary.clone())
    }

    /// Records the output rows (request attempt id, row, output hash) of version `seq`, sent at
    /// `epoch` (kept until their replies leave), unless a rollback voided that version since
    /// (a later epoch whose history ends before `seq`). Returns whether the version stands.
    ///
    /// The check and the records are made under the proxy's lock, like [`Self::rollback`]: a
    /// rollback either sees these records (and retries their requests) or they are never made.
    /// Checked apart from the records, a rollback landing in between would leave the record of
    /// a void version behind, and the request's retry would replay its row.
    pub fn record_batch(&self, seq: Seq, epoch: Epoch, rows: Vec<(u64, Batch, u64)>) -> bool {
        let mut s = self.lock();
        if epoch != s.epoch && seq > s.last_seq {
            return false;
        }
        if !self.replicated() {
            return true;
        }
        for (id, row, hash) in rows {
            if self.is_live(id) {
                s.processed
                    .insert(original_id(id), Processed { seq, row, hash });
            }
        }
        true
    }

    /// The recorded output of the request `id` belongs to, if it passed this node on a version
    /// that still stands.
    pub fn replay(&self, id: u64) -> Option<Batch> {
        self.lock()
            .processed
            .get(&original_id(id))
            .map(|p| p.row.clone())
    }

    /// The dependencies of every batch sent and not yet durable.
    pub fn sent_deps(&self) -> Vec<Vec<Dep>> {
        self.lock().sent.values().map(|b| b.deps.clone()).collect()
    }

    /// Rolls the proxy back to version `cut` at `epoch` (its backup was promoted): records and
    /// batches above the cut are void; returns the original ids of the requests they carried,
    /// which must run again. Stays paused until [`StatefulNodeHandle::assign_primary`].
    pub fn rollback(&self, cut: Seq, epoch: Epoch) -> Vec<u64> {
        let mut s = self.lock();
        s.paused = true;
        s.epoch = epoch;
        let mut retry: Vec<u64> = Vec::new();
        s.processed.retain(|&id, p| {
            if p.seq > cut {
                retry.push(id);
                false
            } else {
                true
            }
        });
        let void: Vec<Seq> = s.sent.range(cut + 1..).map(|(&k, _)| k).collect();
        for seq in void {
            if let Some(b) = s.sent.remove(&seq) {
                retry.extend(b.ids.iter().map(|&id| original_id(id)));
            }
        }
        info!(node = %self.node, from = s.last_seq, to = cut, epoch, retried = retry.len(), "Stateful node rolled back.");
        s.last_seq = cut;
        retry.sort_unstable();
        retry.dedup();
        retry
    }

    /// Version `seq` is durable: batches up to it can no longer be rolled back (under
    /// checkpoints: need no replay).
    pub fn on_durable(&self, seq: Seq) {
        let mut s = self.lock();
        if seq > s.durable {
            s.durable = seq;
        }
        let keep = s.sent.split_off(&(seq + 1));
        s.sent = keep;
        let keep = s.replay_log.split_off(&(seq + 1));
        s.replay_log = keep;
    }

    /// Under checkpoints: keeps batch `seq`'s inputs until a checkpoint covers it.
    pub fn log_inputs(&self, seq: Seq, request_ids: &[u64], inputs: &[TensorColumn]) {
        if self.spec.mode == weir_engine::spec::ReplicationMode::Checkpoint {
            self.lock()
                .replay_log
                .insert(seq, (request_ids.to_vec(), inputs.to_vec()));
        }
    }

    /// Under checkpoints, after the backup (holding version `cut`) was promoted at `epoch`:
    /// every later batch is to be replayed in order. Stays paused until
    /// [`StatefulNodeHandle::assign_primary`].
    pub fn rollback_to_checkpoint(&self, cut: Seq, epoch: Epoch) {
        let mut s = self.lock();
        s.paused = true;
        s.epoch = epoch;
        if s.last_seq > cut {
            s.replay = Some(cut + 1..=s.last_seq);
        }
        info!(node = %self.node, checkpoint = cut, to = s.last_seq, epoch, "Stateful node replays from its checkpoint.");
    }

    /// The logged batches to replay after a failover (once), in version order: version, the
    /// rows' original request ids (for the journal), inputs.
    pub fn take_replay(&self) -> Vec<(Seq, Vec<u64>, Vec<TensorColumn>)> {
        let mut s = self.lock();
        let Some(range) = s.replay.take() else {
            return Vec::new();
        };
        s.replay_log
            .range(range)
            .map(|(&seq, (ids, inputs))| (seq, ids.clone(), inputs.clone()))
            .collect()
    }

    /// The reply of request `original` left the graph: its record goes; returns (version, row
    /// hash) it passed this node at.
    pub fn on_release(&self, original: u64) -> Option<(Seq, u64)> {
        self.lock()
            .processed
            .remove(&original_id(original))
            .map(|p| (p.seq, p.hash))
    }

    /// The operator could not reach the primary of `epoch`.
    pub fn suspect(&self, epoch: Epoch, why: String) {
        if let Some(links) = &self.links {
            (links.suspicions)(Suspicion {
                node: self.node_id,
                epoch,
                why,
            });
        }
    }
}
