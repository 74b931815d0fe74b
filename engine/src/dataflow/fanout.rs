//! The fan-out pair: `split` turns each request's row into one row per part, `gather` joins a
//! request's parts back into one row.
//!
//! A fan-out node (`crop_boxes`) computes, per request, outputs whose first axis counts its parts.
//! [`split_parts`] cuts each such row along that axis: part `i` of `n` becomes a row of the same
//! request id whose lineage gains the part entry `(PART, i << 32 | n, node, seq)`, and a *parent*
//! row (the request's id, lineage and parameters, and `n`) goes to the gathers that close the
//! fan-out, so a request with no parts is still answered. Parts are ordinary rows for every node
//! in between: model nodes batch the parts of many requests together.
//!
//! [`gather_parts`] keeps, per epoch, each parent and the parts that arrived for it (by
//! [`RowKey`], so nested fan-outs and retried parts are told apart; a part seen twice counts
//! once). When a parent has all its parts it emits one row: each gathered column is the parts'
//! tensors stacked along a new first axis in part order, plus the count. A part that failed
//! reported its error to the egress under the request's id, which answers the request once; its
//! siblings are dropped when the epoch closes, as the join drops a failed branch's partner.
//! The gather counts what it joined, failed and dropped, and how long joins waited for their
//! last part, into its node's [`GatherStats`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, StringArray, UInt32Array, UInt64Array};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Capability;
use timely::dataflow::Scope;
use tracing::{debug, error};

use super::gather_stats::GatherStats;
use super::{BatchStream, ErrorStream};
use crate::batch::{Batch, BatchError, TensorColumn, LINEAGE, PARAMETERS};
use crate::lineage::{LineageBuilder, LineageEntry, LineageView, RowKey};
use crate::plan::GatherPlan;
use crate::request::{RequestError, RowError};
use crate::tensor::{DType, Dim, Tensor, TensorData};

/// The column of a parent row that holds its part count (`i64 []`).
pub const PART_COUNT: &str = "weir.part_count";

/// The error a request gets when node `node` cannot split or gather it.
fn node_error(node: &str, message: String) -> Arc<RequestError> {
    Arc::new(RequestError::Node {
        node: node.to_string(),
        message,
    })
}

/// Splits every row of `rows` (the output of fan-out node `node`, lineage id `lineage_id`) into
/// its parts. Returns the parts, the parents (for the gathers) and the rows that could not be
/// split (outputs that disagree on the part count: a fault of the node, reported, never dropped).
pub fn split_parts<'s>(
    rows: BatchStream<'s>,
    node: &str,
    lineage_id: u32,
) -> (BatchStream<'s>, BatchStream<'s>, ErrorStream<'s>) {
    let scope = rows.scope();
    let mut builder = OperatorBuilder::new(format!("split/{node}"), scope);
    let mut input = builder.new_input(rows, Pipeline);
    let (parts, parts_stream) = builder.new_output();
    let (parents, parents_stream) = builder.new_output();
    let (errors, errors_stream) = builder.new_output();
    let mut parts = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(parts);
    let mut parents = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(parents);
    let mut errors = OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(errors);
    let node = node.to_string();
    builder.build(move |_caps| {
        move |_frontiers| {
            let mut parts_out = parts.activate();
            let mut parents_out = parents.activate();
            let mut errors_out = errors.activate();
            input.for_each(|cap, data| {
                for batch in data.drain(..) {
                    let (split, failed) = split_batch(&batch, lineage_id);
                    for (row, message) in failed {
                        errors_out.session(&cap).give(RowError {
                            request_id: batch.request_ids()[row],
                            error: node_error(&node, message),
                        });
                    }
                    match split {
                        Ok(Some((p, parent))) => {
                            if p.num_rows() > 0 {
                                parts_out.session(&cap).give(p);
                            }
                            parents_out.session(&cap).give(parent);
                        }
                        Ok(None) => {}
                        Err(e) => {
                            let error = node_error(&node, format!("splitting into parts: {e}"));
                            let mut s = errors_out.session(&cap);
                            for &id in batch.request_ids() {
                                s.give(RowError {
                                    request_id: id,
                                    error: Arc::clone(&error),
                                });
                            }
                        }
                    }
                }
            });
        }
    });
    (parts_stream, parents_stream, errors_stream)
}

/// A row's part count: the first axis every output shares, or why there is none.
fn part_count(batch: &Batch, row: usize) -> Result<usize, String> {
    let mut count = None;
    for (name, col) in batch.tensors() {
        let shape = col.row_shape(row);
        let n = *shape
            .first()
            .ok_or_else(|| format!("output `{name}` is a scalar, with no axis of parts"))?;
        match count {
            None => count = Some(n),
            Some(c) if c != n => {
                return Err(format!(
                    "outputs disagree on the part count ({c} and {n} for `{name}`)"
                ))
            }
            Some(_) => {}
        }
    }
    count.ok_or_else(|| "a fan-out node with no outputs".to_string())
}

/// The parts and parents of `batch`, and the rows that could not be split with why.
#[allow(clippy::type_complexity)]
fn split_batch(
    batch: &Batch,
    lineage_id: u32,
) -> (
    Result<Option<(Batch, Batch)>, BatchError>,
    Vec<(usize, String)>,
) {
    let mut failed = Vec::new();
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for row in 0..batch.num_rows() {
        match part_count(batch, row) {
            Ok(n) if u32::try_from(n).is_ok() => kept.push((row, n)),
            Ok(n) => failed.push((row, format!("{n} parts are more than a request may have"))),
            Err(message) => failed.push((row, message)),
        }
    }
    if kept.is_empty() {
        return (Ok(None), failed);
    }
    (split_rows(batch, &kept, lineage_id).map(Some), failed)
}

/// Parts and parents of rows `kept` (row, part count) of `batch`.
fn split_rows(
    batch: &Batch,
    kept: &[(usize, usize)],
    lineage_id: u32,
) -> Result<(Batch, Batch), BatchError> {
    let view = LineageView::new(batch.lineage());
    let total: usize = kept.iter().map(|&(_, n)| n).sum();
    let mut ids = Vec::with_capacity(total);
    let mut picks = Vec::with_capacity(total);
    let mut lineage = LineageBuilder::with_capacity(total, 4);
    for &(row, n) in kept {
        let seq = view.last_seq_at(row, lineage_id).unwrap_or(0);
        for i in 0..n {
            ids.push(batch.request_ids()[row]);
            picks.push(row as u32);
            for e in view.row(row) {
                lineage.push_entry(e);
            }
            // `n` fits u32: checked by the caller.
            lineage.push_entry(LineageEntry::part(lineage_id, seq, i as u32, n as u32));
            lineage.finish_row();
        }
    }
    let mut columns = Vec::with_capacity(batch.tensors().len());
    for (name, col) in batch.tensors() {
        let mut rows = Vec::with_capacity(total);
        for &(row, n) in kept {
            let whole = col.row(row);
            let part_shape = whole.shape[1..].to_vec();
            let per = whole.data.len() / n.max(1);
            for i in 0..n {
                rows.push(Tensor {
                    shape: part_shape.clone(),
                    data: whole.data.slice(i * per..(i + 1) * per),
                });
            }
        }
        let refs: Vec<&Tensor> = rows.iter().collect();
        columns.push((
            Arc::clone(name),
            TensorColumn::from_rows(name, col.dtype(), &refs)?,
        ));
    }
    let params = take_rows(batch.parameters(), &picks, PARAMETERS)?;
    let parts =
        Batch::new(UInt64Array::from(ids), lineage.finish(), columns)?.with_parameters(params)?;
    let parent_rows: Vec<u32> = kept.iter().map(|&(row, _)| row as u32).collect();
    let counts = TensorData::I64(kept.iter().map(|&(_, n)| n as i64).collect());
    let count = TensorColumn::from_data(PART_COUNT, vec![], kept.len(), counts)?;
    let parents = Batch::new(
        UInt64Array::from(
            kept.iter()
                .map(|&(row, _)| batch.request_ids()[row])
                .collect::<Vec<_>>(),
        ),
        take_rows(batch.lineage(), &parent_rows, LINEAGE)?,
        vec![(Arc::from(PART_COUNT), count)],
    )?
    .with_parameters(take_rows(batch.parameters(), &parent_rows, PARAMETERS)?)?;
    Ok((parts, parents))
}

/// Entries `rows` of `column` (the parameters or the lineage), as a column of its own type.
fn take_rows<T: Array + Clone + 'static>(
    column: &T,
    rows: &[u32],
    name: &str,
) -> Result<T, BatchError> {
    let taken = arrow_select::take::take(column, &UInt32Array::from(rows.to_vec()), None)?;
    taken
        .as_any()
        .downcast_ref::<T>()
        .cloned()
        .ok_or_else(|| BatchError::BadColumn {
            column: name.into(),
            problem: "take changed the column type".into(),
        })
}

/// A parent and the parts that arrived for it.
struct Pending {
    /// (index into the epoch's parent batches, row, part count).
    parent: Option<(usize, usize, usize)>,
    /// Part index → (index into the epoch's part batches, row).
    parts: BTreeMap<u32, (usize, usize)>,
    /// When its parent or first part arrived.
    opened: Instant,
}

impl Pending {
    fn new(opened: Instant) -> Self {
        Pending {
            parent: None,
            parts: BTreeMap::new(),
            opened,
        }
    }

    fn complete(&self) -> bool {
        matches!(self.parent, Some((_, _, n)) if self.parts.len() == n)
    }
}

/// Per-epoch gather state.
struct Epoch {
    cap: Capability<u64>,
    parents: Vec<Batch>,
    parts: Vec<Batch>,
    pending: HashMap<RowKey, Pending>,
    complete: Vec<RowKey>,
}

impl Epoch {
    fn new(cap: Capability<u64>) -> Self {
        Epoch {
            cap,
            parents: Vec::new(),
            parts: Vec::new(),
            pending: HashMap::new(),
            complete: Vec::new(),
        }
    }
}

/// What a gather node is: its id, lineage ids and what it writes.
#[derive(Debug, Clone)]
pub struct GatherNode {
    /// Node id.
    pub node: String,
    /// Its lineage id.
    pub lineage_id: u32,
    /// Lineage ids of the nodes its parts come from.
    pub producer_ids: Vec<u32>,
    /// What it joins.
    pub plan: GatherPlan,
    /// Its counters, shared by its operator on every worker.
    pub stats: Arc<GatherStats>,
}

/// Joins the `parts` of every request of `parents` (the parent stream of the fan-out `node.plan`
/// closes) into one row each.
pub fn gather_parts<'s>(
    scope: Scope<'s, u64>,
    node: GatherNode,
    parents: BatchStream<'s>,
    parts: BatchStream<'s>,
) -> (BatchStream<'s>, ErrorStream<'s>) {
    let (peers, worker) = (scope.peers() as u64, scope.index() as u64);
    let mut builder = OperatorBuilder::new(format!("gather/{}", node.node), scope);
    let mut parents_in = builder.new_input(parents, Pipeline);
    let mut parts_in = builder.new_input(parts, Pipeline);
    let (rows, rows_stream) = builder.new_output();
    let (errors, errors_stream) = builder.new_output();
    let mut rows = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(rows);
    let mut errors = OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(errors);
    builder.build(move |_caps| {
        let mut epochs: BTreeMap<u64, Epoch> = BTreeMap::new();
        let mut batches_seen = 0u64;
        move |frontiers| {
            parents_in.for_each(|cap, data| {
                let Some(time) = cap.least().copied() else { return };
                let epoch = epochs
                    .entry(time)
                    .or_insert_with(|| Epoch::new(cap.delayed(&time, 0)));
                for batch in data.drain(..) {
                    take_parents(epoch, batch, &node.stats);
                }
            });
            parts_in.for_each(|cap, data| {
                let Some(time) = cap.least().copied() else { return };
                let epoch = epochs
                    .entry(time)
                    .or_insert_with(|| Epoch::new(cap.delayed(&time, 0)));
                for batch in data.drain(..) {
                    take_parts(epoch, batch, &node);
                }
            });
            let mut rows_out = rows.activate();
            let mut errors_out = errors.activate();
            let mut finished = Vec::new();
            for (time, epoch) in epochs.iter_mut() {
                if !epoch.complete.is_empty() {
                    let keys = std::mem::take(&mut epoch.complete);
                    let seq = batches_seen * peers + worker;
                    batches_seen += 1;
                    let Emitted {
                        batch,
                        failed,
                        joined,
                        waited,
                    } = emit(epoch, &keys, &node, seq);
                    let failed_n = failed.len() as u64;
                    for (id, message) in failed {
                        errors_out.session(&epoch.cap).give(RowError {
                            request_id: id,
                            error: node_error(&node.node, message),
                        });
                    }
                    match batch {
                        Ok(Some(b)) => {
                            node.stats.closed(joined, waited, failed_n);
                            rows_out.session(&epoch.cap).give(b);
                        }
                        Ok(None) => node.stats.closed(0, Duration::ZERO, failed_n),
                        Err(e) => {
                            node.stats.closed(0, Duration::ZERO, failed_n + joined);
                            error!(gather = %node.node, error = %e, "Gather could not build its rows.");
                            let error = node_error(&node.node, format!("joining parts: {e}"));
                            let mut s = errors_out.session(&epoch.cap);
                            for key in &keys {
                                s.give(RowError {
                                    request_id: key.request,
                                    error: Arc::clone(&error),
                                });
                            }
                        }
                    }
                }
                if frontiers.iter().all(|f| !f.less_equal(time)) {
                    if !epoch.pending.is_empty() {
                        node.stats.dropped(epoch.pending.len() as u64);
                        debug!(gather = %node.node, requests = epoch.pending.len(), "Dropped the parts of requests that failed on another part.");
                    }
                    finished.push(*time);
                }
            }
            for t in finished {
                epochs.remove(&t);
            }
        }
    });
    (rows_stream, errors_stream)
}

/// Records every parent of `batch`.
fn take_parents(epoch: &mut Epoch, batch: Batch, stats: &GatherStats) {
    let b = epoch.parents.len();
    let now = Instant::now();
    let mut opened = 0;
    let view = LineageView::new(batch.lineage());
    let counts = batch.tensor(PART_COUNT).and_then(|c| c.i64_values());
    if counts.is_none() {
        // Every split writes the count; without it the parents would wait for no part.
        error!("A parent batch reached a gather without its part counts.");
    }
    for (row, &id) in batch.request_ids().iter().enumerate() {
        let n = counts
            .and_then(|c| c.get(row))
            .and_then(|&n| usize::try_from(n).ok())
            .unwrap_or(0);
        let key = view.row_key(row, id);
        let pending = epoch.pending.entry(key.clone()).or_insert_with(|| {
            opened += 1;
            Pending::new(now)
        });
        pending.parent = Some((b, row, n));
        if pending.complete() {
            epoch.complete.push(key);
        }
    }
    epoch.parents.push(batch);
    stats.took(opened, 0);
}

/// Records every part of `batch` (parts of `node`'s fan-out).
fn take_parts(epoch: &mut Epoch, batch: Batch, node: &GatherNode) {
    let b = epoch.parts.len();
    let now = Instant::now();
    let (mut opened, mut taken) = (0, 0);
    let view = LineageView::new(batch.lineage());
    for (row, &id) in batch.request_ids().iter().enumerate() {
        let Some((parent, index)) = view.row_key(row, id).parent_at(node.plan.fanout) else {
            error!(gather = %node.node, request = id, "A row reached the gather without a part entry of its fan-out; dropped.");
            continue;
        };
        let pending = epoch.pending.entry(parent.clone()).or_insert_with(|| {
            opened += 1;
            Pending::new(now)
        });
        if pending.parts.contains_key(&index) {
            continue;
        }
        taken += 1;
        pending.parts.insert(index, (b, row));
        if pending.complete() {
            epoch.complete.push(parent);
        }
    }
    epoch.parts.push(batch);
    node.stats.took(opened, taken);
}

/// What [`emit`] made of a set of complete parents.
struct Emitted {
    /// The joined rows, if any.
    batch: Result<Option<Batch>, BatchError>,
    /// Requests whose parts could not be stacked, with why.
    failed: Vec<(u64, String)>,
    /// Requests in `batch`.
    joined: u64,
    /// Time they waited for their last part, summed.
    waited: Duration,
}

/// One row per complete parent `keys`; requests whose parts cannot be stacked fail with why.
fn emit(epoch: &mut Epoch, keys: &[RowKey], node: &GatherNode, seq: u64) -> Emitted {
    let now = Instant::now();
    let mut failed = Vec::new();
    let mut done: Vec<(Pending, Vec<Tensor>)> = Vec::new();
    for key in keys {
        let Some(p) = epoch.pending.remove(key) else {
            continue;
        };
        match stack_columns(epoch, &p, &node.plan) {
            Ok(stacked) => done.push((p, stacked)),
            Err(message) => failed.push((key.request, message)),
        }
    }
    let waited = done
        .iter()
        .map(|(p, _)| now.saturating_duration_since(p.opened))
        .sum();
    let batch = if done.is_empty() {
        Ok(None)
    } else {
        build_rows(epoch, &done, node, seq).map(Some)
    };
    Emitted {
        batch,
        failed,
        joined: done.len() as u64,
        waited,
    }
}

/// Per gathered column, the parts' tensors stacked in part order.
fn stack_columns(epoch: &Epoch, p: &Pending, plan: &GatherPlan) -> Result<Vec<Tensor>, String> {
    plan.columns
        .iter()
        .map(|c| {
            let mut tensors = Vec::with_capacity(p.parts.len());
            for &(b, row) in p.parts.values() {
                let col = epoch.parts[b]
                    .tensor(&c.input)
                    .ok_or_else(|| format!("part column `{}` missing", c.input))?;
                tensors.push(col.row(row));
            }
            stack(&tensors, c.part.dtype, &c.part.shape)
                .map_err(|e| format!("output `{}`: {e}", c.output))
        })
        .collect()
}

/// `parts` stacked along a new first axis; with no parts, an empty tensor of the part type
/// (free dimensions taken as 0).
fn stack(parts: &[Tensor], dtype: DType, part_shape: &[Dim]) -> Result<Tensor, String> {
    let Some(first) = parts.first() else {
        let mut shape = vec![0];
        shape.extend(part_shape.iter().map(|d| match d {
            Dim::Fixed(n) => *n,
            Dim::Dynamic => 0,
        }));
        return Ok(Tensor {
            shape,
            data: TensorData::empty(dtype),
        });
    };
    let mut data = TensorData::empty(first.dtype());
    for (i, t) in parts.iter().enumerate() {
        if t.shape != first.shape {
            return Err(format!(
                "part {i} has shape {:?} but part 0 has {:?}; parts are stacked along a new first axis, so their shapes must agree",
                t.shape, first.shape
            ));
        }
        data.extend(t.data.clone()).map_err(|e| e.to_string())?;
    }
    let mut shape = vec![parts.len()];
    shape.extend(&first.shape);
    Ok(Tensor { shape, data })
}

/// The gather's output batch for `done` parents and their stacked columns.
fn build_rows(
    epoch: &Epoch,
    done: &[(Pending, Vec<Tensor>)],
    node: &GatherNode,
    seq: u64,
) -> Result<Batch, BatchError> {
    let fanout = node.plan.fanout;
    let mut ids = Vec::with_capacity(done.len());
    let mut params: Vec<Option<String>> = Vec::with_capacity(done.len());
    let mut lineage = LineageBuilder::with_capacity(done.len(), 8);
    let mut counts = Vec::with_capacity(done.len());
    for (p, _) in done {
        let Some((b, row, n)) = p.parent else {
            continue;
        };
        let parent = &epoch.parents[b];
        ids.push(parent.request_ids()[row]);
        params.push(parent.row_parameters(row).map(str::to_string));
        counts.push(n as i64);
        // The parent's hops, then every hop its parts made (each once), then this gather's
        // hop. The fan-out's part entries become gathered-part entries (the row is whole
        // again), each kept only before hops of its part that no earlier part made.
        let mut seen: Vec<LineageEntry> = LineageView::new(parent.lineage()).row(row).collect();
        let mut known: HashSet<LineageEntry> = seen.iter().copied().collect();
        for &(pb, prow) in p.parts.values() {
            let mut marker = None;
            for e in LineageView::new(epoch.parts[pb].lineage()).row(prow) {
                if e.as_part().is_some_and(|(n, _, _)| n == fanout) {
                    marker = Some(e.gathered());
                } else if known.insert(e) {
                    seen.extend(marker.take());
                    seen.push(e);
                }
            }
        }
        let last_seq = |pred: u32| {
            seen.iter()
                .rev()
                .find(|e| e.node == pred)
                .map_or(0, |e| e.seq)
        };
        let hops: Vec<LineageEntry> = node
            .producer_ids
            .iter()
            .chain(std::iter::once(&fanout))
            .map(|&pred| LineageEntry {
                pred_node: pred,
                pred_seq: last_seq(pred),
                node: node.lineage_id,
                seq,
            })
            .collect();
        for e in seen.into_iter().chain(hops) {
            lineage.push_entry(e);
        }
        lineage.finish_row();
    }
    let mut columns = Vec::with_capacity(node.plan.columns.len() + 1);
    for (i, c) in node.plan.columns.iter().enumerate() {
        let refs: Vec<&Tensor> = done.iter().map(|(_, t)| &t[i]).collect();
        columns.push((
            Arc::from(c.output.as_str()),
            TensorColumn::from_rows(&c.output, c.part.dtype, &refs)?,
        ));
    }
    let count = TensorColumn::from_data(
        &node.plan.count_column,
        vec![],
        counts.len(),
        TensorData::I64(counts),
    )?;
    columns.push((Arc::from(node.plan.count_column.as_str()), count));
    Batch::new(UInt64Array::from(ids), lineage.finish(), columns)?
        .with_parameters(StringArray::from(params))
}
