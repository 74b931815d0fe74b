//! Auto-completion as Triton does it for ONNX models: what a configuration leaves out is read
//! from the model folder and the ONNX file.
//!
//! Two stages, as in Triton:
//!
//! - [`backend_fields`], the server's part (`model_config_utils.cc`, `AutoCompleteBackendFields`,
//!   run for every model, with or without auto-complete): `name` from the folder; `backend:
//!   "onnxruntime"` when `platform` is `onnxruntime_onnx`, `default_model_filename` is
//!   `model.onnx`, or neither is set and the first version folder holds `model.onnx`; then
//!   `platform: "onnxruntime_onnx"` and `default_model_filename: "model.onnx"` when left out.
//!   `platform: "ensemble"` is an ensemble. Every other backend is refused by name.
//! - [`complete_io`], the ONNX Runtime backend's part (`onnxruntime.cc`, `AutoCompleteConfig`,
//!   `AutoCompleteMaxBatch`, `AutoCompleteIO`), skipped when auto-complete is off:
//!   - nothing is filled when the configuration lists both inputs and outputs;
//!   - the model *can batch* when every input and every output of the file has a first
//!     dimension and it is dynamic (`-1`);
//!   - if it can and `max_batch_size` is 0 (left out or written 0: proto3 cannot tell them
//!     apart), `max_batch_size` becomes the backend's `default-max-batch-size`, 4 unless the
//!     server says otherwise (`backend_model.cc`, `backend_config_defaults`; the backend's README,
//!     "Default Max Batch Size"); then, if `max_batch_size > 1` and neither `dynamic_batching`
//!     nor `sequence_batching` is set, `dynamic_batching {}` is added (normalisation later fills
//!     its `preferred_batch_size` with `[max_batch_size]`);
//!   - if it cannot, a non-zero `max_batch_size` is refused ("model does not support batching
//!     while non-zero max_batch_size is specified"), naming the tensor whose first dimension
//!     is fixed;
//!   - an empty `input` (or `output`) list is filled from the file: each tensor's name, its
//!     `data_type`, and its dims without the batch dimension when `max_batch_size > 0`; a
//!     tensor left with no dims gets `dims: [1]`, plus `reshape { shape: [] }` when
//!     `max_batch_size > 0` (a scalar per request).
//!
//! One difference: Triton keeps the file's tensors in a hash map, so the order of auto-filled
//! inputs and outputs varies between runs (its tests accept any order); weir keeps the file's
//! order.

use std::path::Path;

use weir_engine::onnx::{ModelMetadata, TensorInfo};
use weir_engine::tensor::Dim;

use crate::datatype;
use crate::error::LoadError;
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::{
    ModelConfig, ModelDynamicBatching, ModelInput, ModelOutput, ModelTensorReshape,
};

/// Triton's platform of ONNX models.
pub const ONNX_PLATFORM: &str = "onnxruntime_onnx";
/// Triton's backend of ONNX models.
pub const ONNX_BACKEND: &str = "onnxruntime";
/// The ONNX file's name when the configuration names none.
pub const ONNX_FILENAME: &str = "model.onnx";
/// An ensemble's platform.
pub const ENSEMBLE_PLATFORM: &str = "ensemble";
/// The backend's `default-max-batch-size` when the server is not told otherwise.
pub const DEFAULT_MAX_BATCH_SIZE: i32 = 4;

/// What serves a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// An ONNX file run by ONNX Runtime (`backend: "onnxruntime"`).
    Onnx,
    /// Other models' steps (`platform: "ensemble"`).
    Ensemble,
}

/// Fills `name`, `backend`, `platform` and `default_model_filename` as Triton's server does, and
/// says what kind of model this is. `folder` is the model folder's name; `first_version` the
/// lowest-numbered version folder, if any.
///
/// # Errors
/// [`LoadError::Invalid`] for a name that differs from the folder's or a platform and backend
/// that do not pair; [`LoadError::Unsupported`] for a backend other than ONNX Runtime.
pub fn backend_fields(
    config: &mut ModelConfig,
    folder: &str,
    first_version: Option<&Path>,
) -> Result<ModelKind, LoadError> {
    if config.name.is_empty() {
        config.name = folder.to_string();
    } else if config.name != folder {
        return Err(LoadError::invalid(
            "name",
            format!(
                "the configuration names model `{}`, but its folder is `{folder}`; Triton requires the two to be equal",
                config.name
            ),
        ));
    }
    let ensemble_scheduling = matches!(
        config.scheduling_choice,
        Some(SchedulingChoice::EnsembleScheduling(_))
    );
    if config.platform == ENSEMBLE_PLATFORM {
        if !config.backend.is_empty() {
            return Err(LoadError::invalid(
                "backend",
                format!(
                    "an ensemble (platform `ensemble`) has no backend, but the configuration says `{}`",
                    config.backend
                ),
            ));
        }
        if !ensemble_scheduling {
            return Err(LoadError::invalid(
                "ensemble_scheduling",
                "platform `ensemble` needs ensemble_scheduling",
            ));
        }
        return Ok(ModelKind::Ensemble);
    }
    if ensemble_scheduling {
        return Err(LoadError::invalid(
            "ensemble_scheduling",
            format!(
                "set for a model whose platform is `{}`, not `ensemble`",
                config.platform
            ),
        ));
    }
    if config.backend.is_empty() {
        let holds_onnx = || first_version.is_some_and(|v| v.join(ONNX_FILENAME).exists());
        if config.platform == ONNX_PLATFORM
            || config.default_model_filename == ONNX_FILENAME
            || (config.platform.is_empty()
                && config.default_model_filename.is_empty()
                && holds_onnx())
        {
            config.backend = ONNX_BACKEND.to_string();
        }
    }
    if config.backend == ONNX_BACKEND {
        if config.platform.is_empty() {
            config.platform = ONNX_PLATFORM.to_string();
        } else if config.platform != ONNX_PLATFORM {
            return Err(LoadError::invalid(
                "platform",
                format!(
                    "platform `{}` does not pair with backend `onnxruntime` (its platform is `onnxruntime_onnx`)",
                    config.platform
                ),
            ));
        }
        if config.default_model_filename.is_empty() {
            config.default_model_filename = ONNX_FILENAME.to_string();
        }
        return Ok(ModelKind::Onnx);
    }
    const SERVED: &str = "weir serves ONNX models (backend `onnxruntime`) and ensembles";
    if !config.backend.is_empty() {
        Err(LoadError::unsupported(
            "backend",
            format!("{SERVED}; backend `{}` is neither", config.backend),
        ))
    } else if !config.platform.is_empty() {
        Err(LoadError::unsupported(
            "platform",
            format!("{SERVED}; platform `{}` is neither", config.platform),
        ))
    } else {
        Err(LoadError::invalid(
            "platform",
            format!(
                "cannot tell the model's backend: the configuration sets neither `platform` nor `backend`, and the first version folder holds no `{ONNX_FILENAME}`"
            ),
        ))
    }
}

/// Dims as a configuration writes them: `-1` for a dynamic dimension.
pub fn config_dims(dims: &[Dim]) -> Vec<i64> {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => i64::try_from(*n).unwrap_or(i64::MAX),
            Dim::Dynamic => -1,
        })
        .collect()
}

/// Whether every tensor of the file has a dynamic first dimension; otherwise the first that
/// has not, and what it has there.
fn batching_blocker(meta: &ModelMetadata) -> Option<(String, String)> {
    let tensors = meta
        .inputs
        .iter()
        .map(|t| ("input", t))
        .chain(meta.outputs.iter().map(|t| ("output", t)));
    for (what, t) in tensors {
        match t.dims.first() {
            Some(Dim::Dynamic) => {}
            Some(Dim::Fixed(n)) => {
                return Some((
                    format!("{what} `{}`", t.name),
                    format!("a first dimension fixed to {n}"),
                ))
            }
            None => {
                return Some((
                    format!("{what} `{}`", t.name),
                    "no dimensions (a scalar)".into(),
                ))
            }
        }
    }
    None
}

/// Completes `max_batch_size`, `dynamic_batching`, `input` and `output` from the file's
/// signature `meta` (read from `file`), as the ONNX Runtime backend does.
///
/// # Errors
/// [`LoadError::Contradicts`] for a non-zero `max_batch_size` on a model that cannot batch;
/// [`LoadError::Unsupported`] for a file tensor with an element type Triton has no data type for.
pub fn complete_io(
    config: &mut ModelConfig,
    meta: &ModelMetadata,
    default_max_batch_size: i32,
    file: &str,
) -> Result<(), LoadError> {
    if !config.input.is_empty() && !config.output.is_empty() {
        return Ok(());
    }
    match batching_blocker(meta) {
        None => {
            if config.max_batch_size == 0 {
                config.max_batch_size = default_max_batch_size.max(0);
            }
            if config.max_batch_size > 1 && config.scheduling_choice.is_none() {
                config.scheduling_choice = Some(SchedulingChoice::DynamicBatching(
                    ModelDynamicBatching::default(),
                ));
            }
        }
        Some((tensor, what)) if config.max_batch_size != 0 => {
            return Err(LoadError::Contradicts {
                field: "max_batch_size".into(),
                config: format!(
                    "{} (batching, which needs every input and output to have a dynamic first dimension)",
                    config.max_batch_size
                ),
                file: file.to_string(),
                actual: format!("{what} on {tensor}"),
            });
        }
        Some(_) => {}
    }
    let batched = config.max_batch_size > 0;
    let skip = usize::from(batched);
    let filled = |t: &TensorInfo,
                  what: &str|
     -> Result<(i32, Vec<i64>, Option<ModelTensorReshape>), LoadError> {
        let data_type = datatype::of_onnx(t.element).map_err(|has| {
            LoadError::unsupported(
                what,
                format!(
                    "{file}: {what} `{}` holds {has}, which Triton has no data type for",
                    t.name
                ),
            )
        })?;
        let mut dims = config_dims(t.dims.get(skip..).unwrap_or_default());
        let mut reshape = None;
        if dims.is_empty() {
            dims.push(1);
            if batched {
                reshape = Some(ModelTensorReshape { shape: Vec::new() });
            }
        }
        Ok((data_type as i32, dims, reshape))
    };
    if config.input.is_empty() {
        for t in &meta.inputs {
            let (data_type, dims, reshape) = filled(t, "input")?;
            config.input.push(ModelInput {
                name: t.name.clone(),
                data_type,
                dims,
                reshape,
                ..ModelInput::default()
            });
        }
    }
    if config.output.is_empty() {
        for t in &meta.outputs {
            let (data_type, dims, reshape) = filled(t, "output")?;
            config.output.push(ModelOutput {
                name: t.name.clone(),
                data_type,
                dims,
                reshape,
                ..ModelOutput::default()
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::onnx::ElementType;
    use weir_engine::tensor::DType;

    fn tensor(name: &str, dims: &[Option<usize>]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            element: ElementType::Supported(DType::F32),
            dims: dims
                .iter()
                .map(|d| d.map_or(Dim::Dynamic, Dim::Fixed))
                .collect(),
            names: vec![None; dims.len()],
        }
    }

    fn meta(inputs: Vec<TensorInfo>, outputs: Vec<TensorInfo>) -> ModelMetadata {
        ModelMetadata {
            inputs,
            outputs,
            overridable: Vec::new(),
        }
    }

    #[test]
    fn a_free_batch_dimension_gives_the_default_max_batch_size_and_dynamic_batching() {
        let mut c = ModelConfig::default();
        let m = meta(
            vec![tensor("x", &[None, Some(64)])],
            vec![tensor("y", &[None, Some(10)])],
        );
        complete_io(&mut c, &m, DEFAULT_MAX_BATCH_SIZE, "f.onnx").unwrap();
        assert_eq!(c.max_batch_size, 4);
        assert!(matches!(
            c.scheduling_choice,
            Some(SchedulingChoice::DynamicBatching(_))
        ));
        assert_eq!(c.input[0].dims, vec![64]);
        assert_eq!(c.output[0].dims, vec![10]);
    }

    #[test]
    fn max_batch_size_one_adds_no_dynamic_batching() {
        let mut c = ModelConfig::default();
        let m = meta(
            vec![tensor("x", &[None, Some(2)])],
            vec![tensor("y", &[None])],
        );
        complete_io(&mut c, &m, 1, "f.onnx").unwrap();
        assert_eq!(c.max_batch_size, 1);
        assert!(c.scheduling_choice.is_none());
        // A tensor left without dims is a scalar per request.
        assert_eq!(c.output[0].dims, vec![1]);
        assert_eq!(
            c.output[0].reshape,
            Some(ModelTensorReshape { shape: vec![] })
        );
    }

    #[test]
    fn a_fixed_first_dimension_means_no_batching_and_refuses_a_max_batch_size() {
        let m = meta(
            vec![tensor("x", &[Some(1), Some(3)])],
            vec![tensor("y", &[None])],
        );
        let mut c = ModelConfig::default();
        complete_io(&mut c, &m, 4, "f.onnx").unwrap();
        assert_eq!(c.max_batch_size, 0);
        assert_eq!(c.input[0].dims, vec![1, 3]);
        let mut c = ModelConfig {
            max_batch_size: 8,
            ..ModelConfig::default()
        };
        let e = complete_io(&mut c, &m, 4, "f.onnx").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("max_batch_size: the configuration says 8"),
            "{text}"
        );
        assert!(text.contains("fixed to 1 on input `x`"), "{text}");
    }

    #[test]
    fn backend_fields_follow_the_folder_and_the_file_name() {
        let mut c = ModelConfig::default();
        let kind = backend_fields(&mut c, "m", None);
        assert!(kind.is_err(), "no hint at all");
        let mut c = ModelConfig {
            default_model_filename: "model.onnx".into(),
            ..ModelConfig::default()
        };
        assert_eq!(backend_fields(&mut c, "m", None).unwrap(), ModelKind::Onnx);
        assert_eq!(
            (c.name.as_str(), c.platform.as_str(), c.backend.as_str()),
            ("m", ONNX_PLATFORM, ONNX_BACKEND)
        );
        let mut c = ModelConfig {
            name: "other".into(),
            ..ModelConfig::default()
        };
        assert!(backend_fields(&mut c, "m", None)
            .unwrap_err()
            .to_string()
            .contains("`other`"));
        let mut c = ModelConfig {
            backend: "pytorch".into(),
            ..ModelConfig::default()
        };
        let e = backend_fields(&mut c, "m", None).unwrap_err();
        assert!(matches!(e, LoadError::Unsupported { .. }), "{e}");
        let mut c = ModelConfig {
            platform: "onnxruntime_onnx".into(),
            backend: "onnxruntime".into(),
            ..ModelConfig::default()
        };
        assert_eq!(backend_fields(&mut c, "m", None).unwrap(), ModelKind::Onnx);
        let mut c = ModelConfig {
            platform: "tensorrt_plan".into(),
            backend: "onnxruntime".into(),
            ..ModelConfig::default()
        };
        assert!(backend_fields(&mut c, "m", None).is_err());
    }
}
