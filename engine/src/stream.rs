//! Streaming connectors a graph declares in `streams:`, as the plan resolves them (paths against
//! the graph's folder). What runs them is the connectors crate; the engine only says what they are.
//! Their rules are checked by [`crate::validate`] (a JSON-lines input must be a regular file and an
//! output must be writable in its `output_mode`, see [`crate::paths`]), and the files again when
//! the connector opens them.

use std::path::{Path, PathBuf};

use crate::paths::OutputMode;

/// Where a JSON-lines stream reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// stdin or stdout.
    Stdio,
    /// A file.
    File(PathBuf),
}

/// A streaming connector, as planned.
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

/// Where a stream's `input` or `output` text points: `-` is stdio, anything else a file relative
/// to the graph's folder `base_dir`.
pub(crate) fn stream_end(text: &str, base_dir: &Path) -> StreamEnd {
    if text == "-" {
        StreamEnd::Stdio
    } else {
        StreamEnd::File(base_dir.join(text))
    }
}
