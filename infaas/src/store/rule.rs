//! The rule that turns an instance's newest load report into its state, and its thresholds.
//!
//! The paper names the states but gives no margins ("INFaaS: Automated Model-less Inference
//! Serving", §4.1: Overloaded is serving *at* peak throughput; Interfered is slower than profiled
//! while not overloaded). Its public code's worker monitor flags an instance when its mean latency
//! exceeds 1.5× the profiled one under real load, or when its queue is longer than half a second of
//! work. weir takes those as defaults, each a configuration value:
//!
//! - **Overloaded** when the served qps ≥ `overload_qps_fraction` × the profiled saturation qps,
//!   or when more requests are outstanding than `outstanding_window_s` seconds of work at
//!   saturation throughput (whichever is hit first; a variant profiled with no saturation qps is
//!   judged by neither);
//! - **Interfered** when not Overloaded, under real load (served qps above
//!   `interference_load_fraction` × the saturation qps, as the public code's monitor requires: a
//!   lone call's latency on cold caches is not contention), and the mean call latency >
//!   `interference_factor` × the profiled batch-1 latency (reports give a call's mean latency
//!   without its batch, so the reference is the smallest call's);
//! - **Active** otherwise, and before the first report.
//!
//! The state is a function of the newest report only (no hysteresis): a report is already a mean
//! over the worker's reporting interval, and a memoryless rule is what lets the dataflow maintain
//! it incrementally and a test recompute it from scratch.

use crate::state::InstanceState;

/// The state thresholds (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateRule {
    /// Overloaded when qps ≥ this × saturation qps. Default 1.0 (paper: "at its peak").
    pub overload_qps_fraction: f64,
    /// Overloaded when outstanding > saturation qps × this many seconds. Default 0.5.
    pub outstanding_window_s: f64,
    /// Interfered when mean latency > this × profiled latency. Default 1.5.
    pub interference_factor: f64,
    /// ... and served qps > this × saturation qps. Default 0.5.
    pub interference_load_fraction: f64,
}

impl Default for StateRule {
    fn default() -> Self {
        StateRule {
            overload_qps_fraction: 1.0,
            outstanding_window_s: 0.5,
            interference_factor: 1.5,
            interference_load_fraction: 0.5,
        }
    }
}

/// An instance's newest load report, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Report {
    /// Served requests per second.
    pub qps: f64,
    /// Mean call latency, ms.
    pub mean_latency_ms: f64,
    /// Requests queued or running.
    pub outstanding: u32,
}

impl StateRule {
    /// The state of a loaded instance of a variant profiled at `saturation_qps` and
    /// `profiled_ms` (batch 1), given its newest report, and the reason in words.
    pub fn state(
        &self,
        saturation_qps: f64,
        profiled_ms: f64,
        report: Option<Report>,
    ) -> (InstanceState, &'static str) {
        let Some(r) = report else {
            return (InstanceState::Active, "loaded, no load report yet");
        };
        if saturation_qps > 0.0 {
            if r.qps >= self.overload_qps_fraction * saturation_qps {
                return (InstanceState::Overloaded, "served qps at saturation");
            }
            if f64::from(r.outstanding) > saturation_qps * self.outstanding_window_s {
                return (
                    InstanceState::Overloaded,
                    "outstanding requests above bound",
                );
            }
        }
        let loaded = r.qps > self.interference_load_fraction * saturation_qps;
        if loaded && profiled_ms > 0.0 && r.mean_latency_ms > self.interference_factor * profiled_ms
        {
            return (InstanceState::Interfered, "mean latency above profile");
        }
        (InstanceState::Active, "within profile")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_decide_the_state() {
        let rule = StateRule::default();
        let r = |qps, mean_latency_ms, outstanding| {
            Some(Report {
                qps,
                mean_latency_ms,
                outstanding,
            })
        };
        use InstanceState::*;
        let cases = [
            (100.0, None, Active),
            (100.0, r(50.0, 12.0, 3), Active),
            (100.0, r(100.0, 12.0, 3), Overloaded),
            (100.0, r(10.0, 10.0, 51), Overloaded),
            (100.0, r(60.0, 15.1, 0), Interfered),
            // Slow but hardly loaded: not contention.
            (100.0, r(10.0, 15.1, 0), Active),
            (100.0, r(100.0, 99.0, 0), Overloaded),
            // No saturation profiled: never Overloaded.
            (0.0, r(1e9, 10.0, 1000), Active),
        ];
        for (saturation, report, state) in cases {
            assert_eq!(rule.state(saturation, 10.0, report).0, state, "{report:?}");
        }
    }
}
