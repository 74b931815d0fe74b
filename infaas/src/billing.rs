//! What the running instances cost: each instance's price per second times the seconds it was
//! loaded, accumulated per variant (INFaaS §6's cost metric: Σ over instances of price × time
//! loaded). An instance is billed from its load starting (the machine is held while it loads)
//! until it is unloaded or its executor goes away.
//!
//! Time is passed in (seconds on any monotonic clock), so the meter is a pure accumulator the
//! serving side drives from its lifecycle events and the benchmarks drive from their own clock.

use std::collections::BTreeMap;

/// Accumulated cost per variant, and the instances being billed now.
#[derive(Debug, Default, Clone)]
pub struct Billing {
    /// (variant, worker) → (price per second, billed since).
    open: BTreeMap<(String, String), (f64, f64)>,
    /// Variant → cost of its closed instance intervals.
    closed: BTreeMap<String, f64>,
}

impl Billing {
    /// An empty meter.
    pub fn new() -> Self {
        Self::default()
    }

    /// `variant` started holding `worker` at `now`, at `price_per_s` (a second start of the same
    /// instance is ignored: it is already billed).
    pub fn start(&mut self, variant: &str, worker: &str, price_per_s: f64, now: f64) {
        let price = if price_per_s.is_finite() && price_per_s > 0.0 {
            price_per_s
        } else {
            0.0
        };
        self.open
            .entry((variant.to_string(), worker.to_string()))
            .or_insert((price, now));
    }

    /// `variant` stopped holding `worker` at `now`.
    pub fn stop(&mut self, variant: &str, worker: &str, now: f64) {
        if let Some((price, since)) = self.open.remove(&(variant.to_string(), worker.to_string())) {
            *self.closed.entry(variant.to_string()).or_default() += price * (now - since).max(0.0);
        }
    }

    /// Every instance on `worker` stopped at `now` (the executor left or died).
    pub fn stop_worker(&mut self, worker: &str, now: f64) {
        let gone: Vec<String> = self
            .open
            .keys()
            .filter(|(_, w)| w == worker)
            .map(|(v, _)| v.clone())
            .collect();
        for variant in gone {
            self.stop(&variant, worker, now);
        }
    }

    /// Cost so far of each variant that was ever billed, open intervals counted up to `now`.
    pub fn by_variant(&self, now: f64) -> BTreeMap<String, f64> {
        let mut out = self.closed.clone();
        for ((variant, _), (price, since)) in &self.open {
            *out.entry(variant.clone()).or_default() += price * (now - since).max(0.0);
        }
        out
    }

    /// Total cost so far, up to `now`.
    pub fn total(&self, now: f64) -> f64 {
        self.by_variant(now).values().sum()
    }

    /// Price per second of everything billed now.
    pub fn rate(&self) -> f64 {
        self.open.values().map(|(p, _)| p).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_billed_while_they_hold_a_worker() {
        let mut b = Billing::new();
        b.start("a", "w1", 1.0, 0.0);
        b.start("c", "w2", 16.0, 1.0);
        b.start("a", "w1", 1.0, 2.0); // already billed
        assert_eq!(b.rate(), 17.0);
        b.stop("a", "w1", 4.0);
        assert_eq!(b.total(5.0), 4.0 + 16.0 * 4.0);
        b.stop_worker("w2", 6.0);
        assert_eq!(b.rate(), 0.0);
        assert_eq!(
            b.by_variant(100.0),
            BTreeMap::from([("a".into(), 4.0), ("c".into(), 80.0)])
        );
        b.stop("never", "w9", 1.0);
        b.start("bad", "w3", f64::NAN, 0.0);
        assert_eq!(b.total(10.0), 84.0);
    }
}
