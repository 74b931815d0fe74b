//! The configuration checked against its ONNX file: every input and output it names exists in
//! the file with the same data type and compatible dims, as Triton's ONNX Runtime backend checks
//! when it loads a model (`onnxruntime.cc`, `ValidateInputs`, `ValidateOutputs`;
//! `onnxruntime_utils.cc`, `CompareDimsSupported`).
//!
//! The rules, with the file's dynamic dimensions as `-1`:
//! - with `max_batch_size > 0` the file's first dimension must be `-1`, and the configuration's
//!   dims are compared with the file's from the second dimension on;
//! - an input's dims (its `reshape.shape` when it has one) match where the file's dimension is
//!   fixed — a fixed size in the file needs the same size in the configuration, a `-1` in the
//!   file takes any; an output's must match exactly, `-1` for `-1`;
//! - a scalar in the file takes only dims of 1s;
//! - the file's inputs are exactly the configuration's (optional ones aside) plus the sequence
//!   batcher's control and state inputs; the configuration may list a subset of the outputs;
//! - an `optional` input is one the file lets a call leave out: an overridable initializer (an
//!   initializer listed among the graph's inputs, IR 4 or later), whose value weir can read —
//!   ONNX Runtime has no other way to run without an input. Triton's backend also refuses an
//!   optional input on a batching model; weir fills the file's value into each request that
//!   leaves the input out, so batches stay exact and it accepts them.
//!
//! Every refusal is a [`LoadError::Contradicts`] naming the field and both values.

use weir_engine::onnx::{ModelMetadata, TensorInfo};
use weir_engine::tensor::Dim;

use crate::autocomplete::config_dims;
use crate::datatype;
use crate::error::LoadError;
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_sequence_batching::control::Kind as ControlKind;
use crate::proto::inference::{DataType, ModelConfig, ModelTensorReshape};

/// Shows dims as `[-1, 3, 224, 224]`.
pub fn shape_text(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

fn names(tensors: &[TensorInfo]) -> String {
    let n: Vec<String> = tensors.iter().map(|t| format!("`{}`", t.name)).collect();
    if n.is_empty() {
        "none".into()
    } else {
        n.join(", ")
    }
}

/// How one tensor's dims compare; `Err` says what the configuration states and what the file has.
fn compare_dims(
    file_dims: &[Dim],
    config: &[i64],
    max_batch_size: i32,
    exact: bool,
) -> Result<(), (String, String)> {
    let file = config_dims(file_dims);
    if file.is_empty() {
        if config.iter().all(|&d| d == 1) {
            return Ok(());
        }
        return Err((
            shape_text(config),
            "a scalar, which takes only dims of 1s".into(),
        ));
    }
    let full: Vec<i64> = if max_batch_size > 0 {
        if file[0] != -1 {
            return Err((
                format!(
                    "{} after a batch dimension (max_batch_size {max_batch_size})",
                    shape_text(config)
                ),
                format!(
                    "{} (no dynamic first dimension to batch along)",
                    shape_text(&file)
                ),
            ));
        }
        std::iter::once(-1).chain(config.iter().copied()).collect()
    } else {
        config.to_vec()
    };
    let same = full.len() == file.len()
        && full
            .iter()
            .zip(&file)
            .all(|(&c, &f)| (!exact && f == -1) || c == f);
    if same {
        Ok(())
    } else if max_batch_size > 0 {
        Err((
            format!("{} with the batch dimension", shape_text(&full)),
            shape_text(&file),
        ))
    } else {
        Err((shape_text(&full), shape_text(&file)))
    }
}

/// Checks one tensor's data type against the file's.
fn check_type(field: String, config: i32, t: &TensorInfo, file: &str) -> Result<(), LoadError> {
    let actual = datatype::of_onnx(t.element).map_err(|has| LoadError::Contradicts {
        field: field.clone(),
        config: datatype::name(config),
        file: file.to_string(),
        actual: has,
    })?;
    if actual as i32 != config {
        return Err(LoadError::Contradicts {
            field,
            config: datatype::name(config),
            file: file.to_string(),
            actual: actual.as_str_name().to_string(),
        });
    }
    Ok(())
}

/// The file's signature of optional input `name` (configured at `base`): an overridable
/// initializer with a value weir can read.
fn optional_input<'m>(
    base: &str,
    name: &str,
    meta: &'m ModelMetadata,
    file: &str,
) -> Result<&'m TensorInfo, LoadError> {
    let field = format!("{base}.optional");
    if meta.inputs.iter().any(|t| t.name == name) {
        return Err(LoadError::invalid(
            field,
            format!("input `{name}` has no default value in {file} (it is not an initializer), so ONNX Runtime cannot run the model without it"),
        ));
    }
    let Some(o) = meta.overridable(name) else {
        return Err(LoadError::Contradicts {
            field: format!("{base}.name"),
            config: format!("input `{name}`"),
            file: file.to_string(),
            actual: format!("inputs {}", names(&meta.inputs)),
        });
    };
    match &o.default {
        Ok(_) => Ok(&o.info),
        Err(why) => Err(LoadError::invalid(
            field,
            format!("the default value of input `{name}` in {file} cannot be read: {why}"),
        )),
    }
}

fn shape_field(base: &str, reshape: Option<&ModelTensorReshape>) -> (String, &'static str) {
    match reshape {
        Some(_) => (format!("{base}.reshape.shape"), "reshape"),
        None => (format!("{base}.dims"), "dims"),
    }
}

/// Checks `config` against the signature `meta` of `file`.
///
/// # Errors
/// [`LoadError::Contradicts`] for the first tensor that disagrees; [`LoadError::Invalid`] for an
/// optional input the file has no readable default for.
pub fn check(config: &ModelConfig, meta: &ModelMetadata, file: &str) -> Result<(), LoadError> {
    let mbs = config.max_batch_size;
    let mut expected_inputs: Vec<&str> = Vec::new();
    for (i, input) in config.input.iter().enumerate() {
        let base = format!("input[{i}]");
        let t = if input.optional {
            optional_input(&base, &input.name, meta, file)?
        } else {
            let Some(t) = meta.inputs.iter().find(|t| t.name == input.name) else {
                return Err(LoadError::Contradicts {
                    field: format!("{base}.name"),
                    config: format!("input `{}`", input.name),
                    file: file.to_string(),
                    actual: format!("inputs {}", names(&meta.inputs)),
                });
            };
            expected_inputs.push(&input.name);
            t
        };
        check_type(format!("{base}.data_type"), input.data_type, t, file)?;
        let (field, _) = shape_field(&base, input.reshape.as_ref());
        let shape = input.reshape.as_ref().map_or(&input.dims, |r| &r.shape);
        compare_dims(&t.dims, shape, mbs, false).map_err(|(config, actual)| {
            LoadError::Contradicts {
                field,
                config,
                file: file.to_string(),
                actual: format!("{actual} for input `{}`", t.name),
            }
        })?;
    }
    for (i, output) in config.output.iter().enumerate() {
        let base = format!("output[{i}]");
        let Some(t) = meta.outputs.iter().find(|t| t.name == output.name) else {
            return Err(LoadError::Contradicts {
                field: format!("{base}.name"),
                config: format!("output `{}`", output.name),
                file: file.to_string(),
                actual: format!("outputs {}", names(&meta.outputs)),
            });
        };
        check_type(format!("{base}.data_type"), output.data_type, t, file)?;
        let (field, _) = shape_field(&base, output.reshape.as_ref());
        let shape = output.reshape.as_ref().map_or(&output.dims, |r| &r.shape);
        compare_dims(&t.dims, shape, mbs, true).map_err(|(config, actual)| {
            LoadError::Contradicts {
                field,
                config,
                file: file.to_string(),
                actual: format!("{actual} for output `{}`", t.name),
            }
        })?;
    }
    if let Some(SchedulingChoice::SequenceBatching(seq)) = &config.scheduling_choice {
        for (i, control) in seq.control_input.iter().enumerate() {
            let field = format!("sequence_batching.control_input[{i}].name");
            let Some(t) = meta.inputs.iter().find(|t| t.name == control.name) else {
                return Err(LoadError::Contradicts {
                    field,
                    config: format!("control input `{}`", control.name),
                    file: file.to_string(),
                    actual: format!("inputs {}", names(&meta.inputs)),
                });
            };
            if let Some(c) = control.control.first() {
                let implied = match c.kind() {
                    ControlKind::ControlSequenceCorrid => c.data_type,
                    _ if !c.fp32_false_true.is_empty() => DataType::TypeFp32 as i32,
                    _ if !c.bool_false_true.is_empty() => DataType::TypeBool as i32,
                    _ => DataType::TypeInt32 as i32,
                };
                check_type(
                    format!("sequence_batching.control_input[{i}].control"),
                    implied,
                    t,
                    file,
                )?;
            }
            expected_inputs.push(&control.name);
        }
        for (i, state) in seq.state.iter().enumerate() {
            let base = format!("sequence_batching.state[{i}]");
            let Some(t_in) = meta.inputs.iter().find(|t| t.name == state.input_name) else {
                return Err(LoadError::Contradicts {
                    field: format!("{base}.input_name"),
                    config: format!("input `{}`", state.input_name),
                    file: file.to_string(),
                    actual: format!("inputs {}", names(&meta.inputs)),
                });
            };
            let Some(t_out) = meta.outputs.iter().find(|t| t.name == state.output_name) else {
                return Err(LoadError::Contradicts {
                    field: format!("{base}.output_name"),
                    config: format!("output `{}`", state.output_name),
                    file: file.to_string(),
                    actual: format!("outputs {}", names(&meta.outputs)),
                });
            };
            check_type(format!("{base}.data_type"), state.data_type, t_in, file)?;
            check_type(format!("{base}.data_type"), state.data_type, t_out, file)?;
            expected_inputs.push(&state.input_name);
        }
    }
    // Triton counts: the file's inputs are the configuration's required inputs plus the
    // sequence batcher's controls and states, each once.
    let listed: Vec<String> = expected_inputs.iter().map(|n| format!("`{n}`")).collect();
    let mut unique = expected_inputs.clone();
    unique.sort_unstable();
    unique.dedup();
    let uncovered = meta
        .inputs
        .iter()
        .any(|t| !expected_inputs.contains(&t.name.as_str()));
    if uncovered
        || unique.len() != expected_inputs.len()
        || expected_inputs.len() != meta.inputs.len()
    {
        return Err(LoadError::Contradicts {
            field: "input".into(),
            config: format!(
                "{} inputs with the sequence controls and states ({})",
                expected_inputs.len(),
                if listed.is_empty() {
                    "none".into()
                } else {
                    listed.join(", ")
                }
            ),
            file: file.to_string(),
            actual: format!("{} inputs ({})", meta.inputs.len(), names(&meta.inputs)),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::onnx::ElementType;
    use weir_engine::tensor::DType;

    fn t(name: &str, dtype: DType, dims: &[i64]) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            element: ElementType::Supported(dtype),
            dims: dims
                .iter()
                .map(|&d| {
                    if d < 0 {
                        Dim::Dynamic
                    } else {
                        Dim::Fixed(d as usize)
                    }
                })
                .collect(),
            names: vec![None; dims.len()],
        }
    }

    #[test]
    fn an_optional_input_must_be_an_overridable_initializer_with_a_readable_value() {
        use crate::proto::inference::{ModelInput, ModelOutput};
        use weir_engine::onnx::Overridable;
        use weir_engine::tensor::Tensor;

        let input = |name: &str, optional: bool| ModelInput {
            name: name.into(),
            data_type: DataType::TypeFp32 as i32,
            dims: vec![-1, 4],
            optional,
            ..ModelInput::default()
        };
        let config = |x_optional: bool| ModelConfig {
            input: vec![input("x", x_optional), input("scale", true)],
            output: vec![ModelOutput {
                name: "y".into(),
                data_type: DataType::TypeFp32 as i32,
                dims: vec![-1, 4],
                ..ModelOutput::default()
            }],
            ..ModelConfig::default()
        };
        let meta = |default: Result<Tensor, String>| ModelMetadata {
            inputs: vec![t("x", DType::F32, &[-1, 4])],
            outputs: vec![t("y", DType::F32, &[-1, 4])],
            overridable: vec![Overridable {
                info: t("scale", DType::F32, &[-1, 4]),
                default,
            }],
        };
        let value = Ok(Tensor::f32(vec![1, 4], vec![1.0; 4]));
        assert!(check(&config(false), &meta(value.clone()), "m.onnx").is_ok());
        let field_of = |r: Result<(), LoadError>| match r {
            Err(LoadError::Invalid { field, message }) => (field, message),
            other => panic!("{other:?}"),
        };
        let (field, message) = field_of(check(&config(true), &meta(value), "m.onnx"));
        assert_eq!(field, "input[0].optional");
        assert!(message.contains("no default value in m.onnx"), "{message}");
        let (field, message) = field_of(check(
            &config(false),
            &meta(Err("stored outside".into())),
            "m.onnx",
        ));
        assert_eq!(field, "input[1].optional");
        assert!(message.contains("stored outside"), "{message}");
    }

    #[test]
    fn inputs_take_any_size_where_the_file_is_dynamic_outputs_must_match_exactly() {
        assert!(compare_dims(&t("x", DType::F32, &[-1, 3, -1]).dims, &[3, 224], 4, false).is_ok());
        assert!(compare_dims(&t("x", DType::F32, &[-1, 3, -1]).dims, &[3, 224], 4, true).is_err());
        assert!(compare_dims(&t("x", DType::F32, &[-1, 3, -1]).dims, &[3, -1], 4, true).is_ok());
        assert!(compare_dims(&t("x", DType::F32, &[-1, 3]).dims, &[-1], 4, false).is_err());
        assert!(compare_dims(&t("x", DType::F32, &[1, 3]).dims, &[3], 4, false).is_err());
        assert!(compare_dims(&t("x", DType::F32, &[1, 3]).dims, &[1, 3], 0, false).is_ok());
        assert!(compare_dims(&t("x", DType::F32, &[]).dims, &[1], 0, true).is_ok());
        assert!(compare_dims(&t("x", DType::F32, &[]).dims, &[2], 0, true).is_err());
    }
}
