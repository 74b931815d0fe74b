//! The egress: every request is answered exactly once, from its output row or its first error.
//!
//! [`ReplyTable`] maps request ids to their [`Responder`]s. Answering removes the entry, so a second
//! answer for the same id (a second branch failing, say) finds nothing and is counted, never
//! delivered. The table is shared by the runtime (which inserts at admission) and every worker's
//! egress (which removes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use tracing::debug;

use super::{BatchStream, ErrorStream};
use crate::batch::Batch;
use crate::lineage::LineageView;
use crate::request::{RequestError, Responder, Response};
use crate::tensor::NamedTensor;
use crate::validate::GraphOutput;

const SHARDS: usize = 16;

/// Pending requests and how to answer them.
pub struct ReplyTable {
    shards: Vec<Mutex<HashMap<u64, Responder>>>,
    answered: AtomicU64,
    duplicates: AtomicU64,
}

impl Default for ReplyTable {
    fn default() -> Self {
        ReplyTable {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            answered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
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
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, Responder>> {
        // A poisoned shard only means a responder panicked; the map itself is intact.
        self.shards[(id as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Registers how to answer request `id`.
    pub fn insert(&self, id: u64, responder: Responder) {
        self.shard(id).insert(id, responder);
    }

    /// Answers request `id`, if it is still pending. Returns whether it was.
    pub fn answer(&self, id: u64, outcome: Result<Response, RequestError>) -> bool {
        let responder = self.shard(id).remove(&id);
        match responder {
            Some(r) => {
                self.answered.fetch_add(1, Ordering::Relaxed);
                r(outcome);
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
        let outcome = match missing {
            None => Ok(Response {
                request_id: id,
                outputs,
                lineage: lineage.row(row).collect(),
                parameters: batch.row_parameters(row).map(str::to_string),
            }),
            Some(column) => Err(RequestError::Node {
                node: "egress".into(),
                message: format!("output column `{column}` missing from the final batch"),
            }),
        };
        replies.answer(id, outcome);
    }
}
