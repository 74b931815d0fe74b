//! The egress: every request is answered exactly once, from its output row or its first error.
//!
//! [`ReplyTable`] answers through the [`RequestLog`] of pending requests: answering removes the
//! entry, so a second answer for the same id (a second branch failing, say) finds nothing and is
//! counted, never delivered. The table is shared by the runtime (which inserts at admission) and
//! every worker's egress (which removes).
//!
//! With replicated stateful nodes (HAMS) the table also holds the frontend's side of the protocol:
//! - **the request log** keeps each pending request's inputs, so a request whose speculative path
//!   was rolled back runs again under its next attempt id ([`ReplyTable::retry`]); rows of an
//!   older attempt are stale everywhere ([`RequestLog::is_live`]) and their answers are dropped;
//! - **the release gate**: a reply whose lineage passed a replicated node waits until every state
//!   version it passed is durable ([`ReplyTable::announce`] delivers durability announcements),
//!   and the release hook given at construction sees every reply the gate lets go.
//!
//! The single-process frontend keeps this state in memory behind these methods; a replicated log
//! could back the same interface, as the paper replicates its frontend by state machine
//! replication ("HAMS: High Availability for Distributed Machine Learning Service Graphs",
//! §III-A).

mod requests;

use std::sync::{Arc, Mutex};

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use weir_hams::gate::ReleaseGate;
use weir_hams::protocol::{Dep, Durable};

use super::{BatchStream, ErrorStream};
use crate::batch::Batch;
use crate::lineage::{LineageEntry, LineageView};
use crate::plan::{NodeKind, Plan};
use crate::request::{original_id, AdmittedRequest, RequestError, Responder, Response};
use crate::tensor::NamedTensor;
use crate::validate::GraphOutput;

pub use requests::RequestLog;

/// Called with every reply the release gate lets go (HAMS journal and log clean-up).
pub type ReleaseHook = Box<dyn Fn(&Response) + Send + Sync>;

/// The lineage ids of `plan`'s replicated stateful nodes: the versions a reply waits on.
pub fn replicated_nodes(plan: &Plan) -> Vec<u32> {
    plan.nodes
        .iter()
        .filter(|n| match &n.node.kind {
            NodeKind::Model(m) => m.state.as_ref().is_some_and(|s| s.replicated()),
            _ => false,
        })
        .map(|n| n.lineage_id)
        .collect()
}

/// Pending requests, how to answer them, and the release gate.
pub struct ReplyTable {
    requests: Arc<RequestLog>,
    /// Lineage ids of replicated stateful nodes (empty: no gate, no request kept).
    replicated: Vec<u32>,
    gate: Mutex<ReleaseGate<Response>>,
    on_release: Option<ReleaseHook>,
}

impl Default for ReplyTable {
    fn default() -> Self {
        ReplyTable::new(Arc::default(), Vec::new(), None)
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
    /// A table answering through `requests`, gating replies on the versions of the `replicated`
    /// stateful nodes (see [`replicated_nodes`]), with `on_release` called for every reply the
    /// gate lets go.
    pub fn new(
        requests: Arc<RequestLog>,
        replicated: Vec<u32>,
        on_release: Option<ReleaseHook>,
    ) -> Self {
        ReplyTable {
            requests,
            replicated,
            gate: Mutex::new(ReleaseGate::default()),
            on_release,
        }
    }

    fn gate(&self) -> std::sync::MutexGuard<'_, ReleaseGate<Response>> {
        self.gate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The request log it answers through.
    pub fn requests(&self) -> &Arc<RequestLog> {
        &self.requests
    }

    /// Whether requests are kept to run again (the graph has replicated stateful nodes).
    pub fn keeps_requests(&self) -> bool {
        !self.replicated.is_empty()
    }

    /// Registers how to answer request `id`, which nobody waits for after `deadline`.
    pub fn insert(&self, id: u64, deadline: Option<std::time::Instant>, responder: Responder) {
        self.requests.insert(id, deadline, responder);
    }

    /// Registers how to answer `request`, keeping it to run again if a failover needs it.
    pub fn insert_logged(&self, request: AdmittedRequest, responder: Responder) {
        self.requests.insert_logged(request, responder);
    }

    /// Whether `id` is the current attempt of a pending request (rows of anything else are stale).
    pub fn is_live(&self, id: u64) -> bool {
        self.requests.is_live(id)
    }

    /// Starts the next attempt of the request first admitted as `original`: its held reply (if
    /// any) is dropped and the logged request comes back under the new attempt's id. `None` when
    /// the request is no longer pending, was not logged, or ran out of attempts.
    pub fn retry(&self, original: u64) -> Option<AdmittedRequest> {
        let (request, old) = self.requests.next_attempt(original)?;
        self.gate().remove(old);
        Some(request)
    }

    /// The versions of replicated nodes a reply with `lineage` depends on.
    pub fn gate_deps(&self, lineage: &[LineageEntry]) -> Vec<Dep> {
        let mut deps: Vec<Dep> = Vec::new();
        for e in lineage {
            if self.replicated.contains(&e.node) {
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
        self.requests.answer(id, outcome)
    }

    /// Answers `id` with `response` once every version in `deps` is durable (at once if none).
    pub fn answer_when_durable(&self, id: u64, deps: Vec<Dep>, response: Response) {
        if deps.is_empty() {
            self.release(id, response);
            return;
        }
        if !self.is_live(id) {
            self.requests.count_stale();
            return;
        }
        self.requests.traces().hold(id, &deps);
        let ready = self.gate().offer(id, deps, response);
        if let Some(r) = ready {
            self.release(id, r);
        }
    }

    fn release(&self, id: u64, response: Response) {
        self.requests.traces().released(id);
        if let Some(hook) = &self.on_release {
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
        self.requests.pending()
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.requests.answered()
    }

    /// Second answers suppressed so far.
    pub fn duplicates(&self) -> u64 {
        self.requests.duplicates()
    }

    /// Answers of superseded attempts dropped so far.
    pub fn stale(&self) -> u64 {
        self.requests.stale()
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
