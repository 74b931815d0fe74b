//! The Open Inference Protocol (KServe v2) infer messages and the path of one request through a
//! graph, apart from any transport: HTTP ([`crate::http`]) and the streams ([`crate::stream`],
//! JSON lines and zenoh pub/sub) parse, run and answer requests through this module, so they
//! answer alike.
//!
//! - `request.rs`: requests, JSON and the binary tensor data extension, parsed into weir tensors;
//! - `data.rs`: one input's shape and data, every size checked before it sizes anything;
//! - `tail.rs`: a binary body's tensors decoded as its bytes arrive, straight into their elements;
//! - `element.rs`: what an element of each datatype may be in JSON and binary, both ways;
//! - `parts.rs`: inputs given as parts (raw bytes or typed values) by a protobuf transport;
//! - `reply.rs`: replies written back, JSON or binary per output;
//! - `region.rs`: where inputs and outputs lie in shared memory regions, as requests name them;
//! - `shared_memory.rs`: those tensors read and written through the transport's registry (the
//!   regions themselves are [`crate::shared_memory`]'s);
//! - `infer.rs`: one request run through a graph (the batch dimension split into rows, every row
//!   awaited within a deadline, the reply stacked);
//! - `traces.rs`: a request's W3C trace context, the sampling decision, and its spans;
//! - `paths.rs`: which requests' paths the dashboard keeps, and keeping them at the reply;
//! - `error.rs`: the protocol's errors ([`ProtocolError`] for a malformed field, [`OipError`] for
//!   every way a request gets no reply), which each transport shows its own way.

mod data;
mod element;
mod error;
mod infer;
mod modelless;
mod parts;
mod paths;
mod region;
mod reply;
mod request;
mod shared_memory;
mod tail;
mod traces;

pub use error::{OipError, ProtocolError, ReplyError};
pub use infer::{infer_outputs, run_infer, InferOutputs};
pub use modelless::{InferFuture, ModelLess, ModelLessModel, MODELLESS_VERSION};
pub use parts::{input_from_parts, shared_input_from_parts, InputContents, TypedValues};
pub use region::{
    parameter_slice, region_name_fits, Placement, RegionParameter, RegionSlice, SharedInput,
    REGION_NAME_MAX_BYTES,
};
pub use reply::{encode_infer_reply, ReplyTensor};
pub use request::{
    binary_layout, parse_infer_request, parse_infer_request_split, InferRequest, InputTensor,
    RequestedOutput, HEADER_LENGTH, PARAMETERS_MAX_BYTES,
};
pub use tail::{TailDecoder, TailError};
pub use traces::{RequestTracing, Traces};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod roundtrip;
