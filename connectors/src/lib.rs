//! weir's ingress and egress connectors: the Open Inference Protocol (KServe v2) over HTTP, zenoh
//! and JSON-lines streams. Each connector turns its protocol's requests into
//! `weir_engine::runtime::GraphRuntime::submit` calls and writes the replies back.
//!
//! The in-process path (the `weir` crate's load generator) needs no connector; the protocol
//! connectors are built by the serving and distributed-execution issues (see `issues`).

#![deny(missing_docs)]
