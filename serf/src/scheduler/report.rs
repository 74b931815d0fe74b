//! What the scheduler tells its caller: the switches it decides ([`Switch`], with its
//! [`SwitchReason`]), the re-evaluations that re-ranked the configurations ([`Reprofile`]), each
//! configuration's standing at the planned load ([`Standing`], what `/metrics` and the logs show of
//! why a node runs what it runs), and the online re-profiling's counters.

use crate::baseline::Predictor;
use crate::config::Config;
use crate::model::Estimate;
use crate::table::Candidates;
use serde::Serialize;
use std::time::Duration;

/// A decided configuration change, for the executor to apply and for logs/metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Switch {
    /// When it was decided.
    pub at: Duration,
    /// Previous configuration.
    pub from: Config,
    /// New configuration.
    pub to: Config,
    /// Estimated arrival rate `λ̂` at the decision.
    pub lambda: f64,
    /// The load the decision planned for, `λ̂ + load_margin_sigmas·σ`.
    pub planned_lambda: f64,
    /// Why.
    pub reason: SwitchReason,
}

/// Why a switch happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SwitchReason {
    /// The new configuration is predicted faster, and stayed the choice for `hold_periods` updates.
    Better,
    /// The current configuration could not keep up with `λ̂` (immediate).
    Overload,
    /// Arrivals since the last update surged beyond the current configuration's utilisation cap (immediate,
    /// between two updates).
    Surge,
    /// A trial of a configuration without fresh measurements (online re-profiling).
    Explore,
    /// The decision at the end of a trial, with what it measured (immediate).
    Explored,
    /// The queue grew for [`BacklogGuard::periods`](super::BacklogGuard::periods) periods although the model said the configuration
    /// keeps up: it is barred near this load, and the switch is to the one with the most capacity
    /// (immediate).
    Backlog,
}

/// A re-evaluation with measured rates that changed the configurations' ranking at the planned load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reprofile {
    /// When.
    pub at: Duration,
    /// The planned load the ranking is at.
    pub planned_lambda: f64,
    /// The estimated arrival rate whose measured service times the new rates are (load bands).
    pub lambda: f64,
    /// Configurations from fastest to slowest predicted (unstable ones last) before.
    pub before: Vec<Config>,
    /// The same after.
    pub after: Vec<Config>,
    /// Tuples whose measured rate is in use.
    pub measured_tuples: usize,
    /// Configurations whose every tuple was measured near `lambda` (load bands).
    pub evidenced: Vec<Config>,
    /// The choice the new rates alone made, adopted only if the next scheduled re-evaluation confirms it
    /// ([`Decider::reevaluate`](super::Decider::reevaluate)).
    pub unconfirmed: Option<Config>,
    /// What the decision now weighs, in `after`'s order: each configuration's prediction under the new
    /// rates at the planned load, its utilisation there and its cap (so a log says why, not only what).
    pub standings: Vec<Standing>,
}

/// One configuration as a re-evaluation judges it at the planned load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Standing {
    /// The configuration.
    pub config: Config,
    /// Predicted mean waiting and service, seconds (`None`: unstable at the load).
    pub estimate: Option<Estimate>,
    /// Predicted utilisation, the planned load over the configuration's capacity.
    pub utilisation: f64,
    /// Its utilisation cap there (*Earned headroom*; another configuration than the
    /// running one enters only up to `1 − utilisation_band` of it).
    pub cap: f64,
    /// Its calls' slowdown over the profile measured near the load, where measured ([`Evidence`](super::Evidence)).
    pub slowdown: Option<f64>,
    /// Its capacity at the slowest level its calls ran at lately, where it has one
    /// ([`Evidence::slow_capacity`](super::Evidence::slow_capacity)).
    pub slow_capacity: Option<f64>,
}

impl std::fmt::Display for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ", self.config)?;
        match self.estimate {
            Some(e) => write!(
                f,
                "{:.3} ms (service {:.3} + wait {:.3})",
                e.latency * 1e3,
                e.service * 1e3,
                e.waiting * 1e3
            )?,
            None => write!(f, "unstable")?,
        }
        write!(f, ", ρ {:.2} / cap {:.2}", self.utilisation, self.cap)?;
        match self.slowdown {
            Some(s) => write!(f, ", measured ×{s:.2} the profile")?,
            None => write!(f, ", not measured here")?,
        }
        match self.slow_capacity {
            Some(c) => write!(f, ", {c:.0}/s at its slowest"),
            None => Ok(()),
        }
    }
}

/// Counters of the online re-profiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OnlineCounters {
    /// Re-evaluations of the configurations with blended rates.
    pub reevaluations: u64,
    /// Re-evaluations that changed the ranking.
    pub ranking_changes: u64,
    /// Explorations started.
    pub explorations: u64,
    /// Service times recorded.
    pub samples: u64,
    /// Switches made by the backlog guard.
    pub backlogs: u64,
    /// Service times left out because their call began within `settle_after_switch` of a switch or
    /// ran across one ([`crate::online`], *Settling after a switch*).
    pub settling: u64,
}

/// The configurations ordered by predicted latency at `lambda`, fastest first; unstable ones last, in
/// [`Config`] order.
pub fn ranking(candidates: &Candidates, lambda: f64, predictor: Predictor) -> Vec<Config> {
    let mut stable: Vec<(Config, f64)> = Vec::new();
    let mut unstable = Vec::new();
    for (config, est) in candidates.evaluate(lambda, predictor) {
        match est {
            Ok(e) => stable.push((config, e.latency)),
            Err(_) => unstable.push(config),
        }
    }
    stable.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    stable.into_iter().map(|(c, _)| c).chain(unstable).collect()
}
