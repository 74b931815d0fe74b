//! A model's metadata file (`<model>/model.json`): its task, its input/output signature, and
//! every variant made from it, and the checks a file read back from disk must pass.
//!
//! The file is data from disk, so it is treated as hostile: its size is capped before it is
//! parsed, and every field a later step relies on (names, relative file paths, digests, numbers)
//! is checked, an error naming the file and the field (`variants[3].file`).

use serde::{Deserialize, Serialize};
use weir_engine::tensor::DType;

use super::layout::{is_sha256, model_file, name_problem, relative_components};
use super::RepoError;
use crate::variant::Variant;

/// The largest metadata file read.
pub const MAX_METADATA_BYTES: u64 = 4 << 20;
/// The most variants one model may list.
pub const MAX_VARIANTS: usize = 4096;
/// The largest `max_batch` a variant may declare.
pub const MAX_BATCH_LIMIT: u32 = 1 << 16;

/// One input or output tensor of a model: what every model of a task must agree on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorSignature {
    /// ONNX name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape, the batch dimension first; `null` for a dynamic dimension.
    pub dims: Vec<Option<u64>>,
}

/// A model's inputs and outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Inputs, in the model's order.
    pub inputs: Vec<TensorSignature>,
    /// Outputs, in the model's order.
    pub outputs: Vec<TensorSignature>,
}

impl Signature {
    /// Why a model with signature `other` cannot serve the same task as one with `self`: names,
    /// types and every dimension but the batch dimension must match. `None` when it can.
    pub fn mismatch(&self, other: &Signature) -> Option<String> {
        let side = |which: &str, a: &[TensorSignature], b: &[TensorSignature]| {
            if a.len() != b.len() {
                return Some(format!("{} {which} against {}", b.len(), a.len()));
            }
            a.iter().zip(b).find_map(|(x, y)| {
                if x.name != y.name {
                    Some(format!("{which} `{}` against `{}`", y.name, x.name))
                } else if x.dtype != y.dtype {
                    Some(format!(
                        "{which} `{}` is {} against {}",
                        x.name, y.dtype, x.dtype
                    ))
                } else if x.dims.len() != y.dims.len()
                    || x.dims.iter().skip(1).ne(y.dims.iter().skip(1))
                {
                    Some(format!(
                        "{which} `{}` has shape {:?} against {:?}",
                        x.name, y.dims, x.dims
                    ))
                } else {
                    None
                }
            })
        };
        side("inputs", &self.inputs, &other.inputs)
            .or_else(|| side("outputs", &self.outputs, &other.outputs))
    }
}

/// What the repository knows about one registered model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The model (architecture) name; also its folder's name.
    pub name: String,
    /// The task it serves.
    pub task: String,
    /// The registered ONNX file, relative to the repository root.
    pub registered: String,
    /// Its inputs and outputs.
    pub signature: Signature,
    /// Examples in the validation set the accuracies were measured on.
    pub validation_examples: u64,
    /// Every variant made from it.
    pub variants: Vec<Variant>,
}

impl ModelEntry {
    /// Checks everything a reader relies on; `file` names the metadata file in errors, and the
    /// entry must sit in folder `folder`.
    pub fn check(&self, file: &str, folder: &str) -> Result<(), RepoError> {
        let bad = |field: String, reason: String| RepoError::Field {
            file: file.to_string(),
            field,
            reason,
        };
        if let Some(why) = name_problem(&self.name) {
            return Err(bad("name".into(), why.into()));
        }
        if self.name != folder {
            return Err(bad(
                "name".into(),
                format!("`{}` is not its folder's name `{folder}`", self.name),
            ));
        }
        if let Some(why) = name_problem(&self.task) {
            return Err(bad("task".into(), why.into()));
        }
        check_file(&self.registered, &self.name).map_err(|r| bad("registered".into(), r))?;
        if self.signature.inputs.is_empty() || self.signature.outputs.is_empty() {
            return Err(bad(
                "signature".into(),
                "needs at least one input and one output".into(),
            ));
        }
        if self.variants.len() > MAX_VARIANTS {
            return Err(bad("variants".into(), format!("more than {MAX_VARIANTS}")));
        }
        let mut seen = std::collections::HashSet::new();
        for (i, v) in self.variants.iter().enumerate() {
            check_variant(v, self).map_err(|(f, r)| bad(format!("variants[{i}].{f}"), r))?;
            if !seen.insert(v.name.as_str()) {
                return Err(bad(
                    format!("variants[{i}].name"),
                    format!("`{}` appears twice", v.name),
                ));
            }
        }
        Ok(())
    }
}

fn check_file(file: &str, model: &str) -> Result<(), String> {
    match relative_components(file) {
        Some(parts)
            if parts.len() == 3 && parts[0] == model && parts[1] == super::layout::VERSION_DIR =>
        {
            Ok(())
        }
        _ => Err(format!(
            "`{}` is not a file of this model's version folder (`{}`)",
            file.chars().take(120).collect::<String>(),
            model_file(model, "<name>.onnx")
        )),
    }
}

fn finite_non_negative(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

fn check_variant(v: &Variant, m: &ModelEntry) -> Result<(), (&'static str, String)> {
    if let Some(why) = name_problem(&v.name) {
        return Err(("name", why.into()));
    }
    if v.model != m.name {
        return Err(("model", format!("`{}` is not `{}`", v.model, m.name)));
    }
    if v.task != m.task {
        return Err(("task", format!("`{}` is not `{}`", v.task, m.task)));
    }
    check_file(&v.file, &m.name).map_err(|r| ("file", r))?;
    if !is_sha256(&v.sha256) {
        return Err(("sha256", "is not 64 lowercase hex digits".into()));
    }
    if !(v.accuracy.is_finite() && v.accuracy > 0.0 && v.accuracy <= 1.0) {
        return Err(("accuracy", format!("{} is not in (0, 1]", v.accuracy)));
    }
    if v.max_batch == 0 || v.max_batch > MAX_BATCH_LIMIT {
        return Err((
            "max_batch",
            format!("{} is not in 1..={MAX_BATCH_LIMIT}", v.max_batch),
        ));
    }
    if v.config.fixed_batch.is_some_and(|b| b != v.max_batch) {
        return Err(("config.fixed_batch", "differs from max_batch".into()));
    }
    if v.config.intra_threads == 0 || v.config.intra_threads > 1024 {
        return Err((
            "config.intra_threads",
            format!("{} is not in 1..=1024", v.config.intra_threads),
        ));
    }
    if let Some(why) = name_problem(&v.config.hardware) {
        return Err(("config.hardware", why.into()));
    }
    if !finite_non_negative(v.price_per_s) {
        return Err(("price_per_s", "is not a finite number ≥ 0".into()));
    }
    let p = &v.profile;
    if !finite_non_negative(p.load_ms) {
        return Err(("profile.load_ms", "is not a finite number ≥ 0".into()));
    }
    if !finite_non_negative(p.saturation_qps) {
        return Err((
            "profile.saturation_qps",
            "is not a finite number ≥ 0".into(),
        ));
    }
    if p.latency_ms.is_empty() {
        return Err(("profile.latency_ms", "is empty".into()));
    }
    for (b, ms) in &p.latency_ms {
        if *b == 0 || *b > v.max_batch || !finite_non_negative(*ms) {
            return Err((
                "profile.latency_ms",
                format!("batch {b}: {ms} ms is not a latency within max_batch"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(batch: Option<u64>, width: u64, out: &str) -> Signature {
        Signature {
            inputs: vec![TensorSignature {
                name: "x".into(),
                dtype: DType::F32,
                dims: vec![batch, Some(width)],
            }],
            outputs: vec![TensorSignature {
                name: out.into(),
                dtype: DType::F32,
                dims: vec![batch, Some(10)],
            }],
        }
    }

    #[test]
    fn signatures_match_but_for_the_batch_dimension() {
        let a = sig(None, 64, "probs");
        assert_eq!(a.mismatch(&sig(Some(8), 64, "probs")), None);
        assert!(a
            .mismatch(&sig(None, 16, "probs"))
            .unwrap()
            .contains("`x` has shape"));
        assert!(a
            .mismatch(&sig(None, 64, "y"))
            .unwrap()
            .contains("outputs `y`"));
        let mut b = a.clone();
        b.inputs[0].dtype = DType::I64;
        assert!(
            a.mismatch(&b).unwrap().contains("is i64"),
            "{:?}",
            a.mismatch(&b)
        );
    }
}
