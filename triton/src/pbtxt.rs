//! `config.pbtxt`: protobuf text format read against Triton's `ModelConfig` descriptor by a real
//! parser (prost-reflect's), so what Triton's own `TextFormat::ParseFromString` accepts and
//! refuses — unknown field names, enum values, types, a field set twice, a oneof set twice — is
//! what is accepted and refused here, each error with its line and column.
//!
//! The parse gives a `DynamicMessage` first, which knows which fields the text *set* (the field
//! policy in [`crate::fields`] walks it), and only then the typed [`ModelConfig`].
//!
//! One gap is bridged before parsing. The text-format grammar lets a message field's list go
//! without a colon (`MessageField = FieldName, [":"], (MessageValue | MessageList)`), and nearly
//! every Triton configuration writes `input [ {...} ]` so; prost-reflect 0.16 requires the colon
//! there. A scan that understands only comments, strings and identifiers inserts the colon where
//! a field name is directly followed by `[`, but only for names that are message fields in every
//! message of the schema: a scalar list without its colon (`dims [3]`) stays an error, as in
//! protobuf's C++ parser. Error positions are mapped back to the text as written.

use std::collections::HashSet;
use std::sync::OnceLock;

use miette::Diagnostic;
use prost_reflect::{DynamicMessage, Kind};

use crate::error::LoadError;
use crate::fields;
use crate::proto::inference::ModelConfig;
use crate::proto::model_config_descriptor;

/// A parsed configuration: the message as written (its set fields known) and its typed form.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    /// The message as the text set it.
    pub message: DynamicMessage,
    /// The same, typed.
    pub config: ModelConfig,
}

/// Parses `text`, the contents of `file` (shown in errors), and checks its fields against the
/// field policy.
///
/// # Errors
/// [`LoadError::Syntax`] when the text is not a `ModelConfig` in text format;
/// [`LoadError::NotImplemented`] when it sets fields weir refuses.
pub fn parse(text: &str, file: &str) -> Result<ParsedConfig, LoadError> {
    let (patched, inserted) = insert_list_colons(text);
    let message =
        DynamicMessage::parse_text_format(model_config_descriptor(), &patched).map_err(|e| {
            let at = e
                .labels()
                .and_then(|mut labels| labels.next())
                .map_or(0, |l| l.offset());
            let (line, column) = line_column(text, original_offset(at, &inserted));
            LoadError::Syntax {
                file: file.to_string(),
                line,
                column,
                message: e.to_string(),
            }
        })?;
    checked(message, file)
}

/// Parses `json`, a `ModelConfig` in protobuf's JSON mapping (a load request's `config`
/// parameter, shown in errors as `what`), and checks its fields against the field policy.
///
/// # Errors
/// [`LoadError::Syntax`] when it is not a `ModelConfig` in JSON; [`LoadError::NotImplemented`]
/// when it sets fields weir refuses.
pub fn parse_json(json: &str, what: &str) -> Result<ParsedConfig, LoadError> {
    let mut reader = serde_json::Deserializer::from_str(json);
    let message = DynamicMessage::deserialize(model_config_descriptor(), &mut reader)
        .and_then(|m| reader.end().map(|()| m))
        .map_err(|e| LoadError::Syntax {
            file: what.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
    checked(message, what)
}

/// The typed configuration of `message`, once its fields pass the field policy.
fn checked(message: DynamicMessage, file: &str) -> Result<ParsedConfig, LoadError> {
    let refused = fields::refused(&message);
    if !refused.is_empty() {
        return Err(LoadError::NotImplemented {
            file: file.to_string(),
            fields: refused,
        });
    }
    let config = message
        .transcode_to::<ModelConfig>()
        .map_err(|e| LoadError::invalid(file, e.to_string()))?;
    Ok(ParsedConfig { message, config })
}

/// Field names that are message-typed (a message, a list of messages, or a map) wherever the
/// schema uses them.
fn message_field_names() -> &'static HashSet<String> {
    static NAMES: OnceLock<HashSet<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let pool = model_config_descriptor().parent_pool().clone();
        let mut message_typed = HashSet::new();
        let mut scalar = HashSet::new();
        for m in pool.all_messages() {
            for f in m.fields() {
                let set = if matches!(f.kind(), Kind::Message(_)) {
                    &mut message_typed
                } else {
                    &mut scalar
                };
                set.insert(f.name().to_string());
            }
        }
        message_typed.retain(|n| !scalar.contains(n));
        message_typed
    })
}

/// The text with `:` inserted before each `[` that directly follows a message field's name, and
/// the offsets (in `text`) where one was inserted.
fn insert_list_colons(text: &str) -> (String, Vec<usize>) {
    let names = message_field_names();
    let bytes = text.as_bytes();
    let mut inserted = Vec::new();
    let mut last_ident: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b' ' | b'\t' | b'\r' | b'\n' | 0x0b | 0x0c => i += 1,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b && bytes[i] != b'\n' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                last_ident = None;
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                last_ident = Some((start, i));
            }
            b'0'..=b'9' | b'.' | b'-' | b'+' => {
                // A number (`1e-5`, `0x1F`, `-inf`): its letters are not a field name.
                i += 1;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric()
                        || bytes[i] == b'.'
                        || bytes[i] == b'_'
                        || (matches!(bytes[i], b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
                last_ident = None;
            }
            b'[' => {
                if let Some((s, e)) = last_ident {
                    if names.contains(&text[s..e]) {
                        inserted.push(i);
                    }
                }
                last_ident = None;
                i += 1;
            }
            _ => {
                last_ident = None;
                i += 1;
            }
        }
    }
    if inserted.is_empty() {
        return (text.to_string(), inserted);
    }
    let mut out = String::with_capacity(text.len() + inserted.len());
    let mut from = 0;
    for &at in &inserted {
        out.push_str(&text[from..at]);
        out.push(':');
        from = at;
    }
    out.push_str(&text[from..]);
    (out, inserted)
}

/// The offset in the original text of `offset` in the patched one.
fn original_offset(offset: usize, inserted: &[usize]) -> usize {
    // The k-th insertion (0-based) sits at `inserted[k] + k` in the patched text.
    let before = inserted
        .iter()
        .enumerate()
        .take_while(|(k, &at)| at + k < offset)
        .count();
    offset - before
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::DataType;

    #[test]
    fn triton_list_syntax_parses_without_colons() {
        let text = "name: \"m\"\ninput [\n  { name: \"x\", data_type: TYPE_FP32, dims: [ 3, -1 ] },\n  { name: \"y\" data_type: TYPE_INT64 dims: [1] }\n]\noutput [ { name: \"z\" data_type: TYPE_FP32 dims: [ 2 ] } ]\ninstance_group [ { count: 2, kind: KIND_CPU } ]\n";
        let parsed = parse(text, "m/config.pbtxt").unwrap();
        let c = &parsed.config;
        assert_eq!(c.input.len(), 2);
        assert_eq!(c.input[0].dims, vec![3, -1]);
        assert_eq!(c.input[1].data_type(), DataType::TypeInt64);
        assert_eq!(c.instance_group[0].count, 2);
    }

    #[test]
    fn a_scalar_list_without_its_colon_is_still_an_error() {
        let e = parse("input [ { name: \"x\"\n dims [ 3 ] } ]", "c.pbtxt").unwrap_err();
        match e {
            LoadError::Syntax { line, column, .. } => assert_eq!((line, column), (2, 7)),
            other => panic!("{other}"),
        }
    }

    #[test]
    fn brackets_in_strings_and_comments_are_left_alone() {
        let text = "# input [ not a list\nname: \"input [\"\n";
        let parsed = parse(text, "c").unwrap();
        assert_eq!(parsed.config.name, "input [");
    }

    #[test]
    fn errors_give_the_position_in_the_text_as_written() {
        // Two colons are inserted before the error; the column must not count them.
        let text =
            "input [ { name: \"a\" } ]\noutput [ { name: \"b\" } ]\nmax_batch_size: \"four\"\n";
        match parse(text, "m/config.pbtxt").unwrap_err() {
            LoadError::Syntax {
                file, line, column, ..
            } => {
                assert_eq!(file, "m/config.pbtxt");
                assert_eq!((line, column), (3, 17));
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn unknown_fields_bad_enums_and_duplicates_are_syntax_errors() {
        for (text, needle) in [
            ("name: \"a\"\nfrobnicate: 1\n", "frobnicate"),
            ("input [ { data_type: TYPE_FLOAT32 } ]", "TYPE_FLOAT32"),
            ("name: \"a\" name: \"b\"", "name"),
            (
                "dynamic_batching {} sequence_batching {}",
                "scheduling_choice",
            ),
            ("name: \"unterminated", ""),
        ] {
            let e = parse(text, "c.pbtxt").unwrap_err();
            assert!(matches!(e, LoadError::Syntax { .. }), "{text}: {e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn only_names_that_are_message_fields_everywhere_get_a_colon() {
        // The colon bridge is exact only if every name it knows is a message field everywhere.
        let names = message_field_names();
        for n in [
            "input",
            "output",
            "instance_group",
            "parameters",
            "step",
            "model_warmup",
        ] {
            assert!(names.contains(n), "{n}");
        }
        for n in ["dims", "shape", "preferred_batch_size", "gpus", "name"] {
            assert!(!names.contains(n), "{n}");
        }
    }
}
