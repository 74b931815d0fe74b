//! The join: merges rows of several producers by request id, for fan-in nodes and the egress.
//!
//! Inside a fan-out a request has several rows, one per part: rows are matched by their
//! [`RowKey`] (the request id and its part entries), so part 2 of a request meets part 2.
//!
//! A request's rows from every producer carry the same epoch (every operator emits at the time of
//! its input), so the join keeps per-epoch state: the batches seen and, per request, which producer's
//! row it has. A request whose rows are all in is emitted at once, as one row holding every
//! producer's tensor columns and the union of their lineage. When the frontier of every input has
//! passed an epoch, no more rows can come for it: a request still incomplete there lost a branch to
//! an error, which that branch already sent to the egress, so its partial row is dropped (and
//! counted). The capability for an epoch is held until then, which keeps the frontier honest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::tensor::Tensor;
use arrow_array::{Array, ArrayRef, StringArray, UInt64Array};
use arrow_select::interleave::interleave;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use timely::dataflow::operators::Capability;
use timely::dataflow::Scope;
use tracing::{debug, error};

use super::BatchStream;
use crate::batch::{Batch, BatchError, TensorColumn};
use crate::lineage::{LineageBuilder, LineageView, RowKey};

/// Per-epoch join state.
struct Epoch {
    cap: Capability<u64>,
    /// Batches received at this epoch, with the input they came on.
    batches: Vec<(usize, Batch)>,
    /// Row key → per input, (index into `batches`, row).
    partial: HashMap<RowKey, Vec<Option<(usize, usize)>>>,
    /// Rows complete and not yet emitted.
    complete: Vec<(u64, Vec<(usize, usize)>)>,
}

/// Joins `inputs` by request id into one stream.
pub fn join_by_request<'s>(
    scope: Scope<'s, u64>,
    name: &str,
    inputs: Vec<BatchStream<'s>>,
) -> BatchStream<'s> {
    let n = inputs.len();
    let mut builder = OperatorBuilder::new(format!("join/{name}"), scope);
    let mut handles: Vec<_> = inputs
        .into_iter()
        .map(|s| builder.new_input(s, Pipeline))
        .collect();
    let (output, stream) = builder.new_output();
    let mut output = OutputBuilder::<u64, CapacityContainerBuilder<Vec<Batch>>>::from(output);
    let label = name.to_string();
    builder.build(move |_caps| {
        let mut epochs: BTreeMap<u64, Epoch> = BTreeMap::new();
        move |frontiers| {
            for (input, handle) in handles.iter_mut().enumerate() {
                handle.for_each(|cap, data| {
                    let Some(time) = cap.least().copied() else { return };
                    let epoch = epochs.entry(time).or_insert_with(|| Epoch {
                        cap: cap.delayed(&time, 0),
                        batches: Vec::new(),
                        partial: HashMap::new(),
                        complete: Vec::new(),
                    });
                    for batch in data.drain(..) {
                        let b = epoch.batches.len();
                        let lineage = LineageView::new(batch.lineage());
                        for (row, &id) in batch.request_ids().iter().enumerate() {
                            let key = lineage.row_key(row, id);
                            let parts =
                                epoch.partial.entry(key.clone()).or_insert_with(|| vec![None; n]);
                            parts[input] = Some((b, row));
                            if parts.iter().all(Option::is_some) {
                                let parts = epoch.partial.remove(&key).unwrap_or_default();
                                epoch.complete.push((id, parts.into_iter().flatten().collect()));
                            }
                        }
                        epoch.batches.push((input, batch));
                    }
                });
            }
            let mut out = output.activate();
            let mut finished = Vec::new();
            for (time, epoch) in epochs.iter_mut() {
                if !epoch.complete.is_empty() {
                    let rows = std::mem::take(&mut epoch.complete);
                    match merge_rows(&epoch.batches, &rows, n) {
                        Ok(batch) => out.session(&epoch.cap).give(batch),
                        Err(e) => error!(join = %label, error = %e, "Join could not merge rows; they were dropped."),
                    }
                }
                let done = frontiers.iter().all(|f| !f.less_equal(time));
                if done {
                    if !epoch.partial.is_empty() {
                        debug!(join = %label, rows = epoch.partial.len(), "Dropped partial rows of requests that failed on another branch.");
                    }
                    finished.push(*time);
                }
            }
            for t in finished {
                epochs.remove(&t);
            }
        }
    });
    stream
}

/// One batch from complete rows: request ids, merged lineage, every input's tensor columns.
fn merge_rows(
    batches: &[(usize, Batch)],
    rows: &[(u64, Vec<(usize, usize)>)],
    inputs: usize,
) -> Result<Batch, BatchError> {
    let ids = UInt64Array::from(rows.iter().map(|(id, _)| *id).collect::<Vec<_>>());
    let views: Vec<LineageView<'_>> = batches
        .iter()
        .map(|(_, b)| LineageView::new(b.lineage()))
        .collect();
    let mut lineage = LineageBuilder::with_capacity(rows.len(), 4);
    for (_, parts) in rows {
        let mut seen = Vec::new();
        for &(b, row) in parts {
            for e in views[b].row(row) {
                if !seen.contains(&e) {
                    seen.push(e);
                    lineage.push_entry(e);
                }
            }
        }
        lineage.finish_row();
    }
    let mut columns = Vec::new();
    for input in 0..inputs {
        // Every batch of one input has the same columns; take the names from the first one used.
        let Some(&(first_b, _)) = rows.first().map(|(_, p)| &p[input]) else {
            continue;
        };
        for (name, first_col) in batches[first_b].1.tensors() {
            let mut sources: Vec<usize> = Vec::new();
            let mut indices = Vec::with_capacity(rows.len());
            for (_, parts) in rows {
                let (b, row) = parts[input];
                let s = match sources.iter().position(|&x| x == b) {
                    Some(s) => s,
                    None => {
                        sources.push(b);
                        sources.len() - 1
                    }
                };
                indices.push((s, row));
            }
            let cols: Vec<&TensorColumn> = sources
                .iter()
                .map(|&b| {
                    batches[b]
                        .1
                        .tensor(name)
                        .ok_or_else(|| BatchError::BadColumn {
                            column: name.to_string(),
                            problem: "missing from a batch of the same input".into(),
                        })
                })
                .collect::<Result<_, _>>()?;
            columns.push((
                Arc::clone(name),
                join_column(name, first_col, &cols, &indices)?,
            ));
        }
    }
    // Parameters are the request's, identical on every branch: take the first input's.
    let sources: Vec<&dyn Array> = batches
        .iter()
        .map(|(_, b)| b.parameters() as &dyn Array)
        .collect();
    let picks: Vec<(usize, usize)> = rows.iter().map(|(_, parts)| parts[0]).collect();
    let parameters = interleave(&sources, &picks)?;
    let parameters = parameters
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(|| BatchError::BadColumn {
            column: crate::batch::PARAMETERS.into(),
            problem: "interleave changed the column type".into(),
        })?
        .clone();
    Batch::new(ids, lineage.finish(), columns)?.with_parameters(parameters)
}

/// Rows `indices` (source, row) of `cols` as one column: Arrow's interleave when the sources share
/// a layout (one uniform shape, or all ragged of one rank), row by row otherwise.
fn join_column(
    name: &str,
    first: &TensorColumn,
    cols: &[&TensorColumn],
    indices: &[(usize, usize)],
) -> Result<TensorColumn, BatchError> {
    let same_layout = cols
        .iter()
        .all(|c| c.uniform_shape() == first.uniform_shape() && c.rank() == first.rank());
    if same_layout {
        let arrays: Vec<ArrayRef> = cols.iter().map(|c| c.to_arrow()).collect();
        let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
        let merged = interleave(&refs, indices)?;
        return TensorColumn::from_arrow(&first.field(name), &merged);
    }
    let rows: Vec<Tensor> = indices.iter().map(|&(s, row)| cols[s].row(row)).collect();
    let refs: Vec<&Tensor> = rows.iter().collect();
    TensorColumn::from_rows(name, first.dtype(), &refs)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use arrow_array::UInt64Array;
    use timely::dataflow::channels::pact::Pipeline;
    use timely::dataflow::operators::generic::operator::Operator;
    use timely::dataflow::operators::ToStream;

    use super::*;
    use crate::lineage::{LineageBuilder, LineageEntry, CLIENT, INGRESS};
    use crate::tensor::TensorData;

    /// A batch of `ids` from `node`, each row's tensor `column` holding `[id * scale]`.
    fn batch(ids: &[u64], column: &str, scale: f32, node: u32) -> Batch {
        let mut lineage = LineageBuilder::default();
        for &id in ids {
            lineage.push_entry(LineageEntry {
                pred_node: CLIENT,
                pred_seq: id,
                node: INGRESS,
                seq: 0,
            });
            lineage.push_entry(LineageEntry {
                pred_node: INGRESS,
                pred_seq: 0,
                node,
                seq: id,
            });
            lineage.finish_row();
        }
        let data = TensorData::F32(ids.iter().map(|&id| id as f32 * scale).collect());
        let col = TensorColumn::from_data(column, vec![1], ids.len(), data).unwrap();
        Batch::new(
            UInt64Array::from(ids.to_vec()),
            lineage.finish(),
            vec![(Arc::from(column), col)],
        )
        .unwrap()
    }

    /// What came out of the join per row: request id, left value, right value, lineage entries.
    type JoinedRow = (u64, f32, f32, usize);

    #[test]
    fn joins_every_complete_request_once_and_drops_the_incomplete() {
        let seen: Arc<Mutex<Vec<JoinedRow>>> = Arc::default();
        let out = Arc::clone(&seen);
        timely::example(move |scope| {
            // Left has requests 1..=10 over three batches; right lacks 3 and 7 (failed there) and
            // delivers the rest in another order and batching.
            let left = vec![
                batch(&[1, 2, 3, 4], "a", 1.0, 1),
                batch(&[5, 6, 7], "a", 1.0, 1),
                batch(&[8, 9, 10], "a", 1.0, 1),
            ]
            .to_stream(scope);
            let right = vec![
                batch(&[10, 2, 9], "b", 100.0, 2),
                batch(&[8, 6, 1, 5, 4], "b", 100.0, 2),
            ]
            .to_stream(scope);
            join_by_request(scope, "test", vec![left, right]).sink(
                Pipeline,
                "collect",
                move |(input, _)| {
                    input.for_each(|_, data| {
                        for b in data.drain(..) {
                            let lineage = LineageView::new(b.lineage());
                            for (row, &id) in b.request_ids().iter().enumerate() {
                                let a = b.tensor("a").unwrap().f32_values().unwrap()[row];
                                let bb = b.tensor("b").unwrap().f32_values().unwrap()[row];
                                out.lock()
                                    .unwrap()
                                    .push((id, a, bb, lineage.row(row).count()));
                            }
                        }
                    });
                },
            );
        });
        let mut seen = seen.lock().unwrap().clone();
        seen.sort_by_key(|r| r.0);
        let ids: Vec<u64> = seen.iter().map(|r| r.0).collect();
        assert_eq!(
            ids,
            vec![1, 2, 4, 5, 6, 8, 9, 10],
            "each complete request once, 3 and 7 dropped"
        );
        for (id, a, b, entries) in seen {
            assert_eq!(
                (a, b),
                (id as f32, id as f32 * 100.0),
                "request {id} joined with another's row"
            );
            // Client entry shared by both branches is kept once: 1 + one hop per branch.
            assert_eq!(entries, 3, "lineage of request {id}");
        }
    }
}
