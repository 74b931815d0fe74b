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
//! - [`repository`]: the model repository on disk: registered models, their variants, files
//!   and measured profiles (§3.3).
//! - [`dispatch`]: the seam between serving and the control plane: [`dispatch::Dispatcher`].

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod dispatch;
pub mod query;
pub mod repository;
pub mod state;
pub mod variant;
