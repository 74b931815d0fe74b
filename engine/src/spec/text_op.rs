//! Text and post-processing nodes: `tokenize` (a text into token ids for a model), `softmax`
//! (scores into probabilities) and `labels` (class indices into names).
//!
//! All run inline on the dataflow worker like the tensor ops. `labels` and `tokenize` read their
//! file once, at validation, so a graph that names a missing, empty or malformed file never
//! starts, and a running graph never touches the file system. Outputs are named `output`
//! (softmax), `labels`, and `input_ids` and `attention_mask` (tokenize).

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

/// A text (one BYTES element per request, UTF-8) split into token ids by a Hugging Face
/// `tokenizer.json`, special tokens included: `input_ids` and `attention_mask`, `i64 [-1]`, one
/// length per request. A text of more than `max_length` tokens is refused, not truncated.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenizeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The BYTES text, one element per request.
    pub input: Spanned<String>,
    /// A Hugging Face `tokenizer.json`, relative to the graph file's folder.
    pub tokenizer: Spanned<PathBuf>,
    /// Most tokens per text (≥ 1, ≤ 65,536), special tokens counted.
    pub max_length: Spanned<usize>,
}
