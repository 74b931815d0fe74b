//! The Open Inference Protocol (KServe v2) over gRPC: `inference.GRPCInferenceService` as
//! Triton and KServe serve it, so their gRPC clients (`tritonclient.grpc`, `perf_analyzer`) work
//! unchanged, and the standard `grpc.health.v1` service beside it.
//!
//! This is a second transport of one protocol core, not a second protocol: requests become the
//! same [`crate::oip::InferRequest`]s the HTTP bodies become (inputs through
//! [`crate::oip::input_from_parts`], so raw tensor contents are read by the binary extension's
//! decoder and typed contents pass the same element rules), they run through
//! [`crate::oip::infer_outputs`], and failures take their status from the HTTP mapping
//! (`status.rs` translates its codes), so a request fails the same way over both.
//!
//! - `convert.rs`: protobuf messages to protocol requests and protocol answers to messages;
//! - `parameters.rs`: the `parameters` map to and from the JSON object HTTP carries, bounded;
//! - `status.rs`: every failure as a gRPC status;
//! - `config.rs`: [`GrpcConfig`], the deadlines, limits and token;
//! - `shared.rs`: what every RPC reads (graphs, front end, configuration, phase) and the one
//!   request path, to a graph or to the model-less front end ([`crate::oip::ModelLess`]) for the
//!   names no graph has;
//! - `service.rs`: the inference service's RPCs;
//! - `unary.rs`: unary `ModelInfer` answered from the admitted body, past tonic's generic codec;
//! - `models.rs`: Triton's `ModelConfig` and `ModelStatistics` from the shared model table;
//! - `repository.rs`: Triton's model repository RPCs (index, load, unload);
//! - `stream.rs`: `ModelStreamInfer`, bounded in flight per stream and drained on shutdown;
//! - `health.rs`: `grpc.health.v1` Check and Watch;
//! - `admit.rs`: each request message charged against the process's byte budget, for its bytes
//!   and for what it decodes into (`footprint.rs`), before it is kept;
//! - `listener.rs`: the connection cap and the idle timeout;
//! - `server.rs`: the listener, limits and the shutdown sequence.
//!
//! The generated code is in [`proto`] (from `proto/grpc_service.proto`) and [`health_proto`]
//! (from `proto/health.proto`); its client halves serve tests and benchmarks.

mod admit;
mod config;
mod convert;
mod footprint;
mod health;
mod listener;
mod models;
mod parameters;
mod repository;
mod server;
mod service;
mod shared;
mod shared_memory;
mod status;
mod stream;
mod unary;
pub(crate) mod wrap;

/// The messages and service of `inference.GRPCInferenceService`, generated from
/// `proto/grpc_service.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    tonic::include_proto!("inference");
}

/// The messages and service of `grpc.health.v1`, generated from `proto/health.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod health_proto {
    tonic::include_proto!("grpc.health.v1");
}

pub use config::GrpcConfig;
pub use server::{GrpcServeError, GrpcServer};
