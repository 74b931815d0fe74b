//! Remote ONNX Runtime executors over zenoh.
//!
//! A `weir executor` process ([`server::ExecutorServer`]) loads models into ONNX Runtime (the same
//! [`weir_operators::model::ModelExecutor`] as in-process: bounded queue, dynamic batching) and
//! serves each under the key expression `<prefix>/model/<model>` as a zenoh queryable, where
//! `<prefix>` is `weir/executor/<name>` unless set. Requests and replies are Arrow IPC payloads of
//! tensor columns ([`weir_engine::wire`]); a failure is a reply error carrying a small JSON
//! [`protocol::ErrorReply`]. While it serves, the process holds the liveliness token
//! `<prefix>/alive` and publishes a [`protocol::LoadReport`] on `<prefix>/load` every half second.
//!
//! A graph reaches executors through [`client::ZenohReplicas`], which implements the operators'
//! `RemoteReplicaSource`: each remote replica sends a job as one zenoh query with a timeout and
//! follows the executor's liveliness token, so the node's replica pool re-dispatches the jobs of an
//! executor that dies (its token disappears when its link drops) or stops answering (timeouts).
//!
//! With its own model repository, an executor also loads and unloads variants on signed commands
//! ([`variants`]): model-less serving's cold starts on remote workers.
//!
//! Stateful models (HAMS) are served by [`stateful::StatefulMember`]s (`--stateful NAME=PATH`):
//! primary or backup of a stateful node as the graph's manager (the `weir-hams-manager` crate)
//! assigns, under `<prefix>/hams/<model>/…`. The graph side of their batches is
//! [`client::ZenohStatefulTransport`].

pub mod client;
pub mod emulation;
mod options;
mod payload;
pub mod protocol;
mod query;
mod reply_check;
mod served;
pub mod server;
pub mod stateful;
mod variant_loader;
pub mod variants;
