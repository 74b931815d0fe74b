//! weir's ingress and egress connectors. Each turns its protocol's requests into
//! `weir_engine::runtime::GraphRuntime::submit` calls and writes the replies back.
//!
//! - [`oip`]: the Open Inference Protocol (KServe v2) apart from any transport: requests and
//!   replies, one request's path through a graph, and the protocol's errors.
//! - [`http`]: the protocol over HTTP, with Prometheus metrics.
//! - [`grpc`]: the protocol over gRPC (`inference.GRPCInferenceService`, `grpc.health.v1`).
//! - [`stream`]: the same requests and replies as a stream, from JSON lines (a file or stdin/stdout)
//!   or zenoh key expressions, so a graph runs as a stream processor without HTTP.
//! - [`echo`]: client text quoted in errors, cut to a bound.
//! - [`zenoh_peer`]: zenoh sessions as weir opens them (also used by remote executors).

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod echo;
pub mod grpc;
pub mod http;
pub mod oip;
pub mod stream;
pub mod zenoh_peer;
