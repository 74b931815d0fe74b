//! The timely operator of a stateful model node.
//!
//! On each activation: (1) batch results that came back are emitted at their rows' times with a
//! lineage hop carrying the batch's version, and recorded in the proxy; a lost batch is reported
//! to the manager and kept; (2) after a failover (the proxy's epoch moved), kept batches above the
//! rollback cut are dropped (their requests run again from the ingress) and those at or below it
//! are resent to the new primary, which answers them from the outputs its backup role kept;
//! (3) new rows: stale ones (superseded attempts) are dropped, rows of requests that already
//! passed this node on a standing version get their recorded output, the rest are queued;
//! (4) queued rows are cut into batches of at most `max_batch` rows and pipelined to the primary,
//! at most `pipeline` batches at once, a batch that is not full only while none is out (under
//! load batches fill up; at low load a lone row goes at once). The worker never waits on the
//! primary.
//!
//! A per-sequence node's batch also carries each row's sequence controls (`sequence_rows.rs`):
//! rows that name no usable sequence are answered at (4) and never sent, and rows the state holder
//! refused come back at (1) as the rows' errors instead of outputs.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use crate::capabilities::RowsAndErrors;
use arrow_array::UInt64Array;
use crossbeam_channel::{unbounded, Receiver, Sender};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use tracing::debug;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::dataflow::{BatchStream, ErrorStream};
use weir_engine::lineage::{append_hop, LineageView};
use weir_engine::request::{original_id, RequestError, RowError};
use weir_hams::protocol::{Dep, RunHeader};
use weir_hams::sequences::{SequenceControls, SequenceRefusal};
use weir_hams::{Epoch, Seq};

use super::proxy::{Begin, StatefulNodeHandle};
use super::sequence_rows::{clock_ms, controls_of, refusal_error};
use super::{RunFailure, RunOutput, StatefulTransport};
use crate::stateful::step::row_hashes;

/// Column names and identity of one stateful node's operator.
#[derive(Debug, Clone)]
pub struct StatefulOperator {
    /// The node's proxy.
    pub handle: Arc<StatefulNodeHandle>,
    /// Lineage ids of its producers.
    pub producer_ids: Vec<u32>,
    /// Batch columns feeding the row inputs, in the handle's input order.
    pub input_columns: Vec<String>,
    /// Batch column names for the row outputs, in the handle's output order.
    pub output_columns: Vec<Arc<str>>,
}

/// One batch sent to the primary: the queued parts it gathered (each with its time), their
/// concatenated inputs, and what it depends on.
struct InFlight {
    segments: Vec<(RowsAndErrors, Batch)>,
    inputs: Vec<TensorColumn>,
    deps: Vec<Dep>,
    /// A per-sequence node's row controls (sent again with the batch).
    controls: Option<SequenceControls>,
    epoch: Epoch,
    /// When its last send went unanswered (the primary was suspected).
    lost: Option<Instant>,
}

impl InFlight {
    fn request_ids(&self) -> Vec<u64> {
        self.segments
            .iter()
            .flat_map(|(_, p)| p.request_ids().iter().copied())
            .collect()
    }

    /// Sends the batch again, as version `seq`, to `primary` at `epoch`.
    fn send_again(
        &mut self,
        handle: &StatefulNodeHandle,
        transport: &dyn StatefulTransport,
        primary: &str,
        seq: Seq,
        epoch: Epoch,
        done: super::RunDone,
    ) {
        self.epoch = epoch;
        self.lost = None;
        let header = RunHeader {
            epoch,
            seq,
            deps: self.deps.clone(),
            request_ids: originals(&self.request_ids()),
            sequences: self.controls.clone(),
        };
        transport.run(handle, primary, header, self.inputs.clone(), done);
    }
}

type Completion = (Seq, Epoch, Result<RunOutput, RunFailure>);

impl StatefulOperator {
    /// Builds the operator on `input` (which must reach one worker only), running batches over
    /// `transport`.
    pub fn build<'s>(
        self,
        input: BatchStream<'s>,
        transport: Arc<dyn StatefulTransport>,
    ) -> (BatchStream<'s>, ErrorStream<'s>) {
        let scope = input.scope();
        let mut builder = OperatorBuilder::new(format!("stateful/{}", self.handle.node), scope);
        let info = builder.operator_info();
        let mut input = builder.new_input(input, Pipeline);
        let (ok, ok_stream) = builder.new_output();
        let (err, err_stream) = builder.new_output();
        let mut ok = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(ok);
        let mut err = OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(err);
        let sync = Arc::new(scope.worker().sync_activator_for(info.address.to_vec()));
        let retry = scope.activator_for(info.address.clone());
        let detect = self.handle.spec.detect;
        self.handle
            .set_activator(scope.worker().sync_activator_for(info.address.to_vec()));
        let (tx, rx): (Sender<Completion>, Receiver<Completion>) = unbounded();
        let op = self;
        let pipeline = op.handle.spec.pipeline.max(1);
        builder.build_reschedule(move |_caps| {
            let mut in_flight: BTreeMap<Seq, InFlight> = BTreeMap::new();
            let mut queue: VecDeque<(RowsAndErrors, Batch)> = VecDeque::new();
            let mut clock = 0u64;
            move |_frontiers| {
                let mut ok_out = ok.activate();
                let mut err_out = err.activate();
                let handle = &op.handle;
                // 1. Results.
                while let Ok((seq, epoch, outcome)) = rx.try_recv() {
                    let Some(f) = in_flight.get(&seq) else { continue };
                    if f.epoch != epoch {
                        continue; // an older send of a batch resent since
                    }
                    match outcome {
                        Ok(RunOutput { columns, refused }) => {
                            let Some(f) = in_flight.remove(&seq) else {
                                continue;
                            };
                            let refused: HashMap<usize, SequenceRefusal> = refused
                                .iter()
                                .map(|r| (r.row as usize, r.reason))
                                .collect();
                            let mut offset = 0;
                            let mut outputs = Vec::with_capacity(f.segments.len());
                            for (cap, part) in &f.segments {
                                let n = part.num_rows();
                                let sliced: Vec<TensorColumn> =
                                    columns.iter().map(|c| c.slice(offset, n)).collect();
                                let (out, errors) = op.output_rows(part, seq, sliced, |r| {
                                    refused.get(&(offset + r)).copied()
                                });
                                offset += n;
                                outputs.push((cap, part, out, errors));
                            }
                            let mut records = Vec::new();
                            for (_, _, out, _) in &outputs {
                                if let Ok(batch) = out {
                                    let hashes = row_hashes(
                                        &op.output_columns_of(batch),
                                        batch.num_rows(),
                                    );
                                    for (r, &id) in batch.request_ids().iter().enumerate() {
                                        records.push((id, batch.slice(r, 1), hashes[r]));
                                    }
                                }
                            }
                            if !handle.record_batch(seq, epoch, records) {
                                continue; // rolled back meanwhile
                            }
                            for (cap, part, out, errors) in outputs {
                                match out {
                                    Ok(batch) if batch.num_rows() == 0 => {}
                                    Ok(batch) => ok_out.session(&cap.rows).give(batch),
                                    Err(message) => {
                                        fail_rows(&mut err_out, cap, part, &handle.node, message)
                                    }
                                }
                                let mut s = err_out.session(&cap.errors);
                                for e in errors {
                                    s.give(e);
                                }
                            }
                        }
                        Err(RunFailure::Lost(why)) => {
                            debug!(node = %handle.node, seq, epoch, %why, "Batch lost; primary suspected.");
                            if let Some(f) = in_flight.get_mut(&seq) {
                                f.lost = Some(Instant::now());
                            }
                            handle.suspect(epoch, why);
                            retry.activate_after(detect);
                        }
                        Err(RunFailure::Failed(message)) => {
                            if let Some(f) = in_flight.remove(&seq) {
                                for (cap, part) in &f.segments {
                                    fail_rows(&mut err_out, cap, part, &handle.node, message.clone());
                                }
                            }
                        }
                    }
                }
                // 2. After a failover: drop what was rolled back, resend what stands.
                let (epoch_now, last_seq, paused, primary) = handle.position();
                if !paused {
                    if let Some(primary) = &primary {
                        let stale: Vec<Seq> = in_flight
                            .iter()
                            .filter(|(_, f)| f.epoch < epoch_now)
                            .map(|(&s, _)| s)
                            .collect();
                        for seq in stale {
                            if seq > last_seq {
                                in_flight.remove(&seq);
                                continue;
                            }
                            if let Some(f) = in_flight.get_mut(&seq) {
                                let done = completion(&tx, &sync, seq, epoch_now);
                                f.send_again(handle, &*transport, primary, seq, epoch_now, done);
                            }
                        }
                    }
                }
                // 2a. A batch lost at the current epoch and not failed over (no backup to promote,
                // or a primary merely slower than `detect_ms`, say while replaying): send it
                // again to the same primary, which answers a version it already made from its
                // kept replies instead of running it twice.
                if !paused {
                    if let Some(primary) = &primary {
                        for (&seq, f) in in_flight.iter_mut() {
                            let due = f.epoch == epoch_now
                                && f.lost.is_some_and(|at| at.elapsed() >= detect);
                            if !due {
                                continue;
                            }
                            let done = completion(&tx, &sync, seq, epoch_now);
                            f.send_again(handle, &*transport, primary, seq, epoch_now, done);
                        }
                    }
                }
                if in_flight.values().any(|f| f.lost.is_some()) {
                    retry.activate_after(detect / 4);
                }
                // 2b. After a failover under checkpoints: replay every batch since the
                // checkpoint that is not resent above; its replies were given already.
                if !paused {
                    if let Some(primary) = &primary {
                        for (seq, request_ids, inputs) in handle.take_replay() {
                            if in_flight.contains_key(&seq) {
                                continue;
                            }
                            let header = RunHeader {
                                epoch: epoch_now,
                                seq,
                                deps: Vec::new(),
                                request_ids,
                                sequences: None,
                            };
                            transport.run(handle, primary, header, inputs, Box::new(|_| {}));
                        }
                    }
                }
                // 3. New rows.
                input.for_each(|cap, data| {
                    let Some(cap) = RowsAndErrors::retain(&cap) else {
                        return;
                    };
                    for batch in data.drain(..) {
                        let mut kept: Vec<u32> = Vec::with_capacity(batch.num_rows());
                        for (r, &id) in batch.request_ids().iter().enumerate() {
                            if !handle.is_live(id) {
                                continue;
                            }
                            match handle.replay(id) {
                                Some(row) => match row.with_request_ids(UInt64Array::from(vec![id])) {
                                    Ok(row) => ok_out.session(&cap.rows).give(row),
                                    Err(_) => kept.push(r as u32),
                                },
                                None => kept.push(r as u32),
                            }
                        }
                        if kept.len() == batch.num_rows() {
                            queue.push_back((cap.clone(), batch));
                        } else if !kept.is_empty() {
                            if let Ok(part) = batch.take(&kept) {
                                queue.push_back((cap.clone(), part));
                            }
                        }
                    }
                });
                // 4. Send: gather queued parts up to `max_batch` rows per batch.
                while in_flight.len() < pipeline && !queue.is_empty() {
                    // While a batch is out, wait for a full one: under load batches fill up
                    // (the primary runs them one after another anyway); at low load a lone
                    // row goes at once.
                    let queued: usize = queue.iter().map(|(_, p)| p.num_rows()).sum();
                    if !in_flight.is_empty() && queued < handle.max_batch {
                        break;
                    }
                    let mut segments: Vec<(RowsAndErrors, Batch)> = Vec::new();
                    let mut rows = 0;
                    while rows < handle.max_batch {
                        let Some((cap, mut part)) = queue.pop_front() else {
                            break;
                        };
                        let room = handle.max_batch - rows;
                        if part.num_rows() > room {
                            let rest = part.slice(room, part.num_rows() - room);
                            queue.push_front((cap.clone(), rest));
                            part = part.slice(0, room);
                        }
                        rows += part.num_rows();
                        segments.push((cap, part));
                    }
                    let mut controls = None;
                    if handle.spec.sequences.is_some() {
                        clock = clock_ms(clock);
                        let (kept, c, refused) = controls_of(segments, clock);
                        for (cap, e) in refused {
                            err_out.session(&cap.errors).give(e);
                        }
                        if kept.is_empty() {
                            continue;
                        }
                        segments = kept;
                        controls = Some(c);
                    }
                    let ids: Vec<u64> = segments
                        .iter()
                        .flat_map(|(_, p)| p.request_ids().iter().copied())
                        .collect();
                    let deps = op.deps_of(segments.iter().map(|(_, p)| p));
                    match handle.begin(ids.clone(), deps.clone()) {
                        Begin::Paused => {
                            for seg in segments.into_iter().rev() {
                                queue.push_front(seg);
                            }
                            break;
                        }
                        Begin::Stale => {
                            for (cap, part) in segments.into_iter().rev() {
                                let live: Vec<u32> = part
                                    .request_ids()
                                    .iter()
                                    .enumerate()
                                    .filter(|(_, &id)| handle.is_live(id))
                                    .map(|(r, _)| r as u32)
                                    .collect();
                                if !live.is_empty() {
                                    if let Ok(p) = part.take(&live) {
                                        queue.push_front((cap, p));
                                    }
                                }
                            }
                        }
                        Begin::Sent(seq, epoch, primary) => {
                            let inputs = op.gather_inputs(&segments);
                            let header = RunHeader {
                                epoch,
                                seq,
                                deps: deps.clone(),
                                request_ids: originals(&ids),
                                sequences: controls.clone(),
                            };
                            let done = completion(&tx, &sync, seq, epoch);
                            handle.log_inputs(seq, &header.request_ids, &inputs);
                            transport.run(handle, &primary, header, inputs.clone(), done);
                            in_flight.insert(
                                seq,
                                InFlight {
                                    segments,
                                    inputs,
                                    deps,
                                    controls,
                                    epoch,
                                    lost: None,
                                },
                            );
                        }
                    }
                }
                !in_flight.is_empty() || !queue.is_empty()
            }
        });
        (ok_stream, err_stream)
    }

    /// Per upstream replicated node, the highest version any row of `parts` passed it at.
    fn deps_of<'a>(&self, parts: impl Iterator<Item = &'a Batch>) -> Vec<Dep> {
        let mut deps: Vec<Dep> = Vec::new();
        for part in parts {
            let view = LineageView::new(part.lineage());
            for row in 0..part.num_rows() {
                for e in view.row(row) {
                    if e.node == self.handle.node_id || !self.handle.replicated.contains(&e.node) {
                        continue;
                    }
                    match deps.iter_mut().find(|(n, _)| *n == e.node) {
                        Some(d) => d.1 = d.1.max(e.seq),
                        None => deps.push((e.node, e.seq)),
                    }
                }
            }
        }
        deps.sort_unstable();
        deps
    }

    /// The row inputs of every segment, one column per input, rows in segment order.
    fn gather_inputs(&self, segments: &[(RowsAndErrors, Batch)]) -> Vec<TensorColumn> {
        self.input_columns
            .iter()
            .filter_map(|name| {
                let cols: Vec<&TensorColumn> = segments
                    .iter()
                    .filter_map(|(_, p)| p.tensor(name))
                    .collect();
                concat_rows(name, &cols)
            })
            .collect()
    }

    fn output_batch(
        &self,
        part: &Batch,
        seq: Seq,
        columns: Vec<TensorColumn>,
    ) -> Result<Batch, String> {
        if columns.len() != self.output_columns.len() {
            return Err(format!(
                "the primary returned {} outputs, expected {}",
                columns.len(),
                self.output_columns.len()
            ));
        }
        let lineage = append_hop(part.lineage(), &self.producer_ids, self.handle.node_id, seq);
        let tensors = self.output_columns.iter().cloned().zip(columns).collect();
        part.derive(lineage, tensors).map_err(|e| e.to_string())
    }

    /// The output batch of `part` (its rows' outputs `columns`, made at version `seq`) without
    /// the rows `refused` names (by row of `part`), and an error for each of those.
    fn output_rows(
        &self,
        part: &Batch,
        seq: Seq,
        columns: Vec<TensorColumn>,
        refused: impl Fn(usize) -> Option<SequenceRefusal>,
    ) -> (Result<Batch, String>, Vec<RowError>) {
        let mut keep = Vec::with_capacity(part.num_rows());
        let mut errors = Vec::new();
        for (r, &id) in part.request_ids().iter().enumerate() {
            match refused(r) {
                Some(reason) => errors.push(RowError {
                    request_id: id,
                    error: Arc::new(refusal_error(&self.handle.node, reason)),
                }),
                None => keep.push(r as u32),
            }
        }
        let out = self.output_batch(part, seq, columns);
        if errors.is_empty() {
            return (out, errors);
        }
        let kept = out.and_then(|b| b.take(&keep).map_err(|e| e.to_string()));
        (kept, errors)
    }

    fn output_columns_of(&self, batch: &Batch) -> Vec<TensorColumn> {
        self.output_columns
            .iter()
            .filter_map(|c| batch.tensor(c).cloned())
            .collect()
    }
}

/// Request ids as admitted (the journal follows requests across attempts).
fn originals(ids: &[u64]) -> Vec<u64> {
    ids.iter().map(|&id| original_id(id)).collect()
}

fn completion(
    tx: &Sender<Completion>,
    sync: &Arc<timely::scheduling::SyncActivator>,
    seq: Seq,
    epoch: Epoch,
) -> super::RunDone {
    let (tx, sync) = (tx.clone(), Arc::clone(sync));
    Box::new(move |outcome| {
        let _ = tx.send((seq, epoch, outcome));
        let _ = sync.activate();
    })
}

/// The rows of `cols` (same name, type and row shape) one after another.
fn concat_rows(name: &str, cols: &[&TensorColumn]) -> Option<TensorColumn> {
    let first = cols.first()?;
    if cols.len() == 1 {
        return Some((*first).clone());
    }
    TensorColumn::concat(name, cols).ok()
}

fn fail_rows(
    err_out: &mut timely::dataflow::operators::generic::OutputBuilderSession<
        '_,
        u64,
        CapacityContainerBuilder<Vec<RowError>>,
    >,
    cap: &RowsAndErrors,
    part: &Batch,
    node: &str,
    message: String,
) {
    let error = Arc::new(RequestError::Node {
        node: node.to_string(),
        message,
    });
    let mut s = err_out.session(&cap.errors);
    for &id in part.request_ids() {
        s.give(RowError {
            request_id: id,
            error: Arc::clone(&error),
        });
    }
}
