//! The crate's errors, one type per boundary: [`RepositoryError`] when the repository itself
//! cannot be read (nothing loads), [`ModelError`] when one model or one version of it cannot be
//! served (the others still load), and [`GraphError`] when a served version cannot become a weir
//! graph because the engine lacks what its configuration asks for.
//!
//! A [`ModelError`] always names the model (and the version, when only one is at fault); its
//! [`LoadError`] names the file and the field, and, where the configuration contradicts the ONNX
//! file, both values. The variants say *whose* rule was broken: [`LoadError::Invalid`] is a
//! configuration Triton refuses too, [`LoadError::NotImplemented`] and [`LoadError::Unsupported`]
//! are valid Triton that weir does not do (so a user knows which to fix and which to ask for).

use std::fmt;

use weir_engine::onnx::OnnxError;
use weir_engine::paths::FileError;

/// The repository root cannot be read: no model loads.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    /// The root is missing, unreadable or not a folder.
    #[error("model repository {root}: {message}")]
    Root {
        /// The root as given.
        root: String,
        /// Why.
        message: String,
    },
    /// More folders than the scan reads.
    #[error("model repository {root} holds more than {limit} entries; raise the limit or split the repository")]
    TooManyEntries {
        /// The root.
        root: String,
        /// The limit.
        limit: usize,
    },
}

/// One model, or one version of it, cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("model `{model}`{}: {kind}", version_label(*.version))]
pub struct ModelError {
    /// The model (its folder's name).
    pub model: String,
    /// The version at fault, when the others may still load.
    pub version: Option<u64>,
    /// What is wrong (boxed: the error travels in every model's result, which stays small).
    pub kind: Box<LoadError>,
}

fn version_label(version: Option<u64>) -> String {
    version.map(|v| format!(" version {v}")).unwrap_or_default()
}

impl ModelError {
    /// An error of the whole model.
    pub fn model(model: &str, kind: LoadError) -> Self {
        ModelError {
            model: model.to_string(),
            version: None,
            kind: Box::new(kind),
        }
    }

    /// An error of one version.
    pub fn version(model: &str, version: u64, kind: LoadError) -> Self {
        ModelError {
            model: model.to_string(),
            version: Some(version),
            kind: Box::new(kind),
        }
    }
}

/// What is wrong with a model's folder, configuration or file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The folder's name cannot name a model.
    #[error("invalid model name: {reason}")]
    Name {
        /// Why.
        reason: String,
    },
    /// A file cannot be read: missing, not a regular file, over its size cap, or a symbolic link
    /// out of the repository.
    #[error(transparent)]
    File(#[from] FileError),
    /// The model folder has more entries than the scan reads.
    #[error("the model folder holds more than {limit} entries")]
    TooManyEntries {
        /// The limit.
        limit: usize,
    },
    /// `config.pbtxt` is not protobuf text format of Triton's `ModelConfig`.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The configuration sets fields weir does not implement (never silently ignored).
    #[error("{file} sets {}, which weir does not implement", FieldList(.fields))]
    NotImplemented {
        /// The file.
        file: String,
        /// Each field as a path (`optimization.cuda.graphs`, `parameters["execution_mode"]`).
        fields: Vec<String>,
    },
    /// A field holds a value Triton refuses as well.
    #[error("{field}: {message}")]
    Invalid {
        /// The field's path.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A field holds a value Triton accepts but weir does not implement.
    #[error("{field}: {reason}")]
    Unsupported {
        /// The field's path.
        field: String,
        /// What weir lacks.
        reason: String,
    },
    /// The configuration contradicts the ONNX file.
    #[error("{field}: the configuration says {config}, but {file} has {actual}")]
    Contradicts {
        /// The field's path (`input[0].dims`).
        field: String,
        /// The configuration's value.
        config: String,
        /// The ONNX file.
        file: String,
        /// The file's value.
        actual: String,
    },
    /// The ONNX file is not a model.
    #[error(transparent)]
    Onnx(#[from] OnnxError),
    /// The version policy selects no version folder.
    #[error("no version is served: {reason}")]
    NoVersions {
        /// Why.
        reason: String,
    },
    /// An ensemble's steps do not form a dataflow Triton would run.
    #[error(transparent)]
    Ensemble(#[from] EnsembleError),
}

impl LoadError {
    /// [`LoadError::Invalid`] at `field`.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        LoadError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// [`LoadError::Unsupported`] at `field`.
    pub(crate) fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        LoadError::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Why an ensemble's steps cannot run. Each names the step (by its position in
/// `ensemble_scheduling.step` and its model) and the tensor at fault.
#[derive(Debug, thiserror::Error)]
pub enum EnsembleError {
    /// A step names a model the repository does not serve.
    #[error("ensemble_scheduling.step[{step}] runs model `{model}`, which {reason}")]
    MissingModel {
        /// The step.
        step: usize,
        /// The model it names.
        model: String,
        /// Why it is not available (absent, or failed to load and why).
        reason: String,
    },
    /// A step reads a tensor that neither the ensemble's inputs nor any step provides.
    #[error("ensemble_scheduling.step[{step}] (model `{model}`) reads tensor `{tensor}`, which no ensemble input or step output provides")]
    NoProducer {
        /// The step.
        step: usize,
        /// Its model.
        model: String,
        /// The tensor.
        tensor: String,
    },
    /// An ensemble output that no step writes.
    #[error("output `{tensor}` is written by no step of ensemble_scheduling")]
    OutputNotWritten {
        /// The output.
        tensor: String,
    },
    /// Two writers of one tensor.
    #[error("tensor `{tensor}` is written twice: by {first} and by ensemble_scheduling.step[{step}] (model `{model}`)")]
    WrittenTwice {
        /// The tensor.
        tensor: String,
        /// The first writer (`the ensemble's inputs` or a step).
        first: String,
        /// The second writer.
        step: usize,
        /// Its model.
        model: String,
    },
    /// Steps that wait on each other.
    #[error("ensemble_scheduling has a cycle: {}", .links.join(", which "))]
    Cycle {
        /// The cycle, one link per step: `step[0] (model `a`) reads `y` from step[1] (model `b`)`.
        links: Vec<String>,
    },
    /// A tensor that is read by nothing (Triton refuses unused ensemble tensors).
    #[error("tensor `{tensor}` is {what} but nothing reads it")]
    Unused {
        /// The tensor.
        tensor: String,
        /// Where it comes from (`an ensemble input`, `written by step[0] (model a)`).
        what: String,
    },
    /// A step's map names a tensor its model lacks, or leaves an input unmapped.
    #[error("ensemble_scheduling.step[{step}].{map} (model `{model}`): {message}")]
    Mapping {
        /// The step.
        step: usize,
        /// `input_map` or `output_map`.
        map: &'static str,
        /// Its model.
        model: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor's type or shape differs between its writer and a reader.
    #[error("tensor `{tensor}`: {message}")]
    Inconsistent {
        /// The tensor.
        tensor: String,
        /// Both sides.
        message: String,
    },
}

/// A served version cannot become a weir graph: the engine lacks what its configuration asks for.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The model or version is not in the repository, or did not load.
    #[error("model `{model}`{}: not served: {reason}", version_label(*.version))]
    NotServed {
        /// The model.
        model: String,
        /// The version asked for.
        version: Option<u64>,
        /// Why.
        reason: String,
    },
    /// A KIND_GPU instance group naming a GPU other than device 0: in-process executors run GPU
    /// groups on CUDA device 0.
    #[error("model `{model}`: instance_group[{group}].gpus: weir runs KIND_GPU instance groups in process on CUDA device 0 only (for other devices, run the model on a `weir executor --device cuda` and name it as a replica)")]
    GpuInstances {
        /// The model.
        model: String,
        /// The group's position.
        group: usize,
    },
    /// A configuration field the engine has no counterpart for.
    #[error("model `{model}`: {field}: {reason}")]
    Unsupported {
        /// The model.
        model: String,
        /// The field.
        field: String,
        /// What the engine lacks.
        reason: String,
    },
}

/// Fields shown as a list in one message: `a`, `b` and `c`.
struct FieldList<'a>(&'a [String]);

impl fmt::Display for FieldList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.0.iter().enumerate() {
            match i {
                0 => {}
                i if i + 1 == self.0.len() => f.write_str(" and ")?,
                _ => f.write_str(", ")?,
            }
            write!(f, "`{field}`")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_model_version_file_and_fields() {
        let e = ModelError::version(
            "resnet",
            3,
            LoadError::NotImplemented {
                file: "m/config.pbtxt".into(),
                fields: vec!["a".into(), "b.c".into(), "d".into()],
            },
        );
        assert_eq!(
            e.to_string(),
            "model `resnet` version 3: m/config.pbtxt sets `a`, `b.c` and `d`, which weir does not implement"
        );
        let e = ModelError::model(
            "x",
            LoadError::Contradicts {
                field: "input[0].data_type".into(),
                config: "TYPE_FP16".into(),
                file: "x/1/model.onnx".into(),
                actual: "TYPE_FP32".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "model `x`: input[0].data_type: the configuration says TYPE_FP16, but x/1/model.onnx has TYPE_FP32"
        );
    }
}
