//! SERF's run-time side for one model node: which configuration `(c, t)` — `c` requests at once,
//! `t` intra-op threads each — to run now, given the arrivals seen so far ("SERF: Efficient
//! Scheduling for Fast Deep Neural Network Serving via Judicious Parallelism", §IV-A and §IV-D).
//!
//! The paper's scheduler monitors the incoming load (§IV-C1), looks the estimated arrival rate up
//! in the configuration reference table built from the M/D_interf/c model, and switches when the
//! best configuration for that load changes. [`Scheduler`] does the same once per period: the
//! [`crate::estimator`]'s rate, planned with a margin, goes to the [`Decider`], which by default
//! evaluates every configuration with the model at that load ([`Lookup`]) and switches with
//! hysteresis. What the paper leaves open — how the rate is estimated, how often to switch, and
//! what to do when the machine under load departs from its profile — is decided here, each rule in
//! [`SchedulerOptions`] with its default.
//!
//! Everything is driven by explicit timestamps (a [`Duration`](std::time::Duration) since any fixed
//! origin); nothing reads a clock, so the logic replays exactly in tests and in the simulator.
//! Applying a switch (admission limit, intra-op threads of new requests) is the caller's job.
//!
//! # The rules
//! Each is stated with its reasoning in the source file that holds it:
//! - *Planning load* (`control.rs`): decisions plan for `λ̂ + 1σ` (σ the estimate's Poisson
//!   standard error), since under-estimating load costs a queue and over-estimating only speed.
//! - *Choice*, *Hysteresis*, *Evidence* (`decider.rs`): the fastest configuration within its
//!   utilisation cap, else the one with the most capacity; adopted after two updates and a 2 %
//!   gain, at once when the running one is unstable; a configuration not measured at this load
//!   judged as if it slowed down as much as the running one does here.
//! - *Utilisation cap*, *Earned headroom*, *Slow states* (`decider/caps.rs`): 0.5, or 0.6 for a
//!   configuration whose calls near the load held within 1.3 × its profile and whose slowest level
//!   lately would still carry the load; a configuration other than the running one enters 5 %
//!   below.
//! - *Surges* (`control/surge.rs`): a step up of load acted on between two updates.
//! - *Online re-profiling*, *Rates by load* (`control/reprofile.rs`, `control/tagging.rs`): served
//!   calls blended into the profile per load band, the decider's rates replaced every few updates.
//! - *Exploration*, *Over the cap*, *Trials* (`control/explore.rs`): bounded trials of
//!   configurations the profile may misjudge.
//! - *Backlog* (`control/backlog.rs`): a queue that keeps growing overrides the model.
//!
//! Why rules beyond the paper at all: on a machine whose cores the configuration fills, the serving
//! process's other threads (dataflow, I/O, the load) compete with inference, so calls under load
//! run slower than profiled and the model's error grows with utilisation. Each rule keeps a
//! decision from resting on a number the running node has not confirmed. The measurements behind
//! them are in `benchmarks/serf/README.md`.

mod control;
mod decider;
mod options;
mod report;
#[cfg(test)]
mod tests;

pub use control::{Scheduler, ServedCall};
pub use decider::{Decider, Evidence};
pub use options::{BacklogGuard, Lookup, SchedulerOptions};
pub use report::{ranking, OnlineCounters, Reprofile, Standing, Switch, SwitchReason};

use crate::config::Config;
use crate::estimator::EstimatorError;
use crate::table::TableError;

/// Errors setting up a scheduler.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchedulerError {
    /// The initial configuration is not among the candidates.
    #[error("initial configuration {0} is not among the profiled configurations")]
    UnknownInitial(Config),
    /// No configurations.
    #[error("no configurations to choose from")]
    NoCandidates,
    /// The options are inconsistent.
    #[error("bad scheduler options: {0}")]
    BadOptions(String),
    /// The estimator's window or period is invalid.
    #[error(transparent)]
    Estimator(#[from] EstimatorError),
    /// The table could not be built.
    #[error(transparent)]
    Table(#[from] TableError),
}
