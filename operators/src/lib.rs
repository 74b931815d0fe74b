//! weir's node operators: what each node kind does inside the timely dataflow.
//!
//! [`OperatorFactory`] implements the engine's [`weir_engine::compile::NodeFactory`]: it owns the process-wide resources
//! (one ONNX Runtime executor per model node, started before any worker runs so a bad model fails
//! at start-up) and builds each node's operator on every worker. What the graph process made
//! before it ([`SharedHandles`]: the remote executors' client, admission's counters, the HAMS
//! manager's links) reaches each executor and proxy through its constructor. One folder per operator family:
//! [`model`] (ONNX Runtime executors, replica pools), [`parity`] (ParM coding around a model node),
//! [`stateful`] (HAMS: stateful nodes' proxies and operator), [`tensor`] (inline tensor ops) and
//! [`text`] (post-processing: softmax, labels; run by the tensor operator).
//! Each family that exports `/metrics` series writes them in its own `metrics` module;
//! [`metrics::OperatorMetrics`] gathers them for one graph. The inline ops (tensor, text, image)
//! shape their output columns through one shared helper (`column.rs`).

pub mod capabilities;
mod column;
mod factory;
pub mod image;
pub mod metrics;
pub mod model;
pub mod parity;
pub mod stateful;
pub mod tensor;
pub mod text;

pub use factory::{
    on_executors, takes_every_request, OperatorFactory, RemoteReplicaSource, SharedHandles,
    LOCAL_PRIMARY,
};
