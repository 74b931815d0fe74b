//! Exploration and trials ([`ExploreOptions`], on by default, bounded): how configurations the
//! offline profile may misjudge get measured at the load.
//!
//! - **Exploration.** A configuration whose tuples were never measured near the planned load (or
//!   not for `stale_after`, 300 s) is known only from the offline profile, and a profile that ranks
//!   it badly would never be corrected. So, only while service times are fed, with no switch
//!   pending and the last `steady_periods` (3) estimates agreeing within `steady_tolerance`, the
//!   scheduler runs the best-predicted such configuration until all its tuples are measured (at
//!   most `max_periods` updates, 3), then re-evaluates with what it measured and decides at once
//!   ([`SwitchReason::Explore`], [`SwitchReason::Explored`]). Bounds: only configurations predicted
//!   within the cap they could earn at the planned load (and `ExploreOptions::max_utilisation`), at
//!   most one exploration per `interval` (20 s), each configuration at most once per `stale_after`
//!   in each load band — a trial at moderate load says nothing of low load, where the same
//!   configuration may pay
//!   ([`OnlineProfile::is_fresh_near`](crate::online::OnlineProfile::is_fresh_near)); an
//!   exploration whose configuration turns out overloaded ends at once.
//! - **Retry** (`retry_after`, 60 s). A configuration the offline profile predicts faster than the
//!   running one at the planned load — so that not running it means the measurements contradict the
//!   profile — is tried again after `retry_after` rather than `stale_after`, doubling with each
//!   trial in a row that did not keep it, up to `stale_after`: a two-thread call can be slow for
//!   tens of seconds and fast after, so a trial that caught it slow says little about a minute
//!   later. A configuration the profile ranks below the running one keeps `stale_after`, so retries
//!   are spent only where the profile sees a gain.
//! - **Over the cap.** While the running configuration is beyond its cap and none is within its
//!   own, the decider keeps the one with the most capacity, judging an unmeasured one with the
//!   running one's slowdown — the profile's order. Then a configuration never measured near the
//!   planned load with at least the running one's capacity, less the cap's dead band, is explored
//!   whatever its predicted utilisation: the running one is where the model is least trustworthy,
//!   and a near tie of capacities in a profile of a few dozen calls says nothing of which one keeps
//!   up.
//! - **Trials.** A [`SwitchReason::Better`] move to a configuration with no measurement near the
//!   planned load rests on the offline profile alone; it runs as an exploration does: decided again
//!   ([`SwitchReason::Explored`]) at the first update at which its tuples are measured near this
//!   load (at most `max_periods` updates), instead of standing until the next scheduled
//!   re-evaluation. Calls under serving can run a third slower than profiled, and such a move left
//!   standing for a re-evaluation interval queues meanwhile. An exploration's end is judged near
//!   the load too.
//!
//! [`SwitchReason::Better`]: crate::scheduler::SwitchReason::Better
//! [`SwitchReason::Explore`]: crate::scheduler::SwitchReason::Explore
//! [`SwitchReason::Explored`]: crate::scheduler::SwitchReason::Explored

use super::Scheduler;
use crate::config::Config;
use crate::online::ExploreOptions;
use std::time::Duration;

/// A trial of a configuration (module docs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Exploration {
    /// The update count at which it ends.
    pub(super) until_update: u64,
}

impl Scheduler {
    /// The configuration to explore now, if any (*Exploration*, *Over the cap*).
    pub(super) fn explore_target(&self, now: Duration, planned_lambda: f64) -> Option<Config> {
        let online = self.online.as_ref()?;
        let ex: ExploreOptions = online.options().explore?;
        if self.counters.samples == 0 || !self.decider.is_settled() {
            return None;
        }
        if self
            .last_exploration
            .is_some_and(|t| now.saturating_sub(t) < ex.interval)
        {
            return None;
        }
        if self.recent.len() < ex.steady_periods as usize {
            return None;
        }
        let lo = self.recent.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.recent.iter().copied().fold(0.0, f64::max);
        if !(lo > 0.0 && hi / lo - 1.0 <= ex.steady_tolerance) {
            return None;
        }
        let predictor = self.decider.options.predictor;
        let current = self.decider.current();
        let band = self.load_band(planned_lambda);
        let offline = online.offline_candidates();
        let offline_latency = |c: Config| {
            offline
                .get(c)?
                .estimate(planned_lambda, predictor)
                .ok()
                .map(|e| e.latency)
        };
        let running = offline_latency(current);
        // While the running configuration is beyond its cap, nothing is within its own (or the
        // decider would have moved), and the decider keeps the one with the most capacity: one
        // with about as much, never measured here, is worth a trial whatever its predicted
        // utilisation (*Exploration*).
        let over_cap = self.decider.beyond_max_utilisation(current, planned_lambda);
        let running_capacity = self
            .decider
            .candidates()
            .get(current)
            .map_or(f64::INFINITY, |c| c.capacity());
        let entry_share = self.decider.entry_share();
        let trials = |c: Config| self.explored.get(&(c, band)).map_or(0, |e| e.1);
        // How long a configuration's measurement here stands before it is tried again: shorter where
        // it contradicts the profile, doubling with each trial that did not keep it (
        // *Exploration*).
        let horizon = |c: Config| match (offline_latency(c), running) {
            (Some(l), Some(r)) if l < r => {
                let doublings = trials(c).saturating_sub(1).min(16);
                ex.retry_after
                    .saturating_mul(1 << doublings)
                    .min(ex.stale_after)
            }
            _ => ex.stale_after,
        };
        self.decider
            .candidates()
            .as_slice()
            .iter()
            .filter(|c| c.config != current && !self.is_barred(c.config, band, now))
            .filter(|c| {
                let horizon = horizon(c.config);
                !online.is_fresh_near(c.config, planned_lambda, now, horizon)
                    && self
                        .explored
                        .get(&(c.config, band))
                        .is_none_or(|&(t, _)| now.saturating_sub(t) >= horizon)
            })
            // Never beyond the choice's own cap: a configuration it could not pick is not worth a trial.
            // (The cap, not the stricter entry cap of its dead band: a trial is a measurement, and one
            // within the band may measure faster than profiled and then qualify.) Unless the running
            // one is beyond its own too: then the choice is by capacity, and a rival for it may be
            // tried.
            .filter(|c| {
                planned_lambda / c.capacity()
                    <= ex
                        .max_utilisation
                        .min(self.decider.earnable_cap(c.config, planned_lambda))
                    || (over_cap && c.capacity() >= running_capacity * entry_share)
            })
            .filter_map(|c| {
                c.estimate(planned_lambda, predictor)
                    .ok()
                    .map(|e| (c.config, e.latency))
            })
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(c, _)| c)
    }

    /// A move on the model's word to `to`, which has not been measured near `planned_lambda`, runs
    /// as a trial: like an exploration, it is decided again at the first update at which its
    /// tuples are measured near this load (at most [`ExploreOptions::max_periods`] updates), not
    /// held until the next scheduled re-evaluation (*Trials*).
    pub(super) fn try_unmeasured(&mut self, to: Config, now: Duration, planned_lambda: f64) {
        let Some(online) = self.online.as_ref() else {
            return;
        };
        let Some(ex) = online.options().explore else {
            return;
        };
        if online.is_fresh_near(to, planned_lambda, now, ex.stale_after) {
            return;
        }
        self.start_trial(ex.max_periods);
    }

    /// Starts an exploration or a trial that ends at most `periods` updates from now.
    pub(super) fn start_trial(&mut self, periods: u32) {
        self.exploring = Some(Exploration {
            until_update: self.updates + u64::from(periods),
        });
    }

    /// Forgets the trials in a row `config` had without being kept, in every load band: it is running
    /// now, so a later contradiction of the profile starts again at `retry_after`.
    pub(super) fn reset_trials(&mut self, config: Config) {
        for ((c, _), (_, trials)) in self.explored.iter_mut() {
            if *c == config {
                *trials = 0;
            }
        }
    }
}
