//! Value rules on the fields weir honours: those Triton's server applies
//! (`model_config_utils.cc`, `ValidateModelConfig`, `ValidateIOShape`, the sequence-control
//! checks), refused as [`LoadError::Invalid`], and the values weir does not implement although
//! Triton accepts them, refused as [`LoadError::Unsupported`] by field and value (a field honoured
//! for some values is still never silently ignored for the others).
//!
//! [`check_model`] runs on the configuration as written (after the backend fields are filled),
//! [`check_io`] once auto-complete has filled inputs and outputs.

use std::collections::HashSet;
use std::path::{Component, Path};

use crate::autocomplete::ModelKind;
use crate::datatype;
use crate::error::LoadError;
use crate::fields::PARAMETERS;
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_instance_group::Kind as GroupKind;
use crate::proto::inference::model_queue_policy::TimeoutAction;
use crate::proto::inference::model_sequence_batching::control::Kind as ControlKind;
use crate::proto::inference::model_sequence_batching::initial_state::StateData;
use crate::proto::inference::{DataType, ModelConfig, ModelSequenceBatching};

/// `optimization.graph.level` values and the ONNX Runtime levels Triton's backend maps them to:
/// -1 basic, 0 all (the default), 1 extended, 2 none.
pub const GRAPH_LEVELS: [i32; 4] = [-1, 0, 1, 2];

/// Checks the configuration's own values.
///
/// # Errors
/// The first rule broken.
pub fn check_model(config: &ModelConfig, kind: ModelKind) -> Result<(), LoadError> {
    if config.max_batch_size < 0 {
        return Err(LoadError::invalid(
            "max_batch_size",
            format!("{} is negative", config.max_batch_size),
        ));
    }
    if kind == ModelKind::Onnx {
        check_file_name(&config.default_model_filename)?;
    } else {
        check_ensemble_fields(config)?;
    }
    match &config.scheduling_choice {
        Some(SchedulingChoice::DynamicBatching(db)) => {
            for (i, &size) in db.preferred_batch_size.iter().enumerate() {
                if size <= 0 || size > config.max_batch_size {
                    return Err(LoadError::invalid(
                        format!("dynamic_batching.preferred_batch_size[{i}]"),
                        format!(
                            "{size}: a preferred batch size is positive and at most max_batch_size ({})",
                            config.max_batch_size
                        ),
                    ));
                }
            }
            if let Some(policy) = &db.default_queue_policy {
                if policy.timeout_action() == TimeoutAction::Delay {
                    return Err(LoadError::unsupported(
                        "dynamic_batching.default_queue_policy.timeout_action",
                        "DELAY is not implemented: weir drops a request whose queue timeout passes (REJECT)",
                    ));
                }
            }
        }
        Some(SchedulingChoice::SequenceBatching(seq)) => check_sequence(seq)?,
        _ => {}
    }
    for (i, group) in config.instance_group.iter().enumerate() {
        let field = format!("instance_group[{i}].kind");
        match GroupKind::try_from(group.kind) {
            Ok(GroupKind::Model) => {
                return Err(LoadError::unsupported(
                    field,
                    "KIND_MODEL (devices chosen by the model itself) is not implemented",
                ))
            }
            Ok(GroupKind::Cpu) if !group.gpus.is_empty() => {
                return Err(LoadError::invalid(
                    format!("instance_group[{i}].gpus"),
                    "a KIND_CPU instance group names no GPUs",
                ))
            }
            Ok(_) => {}
            Err(_) => {
                return Err(LoadError::invalid(
                    field,
                    format!("unknown kind {}", group.kind),
                ))
            }
        }
    }
    if let Some(graph) = config.optimization.as_ref().and_then(|o| o.graph.as_ref()) {
        if !GRAPH_LEVELS.contains(&graph.level) {
            return Err(LoadError::unsupported(
                "optimization.graph.level",
                format!(
                    "{}: the ONNX Runtime levels are -1 (basic), 0 (all), 1 (extended) and 2 (none)",
                    graph.level
                ),
            ));
        }
    }
    for key in PARAMETERS {
        if let Some(p) = config.parameters.get(*key) {
            if p.string_value.trim().parse::<i32>().is_err() {
                return Err(LoadError::invalid(
                    format!("parameters[{key:?}].string_value"),
                    format!("{:?} is not an integer", p.string_value),
                ));
            }
        }
    }
    Ok(())
}

/// The fields Triton refuses on an ensemble (`ValidateEnsembleSchedulingConfig`).
fn check_ensemble_fields(config: &ModelConfig) -> Result<(), LoadError> {
    let refused = [
        ("instance_group", !config.instance_group.is_empty()),
        ("optimization", config.optimization.is_some()),
        ("model_warmup", !config.model_warmup.is_empty()),
    ];
    match refused.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(LoadError::invalid(
            *field,
            format!("`{field}` is not allowed on an ensemble"),
        )),
        None => Ok(()),
    }
}

/// `default_model_filename` names one file in the version folder.
fn check_file_name(name: &str) -> Result<(), LoadError> {
    let mut parts = Path::new(name).components();
    let single = matches!(parts.next(), Some(Component::Normal(_))) && parts.next().is_none();
    if single && !name.contains('/') && name.len() <= 255 {
        Ok(())
    } else {
        Err(LoadError::invalid(
            "default_model_filename",
            format!("{name:?} is not the name of one file in the version folder"),
        ))
    }
}

fn check_sequence(seq: &ModelSequenceBatching) -> Result<(), LoadError> {
    let mut kinds = HashSet::new();
    for (i, input) in seq.control_input.iter().enumerate() {
        let base = format!("sequence_batching.control_input[{i}]");
        if input.name.is_empty() {
            return Err(LoadError::invalid(
                format!("{base}.name"),
                "a control input needs a name",
            ));
        }
        if input.control.len() != 1 {
            return Err(LoadError::invalid(
                format!("{base}.control"),
                format!(
                    "a control input holds exactly one control, `{}` holds {}",
                    input.name,
                    input.control.len()
                ),
            ));
        }
        for (j, control) in input.control.iter().enumerate() {
            let field = format!("{base}.control[{j}]");
            let kind = ControlKind::try_from(control.kind).map_err(|_| {
                LoadError::invalid(
                    format!("{field}.kind"),
                    format!("unknown kind {}", control.kind),
                )
            })?;
            if !kinds.insert(control.kind) {
                return Err(LoadError::invalid(
                    format!("{field}.kind"),
                    format!("{} is given twice", kind.as_str_name()),
                ));
            }
            let pairs = [
                control.int32_false_true.len(),
                control.fp32_false_true.len(),
                control.bool_false_true.len(),
            ];
            if kind == ControlKind::ControlSequenceCorrid {
                let allowed = [
                    DataType::TypeUint64,
                    DataType::TypeInt64,
                    DataType::TypeUint32,
                    DataType::TypeInt32,
                    DataType::TypeString,
                ];
                if !allowed.iter().any(|d| *d as i32 == control.data_type)
                    || pairs.iter().any(|&n| n > 0)
                {
                    return Err(LoadError::invalid(
                        format!("{field}.data_type"),
                        format!(
                            "CONTROL_SEQUENCE_CORRID takes data_type TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 or TYPE_STRING and no false/true values, not {}",
                            datatype::name(control.data_type)
                        ),
                    ));
                }
            } else if pairs.iter().filter(|&&n| n > 0).count() != 1
                || pairs.iter().any(|&n| n != 0 && n != 2)
            {
                return Err(LoadError::invalid(
                    field,
                    format!(
                        "{} takes exactly one of int32_false_true, fp32_false_true or bool_false_true, with two values",
                        kind.as_str_name()
                    ),
                ));
            }
        }
    }
    for (i, state) in seq.state.iter().enumerate() {
        let base = format!("sequence_batching.state[{i}]");
        if state.input_name.is_empty() || state.output_name.is_empty() {
            return Err(LoadError::invalid(
                base,
                "a state names its input_name and output_name",
            ));
        }
        if state.data_type == DataType::TypeInvalid as i32 {
            return Err(LoadError::invalid(
                format!("{base}.data_type"),
                "a state needs a data_type",
            ));
        }
        if state.dims.is_empty() || state.dims.iter().any(|&d| d < 1 && d != -1) {
            return Err(LoadError::invalid(
                format!("{base}.dims"),
                "a state's dims are given, each at least 1 or -1",
            ));
        }
        for (j, initial) in state.initial_state.iter().enumerate() {
            if !matches!(initial.state_data, Some(StateData::ZeroData(true))) {
                return Err(LoadError::invalid(
                    format!("{base}.initial_state[{j}]"),
                    "an initial state is `zero_data: true` (weir does not read `data_file`)",
                ));
            }
        }
    }
    Ok(())
}

/// Checks each input's and output's own fields (Triton's `ValidateIOShape`): a name, a data
/// type, dims of sizes ≥ 1 or -1, and a reshape of the same element count; names unique.
///
/// # Errors
/// The first rule broken.
pub fn check_io(config: &ModelConfig) -> Result<(), LoadError> {
    let inputs = config.input.iter().enumerate().map(|(i, t)| {
        (
            format!("input[{i}]"),
            &t.name,
            t.data_type,
            &t.dims,
            t.reshape.as_ref(),
        )
    });
    let outputs = config.output.iter().enumerate().map(|(i, t)| {
        (
            format!("output[{i}]"),
            &t.name,
            t.data_type,
            &t.dims,
            t.reshape.as_ref(),
        )
    });
    let mut seen = HashSet::new();
    let mut seen_out = HashSet::new();
    for (n, (base, name, data_type, dims, reshape)) in inputs.chain(outputs).enumerate() {
        let names = if n < config.input.len() {
            &mut seen
        } else {
            &mut seen_out
        };
        if name.is_empty() {
            return Err(LoadError::invalid(format!("{base}.name"), "must be given"));
        }
        if !names.insert(name.clone()) {
            return Err(LoadError::invalid(
                format!("{base}.name"),
                format!("`{name}` is listed twice"),
            ));
        }
        if data_type == DataType::TypeInvalid as i32 {
            return Err(LoadError::invalid(
                format!("{base}.data_type"),
                format!("`{name}` must specify a data_type"),
            ));
        }
        if DataType::try_from(data_type).is_err() {
            return Err(LoadError::invalid(
                format!("{base}.data_type"),
                format!("unknown data type {data_type}"),
            ));
        }
        if dims.is_empty() {
            return Err(LoadError::invalid(
                format!("{base}.dims"),
                format!("`{name}` must specify dims"),
            ));
        }
        if let Some(bad) = dims.iter().find(|&&d| d < 1 && d != -1) {
            return Err(LoadError::invalid(
                format!("{base}.dims"),
                format!("{bad}: a dimension is an integer ≥ 1, or -1 for a variable size"),
            ));
        }
        if let Some(reshape) = reshape {
            check_reshape(&base, dims, &reshape.shape, config.max_batch_size)?;
        }
    }
    Ok(())
}

/// The element count of `dims` split at each `-1`, for comparing reshapes; `None` on overflow.
fn chunks(dims: &[i64]) -> Option<Vec<i64>> {
    let mut out = Vec::new();
    let mut current: i64 = 1;
    for &d in dims {
        if d == -1 {
            out.push(current);
            current = 1;
        } else {
            current = current.checked_mul(d)?;
        }
    }
    out.push(current);
    Some(out)
}

fn check_reshape(
    base: &str,
    dims: &[i64],
    shape: &[i64],
    max_batch_size: i32,
) -> Result<(), LoadError> {
    let field = format!("{base}.reshape.shape");
    if shape.is_empty() {
        // An empty reshape is a scalar per request: only in a batching model, and only for dims
        // holding one element.
        return if max_batch_size > 0 && dims.iter().all(|&d| d == 1) {
            Ok(())
        } else {
            Err(LoadError::invalid(
                field,
                "an empty reshape (a scalar) needs max_batch_size > 0 and dims of one element",
            ))
        };
    }
    if let Some(bad) = shape.iter().find(|&&d| d < 1 && d != -1) {
        return Err(LoadError::invalid(
            field,
            format!("{bad}: a dimension is an integer ≥ 1, or -1 for a variable size"),
        ));
    }
    match (chunks(dims), chunks(shape)) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some(_), Some(_)) => Err(LoadError::invalid(
            field,
            format!(
                "{} holds a different number of elements than dims {}",
                crate::signature::shape_text(shape),
                crate::signature::shape_text(dims)
            ),
        )),
        _ => Err(LoadError::invalid(field, "the element count overflows")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::{ModelInput, ModelTensorReshape};

    fn with_input(dims: Vec<i64>, reshape: Option<Vec<i64>>, mbs: i32) -> ModelConfig {
        ModelConfig {
            max_batch_size: mbs,
            input: vec![ModelInput {
                name: "x".into(),
                data_type: DataType::TypeFp32 as i32,
                dims,
                reshape: reshape.map(|shape| ModelTensorReshape { shape }),
                ..ModelInput::default()
            }],
            ..ModelConfig::default()
        }
    }

    #[test]
    fn reshapes_keep_the_element_count_per_variable_chunk() {
        assert!(check_io(&with_input(vec![2, 4, -1, 6], Some(vec![8, -1, 1, 6]), 0)).is_ok());
        assert!(check_io(&with_input(
            vec![3, 224, 224],
            Some(vec![1, 3, 224, 224]),
            0
        ))
        .is_ok());
        assert!(check_io(&with_input(vec![3, 4], Some(vec![13]), 0)).is_err());
        assert!(check_io(&with_input(vec![1], Some(vec![]), 4)).is_ok());
        assert!(check_io(&with_input(vec![1], Some(vec![]), 0)).is_err());
        assert!(check_io(&with_input(vec![0, 3], None, 0)).is_err());
        assert!(check_io(&with_input(vec![], None, 0)).is_err());
    }

    #[test]
    fn default_model_filename_is_one_file() {
        assert!(check_file_name("model.onnx").is_ok());
        for bad in ["", "../x.onnx", "a/b.onnx", "/etc/passwd", ".", ".."] {
            assert!(check_file_name(bad).is_err(), "{bad}");
        }
    }
}
