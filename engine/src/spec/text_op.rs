//! Text and post-processing nodes: `tokenize` (a text into token ids for a model), `detokenize`
//! (token ids back into a text), `softmax` (scores into probabilities), `labels` (class indices
//! into names) and `ctc_decode` (a recogniser's per-step class scores into a text).
//!
//! All run inline on the dataflow worker like the tensor ops. `labels`, `ctc_decode`, `tokenize`
//! and `detokenize` read their file once, at validation, so a graph that names a missing, empty or
//! malformed file never starts, and a running graph never touches the file system. Outputs are
//! named `output` (softmax), `labels`, `input_ids` and `attention_mask` (tokenize), `text`
//! (detokenize) and `text` and `confidence` (ctc_decode).

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

/// Greedy CTC decoding (Graves et al., *Connectionist Temporal Classification*, §3.2, best path):
/// per request an `f32 [T, C]` of class scores, each step's best class (ties to the lower index),
/// repeats collapsed, `blank` dropped, the rest named by line `index` of the `labels` file and
/// joined: `text` (BYTES `[]`, UTF-8) and `confidence` (`f32 []`, the mean best score of the kept
/// steps; 0 when none is kept). An index past the file fails that request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtcDecodeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `f32 [T, C]` scores (probabilities or logits; only their order and the kept maxima
    /// matter).
    pub input: Spanned<String>,
    /// A UTF-8 text file, line `i` the text of class `i` (the blank's line is never used),
    /// relative to the graph file's folder.
    pub labels: Spanned<PathBuf>,
    /// The blank class (default 0).
    #[serde(default)]
    pub blank: Spanned<usize>,
}

/// Token ids (`i64 [n]` per request) back into a text with a Hugging Face `tokenizer.json` and its
/// decoder: BYTES `[]`, UTF-8. Special tokens are left out unless `skip_special_tokens` is false.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetokenizeSpec {
    /// Node id.
    pub id: Spanned<String>,
    /// The `i64` token ids, one sequence per request.
    pub input: Spanned<String>,
    /// A Hugging Face `tokenizer.json`, relative to the graph file's folder.
    pub tokenizer: Spanned<PathBuf>,
    /// Whether special tokens (`[CLS]`, `</s>`, …) are left out of the text (default true).
    #[serde(default = "skip_special_by_default")]
    pub skip_special_tokens: Spanned<bool>,
}

fn skip_special_by_default() -> Spanned<bool> {
    Spanned::unlocated(true)
}
