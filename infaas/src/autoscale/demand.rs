//! What recent queries asked of each variant they chose: the strictest latency target, the
//! highest accuracy floor, and whether any named it explicitly. The model-autoscaler reads it to
//! know an architecture's SLO (a plan's variants must meet it), how far it may downgrade (never
//! below the accuracy floor), and whether it may change variants at all (a variant that queries
//! name is only replicated or shrunk: they would not follow an upgrade).
//!
//! It also counts the queries that chose each variant over the last second, so the autoscaler sees
//! the load *offered* to an architecture, not only what its instances managed to serve: a
//! saturated instance serves its capacity whatever arrives, and a replica just loaded has not
//! reported yet.
//!
//! The serving side notes every query; each note is a short lock on one map. Notes older than the
//! window are forgotten when read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::query::Requirements;

/// Arrivals are counted in buckets of this many milliseconds...
const BUCKET_MS: u64 = 100;
/// ...over the last this many buckets: the last second, the model-autoscaler's tick (§4.2). A
/// tick then sees a step in load in full, at most a bucket late; a longer window would spread a
/// spike over several ticks and the autoscaler would climb it in a staircase of too-small steps.
const BUCKETS: usize = 10;

/// One variant's recent requirements and arrivals.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    at: Instant,
    latency_ms: Option<f64>,
    min_accuracy: Option<f64>,
    explicit: bool,
    /// Queries per bucket since the demand started: (bucket, count), the current one last.
    arrivals: [(u64, u64); BUCKETS + 1],
}

impl Seen {
    fn arrive(&mut self, bucket: u64) {
        let last = self.arrivals.len() - 1;
        if self.arrivals[last].0 != bucket {
            self.arrivals.rotate_left(1);
            self.arrivals[last] = (bucket, 0);
        }
        self.arrivals[last].1 += 1;
    }

    /// Queries per second over the [`BUCKETS`] whole buckets before `bucket`.
    fn rate(&self, bucket: u64) -> f64 {
        let from = bucket.saturating_sub(BUCKETS as u64);
        let n: u64 = self
            .arrivals
            .iter()
            .filter(|(b, _)| *b >= from && *b < bucket)
            .map(|(_, c)| c)
            .sum();
        n as f64 * 1e3 / (BUCKETS as u64 * BUCKET_MS) as f64
    }
}

/// What the queries of one architecture asked for lately.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Asked {
    /// Queries per second that chose them.
    pub arrival_qps: f64,
    /// The strictest latency target, ms.
    pub latency_ms: Option<f64>,
    /// The highest accuracy floor.
    pub min_accuracy: Option<f64>,
    /// Some query named one of its variants.
    pub explicit: bool,
}

/// Recent requirements by variant.
#[derive(Debug)]
pub struct Demand {
    window: Duration,
    start: Instant,
    seen: Mutex<HashMap<String, Seen>>,
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

impl Demand {
    /// Remembers notes for `window`.
    pub fn new(window: Duration) -> Self {
        Demand {
            window,
            start: Instant::now(),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// The arrival bucket `now` falls in.
    fn bucket(&self, now: Instant) -> u64 {
        u64::try_from(now.duration_since(self.start).as_millis() / u128::from(BUCKET_MS))
            .unwrap_or(u64::MAX)
    }

    /// A query that chose `variant` with `requirements` (`explicit`: it named the variant).
    pub fn note(&self, variant: &str, requirements: &Requirements, explicit: bool) {
        let now = Instant::now();
        let bucket = self.bucket(now);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let mut fresh = Seen {
            at: now,
            latency_ms: requirements.latency_ms,
            min_accuracy: requirements.min_accuracy,
            explicit,
            arrivals: [(0, 0); BUCKETS + 1],
        };
        match seen.get_mut(variant) {
            // Within the window the strictest requirement holds; after it, the latest.
            Some(s) if now.duration_since(s.at) < self.window => {
                s.at = now;
                s.latency_ms = min_opt(s.latency_ms, fresh.latency_ms);
                s.min_accuracy = max_opt(s.min_accuracy, fresh.min_accuracy);
                s.explicit |= explicit;
                s.arrive(bucket);
            }
            _ => {
                fresh.arrive(bucket);
                seen.insert(variant.to_string(), fresh);
            }
        }
    }

    /// What the queries of the variants `of` asked for within the window.
    pub fn asked<'a>(&self, of: impl Iterator<Item = &'a str>) -> Asked {
        let now = Instant::now();
        let bucket = self.bucket(now);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, s| now.duration_since(s.at) < self.window);
        of.filter_map(|v| seen.get(v))
            .fold(Asked::default(), |a, s| Asked {
                arrival_qps: a.arrival_qps + s.rate(bucket),
                latency_ms: min_opt(a.latency_ms, s.latency_ms),
                min_accuracy: max_opt(a.min_accuracy, s.min_accuracy),
                explicit: a.explicit || s.explicit,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_in_arrivals_is_seen_in_full_one_second_later() {
        let mut seen = Seen {
            at: Instant::now(),
            latency_ms: None,
            min_accuracy: None,
            explicit: false,
            arrivals: [(0, 0); BUCKETS + 1],
        };
        // 10 q/s for two seconds, then 150 q/s.
        for bucket in 0..20 {
            seen.arrive(bucket);
        }
        assert_eq!(seen.rate(20), 10.0);
        for bucket in 20..30 {
            if bucket == 25 {
                // Half a second in: half of each.
                assert_eq!(seen.rate(25), 5.0 + 5.0 * 15.0);
            }
            for _ in 0..15 {
                seen.arrive(bucket);
            }
        }
        assert_eq!(seen.rate(30), 150.0);
        // Nothing since: the rate falls to nothing a second later.
        assert_eq!(seen.rate(40), 0.0);
    }
}
