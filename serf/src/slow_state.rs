//! The slowest state each tuple's calls have been seen in lately, so that the scheduler can ask of a
//! configuration not only "does it keep up as its calls run now" but "would it keep up in the
//! slowest state it has shown" (weir's, not the paper's; [`crate::scheduler`], *Slow states*).
//!
//! Why: on a machine whose cores the configuration fills, a two-thread ONNX Runtime call can run at
//! one of two levels (for shufflenet about 3 or 6 ms) for tens of seconds at a time, and the serving
//! process's own queue pushes it into the slow one. The blended estimates of
//! [`crate::online`] follow the level the configuration is in *now*; a configuration measured in
//! its fast level at a load its slow level cannot carry looks safe until it collapses. So each
//! tuple's calls are averaged over consecutive spans (`span`, 2 s, aligned on the clock; a span with
//! fewer than `min_calls` calls is not a level), and the slowest span mean of the last
//! `remember_for` (300 s, the exploration's `stale_after`) is the tuple's slow level. A span is long
//! against one slow call or a switch's transient (already left out, `settle_after_switch`) and short
//! against the tens of seconds a slow state lasts. The span being filled counts as soon as it has
//! `min_calls` calls (a tenth of a second at 200 requests/s): a tuple that has just started to run
//! has a level at once rather than a span or two later, and a slow spell counts while it lasts (were
//! only closed spans to count, the last span of a stint would wait for the tuple's next call).
//!
//! The times are the calls' own, idle starts included: a lone tuple's calls after long idle gaps
//! are slower than back to back ([`crate::idle`]), so at very low load a level reads somewhat slow.
//! That errs towards less headroom, the safe side for what the level is used for.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;

/// How the slow levels are measured ([`SlowStates`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SlowStateOptions {
    /// The span a level is averaged over (2 s).
    pub span: Duration,
    /// Calls a span needs to count as a level (20).
    pub min_calls: u64,
    /// How long a level is remembered (300 s).
    pub remember_for: Duration,
}

impl Default for SlowStateOptions {
    fn default() -> Self {
        Self {
            span: Duration::from_secs(2),
            min_calls: 20,
            remember_for: Duration::from_secs(300),
        }
    }
}

/// The calls of one tuple in the span being filled, and the levels of the spans closed lately.
#[derive(Debug, Clone, Default)]
struct TupleLevels {
    /// Index of the open span (`now / span`), the sum of its calls' seconds and their count.
    open: Option<(u64, f64, u64)>,
    /// Closed spans with enough calls: when each ended and its mean call, seconds; oldest first.
    levels: VecDeque<(Duration, f64)>,
}

/// Per tuple, the slowest level its calls ran at lately (module docs).
#[derive(Debug, Clone)]
pub struct SlowStates {
    options: SlowStateOptions,
    tuples: BTreeMap<Config, TupleLevels>,
}

impl SlowStates {
    /// An empty record. A zero `span` is taken as one millisecond, a zero `min_calls` as one.
    pub fn new(options: SlowStateOptions) -> Self {
        let span = options.span.max(Duration::from_millis(1));
        let min_calls = options.min_calls.max(1);
        Self {
            options: SlowStateOptions {
                span,
                min_calls,
                ..options
            },
            tuples: BTreeMap::new(),
        }
    }

    /// Records one call of `tuple` that ended at `now` and took `seconds` (the caller has checked it is
    /// finite and positive). Calls must come in time order per tuple; one older than the open span is
    /// counted in it.
    pub fn record(&mut self, now: Duration, tuple: Config, seconds: f64) {
        let span = self.options.span;
        let index = (now.as_nanos() / span.as_nanos()) as u64;
        let min_calls = self.options.min_calls;
        let levels = self.tuples.entry(tuple).or_default();
        match &mut levels.open {
            Some((open, sum, count)) if *open >= index => {
                *sum += seconds;
                *count += 1;
            }
            open => {
                if let Some((closed, sum, count)) = open.take() {
                    if count >= min_calls {
                        let ended = span.saturating_mul((closed + 1) as u32);
                        levels.levels.push_back((ended, sum / count as f64));
                    }
                }
                *open = Some((index, seconds, 1));
            }
        }
        let remember_for = self.options.remember_for;
        while levels
            .levels
            .front()
            .is_some_and(|&(ended, _)| now.saturating_sub(ended) > remember_for)
        {
            levels.levels.pop_front();
        }
    }

    /// The slowest level of `tuple`'s calls at `now`: the largest span mean (seconds a call) among the
    /// spans that ended in the last `remember_for`, the open one included once it has `min_calls`
    /// calls; `None` when there is none.
    pub fn slowest(&self, tuple: Config, now: Duration) -> Option<f64> {
        let span = self.options.span;
        let remember_for = self.options.remember_for;
        let levels = self.tuples.get(&tuple)?;
        let open = levels
            .open
            .filter(|&(_, _, count)| count >= self.options.min_calls)
            .map(|(index, sum, count)| {
                let ends = span.saturating_mul((index + 1) as u32);
                (ends, sum / count as f64)
            });
        levels
            .levels
            .iter()
            .copied()
            .chain(open)
            .filter(|&(ended, _)| now.saturating_sub(ended) <= remember_for)
            .map(|(_, mean)| mean)
            .reduce(f64::max)
    }

    /// The capacity (requests/s) `config` would have at `now` if it ran at its slowest level:
    /// `c / slowest` of its full tuple `(c, C_inter, t)`; `None` when that tuple has no level.
    pub fn capacity(&self, config: Config, now: Duration) -> Option<f64> {
        let slowest = self.slowest(config, now)?;
        (slowest > 0.0).then(|| config.concurrency as f64 / slowest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn serve(states: &mut SlowStates, tuple: Config, from: f64, to: f64, rate: f64, ms: f64) {
        let calls = ((to - from) * rate).round() as usize;
        for k in 0..calls {
            states.record(secs(from + k as f64 / rate), tuple, ms / 1e3);
        }
    }

    /// `tuple`'s slowest level at `at` seconds is `level` seconds.
    fn assert_slowest(states: &SlowStates, tuple: Config, at: f64, level: f64) {
        let slowest = states.slowest(tuple, secs(at)).expect("a level");
        assert!((slowest - level).abs() < 1e-9, "{slowest} at {at} s");
    }

    #[test]
    fn the_slowest_span_is_the_level_and_it_is_forgotten_after_remember_for() {
        let one = Config::new(1, 2);
        let mut states = SlowStates::new(SlowStateOptions::default());
        serve(&mut states, one, 0.0, 10.0, 70.0, 3.0);
        serve(&mut states, one, 10.0, 14.0, 70.0, 6.0);
        serve(&mut states, one, 14.0, 30.0, 70.0, 3.0);
        assert_slowest(&states, one, 30.0, 6e-3);
        let capacity = states.capacity(one, secs(30.0)).expect("a level");
        assert!((capacity - 1.0 / 6e-3).abs() < 1e-6, "{capacity}");
        // Three hundred seconds after the slow spans closed, only fast ones are left.
        serve(&mut states, one, 300.0, 316.0, 70.0, 3.0);
        assert_slowest(&states, one, 316.0, 3e-3);
    }

    #[test]
    fn the_span_being_filled_is_a_level_once_it_has_enough_calls() {
        let one = Config::new(1, 2);
        let mut states = SlowStates::new(SlowStateOptions::default());
        // Nineteen calls into a tuple's first span: no level yet.
        serve(&mut states, one, 0.0, 0.095, 200.0, 3.0);
        assert_eq!(states.slowest(one, secs(0.1)), None);
        // The twentieth makes one, before the span closes.
        serve(&mut states, one, 0.095, 0.1, 200.0, 3.0);
        assert_slowest(&states, one, 0.1, 3e-3);
        // A slow spell counts while it lasts: the open span's mean is the slowest so far.
        serve(&mut states, one, 0.1, 2.0, 200.0, 3.0);
        serve(&mut states, one, 2.0, 2.5, 200.0, 6.0);
        assert_slowest(&states, one, 2.5, 6e-3);
    }

    #[test]
    fn a_span_with_too_few_calls_is_no_level_and_tuples_are_kept_apart() {
        let one = Config::new(1, 2);
        let two = Config::new(2, 1);
        let mut states = SlowStates::new(SlowStateOptions::default());
        // A handful of very slow calls (a burst of outside load) in an otherwise quiet span.
        serve(&mut states, one, 0.0, 2.0, 5.0, 20.0);
        serve(&mut states, one, 2.0, 8.0, 70.0, 3.0);
        assert_slowest(&states, one, 8.0, 3e-3);
        assert_eq!(states.slowest(two, secs(8.0)), None);
        // The full tuple of `(2, 1)` is two running at once: its level gives twice the rate.
        serve(&mut states, two, 0.0, 8.0, 70.0, 5.0);
        let capacity = states.capacity(two, secs(8.0)).expect("a level");
        assert!((capacity - 400.0).abs() < 1e-6, "{capacity}");
    }
}
