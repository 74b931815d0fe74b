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

use super::step::{StatefulModel, Step};
use crate::model::ExecError;
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
        tracing::debug!(
            node = %self.node,
            rows,
            calls = plan.waves.len(),
            refused = plan.refused.len(),
            expired = plan.expired.len(),
            "Per-sequence batch."
        );
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

#[cfg(test)]
mod tests {
    use weir_engine::tensor::DType;
    use weir_hams::protocol::StateTensor;
    use weir_hams::sequences::{RowControl, RowRefusal, SequenceRefusal};

    use super::*;
    use crate::model::OrtRuntime;

    fn model() -> StatefulModel {
        let layout = SequenceLayout {
            batch_axis: 1,
            initial: Vec::new(),
            idle_timeout_ms: 1_000,
            max_sequences: 2,
        };
        whole_model().per_sequence(layout, false)
    }

    /// `seq_state.onnx` with one state [2, 1, 8] for the node.
    fn whole_model() -> StatefulModel {
        let runtime = OrtRuntime::get().expect("run scripts/setup.sh first");
        StatefulModel::load(
            &runtime,
            "rnn",
            &crate::model::test_model("seq_state.onnx"),
            1,
            true,
            vec!["x".into()],
            vec![("y".into(), DType::F32)],
            vec![StateTensor {
                input: "state".into(),
                output: "state_out".into(),
                shape: vec![2, 1, 8],
            }],
        )
        .expect("seq_state.onnx loads")
    }

    fn x(values: &[f32]) -> TensorColumn {
        let data: Vec<f32> = values
            .iter()
            .flat_map(|v| (0..4).map(move |k| (v + k as f32 * 0.1).sin()))
            .collect();
        TensorColumn::from_data("x", vec![4], values.len(), TensorData::F32(data)).unwrap()
    }

    fn ctl(now_ms: u64, rows: &[(&str, bool, bool)]) -> SequenceControls {
        SequenceControls {
            now_ms,
            rows: rows
                .iter()
                .map(|&(id, start, end)| RowControl {
                    id: id.into(),
                    start,
                    end,
                })
                .collect(),
        }
    }

    fn row(c: &TensorColumn, r: usize) -> Vec<f32> {
        c.f32_values().unwrap()[r * 8..(r + 1) * 8].to_vec()
    }

    /// Runs `steps` one batch of one row at a time for one sequence, from the start.
    fn alone(m: &mut StatefulModel, steps: &[f32]) -> Vec<Vec<f32>> {
        let mut state = Arc::new(m.initial_state());
        let mut out = Vec::new();
        for (t, v) in steps.iter().enumerate() {
            let step = m
                .step(
                    &[x(&[*v])],
                    &state,
                    Some(&ctl(t as u64, &[("s", t == 0, false)])),
                    None,
                )
                .unwrap();
            out.push(row(&step.outputs[0], 0));
            state = step.next;
        }
        out
    }

    #[test]
    fn sequences_sharing_calls_answer_as_each_alone_and_the_table_follows() {
        let mut m = model();
        let s0 = Arc::new(m.initial_state());
        // Batch 1: a and b start together (one call).
        let b1 = m
            .step(
                &[x(&[1.0, 2.0])],
                &s0,
                Some(&ctl(0, &[("a", true, false), ("b", true, false)])),
                None,
            )
            .unwrap();
        // Batch 2: a twice (two calls), b ends, c is refused (a and b hold both slots).
        let b2 = m
            .step(
                &[x(&[3.0, 4.0, 5.0, 6.0])],
                &b1.next,
                Some(&ctl(
                    10,
                    &[
                        ("a", false, false),
                        ("c", true, false),
                        ("a", false, false),
                        ("b", false, true),
                    ],
                )),
                None,
            )
            .unwrap();
        assert_eq!(
            b2.refused,
            vec![RowRefusal {
                row: 1,
                reason: SequenceRefusal::Full { limit: 2 }
            }]
        );
        assert_eq!(
            row(&b2.outputs[0], 1),
            vec![0.0; 8],
            "a refused row is zeros"
        );
        let a = alone(&mut m, &[1.0, 3.0, 5.0]);
        let b = alone(&mut m, &[2.0, 6.0]);
        assert_eq!(row(&b1.outputs[0], 0), a[0]);
        assert_eq!(row(&b1.outputs[0], 1), b[0]);
        assert_eq!(row(&b2.outputs[0], 0), a[1]);
        assert_eq!(row(&b2.outputs[0], 2), a[2]);
        assert_eq!(row(&b2.outputs[0], 3), b[1]);
        let NodeState::Sequences(table) = b2.next.as_ref() else {
            panic!("a table");
        };
        assert!(table.get("a").is_some() && table.get("b").is_none() && table.len() == 1);
        // The delta makes the next table from the one before.
        let after = b2.update.apply(&b1.next);
        assert_eq!(after, b2.next);
    }

    #[test]
    fn a_started_sequence_begins_at_the_declared_initial_state() {
        let initial: Vec<f32> = (0..16).map(|i| (i as f32 * 0.3).cos()).collect();
        let layout = SequenceLayout {
            batch_axis: 1,
            initial: vec![initial.clone()],
            idle_timeout_ms: 1_000,
            max_sequences: 4,
        };
        let mut per_sequence = whole_model().per_sequence(layout, false);
        let s0 = Arc::new(per_sequence.initial_state());
        let got = per_sequence
            .step(
                &[x(&[0.7])],
                &s0,
                Some(&ctl(0, &[("a", true, false)])),
                None,
            )
            .unwrap();
        let mut whole = whole_model();
        let (want, _) = whole.run(&[x(&[0.7])], &vec![initial], None).unwrap();
        assert_eq!(row(&got.outputs[0], 0), row(&want[0], 0));
    }
}
