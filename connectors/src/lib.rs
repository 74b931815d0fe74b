//! weir's ingress and egress connectors. Each turns its protocol's requests into
//! `weir_engine::runtime::GraphRuntime::submit` calls and writes the replies back.
//!
//! - [`oip`]: the Open Inference Protocol (KServe v2) apart from any transport: requests and
//!   replies, one request's path through a graph, and the protocol's errors.
//! - [`http`]: the protocol over HTTP, with Prometheus metrics.
//! - [`grpc`]: the protocol over gRPC (`inference.GRPCInferenceService`, `grpc.health.v1`).
//! - [`stream`]: the same requests and replies as a stream, from JSON lines (a file or stdin/stdout)
//!   or zenoh key expressions, so a graph runs as a stream processor without HTTP.
//! - [`models`]: the served models by name and version, with their Triton configuration and
//!   statistics, shared by HTTP and gRPC.
//! - [`offline`]: offline (batch) jobs: a JSON-lines file run through a graph in the background,
//!   paused while the machine is busy (INFaaS's `offline_query`).
//! - [`echo`]: client text quoted in errors, cut to a bound.
//! - [`tls`]: TLS for the HTTP and gRPC listeners (rustls), reloaded when its files change.
//! - [`access_log`]: one log event per HTTP request and gRPC call (target `weir::access`).
//! - [`process_metrics`]: the process's memory, CPU, file descriptors and threads for `/metrics`.
//! - [`shared_memory`]: Triton's system shared memory extension, the regions clients on this host
//!   register (one registry for HTTP and gRPC).
//! - [`zenoh_peer`]: zenoh sessions as weir opens them (also used by remote executors).

pub mod access_log;
pub mod echo;
pub mod grpc;
pub mod http;
pub mod models;
pub mod offline;
pub mod oip;
pub mod process_metrics;
pub mod shared_memory;
pub mod stream;
pub mod tls;
mod ui;
pub mod zenoh_peer;
