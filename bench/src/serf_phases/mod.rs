//! SERF under changing load on real ONNX Runtime (SERF, Fig. 13): one model node serves the same
//! piecewise-Poisson arrivals, moderate → low → moderate, once with `parallelism: auto` (the live
//! scheduler) and once per fixed configuration `(c, t)` of its profile, and the mean latency per
//! phase and over the run is compared.
//!
//! Decisions:
//! - The rates come from a *planning profile* taken once before the first run, with ten times the
//!   runs' requests per tuple in nine interleaved rounds (each tuple its median round): *moderate*
//!   and *low* are fractions (`--phases` defaults: 0.55 and 0.2) of the *largest* capacity `c·μ_c`
//!   among the configurations, or given rates, and every run serves the same rates and the same
//!   fixed set-ups. A profile of the runs' size moves its largest capacity by tens of per cent
//!   from one to the next, which would change what each run compares. Each run still profiles
//!   afresh with the runs' sample count, and SERF starts from that run's own profile, as a
//!   deployed `auto` node would.
//! - The scenario needs a moderate load at which another configuration is best than at low load
//!   (SERF, Fig. 13); on 2 cores that is a load near the intra-request configuration's capacity,
//!   where the inter-request one's extra slots pay off. The model must have that trade-off at all,
//!   and the default is the zoo's shufflenet for it: its 2-thread call is well under twice as fast
//!   as its 1-thread call, so `(2, 1)` has more capacity than `(1, 2)` while `(1, 2)` serves a
//!   lone request faster. A model whose configurations' capacities tie measures the machine's
//!   noise, not the adaptation.
//! - A fixed configuration whose profiled utilisation at moderate load is
//!   [`UNSTABLE_UTILISATION`] or more is not run (its queue would only grow to the limit) and is
//!   listed as skipped. Fractions of the largest capacity, not the smallest, leave the
//!   narrower configurations unstable at moderate load: were every one stable, one would be best
//!   at both loads and SERF could at most tie with it.
//! - Every set-up runs with the same `executor.spinning` (default on) and the profile is measured
//!   with it: without spinning, a 2-thread call after an idle gap wakes the sleeping intra-op
//!   thread at each parallel section and takes about as long as a 1-thread call, which no
//!   back-to-back profile sees.
//! - The same arrival times (one seed) drive every set-up, one set-up after the other, each on a
//!   fresh graph warmed up with a few closed-loop requests. A noisy machine drifts between
//!   set-ups, which is why [`PhasesConfig::runs`] repeats the whole comparison and the report
//!   quotes medians; and the order rotates from run to run (SERF first in run 1, second in run 2,
//!   …), so that no set-up always runs right after the profile or always last.
//! - Before the first measured set-up of each run, the first [`PhasesConfig::burn_in_seconds`]
//!   (default 20 s) of the arrivals are served on a throwaway graph of the largest-capacity
//!   configuration and discarded: whichever set-up runs first after the profile otherwise
//!   measures slower than the same configuration later in the run (what a process's first graph
//!   pays: the allocator's and ONNX Runtime's first growth).
//! - A request that fails (a fixed configuration beyond its capacity fills its executor's bounded
//!   queue and sheds load) is counted by its send time and left out of the means; a fixed
//!   configuration that failed any request in a scope is not a candidate for that scope's best,
//!   since it did not serve the load, and one overloaded set-up does not cost the run's others.
//! - Whether SERF's margin is resolved is judged over runs, not within one: the summary gives,
//!   beside each pooled ratio, a 95 % interval from resampling the runs ([`ratio_interval`]). The
//!   run is the unit because what decides a few per cent is the machine's state while a set-up
//!   serves (a host's intra-op speed can switch between states for tens of seconds at a time),
//!   which every request of one set-up shares.
//! - Latency is weir's (scheduled send → answer). Per-phase means cover the whole phase, including
//!   SERF's reaction time (the estimator's window plus the hysteresis); a second column leaves out
//!   the first `settle` seconds of each phase: the latency after the estimator has converged.
//! - SERF runs with the scheduler's defaults (5 s window, 1 s period, hold 2 periods, online
//!   re-profiling with exploration and load bands), exactly what a graph with `parallelism: auto`
//!   gets. It starts from the profile of that run (printed with the results) and corrects it with
//!   the service times it measures while serving; the report shows, per tuple, the offline and the
//!   measured times, overall and per load band.
//! - `--control-threads T` adds a control set-up ([`Setup::SerfThreads`]): `parallelism: auto`
//!   over the profile cut to the configurations with `T` threads per request. Where SERF settles
//!   in one configuration yet measures slower than that fixed configuration served minutes apart,
//!   the control beside the fixed one tells the `auto` machinery's own cost (switchable executor
//!   path, control loop, online re-profiling) from the drift between set-ups. It is reported
//!   against the fixed configurations of its thread count only, and is never SERF's "best fixed".
//! - `--also-max-utilisation U` adds SERF under `parallelism: {auto: {max_utilisation: U}}`
//!   ([`Setup::SerfCapped`]) to every run, so two caps are judged on the same minutes of the
//!   machine rather than in runs hours apart; it is pooled against every fixed configuration in a
//!   table of its own.
//!
//! The modules: `plan` what every run serves, `run` serving it, `runs` what was recorded,
//! `pooled` the ratios over runs, `table` and `plot` the report; what the machine did
//! during a set-up is [`crate::conditions`]'s. What the comparison measured on real hosts is in
//! `benchmarks/serf/README.md`.

mod plan;
mod plot;
mod pooled;
mod run;
mod runs;
mod table;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use weir::profile::ProfileOptions;
use weir_serf::config::Config;

pub use plan::{run_order, schedule};
pub use plot::plot_phases;
pub use pooled::{ratio_interval, ratio_over_all_runs, Compared, BOOTSTRAP_DRAWS};
pub use run::serf_phases;
pub use runs::{write_call_trace, PhasesRun, SetupRun, TracedCall};
pub use table::phases_table;

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct PhasesConfig {
    /// Display name and model file.
    pub model: (String, PathBuf),
    /// Length of each of the three phases, seconds.
    pub phase_seconds: f64,
    /// Moderate load as a fraction of the largest capacity among the configurations.
    pub moderate: f64,
    /// Low load, same unit.
    pub low: f64,
    /// Moderate and low load in requests per second, used instead of the fractions when given,
    /// so that batches taken on different days serve the same arrivals and pool.
    pub rates: Option<(f64, f64)>,
    /// The fixed configurations to run (empty: every one stable at moderate load). A listed
    /// configuration that is unstable at moderate load is still skipped.
    pub fixed: Vec<Config>,
    /// Seconds at the start of a phase left out of the "settled" means.
    pub settle_seconds: f64,
    /// Seconds of the first phase's arrivals served, and discarded, on a throwaway graph before
    /// the first measured set-up of each run (0: none); see the module docs.
    pub burn_in_seconds: f64,
    /// Width of the plot's time bins, seconds.
    pub bin_seconds: f64,
    /// Whole comparisons to run (each with a fresh profile and fresh arrivals).
    pub runs: usize,
    /// Seed of the first run's arrivals (run `r` uses `seed + r`).
    pub seed: u64,
    /// How the model is profiled; its `spinning` is every set-up's `executor.spinning` too.
    pub profile: ProfileOptions,
    /// Also run the control set-up [`Setup::SerfThreads`] with this many threads per request
    /// (`None`: not run).
    pub control_threads: Option<usize>,
    /// Also run SERF with this utilisation cap, [`Setup::SerfCapped`] (`None`: not run).
    pub also_cap: Option<f64>,
    /// Write every call of every set-up's model node to a CSV file in this folder (`None`: not
    /// kept; [`write_call_trace`]).
    pub calls_dir: Option<PathBuf>,
}

/// The served graph's one model node.
const NODE: &str = "model";

/// Utilisation at moderate load from which a fixed configuration is not run.
pub const UNSTABLE_UTILISATION: f64 = 0.95;

/// A set-up: SERF, or one fixed configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// `parallelism: auto`.
    Serf,
    /// `parallelism: {concurrency, threads}`.
    Fixed(Config),
    /// The control: `parallelism: auto` over the profile cut to the configurations with this
    /// many intra-op threads ([`PhasesConfig::control_threads`]). With one thread per request on
    /// 2 cores that is `(1, 1)` and `(2, 1)`, and at moderate load only `(2, 1)` is stable, so
    /// beside fixed `(2, 1)` it measures what the `auto` machinery itself costs there (the
    /// switchable executor's path, the control loop, online re-profiling) apart from what SERF
    /// decides. It has no 2-thread session, so a cost of an idle extra session is not in it.
    SerfThreads(usize),
    /// `parallelism: {auto: {max_utilisation: U}}`, `U` in thousandths
    /// ([`PhasesConfig::also_cap`]): SERF with another utilisation cap than the default, served in
    /// the same run as [`Setup::Serf`], so the two caps meet the same minutes of the machine.
    SerfCapped(u16),
}

/// A utilisation cap in thousandths, the unit [`Setup::SerfCapped`] keeps it in.
pub fn cap_permille(cap: f64) -> u16 {
    (cap.clamp(0.0, 1.0) * 1000.0).round() as u16
}

impl Setup {
    /// Whether the scheduler runs it (`parallelism: auto`).
    fn is_auto(self) -> bool {
        matches!(
            self,
            Setup::Serf | Setup::SerfThreads(_) | Setup::SerfCapped(_)
        )
    }
}

impl Setup {
    /// The set-up's name in file names: `serf`, `fixed-1x2`, `serf-t1`, `serf-cap-600`.
    pub fn slug(self) -> String {
        match self {
            Setup::Serf => "serf".into(),
            Setup::Fixed(c) => format!("fixed-{}x{}", c.concurrency, c.threads),
            Setup::SerfThreads(t) => format!("serf-t{t}"),
            Setup::SerfCapped(p) => format!("serf-cap-{p}"),
        }
    }
}

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setup::Serf => f.write_str("SERF auto"),
            Setup::Fixed(c) => write!(f, "fixed {c}"),
            Setup::SerfThreads(t) => write!(f, "SERF auto, t={t} only"),
            Setup::SerfCapped(p) => write!(f, "SERF auto, cap {:.3}", f64::from(*p) / 1000.0),
        }
    }
}
