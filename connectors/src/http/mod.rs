//! The Open Inference Protocol (KServe v2) over HTTP, as Triton, KServe, Seldon and MLServer
//! speak it, so their clients (`tritonclient[http]` among them) work unchanged.
//!
//! Each running graph is a v2 model named by the graph's `name`; its inputs and outputs are the
//! model's tensors, each with its protocol datatype and shown with a leading batch dimension of -1
//! (and -1 for every dimension only known per request). A request may send tensors with that
//! batch dimension (each row becomes one graph request, and the reply stacks the rows) or without
//! it (one graph request); the rank tells which, so a scalar input is sent as `[]` or, batched,
//! as `[n]`. Bodies are parsed, run and written by [`crate::oip`], which the
//! streams share; `error.rs` maps every failure to a status once, `metrics.rs` renders `/metrics`,
//! `server.rs` holds the routes and each request's path under its deadline, `describe.rs` the
//! reads before it (metadata, configuration, statistics, readiness), `state.rs` what they share, `listener.rs` the connections (header timeout,
//! cap, drain, TLS), `body.rs` the body budget and reads, `auth.rs` the bearer token, `offline.rs`
//! the offline-job endpoints, `repository.rs` the model repository's (index, load, unload),
//! `status.rs` the status feed the dashboard (`crate::ui`) draws, `requests.rs` recent requests'
//! paths beside it; `metrics_listener.rs` serves
//! `/metrics` on a port of its own, `triton_metrics.rs` adds Triton's metric names.

mod auth;
mod body;
mod describe;
mod error;
mod listener;
pub mod metrics;
mod metrics_listener;
mod offline;
mod repository;
mod requests;
mod server;
mod shared_memory;
mod state;
mod status;
pub mod triton_metrics;

pub(crate) use auth::authorized;
pub use auth::{AuthToken, AuthTokenError};
pub use body::ByteBudget;
pub(crate) use body::BytesPermit;
pub(crate) use error::protocol_status;
pub use error::ServeError;
pub use metrics::MetricsSource;
pub use metrics_listener::MetricsServer;
pub use server::HttpServer;
pub use state::HttpConfig;
pub use status::{StatusFeed, StatusOptions, StatusSampler};
