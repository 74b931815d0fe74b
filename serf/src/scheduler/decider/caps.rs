//! The utilisation caps: how busy the model may predict a configuration to be at the planned load
//! for online evaluation to choose it (weir's rule, not the paper's). The choice is the fastest
//! configuration within its cap, and the one with the most capacity when none is; exploration tries
//! none beyond the cap it could earn (but *Over the cap*, `control/explore.rs`).
//!
//! Why a cap: the model's error grows with utilisation, because service times measured alone or at
//! low load understate what calls take when the process's other threads (dataflow, load, I/O)
//! compete for the same cores; and a wrong choice costs far more near saturation, where queueing is
//! convex in ρ, than at low load.
//!
//! - **Utilisation cap** (`unproven_utilisation`, 0.5). The cap of a configuration known only from
//!   the profile, measured only at other loads, or measured slow here. Why not higher: a
//!   configuration that gives one request every core can be bistable at ρ ≈ 0.6 — fast while no
//!   queue forms, then, once one does, preempted mid-call by every other thread of the process, its
//!   calls twice as long and its queue only growing — and a configuration fast when it keeps up but
//!   without margin loses more to a collapse than it gains.
//! - **Earned headroom** (`max_utilisation`, 0.6; `holding_slowdown`, 1.3). A configuration whose
//!   calls measured near the planned load (the [`Evidence`] of the last re-evaluation) took at most
//!   1.3 × their profiled time has shown it holds there, and has 0.6. Holding and collapsing differ
//!   in exactly that measurement: where such a configuration holds its calls stay close to the
//!   profile, and it can be the best configuration at ρ 0.5–0.6, which a uniform 0.5 cap would keep
//!   the node out of; where it collapses its calls take about twice the profile's time. A
//!   configuration may be explored up to the cap it could earn: a trial is how it shows it holds.
//!   The YAML's `max_utilisation: U` sets one cap for every configuration (`unproven_utilisation:
//!   None`).
//! - **Slow states** ([`crate::slow_state`]). Calls measured holding earn the higher cap only if
//!   the configuration would also stay stable at the slowest level its calls ran at lately (any
//!   load, the last 300 s, in 2 s spans): planned load below `c / slowest` of its full tuple.
//!   Otherwise it has the unproven cap, for the choice and for a trial ([`Decider::earnable_cap`]).
//!   Why: the holding test reads the level a configuration runs at *now*, and a two-thread call can
//!   sit at one of two levels (for shufflenet about 3 or 6 ms) for tens of seconds at a time; a
//!   configuration measured fast can still collapse at the next slow spell. A configuration with no
//!   slow level — its full tuple not served (20 calls in a span) lately — has not shown one either
//!   and has the unproven cap too: a trial of a second or two cannot show a level that lasts tens
//!   of seconds, so none is made above that cap; the level is learnt where the configuration runs
//!   within it (at low load) and stands for 300 s. The span being filled counts as a level once it
//!   has 20 calls, so the running configuration has one within a fraction of a second.
//! - **Dead band** (`utilisation_band`, 5 %). The current configuration keeps its cap; another one
//!   enters only up to `cap · (1 − utilisation_band)`. Without it the planned load's Poisson wobble
//!   (a few % over the 5 s window) moves a configuration near its cap across it every few seconds.
//!
//! [`Evidence`]: crate::scheduler::Evidence

use super::Decider;
use crate::config::Config;
use crate::scheduler::Standing;
use crate::table::Candidates;

impl Decider {
    /// The utilisation cap of `config` at `lambda`: `max_utilisation` when its calls measured near the
    /// load of the last re-evaluation took at most `holding_slowdown` times their profiled time
    /// ([`Evidence`](super::Evidence)) and its slowest level lately would carry `lambda`, otherwise
    /// `unproven_utilisation` where that is lower (*Earned headroom*, *Slow states*).
    fn cap_of(&self, config: Config, lambda: f64) -> f64 {
        let holds = self
            .evidence
            .slowdown
            .get(&config)
            .is_some_and(|&s| s <= self.options.holding_slowdown);
        if holds {
            self.earnable_cap(config, lambda)
        } else {
            self.unproven_cap()
        }
    }

    /// The cap of a configuration not shown to hold: `unproven_utilisation` where that is lower than
    /// `max_utilisation`.
    fn unproven_cap(&self) -> f64 {
        let cap = self.options.max_utilisation;
        self.options
            .unproven_utilisation
            .map_or(cap, |u| u.min(cap))
    }

    /// Whether `config` would stay stable at `lambda` at the slowest level its calls ran at lately:
    /// false when it has no level, true when slow levels are not tracked (*Slow states*).
    fn carries_in_slow_state(&self, config: Config, lambda: f64) -> bool {
        self.evidence.slow_capacity.as_ref().is_none_or(|levels| {
            levels
                .get(&config)
                .is_some_and(|&capacity| lambda < capacity)
        })
    }

    /// The highest cap `config` can earn at `lambda`: `max_utilisation`, or the unproven cap when its
    /// slowest level could not carry `lambda` (*Slow states*). A configuration shown to
    /// hold has it, and an exploration may go up to it: a trial cannot earn more, so it is spent
    /// where the choice could pick it.
    pub fn earnable_cap(&self, config: Config, lambda: f64) -> f64 {
        if self.carries_in_slow_state(config, lambda) {
            self.options.max_utilisation
        } else {
            self.unproven_cap()
        }
    }

    /// How each of `order`'s configurations stands under the rates in force at `lambda` ([`Standing`]).
    pub fn standings(&self, order: impl IntoIterator<Item = Config>, lambda: f64) -> Vec<Standing> {
        order
            .into_iter()
            .filter_map(|config| {
                let candidate = self.candidates.get(config)?;
                Some(Standing {
                    config,
                    estimate: candidate.estimate(lambda, self.options.predictor).ok(),
                    utilisation: lambda / candidate.capacity(),
                    cap: self.cap_of(config, lambda),
                    slowdown: self.evidence.slowdown.get(&config).copied(),
                    slow_capacity: self
                        .evidence
                        .slow_capacity
                        .as_ref()
                        .and_then(|levels| levels.get(&config).copied()),
                })
            })
            .collect()
    }

    /// The utilisation cap `config` must be within to be chosen: its own ([`Self::cap_of`]) when it is the
    /// current configuration, `utilisation_band` less for any other (*Dead band*).
    fn choice_cap(&self, config: Config, lambda: f64) -> f64 {
        let cap = self.cap_of(config, lambda);
        if config == self.current {
            cap
        } else {
            cap * self.entry_share()
        }
    }

    /// The share of a cap that another configuration than the running one enters within: one less the
    /// cap's dead band (`utilisation_band`, *Dead band*).
    pub(in crate::scheduler) fn entry_share(&self) -> f64 {
        1.0 - self.options.utilisation_band.clamp(0.0, 1.0)
    }

    /// The fastest of `candidates` at `lambda` within its utilisation cap ([`Self::choice_cap`]); `None`
    /// when none is.
    pub(super) fn best_within_cap(&self, candidates: &Candidates, lambda: f64) -> Option<Config> {
        candidates
            .best_within_caps(lambda, self.options.predictor, |c| {
                self.choice_cap(c, lambda)
            })
            .map(|(c, _)| c)
    }

    /// Whether `config` is predicted busier than its utilisation cap ([`Self::cap_of`]) at `lambda` under
    /// online evaluation (then a switch to the choice needs no minimum gain: the model is least
    /// trustworthy there).
    pub(in crate::scheduler) fn beyond_max_utilisation(&self, config: Config, lambda: f64) -> bool {
        let cap = self.cap_of(config, lambda);
        self.table.is_none()
            && cap < 1.0
            && self
                .candidates
                .get(config)
                .is_some_and(|c| lambda > cap * c.capacity())
    }
}
