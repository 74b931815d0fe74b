//! Every way an HTTP request can fail, and the one place each maps to a status code: the
//! protocol's own errors ([`OipError`], shared with the streams) and the transport's (body,
//! token, readiness, unknown model). The body is always `{"error": "..."}`, its text cut to
//! [`crate::echo::ERROR_MAX_BYTES`].

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use weir_engine::request::RequestError;

use super::metrics::Outcome;
use crate::echo::cap_error;
use crate::oip::{OipError, ProtocolError, ReplyError};

/// Why an HTTP request got no outputs.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The protocol's own failure: a malformed body or field, an unknown output, the graph's
    /// refusal or error, the deadline.
    #[error(transparent)]
    Protocol(#[from] OipError),
    /// The request names a model this server does not serve.
    #[error("unknown model `{0}`")]
    UnknownModel(String),
    /// The model is served, but not in the version asked for.
    #[error(transparent)]
    UnknownVersion(crate::models::LookupError),
    /// The body is larger than the configured limit.
    #[error("body over the limit of {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The client stopped sending the body before its end, or did not finish it by the deadline.
    #[error("body: the upload stalled or ended before its declared length")]
    BodyIncomplete,
    /// The upload was still unfinished when the request's deadline passed.
    #[error("body: upload not finished within the request deadline of {ms} ms")]
    BodyTimeout {
        /// The deadline.
        ms: u64,
    },
    /// The body's framing (chunked encoding) is malformed, or reading it failed.
    #[error("body: malformed framing (chunked encoding) or read error")]
    BodyMalformed,
    /// Request bodies in flight across the server already hold the configured budget.
    #[error("body: server-wide budget of {limit} bytes in flight is in use, retry later")]
    BytesBudgetExhausted {
        /// The budget.
        limit: usize,
    },
    /// Missing or wrong bearer token.
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// The server is not (or no longer) ready.
    #[error("not ready")]
    NotReady,
    /// The server runs, but a served model cannot answer now (a node with no live replica).
    #[error("not ready: {0}")]
    ModelUnready(String),
}

impl From<ProtocolError> for ServeError {
    fn from(e: ProtocolError) -> Self {
        ServeError::Protocol(OipError::Malformed(e))
    }
}

impl ServeError {
    /// The status code and the metrics outcome.
    pub fn status(&self) -> (StatusCode, Outcome) {
        match self {
            ServeError::Protocol(e) => protocol_status(e),
            ServeError::UnknownModel(_) => (StatusCode::NOT_FOUND, Outcome::InvalidRequest),
            ServeError::UnknownVersion(_) => (StatusCode::NOT_FOUND, Outcome::InvalidRequest),
            ServeError::BodyTooLarge { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, Outcome::InvalidRequest)
            }
            ServeError::BodyIncomplete | ServeError::BodyTimeout { .. } => {
                (StatusCode::REQUEST_TIMEOUT, Outcome::InvalidRequest)
            }
            ServeError::BodyMalformed => (StatusCode::BAD_REQUEST, Outcome::InvalidRequest),
            ServeError::BytesBudgetExhausted { .. } => {
                (StatusCode::SERVICE_UNAVAILABLE, Outcome::Overloaded)
            }
            ServeError::Unauthorized => (StatusCode::UNAUTHORIZED, Outcome::InvalidRequest),
            ServeError::NotReady | ServeError::ModelUnready(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, Outcome::Unavailable)
            }
        }
    }
}

/// The status code and the metrics outcome of a protocol error (the gRPC server maps its status
/// codes from these, so both protocols answer a failure alike).
pub(crate) fn protocol_status(e: &OipError) -> (StatusCode, Outcome) {
    match e {
        OipError::Malformed(_)
        | OipError::UnknownOutput { .. }
        | OipError::RowsDisagree { .. }
        | OipError::Reply(ReplyError::NotUtf8 { .. }) => {
            (StatusCode::BAD_REQUEST, Outcome::InvalidRequest)
        }
        OipError::Reply(ReplyError::TooLong { .. }) => {
            (StatusCode::INTERNAL_SERVER_ERROR, Outcome::NodeFailed)
        }
        OipError::Request(RequestError::Invalid { .. }) => {
            (StatusCode::BAD_REQUEST, Outcome::InvalidRequest)
        }
        OipError::Request(RequestError::Overloaded { .. }) => {
            (StatusCode::SERVICE_UNAVAILABLE, Outcome::Overloaded)
        }
        OipError::Request(RequestError::SequencesFull { .. }) => {
            (StatusCode::TOO_MANY_REQUESTS, Outcome::Overloaded)
        }
        OipError::Request(
            RequestError::ShuttingDown { .. } | RequestError::NodeUnavailable { .. },
        ) => (StatusCode::SERVICE_UNAVAILABLE, Outcome::Unavailable),
        OipError::Request(RequestError::Node { .. }) => {
            (StatusCode::INTERNAL_SERVER_ERROR, Outcome::NodeFailed)
        }
        OipError::Deadline { .. } | OipError::Request(RequestError::Expired { .. }) => {
            (StatusCode::GATEWAY_TIMEOUT, Outcome::DeadlineExceeded)
        }
    }
}

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        let (status, outcome) = self.status();
        let body = serde_json::json!({ "error": cap_error(self.to_string()) }).to_string();
        let mut response =
            (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        // Every 503 is worth retrying: say when.
        if matches!(outcome, Outcome::Overloaded | Outcome::Unavailable) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if matches!(self, ServeError::Unauthorized) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<crate::models::LookupError> for ServeError {
    fn from(e: crate::models::LookupError) -> Self {
        match e {
            crate::models::LookupError::UnknownModel(name) => ServeError::UnknownModel(name),
            other => ServeError::UnknownVersion(other),
        }
    }
}
