//! The model-node operator: batches go to the node's executor; results come back on a channel.
//!
//! Per input batch the operator cuts jobs of at most `max_batch` rows (1 for per-request models;
//! fewer where the node's calls have measured rows dearer in larger calls,
//! [`InferenceService::preferred_rows_per_job`]), each holding a capability retained from the
//! input's, and offers them to the executor; a batch reaching an idle node may be cut into one job
//! per free session when the node's measured time per row says that pays
//! ([`InferenceService::rows_per_job_now`]). A job the full queue refuses waits
//! in `pending` (with its capability) and is offered again on the next activation; the operator
//! schedules one shortly while anything is pending. An executor thread finishing a job pushes the
//! outcome onto the operator's channel and activates it through a `SyncActivator`; the operator
//! then emits the output batch (lineage extended by this hop) or one error per row, at the job's
//! time, and drops the capability. The worker never waits on inference. Each job carries its rows'
//! deadline; a job still held back when it passes is answered expired instead of offered
//! ([`super::expiry`]). A job holding a sampled request's row carries a [`JobTrace`] (its span's
//! context, for a remote executor, and a slot for the call's times); its times go into the graph's
//! trace book under this node's `(lineage id, seq)` when it is answered ([`weir_engine::trace`]).
//! Other jobs cost one atomic load for this.
//!
//! The one exception to "the worker never waits": a graph's only model node (`run_here`) runs a
//! lone job on the worker itself when the executor is idle
//! ([`super::replicas::InferenceService::try_run_here`]), and emits its outputs in the same
//! activation. That saves the two thread hand-offs (worker → session thread → worker) of an idle
//! node; blocking the worker for the call holds up no other model node. It pays only while no
//! other request is in the graph: a worker blocked in a call cannot admit the next requests into
//! the dataflow nor answer finished ones, so with other requests in flight (other clients, whose
//! answers and next requests would overlap the call on another core) the job goes to the session
//! thread instead. Where the graph's admission counters are known (`in_flight`), a job runs here
//! only when it holds every request admitted and not answered; under load jobs are not lone
//! either and go through the queue as above.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::capabilities::RowsAndErrors;
use crossbeam_channel::{unbounded, Receiver, Sender};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::lineage::append_hop;
use weir_engine::request::{RequestError, RowError};
use weir_engine::runtime::AdmissionGauge;
use weir_engine::trace::{hop_span_id, wall_time, HopRecord, JobTrace, SpanContext};

use super::executor::Job;
use super::expiry::Deadlines;
use super::replicas::InferenceService;
use super::ExecError;

/// How long a job refused by a full queue waits before it is offered again.
const RETRY_AFTER: Duration = Duration::from_micros(200);

/// Lineage identity and column names of one model node.
#[derive(Debug, Clone)]
pub struct ModelOperator {
    /// Node id.
    pub node: String,
    /// This node's lineage id.
    pub lineage_id: u32,
    /// Lineage ids of its producers.
    pub producer_ids: Vec<u32>,
    /// Batch columns feeding the model inputs, in executor input order.
    pub input_columns: Vec<String>,
    /// Batch column names for the model outputs, in executor output order.
    pub output_columns: Vec<Arc<str>>,
    /// The rows' deadlines, and the count of rows not run because theirs passed.
    pub deadlines: Deadlines,
    /// Whether a lone job may run on the worker while the executor is idle (for a graph's only
    /// model node; see the module doc).
    pub run_here: bool,
    /// The graph's admission counters: with them, a lone job runs here only when it holds every
    /// request in flight (`None`, in a cluster: whenever it is lone).
    pub in_flight: Option<AdmissionGauge>,
}

struct InFlight {
    caps: RowsAndErrors,
    batch: Batch,
    seq: u64,
    traced: Option<Traced>,
}

/// A job holding sampled rows: its trace, those rows' requests, and when it was made.
struct Traced {
    trace: JobTrace,
    requests: Vec<u64>,
    enqueued_at: Instant,
}

type Completion = (u64, Result<Vec<TensorColumn>, ExecError>);

impl ModelOperator {
    /// Builds the operator on `input`, serving it with `executor` (one executor or a replica pool).
    pub fn build<'s>(
        self,
        input: BatchStream<'s>,
        executor: Arc<dyn InferenceService>,
    ) -> (BatchStream<'s>, ErrorStream<'s>) {
        let scope = input.scope();
        let peers = scope.peers() as u64;
        let worker = scope.index() as u64;
        let mut builder = OperatorBuilder::new(format!("model/{}", self.node), scope);
        let info = builder.operator_info();
        let mut input = builder.new_input(input, Pipeline);
        let (ok, ok_stream) = builder.new_output();
        let (err, err_stream) = builder.new_output();
        let mut ok = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(ok);
        let mut err = OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(err);
        let sync = scope.worker().sync_activator_for(info.address.to_vec());
        let retry = scope.activator_for(info.address.clone());
        let (tx, rx): (Sender<Completion>, Receiver<Completion>) = unbounded();
        let op = self;
        builder.build_reschedule(move |_caps| {
            let sync = Arc::new(sync);
            let mut in_flight: HashMap<u64, InFlight> = HashMap::new();
            let mut pending: VecDeque<(u64, Job)> = VecDeque::new();
            let mut next_token: u64 = 0;
            let mut batches_seen: u64 = 0;
            move |_frontiers| {
                let mut ok_out = ok.activate();
                let mut err_out = err.activate();
                // Twice when a job ran here: its result is emitted in this same activation.
                let mut offered = false;
                loop {
                    // 1. Results that came back.
                    while let Ok((token, outcome)) = rx.try_recv() {
                        let Some(f) = in_flight.remove(&token) else {
                            continue;
                        };
                        if let Some(t) = &f.traced {
                            op.record_hop(t, f.seq, f.batch.num_rows());
                        }
                        match outcome.and_then(|cols| op.output_batch(&f, cols)) {
                            Ok(batch) => ok_out.session(&f.caps.rows).give(batch),
                            Err(e) => {
                                let error = Arc::new(match e {
                                    ExecError::Expired { late_ms, .. } => {
                                        op.deadlines.count_expired(f.batch.num_rows());
                                        RequestError::Expired {
                                            node: op.node.clone(),
                                            late_ms,
                                        }
                                    }
                                    // Nothing ran: the client may retry (503, UNAVAILABLE).
                                    e @ ExecError::Unavailable { .. } => {
                                        RequestError::NodeUnavailable {
                                            node: op.node.clone(),
                                            message: e.detail(),
                                        }
                                    }
                                    e => RequestError::Node {
                                        node: op.node.clone(),
                                        message: e.detail(),
                                    },
                                });
                                let mut s = err_out.session(&f.caps.errors);
                                for &id in f.batch.request_ids() {
                                    s.give(RowError {
                                        request_id: id,
                                        error: Arc::clone(&error),
                                    });
                                }
                            }
                        }
                    }
                    if offered {
                        break;
                    }
                    offered = true;
                    // 2. New input, cut into jobs. The first batch to reach a node with nothing
                    //    of this operator's queued or running may be cut finer, one job per free
                    //    session, when that pays (`InferenceService::rows_per_job_now`).
                    let mut may_spread = pending.is_empty() && in_flight.is_empty();
                    input.for_each(|cap, data| {
                        let Some(caps) = RowsAndErrors::retain(&cap) else {
                            return;
                        };
                        for batch in data.drain(..) {
                            let seq = batches_seen * peers + worker;
                            batches_seen += 1;
                            let per_job = if std::mem::take(&mut may_spread) {
                                executor.rows_per_job_now(batch.num_rows())
                            } else {
                                executor.preferred_rows_per_job()
                            };
                            let mut offset = 0;
                            while offset < batch.num_rows() {
                                let n = per_job.min(batch.num_rows() - offset);
                                let part = batch.slice(offset, n);
                                offset += n;
                                let columns: Option<Vec<TensorColumn>> = op
                                    .input_columns
                                    .iter()
                                    .map(|c| part.tensor(c).cloned())
                                    .collect();
                                let token = next_token;
                                next_token += 1;
                                let Some(columns) = columns else {
                                    let error = Arc::new(RequestError::Node {
                                        node: op.node.clone(),
                                        message: "an input column is missing from the batch".into(),
                                    });
                                    let mut s = err_out.session(&caps.errors);
                                    for &id in part.request_ids() {
                                        s.give(RowError {
                                            request_id: id,
                                            error: Arc::clone(&error),
                                        });
                                    }
                                    continue;
                                };
                                let (tx, sync) = (tx.clone(), Arc::clone(&sync));
                                let enqueued_at = Instant::now();
                                let traced = op.traced(part.request_ids(), seq, enqueued_at);
                                let job = Job {
                                    inputs: columns,
                                    enqueued_at,
                                    deadline: op.deadlines.of_rows(part.request_ids()),
                                    trace: traced.as_ref().map(|t| t.trace.clone()),
                                    done: Box::new(move |outcome| {
                                        let _ = tx.send((token, outcome));
                                        let _ = sync.activate();
                                    }),
                                };
                                in_flight.insert(
                                    token,
                                    InFlight {
                                        caps: caps.clone(),
                                        batch: part,
                                        seq,
                                        traced,
                                    },
                                );
                                pending.push_back((token, job));
                            }
                        }
                    });
                    // 3. Offer pending jobs until the queue is full; one whose rows nobody waits
                    //    for any more is answered instead (its outcome arrives on the channel).
                    let now = Instant::now();
                    let lone = op.run_here
                        && match pending.front() {
                            Some((_, job)) if pending.len() == 1 => op.holds_every_request(job),
                            _ => false,
                        };
                    let mut ran_here = false;
                    while let Some((token, job)) = pending.pop_front() {
                        let Some(job) = job.unless_expired(&op.node, now) else {
                            continue;
                        };
                        let job = if lone {
                            match executor.try_run_here(job) {
                                Ok(()) => {
                                    ran_here = true;
                                    continue;
                                }
                                Err(job) => job,
                            }
                        } else {
                            job
                        };
                        if let Err(job) = executor.try_submit(job) {
                            pending.push_front((token, job));
                            retry.activate_after(RETRY_AFTER);
                            break;
                        }
                    }
                    if !ran_here {
                        break;
                    }
                }
                !in_flight.is_empty()
            }
        });
        (ok_stream, err_stream)
    }

    /// Whether `job` holds every request in flight in the graph ([`holds_every_request`]).
    fn holds_every_request(&self, job: &Job) -> bool {
        holds_every_request(
            self.in_flight.as_ref().map(AdmissionGauge::in_flight),
            job.rows(),
        )
    }

    /// The trace of a job of batch `seq` holding the rows of `request_ids`, if any is sampled.
    fn traced(&self, request_ids: &[u64], seq: u64, enqueued_at: Instant) -> Option<Traced> {
        let (trace_id, requests) = self.deadlines.traces()?.sampled(request_ids)?;
        let span = SpanContext {
            trace_id,
            span_id: hop_span_id(&trace_id, self.lineage_id, seq),
            sampled: true,
        };
        Some(Traced {
            trace: JobTrace::new(span),
            requests,
            enqueued_at,
        })
    }

    /// Keeps the times of an answered job of batch `seq` holding sampled rows.
    fn record_hop(&self, t: &Traced, seq: u64, job_rows: usize) {
        let Some(book) = self.deadlines.traces() else {
            return;
        };
        let call = t.trace.call();
        book.record(
            self.lineage_id,
            seq,
            HopRecord {
                requests: t.requests.clone(),
                start: wall_time(t.enqueued_at),
                end: std::time::SystemTime::now(),
                queue_wait: call.map(|c| c.started.saturating_duration_since(t.enqueued_at)),
                run: call.map(|c| c.ended.saturating_duration_since(c.started)),
                batch_size: call.map(|c| c.rows),
                job_rows,
                replica: t.trace.replica(),
                reconstruction: t.trace.reconstruction(),
            },
        );
    }

    fn output_batch(&self, f: &InFlight, columns: Vec<TensorColumn>) -> Result<Batch, ExecError> {
        let lineage = append_hop(
            f.batch.lineage(),
            &self.producer_ids,
            self.lineage_id,
            f.seq,
        );
        let tensors = self.output_columns.iter().cloned().zip(columns).collect();
        f.batch
            .derive(lineage, tensors)
            .map_err(|e| ExecError::Inference {
                node: self.node.clone(),
                message: e.to_string(),
            })
    }
}

/// Whether a job of `rows` rows holds every request in flight when `in_flight` requests are
/// admitted and not answered (`None`: not known, taken as yes), so that running it on the worker
/// holds up no other request (module doc).
fn holds_every_request(in_flight: Option<usize>, rows: usize) -> bool {
    in_flight.is_none_or(|n| n <= rows)
}

#[cfg(test)]
mod tests {
    use super::holds_every_request;

    #[test]
    fn a_lone_job_runs_here_only_when_no_other_request_is_in_flight() {
        // One client: its request is the only one in flight.
        assert!(holds_every_request(Some(1), 1));
        // Four clients, all four rows in the job: nobody else can need the worker.
        assert!(holds_every_request(Some(4), 4));
        // Four clients, two rows in the job: the other two would wait behind the call.
        assert!(!holds_every_request(Some(4), 2));
        assert!(!holds_every_request(Some(2), 1));
        // In a cluster the count is not known here: a lone job runs here as before.
        assert!(holds_every_request(None, 1));
    }
}
