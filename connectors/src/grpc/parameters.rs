//! A gRPC request's `parameters` map as the JSON object text an HTTP request's `parameters` are,
//! and a reply's JSON parameters as the map, so every parameter means the same on both
//! transports (`sequence_id` for a graph; `latency_ms`, `min_accuracy`, `max_cost` and `variant`
//! for a model-less task, read from the text by the front end).
//!
//! The map is hostile input: its size is checked before anything is converted (at most
//! [`PARAMETERS_MAX_ENTRIES`] entries, no key or string value, nor all of them together, past
//! [`PARAMETERS_MAX_BYTES`]), and then the JSON text is held to the same cap HTTP holds it to.
//! A value JSON cannot carry (none set, a NaN or infinite double) is refused naming
//! `parameters.<key>` rather than passed on as `null`, which would read as "not given".

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Number, Value};

use super::proto::infer_parameter::ParameterChoice;
use super::proto::InferParameter;
use crate::echo::quote;
use crate::oip::{ProtocolError, PARAMETERS_MAX_BYTES};

/// Most entries a request's `parameters` map may hold: far more than any control value needs,
/// few enough that refusing by count comes before building anything.
pub(super) const PARAMETERS_MAX_ENTRIES: usize = 64;

fn perr(field: impl Into<String>, message: impl Into<String>) -> ProtocolError {
    ProtocolError {
        field: field.into(),
        message: message.into(),
    }
}

fn field(key: &str) -> String {
    format!("parameters.{}", quote(key))
}

/// The bytes an entry brings before conversion: its key and, for a string, its value.
fn entry_bytes(key: &str, value: &InferParameter) -> usize {
    let value = match &value.parameter_choice {
        Some(ParameterChoice::StringParam(s)) => s.len(),
        _ => 0,
    };
    key.len().saturating_add(value)
}

/// Refuses a map too large to convert, by count, then by any one entry, then by all together.
fn check_size(parameters: &HashMap<String, InferParameter>) -> Result<(), ProtocolError> {
    if parameters.len() > PARAMETERS_MAX_ENTRIES {
        return Err(perr(
            "parameters",
            format!(
                "{} entries, over the limit of {PARAMETERS_MAX_ENTRIES}",
                parameters.len()
            ),
        ));
    }
    let mut total = 0usize;
    for (key, value) in parameters {
        let bytes = entry_bytes(key, value);
        if bytes > PARAMETERS_MAX_BYTES {
            return Err(perr(
                field(key),
                format!("{bytes} bytes of key and value, over the limit of {PARAMETERS_MAX_BYTES}"),
            ));
        }
        total = total.saturating_add(bytes);
    }
    if total > PARAMETERS_MAX_BYTES {
        return Err(perr(
            "parameters",
            format!("{total} bytes of keys and values, over the limit of {PARAMETERS_MAX_BYTES}"),
        ));
    }
    Ok(())
}

/// The request `parameters` as JSON object text (`None` when empty), as HTTP carries them.
///
/// # Errors
/// A [`ProtocolError`] naming `parameters` (too many, too large) or `parameters.<key>` (a value
/// JSON cannot carry).
pub(super) fn parameters_text(
    parameters: &HashMap<String, InferParameter>,
) -> Result<Option<Arc<str>>, ProtocolError> {
    if parameters.is_empty() {
        return Ok(None);
    }
    check_size(parameters)?;
    let mut map = Map::new();
    for (k, v) in parameters {
        map.insert(k.clone(), parameter_value(k, v)?);
    }
    let text = Value::Object(map).to_string();
    if text.len() > PARAMETERS_MAX_BYTES {
        return Err(perr(
            "parameters",
            format!(
                "{} bytes as JSON, over the limit of {PARAMETERS_MAX_BYTES} (parameters travel \
                 with every row)",
                text.len()
            ),
        ));
    }
    Ok(Some(Arc::from(text)))
}

fn parameter_value(key: &str, p: &InferParameter) -> Result<Value, ProtocolError> {
    Ok(match &p.parameter_choice {
        None => {
            return Err(perr(
                field(key),
                "no value set: give one of bool_param, int64_param, uint64_param, double_param, \
                 string_param",
            ))
        }
        Some(ParameterChoice::BoolParam(b)) => Value::Bool(*b),
        Some(ParameterChoice::Int64Param(i)) => Value::from(*i),
        Some(ParameterChoice::Uint64Param(u)) => Value::from(*u),
        Some(ParameterChoice::DoubleParam(x)) => match Number::from_f64(*x) {
            Some(n) => Value::Number(n),
            None => return Err(perr(field(key), format!("{x} is not a finite number"))),
        },
        Some(ParameterChoice::StringParam(s)) => Value::String(s.clone()),
    })
}

/// A reply parameter as its protobuf value (objects and arrays as their JSON text).
pub(super) fn parameter_of(v: Value) -> InferParameter {
    let choice = match v {
        Value::Bool(b) => ParameterChoice::BoolParam(b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => ParameterChoice::Int64Param(i),
            (None, Some(u), _) => ParameterChoice::Uint64Param(u),
            (None, None, x) => ParameterChoice::DoubleParam(x.unwrap_or(f64::NAN)),
        },
        Value::String(s) => ParameterChoice::StringParam(s),
        other => ParameterChoice::StringParam(other.to_string()),
    };
    InferParameter {
        parameter_choice: Some(choice),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(&str, Option<ParameterChoice>)>) -> HashMap<String, InferParameter> {
        entries
            .into_iter()
            .map(|(k, c)| {
                (
                    k.to_string(),
                    InferParameter {
                        parameter_choice: c,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_kind_of_value_becomes_its_json_value() {
        let text = parameters_text(&map(vec![
            ("min_accuracy", Some(ParameterChoice::DoubleParam(0.98))),
            ("latency_ms", Some(ParameterChoice::Int64Param(20))),
            ("big", Some(ParameterChoice::Uint64Param(u64::MAX))),
            ("variant", Some(ParameterChoice::StringParam("v".into()))),
            ("flag", Some(ParameterChoice::BoolParam(true))),
        ]))
        .unwrap()
        .unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"min_accuracy": 0.98, "latency_ms": 20, "big": u64::MAX,
                               "variant": "v", "flag": true})
        );
        assert_eq!(parameters_text(&HashMap::new()).unwrap(), None);
    }

    #[test]
    fn values_json_cannot_carry_are_refused_by_key() {
        let unset = parameters_text(&map(vec![("latency_ms", None)])).unwrap_err();
        assert_eq!(unset.field, "parameters.latency_ms");
        for x in [f64::NAN, f64::INFINITY] {
            let e = parameters_text(&map(vec![(
                "min_accuracy",
                Some(ParameterChoice::DoubleParam(x)),
            )]))
            .unwrap_err();
            assert_eq!(e.field, "parameters.min_accuracy");
        }
    }

    #[test]
    fn oversized_maps_are_refused_before_conversion() {
        let keys: Vec<String> = (0..=PARAMETERS_MAX_ENTRIES)
            .map(|i| format!("k{i}"))
            .collect();
        let many = map(keys.iter().map(|k| (k.as_str(), None)).collect());
        // By count first: the unset values would fail conversion, but are never converted.
        assert!(parameters_text(&many)
            .unwrap_err()
            .message
            .contains("entries"));
        let long = "x".repeat(PARAMETERS_MAX_BYTES);
        let one = parameters_text(&map(vec![(
            "variant",
            Some(ParameterChoice::StringParam(long.clone())),
        )]))
        .unwrap_err();
        assert_eq!(one.field, "parameters.variant");
        let half = "x".repeat(PARAMETERS_MAX_BYTES / 2);
        let together = parameters_text(&map(vec![
            ("a", Some(ParameterChoice::StringParam(half.clone()))),
            ("b", Some(ParameterChoice::StringParam(half))),
        ]))
        .unwrap_err();
        assert_eq!(together.field, "parameters");
        // Escaping can still grow the text past the cap: the JSON itself is checked too.
        let quotes = "\"".repeat(PARAMETERS_MAX_BYTES / 2);
        let escaped = parameters_text(&map(vec![(
            "q",
            Some(ParameterChoice::StringParam(quotes)),
        )]))
        .unwrap_err();
        assert!(escaped.message.contains("as JSON"), "{escaped}");
    }
}
