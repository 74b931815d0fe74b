//! Heterogeneous executor pools under a budget, after "KAIROS: Building Cost-Efficient Machine
//! Learning Inference Systems with Heterogeneous Cloud Resources" (Kairos; Li et al., HPDC '23).
//!
//! Three pieces, each usable on its own:
//! - [`distribution`]: one round of the min-cost query distribution (paper §5.1). A pure function
//!   of the queue, the instances' states and the clock, meant to be called by a live routing stage.
//!   [`batching`] grows a dispatched query into a batch of queued ones for its instance.
//! - [`planner`]: the budget-constrained pool planner (paper §5.2): enumeration, the throughput
//!   upper bound (Eqs. 9–15), ranking, the similarity pick among the top 10, Kairos+ search, and
//!   the chosen pool as an `executors:` YAML fragment ([`planner::plan_report`] is `weir plan`).
//! - [`simulator`]: a seeded discrete-event simulator of a pool driven by latency tables, with
//!   Kairos and the paper's baselines, measuring allowable throughput (p99 within QoS).
//!
//! The data they share lives in [`profile`] (latency tables, prices, QoS, the paper's built-in
//! models and the upper bound's inputs), [`workload`] (batch-size distributions, arrivals, the
//! monitoring window) and [`predictor`] (latency learned online).
//!
//! Nothing here starts threads, touches timely or performs I/O beyond parsing text it is given.

pub mod batching;
pub mod distribution;
pub mod planner;
pub mod predictor;
pub mod profile;
pub mod simulator;
pub mod workload;

/// Errors from building profiles, planning and simulating.
#[derive(Debug, thiserror::Error)]
pub enum KairosError {
    /// A profile file could not be parsed.
    #[error("profile file: {0}")]
    ProfileSyntax(String),
    /// A profile is well-formed but unusable (named field and reason in the message).
    #[error("invalid profile: {0}")]
    InvalidProfile(String),
    /// A planning input is out of range.
    #[error("invalid planning input: {0}")]
    InvalidInput(String),
    /// No configuration within the budget contains a base instance.
    #[error("no configuration within ${budget_per_hour}/h holds a base instance ({base})")]
    NothingAffordable {
        /// The budget that was given.
        budget_per_hour: f64,
        /// The base instance type's name.
        base: String,
    },
}
