//! One call of a stateful model: `(inputs, state) → (outputs, next state)` on ONNX Runtime.
//!
//! The model's state tensors (`state:` pairs) are plain inputs and outputs of the ONNX graph, so a
//! call never writes the state it reads: the compute stage reads version `n` and the update stage
//! is a swap to the returned version `n + 1`. That is what lets HAMS ship version `n` to the backup
//! while the next batch computes without stopping the model (non-stop retrieval: the copy reads a
//! buffer nothing writes). This type holds no state itself; its owner (an in-process node or an
//! executor process's primary) keeps the current version.
//!
//! A call runs all rows of a batch as one ONNX call (the model's first dimension is dynamic) or
//! one call per row in order (first dimension fixed to 1), feeding each row's next state to the
//! following row. With `order`, the rows run in that order instead of arrival order: the
//! executor's non-determinism option uses it to change the interleaving of requests (racing
//! inputs) and, for a model that sums over the batch (online learning's gradient), the
//! floating-point reduction order (a GPU's); outputs are put back in arrival order.
//!
//! A per-sequence node's state is a table of sequences instead; [`StatefulModel::step`] runs
//! either kind, handing per-sequence batches to `sequence_step.rs`.

use std::borrow::Cow;
use std::path::Path;

use std::sync::Arc;

use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{DType, NamedTensor, TensorData};
use weir_hams::protocol::StateTensor;
use weir_hams::sequences::{RowRefusal, SequenceControls, SequenceLayout};

use crate::model::ort_values::{input_value, output_tensor, CallInput};
use crate::model::{ExecError, OrtRuntime};
use crate::stateful::state::{NodeState, StateUpdate, StateVersion};

/// A loaded stateful model.
pub struct StatefulModel {
    pub(super) node: String,
    session: Session,
    batched: bool,
    inputs: Vec<String>,
    pub(super) outputs: Vec<(String, DType)>,
    pub(super) state: Vec<StateTensor>,
    /// Per-sequence state: how the sequences are kept.
    pub(super) sequences: Option<SequenceLayout>,
    /// Per-sequence state whose model fixes the batch axis to 1: one sequence per call.
    pub(super) one_sequence_per_call: bool,
    /// Model inputs fed the same tensor on every call (`constants:`).
    constants: Vec<NamedTensor>,
}

/// What one batch made: the row outputs (one row per row sent, in arrival order; zeros for a
/// refused row), the rows refused, the next version, and what a backup needs to make it.
#[derive(Debug)]
pub struct Step {
    /// Row outputs, in the node's output order.
    pub outputs: Vec<TensorColumn>,
    /// Rows of a per-sequence batch not run.
    pub refused: Vec<RowRefusal>,
    /// The next version.
    pub next: Arc<NodeState>,
    /// The next version as a backup receives it.
    pub update: StateUpdate,
}

impl std::fmt::Debug for StatefulModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatefulModel")
            .field("node", &self.node)
            .finish()
    }
}

/// One ONNX call's row outputs (shape without the batch dimension, data) and next state.
type CallOutputs = (Vec<(Vec<usize>, TensorData)>, StateVersion);

impl StatefulModel {
    /// Loads `path` for node `node`: `inputs` are the row inputs in payload order, `outputs` the
    /// row outputs returned, `state` the state tensors (f32).
    ///
    /// # Errors
    /// When the session cannot be created.
    #[allow(clippy::too_many_arguments)]
    pub fn load(
        runtime: &OrtRuntime,
        node: &str,
        path: &Path,
        threads: usize,
        batched: bool,
        inputs: Vec<String>,
        outputs: Vec<(String, DType)>,
        state: Vec<StateTensor>,
    ) -> Result<Self, ExecError> {
        let session = runtime.session(node, path, threads.max(1), false)?;
        Ok(StatefulModel {
            node: node.to_string(),
            session,
            batched,
            inputs,
            outputs,
            state,
            sequences: None,
            one_sequence_per_call: false,
            constants: Vec::new(),
        })
    }

    /// Feeds `constants` (model inputs, each in its own shape and type) to every call.
    pub fn with_constants(mut self, constants: Vec<NamedTensor>) -> Self {
        self.constants = constants;
        self
    }

    /// Keeps one state per sequence as `layout` says (the state tensors given to
    /// [`Self::load`] are then one sequence's); `one_per_call` when the model fixes the state's
    /// batch axis to 1.
    pub fn per_sequence(mut self, layout: SequenceLayout, one_per_call: bool) -> Self {
        self.sequences = Some(layout);
        self.one_sequence_per_call = one_per_call;
        self
    }

    /// The state before any batch: zeros, or no sequences.
    pub fn initial_state(&self) -> NodeState {
        NodeState::initial(&self.state, self.sequences.as_ref())
    }

    /// Runs batch `inputs` from version `state`: a whole state with the rows in `order` (see
    /// [`Self::run`]), or a per-sequence batch whose rows name their sequences in `controls`.
    ///
    /// # Errors
    /// When the inputs do not fit the model, a per-sequence batch has no controls for its rows, or
    /// ONNX Runtime fails.
    pub fn step(
        &mut self,
        inputs: &[TensorColumn],
        state: &NodeState,
        controls: Option<&SequenceControls>,
        order: Option<&[usize]>,
    ) -> Result<Step, ExecError> {
        match (state, controls) {
            (NodeState::Whole(whole), None) => {
                let (outputs, next) = self.run(inputs, whole, order)?;
                let next = Arc::new(NodeState::Whole(next));
                Ok(Step {
                    outputs,
                    refused: Vec::new(),
                    update: StateUpdate::Replace(Arc::clone(&next)),
                    next,
                })
            }
            (NodeState::Sequences(table), Some(controls)) => {
                self.run_sequences(inputs, table, controls)
            }
            (NodeState::Whole(_), Some(_)) => Err(self.err(
                "the batch names sequences, but the node keeps one state (no `per_sequence`)",
            )),
            (NodeState::Sequences(_), None) => {
                Err(self.err("the node keeps state per sequence, but the batch names none"))
            }
        }
    }

    /// The row outputs' names and types.
    pub fn outputs(&self) -> &[(String, DType)] {
        &self.outputs
    }

    /// The row inputs' names.
    pub fn inputs(&self) -> &[String] {
        &self.inputs
    }

    pub(super) fn err(&self, message: impl Into<String>) -> ExecError {
        ExecError::Inference {
            node: self.node.clone(),
            message: message.into(),
        }
    }

    /// Runs `inputs` (one column per row input) from state `state`, rows in `order` (arrival
    /// order when `None`); returns the row outputs in arrival order and the next state.
    ///
    /// # Errors
    /// When the inputs do not fit the model or ONNX Runtime fails.
    pub fn run(
        &mut self,
        inputs: &[TensorColumn],
        state: &StateVersion,
        order: Option<&[usize]>,
    ) -> Result<(Vec<TensorColumn>, StateVersion), ExecError> {
        if inputs.len() != self.inputs.len() || state.len() != self.state.len() {
            return Err(self.err(format!(
                "expected {} inputs and {} state tensors, got {} and {}",
                self.inputs.len(),
                self.state.len(),
                inputs.len(),
                state.len()
            )));
        }
        let rows = inputs.first().map_or(0, TensorColumn::len);
        if inputs.iter().any(|c| c.len() != rows) {
            return Err(self.err("input columns differ in row count"));
        }
        let arrival: Vec<usize> = (0..rows).collect();
        let order = order.unwrap_or(&arrival);
        if order.len() != rows {
            return Err(self.err("row order does not cover the batch"));
        }
        let chunks: Vec<Vec<usize>> = if self.batched {
            vec![order.to_vec()]
        } else {
            order.iter().map(|&r| vec![r]).collect()
        };
        let mut current: StateVersion = state.clone();
        let mut per_output: Vec<Vec<(usize, TensorData)>> = vec![Vec::new(); self.outputs.len()];
        let mut row_shapes: Vec<Vec<usize>> = vec![Vec::new(); self.outputs.len()];
        let shapes: Vec<Vec<usize>> = self.state.iter().map(|s| s.shape.clone()).collect();
        for chunk in &chunks {
            let feed: Vec<&[f32]> = current.iter().map(Vec::as_slice).collect();
            let (outs, next) = self.call(inputs, &shapes, &feed, chunk)?;
            current = next;
            for (i, (shape, data)) in outs.into_iter().enumerate() {
                row_shapes[i] = shape;
                per_output[i].push((chunk.len(), data));
            }
        }
        let mut columns = Vec::with_capacity(self.outputs.len());
        for (i, (name, dtype)) in self.outputs.iter().enumerate() {
            let row_len: usize = row_shapes[i].iter().product();
            let data = unpermute(&per_output[i], order, row_len, *dtype);
            columns.push(
                TensorColumn::from_data(name, row_shapes[i].clone(), rows, data)
                    .map_err(|e| self.err(e.to_string()))?,
            );
        }
        Ok((columns, current))
    }

    /// One ONNX call over `rows` (in that order), the state tensors fed `state` in `shapes`; the
    /// state outputs must come back in the same shapes.
    pub(super) fn call(
        &mut self,
        inputs: &[TensorColumn],
        shapes: &[Vec<usize>],
        state: &[&[f32]],
        rows: &[usize],
    ) -> Result<CallOutputs, ExecError> {
        let node = self.node.clone();
        let wrap = move |e: ort::Error| ExecError::Inference {
            node: node.clone(),
            message: e.to_string(),
        };
        let gathered: Vec<CallInput<'_>> = inputs.iter().map(|c| gather(c, rows)).collect();
        let mut feed: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
        for ((name, col), data) in self.inputs.iter().zip(inputs).zip(&gathered) {
            let row_shape = rows.first().map(|&r| col.row_shape(r)).unwrap_or_default();
            if rows.iter().any(|&r| col.row_shape(r) != row_shape) {
                return Err(self.err(format!(
                    "input `{name}`: rows of one call have different shapes"
                )));
            }
            let mut shape = vec![rows.len()];
            shape.extend_from_slice(&row_shape);
            let value = input_value(data, shape)
                .map_err(|message| self.err(format!("input `{name}`: {message}")))?;
            feed.push((name.as_str().into(), value));
        }
        let constants: Vec<CallInput<'_>> = self
            .constants
            .iter()
            .map(|c| CallInput::Owned(c.tensor.data.clone()))
            .collect();
        for (c, data) in self.constants.iter().zip(&constants) {
            let value = input_value(data, c.tensor.shape.clone())
                .map_err(|message| self.err(format!("constant `{}`: {message}", c.name)))?;
            feed.push((c.name.as_str().into(), value));
        }
        for ((slot, shape), values) in self.state.iter().zip(shapes).zip(state) {
            let value: SessionInputValue<'_> = TensorRef::from_array_view((shape.clone(), *values))
                .map_err(&wrap)?
                .into();
            feed.push((slot.input.as_str().into(), value));
        }
        let outputs = self.session.run(feed).map_err(&wrap)?;
        let mut row_outputs = Vec::with_capacity(self.outputs.len());
        for (name, dtype) in &self.outputs {
            let (shape, data) = output_tensor(&outputs, name, *dtype, &self.node)?;
            if shape.first().copied() != Some(rows.len() as i64) {
                return Err(ExecError::Inference {
                    node: self.node.clone(),
                    message: format!(
                        "output `{name}` has shape {shape:?} for {} rows",
                        rows.len()
                    ),
                });
            }
            row_outputs.push((
                shape[1..].iter().map(|&d| d.max(0) as usize).collect(),
                data,
            ));
        }
        let mut next = Vec::with_capacity(self.state.len());
        for (slot, shape) in self.state.iter().zip(shapes) {
            let expected: usize = shape.iter().product();
            let value = outputs
                .get(&slot.output)
                .ok_or_else(|| ExecError::Inference {
                    node: self.node.clone(),
                    message: format!("the model returned no state output `{}`", slot.output),
                })?;
            let (got, v) = value.try_extract_tensor::<f32>().map_err(&wrap)?;
            let same_dims = got.len() == shape.len()
                && got
                    .iter()
                    .zip(shape)
                    .all(|(&g, &w)| usize::try_from(g) == Ok(w));
            if v.len() != expected || !same_dims {
                return Err(ExecError::Inference {
                    node: self.node.clone(),
                    message: format!(
                        "state output `{}` has shape {:?} ({} elements), expected {shape:?}",
                        slot.output,
                        &got[..],
                        v.len(),
                    ),
                });
            }
            next.push(v.to_vec());
        }
        Ok((row_outputs, next))
    }
}

/// Whether model `meta` fixes the batch axis `axis` of any of a per-sequence node's state
/// tensors `state` to 1, so that a call takes one sequence.
pub fn fixed_batch_axis(
    meta: &weir_engine::onnx::ModelMetadata,
    state: &[StateTensor],
    axis: usize,
) -> bool {
    meta.inputs.iter().any(|t| {
        state.iter().any(|s| s.input == t.name)
            && t.dims.get(axis) == Some(&weir_engine::tensor::Dim::Fixed(1))
    })
}

/// Rows `rows` of `col`, in that order, as one call's input.
fn gather<'a>(col: &TensorColumn, rows: &[usize]) -> CallInput<'a> {
    let mut data = TensorData::empty(col.dtype());
    for &r in rows {
        if let Some(d) = col.data_range(col.row_range(r)) {
            // Same column, same dtype: extending cannot fail.
            let _ = data.extend(d);
        }
    }
    CallInput::Owned(data)
}

/// Puts chunked outputs (rows in `order`, `row_len` elements each) back in arrival order.
fn unpermute(
    chunks: &[(usize, TensorData)],
    order: &[usize],
    row_len: usize,
    dtype: DType,
) -> TensorData {
    let mut called = TensorData::empty(dtype);
    for (_, d) in chunks {
        let _ = called.extend(d.clone());
    }
    // Row `k` of the call order is row `order[k]` of the arrival order.
    let mut source = vec![0usize; order.len()];
    for (k, &r) in order.iter().enumerate() {
        if let Some(s) = source.get_mut(r) {
            *s = k;
        }
    }
    let mut out = TensorData::empty(dtype);
    for k in source {
        let range = k * row_len..(k + 1) * row_len;
        if range.end <= called.len() {
            let _ = out.extend(called.slice(range));
        }
    }
    out
}

/// One hash per row over every column's values of that row: the output identity HAMS's journal
/// compares across primaries, backups and the frontend.
pub fn row_hashes(columns: &[TensorColumn], rows: usize) -> Vec<u64> {
    (0..rows)
        .map(|r| {
            let mut bytes = Vec::new();
            for c in columns {
                if let Some(d) = c.data_range(c.row_range(r)) {
                    d.write_le(&mut bytes);
                }
            }
            weir_hams::protocol::value_hash(&bytes)
        })
        .collect()
}

/// What a person would notice of each row's first output: its label (the argmax of an f32
/// output, the value of an i64 one) and a hash of the values rounded to 8 bits (round(v × 255)
/// each). The journal uses them to tell flipped labels and visible changes from last-bit
/// differences when a replay recomputes released rows.
pub fn row_summaries(columns: &[TensorColumn], rows: usize) -> (Vec<u32>, Vec<u64>) {
    let Some(c) = columns.first() else {
        return (vec![0; rows], vec![0; rows]);
    };
    (0..rows)
        .map(|r| {
            let row = c
                .data_range(c.row_range(r))
                .unwrap_or_else(|| TensorData::empty(c.dtype()));
            let values = row.to_f64_lossy().unwrap_or_default();
            if c.dtype().is_float() {
                let label = values
                    .iter()
                    .enumerate()
                    .fold((0usize, f64::NEG_INFINITY), |best, (i, &v)| {
                        if v > best.1 {
                            (i, v)
                        } else {
                            best
                        }
                    })
                    .0;
                let mut bytes = Vec::with_capacity(values.len() * 4);
                for v in &values {
                    bytes.extend_from_slice(&((v * 255.0).round() as i32).to_le_bytes());
                }
                (label as u32, weir_hams::protocol::value_hash(&bytes))
            } else {
                let mut bytes = Vec::new();
                row.write_le(&mut bytes);
                let label = values.first().copied().unwrap_or(0.0) as u32;
                (label, weir_hams::protocol::value_hash(&bytes))
            }
        })
        .unzip()
}

/// A seeded permutation of `rows` rows (Fisher–Yates over a SplitMix64 stream): the
/// non-determinism option's choice for one batch, reproducible from its seed.
pub fn seeded_order(rows: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..rows).collect();
    let mut x = seed;
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..rows).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeros(m: &StatefulModel) -> StateVersion {
        match m.initial_state() {
            NodeState::Whole(s) => s,
            NodeState::Sequences(_) => panic!("a whole state"),
        }
    }

    fn gru() -> StatefulModel {
        let runtime = OrtRuntime::get().expect("run scripts/setup.sh first");
        StatefulModel::load(
            &runtime,
            "gru",
            &crate::model::test_model("gru_stream.onnx"),
            1,
            true,
            vec!["x".into()],
            vec![("y".into(), DType::F32)],
            vec![StateTensor {
                input: "h_in".into(),
                output: "h_out".into(),
                shape: vec![1, 16],
            }],
        )
        .expect("gru_stream.onnx loads")
    }

    fn column(rows: usize, seed: f32) -> TensorColumn {
        let data: Vec<f32> = (0..rows * 8)
            .map(|i| ((i as f32) * 0.37 + seed).sin())
            .collect();
        TensorColumn::from_data("x", vec![8], rows, TensorData::F32(data)).unwrap()
    }

    #[test]
    fn state_carries_from_call_to_call_as_in_one_long_call() {
        let mut m = gru();
        let s0 = zeros(&m);
        let all = column(6, 0.5);
        let (whole, s_whole) = m.run(std::slice::from_ref(&all), &s0, None).unwrap();
        let (a, s1) = m.run(&[all.slice(0, 4)], &s0, None).unwrap();
        let (b, s2) = m.run(&[all.slice(4, 2)], &s1, None).unwrap();
        let joined: Vec<f32> = [a[0].f32_values().unwrap(), b[0].f32_values().unwrap()].concat();
        let expect = whole[0].f32_values().unwrap();
        assert!(joined.iter().zip(expect).all(|(x, y)| (x - y).abs() < 1e-5));
        assert!(s2[0]
            .iter()
            .zip(&s_whole[0])
            .all(|(x, y)| (x - y).abs() < 1e-5));
        assert_ne!(s1, s0, "a call moves the state");
    }

    #[test]
    fn a_row_order_changes_the_interleaving_and_outputs_come_back_in_arrival_order() {
        let mut m = gru();
        let s0 = zeros(&m);
        let x = column(5, 0.1);
        let order = seeded_order(5, 42);
        assert_ne!(order, vec![0, 1, 2, 3, 4]);
        let (plain, s_plain) = m.run(std::slice::from_ref(&x), &s0, None).unwrap();
        let (perm, s_perm) = m.run(std::slice::from_ref(&x), &s0, Some(&order)).unwrap();
        assert_ne!(s_plain, s_perm, "another interleaving, another state");
        // The first row run sees the same state either way, wherever it sits in the batch.
        let first = order[0];
        let row = |c: &TensorColumn, r: usize| c.f32_values().unwrap()[r * 4..(r + 1) * 4].to_vec();
        let (solo, _) = m.run(&[x.slice(first, 1)], &s0, None).unwrap();
        assert_eq!(row(&perm[0], first), row(&solo[0], 0));
        assert_eq!(plain[0].len(), 5);
        assert_eq!(
            seeded_order(5, 42),
            order,
            "the choice replays from its seed"
        );
    }
}
