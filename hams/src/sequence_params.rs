//! A row's sequence controls, read from its request's parameters as Triton's clients send them:
//! `{"sequence_id": 42, "sequence_start": true}` … `{"sequence_id": 42, "sequence_end": true}`.
//!
//! The parameters are the client's JSON object text (capped in size by the connector). A row of a
//! per-sequence node must name its sequence: a positive integer (written back in decimal, so `7`
//! and `"7"` are one sequence) or a non-empty string of at most [`MAX_SEQUENCE_ID_BYTES`] bytes;
//! `sequence_start` and `sequence_end` are booleans, false when absent. Anything else is refused
//! naming the field, before the row reaches the state holder.

use crate::sequences::{RowControl, MAX_SEQUENCE_ID_BYTES};
use serde_json::Value;

/// A parameter that is wrong: the field (`parameters.sequence_id`) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// The request field.
    pub field: &'static str,
    /// What is wrong.
    pub message: String,
}

const ID: &str = "parameters.sequence_id";

fn wrong(field: &'static str, message: impl Into<String>) -> ParamError {
    ParamError {
        field,
        message: message.into(),
    }
}

/// The controls `parameters` (a request's parameters as JSON object text, if any) give a row.
///
/// # Errors
/// When the parameters name no sequence or a field has the wrong type.
pub fn row_control(parameters: Option<&str>) -> Result<RowControl, ParamError> {
    let missing = || {
        wrong(
            ID,
            "this graph keeps state per sequence: every request names its sequence in `parameters.sequence_id`, with `sequence_start: true` on the first",
        )
    };
    let Some(text) = parameters else {
        return Err(missing());
    };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return Err(wrong("parameters", "not a JSON object"));
    };
    let id = match map.get("sequence_id") {
        None | Some(Value::Null) => return Err(missing()),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) | None => {
                return Err(wrong(
                    ID,
                    "a number must be a positive integer (below 2^64)",
                ))
            }
            Some(v) => v.to_string(),
        },
        Some(Value::String(s)) if s.is_empty() || s.len() > MAX_SEQUENCE_ID_BYTES => {
            return Err(wrong(
                ID,
                format!("a string must hold 1 to {MAX_SEQUENCE_ID_BYTES} bytes"),
            ))
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(wrong(ID, "must be a positive integer or a string")),
    };
    let flag = |name: &str, field: &'static str| match map.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(wrong(field, "must be true or false")),
    };
    Ok(RowControl {
        id,
        start: flag("sequence_start", "parameters.sequence_start")?,
        end: flag("sequence_end", "parameters.sequence_end")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triton_style_parameters_are_read() {
        let c = row_control(Some(
            r#"{"sequence_id": 42, "sequence_start": true, "x": [1]}"#,
        ));
        assert_eq!(
            c,
            Ok(RowControl {
                id: "42".into(),
                start: true,
                end: false
            })
        );
        let c = row_control(Some(r#"{"sequence_id": "42", "sequence_end": true}"#)).unwrap();
        assert_eq!((c.id.as_str(), c.start, c.end), ("42", false, true));
    }

    #[test]
    fn a_missing_or_malformed_sequence_is_refused_naming_the_field() {
        for (text, field) in [
            (None, ID),
            (Some("{}"), ID),
            (Some(r#"{"sequence_id": 0}"#), ID),
            (Some(r#"{"sequence_id": -3}"#), ID),
            (Some(r#"{"sequence_id": 1.5}"#), ID),
            (Some(r#"{"sequence_id": ""}"#), ID),
            (Some(r#"{"sequence_id": [1]}"#), ID),
            (Some("[1]"), "parameters"),
            (
                Some(r#"{"sequence_id": 1, "sequence_start": 1}"#),
                "parameters.sequence_start",
            ),
            (
                Some(r#"{"sequence_id": 1, "sequence_end": "yes"}"#),
                "parameters.sequence_end",
            ),
        ] {
            assert_eq!(
                row_control(text).map_err(|e| e.field),
                Err(field),
                "{text:?}"
            );
        }
        let long = format!(
            r#"{{"sequence_id": "{}"}}"#,
            "x".repeat(MAX_SEQUENCE_ID_BYTES + 1)
        );
        assert_eq!(row_control(Some(&long)).map_err(|e| e.field), Err(ID));
    }
}
