//! Streaming connectors (`streams:`): JSON lines from and to files or stdio, and zenoh key
//! expressions.
//!
//! Rules: a JSON-lines stream names an `input` and an `output` (a file, or `-`); its input is a
//! regular file within the file rules, and its output is writable in its `output_mode` (a new file
//! under `create`); a zenoh stream's `subscribe` and `publish` are key expressions (chunks separated
//! by `/`, no wildcard or query characters) and its `listen`/`connect` endpoints are zenoh locators.
//! The files are checked here so that `weir validate` reports them, and again when the connector
//! opens them.

use super::{is_locator, Validator};
use crate::diagnostic::Diagnostic;
use crate::paths::{check_output, resolve_input, FileError};
use crate::spec::{Spanned, StreamSpec};
use crate::stream::{stream_end, StreamEnd};

/// Whether `key` is a zenoh key expression a stream can use: chunks separated by `/`, no wildcard
/// or query characters.
fn key_ok(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && !key.ends_with('/')
        && !key.contains("//")
        && !key
            .chars()
            .any(|c| c.is_whitespace() || c == '?' || c == '#')
}

impl Validator<'_, '_> {
    /// Checks the graph's streaming connectors.
    pub(super) fn check_streams(&mut self) {
        let (spec, base_dir, files) = (self.spec, self.base_dir, self.files);
        let diags = &mut self.diags;
        for (i, s) in spec.streams.iter().enumerate() {
            match &s.value {
                StreamSpec::Jsonl(j) => {
                    if j.input.value.is_empty() || j.output.value.is_empty() {
                        diags.push(Diagnostic::error(
                            format!("streams[{i}].jsonl"),
                            s.location,
                            "a JSON-lines stream needs an `input` and an `output` (a file, or `-`)",
                        ));
                        continue;
                    }
                    if let StreamEnd::File(p) = stream_end(&j.input, base_dir) {
                        if let Err(e) = resolve_input(&p, files) {
                            let field = format!("streams[{i}].jsonl.input");
                            diags.push(Diagnostic::error(field, j.input.location, e.to_string()));
                        }
                    }
                    if let StreamEnd::File(p) = stream_end(&j.output, base_dir) {
                        if let Err(e) = check_output(&p, j.output_mode.value, files) {
                            let mut d = Diagnostic::error(
                                format!("streams[{i}].jsonl.output"),
                                j.output.location,
                                e.to_string(),
                            );
                            if matches!(e, FileError::Exists { .. }) {
                                d.help = Some("`output_mode: create` (the default) writes only a new file; `append` adds to an existing one, `overwrite` empties it".into());
                            }
                            diags.push(d);
                        }
                    }
                }
                StreamSpec::Zenoh(z) => {
                    for (field, key) in [("subscribe", &z.subscribe), ("publish", &z.publish)] {
                        if !key_ok(key) {
                            let mut d = Diagnostic::error(
                                format!("streams[{i}].zenoh.{field}"),
                                key.location,
                                format!("`{}` is not a zenoh key expression", key.value),
                            );
                            d.help = Some("chunks separated by `/`, e.g. `weir/in/mlp`".into());
                            diags.push(d);
                        }
                    }
                    check_locators(&z.listen, &format!("streams[{i}].zenoh.listen"), diags);
                    check_locators(&z.connect, &format!("streams[{i}].zenoh.connect"), diags);
                }
            }
        }
    }
}

/// Every endpoint of `list` (at spec path `field`) is a zenoh locator.
fn check_locators(list: &[Spanned<String>], field: &str, diags: &mut Vec<Diagnostic>) {
    for e in list {
        if !is_locator(e) {
            diags.push(Diagnostic::error(
                field,
                e.location,
                format!(
                    "`{}` is not a zenoh locator (`tcp/127.0.0.1:7447`)",
                    e.value
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::key_ok;

    #[test]
    fn key_expressions_are_slash_separated_chunks_without_wildcards_or_queries() {
        assert!(key_ok("weir/in/mlp"));
        for bad in ["", "/a", "a/", "a//b", "a?b", "a#b", "a b"] {
            assert!(!key_ok(bad), "{bad}");
        }
    }
}
