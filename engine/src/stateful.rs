//! Stateful model nodes, as planned, after "HAMS: High Availability for Distributed Machine
//! Learning Service Graphs" (HAMS, §IV): which tensors carry a node's state from one call to the
//! next and how that state is replicated. The rules `state:` and `replication:` must meet are
//! checked by [`crate::validate`]; the protocol is `weir-hams`'s, run by the operators and the
//! executors. A stateful node's `constants:` (model inputs fed one value on every call, such as a
//! streaming model's sample rate) are typed here, once for validation and once for each session;
//! so is a per-sequence state tensor's shape for one sequence (`one_sequence_shape`), which
//! validation checks and planning lays out.

use std::time::Duration;

use crate::spec::ReplicationMode;

pub use weir_hams::protocol::{ConstantInput, StateTensor};
pub use weir_hams::sequences::SequenceLayout;

use crate::onnx::{ElementType, ModelMetadata};
use crate::tensor::{DType, Dim, NamedTensor, Tensor, TensorData};

/// A stateful model node's state and its protection.
#[derive(Debug, Clone, PartialEq)]
pub struct StatefulNode {
    /// The state tensors, in `state:` order: the node's whole state, or under `per_sequence` one
    /// sequence's (1 on the batch axis).
    pub state: Vec<StateTensor>,
    /// `per_sequence`: one state per client sequence, kept as this says; `None`: one state for
    /// the node.
    pub sequences: Option<SequenceLayout>,
    /// Model inputs fed the same value on every call (`constants:`).
    pub constants: Vec<ConstantInput>,
    /// Replication protocol.
    pub mode: ReplicationMode,
    /// A primary silent this long on a batch is declared failed.
    pub detect: Duration,
    /// Batches sent to the primary and not yet answered, at most (1 under `remus`).
    pub pipeline: usize,
    /// Under `checkpoint`: batches between two state copies to the backup.
    pub checkpoint_every: u64,
}

impl StatefulNode {
    /// Whether a model input is a state input (fed by the previous call, not by the graph).
    pub fn is_state_input(&self, name: &str) -> bool {
        self.state.iter().any(|p| p.input == name)
    }

    /// Whether a model output is a state output (kept by the executor, not sent downstream).
    pub fn is_state_output(&self, name: &str) -> bool {
        self.state.iter().any(|p| p.output == name)
    }

    /// Whether the node's replies wait for its states to be durable (NSPB and Remus; a
    /// checkpointed node answers at once and replays after a failure).
    pub fn replicated(&self) -> bool {
        matches!(self.mode, ReplicationMode::Nspb | ReplicationMode::Remus)
    }

    /// Whether the node has a backup to fail over to.
    pub fn has_backup(&self) -> bool {
        self.mode != ReplicationMode::None
    }
}

/// One sequence's shape of a state tensor of dimensions `dims`: 1 on `axis`, the fixed size
/// elsewhere (`None` when another dimension is not fixed).
pub(crate) fn one_sequence_shape(dims: &[Dim], axis: usize) -> Option<Vec<usize>> {
    dims.iter()
        .enumerate()
        .map(|(i, d)| match d {
            _ if i == axis => Some(1),
            Dim::Fixed(n) => Some(*n),
            _ => None,
        })
        .collect()
}

/// `value` as one element of `dtype`, or why it does not fit: an integer type takes an integral
/// value within its range, BOOL 0 or 1, a float type any finite value (rounded to nearest); BYTES
/// takes no number.
///
/// # Errors
/// The reason, for a diagnostic or a refused assignment.
pub fn constant_data(dtype: DType, value: f64) -> Result<TensorData, String> {
    let integral = |lo: f64, hi: f64| -> Result<f64, String> {
        if value.fract() == 0.0 && value >= lo && value < hi {
            Ok(value)
        } else {
            Err(format!("{value} is not a {dtype} value"))
        }
    };
    if !value.is_finite() {
        return Err(format!("{value} is not finite"));
    }
    let exp2 = |n: i32| 2f64.powi(n);
    Ok(match dtype {
        DType::Bool => TensorData::Bool(vec![integral(0.0, 2.0)? == 1.0]),
        DType::U8 => TensorData::U8(vec![integral(0.0, exp2(8))? as u8]),
        DType::U16 => TensorData::U16(vec![integral(0.0, exp2(16))? as u16]),
        DType::U32 => TensorData::U32(vec![integral(0.0, exp2(32))? as u32]),
        DType::U64 => TensorData::U64(vec![integral(0.0, exp2(64))? as u64]),
        DType::I8 => TensorData::I8(vec![integral(-exp2(7), exp2(7))? as i8]),
        DType::I16 => TensorData::I16(vec![integral(-exp2(15), exp2(15))? as i16]),
        DType::I32 => TensorData::I32(vec![integral(-exp2(31), exp2(31))? as i32]),
        DType::I64 => TensorData::I64(vec![integral(-exp2(63), exp2(63))? as i64]),
        DType::F16 => TensorData::F16(vec![half::f16::from_f64(value)]),
        DType::Bf16 => TensorData::Bf16(vec![half::bf16::from_f64(value)]),
        DType::F32 => TensorData::F32(vec![value as f32]),
        DType::F64 => TensorData::F64(vec![value]),
        DType::Bytes => return Err("a BYTES input takes no number".to_string()),
    })
}

/// The tensors `constants` feed model `meta`'s inputs: each input's own shape (one element) and
/// element type.
///
/// # Errors
/// When a constant names no model input, or one of more than one element, or does not fit its
/// type.
pub fn constant_tensors(
    meta: &ModelMetadata,
    constants: &[ConstantInput],
) -> Result<Vec<NamedTensor>, String> {
    constants
        .iter()
        .map(|c| {
            let input = meta
                .inputs
                .iter()
                .find(|t| t.name == c.name)
                .ok_or_else(|| format!("the model has no input `{}`", c.name))?;
            let shape: Option<Vec<usize>> = input
                .dims
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Some(*n),
                    _ => None,
                })
                .collect();
            let shape = shape
                .filter(|s| s.iter().product::<usize>() == 1)
                .ok_or_else(|| {
                    format!(
                        "model input `{}` is not one element (a scalar, or every dimension 1)",
                        c.name
                    )
                })?;
            let ElementType::Supported(dtype) = input.element else {
                return Err(format!("model input `{}` has no OIP datatype", c.name));
            };
            let data =
                constant_data(dtype, c.value).map_err(|e| format!("constant `{}`: {e}", c.name))?;
            Ok(NamedTensor {
                name: c.name.clone(),
                tensor: Tensor { shape, data },
            })
        })
        .collect()
}
