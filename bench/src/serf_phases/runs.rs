//! What a comparison recorded: per set-up, every request's latency by send time, its failures,
//! SERF's configurations over time and the conditions it ran in; and the means and ratios per
//! phase read from them.

use std::path::Path;

use anyhow::{Context, Result};
use weir_operators::model::ParallelismSnapshot;
use weir_serf::config::Config;
use weir_serf::profile::Profile;

use super::Setup;
use crate::conditions::Conditions;

/// One set-up's run over the schedule.
#[derive(Debug, Clone)]
pub struct SetupRun {
    /// Which set-up.
    pub setup: Setup,
    /// Per answered request: scheduled send (seconds from the start) and latency (ms), in send
    /// order.
    pub latencies: Vec<(f64, f64)>,
    /// Scheduled send (seconds from the start) of every request that failed (an executor that
    /// shed load because its queue was full, a timeout) or was never answered.
    pub failed: Vec<f64>,
    /// SERF (and the control) only: `(seconds from the start, configuration)` at start and after
    /// every switch.
    pub configs: Vec<(f64, Config)>,
    /// SERF (and the control) only: the executor's parallelism gauges at the end (online
    /// re-profiling counters and the measured service rates).
    pub serf: Option<ParallelismSnapshot>,
    /// What the machine and the executor did while the arrivals were served.
    pub conditions: Conditions,
    /// Every call the model node made while the arrivals were served, in the order they ended
    /// (kept only with `PhasesConfig::calls_dir`; empty otherwise).
    pub calls: Vec<TracedCall>,
    /// The same per phase: from each phase's start to the next one's (the last phase's ends when
    /// the last answer came).
    pub phase_conditions: Vec<Conditions>,
}

/// One call of the model node, timed from the set-up's start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracedCall {
    /// When it began, seconds from the start of the arrivals.
    pub began_s: f64,
    /// How long it took, ms.
    pub ms: f64,
    /// How long its session thread had been idle before it, ms (`None`: the thread's first call).
    pub idle_before_ms: Option<f64>,
}

impl SetupRun {
    /// The configuration in force when a call that began at `began_s` began, and how long before
    /// it the set-up started or last switched, seconds. SERF's switches are sampled every 50 ms,
    /// so both are within 50 ms; a fixed set-up's configuration is its own.
    pub fn config_at(&self, began_s: f64) -> (Option<Config>, f64) {
        if let Setup::Fixed(c) = self.setup {
            return (Some(c), began_s);
        }
        match self.configs.iter().rev().find(|(at, _)| *at <= began_s) {
            Some(&(at, c)) => (Some(c), began_s - at),
            None => (self.configs.first().map(|(_, c)| *c), began_s),
        }
    }

    /// The configurations in the order they ran, each written by `each(seconds from the start,
    /// configuration)`, joined by arrows.
    pub fn config_timeline(&self, each: impl Fn(f64, Config) -> String) -> String {
        self.configs
            .iter()
            .map(|&(t, c)| each(t, c))
            .collect::<Vec<_>>()
            .join(" → ")
    }

    /// Mean latency (ms) of requests sent in `[from, to)` seconds.
    pub fn mean_between(&self, from: f64, to: f64) -> f64 {
        mean_of(self.latencies_between(from, to))
    }

    /// Requests sent in `[from, to)` seconds that failed.
    pub fn failed_between(&self, from: f64, to: f64) -> usize {
        self.failed
            .iter()
            .filter(|t| **t >= from && **t < to)
            .count()
    }

    /// Latencies (ms) of requests sent in `[from, to)` seconds.
    fn latencies_between(&self, from: f64, to: f64) -> impl Iterator<Item = f64> + '_ {
        self.latencies
            .iter()
            .filter(move |(t, _)| *t >= from && *t < to)
            .map(|(_, l)| *l)
    }
}

/// The mean of `values`, NaN when there are none.
fn mean_of(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}

/// One whole comparison.
#[derive(Debug, Clone)]
pub struct PhasesRun {
    /// The profile it was planned with.
    pub profile: Profile,
    /// `(rate, start s, end s)` per phase.
    pub phases: Vec<(f64, f64, f64)>,
    /// SERF first, then every fixed configuration (whatever order they ran in).
    pub setups: Vec<SetupRun>,
    /// The order the set-ups ran in, as indices into `setups`.
    pub order: Vec<usize>,
    /// Seconds left out at each phase's start for the settled means.
    pub settle_seconds: f64,
    /// Fixed configurations not run, with their profiled utilisation at moderate load.
    pub skipped: Vec<(Config, f64)>,
    /// Fixed configurations left out because `PhasesConfig::fixed` did not list them.
    pub left_out: Vec<Config>,
}

impl PhasesRun {
    /// Mean latency of `setup` in phase `p` (`None`: the whole run), whole or settled.
    pub fn mean(&self, setup: usize, phase: Option<usize>, settled: bool) -> f64 {
        mean_of(self.latencies(setup, phase, settled))
    }

    /// Latencies (ms) of `setup` in phase `p` (`None`: the whole run), whole or settled.
    pub(super) fn latencies(
        &self,
        setup: usize,
        phase: Option<usize>,
        settled: bool,
    ) -> impl Iterator<Item = f64> + '_ {
        let (from, to) = self.scope(phase, settled);
        self.setups[setup].latencies_between(from, to)
    }

    /// Failed requests of `setup` in phase `p` (`None`: the whole run), whole or settled.
    pub fn failed(&self, setup: usize, phase: Option<usize>, settled: bool) -> usize {
        let (from, to) = self.scope(phase, settled);
        self.setups[setup].failed_between(from, to)
    }

    /// Send-time interval `[from, to)` of phase `p` (`None`: the whole run), whole or settled.
    fn scope(&self, phase: Option<usize>, settled: bool) -> (f64, f64) {
        match phase.and_then(|p| self.phases.get(p)) {
            Some(&(_, from, to)) if settled => (from + self.settle_seconds, to),
            Some(&(_, from, to)) => (from, to),
            None => (0.0, f64::INFINITY),
        }
    }

    /// SERF's mean over the best fixed configuration's, in phase `p` (`None`: whole run, against
    /// the best fixed over the whole run), and that configuration. A fixed configuration that
    /// failed requests in the scope did not serve its load and is not a candidate (NaN when no
    /// fixed configuration is left).
    pub fn ratio_to_best(&self, phase: Option<usize>, settled: bool) -> (f64, Config) {
        let serf = self.mean(0, phase, settled);
        let (best, config) = self
            .setups
            .iter()
            .enumerate()
            .skip(1)
            .filter(|(i, _)| self.failed(*i, phase, settled) == 0)
            .filter_map(|(i, s)| match s.setup {
                Setup::Fixed(c) => Some((self.mean(i, phase, settled), c)),
                Setup::Serf | Setup::SerfThreads(_) | Setup::SerfCapped(_) => None,
            })
            .fold((f64::INFINITY, Config::new(1, 1)), |a, b| {
                if b.0 < a.0 {
                    b
                } else {
                    a
                }
            });
        if best.is_finite() {
            (serf / best, config)
        } else {
            (f64::NAN, config)
        }
    }
}

/// Writes `run`'s calls as CSV at `path`: one line per call, in the order they ended, with when
/// it began and how long after the set-up's start or SERF's last switch (seconds), its duration
/// and its thread's idle time before it (ms; empty for a thread's first call), and the
/// configuration it ran in.
///
/// # Errors
/// When the file cannot be written.
pub fn write_call_trace(run: &SetupRun, path: &Path) -> Result<()> {
    let mut text = String::from("began_s,since_switch_s,ms,idle_before_ms,concurrency,threads\n");
    for call in &run.calls {
        let (config, since) = run.config_at(call.began_s);
        let (c, t) = config.map_or((0, 0), |c| (c.concurrency, c.threads));
        let idle = call
            .idle_before_ms
            .map_or_else(String::new, |ms| format!("{ms:.3}"));
        text.push_str(&format!(
            "{:.6},{since:.3},{:.4},{idle},{c},{t}\n",
            call.began_s, call.ms
        ));
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
