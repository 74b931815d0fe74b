//! Requests into a running graph, replies out of it, and the errors a request can end with.
//!
//! Errors carry a [`ErrorClass`] so callers (the HTTP connector, routing, retries) decide on the
//! class, never by matching message text; the HTTP status mapping lives in one place in the
//! connector. A request the runtime admitted ([`AdmittedRequest`]) is what the ingress batches and
//! what the request log keeps for a retry.

use std::sync::Arc;

use crate::lineage::LineageEntry;
use crate::tensor::{NamedTensor, Tensor};

/// Where a request id counts its attempts: bits 40..48, below the origin process (bits 48..64).
/// A request whose speculative path was rolled back by a HAMS failover runs again under the next
/// attempt's id; every row still carrying an older attempt is stale and dropped where it is met.
pub const ATTEMPT_SHIFT: u32 = 40;

const ATTEMPT_MASK: u64 = 0xFF << ATTEMPT_SHIFT;

/// The id a request was admitted under (attempt 0), which its reply carries.
pub fn original_id(id: u64) -> u64 {
    id & !ATTEMPT_MASK
}

/// Which attempt of its request `id` is (0 for the first).
pub fn attempt_of(id: u64) -> u64 {
    (id & ATTEMPT_MASK) >> ATTEMPT_SHIFT
}

/// The id of the attempt after `id`'s, or `None` after 255 attempts.
pub fn next_attempt(id: u64) -> Option<u64> {
    let next = attempt_of(id) + 1;
    (next <= 0xFF).then(|| original_id(id) | (next << ATTEMPT_SHIFT))
}

/// A request that passed admission: its id and one tensor per graph input, in the graph's order.
/// The runtime hands it to a worker's ingress, and the request log keeps it for a retry.
#[derive(Debug, Clone)]
pub struct AdmittedRequest {
    /// weir's id.
    pub id: u64,
    /// Tensors, already checked against the graph inputs' types.
    pub inputs: Vec<Tensor>,
    /// The client's parameters as JSON object text, carried to every node (see
    /// [`crate::batch::PARAMETERS`]).
    pub parameters: Option<Arc<str>>,
    /// When the client stops waiting: a model node does not run it after this (its answer is
    /// then [`RequestError::Expired`]). `None`: no deadline.
    pub deadline: Option<std::time::Instant>,
}

/// A reply: the graph's outputs for one request, and the path it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// weir's id for the request.
    pub request_id: u64,
    /// One tensor per graph output, in the graph's output order.
    pub outputs: Vec<NamedTensor>,
    /// Every hop the request made, oldest first.
    pub lineage: Vec<LineageEntry>,
    /// The parameters the request carried through the graph (JSON object text), if any.
    pub parameters: Option<String>,
}

impl Response {
    /// The output named `name`.
    pub fn output(&self, name: &str) -> Option<&Tensor> {
        self.outputs
            .iter()
            .find(|o| o.name == name)
            .map(|o| &o.tensor)
    }
}

/// Who is to blame for an error, which decides how it is reported and whether to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request was malformed; retrying it unchanged fails again.
    InvalidRequest,
    /// The server is at capacity; retry later.
    Overloaded,
    /// The graph is shutting down, or a node has no live replica; retry later or elsewhere.
    Unavailable,
    /// A node failed while serving a valid request (an ONNX Runtime error, say).
    NodeFailed,
    /// The request's deadline passed before it ran; it was not run.
    DeadlineExceeded,
}

impl ErrorClass {
    /// A short fixed label, usable as a metric label.
    pub fn label(self) -> &'static str {
        match self {
            ErrorClass::InvalidRequest => "invalid_request",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::Unavailable => "unavailable",
            ErrorClass::NodeFailed => "node_failed",
            ErrorClass::DeadlineExceeded => "deadline_exceeded",
        }
    }
}

/// Why a request got no outputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum RequestError {
    /// A request field is wrong; `field` names it (`inputs.image.shape`).
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// Too many requests in flight.
    #[error("overloaded: {in_flight} requests in flight (limit {limit})")]
    Overloaded {
        /// Requests in flight when this one came.
        in_flight: usize,
        /// The limit.
        limit: usize,
    },
    /// A per-sequence stateful node holds as many sequences as it may: a new one cannot start
    /// until one ends or times out.
    #[error("node `{node}`: parameters.sequence_start: all {limit} sequence slots are in use; end a sequence (`sequence_end: true`) or wait for an idle one to time out")]
    SequencesFull {
        /// The node.
        node: String,
        /// Its `max_sequences`.
        limit: usize,
    },
    /// The graph no longer accepts requests.
    #[error("graph `{graph}` is shutting down")]
    ShuttingDown {
        /// The graph.
        graph: String,
    },
    /// A node failed on this request.
    #[error("node `{node}`: {message}")]
    Node {
        /// The node.
        node: String,
        /// What failed.
        message: String,
    },
    /// A node could not run the request for want of a live replica (every one it has is gone, or
    /// unreachable): nothing ran, so retrying later (or elsewhere) is safe.
    #[error("node `{node}`: {message}")]
    NodeUnavailable {
        /// The node.
        node: String,
        /// Why no replica could take it.
        message: String,
    },
    /// The request's deadline passed while it waited for a node, which did not run it: nobody
    /// waits for the answer any more, and the time goes to requests that can still make theirs.
    #[error("node `{node}`: the request's deadline passed {late_ms} ms before the node could run it; it was not run")]
    Expired {
        /// The node it waited for.
        node: String,
        /// How long past its deadline it was when the node dropped it.
        late_ms: u64,
    },
}

impl RequestError {
    /// The error's class.
    pub fn class(&self) -> ErrorClass {
        match self {
            RequestError::Invalid { .. } => ErrorClass::InvalidRequest,
            RequestError::Overloaded { .. } | RequestError::SequencesFull { .. } => {
                ErrorClass::Overloaded
            }
            RequestError::ShuttingDown { .. } | RequestError::NodeUnavailable { .. } => {
                ErrorClass::Unavailable
            }
            RequestError::Node { .. } => ErrorClass::NodeFailed,
            RequestError::Expired { .. } => ErrorClass::DeadlineExceeded,
        }
    }
}

/// An error for one row, flowing on an operator's error output to the egress. Serialized (for
/// timely exchange between processes) as `(request_id, error)`.
#[derive(Debug, Clone)]
pub struct RowError {
    /// The request.
    pub request_id: u64,
    /// What went wrong (shared by every row of a failed batch).
    pub error: Arc<RequestError>,
}

/// Called exactly once with a request's outcome. Runs on a dataflow worker thread: keep it short
/// (send on a channel, complete a future).
pub type Responder = Box<dyn FnOnce(Result<Response, RequestError>) + Send>;

impl serde::Serialize for RowError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.request_id, self.error.as_ref()).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for RowError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (request_id, error) = <(u64, RequestError)>::deserialize(d)?;
        Ok(RowError {
            request_id,
            error: Arc::new(error),
        })
    }
}
