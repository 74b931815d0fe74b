//! The small JSON messages beside the Arrow payloads: reply errors and load reports (the
//! variant load/unload commands are in [`crate::variants`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What kind of failure a reply error reports; the client retries only [`ErrorKind::Overloaded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The executor's queue was full: try another replica.
    Overloaded,
    /// The payload was not what the model takes.
    Invalid,
    /// The model failed on the rows.
    Inference,
    /// The executor serves no such model.
    UnknownModel,
    /// A control command was refused: unauthenticated, replayed, malformed or too large.
    Refused,
    /// A variant could not be loaded (not in the executor's repository, its file does not match
    /// the record, or ONNX Runtime failed on it).
    LoadFailed,
    /// The job's time budget ran out while it waited in the executor's queue; it was not run.
    /// Final: another replica cannot answer it in time either.
    Expired,
}

/// The body of a zenoh reply error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReply {
    /// Kind.
    pub kind: ErrorKind,
    /// Message for people.
    pub message: String,
}

impl ErrorReply {
    /// The JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a reply error an executor sent; `None` when the body is not one, which means zenoh
    /// itself ended the query (its query timeout replies with the error `Timeout`), not the executor.
    pub fn parse(bytes: &[u8]) -> Option<ErrorReply> {
        serde_json::from_slice(bytes).ok()
    }
}

/// One model's load on an executor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelLoad {
    /// Jobs waiting in its queue.
    pub queue_depth: u64,
    /// Inference calls so far.
    pub runs: u64,
    /// Rows inferred so far.
    pub rows: u64,
    /// Time inside ONNX Runtime so far, in milliseconds.
    pub busy_ms: f64,
    /// Time its sessions held calls beyond ONNX Runtime so far (an emulated type's wait), in
    /// milliseconds.
    #[serde(default)]
    pub held_ms: f64,
    /// Sessions (threads) serving it.
    #[serde(default)]
    pub sessions: u32,
    /// Jobs it holds, queued or running (absent from an older executor's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<u64>,
    /// Jobs answered so far (absent from an older executor's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served: Option<u64>,
    /// Inference calls that failed so far (absent from an older executor's report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// The most rows its calls take now, from their measured CPU time per row by batch size
    /// (`batching.grow: while_cheaper`); absent while calls grow to the largest batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_batch: Option<u64>,
}

/// What an executor publishes on `<prefix>/load`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Executor name.
    pub executor: String,
    /// Device it runs on.
    pub device: String,
    /// Per model.
    pub models: BTreeMap<String, ModelLoad>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_round_trip_and_zenohs_own_are_told_apart() {
        let e = ErrorReply {
            kind: ErrorKind::Overloaded,
            message: "full".into(),
        };
        assert_eq!(ErrorReply::parse(&e.to_bytes()), Some(e));
        // What zenoh replies when a query times out.
        assert_eq!(ErrorReply::parse(b"Timeout"), None);
    }

    #[test]
    fn an_older_executor_s_load_report_still_reads() {
        let old = br#"{"executor":"e","device":"cpu","models":{"m":{"queue_depth":2,"runs":5,"rows":9,"busy_ms":1.5}}}"#;
        let r: LoadReport = serde_json::from_slice(old).unwrap();
        let m = &r.models["m"];
        assert_eq!((m.queue_depth, m.runs, m.rows), (2, 5, 9));
        assert_eq!((m.in_flight, m.served, m.errors), (None, None, None));
        assert_eq!(m.preferred_batch, None);
        let new = ModelLoad {
            in_flight: Some(3),
            served: Some(7),
            errors: Some(1),
            preferred_batch: Some(4),
            ..m.clone()
        };
        let back: ModelLoad = serde_json::from_slice(&serde_json::to_vec(&new).unwrap()).unwrap();
        assert_eq!(back, new);
    }
}
