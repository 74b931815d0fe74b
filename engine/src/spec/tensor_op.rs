//! Tensor-op nodes: small, cheap transforms that run inline on the dataflow worker.
//!
//! `argmax` and `top_k` reduce over a request's whole tensor taken as a flat vector (a classifier's
//! scores, whatever trailing unit dimensions the model gives them). `normalize` works per channel
//! along the first per-request dimension. `concat` joins along an axis; every other dimension must
//! match. `reshape` gives each row's elements, in row-major order, a new shape (what Triton's
//! `reshape` and ONNX's `Reshape` do; the data is not touched). Outputs are named `output`
//! (normalize, concat, reshape), `index` (argmax), `values` and `indices` (top_k).

use serde::Deserialize;

use super::Spanned;

/// `(x - mean[c]) / std[c]` where `c` is the index along the first per-request dimension.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormalizeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32` tensor to normalize.
    pub input: Spanned<String>,
    /// One mean for all elements, or one per channel.
    pub mean: Spanned<Vec<f32>>,
    /// One standard deviation for all elements, or one per channel; none may be 0.
    pub std: Spanned<Vec<f32>>,
}

/// Index (`i64`, shape `[1]`) of the largest element.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgmaxSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32` scores.
    pub input: Spanned<String>,
}

/// The `k` largest elements (`values`, `f32 [k]`) and their indices (`indices`, `i64 [k]`),
/// largest first; ties go to the lower index.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopKSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32` scores.
    pub input: Spanned<String>,
    /// How many (≥ 1, ≤ the element count).
    pub k: Spanned<usize>,
}

/// Tensors joined along `axis` (default: the last). Inputs from different nodes are joined by
/// request id first.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConcatSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// Two or more tensors of one dtype and rank.
    pub inputs: Vec<Spanned<String>>,
    /// Axis, counted from the front (0..rank) or the back (-1 = last).
    #[serde(default = "last_axis")]
    pub axis: Spanned<i64>,
}

fn last_axis() -> Spanned<i64> {
    Spanned::unlocated(-1)
}

/// Each row's elements under a new shape, in row-major order: `shape` lists the per-request
/// sizes (without a batch dimension), an empty list making a scalar; one size may be `-1`, taken
/// from the row's element count. A row whose element count the shape cannot hold fails, naming
/// the row and both shapes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReshapeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The tensor to reshape (any dtype).
    pub input: Spanned<String>,
    /// The new per-request shape; at most one `-1`, every other size 0 or more.
    pub shape: Spanned<Vec<i64>>,
}
