//! Streaming connectors: a graph as a stream processor. Requests come from a stream (JSON lines
//! from a file or stdin, or samples on a zenoh key expression) and every request gets exactly one
//! reply written to the output stream (a line, or a sample on another key expression), in the
//! order requests complete. Each request and reply is an Open Inference Protocol (KServe v2) JSON
//! document, the same as the HTTP body, so the same tools write and read them.
//!
//! Requests are parsed, run and answered by [`crate::oip`], as over HTTP, every datatype
//! included; replies are JSON only, so an output of BYTES that are not UTF-8 is answered with an
//! error document naming it. A request without an
//! `id` gets one (`line-<n>` or `sample-<n>`), so every reply names its request. A request that is
//! over the document cap, cannot be parsed or fails in the graph gets an error document
//! `{"id": ..., "error": ...}` instead ([`DocumentError`]) — never silence — and the stream goes
//! on. At most
//! [`StreamOptions::max_in_flight`] requests run at once; reading waits beyond that
//! (back-pressure). On shutdown, reading stops and every request already read is answered before
//! the connector returns.

pub mod jsonl;
pub mod pacing;
pub mod pubsub;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tracing::debug;
use weir_engine::runtime::GraphRuntime;
use weir_engine::stream::StreamConnector;

use crate::echo::{cap_error, quote};
use crate::oip::{parse_infer_request, run_infer, InferRequest, ModelLess, OipError};

/// What answers a stream's requests: a graph, or a model-less task (by the name it serves).
#[derive(Clone)]
pub enum Answerer {
    /// A graph.
    Graph(Arc<GraphRuntime>),
    /// A model-less front end, for the model `name`.
    ModelLess {
        /// The front end.
        front: Arc<dyn ModelLess>,
        /// The task or variant asked for.
        name: String,
    },
}

impl Answerer {
    /// The reply to `request`: its body and, when any output is binary, the JSON header's length.
    async fn infer(
        &self,
        request: InferRequest,
        timeout: Duration,
    ) -> Result<(Vec<u8>, Option<usize>), OipError> {
        match self {
            Answerer::Graph(runtime) => run_infer(runtime, request, timeout).await,
            Answerer::ModelLess { front, name } => {
                Ok(front.infer(name, request, timeout).await?.encode()?)
            }
        }
    }
}

/// How streaming connectors behave.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    /// Longest a request may take before it is answered with a deadline error.
    pub request_timeout: Duration,
    /// Requests running at once per connector.
    pub max_in_flight: usize,
    /// Longest request document, in bytes: a JSON line (newline excluded) or a zenoh sample. A
    /// longer line is skipped without being buffered, a longer sample without being copied, and
    /// either is answered with an error document.
    pub max_line_bytes: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            request_timeout: Duration::from_secs(30),
            max_in_flight: 64,
            max_line_bytes: 64 << 20,
        }
    }
}

/// What a connector did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamReport {
    /// Requests read.
    pub requests: u64,
    /// Of those, answered with an error document.
    pub errors: u64,
}

/// Errors that stop a connector (its input or output failed), as opposed to a bad request.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A file or stdio failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// zenoh failed.
    #[error("zenoh: {0}")]
    Zenoh(String),
    /// A stream file may not be opened (not a regular file, an existing output, outside the root).
    #[error(transparent)]
    File(#[from] weir_engine::paths::FileError),
}

/// Why a request read from a stream was answered with an error document.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    /// The protocol's own failure: a malformed document or field, an unknown output, the graph's
    /// refusal or error, the deadline.
    #[error(transparent)]
    Protocol(#[from] OipError),
    /// A JSON line over the document cap ([`StreamOptions::max_line_bytes`]).
    #[error("line {line}: over the limit of {limit} bytes")]
    LineTooLong {
        /// The line's number.
        line: u64,
        /// The cap.
        limit: usize,
    },
    /// A zenoh sample over the document cap ([`StreamOptions::max_line_bytes`]).
    #[error("sample {number}: {size} bytes, over the limit of {limit} bytes")]
    SampleTooLarge {
        /// The sample's number.
        number: u64,
        /// Its size in bytes.
        size: usize,
        /// The cap.
        limit: usize,
    },
}

/// Runs `connector` for `runtime` until its input ends or `shutdown` flips to true.
///
/// # Errors
/// When the input or output fails; requests read until then are still answered.
pub async fn run_stream(
    runtime: Arc<GraphRuntime>,
    connector: StreamConnector,
    options: StreamOptions,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<StreamReport, StreamError> {
    match connector {
        StreamConnector::Jsonl {
            input,
            output,
            output_mode,
        } => {
            // The graph's paths were confined to its path root at validation.
            let rules = weir_engine::paths::FileRules::default();
            let ends = jsonl::Ends {
                input: &input,
                output: &output,
                output_mode,
                rules: &rules,
            };
            let answerer = Answerer::Graph(runtime);
            jsonl::run_jsonl(answerer, ends, options, jsonl::Pace::default(), shutdown).await
        }
        StreamConnector::Zenoh {
            subscribe,
            publish,
            listen,
            connect,
        } => {
            let keys = pubsub::Keys { subscribe, publish };
            pubsub::run_zenoh(runtime, keys, &listen, &connect, options, shutdown).await
        }
    }
}

/// Answers one request document: the reply document, and whether it is an error.
pub(crate) async fn answer_document(
    answerer: &Answerer,
    document: &[u8],
    fallback_id: String,
    options: StreamOptions,
) -> (Vec<u8>, bool) {
    let mut request = match parse_infer_request(document, None) {
        Ok(r) => r,
        Err(e) => {
            debug!(error = %e, "Rejected a stream request.");
            // Name the request if its id is readable, even when the rest is not (every other
            // key is skipped unparsed, so a hostile document builds no tree).
            let id = serde_json::from_slice::<IdOnly>(document)
                .ok()
                .and_then(|d| d.id)
                .unwrap_or(fallback_id);
            return (error_document(&id, &OipError::from(e).into()), true);
        }
    };
    let id = request.id.get_or_insert(fallback_id).clone();
    // Streams carry JSON documents only: binary outputs are written as JSON.
    request.binary_by_default = false;
    if let Some(outputs) = request.outputs.as_mut() {
        outputs.iter_mut().for_each(|o| o.binary = false);
    }
    match answerer.infer(request, options.request_timeout).await {
        Ok((body, _)) => (body, false),
        Err(e) => (error_document(&id, &e.into()), true),
    }
}

/// Just a document's `id`.
#[derive(serde::Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<String>,
}

/// The error document for request `id`: the id quoted short, the message capped (see
/// [`crate::echo`]), so a hostile request never gets an unbounded document back.
fn error_document(id: &str, error: &DocumentError) -> Vec<u8> {
    let message = cap_error(error.to_string());
    json!({"id": quote(id), "error": message})
        .to_string()
        .into_bytes()
}
