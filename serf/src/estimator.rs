//! The arrival-rate estimator of SERF's scheduler (paper §IV-C1: "SERF continuously monitors the incoming
//! workload and periodically updates its observed load").
//!
//! Arrivals are counted in buckets one update period long; the estimate at time `now` is the count in the
//! complete buckets covering the window, divided by their length (fewer buckets right after start), with
//! its Poisson standard error. With change detection on ([`RateEstimator::with_change_sigmas`]) the window
//! is cut short at a change of load: walking back from the newest complete bucket, an older bucket whose
//! count differs from the mean of the newer ones by more than `z·√(mean + count)` (the Poisson standard
//! deviation of the difference) ends the window there. A step from 18/s to 80/s is then seen in full one
//! period after it, not spread over the whole window; the price is a noisier estimate for a few periods
//! after a false alarm (at `z = 3.5` about one comparison in 2000 under steady Poisson load), which the
//! scheduler's hysteresis absorbs. Timestamps are explicit [`Duration`]s since any fixed origin; nothing reads a
//! clock. What to do with the estimate is [`crate::scheduler`]'s job.

use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;

/// The window is shorter than the period, or the period is zero.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("need period > 0 and window ≥ period (got window {window:?}, period {period:?})")]
pub struct EstimatorError {
    /// Window asked for.
    pub window: Duration,
    /// Period asked for.
    pub period: Duration,
}

/// Counts arrivals in period-long buckets and estimates the arrival rate over a sliding window.
#[derive(Debug, Clone)]
pub struct RateEstimator {
    period_ns: u128,
    window_buckets: u64,
    origin_bucket: u64,
    /// `(bucket index, arrivals)`, ascending, at most `window_buckets + 1` entries.
    buckets: VecDeque<(u64, u64)>,
    /// Change detection threshold `z` (module docs); 0 turns it off.
    change_sigmas: f64,
}

impl RateEstimator {
    /// An estimator started at `now`; `window` is rounded up to whole periods.
    ///
    /// # Errors
    /// [`EstimatorError`] if `period` is zero or `window < period`.
    pub fn new(window: Duration, period: Duration, now: Duration) -> Result<Self, EstimatorError> {
        if period.is_zero() || window < period {
            return Err(EstimatorError { window, period });
        }
        let period_ns = period.as_nanos();
        let window_buckets = window.as_nanos().div_ceil(period_ns) as u64;
        let mut e = Self {
            period_ns,
            window_buckets,
            origin_bucket: 0,
            buckets: VecDeque::new(),
            change_sigmas: 0.0,
        };
        e.origin_bucket = e.bucket(now);
        Ok(e)
    }

    /// Cuts the window short at a change of load beyond `z` standard deviations (module docs); `z ≤ 0` or
    /// not finite turns change detection off.
    pub fn with_change_sigmas(mut self, z: f64) -> Self {
        self.change_sigmas = if z.is_finite() && z > 0.0 { z } else { 0.0 };
        self
    }

    fn bucket(&self, t: Duration) -> u64 {
        (t.as_nanos() / self.period_ns) as u64
    }

    /// Records `n` arrivals at `now`. Arrivals older than the window are ignored.
    pub fn record(&mut self, now: Duration, n: u64) {
        let b = self.bucket(now);
        if let Some(entry) = self.buckets.iter_mut().rev().find(|(i, _)| *i == b) {
            entry.1 += n;
        } else {
            let pos = self
                .buckets
                .iter()
                .rposition(|(i, _)| *i < b)
                .map_or(0, |p| p + 1);
            self.buckets.insert(pos, (b, n));
        }
        let newest = self.buckets.back().map_or(b, |(i, _)| *i);
        while self
            .buckets
            .front()
            .is_some_and(|(i, _)| i + self.window_buckets < newest)
        {
            self.buckets.pop_front();
        }
    }

    /// Estimated arrival rate (requests per second) at `now` from the complete buckets of the window, or
    /// `None` before the first bucket has completed.
    pub fn estimate(&self, now: Duration) -> Option<f64> {
        self.measure(now).map(|m| m.rate)
    }

    /// The estimate with its Poisson standard error, or `None` before the first bucket has completed.
    pub fn measure(&self, now: Duration) -> Option<RateEstimate> {
        let b = self.bucket(now);
        let lo = b
            .saturating_sub(self.window_buckets)
            .max(self.origin_bucket);
        if b <= lo {
            return None;
        }
        let count = |bucket: u64| {
            self.buckets
                .iter()
                .find(|(i, _)| *i == bucket)
                .map_or(0, |(_, c)| *c)
        };
        // Newest complete bucket first; stop at a change of load.
        let (mut arrivals, mut used) = (0u64, 0u64);
        for bucket in (lo..b).rev() {
            let x = count(bucket);
            if self.change_sigmas > 0.0 && used > 0 {
                let mean = arrivals as f64 / used as f64;
                if (x as f64 - mean).abs() > self.change_sigmas * (mean + x as f64).max(1.0).sqrt()
                {
                    break;
                }
            }
            arrivals += x;
            used += 1;
        }
        let span_s = used as f64 * self.period_ns as f64 * 1e-9;
        Some(RateEstimate {
            rate: arrivals as f64 / span_s,
            std_error: (arrivals.max(1) as f64).sqrt() / span_s,
            arrivals,
            span_s,
        })
    }

    /// Start of the bucket after the one containing `now` (the next update time).
    pub(crate) fn next_boundary(&self, now: Duration) -> Duration {
        let ns = (self.bucket(now) as u128 + 1) * self.period_ns;
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }
}

/// An arrival-rate estimate over the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RateEstimate {
    /// Arrivals per second, `n / span`.
    pub rate: f64,
    /// Poisson standard error `√max(n, 1) / span`.
    pub std_error: f64,
    /// Arrivals counted, `n`.
    pub arrivals: u64,
    /// Length of the complete buckets counted, seconds.
    pub span_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, SeedableRng};
    use rand_distr::{Distribution, Exp};

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn estimator_sliding_window() {
        let mut e = RateEstimator::new(secs(5.0), secs(1.0), secs(0.0)).unwrap();
        assert_eq!(e.estimate(secs(0.5)), None);
        // 50/s, evenly spaced, for 10 s.
        for k in 0..500 {
            e.record(secs(k as f64 * 0.02 + 0.001), 1);
            if k == 50 {
                assert_eq!(e.estimate(secs(1.0)), Some(50.0)); // one complete bucket at start-up
            }
        }
        assert_eq!(e.estimate(secs(10.0)), Some(50.0));
        // Then 10/s for 10 s: after a full window the estimate is exactly 10.
        for k in 0..100 {
            e.record(secs(10.0 + k as f64 * 0.1 + 0.001), 1);
            if k == 20 {
                assert_eq!(
                    e.estimate(secs(12.0)),
                    Some((3.0 * 50.0 + 2.0 * 10.0) / 5.0)
                );
            }
            if k == 50 {
                assert_eq!(e.estimate(secs(15.0)), Some(10.0));
            }
        }
        assert_eq!(e.estimate(secs(20.0)), Some(10.0));
        // Nothing for a whole window: zero.
        assert_eq!(e.estimate(secs(40.0)), Some(0.0));
        assert!(e.buckets.len() <= 6);
        assert!(RateEstimator::new(secs(0.5), secs(1.0), secs(0.0)).is_err());
        // Poisson arrivals: within 20% of the true rate at every update after the first window.
        let mut rng = StdRng::seed_from_u64(3);
        let exp = Exp::new(200.0).unwrap();
        let mut e = RateEstimator::new(secs(5.0), secs(1.0), secs(0.0)).unwrap();
        let mut t = 0.0;
        let mut next_check = 6.0;
        while t < 60.0 {
            t += exp.sample(&mut rng);
            if t >= next_check {
                let est = e.estimate(secs(t)).unwrap();
                assert!((est - 200.0).abs() < 40.0, "at {t}: {est}");
                next_check += 1.0;
            }
            e.record(secs(t), 1);
        }
    }

    #[test]
    fn change_detection_cuts_the_window_at_a_step_of_load() {
        let mut plain = RateEstimator::new(secs(5.0), secs(1.0), secs(0.0)).unwrap();
        let mut cut = plain.clone().with_change_sigmas(3.5);
        // 18/s for 10 s, then 80/s: one period after the step, only the new bucket counts.
        for k in 0..180 {
            let t = secs(k as f64 / 18.0 + 0.001);
            plain.record(t, 1);
            cut.record(t, 1);
        }
        assert_eq!(cut.estimate(secs(10.0)), Some(18.0));
        for k in 0..80 {
            let t = secs(10.0 + k as f64 / 80.0 + 0.001);
            plain.record(t, 1);
            cut.record(t, 1);
        }
        assert_eq!(plain.estimate(secs(11.0)), Some((4.0 * 18.0 + 80.0) / 5.0));
        let m = cut.measure(secs(11.0)).unwrap();
        assert_eq!((m.rate, m.span_s), (80.0, 1.0));
        // Steady Poisson load: the window is rarely cut (a false alarm only shortens it).
        let mut rng = StdRng::seed_from_u64(9);
        let exp = Exp::new(7.5).unwrap();
        let mut e = RateEstimator::new(secs(5.0), secs(1.0), secs(0.0))
            .unwrap()
            .with_change_sigmas(3.5);
        let (mut t, mut next, mut short) = (0.0, 6.0, 0);
        while t < 2000.0 {
            t += exp.sample(&mut rng);
            if t >= next {
                if e.measure(secs(t)).unwrap().span_s < 5.0 {
                    short += 1;
                }
                next += 1.0;
            }
            e.record(secs(t), 1);
        }
        assert!(short < 100, "{short} of ~2000 updates on a cut window");
    }
}
