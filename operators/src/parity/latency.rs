//! When a parity-coded node's prediction counts as late: the node's own recent latencies (dispatch
//! to real prediction, every replica together) in a bounded window, and the decode rule that
//! turns them into a deadline.
//!
//! The window holds the last [`WINDOW`] latencies; the quantile is recomputed every
//! [`REFRESH_EVERY`] samples, not per job, since sorting a thousand numbers per job would cost
//! more than the decoder. Late real predictions (those that lost to a reconstruction) are
//! recorded too when they come: leaving them out would lower the quantile after every
//! reconstruction and feed on itself. Until [`MIN_SAMPLES`] latencies are in, a quantile
//! rule waits [`WARMUP_DEADLINE`], so that a node's first jobs are not judged against noise.

use std::sync::Mutex;
use std::time::Duration;

use weir_engine::spec::DecodeAfter;

/// Latencies kept.
pub const WINDOW: usize = 1024;
/// Latencies needed before a quantile is trusted.
pub const MIN_SAMPLES: usize = 32;
/// Samples between two recomputations of the quantile.
pub const REFRESH_EVERY: usize = 32;
/// The deadline a quantile rule sets before [`MIN_SAMPLES`] latencies are in.
pub const WARMUP_DEADLINE: Duration = Duration::from_secs(1);

/// The decode rule and the latencies it reads.
#[derive(Debug)]
pub struct Lateness {
    rule: DecodeAfter,
    floor: Duration,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// Microseconds, a ring of up to [`WINDOW`].
    samples: Vec<u32>,
    next: usize,
    since_refresh: usize,
    quantile: Option<Duration>,
}

impl Lateness {
    /// `rule`, with quantile deadlines never below `floor`.
    pub fn new(rule: DecodeAfter, floor: Duration) -> Self {
        Lateness {
            rule,
            floor,
            window: Mutex::new(Window::default()),
        }
    }

    /// The rule.
    pub fn rule(&self) -> DecodeAfter {
        self.rule
    }

    /// Records one real prediction's latency.
    pub fn record(&self, latency: Duration) {
        let DecodeAfter::Quantile(q) = self.rule else {
            return;
        };
        let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        if w.samples.len() < WINDOW {
            w.samples.push(micros);
        } else {
            let i = w.next;
            w.samples[i] = micros;
        }
        w.next = (w.next + 1) % WINDOW;
        w.since_refresh += 1;
        if w.samples.len() >= MIN_SAMPLES
            && (w.quantile.is_none() || w.since_refresh >= REFRESH_EVERY)
        {
            w.since_refresh = 0;
            w.quantile = Some(quantile(&w.samples, q));
        }
    }

    /// How long after its dispatch a prediction counts as unavailable; `None` under
    /// `first_available` (no time-out: it is unavailable once the group can decode without it).
    pub fn deadline(&self) -> Option<Duration> {
        match self.rule {
            DecodeAfter::FirstAvailable => None,
            DecodeAfter::Millis(ms) => Some(Duration::from_secs_f64(ms / 1000.0)),
            DecodeAfter::Quantile(_) => {
                let w = self.window.lock().unwrap_or_else(|p| p.into_inner());
                Some(w.quantile.unwrap_or(WARMUP_DEADLINE).max(self.floor))
            }
        }
    }
}

/// The `q`-th percentile of `samples` (nearest rank).
fn quantile(samples: &[u32], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    let micros = sorted
        .get(rank.clamp(1, sorted.len().max(1)) - 1)
        .copied()
        .unwrap_or(0);
    Duration::from_micros(u64::from(micros))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_quantile_of_the_recent_window_never_below_the_floor() {
        let l = Lateness::new(DecodeAfter::Quantile(99.0), Duration::from_millis(5));
        assert_eq!(l.deadline(), Some(WARMUP_DEADLINE), "too few samples");
        // 128 samples: the quantile was last recomputed at the 128th (every 32).
        for i in 1..=128u64 {
            l.record(Duration::from_millis(i));
        }
        assert_eq!(
            l.deadline(),
            Some(Duration::from_millis(127)),
            "nearest rank"
        );
        // The window forgets: a thousand fast predictions push the slow ones out.
        for _ in 0..WINDOW {
            l.record(Duration::from_micros(100));
        }
        assert_eq!(l.deadline(), Some(Duration::from_millis(5)), "the floor");
    }

    #[test]
    fn fixed_and_first_available_rules_ignore_latencies() {
        let fixed = Lateness::new(DecodeAfter::Millis(7.5), Duration::from_millis(20));
        fixed.record(Duration::from_secs(3));
        assert_eq!(fixed.deadline(), Some(Duration::from_micros(7500)));
        let first = Lateness::new(DecodeAfter::FirstAvailable, Duration::ZERO);
        assert_eq!(first.deadline(), None);
    }
}
