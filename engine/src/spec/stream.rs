//! The `streams:` section: connectors that feed the graph from a stream and write its replies to
//! another, so it runs as a stream processor without HTTP. Each request and reply is an Open
//! Inference Protocol (KServe v2) JSON document.

use serde::Deserialize;

use super::Spanned;
pub use crate::paths::OutputMode;

/// One streaming connector, written as `- <kind>: {...}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamSpec {
    /// JSON lines: one request per line in, one reply per line out.
    Jsonl(JsonlStreamSpec),
    /// zenoh: requests from samples on one key expression, replies published to another.
    Zenoh(ZenohStreamSpec),
}

/// A JSON-lines stream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonlStreamSpec {
    /// File to read requests from (relative to the graph file), or `-` for stdin.
    pub input: Spanned<String>,
    /// File to write replies to (relative to the graph file), or `-` for stdout.
    pub output: Spanned<String>,
    /// What to do when `output` exists: `create` (the default) refuses, `append` adds to it,
    /// `overwrite` empties it first.
    #[serde(default)]
    pub output_mode: Spanned<OutputMode>,
}

/// A zenoh stream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZenohStreamSpec {
    /// Key expression whose samples are requests.
    pub subscribe: Spanned<String>,
    /// Key expression replies are published on.
    pub publish: Spanned<String>,
    /// zenoh endpoints to listen on.
    #[serde(default)]
    pub listen: Vec<Spanned<String>>,
    /// zenoh endpoints to connect to.
    #[serde(default)]
    pub connect: Vec<Spanned<String>>,
}
