//! Streaming connectors a graph declares, checked and resolved from the spec's `streams:` section
//! (paths against the graph's folder, key expressions and endpoints well-formed). What runs them
//! is the connectors crate; the engine only says what they are.
//!
//! A JSON-lines input must be a regular file and an output must be writable in its `output_mode`
//! (see [`crate::paths`]); both are checked here so that `weir validate` reports them, and again
//! when the connector opens them.

use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;
use crate::paths::{check_output, resolve_input, FileError, FileRules, OutputMode};
use crate::spec::{GraphSpec, Spanned, StreamSpec};

/// Where a JSON-lines stream reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// stdin or stdout.
    Stdio,
    /// A file.
    File(PathBuf),
}

/// A streaming connector after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamConnector {
    /// JSON lines.
    Jsonl {
        /// Requests from.
        input: StreamEnd,
        /// Replies to.
        output: StreamEnd,
        /// What to do when the output file exists.
        output_mode: OutputMode,
    },
    /// zenoh key expressions.
    Zenoh {
        /// Requests from.
        subscribe: String,
        /// Replies to.
        publish: String,
        /// Endpoints to listen on.
        listen: Vec<String>,
        /// Endpoints to connect to.
        connect: Vec<String>,
    },
}

fn end(text: &str, base_dir: &Path) -> StreamEnd {
    if text == "-" {
        StreamEnd::Stdio
    } else {
        StreamEnd::File(base_dir.join(text))
    }
}

fn key_ok(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && !key.ends_with('/')
        && !key.contains("//")
        && !key
            .chars()
            .any(|c| c.is_whitespace() || c == '?' || c == '#')
}

fn locator_ok(e: &str) -> bool {
    e.split_once('/')
        .is_some_and(|(proto, addr)| !proto.is_empty() && !addr.is_empty())
}

/// Checks and resolves `spec.streams`, pushing errors to `diags`.
pub(crate) fn check_streams(
    spec: &GraphSpec,
    base_dir: &Path,
    files: &FileRules,
    diags: &mut Vec<Diagnostic>,
) -> Vec<StreamConnector> {
    let mut out = Vec::new();
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
                let (input, output) = (end(&j.input, base_dir), end(&j.output, base_dir));
                let mode = j.output_mode.value;
                let mut ok = true;
                if let StreamEnd::File(p) = &input {
                    if let Err(e) = resolve_input(p, files) {
                        let field = format!("streams[{i}].jsonl.input");
                        diags.push(Diagnostic::error(field, j.input.location, e.to_string()));
                        ok = false;
                    }
                }
                if let StreamEnd::File(p) = &output {
                    if let Err(e) = check_output(p, mode, files) {
                        let mut d = Diagnostic::error(
                            format!("streams[{i}].jsonl.output"),
                            j.output.location,
                            e.to_string(),
                        );
                        if matches!(e, FileError::Exists { .. }) {
                            d.help = Some("`output_mode: create` (the default) writes only a new file; `append` adds to an existing one, `overwrite` empties it".into());
                        }
                        diags.push(d);
                        ok = false;
                    }
                }
                if ok {
                    out.push(StreamConnector::Jsonl {
                        input,
                        output,
                        output_mode: mode,
                    });
                }
            }
            StreamSpec::Zenoh(z) => {
                let mut ok = true;
                for (field, key) in [("subscribe", &z.subscribe), ("publish", &z.publish)] {
                    if !key_ok(key) {
                        let mut d = Diagnostic::error(
                            format!("streams[{i}].zenoh.{field}"),
                            key.location,
                            format!("`{}` is not a zenoh key expression", key.value),
                        );
                        d.help = Some("chunks separated by `/`, e.g. `weir/in/mlp`".into());
                        diags.push(d);
                        ok = false;
                    }
                }
                let endpoints =
                    |list: &[Spanned<String>], field: &str, diags: &mut Vec<Diagnostic>| {
                        let mut good = true;
                        for e in list {
                            if !locator_ok(e) {
                                diags.push(Diagnostic::error(
                                    format!("streams[{i}].zenoh.{field}"),
                                    e.location,
                                    format!(
                                        "`{}` is not a zenoh locator (`tcp/127.0.0.1:7447`)",
                                        e.value
                                    ),
                                ));
                                good = false;
                            }
                        }
                        good
                    };
                ok &= endpoints(&z.listen, "listen", diags);
                ok &= endpoints(&z.connect, "connect", diags);
                if ok {
                    out.push(StreamConnector::Zenoh {
                        subscribe: z.subscribe.value.clone(),
                        publish: z.publish.value.clone(),
                        listen: z.listen.iter().map(|e| e.value.clone()).collect(),
                        connect: z.connect.iter().map(|e| e.value.clone()).collect(),
                    });
                }
            }
        }
    }
    out
}
