//! The tensor-op operator: applies a [`TensorOp`] to every batch, inline on the worker. A batch
//! the op refuses is retried one row at a time, so a bad request fails alone. It counts the
//! batches and rows it handled and the rows it refused into its node's [`OpStats`] (three relaxed
//! atomic adds per batch), which the status board reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::lineage::append_hop;
use weir_engine::request::{RequestError, RowError};

use super::TensorOp;

/// A tensor-op node ready to be built.
#[derive(Debug, Clone)]
pub struct TensorOperator {
    /// Node id.
    pub node: String,
    /// This node's lineage id.
    pub lineage_id: u32,
    /// Lineage ids of its producers.
    pub producer_ids: Vec<u32>,
    /// Batch columns it reads, in port order.
    pub input_columns: Vec<String>,
    /// Batch column names for its outputs, in output order.
    pub output_columns: Vec<Arc<str>>,
    /// What it computes.
    pub op: TensorOp,
    /// Its counters, shared by the node's operator on every worker.
    pub stats: Arc<OpStats>,
}

/// What one tensor-op node did so far.
#[derive(Debug, Default)]
pub struct OpStats {
    batches: AtomicU64,
    rows: AtomicU64,
    errors: AtomicU64,
}

/// [`OpStats`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpSnapshot {
    /// Batches handled (a refused batch retried row by row counts once).
    pub batches: u64,
    /// Rows handled, refused ones included.
    pub rows: u64,
    /// Rows refused (their requests answered with the error).
    pub errors: u64,
}

impl OpStats {
    /// The counters now.
    pub fn snapshot(&self) -> OpSnapshot {
        OpSnapshot {
            batches: self.batches.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

impl TensorOperator {
    /// Builds the operator on `input`.
    pub fn build<'s>(self, input: BatchStream<'s>) -> (BatchStream<'s>, ErrorStream<'s>) {
        let scope = input.scope();
        let (peers, worker) = (scope.peers() as u64, scope.index() as u64);
        let mut builder = OperatorBuilder::new(format!("tensor/{}", self.node), scope);
        let mut input = builder.new_input(input, Pipeline);
        let (ok, ok_stream) = builder.new_output();
        let (err, err_stream) = builder.new_output();
        let mut ok = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(ok);
        let mut err = OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(err);
        let op = self;
        builder.build(move |_caps| {
            let mut batches_seen = 0u64;
            move |_frontiers| {
                let mut ok_out = ok.activate();
                let mut err_out = err.activate();
                input.for_each(|cap, data| {
                    for batch in data.drain(..) {
                        let seq = batches_seen * peers + worker;
                        batches_seen += 1;
                        op.stats.batches.fetch_add(1, Ordering::Relaxed);
                        op.stats
                            .rows
                            .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
                        let ok_rows = op.process(&batch, seq);
                        // A failing batch is retried row by row: only the requests whose own
                        // data does not fit fail (an index without a label, a row too short).
                        let results = match ok_rows {
                            Ok(out) => vec![(batch, Ok(out))],
                            Err(_) if batch.num_rows() > 1 => (0..batch.num_rows())
                                .map(|r| {
                                    // Each row sent on is a batch of its own, with its own
                                    // sequence number in the lineage.
                                    let seq = batches_seen * peers + worker;
                                    batches_seen += 1;
                                    let row = batch.slice(r, 1);
                                    let out = op.process(&row, seq);
                                    (row, out)
                                })
                                .collect(),
                            Err(message) => vec![(batch, Err(message))],
                        };
                        for (rows, result) in results {
                            match result {
                                Ok(out) => ok_out.session(&cap).give(out),
                                Err(message) => {
                                    op.stats
                                        .errors
                                        .fetch_add(rows.num_rows() as u64, Ordering::Relaxed);
                                    let error = Arc::new(op.error(message));
                                    let mut s = err_out.session(&cap);
                                    for &id in rows.request_ids() {
                                        s.give(RowError {
                                            request_id: id,
                                            error: Arc::clone(&error),
                                        });
                                    }
                                }
                            }
                        }
                    }
                });
            }
        });
        (ok_stream, err_stream)
    }

    /// What a request whose rows the op refused with `message` is told: the client's fault (an
    /// invalid request naming the input) when the op says its input comes from the client as
    /// written, the node's otherwise.
    fn error(&self, message: String) -> RequestError {
        match self.input_columns.get(self.op.blamed_input()) {
            Some(column) if self.op.blames_request() => RequestError::Invalid {
                // A graph input's column is its name; a node's is `node.tensor`.
                field: if column.contains('.') {
                    column.clone()
                } else {
                    format!("inputs.{column}")
                },
                message: format!("node `{}`: {message}", self.node),
            },
            _ => RequestError::Node {
                node: self.node.clone(),
                message,
            },
        }
    }

    fn process(&self, batch: &Batch, seq: u64) -> Result<Batch, String> {
        let inputs: Vec<&TensorColumn> = self
            .input_columns
            .iter()
            .map(|c| {
                batch
                    .tensor(c)
                    .ok_or_else(|| format!("input column `{c}` missing from the batch"))
            })
            .collect::<Result<_, _>>()?;
        let outputs = self.op.apply(&inputs)?;
        let lineage = append_hop(batch.lineage(), &self.producer_ids, self.lineage_id, seq);
        let tensors = self.output_columns.iter().cloned().zip(outputs).collect();
        batch.derive(lineage, tensors).map_err(|e| e.to_string())
    }
}
