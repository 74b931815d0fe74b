//! Online re-profiling in the loop ([`OnlineOptions`](crate::online::OnlineOptions), on by
//! default): the rates the decider decides on follow the calls the node serves.
//!
//! The caller hands over each served call's service time ([`Scheduler::record_service`]); they are
//! blended into the profile by [`OnlineProfile`](crate::online::OnlineProfile), except those of
//! calls that began within `settle_after_switch` (0.25 s) of a switch, which time the switch's own
//! transient ([`crate::online`], *Settling after a switch*). Every `reevaluate_periods` (5) updates
//! the decider's rates are replaced by the blended ones — not at every update: the blended rates
//! move slowly, and a decision that re-ranked on every sample would chase noise. With load bands
//! the rates are those measured near the current `λ̂` (*Rates by load*, [`super::tagging`]), and a
//! re-evaluation also comes at once when `λ̂` moves by more than one band, and at the first update.
//! The hysteresis then applies to the new ranking as to any other, with one more rule for a choice
//! only the new rates made (*Unconfirmed choices*,
//! [`Decider::reevaluate`](crate::scheduler::Decider::reevaluate)). A re-evaluation that changes
//! the ranking at the planned load is reported ([`Scheduler::take_reprofiles`]) for the caller to
//! log, with every configuration's standing.

use super::Scheduler;
use crate::config::Config;
use crate::scheduler::{ranking, Evidence, Reprofile};
use std::time::Duration;

impl Scheduler {
    /// Hands the blended rates for arrival rate `lambda` to the decider and reports a ranking change;
    /// `periodic`: the scheduled re-evaluation every `reevaluate_periods`, with the load in the same band
    /// as at the last one ([`Decider::reevaluate`](crate::scheduler::Decider::reevaluate)).
    pub(super) fn reevaluate(
        &mut self,
        now: Duration,
        lambda: f64,
        planned_lambda: f64,
        periodic: bool,
    ) {
        let Some(online) = &self.online else { return };
        let candidates = online.candidates_at(lambda, now);
        let slow_capacity = self.slow_states.as_ref().map(|states| {
            candidates
                .as_slice()
                .iter()
                .filter_map(|c| Some((c.config, states.capacity(c.config, now)?)))
                .collect()
        });
        let evidence = Evidence {
            slowdown: online.slowdowns_at(lambda, now),
            slow_capacity,
        };
        let evidenced: Vec<Config> = evidence.slowdown.keys().copied().collect();
        let predictor = self.decider.options.predictor;
        let before = ranking(self.decider.candidates(), planned_lambda, predictor);
        let after = ranking(&candidates, planned_lambda, predictor);
        let measured_tuples = online.measured_tuples();
        if self
            .decider
            .reevaluate(candidates, evidence, planned_lambda, periodic)
            .is_err()
        {
            return;
        }
        self.reevaluated_at = Some(lambda);
        self.counters.reevaluations += 1;
        if before != after {
            self.counters.ranking_changes += 1;
            let standings = self
                .decider
                .standings(after.iter().copied(), planned_lambda);
            self.reprofiles.push(Reprofile {
                at: now,
                planned_lambda,
                lambda,
                before,
                after,
                measured_tuples,
                evidenced,
                unconfirmed: self.decider.unconfirmed(),
                standings,
            });
        }
    }

    /// Whether the load moved by more than one load band since the last re-evaluation (then the rates in
    /// use were measured at another load and are re-evaluated at once).
    pub(super) fn load_moved(&self, lambda: f64) -> bool {
        let Some(bands) = self.online.as_ref().and_then(|o| o.options().load_bands) else {
            return false;
        };
        self.reevaluated_at
            .is_some_and(|at| lambda > at * bands.ratio || lambda * bands.ratio < at)
    }

    /// The load band of `lambda` when online re-profiling keeps rates by load.
    pub(super) fn load_band(&self, lambda: f64) -> Option<i64> {
        self.online
            .as_ref()
            .and_then(|o| o.options().load_bands)
            .and_then(|b| b.band(lambda))
    }
}
