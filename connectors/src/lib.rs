//! weir's ingress and egress connectors. Each turns its protocol's requests into
//! `weir_engine::runtime::GraphRuntime::submit` calls and writes the replies back.
//!
//! - [`http`]: the Open Inference Protocol (KServe v2) over HTTP, with Prometheus metrics.
//!
//! zenoh and JSON-lines connectors come with the distributed-execution issue.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod http;
