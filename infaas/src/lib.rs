//! Model-less serving, after "INFaaS: Automated Model-less Inference Serving" (Romero et al.,
//! USENIX ATC '21).
//!
//! A client names a *task* and its requirements (latency, accuracy, cost) instead of a model; weir
//! picks the variant (architecture × optimisation × batch × hardware) that meets them most cheaply,
//! loading one when none is running (paper §3–§4).
//!
//! - [`variant`]: what a variant is and what profiling measured about it (the static half of the
//!   paper's metadata store, §3.5 (a)).
//! - [`query`]: what a query asks for ([`query::Requirements`], read from the Open Inference
//!   Protocol's `parameters`) and what a decision answers ([`query::Choice`], [`query::NoMatch`]).
//! - [`state`]: the dynamic half (§3.5 (b), §4.2): instance states, load reports, lifecycle
//!   events.
//! - [`scaling`]: model-level autoscaling's cost, constraints, greedy heuristic and exact program
//!   (§4.2).
//! - [`autoscale`]: the live autoscaler: ticks over the store's snapshot and acts through an
//!   actuator (load, unload, start and retire executors), logging and counting every action.
//! - [`billing`]: what the instances cost, price × seconds loaded.
//! - [`launcher`]: how executors are started and stopped (local processes, or an operator's
//!   command).
//! - [`repository`]: the model repository on disk: registered models, their variants, files
//!   and measured profiles (§3.3).
//! - [`dispatch`]: the seam between serving and the control plane: [`dispatch::Dispatcher`].
//! - [`store`]: the metadata store, a differential dataflow deriving instance, worker and hardware
//!   state from the events, published as read-optimised snapshots; it implements the dispatcher.
//! - [`snapshot`]: the store's read side, an immutable [`snapshot::Snapshot`] of the registry and
//!   the derived state, which selection, the metrics and the autoscaler read.
//! - [`select`]: per-query variant selection over a snapshot, as a replaceable policy.
//! - [`cost`]: the cheapest instance mix meeting a load and an SLO (§2.2).
//! - [`metrics`]: the store's Prometheus families.

pub mod autoscale;
pub mod billing;
pub mod cost;
pub mod dispatch;
pub mod launcher;
pub mod metrics;
pub mod query;
pub mod repository;
pub mod scaling;
pub mod select;
pub mod snapshot;
pub mod state;
pub mod store;
#[cfg(test)]
mod testing;
pub mod variant;
