//! One batch of a per-sequence stateful model on ONNX Runtime: the rows of many sequences run
//! together, each from its own sequence's state.
//!
//! The batch is planned against the current table (`SequenceTable::plan`: time-outs, refusals,
//! waves). Each wave is one ONNX call: its rows' inputs are gathered, every state tensor is fed
//! the rows' sequences' slices stacked along the batch axis (a fresh sequence's slice is the
//! initial value), and the state outputs are cut back into slices that become the sequences'
//! new entries; a row with `end` drops its sequence instead. Row outputs go back in arrival
//! order; a refused row gets zeros, which the graph side never shows (it answers the row with
//! the refusal). The table a batch makes shares every untouched sequence with the one before.

use std::collections::BTreeSet;
use std::sync::Arc;

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{Tensor, TensorData};
use weir_hams::sequences::{SequenceControls, SequenceLayout};

use super::stateful_step::{StatefulModel, Step};
use super::ExecError;
use crate::stateful::sequences::stack::{stack, stacked_shape, unstack};
use crate::stateful::sequences::{Entry, RowStep, SequenceTable};
use crate::stateful::state::{NodeState, StateUpdate};

impl StatefulModel {
    /// Runs a per-sequence batch from `table`; see the module doc.
    pub(super) fn run_sequences(
        &mut self,
        inputs: &[TensorColumn],
        table: &SequenceTable,
        controls: &SequenceControls,
    ) -> Result<Step, ExecError> {
        let Some(layout) = self.sequences.clone() else {
            return Err(self.err("the node keeps one state, not one per sequence"));
        };
        let rows = inputs.first().map_or(0, TensorColumn::len);
        if controls.rows.len() != rows {
            return Err(self.err(format!(
                "{} sequence controls for {rows} rows",
                controls.rows.len()
            )));
        }
        let plan = table.plan(&layout, controls);
        let mut next = table.clone();
        let mut touched: BTreeSet<String> = BTreeSet::new();
        for id in &plan.expired {
            next.remove(id);
            touched.insert(id.clone());
        }
        let mut per_row: Vec<Option<Vec<Tensor>>> = vec![None; rows];
        let per_call = if self.one_sequence_per_call {
            1
        } else {
            usize::MAX
        };
        for wave in &plan.waves {
            for chunk in wave.chunks(per_call) {
                let outputs = self.call_wave(inputs, &layout, &next, chunk)?;
                for (j, step) in chunk.iter().enumerate() {
                    touched.insert(step.id.clone());
                    if step.end {
                        next.remove(&step.id);
                    } else {
                        let state = outputs.states.iter().map(|t| t[j].clone()).collect();
                        let entry = Entry {
                            state,
                            last_used_ms: controls.now_ms,
                        };
                        next.insert(step.id.clone(), Arc::new(entry));
                    }
                }
                for (j, row) in outputs.rows.into_iter().enumerate() {
                    if let Some(slot) = chunk.get(j).and_then(|s| per_row.get_mut(s.row)) {
                        *slot = Some(row);
                    }
                }
            }
        }
        let outputs = self.columns(per_row)?;
        let delta = table.delta_to(&next, &touched);
        Ok(Step {
            outputs,
            refused: plan.refused,
            next: Arc::new(NodeState::Sequences(next)),
            update: StateUpdate::Delta(Arc::new(delta)),
        })
    }

    /// One call over the rows of `chunk` (distinct sequences), from their states in `table`.
    fn call_wave(
        &mut self,
        inputs: &[TensorColumn],
        layout: &SequenceLayout,
        table: &SequenceTable,
        chunk: &[RowStep],
    ) -> Result<WaveOutputs, ExecError> {
        let axis = layout.batch_axis;
        let k = chunk.len();
        let zeros: Vec<Vec<f32>> = self.state.iter().map(|s| vec![0.0; s.len()]).collect();
        let mut shapes = Vec::with_capacity(self.state.len());
        let mut stacked = Vec::with_capacity(self.state.len());
        for (t, slot) in self.state.iter().enumerate() {
            let initial = layout
                .initial
                .get(t)
                .filter(|v| v.len() == slot.len())
                .unwrap_or(&zeros[t]);
            let slices: Vec<&[f32]> = chunk
                .iter()
                .map(|s| match table.get(&s.id) {
                    Some(e) if !s.fresh => e.state.get(t).map_or(initial.as_slice(), Vec::as_slice),
                    _ => initial.as_slice(),
                })
                .collect();
            if slices.iter().any(|s| s.len() != slot.len()) {
                return Err(self.err(format!(
                    "a sequence's state `{}` has the wrong size",
                    slot.input
                )));
            }
            shapes.push(stacked_shape(&slot.shape, axis, k));
            stacked.push(stack(&slices, &slot.shape, axis));
        }
        let rows: Vec<usize> = chunk.iter().map(|s| s.row).collect();
        let feed: Vec<&[f32]> = stacked.iter().map(Vec::as_slice).collect();
        let (outs, next_states) = self.call(inputs, &shapes, &feed, &rows)?;
        let mut states = Vec::with_capacity(self.state.len());
        for (slot, values) in self.state.iter().zip(&next_states) {
            match unstack(values, &slot.shape, axis, k) {
                Some(slices) => states.push(slices),
                None => {
                    return Err(self.err(format!(
                        "state output `{}` does not hold {k} sequences",
                        slot.output
                    )))
                }
            }
        }
        let mut per_row: Vec<Vec<Tensor>> = vec![Vec::with_capacity(outs.len()); k];
        for (shape, data) in outs {
            let n: usize = shape.iter().product();
            for (j, row) in per_row.iter_mut().enumerate() {
                row.push(Tensor {
                    shape: shape.clone(),
                    data: data.slice(j * n..(j + 1) * n),
                });
            }
        }
        Ok(WaveOutputs {
            rows: per_row,
            states,
        })
    }

    /// One column per output from each row's outputs (zeros for rows not run).
    fn columns(&self, per_row: Vec<Option<Vec<Tensor>>>) -> Result<Vec<TensorColumn>, ExecError> {
        let mut columns = Vec::with_capacity(self.outputs.len());
        for (i, (name, dtype)) in self.outputs.iter().enumerate() {
            let shape = per_row
                .iter()
                .flatten()
                .find_map(|r| r.get(i))
                .map_or_else(Vec::new, |t| t.shape.clone());
            let n: usize = shape.iter().product();
            let filler = Tensor {
                shape,
                data: TensorData::zeros(*dtype, n),
            };
            let tensors: Vec<&Tensor> = per_row
                .iter()
                .map(|r| r.as_ref().and_then(|r| r.get(i)).unwrap_or(&filler))
                .collect();
            columns.push(
                TensorColumn::from_rows(name, *dtype, &tensors)
                    .map_err(|e| self.err(e.to_string()))?,
            );
        }
        Ok(columns)
    }
}

/// One wave's results: per row (in the wave's order) its output tensors, and per state tensor
/// each row's next slice.
struct WaveOutputs {
    rows: Vec<Vec<Tensor>>,
    states: Vec<Vec<Vec<f32>>>,
}
