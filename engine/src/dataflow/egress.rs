//! The egress: every request is answered exactly once, from its output row or its first error.
//!
//! [`ReplyTable`] maps request ids to their [`Responder`]s. Answering removes the entry, so a second
//! answer for the same id (a second branch failing, say) finds nothing and is counted, never
//! delivered. The table is shared by the runtime (which inserts at admission) and every worker's
//! egress (which removes).
//!
//! With replicated stateful nodes (HAMS) the table also holds the frontend's side of the protocol:
//! - **the request log**: each pending request's inputs, so a request whose speculative path was
//!   rolled back runs again under its next attempt id ([`ReplyTable::retry`]); entries are keyed
//!   by the original id and answer only for the current attempt, so rows of an older attempt are
//!   stale everywhere ([`ReplyTable::is_live`]) and their answers are dropped;
//! - **the release gate**: a reply whose lineage passed a replicated node waits until every state
//!   version it passed is durable ([`ReplyTable::announce`] delivers durability announcements).
//!
//! The single-process frontend keeps this state in memory behind these methods; a replicated log
//! (Raft) can back the same interface later (the paper replicates the frontend by SMR; note §1.3).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use tracing::debug;
use weir_hams::gate::ReleaseGate;
use weir_hams::protocol::{Dep, Durable};

use super::ingress::AdmittedRequest;
use super::{BatchStream, ErrorStream};
use crate::batch::Batch;
use crate::lineage::{LineageEntry, LineageView};
use crate::request::{next_attempt, original_id, RequestError, Responder, Response};
use crate::tensor::NamedTensor;
use crate::validate::GraphOutput;

const SHARDS: usize = 16;

struct Pending {
    /// The current attempt's id.
    attempt: u64,
    responder: Responder,
    /// The request as admitted, kept while replicated stateful nodes may need it run again.
    logged: Option<AdmittedRequest>,
}

/// Called with every reply the release gate lets go (HAMS journal and log clean-up).
pub type ReleaseHook = Box<dyn Fn(&Response) + Send + Sync>;

/// Pending requests and how to answer them.
pub struct ReplyTable {
    shards: Vec<Mutex<HashMap<u64, Pending>>>,
    answered: AtomicU64,
    duplicates: AtomicU64,
    stale: AtomicU64,
    /// Lineage ids of replicated stateful nodes (empty: no gate).
    replicated: OnceLock<Vec<u32>>,
    gate: Mutex<ReleaseGate<Response>>,
    on_release: OnceLock<ReleaseHook>,
}

impl Default for ReplyTable {
    fn default() -> Self {
        ReplyTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            answered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            replicated: OnceLock::new(),
            gate: Mutex::new(ReleaseGate::default()),
            on_release: OnceLock::new(),
        }
    }
}

impl std::fmt::Debug for ReplyTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyTable")
            .field("pending", &self.pending())
            .field("answered", &self.answered())
            .finish()
    }
}

impl ReplyTable {
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        // A poisoned shard only means a responder panicked; the map itself is intact.
        self.shards[(original_id(id) as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, ReleaseGate<Response>> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers how to answer request `id`.
    pub fn insert(&self, id: u64, responder: Responder) {
        self.insert_entry(id, responder, None);
    }

    /// Registers how to answer `request`, keeping it to run again if a failover needs it.
    pub fn insert_logged(&self, request: AdmittedRequest, responder: Responder) {
        self.insert_entry(request.id, responder, Some(request));
    }

    fn insert_entry(&self, id: u64, responder: Responder, logged: Option<AdmittedRequest>) {
        self.shard(id).insert(
            original_id(id),
            Pending {
                attempt: id,
                responder,
                logged,
            },
        );
    }

    /// Whether `id` is the current attempt of a pending request (rows of anything else are stale).
    pub fn is_live(&self, id: u64) -> bool {
        self.shard(id)
            .get(&original_id(id))
            .is_some_and(|p| p.attempt == id)
    }

    /// Starts the next attempt of the request first admitted as `original`: its held reply (if
    /// any) is dropped and the logged request comes back under the new attempt's id. `None` when
    /// the request is no longer pending, was not logged, or ran out of attempts.
    pub fn retry(&self, original: u64) -> Option<AdmittedRequest> {
        let mut shard = self.shard(original);
        let entry = shard.get_mut(&original_id(original))?;
        let logged = entry.logged.as_ref()?;
        let next = next_attempt(entry.attempt)?;
        let old = std::mem::replace(&mut entry.attempt, next);
        let mut request = logged.clone();
        request.id = next;
        drop(shard);
        self.gate().remove(old);
        Some(request)
    }

    /// Declares which lineage ids are replicated stateful nodes (once, before requests flow).
    pub fn set_replicated(&self, nodes: Vec<u32>) {
        let _ = self.replicated.set(nodes);
    }

    /// Installs the hook called with every reply the gate releases.
    pub fn set_release_hook(&self, hook: ReleaseHook) {
        let _ = self.on_release.set(hook);
    }

    /// The versions of replicated nodes a reply with `lineage` depends on.
    pub fn gate_deps(&self, lineage: &[LineageEntry]) -> Vec<Dep> {
        let Some(replicated) = self.replicated.get() else {
            return Vec::new();
        };
        let mut deps: Vec<Dep> = Vec::new();
        for e in lineage {
            if replicated.contains(&e.node) {
                match deps.iter_mut().find(|(n, _)| *n == e.node) {
                    Some(d) => d.1 = d.1.max(e.seq),
                    None => deps.push((e.node, e.seq)),
                }
            }
        }
        deps
    }

    /// Answers request `id`, if it is still pending. Returns whether it was.
    pub fn answer(&self, id: u64, outcome: Result<Response, RequestError>) -> bool {
        let mut shard = self.shard(id);
        let current = shard.get(&original_id(id)).map(|p| p.attempt == id);
        let responder = match current {
            Some(true) => shard.remove(&original_id(id)),
            Some(false) => {
                drop(shard);
                self.stale.fetch_add(1, Ordering::Relaxed);
                debug!(
                    request_id = id,
                    "Dropped the answer of a superseded attempt."
                );
                return false;
            }
            None => None,
        };
        drop(shard);
        match responder {
            Some(p) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
                (p.responder)(outcome);
                true
            }
            None => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
                debug!(
                    request_id = id,
                    "Dropped a second answer for a request already answered."
                );
                false
            }
        }
    }

    /// Answers `id` with `response` once every version in `deps` is durable (at once if none).
    pub fn answer_when_durable(&self, id: u64, deps: Vec<Dep>, response: Response) {
        if deps.is_empty() {
            self.release(id, response);
            return;
        }
        if !self.is_live(id) {
            self.stale.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let ready = self.gate().offer(id, deps, response);
        if let Some(r) = ready {
            self.release(id, r);
        }
    }

    fn release(&self, id: u64, response: Response) {
        if let Some(hook) = self.on_release.get() {
            if self.is_live(id) {
                hook(&response);
            }
        }
        self.answer(id, Ok(response));
    }

    /// Takes a durability announcement and answers every reply it releases.
    pub fn announce(&self, d: Durable) {
        let released = self.gate().announce(d);
        for (id, r) in released {
            self.release(id, r);
        }
    }

    /// Replies waiting for durability.
    pub fn held(&self) -> usize {
        self.gate().held()
    }

    /// Requests not yet answered.
    pub fn pending(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
            .sum()
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// Second answers suppressed so far.
    pub fn duplicates(&self) -> u64 {
        self.duplicates.load(Ordering::Relaxed)
    }

    /// Answers of superseded attempts dropped so far.
    pub fn stale(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }
}

/// Answers every row of `outputs` and every error of `errors` through `replies`.
pub fn egress<'s>(
    outputs: BatchStream<'s>,
    errors: ErrorStream<'s>,
    graph_outputs: Vec<GraphOutput>,
    replies: Arc<ReplyTable>,
) {
    let table = Arc::clone(&replies);
    outputs.sink(Pipeline, "egress", move |(input, _frontier)| {
        input.for_each(|_cap, data| {
            for batch in data.drain(..) {
                answer_batch(&batch, &graph_outputs, &table);
            }
        });
    });
    errors.sink(Pipeline, "egress/errors", move |(input, _frontier)| {
        input.for_each(|_cap, data| {
            for e in data.drain(..) {
                replies.answer(e.request_id, Err(e.error.as_ref().clone()));
            }
        });
    });
}

fn answer_batch(batch: &Batch, graph_outputs: &[GraphOutput], replies: &ReplyTable) {
    let lineage = LineageView::new(batch.lineage());
    for (row, &id) in batch.request_ids().iter().enumerate() {
        let mut outputs = Vec::with_capacity(graph_outputs.len());
        let mut missing = None;
        for o in graph_outputs {
            match batch.tensor(&o.column) {
                Some(col) => outputs.push(NamedTensor {
                    name: o.name.clone(),
                    tensor: col.row(row),
                }),
                None => missing = Some(o.column.clone()),
            }
        }
        match missing {
            None => {
                let response = Response {
                    request_id: original_id(id),
                    outputs,
                    lineage: lineage.row(row).collect(),
                    parameters: batch.row_parameters(row).map(str::to_string),
                };
                let deps = replies.gate_deps(&response.lineage);
                replies.answer_when_durable(id, deps, response);
            }
            Some(column) => {
                replies.answer(
                    id,
                    Err(RequestError::Node {
                        node: "egress".into(),
                        message: format!("output column `{column}` missing from the final batch"),
                    }),
                );
            }
        }
    }
}
