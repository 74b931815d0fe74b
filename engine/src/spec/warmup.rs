//! The `warmup:` of a model node: requests run on every ONNX Runtime session of the node before
//! the graph reports ready, so the first client request does not pay a cold session's first-call
//! costs (memory planning, arena growth, kernel selection).
//!
//! One sample: every model input zeros, seeded random values, or the tensors of a file in the
//! JSON form of an Open Inference Protocol infer request (its `inputs`, each with `name`,
//! `shape`, `datatype` and `data`, shaped as a client sends one request); `runs` calls per
//! session, each of `batch_size` rows. A model input with a free dimension needs its per-request
//! shape under `shape:` (a file carries its own shapes).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::Spanned;

/// `warmup:` on a model node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmupSpec {
    /// Generated values: `zeros` (the default without `file`) or `random`.
    #[serde(default)]
    pub data: Option<Spanned<WarmupData>>,
    /// Seed of `data: random` (default 0): the same seed, the same values.
    #[serde(default)]
    pub seed: Option<Spanned<u64>>,
    /// A JSON file holding one infer request's `inputs` (relative to the graph file's folder),
    /// instead of generated values.
    #[serde(default)]
    pub file: Option<Spanned<PathBuf>>,
    /// Calls per session (at least 1).
    #[serde(default = "one")]
    pub runs: Spanned<u32>,
    /// Rows per call: the request repeated this many times (1 unless the node batches).
    #[serde(default = "one")]
    pub batch_size: Spanned<u32>,
    /// Per-request shape of each model input whose dimensions are free, by input name.
    #[serde(default)]
    pub shape: BTreeMap<String, Spanned<Vec<i64>>>,
}

/// Generated warm-up values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupData {
    /// Every element zero (BYTES: empty strings).
    #[default]
    Zeros,
    /// Seeded random elements (each type's range as `weir profile`'s synthetic requests use).
    Random,
}

fn one() -> Spanned<u32> {
    Spanned::unlocated(1)
}

impl WarmupSpec {
    /// `runs` calls per session of generated `data`, one row each, no shapes given.
    pub fn generated(data: WarmupData, runs: u32) -> Self {
        WarmupSpec {
            data: Some(Spanned::unlocated(data)),
            seed: None,
            file: None,
            runs: Spanned::unlocated(runs),
            batch_size: one(),
            shape: BTreeMap::new(),
        }
    }
}
