//! Access logs: one `tracing` event per HTTP request and per gRPC call, at INFO under the target
//! [`TARGET`] (`weir::access`), so a subscriber's filter turns them on or off apart from every
//! other log (`weir serve` lets them through by default; `--no-access-log` filters them out), and
//! the subscriber's format decides text or JSON.
//!
//! Each event carries the protocol, what was asked (HTTP method and path, or the gRPC method),
//! the model and version, the status (HTTP status, or the gRPC status code), the latency in
//! milliseconds, the bytes of the request and response bodies, the request id when the request
//! had one, the trace id when the server traces, and the client's address. The event's time is the subscriber's timestamp.
//!
//! The transport layers (`http.rs`: an axum middleware; `grpc.rs`: a tower service around the
//! gRPC services) see the request and the response but not what is inside the body: the handlers
//! note what they parse (the model of a gRPC request, the request's `id`) through a task-local
//! `Note` the layer scopes around the call, with `note_model` and `note_request_id`. Outside
//! such a scope (in tests, or on tasks a handler spawns) noting does nothing. Client text in an
//! event is cut to [`crate::echo::QUOTE_MAX_CHARS`]; the formatters escape it.
//!
//! Nothing here runs when the target is filtered out: each layer asks `enabled` first.

pub(crate) mod grpc;
pub(crate) mod http;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tracing::Level;

use crate::echo::quote;

/// The target of every access-log event.
pub const TARGET: &str = "weir::access";

/// Whether access-log events are wanted by the subscriber now.
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: TARGET, Level::INFO)
}

/// What a handler learnt about its request that the transport cannot see.
#[derive(Debug, Default)]
struct Noted {
    model: Option<String>,
    version: Option<String>,
    request_id: Option<String>,
    trace_id: Option<String>,
}

/// The handler's notes for one request, shared between the layer and the handler's task.
#[derive(Debug, Clone, Default)]
pub(crate) struct Note(Arc<Mutex<Noted>>);

tokio::task_local! {
    static NOTE: Note;
}

impl Note {
    /// Runs `f` with this note as the one [`note_model`] and [`note_request_id`] write to.
    pub(crate) fn scope<F: Future>(&self, f: F) -> impl Future<Output = F::Output> {
        NOTE.scope(self.clone(), f)
    }

    fn take(&self) -> Noted {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn with_note(f: impl FnOnce(&mut Noted)) {
    let _ = NOTE.try_with(|n| f(&mut n.0.lock().unwrap_or_else(PoisonError::into_inner)));
}

/// Notes the model (and version, when not empty) the current request is for.
pub(crate) fn note_model(model: &str, version: &str) {
    with_note(|n| {
        n.model = Some(quote(model).into_owned());
        n.version = (!version.is_empty()).then(|| quote(version).into_owned());
    });
}

/// Notes the current request's id (from its body), when it has a non-empty one.
pub(crate) fn note_request_id(id: Option<&str>) {
    if let Some(id) = id.filter(|i| !i.is_empty()) {
        with_note(|n| n.request_id = Some(quote(id).into_owned()));
    }
}

/// Notes the current request's trace id (32 hex digits), when the server traces.
pub(crate) fn note_trace_id(trace_id: String) {
    with_note(|n| n.trace_id = Some(trace_id));
}

/// One answered request, as the transport layer saw it.
pub(crate) struct Entry {
    /// When the request arrived.
    pub started: Instant,
    /// The client.
    pub peer: Option<SocketAddr>,
    /// Body bytes received.
    pub bytes_in: u64,
    /// Body bytes sent.
    pub bytes_out: u64,
    /// The id the transport carried (an `x-request-id` header), if any.
    pub header_id: Option<String>,
    /// What the handler noted.
    pub note: Note,
}

impl Entry {
    fn latency_ms(&self) -> f64 {
        (self.started.elapsed().as_secs_f64() * 1e6).round() / 1e3
    }

    /// The request id: the transport's, else the one the handler noted.
    fn request_id(&self, noted: &mut Noted) -> Option<String> {
        self.header_id.clone().or_else(|| noted.request_id.take())
    }

    /// Logs an HTTP request: `method` `path` answered with `status`; the model and version are
    /// those of the path, else the handler's.
    pub(crate) fn emit_http(&self, method: &str, path: &str, status: u16) {
        let mut noted = self.note.take();
        let (model, version) = match model_of_path(path) {
            (Some(m), v) => (Some(m.to_string()), v.map(str::to_string)),
            (None, _) => (noted.model.take(), noted.version.take()),
        };
        tracing::info!(
            target: TARGET,
            protocol = "http",
            method,
            path = %quote(path),
            model,
            version,
            status,
            latency_ms = self.latency_ms(),
            bytes_in = self.bytes_in,
            bytes_out = self.bytes_out,
            request_id = self.request_id(&mut noted),
            trace_id = noted.trace_id.take(),
            peer = self.peer.map(tracing::field::display),
            "Request answered."
        );
    }

    /// Logs a gRPC call of `rpc` (`package.Service/Method`) that ended with status code `status`.
    pub(crate) fn emit_grpc(&self, rpc: &str, status: i32) {
        let mut noted = self.note.take();
        tracing::info!(
            target: TARGET,
            protocol = "grpc",
            rpc = %quote(rpc),
            model = noted.model.take(),
            version = noted.version.take(),
            status,
            latency_ms = self.latency_ms(),
            bytes_in = self.bytes_in,
            bytes_out = self.bytes_out,
            request_id = self.request_id(&mut noted),
            trace_id = noted.trace_id.take(),
            peer = self.peer.map(tracing::field::display),
            "Request answered."
        );
    }
}

/// The model and version an Open Inference Protocol path names:
/// `/v2/models/{model}[/versions/{version}][/...]`.
fn model_of_path(path: &str) -> (Option<&str>, Option<&str>) {
    let Some(rest) = path.strip_prefix("/v2/models/") else {
        return (None, None);
    };
    let mut parts = rest.split('/');
    let model = parts.next().filter(|m| !m.is_empty());
    let version = match (parts.next(), parts.next()) {
        (Some("versions"), Some(v)) if !v.is_empty() => Some(v),
        _ => None,
    };
    (model, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_names_the_model_and_version() {
        assert_eq!(model_of_path("/v2/models/mlp/infer"), (Some("mlp"), None));
        assert_eq!(
            model_of_path("/v2/models/mlp/versions/3/infer"),
            (Some("mlp"), Some("3"))
        );
        assert_eq!(model_of_path("/v2/models/mlp"), (Some("mlp"), None));
        assert_eq!(model_of_path("/v2/health/ready"), (None, None));
        assert_eq!(model_of_path("/v2/models//infer"), (None, None));
    }

    #[tokio::test]
    async fn notes_reach_the_scope_and_nothing_outside_it() {
        note_model("outside", "1");
        let note = Note::default();
        note.scope(async {
            note_model("mlp", "");
            note_request_id(Some(""));
            note_request_id(Some("r1"));
        })
        .await;
        let noted = note.take();
        assert_eq!(noted.model.as_deref(), Some("mlp"));
        assert_eq!(noted.version, None);
        assert_eq!(noted.request_id.as_deref(), Some("r1"));
    }
}
