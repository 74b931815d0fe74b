//! The effective configuration as Triton's `GET /v2/models/{model}/config` returns it.
//!
//! Triton prints the `ModelConfig` with protobuf's JSON mapping, keeping the proto field names
//! (`max_batch_size`, not `maxBatchSize`) and printing every field that has no presence even at
//! its default (`"runtime": ""`, `"batch_input": []`, `"priority_levels": 0`), enums by name;
//! then, since protobuf prints 64-bit integers as strings, it turns a fixed list of them back
//! into JSON numbers (`model_config_utils.cc`, `ModelConfigToJson`: dims and reshapes, specific
//! versions, the dynamic and sequence batchers' microseconds and priorities, state dims, step
//! versions, warm-up dims). tritonclient reads `dims` as numbers.
//!
//! This module does the same with prost-reflect's serializer (proto field names, defaults
//! printed, 64-bit integers as strings) and the same list of fields turned into numbers, so the
//! ones Triton leaves as strings stay strings — including `sequence_batching.state[].
//! initial_state[].dims`, which Triton's fix-up looks for one level too high and so never
//! converts. Objects come out with their keys sorted (serde_json's map), an order JSON does not
//! give meaning to.

use prost::Message;
use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::Value;

use crate::proto::inference::ModelConfig;
use crate::proto::model_config_descriptor;

/// The configuration could not be printed (a bug: every `ModelConfig` has a JSON form).
#[derive(Debug, thiserror::Error)]
#[error("printing the model configuration as JSON: {0}")]
pub struct JsonError(String);

/// `config` in Triton's JSON form.
///
/// # Errors
/// [`JsonError`] if the message cannot be re-read or printed, which a valid `ModelConfig` never
/// causes.
pub fn config_json(config: &ModelConfig) -> Result<Value, JsonError> {
    let message =
        DynamicMessage::decode(model_config_descriptor(), config.encode_to_vec().as_slice())
            .map_err(|e| JsonError(e.to_string()))?;
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(false)
        .stringify_64_bit_integers(true)
        .use_enum_numbers(false);
    let mut json = message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| JsonError(e.to_string()))?;
    fix_int64(&mut json);
    Ok(json)
}

/// Turns the string `"12"` at `value` into the number 12 (a list: each element).
fn number(value: Option<&mut Value>) {
    let Some(value) = value else { return };
    match value {
        Value::String(s) => {
            let parsed = s
                .parse::<i64>()
                .map(Value::from)
                .or_else(|_| s.parse::<u64>().map(Value::from));
            if let Ok(n) = parsed {
                *value = n;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| number(Some(v))),
        _ => {}
    }
}

/// Each element of the list at `value`.
fn each(value: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    value
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut())
}

/// Each value of the object at `value`.
fn each_value(value: Option<&mut Value>) -> impl Iterator<Item = &mut Value> {
    value
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|m| m.values_mut())
}

/// Triton's list of 64-bit fields printed as numbers.
fn fix_int64(json: &mut Value) {
    for io in ["input", "output"] {
        for t in each(json.get_mut(io)) {
            number(t.get_mut("dims"));
            if let Some(r) = t.get_mut("reshape") {
                number(r.get_mut("shape"));
            }
        }
    }
    if let Some(specific) = json.pointer_mut("/version_policy/specific") {
        number(specific.get_mut("versions"));
    }
    if let Some(db) = json.get_mut("dynamic_batching") {
        for f in [
            "max_queue_delay_microseconds",
            "priority_levels",
            "default_priority_level",
        ] {
            number(db.get_mut(f));
        }
        if let Some(q) = db.get_mut("default_queue_policy") {
            number(q.get_mut("default_timeout_microseconds"));
        }
        for q in each_value(db.get_mut("priority_queue_policy")) {
            number(q.get_mut("default_timeout_microseconds"));
        }
    }
    if let Some(sb) = json.get_mut("sequence_batching") {
        number(sb.get_mut("max_sequence_idle_microseconds"));
        for strategy in ["oldest", "direct"] {
            if let Some(s) = sb.get_mut(strategy) {
                number(s.get_mut("max_queue_delay_microseconds"));
            }
        }
        for state in each(sb.get_mut("state")) {
            number(state.get_mut("dims"));
        }
    }
    if let Some(ens) = json.get_mut("ensemble_scheduling") {
        for step in each(ens.get_mut("step")) {
            number(step.get_mut("model_version"));
        }
    }
    for warmup in each(json.get_mut("model_warmup")) {
        for input in each_value(warmup.get_mut("inputs")) {
            number(input.get_mut("dims"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::model_config::SchedulingChoice;
    use crate::proto::inference::model_sequence_batching::{InitialState, State};
    use crate::proto::inference::{DataType, ModelInput, ModelSequenceBatching};
    use serde_json::json;

    #[test]
    fn field_names_defaults_enums_and_numbers_are_tritons() {
        let config = ModelConfig {
            name: "m".into(),
            platform: "onnxruntime_onnx".into(),
            max_batch_size: 4,
            input: vec![ModelInput {
                name: "x".into(),
                data_type: DataType::TypeFp32 as i32,
                dims: vec![3, -1],
                ..ModelInput::default()
            }],
            scheduling_choice: Some(SchedulingChoice::SequenceBatching(ModelSequenceBatching {
                max_sequence_idle_microseconds: 1_000_000,
                state: vec![State {
                    input_name: "h".into(),
                    dims: vec![16],
                    initial_state: vec![InitialState {
                        dims: vec![16],
                        ..InitialState::default()
                    }],
                    ..State::default()
                }],
                ..ModelSequenceBatching::default()
            })),
            ..ModelConfig::default()
        };
        let j = config_json(&config).unwrap();
        assert_eq!(j["max_batch_size"], json!(4));
        assert_eq!(j["runtime"], json!(""));
        assert_eq!(j["batch_input"], json!([]));
        assert_eq!(j["parameters"], json!({}));
        assert_eq!(j["input"][0]["data_type"], json!("TYPE_FP32"));
        assert_eq!(j["input"][0]["format"], json!("FORMAT_NONE"));
        assert_eq!(j["input"][0]["dims"], json!([3, -1]));
        assert_eq!(j["input"][0]["optional"], json!(false));
        assert_eq!(
            j["sequence_batching"]["max_sequence_idle_microseconds"],
            json!(1_000_000)
        );
        assert_eq!(j["sequence_batching"]["state"][0]["dims"], json!([16]));
        // Triton's fix-up never reaches these.
        assert_eq!(
            j["sequence_batching"]["state"][0]["initial_state"][0]["dims"],
            json!(["16"])
        );
        // Unset messages and oneof members are left out, as protobuf prints them.
        assert!(j.get("dynamic_batching").is_none());
        assert!(j.get("optimization").is_none());
        assert!(j.get("maxBatchSize").is_none());
    }
}
