//! SERF: queueing-model-driven choice of inter-/intra-request parallelism per model node.
//!
//! Implements the paper "SERF: Efficient Scheduling for Fast Deep Neural Network Serving via Judicious
//! Parallelism" (Yan, Ruwase, He, Smirni; `../shared/papers/001_313fc55731948098.txt` §IV) as pure logic,
//! following the engineering note `notes/serf.md` (which fixes the paper's Eq. 12/13 erratum):
//!
//! - [`config`]: the configuration space `(c, C_inter, t)` with `c·t ≤ cores`;
//! - [`model`]: the M/D_interf/c latency model (Eqs. 2–13, corrected);
//! - [`baseline`]: the M/M/c, M/D/c and M/M_interf/c predictors of Fig. 9;
//! - [`simulator`]: a discrete-event simulator of M/D_interf/c used to check the model;
//! - [`profile`]: the profiled service rates of one model node, their file format and profiling plan/cost;
//! - [`table`]: the configuration reference table and online evaluation over all configurations;
//! - [`scheduler`]: the arrival-rate estimator and the switch decision with hysteresis.
//!
//! Nothing here measures ONNX Runtime, reads a clock or touches an executor: callers measure (through
//! [`profile::build_profile`]'s closure), pass timestamps, and apply the decided configuration.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod baseline;
pub mod config;
pub mod model;
pub mod profile;
pub mod scheduler;
pub mod simulator;
pub mod table;
