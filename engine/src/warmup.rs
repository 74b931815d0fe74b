//! A model node's warm-up as planned: samples with concrete per-request shapes and where their
//! values come from. Both ways of asking for one land here — a graph's `warmup:`
//! ([`crate::spec::WarmupSpec`], checked by validation) and a Triton repository model's
//! `model_warmup` — and the node's executor runs each sample on every session before it serves.
//!
//! The shape rules live here once, for the spec's `shape:` and for the tensors of a warm-up
//! file alike: a per-request shape has the model input's rank (without the batch dimension when
//! the model has one), a positive size per dimension, the model's size where it fixes one, and
//! at most [`MAX_WARMUP_BYTES`] for the whole call, counted with checked arithmetic.

use std::path::PathBuf;

use crate::onnx::TensorInfo;
use crate::tensor::{DType, Dim, TensorData};

/// Most bytes the inputs of one warm-up call may hold (every row counted).
pub const MAX_WARMUP_BYTES: u64 = 64 << 20;

/// Most calls one sample may run per session.
pub const MAX_WARMUP_RUNS: u32 = 10_000;

/// Bytes counted per element of a BYTES tensor (its `Vec` header and a short string).
const BYTES_ELEMENT_COST: u64 = 32;

/// One warm-up sample of a model node.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupSample {
    /// Its name, for logs and errors.
    pub name: String,
    /// Calls per session.
    pub runs: u32,
    /// Rows per call (the request repeated).
    pub rows: u32,
    /// Its inputs.
    pub inputs: WarmupInputs,
}

/// Where a sample's tensors come from.
#[derive(Debug, Clone, PartialEq)]
pub enum WarmupInputs {
    /// One per model input.
    Tensors(Vec<WarmupInput>),
    /// A JSON infer request (resolved path), still to be read and checked against the model:
    /// the graph's loader does that after planning, so a plan that reaches an executor holds
    /// [`WarmupInputs::Tensors`].
    File(PathBuf),
}

/// One input of a warm-up request.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupInput {
    /// The model input.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape per request (without the batch dimension where the model has one).
    pub shape: Vec<usize>,
    /// Its values.
    pub values: WarmupValues,
}

/// The values of a warm-up input.
#[derive(Debug, Clone, PartialEq)]
pub enum WarmupValues {
    /// Every element zero (BYTES: empty strings).
    Zeros,
    /// Seeded random elements.
    Random {
        /// The seed.
        seed: u64,
    },
    /// These elements, one request's worth, row-major.
    Given(TensorData),
}

/// Why a per-request shape does not fit a model input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Another rank.
    #[error("has {given} dimensions; model input `{input}` takes {expected} per request")]
    Rank {
        /// The input.
        input: String,
        /// Dimensions given.
        given: usize,
        /// Dimensions per request.
        expected: usize,
    },
    /// A size that is not positive.
    #[error("dimension {axis} is {size}; every size is at least 1")]
    NotPositive {
        /// The axis.
        axis: usize,
        /// The size given.
        size: i64,
    },
    /// Another size than the model fixes.
    #[error("dimension {axis} is {size}; model input `{input}` fixes it to {fixed}")]
    Fixed {
        /// The input.
        input: String,
        /// The axis.
        axis: usize,
        /// The size given.
        size: i64,
        /// The model's size.
        fixed: usize,
    },
    /// Over [`MAX_WARMUP_BYTES`] for the call's rows.
    #[error("{rows} row(s) of this shape hold more than {MAX_WARMUP_BYTES} bytes")]
    TooLarge {
        /// Rows per call.
        rows: u32,
    },
}

/// `shape` (as written) checked against model input `info` per request, with `batch_dim` saying
/// whether the model's first dimension is the batch dimension, for calls of `rows` rows.
///
/// # Errors
/// The first [`ShapeError`] found.
pub fn request_shape(
    info: &TensorInfo,
    batch_dim: bool,
    shape: &[i64],
    rows: u32,
) -> Result<Vec<usize>, ShapeError> {
    let dims = info.request_dims(batch_dim);
    if dims.len() != shape.len() {
        return Err(ShapeError::Rank {
            input: info.name.clone(),
            given: shape.len(),
            expected: dims.len(),
        });
    }
    let mut out = Vec::with_capacity(shape.len());
    for (axis, (&size, dim)) in shape.iter().zip(dims).enumerate() {
        let n = usize::try_from(size)
            .ok()
            .filter(|&n| n > 0)
            .ok_or(ShapeError::NotPositive { axis, size })?;
        if let Dim::Fixed(fixed) = *dim {
            if fixed != n {
                return Err(ShapeError::Fixed {
                    input: info.name.clone(),
                    axis,
                    size,
                    fixed,
                });
            }
        }
        out.push(n);
    }
    let dtype = match info.element {
        crate::onnx::ElementType::Supported(d) => d,
        _ => DType::U8,
    };
    call_bytes(dtype, &out, rows).ok_or(ShapeError::TooLarge { rows })?;
    Ok(out)
}

/// The model's own per-request shape of `info` when it fixes every dimension.
pub fn fixed_request_shape(info: &TensorInfo, batch_dim: bool) -> Option<Vec<usize>> {
    info.request_dims(batch_dim)
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Dynamic => None,
        })
        .collect()
}

/// `runs` calls of one row of seeded random values for every input of the model `meta`
/// describes, its free dimensions taken as 1 (what `weir executor --warmup-runs` runs, having no
/// graph to give shapes); `None` for no runs, or when an input has no datatype or its row would
/// hold more than [`MAX_WARMUP_BYTES`].
pub fn synthetic_sample(
    meta: &crate::onnx::ModelMetadata,
    batch_dim: bool,
    runs: u32,
) -> Option<WarmupSample> {
    if runs == 0 {
        return None;
    }
    let inputs = meta
        .inputs
        .iter()
        .map(|info| {
            let crate::onnx::ElementType::Supported(dtype) = info.element else {
                return None;
            };
            let shape: Vec<usize> = info
                .request_dims(batch_dim)
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n,
                    Dim::Dynamic => 1,
                })
                .collect();
            call_bytes(dtype, &shape, 1)?;
            Some(WarmupInput {
                name: info.name.clone(),
                dtype,
                shape,
                values: WarmupValues::Random { seed: 0 },
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(WarmupSample {
        name: "synthetic".into(),
        runs: runs.min(MAX_WARMUP_RUNS),
        rows: 1,
        inputs: WarmupInputs::Tensors(inputs),
    })
}

/// Bytes `rows` rows of `shape` hold, when within [`MAX_WARMUP_BYTES`].
pub fn call_bytes(dtype: DType, shape: &[usize], rows: u32) -> Option<u64> {
    let width = dtype.byte_width().map_or(BYTES_ELEMENT_COST, |w| w as u64);
    shape
        .iter()
        .try_fold(width.checked_mul(u64::from(rows))?, |acc, &d| {
            acc.checked_mul(d as u64)
        })
        .filter(|&b| b <= MAX_WARMUP_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx::ElementType;

    fn input(dims: Vec<Dim>) -> TensorInfo {
        TensorInfo {
            name: "x".into(),
            element: ElementType::Supported(DType::F32),
            names: vec![None; dims.len()],
            dims,
        }
    }

    #[test]
    fn a_shape_fills_free_dimensions_and_keeps_fixed_ones() {
        let info = input(vec![Dim::Dynamic, Dim::Fixed(3), Dim::Dynamic]);
        assert_eq!(request_shape(&info, true, &[3, 16], 2), Ok(vec![3, 16]));
        assert_eq!(fixed_request_shape(&info, true), None);
        assert!(matches!(
            request_shape(&info, true, &[4, 16], 1),
            Err(ShapeError::Fixed { fixed: 3, .. })
        ));
        assert!(matches!(
            request_shape(&info, true, &[3], 1),
            Err(ShapeError::Rank { expected: 2, .. })
        ));
        assert!(matches!(
            request_shape(&info, true, &[3, 0], 1),
            Err(ShapeError::NotPositive { axis: 1, .. })
        ));
        assert!(matches!(
            request_shape(&info, true, &[3, i64::MAX], 1),
            Err(ShapeError::TooLarge { .. })
        ));
    }

    #[test]
    fn bytes_are_counted_with_checked_arithmetic() {
        assert_eq!(call_bytes(DType::F32, &[3, 4], 2), Some(96));
        assert_eq!(call_bytes(DType::F32, &[usize::MAX, 2], 1), None);
        assert_eq!(call_bytes(DType::Bytes, &[2], 1), Some(64));
    }
}
