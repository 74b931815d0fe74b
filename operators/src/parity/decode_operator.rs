//! The parity decoder operator of a parity-coded node: it joins the encoder's tags, the deployed
//! model operator's rows and errors and every parity model operator's outputs by coding group,
//! feeds them to the node's [`Book`], and emits each job's answer — its real prediction, or its
//! reconstruction — with a 0/1 `reconstructed` column, or its error, once.
//!
//! Capabilities: the decoder holds one per job (rows and errors), retained from the job's tag,
//! and drops it when the job is answered. The data and parity inputs are *not connected* to its
//! outputs: a job held by a frozen replica holds the deployed model operator's capability, and
//! with a connected input the node's output frontier would wait for it even after the decoder
//! answered the job from the parity path. Disconnected, the node's frontier waits only for jobs
//! the decoder has not answered. Deadlines wake the operator through its activator
//! ([`Book::next_wake`]); the worker never waits on them.
//!
//! A prediction finds its job by its first row's request id and lineage key (the model hop keeps
//! both), an error by its request id, one row at a time in dispatch order (see
//! [`super::tag`]); a parity output finds its group and rows by its request ids.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::progress::Antichain;
use tracing::debug;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::compile::ParityJoined;
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::lineage::{append_hop, LineageView, RowKey};
use weir_engine::request::{RequestError, RowError};
use weir_engine::tensor::TensorData;

use super::decoder::{Answer, Book};
use super::tag::{parity_row_of, Tag};
use super::trace::{record, Rebuilt};
use super::ParityNode;
use crate::capabilities::RowsAndErrors;
use crate::model::expiry::Deadlines;

/// Lineage identity and column names of a parity-coded node, as its decoder writes them.
#[derive(Debug, Clone)]
pub struct DecodeOperator {
    /// Node id.
    pub node: String,
    /// The node's lineage id.
    pub lineage_id: u32,
    /// Lineage ids of its producers.
    pub producer_ids: Vec<u32>,
    /// The deployed model's output columns, in its output order.
    pub output_columns: Vec<Arc<str>>,
    /// The column flagging reconstructed rows.
    pub flag_column: Arc<str>,
    /// Where sampled requests' hops are recorded.
    pub deadlines: Deadlines,
}

/// A job the decoder holds.
struct Live {
    /// Its tag batch: request ids, lineage and parameters.
    tag: Batch,
    /// Held until it is answered.
    caps: Option<RowsAndErrors>,
    /// Its rows whose error has not come (it is back once all have, or its prediction has).
    errors_due: usize,
    /// Its hop's sequence number (as the deployed model operator numbers it).
    hop: u64,
    dispatched: Instant,
}

type Rows = OutputBuilder<u64, CapacityContainerBuilder<Vec<Batch>>>;
type Errs = OutputBuilder<u64, CapacityContainerBuilder<Vec<RowError>>>;

impl DecodeOperator {
    /// Builds the decoder of `node` on `joined`: the node's output and error streams.
    pub fn build<'s>(
        self,
        node: &ParityNode,
        joined: ParityJoined<'s>,
    ) -> (BatchStream<'s>, ErrorStream<'s>) {
        let scope = joined.tags.scope();
        let (peers, worker) = (scope.peers() as u64, scope.index() as u64);
        let mut builder = OperatorBuilder::new(format!("parity_decode/{}", self.node), scope);
        let info = builder.operator_info();
        let mut tags = builder.new_input(joined.tags, Pipeline);
        // Only the tags (input 0) are connected to the outputs; the inputs added after them are
        // not (see the module doc).
        let tags_only = || [(0, Antichain::from_elem(0u64))];
        let (ok, ok_stream) = builder.new_output_connection(tags_only());
        let (err, err_stream) = builder.new_output_connection(tags_only());
        let none = std::iter::empty::<(usize, Antichain<u64>)>;
        let (data_ok, data_err) = joined.data;
        let mut data_ok = builder.new_input_connection(data_ok, Pipeline, none());
        let mut data_err = builder.new_input_connection(data_err, Pipeline, none());
        let mut parity = Vec::new();
        for (p_ok, p_err) in joined.parity {
            parity.push((
                builder.new_input_connection(p_ok, Pipeline, none()),
                builder.new_input_connection(p_err, Pipeline, none()),
            ));
        }
        let mut ok = Rows::from(ok);
        let mut err = Errs::from(err);
        let activator = scope.activator_for(info.address.clone());
        let shared = node.clone();
        let op = self;
        builder.build(move |_caps| {
            let mut book = Book::new(Arc::clone(&shared.decoder));
            let mut live: HashMap<u64, Live> = HashMap::new();
            let mut by_key: HashMap<RowKey, VecDeque<u64>> = HashMap::new();
            let mut by_request: HashMap<u64, VecDeque<u64>> = HashMap::new();
            let mut next_member: u64 = 0;
            move |_frontiers| {
                let mut ok_out = ok.activate();
                let mut err_out = err.activate();
                let now = Instant::now();
                // 1. Tags first: a job's prediction never overtakes its tag.
                tags.for_each(|cap, batches| {
                    let Some(caps) = RowsAndErrors::retain(&cap) else {
                        return;
                    };
                    for batch in batches.drain(..) {
                        let Some(tag) = Tag::of(&batch) else {
                            debug!(node = %op.node, "A job came without its coding tag.");
                            continue;
                        };
                        let seq = next_member;
                        next_member += 1;
                        let key = LineageView::new(batch.lineage())
                            .row_key(0, batch.request_ids().first().copied().unwrap_or(0));
                        by_key.entry(key).or_default().push_back(seq);
                        for &id in batch.request_ids() {
                            by_request.entry(id).or_default().push_back(seq);
                        }
                        book.admit(seq, tag, batch.num_rows(), now);
                        live.insert(
                            seq,
                            Live {
                                errors_due: batch.num_rows(),
                                tag: batch,
                                caps: Some(caps.clone()),
                                hop: seq * peers + worker,
                                dispatched: now,
                            },
                        );
                    }
                });
                // 2. The deployed model's predictions and errors.
                let mut reals: Vec<(u64, Batch)> = Vec::new();
                data_ok.for_each(|_cap, batches| {
                    for batch in batches.drain(..) {
                        let Some(&first) = batch.request_ids().first() else {
                            continue;
                        };
                        let key = LineageView::new(batch.lineage()).row_key(0, first);
                        let Some(seq) = by_key.get_mut(&key).and_then(VecDeque::pop_front) else {
                            book.on_real(u64::MAX, Vec::new(), now);
                            continue;
                        };
                        if by_key.get(&key).is_some_and(VecDeque::is_empty) {
                            by_key.remove(&key);
                        }
                        if let Some(l) = live.get_mut(&seq) {
                            l.errors_due = 0;
                            forget_rows(&mut by_request, l.tag.request_ids(), seq);
                        }
                        let columns: Vec<TensorColumn> = op
                            .output_columns
                            .iter()
                            .filter_map(|c| batch.tensor(c).cloned())
                            .collect();
                        if book.on_real(seq, columns, now) {
                            reals.push((seq, batch));
                        }
                    }
                });
                data_err.for_each(|_cap, errors| {
                    for e in errors.drain(..) {
                        let Some(seq) = by_request
                            .get_mut(&e.request_id)
                            .and_then(VecDeque::pop_front)
                        else {
                            continue;
                        };
                        if by_request
                            .get(&e.request_id)
                            .is_some_and(VecDeque::is_empty)
                        {
                            by_request.remove(&e.request_id);
                        }
                        let Some(l) = live.get_mut(&seq) else {
                            continue;
                        };
                        let first = l.errors_due == l.tag.num_rows();
                        l.errors_due = l.errors_due.saturating_sub(1);
                        if l.errors_due == 0 {
                            forget_key(&mut by_key, &l.tag, seq);
                        }
                        if first {
                            book.on_error(seq, e.error, now);
                        }
                    }
                });
                // 3. The parity models' outputs and errors.
                for (t, (p_ok, p_err)) in parity.iter_mut().enumerate() {
                    p_ok.for_each(|_cap, batches| {
                        for batch in batches.drain(..) {
                            let Some(&first) = batch.request_ids().first() else {
                                continue;
                            };
                            let (group, row) = parity_row_of(first);
                            let columns: Vec<TensorColumn> = op
                                .output_columns
                                .iter()
                                .filter_map(|c| batch.tensor(c).cloned())
                                .collect();
                            shared.encoder.count_answer(t, true);
                            book.on_parity(group, t, row, columns, now);
                        }
                    });
                    p_err.for_each(|_cap, errors| {
                        let mut failed = Vec::new();
                        for e in errors.drain(..) {
                            let (group, _) = parity_row_of(e.request_id);
                            if !failed.contains(&group) {
                                failed.push(group);
                            }
                        }
                        for group in failed {
                            shared.encoder.count_answer(t, false);
                            book.on_parity_failed(group, t, now);
                        }
                    });
                }
                // 4. Deadlines due.
                book.on_time(now);
                // 5. Answers: real predictions, then what the book decided.
                for (seq, batch) in reals {
                    let Some(l) = live.get_mut(&seq) else {
                        continue;
                    };
                    let Some(caps) = l.caps.take() else { continue };
                    match op.flagged(&batch, false) {
                        Ok(b) => ok_out.session(&caps.rows).give(b),
                        Err(e) => {
                            let mut s = err_out.session(&caps.errors);
                            for row in op.fail_rows(&l.tag, e) {
                                s.give(row);
                            }
                        }
                    }
                }
                for answer in book.take_answers() {
                    match answer {
                        Answer::Reconstructed {
                            member,
                            columns,
                            reason,
                            group,
                            unavailable_at,
                        } => {
                            let Some(l) = live.get_mut(&member) else {
                                continue;
                            };
                            let Some(caps) = l.caps.take() else { continue };
                            if let Some(book) = op.deadlines.traces() {
                                let rebuilt = Rebuilt {
                                    group,
                                    k: shared.decoder.k(),
                                    reason,
                                    dispatched: l.dispatched,
                                    unavailable_at,
                                };
                                record(
                                    book,
                                    op.lineage_id,
                                    l.hop,
                                    l.tag.request_ids(),
                                    l.tag.num_rows(),
                                    rebuilt,
                                );
                            }
                            match op.rebuilt(&l.tag, l.hop, columns) {
                                Ok(b) => ok_out.session(&caps.rows).give(b),
                                Err(e) => {
                                    let mut s = err_out.session(&caps.errors);
                                    for row in op.fail_rows(&l.tag, e) {
                                        s.give(row);
                                    }
                                }
                            }
                        }
                        Answer::Error { member, error } => {
                            let Some(l) = live.get_mut(&member) else {
                                continue;
                            };
                            let Some(caps) = l.caps.take() else { continue };
                            let mut s = err_out.session(&caps.errors);
                            for &id in l.tag.request_ids() {
                                s.give(RowError {
                                    request_id: id,
                                    error: Arc::clone(&error),
                                });
                            }
                        }
                    }
                }
                // 6. Forget jobs answered and back; wake for the next deadline.
                live.retain(|_, l| l.caps.is_some() || l.errors_due > 0);
                if let Some(at) = book.next_wake() {
                    activator.activate_after(at.saturating_duration_since(Instant::now()));
                }
            }
        });
        (ok_stream, err_stream)
    }

    /// The model's output batch `batch` with the flag column.
    fn flagged(&self, batch: &Batch, reconstructed: bool) -> Result<Batch, String> {
        let mut tensors = batch.tensors().to_vec();
        tensors.push((
            Arc::clone(&self.flag_column),
            flag(batch.num_rows(), reconstructed)?,
        ));
        batch
            .derive(batch.lineage().clone(), tensors)
            .map_err(|e| e.to_string())
    }

    /// The rows of job `tag` answered with reconstructed `columns`, under hop `seq`.
    fn rebuilt(&self, tag: &Batch, seq: u64, columns: Vec<TensorColumn>) -> Result<Batch, String> {
        let lineage = append_hop(tag.lineage(), &self.producer_ids, self.lineage_id, seq);
        let mut tensors: Vec<(Arc<str>, TensorColumn)> =
            self.output_columns.iter().cloned().zip(columns).collect();
        tensors.push((Arc::clone(&self.flag_column), flag(tag.num_rows(), true)?));
        tag.derive(lineage, tensors).map_err(|e| e.to_string())
    }

    /// Answers every row of job `tag` with `message` (a batch the decoder could not build).
    fn fail_rows(&self, tag: &Batch, message: String) -> Vec<RowError> {
        let error = Arc::new(RequestError::Node {
            node: self.node.clone(),
            message,
        });
        tag.request_ids()
            .iter()
            .map(|&id| RowError {
                request_id: id,
                error: Arc::clone(&error),
            })
            .collect()
    }
}

/// A 0/1 column saying which rows were reconstructed.
fn flag(rows: usize, reconstructed: bool) -> Result<TensorColumn, String> {
    TensorColumn::from_data(
        weir_engine::validate::RECONSTRUCTED_OUTPUT,
        vec![1],
        rows,
        TensorData::I64(vec![i64::from(reconstructed); rows]),
    )
    .map_err(|e| e.to_string())
}

/// Drops one entry of `seq` per row of `ids` from the error index.
fn forget_rows(by_request: &mut HashMap<u64, VecDeque<u64>>, ids: &[u64], seq: u64) {
    for id in ids {
        if let Some(q) = by_request.get_mut(id) {
            if let Some(i) = q.iter().position(|&s| s == seq) {
                q.remove(i);
            }
            if q.is_empty() {
                by_request.remove(id);
            }
        }
    }
}

/// Drops `seq` from the prediction index (its job's errors all came).
fn forget_key(by_key: &mut HashMap<RowKey, VecDeque<u64>>, tag: &Batch, seq: u64) {
    let Some(&first) = tag.request_ids().first() else {
        return;
    };
    let key = LineageView::new(tag.lineage()).row_key(0, first);
    if let Some(q) = by_key.get_mut(&key) {
        if let Some(i) = q.iter().position(|&s| s == seq) {
            q.remove(i);
        }
        if q.is_empty() {
            by_key.remove(&key);
        }
    }
}
