//! Every way a gRPC request fails, as a status. Protocol failures take their class from the HTTP
//! mapping (`http::protocol_status`) and translate its status code here, so one table decides
//! how each failure is answered on both protocols: 400 is INVALID_ARGUMENT (the message names the
//! field), 404 NOT_FOUND, 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED, 500
//! INTERNAL. A refusal at capacity carries `retry-after: 1` in its metadata, as the HTTP answer
//! carries the header. Messages are cut to [`crate::echo::ERROR_MAX_BYTES`].

use axum::http::StatusCode;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::echo::cap_error;
use crate::http::metrics::Outcome;
use crate::http::protocol_status;
use crate::oip::{OipError, ProtocolError};

/// A failed request: its status and its outcome for the metrics.
#[derive(Debug)]
pub(super) struct Failure {
    pub status: Status,
    pub outcome: Outcome,
}

impl Failure {
    /// A failure of `code` and `outcome`, the message cut short.
    pub fn new(code: Code, outcome: Outcome, message: String) -> Failure {
        Failure {
            status: Status::new(code, cap_error(message)),
            outcome,
        }
    }

    /// The request names a model this server does not serve.
    pub fn unknown_model(name: &str) -> Failure {
        Failure::new(
            Code::NotFound,
            Outcome::InvalidRequest,
            format!("model_name: unknown model `{}`", crate::echo::quote(name)),
        )
    }

    /// The request names a model or a version that is not served.
    pub fn lookup(e: &crate::models::LookupError) -> Failure {
        match e {
            crate::models::LookupError::UnknownModel(name) => Failure::unknown_model(name),
            other => Failure::new(
                Code::NotFound,
                Outcome::InvalidRequest,
                format!("model_version: {other}"),
            ),
        }
    }

    /// `needed` bytes the process's byte budget of `limit` cannot cover now.
    pub fn budget(needed: usize, limit: usize) -> Failure {
        let mut failure = Failure::new(
            Code::ResourceExhausted,
            Outcome::Overloaded,
            format!(
                "the server-wide budget of {limit} bytes in flight (--max-inflight-bytes) cannot \
                 cover this request's {needed} bytes of shared memory inputs now"
            ),
        );
        failure
            .status
            .metadata_mut()
            .insert("retry-after", MetadataValue::from_static("1"));
        failure
    }

    /// Missing or wrong bearer token.
    pub fn unauthenticated() -> Failure {
        Failure::new(
            Code::Unauthenticated,
            Outcome::InvalidRequest,
            "missing or invalid bearer token (`authorization: Bearer <token>` metadata)".into(),
        )
    }
}

impl From<OipError> for Failure {
    fn from(e: OipError) -> Failure {
        let (http, outcome) = protocol_status(&e);
        let mut failure = Failure::new(code_of(http), outcome, e.to_string());
        if matches!(outcome, Outcome::Overloaded | Outcome::Unavailable) {
            failure
                .status
                .metadata_mut()
                .insert("retry-after", MetadataValue::from_static("1"));
        }
        failure
    }
}

impl From<ProtocolError> for Failure {
    fn from(e: ProtocolError) -> Failure {
        Failure::from(OipError::Malformed(e))
    }
}

/// The gRPC code of an HTTP status the protocol core answers with.
fn code_of(http: StatusCode) -> Code {
    match http {
        StatusCode::BAD_REQUEST => Code::InvalidArgument,
        StatusCode::UNAUTHORIZED => Code::Unauthenticated,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::TOO_MANY_REQUESTS => Code::ResourceExhausted,
        StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
        StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => Code::DeadlineExceeded,
        _ => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use weir_engine::request::RequestError;

    use super::*;

    #[test]
    fn a_budget_refusal_is_resource_exhausted_with_retry_after_and_names_both_sizes() {
        let f = Failure::budget(300, 100);
        assert_eq!(f.status.code(), Code::ResourceExhausted);
        assert_eq!(f.outcome, Outcome::Overloaded);
        assert!(
            f.status.message().contains("100 bytes"),
            "{}",
            f.status.message()
        );
        assert!(
            f.status.message().contains("300 bytes"),
            "{}",
            f.status.message()
        );
        assert_eq!(
            f.status.metadata().get("retry-after").map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
    }

    #[test]
    fn each_failure_class_has_its_code() {
        let malformed = Failure::from(ProtocolError {
            field: "inputs[0] (x).shape".into(),
            message: "dimension -1 is negative".into(),
        });
        assert_eq!(malformed.status.code(), Code::InvalidArgument);
        assert!(malformed
            .status
            .message()
            .starts_with("inputs[0] (x).shape"));
        let overloaded = Failure::from(OipError::Request(RequestError::Overloaded {
            in_flight: 1,
            limit: 1,
        }));
        assert_eq!(overloaded.status.code(), Code::Unavailable);
        assert_eq!(
            overloaded
                .status
                .metadata()
                .get("retry-after")
                .map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let late = Failure::from(OipError::Deadline { ms: 5 });
        assert_eq!(late.status.code(), Code::DeadlineExceeded);
        let down = Failure::from(OipError::Request(RequestError::ShuttingDown {
            graph: "g".into(),
        }));
        assert_eq!(down.status.code(), Code::Unavailable);
        let no_replica = Failure::from(OipError::Request(RequestError::NodeUnavailable {
            node: "mlp".into(),
            message: "unavailable: no replica is alive".into(),
        }));
        assert_eq!(no_replica.status.code(), Code::Unavailable);
        assert!(no_replica.status.metadata().get("retry-after").is_some());
    }
}
