//! Which `ModelConfig` fields weir honours, which it accepts and ignores, and — by omission —
//! which it refuses.
//!
//! A field is judged only when the configuration *sets* it: the walk goes over the parsed
//! `DynamicMessage`'s present fields (a message field that is written, even empty; a scalar or
//! enum that differs from its default; a non-empty list or map), never over a typed struct
//! whose defaults look the same as values left out. A set field whose path is in neither table is
//! refused by name, however deep it sits (`optimization.cuda.graphs`), so nothing a user writes
//! is silently dropped. The paths are the schema's field names joined by `.`, list positions and
//! map keys left out; errors show them with positions and keys (`input[1].format`,
//! `parameters["execution_mode"]`).
//!
//! Honoured fields go on to value checks ([`crate::validate`]) — a field weir honours only for
//! some values (`instance_group.kind: KIND_GPU`, `timeout_action: DELAY`) is refused there, by
//! value. Two containers are honoured only as long as nothing inside them is set:
//! `model_transaction_policy` (weir answers each request once: `decoupled: true` is refused)
//! and `response_cache` (`enable: true` is refused); written with their defaults they state what
//! weir does.
//!
//! `parameters` is a map whose keys are the ONNX Runtime backend's settings; only the two weir
//! honours are accepted ([`PARAMETERS`]), any other key is refused by name.

use prost_reflect::{DynamicMessage, MapKey, Value};

/// Set fields weir acts on (each also checked by value).
pub const HONOURED: &[&str] = &[
    "name",
    "platform",
    "backend",
    "max_batch_size",
    "default_model_filename",
    "version_policy",
    "version_policy.latest",
    "version_policy.latest.num_versions",
    "version_policy.all",
    "version_policy.specific",
    "version_policy.specific.versions",
    "input",
    "input.name",
    "input.data_type",
    "input.dims",
    "input.reshape",
    "input.reshape.shape",
    "input.optional",
    "output",
    "output.name",
    "output.data_type",
    "output.dims",
    "output.reshape",
    "output.reshape.shape",
    "dynamic_batching",
    "dynamic_batching.preferred_batch_size",
    "dynamic_batching.max_queue_delay_microseconds",
    "dynamic_batching.default_queue_policy",
    "dynamic_batching.default_queue_policy.timeout_action",
    "dynamic_batching.default_queue_policy.default_timeout_microseconds",
    "dynamic_batching.default_queue_policy.allow_timeout_override",
    "instance_group",
    "instance_group.name",
    "instance_group.kind",
    "instance_group.count",
    "instance_group.gpus",
    "sequence_batching",
    "sequence_batching.max_sequence_idle_microseconds",
    "sequence_batching.control_input",
    "sequence_batching.control_input.name",
    "sequence_batching.control_input.control",
    "sequence_batching.control_input.control.kind",
    "sequence_batching.control_input.control.int32_false_true",
    "sequence_batching.control_input.control.fp32_false_true",
    "sequence_batching.control_input.control.bool_false_true",
    "sequence_batching.control_input.control.data_type",
    "sequence_batching.state",
    "sequence_batching.state.input_name",
    "sequence_batching.state.output_name",
    "sequence_batching.state.data_type",
    "sequence_batching.state.dims",
    "sequence_batching.state.initial_state",
    "sequence_batching.state.initial_state.name",
    "sequence_batching.state.initial_state.data_type",
    "sequence_batching.state.initial_state.dims",
    "sequence_batching.state.initial_state.zero_data",
    "ensemble_scheduling",
    "ensemble_scheduling.step",
    "ensemble_scheduling.step.model_name",
    "ensemble_scheduling.step.model_version",
    "ensemble_scheduling.step.input_map",
    "ensemble_scheduling.step.output_map",
    "parameters",
    "parameters.string_value",
    "model_warmup",
    "model_warmup.name",
    "model_warmup.batch_size",
    "model_warmup.count",
    "model_warmup.inputs",
    "model_warmup.inputs.data_type",
    "model_warmup.inputs.dims",
    "model_warmup.inputs.zero_data",
    "model_warmup.inputs.random_data",
    "model_warmup.inputs.input_data_file",
    "optimization",
    "optimization.graph",
    "optimization.graph.level",
    "model_transaction_policy",
    "response_cache",
];

/// Set fields weir accepts and does not act on, each with the reason it may.
///
/// - `optimization.input_pinned_memory`, `optimization.output_pinned_memory`: page-locked host
///   buffers speed copies between host and GPU. In-process weir runs models on the CPU, so there
///   is nothing to pin, and Triton's normaliser writes both into every effective configuration
///   (so a configuration exported from Triton carries them).
/// - `optimization.gather_kernel_buffer_threshold`: when Triton gathers a batch's inputs on the
///   GPU with a CUDA kernel; there is no GPU gather on the CPU path.
/// - `input.format`: a layout label (`FORMAT_NCHW`) for clients such as Triton's image client;
///   Triton's ONNX Runtime backend does not act on it either, and weir returns it in the
///   configuration unchanged.
pub const IGNORED: &[&str] = &[
    "optimization.input_pinned_memory",
    "optimization.output_pinned_memory",
    "optimization.gather_kernel_buffer_threshold",
    "input.format",
];

/// The `parameters` keys weir honours, named as Triton's ONNX Runtime backend names them:
/// `intra_op_thread_count` (ONNX Runtime's intra-op threads per session, 0 for the default) and
/// `inter_op_thread_count` (its inter-op threads, which ONNX Runtime uses only in parallel
/// execution mode; weir, like the backend by default, runs sessions sequentially, so the value
/// is checked and has no effect, exactly as in Triton).
pub const PARAMETERS: &[&str] = &["intra_op_thread_count", "inter_op_thread_count"];

enum Policy {
    Honoured,
    Ignored,
    Refused,
}

fn policy(path: &str) -> Policy {
    if HONOURED.contains(&path) {
        Policy::Honoured
    } else if IGNORED.contains(&path) {
        Policy::Ignored
    } else {
        Policy::Refused
    }
}

/// The set fields of `config` weir refuses, as shown paths, in field-number order.
pub fn refused(config: &DynamicMessage) -> Vec<String> {
    let mut out = Vec::new();
    walk(config, "", "", &mut out);
    out
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

fn walk(message: &DynamicMessage, schema: &str, shown: &str, out: &mut Vec<String>) {
    for (field, value) in message.fields() {
        let schema = join(schema, field.name());
        let shown = join(shown, field.name());
        match policy(&schema) {
            Policy::Refused => out.push(shown),
            Policy::Ignored => {}
            Policy::Honoured => descend(value, &schema, &shown, out),
        }
    }
}

fn descend(value: &Value, schema: &str, shown: &str, out: &mut Vec<String>) {
    match value {
        Value::Message(m) => walk(m, schema, shown, out),
        Value::List(items) => {
            for (i, item) in items.iter().enumerate() {
                if let Value::Message(m) = item {
                    walk(m, schema, &format!("{shown}[{i}]"), out);
                }
            }
        }
        Value::Map(entries) => {
            let mut keyed: Vec<(String, &Value)> =
                entries.iter().map(|(k, v)| (key_text(k), v)).collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            for (key, v) in keyed {
                let shown = format!("{shown}[{key:?}]");
                if schema == "parameters" && !PARAMETERS.contains(&key.as_str()) {
                    out.push(shown);
                } else if let Value::Message(m) = v {
                    walk(m, schema, &shown, out);
                }
            }
        }
        _ => {}
    }
}

fn key_text(key: &MapKey) -> String {
    match key {
        MapKey::String(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::model_config_descriptor;

    fn refused_in(text: &str) -> Vec<String> {
        let m = DynamicMessage::parse_text_format(model_config_descriptor(), text).unwrap();
        refused(&m)
    }

    #[test]
    fn every_table_path_names_a_schema_field() {
        for path in HONOURED.iter().chain(IGNORED) {
            let mut desc = model_config_descriptor();
            let mut parts = path.split('.').peekable();
            while let Some(part) = parts.next() {
                let field = desc
                    .get_field_by_name(part)
                    .unwrap_or_else(|| panic!("{path}: no field {part}"));
                if parts.peek().is_some() {
                    let prost_reflect::Kind::Message(m) = field.kind() else {
                        panic!("{path}: {part} is not a message");
                    };
                    // A map's entries hold the value message under `value`.
                    desc = if m.is_map_entry() {
                        match m.map_entry_value_field().kind() {
                            prost_reflect::Kind::Message(v) => v,
                            _ => panic!("{path}: {part} maps to scalars"),
                        }
                    } else {
                        m
                    };
                }
            }
        }
    }

    #[test]
    fn honoured_and_ignored_fields_pass() {
        let text = r#"
            name: "m" platform: "onnxruntime_onnx" max_batch_size: 8
            input: [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, 224, 224] } ]
            output: [ { name: "y" data_type: TYPE_FP32 dims: [1000] } ]
            dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100 }
            instance_group: [ { count: 2 kind: KIND_CPU } ]
            parameters: { key: "intra_op_thread_count" value: { string_value: "2" } }
            optimization { input_pinned_memory { enable: true } graph { level: 1 } }
            model_transaction_policy { decoupled: false }
            response_cache { enable: false }
        "#;
        assert_eq!(refused_in(text), Vec::<String>::new());
    }

    #[test]
    fn refused_fields_are_named_with_positions_and_keys() {
        let text = r#"
            name: "m"
            output: [ { name: "a" }, { name: "y" label_filename: "labels.txt" } ]
            optimization { cuda { graphs: true } }
            parameters: { key: "execution_mode" value: { string_value: "1" } }
            parameters: { key: "intra_op_thread_count" value: { string_value: "1" } }
            model_transaction_policy { decoupled: true }
            response_cache { enable: true }
            metric_tags: { key: "team" value: "vision" }
            sequence_batching { direct { } state: [ { input_name: "h" initial_state: [ { data_file: "h.bin" } ] } ] }
        "#;
        assert_eq!(
            refused_in(text),
            vec![
                "output[1].label_filename",
                "metric_tags",
                "optimization.cuda",
                "sequence_batching.direct",
                "sequence_batching.state[0].initial_state[0].data_file",
                "parameters[\"execution_mode\"]",
                "model_transaction_policy.decoupled",
                "response_cache.enable",
            ]
        );
    }

    #[test]
    fn fields_written_with_their_default_value_are_not_set() {
        // proto3 scalars without presence: `0`, `false` and the first enum value are defaults.
        let text = "max_batch_size: 0 instance_group: [ { passive: false kind: KIND_AUTO } ]";
        assert_eq!(refused_in(text), Vec::<String>::new());
        // An empty message is present: its presence can mean something (`dynamic_batching {}`).
        assert_eq!(refused_in("batch_input: [ {} ]"), vec!["batch_input"]);
    }
}
