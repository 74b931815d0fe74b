//! Post-processing nodes that turn a model's raw output into what a client reads: `softmax`
//! (scores into probabilities) and `labels` (class indices into names).
//!
//! Both run inline on the dataflow worker like the tensor ops. `labels` reads its file once, at
//! validation, so a graph that names a missing or empty label file never starts, and a running
//! graph never touches the file system. Outputs are named `output` (softmax) and `labels`.

use std::path::PathBuf;

use serde::Deserialize;

use super::Spanned;

/// `exp(x - max) / Σ exp(x - max)` along the last axis of each request's `f32` tensor.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftmaxSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32` scores.
    pub input: Spanned<String>,
}

/// Each `i64` index of `input` replaced by line `index` (from 0) of the `labels` file, as a
/// BYTES tensor of the same shape. An index outside the file fails that request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelsSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `i64` class indices.
    pub input: Spanned<String>,
    /// A UTF-8 text file, one label per line, relative to the graph file's folder.
    pub labels: Spanned<PathBuf>,
}
