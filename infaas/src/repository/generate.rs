//! Variant generation: which variants a registration makes from one ONNX file, what their files
//! and names are, and the one rewrite weir does itself — fixing the batch dimension.
//!
//! The grid is the paper's (§3.3: framework × graph optimiser × batch × hardware) mapped onto
//! ONNX Runtime: precision (the registered fp32 file, and an int8 file made by ONNX Runtime's
//! own dynamic quantisation) × batch (dynamic, or fixed to `b` in the file: ONNX Runtime then
//! plans memory and kernels for exactly that shape) × intra-op threads × graph-optimisation
//! level × executor type. Precision and batch change the file; threads, level and executor
//! type change only how a session is built and where, so those variants share their file.

use super::layout::MAX_NAME_LEN;
use crate::variant::{GraphLevel, Precision, VariantConfig};

/// The largest batch a dynamic-batch variant is profiled and served at (paper §3.3 profiles
/// batch sizes 1 to 64).
pub const DYNAMIC_MAX_BATCH: u32 = 64;

/// Why an ONNX file cannot be given a fixed batch.
#[derive(Debug, thiserror::Error)]
pub enum RewriteError {
    /// The bytes are not an ONNX model.
    #[error("not an ONNX model: {0}")]
    Decode(String),
    /// An input or output has no leading dimension, or a fixed one of another size.
    #[error("`{tensor}` has no dynamic batch dimension to fix")]
    NoBatch {
        /// The tensor.
        tensor: String,
    },
}

/// What a registration generates.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Intra-op thread counts.
    pub threads: Vec<u32>,
    /// Graph-optimisation levels.
    pub levels: Vec<GraphLevel>,
    /// Fixed batch sizes; the dynamic-batch build is always made as well.
    pub batches: Vec<u32>,
    /// Precisions (int8 only where an int8 file is available).
    pub precisions: Vec<Precision>,
}

impl Default for Grid {
    fn default() -> Self {
        Self {
            threads: vec![1, 2],
            levels: vec![GraphLevel::Basic, GraphLevel::All],
            batches: vec![1, 8, 32],
            precisions: vec![Precision::Fp32, Precision::Int8],
        }
    }
}

/// One file of a model's version folder: a precision and a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Build {
    /// Weights' precision.
    pub precision: Precision,
    /// Fixed batch, or `None` for dynamic.
    pub fixed_batch: Option<u32>,
}

impl Build {
    /// Its file name in the version folder: `model.onnx` for the registered file, else
    /// `<precision>[-b<batch>].onnx`.
    pub fn file_name(&self) -> String {
        match (self.precision, self.fixed_batch) {
            (Precision::Fp32, None) => super::layout::REGISTERED_FILE.to_string(),
            (p, None) => format!("{}.onnx", precision_name(p)),
            (p, Some(b)) => format!("{}-b{b}.onnx", precision_name(p)),
        }
    }

    /// The most rows one call may hold.
    pub fn max_batch(&self) -> u32 {
        self.fixed_batch.unwrap_or(DYNAMIC_MAX_BATCH)
    }
}

/// `fp32` or `int8`.
pub fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::Fp32 => "fp32",
        Precision::Int8 => "int8",
    }
}

impl Grid {
    /// The files to make, sorted and without repeats: every precision × (dynamic and every
    /// fixed batch).
    pub fn builds(&self) -> Vec<Build> {
        let mut out: Vec<Build> = self
            .precisions
            .iter()
            .flat_map(|p| {
                std::iter::once(None)
                    .chain(self.batches.iter().map(|b| Some(*b)))
                    .map(|fixed_batch| Build {
                        precision: *p,
                        fixed_batch,
                    })
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every variant configuration of `build` on each of `hardware`.
    pub fn configs(&self, build: Build, hardware: &[String]) -> Vec<VariantConfig> {
        let mut out = Vec::new();
        for hw in hardware {
            for level in &self.levels {
                for threads in &self.threads {
                    out.push(VariantConfig {
                        precision: build.precision,
                        graph_level: *level,
                        intra_threads: *threads,
                        fixed_batch: build.fixed_batch,
                        hardware: hw.clone(),
                    });
                }
            }
        }
        out
    }
}

/// A variant's name: `<model>.<precision>-<level>-t<threads>-b<batch|dyn>-<hardware>`; `None`
/// when it would be longer than a name may be.
pub fn variant_name(model: &str, c: &VariantConfig) -> Option<String> {
    let batch = c
        .fixed_batch
        .map_or_else(|| "dyn".to_string(), |b| b.to_string());
    let name = format!(
        "{model}.{}-{}-t{}-b{batch}-{}",
        precision_name(c.precision),
        c.graph_level.name(),
        c.intra_threads,
        c.hardware
    );
    (name.len() <= MAX_NAME_LEN).then_some(name)
}

/// `onnx` with the leading (batch) dimension of every graph input and output fixed to `batch`.
/// The inputs' and outputs' declared batch dimension must be dynamic (a `dim_param` or
/// nothing); initializers listed as inputs (IR-3 files) are left alone.
///
/// # Errors
/// [`RewriteError`] when the bytes are not ONNX or a tensor has no dynamic batch dimension.
#[cfg(feature = "rewrite")]
pub fn fix_batch(onnx: &[u8], batch: u32) -> Result<Vec<u8>, RewriteError> {
    use candle_onnx::onnx::{tensor_shape_proto::dimension::Value, type_proto, ModelProto};
    use prost::Message;

    let mut model = ModelProto::decode(onnx).map_err(|e| RewriteError::Decode(e.to_string()))?;
    let graph = model
        .graph
        .as_mut()
        .ok_or_else(|| RewriteError::Decode("the model has no graph".into()))?;
    let weights: std::collections::HashSet<String> =
        graph.initializer.iter().map(|t| t.name.clone()).collect();
    for v in graph
        .input
        .iter_mut()
        .filter(|v| !weights.contains(&v.name))
        .chain(graph.output.iter_mut())
    {
        let no_batch = || RewriteError::NoBatch {
            tensor: v.name.clone(),
        };
        let dim = match v.r#type.as_mut().and_then(|t| t.value.as_mut()) {
            Some(type_proto::Value::TensorType(t)) => t
                .shape
                .as_mut()
                .and_then(|s| s.dim.first_mut())
                .ok_or_else(no_batch)?,
            _ => return Err(no_batch()),
        };
        if matches!(dim.value, Some(Value::DimValue(n)) if n > 0) {
            return Err(no_batch());
        }
        dim.value = Some(Value::DimValue(i64::from(batch)));
        dim.denotation.clear();
    }
    Ok(model.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_makes_each_file_once_and_names_variants() {
        let g = Grid {
            batches: vec![8, 1, 8],
            ..Grid::default()
        };
        let files: Vec<String> = g.builds().iter().map(Build::file_name).collect();
        assert_eq!(
            files,
            [
                "model.onnx",
                "fp32-b1.onnx",
                "fp32-b8.onnx",
                "int8.onnx",
                "int8-b1.onnx",
                "int8-b8.onnx"
            ]
        );
        let b = g.builds()[2];
        assert_eq!(b.max_batch(), 8);
        let configs = g.configs(b, &["local".into(), "gpu".into()]);
        assert_eq!(configs.len(), 2 * 2 * 2);
        assert_eq!(
            variant_name("digits_mlp", &configs[0]).unwrap(),
            "digits_mlp.fp32-basic-t1-b8-local"
        );
        assert_eq!(variant_name(&"m".repeat(60), &configs[0]), None);
        assert_eq!(GraphLevel::parse("extended"), Some(GraphLevel::Extended));
        assert_eq!(GraphLevel::parse("fast"), None);
    }

    #[cfg(feature = "rewrite")]
    #[test]
    fn fix_batch_refuses_garbage() {
        assert!(matches!(
            fix_batch(b"\xff\xff\xff", 8),
            Err(RewriteError::Decode(_))
        ));
    }
}
