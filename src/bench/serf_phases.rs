//! SERF under changing load on real ONNX Runtime (note §5.2 X7, requirement S4; paper Fig. 13):
//! one model node serves the same piecewise-Poisson arrivals, moderate → low → moderate, once with
//! `parallelism: auto` (the live scheduler) and once per fixed configuration `(c, t)` of its
//! profile, and the mean latency per phase and over the run is compared.
//!
//! Decisions:
//! - The rates come from a *planning profile* taken once before the first run, with ten times the
//!   runs' requests per tuple in nine interleaved rounds (each tuple its median round): *moderate*
//!   and *low* are fractions (`weir bench serf --phases` defaults: 0.55 and 0.2) of the *largest*
//!   capacity `c·μ_c` among the configurations, and every run serves the same rates and the same
//!   fixed set-ups. Each run still profiles afresh with the runs' sample count, and SERF starts
//!   from that run's own profile, as a deployed `auto` node would. (Until 2026-11-25 each run
//!   planned from its own 40-request profile, whose largest capacity moved by up to ±25 % from run
//!   to run here: one run's moderate load was 230/s, the next's 181/s and the third's 142/s, and
//!   which fixed configurations ran changed with it, so runs did not compare the same thing.)
//!   The planning profile is one moment too: the first one taken this way caught `(1, 2)` in the
//!   VM's slow 2-thread state (≈ 6 ms, module docs of `weir_operators::model::pinning`), so fixed
//!   `(1, 2)` was not run in any of its six runs.
//!   The paper's scenario (Fig. 13) needs a moderate load at
//!   which another configuration is best than at low load; on 2 cores that is a load near the
//!   intra-request configuration's capacity, where the inter-request one's extra slots pay off.
//! - The model must have that trade-off at all, and the default is the zoo's shufflenet for it.
//!   Measured here with ONNX Runtime alone: shufflenet's 2-thread call is 1.68× as fast as its
//!   1-thread call and two 1-thread calls at once do not slow each other, so `(2, 1)` has ≈ 24 %
//!   more capacity than `(1, 2)` while `(1, 2)` serves a lone request ≈ 40 % faster. Squeezenet
//!   (the default until 2026-11-25, with 0.55 and 0.1) scales 1.87× with two threads, so its two
//!   configurations' capacities are within 5 % of each other; at its "moderate" load the better
//!   of the two changed from run to run and nine 3 × 60 s runs ended at parity (whole run
//!   0.91–1.34, median 1.039; `benchmarks/SERF.md`): a scenario whose configurations tie
//!   measures the machine's noise, not the adaptation. On shufflenet at 0.55, `(1, 2)` is ≈ 0.7
//!   busy by its profile, and served it collapses (its calls slow from 3 to 7 ms once a queue
//!   forms, and it sheds load); the low phase (0.2) carries ≈ 15 % of the run's requests, so over
//!   the run SERF beats the moderate-load configuration `(2, 1)` by what it gains on those.
//! - A fixed configuration whose profiled utilisation at moderate load is 0.95 or more is not run
//!   (its queue would only grow to the limit) and is listed as skipped. (Runs before 2026-11-22 took fractions of the *smallest*
//!   capacity, so that every configuration was stable; there one configuration was best at both
//!   loads and SERF could at most tie with it.)
//! - Every set-up runs with the same `executor.spinning` (default on) and the profile is measured
//!   with it: without spinning, a 2-thread call after an idle gap wakes the sleeping intra-op
//!   thread at each parallel section and took as long as a 1-thread call here (8–9 ms at
//!   20 requests/s, 4.6–5.7 ms at 85–150/s), which no back-to-back profile sees.
//! - The same arrival times (one seed) drive every set-up, one set-up after the other, each on a
//!   fresh graph warmed up with a few closed-loop requests. A noisy machine drifts between
//!   set-ups, which is why [`PhasesConfig::runs`] repeats the whole comparison and the report
//!   quotes medians; and the order rotates from run to run ([`run_order`]: SERF first in run 1,
//!   second in run 2, …), so that no set-up always runs right after the profile or always last.
//!   (Until 2026-11-25 SERF always ran first.)
//! - Before the first measured set-up of each run, the first [`PhasesConfig::burn_in_seconds`]
//!   (default 20 s) of the arrivals are served on a throwaway graph of the largest-capacity
//!   configuration and discarded. Why: whichever set-up ran first after the profile measured
//!   8–14 % slower than the same configuration later in the run (SERF, first in run 1 of three
//!   sets on 2026-11-25, ran `(1, 2)` like the fixed set-up and measured 10.11 vs 9.32 ms). The
//!   suspect is what a process's first graph pays (the allocator's and ONNX Runtime's first
//!   growth); it was not measured apart, and the burn-in makes the question moot.
//! - A request that fails (a fixed configuration beyond its capacity fills its executor's bounded
//!   queue and sheds load) is counted by its send time and left out of the means; a fixed
//!   configuration that failed any request in a scope is not a candidate for that scope's best,
//!   since it did not serve the load. (Until 2026-11-25 a failure aborted the whole run: fixed
//!   `(1, 2)` on shufflenet at 0.65 × capacity shed 9,366 requests in phase 1 of a 3 × 60 s run and
//!   the run's other set-ups were lost with it.)
//! - Whether SERF's margin is resolved is judged over runs, not within one: the summary gives,
//!   beside each pooled ratio, a 95 % interval from resampling the runs ([`ratio_interval`]). The
//!   run is the unit because what decides a few per cent here is the machine's state while a
//!   set-up serves (2-thread ONNX Runtime calls on this VM switch between ≈ 3 and ≈ 6 ms for tens of
//!   seconds at a time, `benchmarks/serf/ort_thread_states.py`), which every request of one set-up
//!   shares.
//! - Latency is weir's (scheduled send → answer). Per-phase means cover the whole phase, including
//!   SERF's reaction time (the estimator's window plus the hysteresis); a second column leaves out
//!   the first `settle` seconds of each phase, the note's "after estimator convergence".
//! - SERF runs with the scheduler's defaults (5 s window, 1 s period, hold 2 periods, online
//!   re-profiling with exploration and load bands), exactly what a graph with `parallelism: auto`
//!   gets. It starts from the profile of that run (printed with the results) and corrects it with the
//!   service times it measures while serving; the report shows, per tuple, the offline and the
//!   measured times, overall and per load band.
//!
//! - `--control-threads T` adds a control set-up ([`Setup::SerfThreads`]): `parallelism: auto`
//!   over the profile cut to the configurations with `T` threads per request. Batch J
//!   (2026-11-26) had SERF in `(2, 1)` for all of phase 1 yet 10–16 % slower than fixed `(2, 1)`
//!   served minutes apart; beside fixed `(2, 1)` the control tells the `auto` machinery's own cost
//!   (switchable executor path, control loop, online re-profiling) from the drift between set-ups.
//!   It is reported against the fixed configurations of its thread count only, and is never
//!   SERF's "best fixed".
//! - `--also-max-utilisation U` adds SERF under `parallelism: {auto: {max_utilisation: U}}`
//!   ([`Setup::SerfCapped`]) to every run, so two caps are judged on the same minutes of the
//!   machine rather than in batches hours apart (batch H's 0.6 cap and batches K–U's 0.5 were);
//!   it is pooled against every fixed configuration in a table of its own.
//!
//! The file is long (runner, report and plot of one experiment, kept together, and their tests);
//! what the machine did during a set-up is [`super::conditions`]'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::unbounded;
use plotters::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use weir_engine::spec::{
    AutoSpec, ExecutorSpec, FixedParallelism, GraphSpec, ModelBuilder, ParallelismSpec,
};
use weir_operators::model::ParallelismSnapshot;
use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::conditions::{Conditions, Probe};
use super::overhead::median;
use super::serf::request_signature;
use crate::loadgen::{run_load, Arrival, LoadSpec};
use crate::serf::{profile_node, profile_path, ProfileOptions};
use crate::workload::Workload;
use crate::{plan_spec, start, RunningGraph, RuntimeOptions};

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct PhasesConfig {
    /// Display name and model file.
    pub model: (String, PathBuf),
    /// Length of each of the three phases, seconds.
    pub phase_seconds: f64,
    /// Moderate load as a fraction of the largest capacity among the configurations.
    pub moderate: f64,
    /// Low load, same unit.
    pub low: f64,
    /// Moderate and low load in requests per second, used instead of the fractions when given,
    /// so that batches taken on different days serve the same arrivals and pool.
    pub rates: Option<(f64, f64)>,
    /// The fixed configurations to run (empty: every one stable at moderate load). A listed
    /// configuration that is unstable at moderate load is still skipped.
    pub fixed: Vec<Config>,
    /// Seconds at the start of a phase left out of the "settled" means.
    pub settle_seconds: f64,
    /// Seconds of the first phase's arrivals served, and discarded, on a throwaway graph before
    /// the first measured set-up of each run (0: none); see the module docs.
    pub burn_in_seconds: f64,
    /// Width of the plot's time bins, seconds.
    pub bin_seconds: f64,
    /// Whole comparisons to run (each with a fresh profile and fresh arrivals).
    pub runs: usize,
    /// Seed of the first run's arrivals (run `r` uses `seed + r`).
    pub seed: u64,
    /// How the model is profiled; its `spinning` is every set-up's `executor.spinning` too.
    pub profile: ProfileOptions,
    /// Also run the control set-up [`Setup::SerfThreads`] with this many threads per request
    /// (`None`: not run).
    pub control_threads: Option<usize>,
    /// Also run SERF with this utilisation cap, [`Setup::SerfCapped`] (`None`: not run).
    pub also_cap: Option<f64>,
    /// Write every call of every set-up's model node to a CSV file in this folder (`None`: not
    /// kept; [`write_call_trace`]).
    pub calls_dir: Option<PathBuf>,
}

/// The served graph's one model node.
const NODE: &str = "model";

/// Utilisation at moderate load from which a fixed configuration is not run.
pub const UNSTABLE_UTILISATION: f64 = 0.95;

/// A set-up: SERF, or one fixed configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// `parallelism: auto`.
    Serf,
    /// `parallelism: {concurrency, threads}`.
    Fixed(Config),
    /// The control: `parallelism: auto` over the profile cut to the configurations with this
    /// many intra-op threads ([`PhasesConfig::control_threads`]). With one thread per request on
    /// 2 cores that is `(1, 1)` and `(2, 1)`, and at moderate load only `(2, 1)` is stable, so
    /// beside fixed `(2, 1)` it measures what the `auto` machinery itself costs there (the
    /// switchable executor's path, the control loop, online re-profiling) apart from what SERF
    /// decides. It has no 2-thread session, so a cost of an idle extra session is not in it.
    SerfThreads(usize),
    /// `parallelism: {auto: {max_utilisation: U}}`, `U` in thousandths
    /// ([`PhasesConfig::also_cap`]): SERF with another utilisation cap than the default, served in
    /// the same run as [`Setup::Serf`], so the two caps meet the same minutes of the machine.
    SerfCapped(u16),
}

/// A utilisation cap in thousandths, the unit [`Setup::SerfCapped`] keeps it in.
pub fn cap_permille(cap: f64) -> u16 {
    (cap.clamp(0.0, 1.0) * 1000.0).round() as u16
}

impl Setup {
    /// Whether the scheduler runs it (`parallelism: auto`).
    fn is_auto(self) -> bool {
        matches!(
            self,
            Setup::Serf | Setup::SerfThreads(_) | Setup::SerfCapped(_)
        )
    }
}

impl Setup {
    /// The set-up's name in file names: `serf`, `fixed-1x2`, `serf-t1`, `serf-cap-600`.
    pub fn slug(self) -> String {
        match self {
            Setup::Serf => "serf".into(),
            Setup::Fixed(c) => format!("fixed-{}x{}", c.concurrency, c.threads),
            Setup::SerfThreads(t) => format!("serf-t{t}"),
            Setup::SerfCapped(p) => format!("serf-cap-{p}"),
        }
    }
}

/// Writes `run`'s calls as CSV at `path`: one line per call, in the order they ended, with when
/// it began and how long after the set-up's start or SERF's last switch (seconds), its duration
/// and its thread's idle time before it (ms; empty for a thread's first call), and the
/// configuration it ran in (`benchmarks/serf/call_trace.py` reads it).
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

impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setup::Serf => f.write_str("SERF auto"),
            Setup::Fixed(c) => write!(f, "fixed {c}"),
            Setup::SerfThreads(t) => write!(f, "SERF auto, t={t} only"),
            Setup::SerfCapped(p) => write!(f, "SERF auto, cap {:.3}", f64::from(*p) / 1000.0),
        }
    }
}

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
    /// (kept only with [`PhasesConfig::calls_dir`]; empty otherwise).
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
    /// Fixed configurations left out because [`PhasesConfig::fixed`] did not list them.
    pub left_out: Vec<Config>,
}

impl PhasesRun {
    /// Mean latency of `setup` in phase `p` (`None`: the whole run), whole or settled.
    pub fn mean(&self, setup: usize, phase: Option<usize>, settled: bool) -> f64 {
        mean_of(self.latencies(setup, phase, settled))
    }

    /// Latencies (ms) of `setup` in phase `p` (`None`: the whole run), whole or settled.
    fn latencies(
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

/// Piecewise-Poisson send times (seconds) over `phases` of `(rate, seconds)`.
pub fn schedule(phases: &[(f64, f64)], seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut start = 0.0;
    for &(rate, len) in phases {
        let end = start + len;
        if let Ok(exp) = Exp::new(rate.max(1e-9)) {
            let mut t = start + exp.sample(&mut rng);
            while t < end {
                out.push(t);
                t += exp.sample(&mut rng);
            }
        }
        start = end;
    }
    out
}

/// The order in which run `run` (from 0) serves `n` set-ups: indices into the canonical list (SERF
/// first), rotated by `run`, so that over `n` runs every set-up runs once in every position.
pub fn run_order(n: usize, run: usize) -> Vec<usize> {
    (0..n).map(|k| (k + run) % n.max(1)).collect()
}

/// `profile` cut to the configurations with `threads` intra-op threads (the control set-up's).
///
/// # Errors
/// When the profile has no such configuration.
fn with_threads_only(profile: &Profile, threads: usize) -> Result<Profile> {
    let mut cut = profile.clone();
    cut.series.retain(|s| s.threads == threads);
    cut.after_idle.retain(|a| a.threads == threads);
    if cut.series.is_empty() {
        return Err(anyhow!(
            "the profile has no configuration with {threads} intra-op threads"
        ));
    }
    Ok(cut)
}

/// A one-node graph of `path` under `setup` with `executor`'s spinning and pinning; for SERF,
/// `profile` is written next to it first.
fn setup_graph(
    path: &Path,
    setup: Setup,
    profile: &Profile,
    dir: &Path,
    executor: ExecutorSpec,
) -> Result<(RunningGraph, Workload)> {
    let (input, dtype, shape, output) = request_signature(path)?;
    let parallelism = match setup {
        Setup::Serf => {
            profile.save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec::default())
        }
        Setup::SerfThreads(threads) => {
            with_threads_only(profile, threads)?
                .save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec::default())
        }
        Setup::SerfCapped(permille) => {
            profile.save(&profile_path(&dir.join("graph.yaml"), NODE))?;
            ParallelismSpec::Auto(AutoSpec {
                max_utilisation: Some(f64::from(permille) / 1000.0),
            })
        }
        Setup::Fixed(c) => ParallelismSpec::Fixed(FixedParallelism {
            concurrency: c.concurrency,
            threads: c.threads,
        }),
    };
    let absolute =
        std::fs::canonicalize(path).with_context(|| format!("finding {}", path.display()))?;
    let spec = GraphSpec::builder("serf_phases")
        .input("x", dtype, &shape)
        .model(
            ModelBuilder::new(NODE, &absolute)
                .input(&input.name, "x")
                .executor(executor)
                .parallelism(parallelism),
        )
        .output("y", &format!("model.{}", output.name))
        .build();
    let graph = plan_spec(&spec, dir).map_err(|d| anyhow!("{d}"))?;
    let workload = Workload::random(&graph.plan, 1, 7);
    Ok((start(graph.plan, RuntimeOptions::default())?, workload))
}

/// Sends `times` open-loop (each at its scheduled instant) and collects every latency; for SERF,
/// samples the configuration in force every 50 ms. The machine's and executor's counters are read
/// at the start, at each of `phase_starts` after the first (seconds) and at the end.
fn drive(
    graph: &RunningGraph,
    workload: &Workload,
    times: &[f64],
    setup: Setup,
    phase_starts: &[f64],
    keep_calls: bool,
) -> SetupRun {
    let runtime = graph.runtime();
    let (tx, rx) = unbounded::<(usize, f64, bool)>();
    let started = Instant::now();
    let mut configs = Vec::new();
    let current = |g: &RunningGraph| {
        g.parallelism_stats()
            .first()
            .map(|(_, p)| Config::new(p.concurrency, p.threads))
    };
    if let (true, Some(c)) = (setup.is_auto(), current(graph)) {
        configs.push((0.0, c));
    }
    let probe = Probe::start(graph);
    let call_log = keep_calls.then(|| graph.executor_load(NODE)).flatten();
    if let Some(load) = &call_log {
        load.record_calls();
    }
    let mut boundary_probes = Vec::new();
    let sent_all = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|s| {
        let boundaries = s.spawn(|| {
            let mut probes = Vec::new();
            for &at in phase_starts.iter().skip(1) {
                let due = started + Duration::from_secs_f64(at);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                probes.push(Probe::start(graph));
            }
            probes
        });
        let sent = Arc::clone(&sent_all);
        s.spawn(move || {
            for (i, &t) in times.iter().enumerate() {
                let scheduled = started + Duration::from_secs_f64(t);
                let now = Instant::now();
                if scheduled > now {
                    std::thread::sleep(scheduled - now);
                }
                let tx2 = tx.clone();
                let submitted = runtime.submit(
                    workload.item(i).inputs,
                    Box::new(move |r| {
                        let _ = tx2.send((i, scheduled.elapsed().as_secs_f64() * 1e3, r.is_ok()));
                    }),
                );
                if submitted.is_err() {
                    let _ = tx.send((i, scheduled.elapsed().as_secs_f64() * 1e3, false));
                }
            }
            sent.store(true, std::sync::atomic::Ordering::Release);
        });
        if setup.is_auto() {
            while !sent_all.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(50));
                if let Some(c) = current(graph) {
                    if configs.last().is_none_or(|(_, last)| *last != c) {
                        configs.push((started.elapsed().as_secs_f64(), c));
                    }
                }
            }
        }
        boundary_probes = boundaries.join().unwrap_or_default();
    });
    let mut answers: Vec<Option<f64>> = vec![None; times.len()];
    for _ in 0..times.len() {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok((i, ms, ok)) => answers[i] = ok.then_some(ms),
            Err(_) => break,
        }
    }
    let last = Probe::start(graph);
    let calls = call_log.map_or_else(Vec::new, |load| {
        load.take_calls()
            .calls
            .iter()
            .map(|c| TracedCall {
                began_s: c
                    .ended_at
                    .saturating_duration_since(started)
                    .saturating_sub(c.duration)
                    .as_secs_f64(),
                ms: c.duration.as_secs_f64() * 1e3,
                idle_before_ms: c.idle_before.map(|d| d.as_secs_f64() * 1e3),
            })
            .collect()
    });
    let conditions = probe.until(last);
    let probes: Vec<Probe> = std::iter::once(probe)
        .chain(boundary_probes)
        .chain(std::iter::once(last))
        .collect();
    let phase_conditions = probes.windows(2).map(|w| w[0].until(w[1])).collect();
    let mut latencies = Vec::with_capacity(times.len());
    let mut failed = Vec::new();
    for (&t, answer) in times.iter().zip(answers) {
        match answer {
            Some(ms) => latencies.push((t, ms)),
            None => failed.push(t),
        }
    }
    let serf = if setup.is_auto() {
        graph.parallelism_stats().first().map(|(_, p)| p.clone())
    } else {
        None
    };
    SetupRun {
        setup,
        latencies,
        failed,
        configs,
        serf,
        conditions,
        calls,
        phase_conditions,
    }
}

/// The planning profile takes this many times [`PhasesConfig::profile`]'s samples per tuple.
const PLANNING_SAMPLES_FACTOR: usize = 10;

/// Interleaved rounds of the planning profile (each tuple keeps its median round).
const PLANNING_ROUNDS: usize = 9;

/// What every run serves, planned once from a long profile before the first run: the phase rates,
/// the fixed configurations worth running, and the widest configuration (the burn-in's).
#[derive(Debug, Clone)]
struct Plan {
    moderate: f64,
    low: f64,
    setups: Vec<Setup>,
    skipped: Vec<(Config, f64)>,
    left_out: Vec<Config>,
    widest: Option<Config>,
}

impl Plan {
    /// Rates as given ([`PhasesConfig::rates`]) or as fractions of `profile`'s largest capacity;
    /// a fixed configuration not listed in [`PhasesConfig::fixed`] (when it lists any) is left
    /// out, one whose profiled utilisation at moderate load reaches [`UNSTABLE_UTILISATION`] is
    /// skipped.
    fn from_profile(config: &PhasesConfig, profile: &Profile) -> Result<Plan> {
        let candidates = Candidates::from_profile(profile);
        let max_capacity = candidates.max_capacity().map_or(0.0, |c| c.capacity());
        if max_capacity <= 0.0 {
            return Err(anyhow!("{}: empty profile", config.model.0));
        }
        let (moderate, low) = config
            .rates
            .unwrap_or((config.moderate * max_capacity, config.low * max_capacity));
        if let Some(unknown) = config
            .fixed
            .iter()
            .find(|f| !candidates.as_slice().iter().any(|c| c.config == **f))
        {
            return Err(anyhow!(
                "{}: fixed configuration {unknown} is not in the profile",
                config.model.0
            ));
        }
        let mut setups = vec![Setup::Serf];
        if let Some(threads) = config.control_threads {
            with_threads_only(profile, threads)?;
            setups.push(Setup::SerfThreads(threads));
        }
        if let Some(cap) = config.also_cap {
            setups.push(Setup::SerfCapped(cap_permille(cap)));
        }
        let (mut skipped, mut left_out) = (Vec::new(), Vec::new());
        for c in candidates.as_slice() {
            let utilisation = moderate / c.capacity();
            if !config.fixed.is_empty() && !config.fixed.contains(&c.config) {
                left_out.push(c.config);
            } else if utilisation >= UNSTABLE_UTILISATION {
                skipped.push((c.config, utilisation));
            } else {
                setups.push(Setup::Fixed(c.config));
            }
        }
        Ok(Plan {
            moderate,
            low,
            setups,
            skipped,
            left_out,
            widest: candidates.max_capacity().map(|c| c.config),
        })
    }
}

/// One comparison: profile (SERF starts from this run's own profile, as a deployed `auto` node
/// would), serve `plan`'s phases with SERF and every fixed configuration it lists.
fn run_once(config: &PhasesConfig, run: usize, plan: &Plan) -> Result<PhasesRun> {
    let (name, path) = &config.model;
    let profile = profile_node(name, path, &config.profile)?;
    let Plan {
        moderate,
        low,
        setups,
        skipped,
        left_out,
        widest,
    } = plan;
    let len = config.phase_seconds;
    let rates = [(*moderate, len), (*low, len), (*moderate, len)];
    let phases: Vec<(f64, f64, f64)> = rates
        .iter()
        .enumerate()
        .map(|(i, &(rate, l))| (rate, i as f64 * l, (i + 1) as f64 * l))
        .collect();
    let phase_starts: Vec<f64> = phases.iter().map(|p| p.1).collect();
    let times = schedule(&rates, config.seed + run as u64);
    eprintln!(
        "run {}: moderate {moderate:.1}/s, low {low:.1}/s, {len} s each, {} requests per set-up",
        run + 1,
        times.len()
    );
    for (c, utilisation) in skipped {
        eprintln!(
            "run {}: skipping fixed {c}: utilisation {utilisation:.2} at moderate load",
            run + 1
        );
    }
    let dir = std::env::temp_dir().join(format!("weir-serf-phases-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    if let Some(widest) = *widest {
        burn_in(config, widest, &profile, &times, &dir, run)?;
    }
    let order = run_order(setups.len(), run);
    let mut results: Vec<Option<SetupRun>> = vec![None; setups.len()];
    for &index in &order {
        let setup = setups[index];
        let r = serve(config, setup, &profile, &dir, (&times, &phase_starts))?;
        eprintln!(
            "run {}: {setup}: mean {:.2} ms over {} answered requests, {} failed{}",
            run + 1,
            r.mean_between(0.0, f64::INFINITY),
            r.latencies.len(),
            r.failed.len(),
            if r.configs.is_empty() {
                String::new()
            } else {
                format!(
                    ", configurations {}",
                    r.configs
                        .iter()
                        .map(|(t, c)| format!("{c}@{t:.1}s"))
                        .collect::<Vec<_>>()
                        .join(" → ")
                )
            }
        );
        if let Some(calls_dir) = &config.calls_dir {
            let file = calls_dir.join(format!("run{}-{}.csv", run + 1, setup.slug()));
            write_call_trace(&r, &file)?;
        }
        results[index] = Some(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(PhasesRun {
        profile,
        phases,
        setups: results.into_iter().flatten().collect(),
        order,
        settle_seconds: config.settle_seconds,
        skipped: skipped.clone(),
        left_out: left_out.clone(),
    })
}

/// Serves `times` with `setup` on a fresh graph, warmed up first and shut down after; the
/// conditions are read per phase of `phase_starts` (seconds).
fn serve(
    config: &PhasesConfig,
    setup: Setup,
    profile: &Profile,
    dir: &Path,
    (times, phase_starts): (&[f64], &[f64]),
) -> Result<SetupRun> {
    let (graph, workload) = setup_graph(
        &config.model.1,
        setup,
        profile,
        dir,
        config.profile.executor(),
    )?;
    let warm = graph_warmup(&graph, &workload);
    let r = drive(
        &graph,
        &workload,
        times,
        setup,
        phase_starts,
        config.calls_dir.is_some(),
    );
    graph.shutdown();
    warm?;
    Ok(r)
}

/// Serves the first [`PhasesConfig::burn_in_seconds`] of `times` on a throwaway graph of
/// `widest` (the profile's largest-capacity configuration) and discards the latencies.
fn burn_in(
    config: &PhasesConfig,
    widest: Config,
    profile: &Profile,
    times: &[f64],
    dir: &Path,
    run: usize,
) -> Result<()> {
    let head: Vec<f64> = times
        .iter()
        .copied()
        .take_while(|t| *t < config.burn_in_seconds)
        .collect();
    if head.is_empty() {
        return Ok(());
    }
    let setup = Setup::Fixed(widest);
    let r = serve(config, setup, profile, dir, (&head, &[]))?;
    eprintln!(
        "run {}: burn-in ({setup}, {:.0} s, discarded): mean {:.2} ms over {} requests",
        run + 1,
        config.burn_in_seconds,
        r.mean_between(0.0, f64::INFINITY),
        r.latencies.len()
    );
    Ok(())
}

fn graph_warmup(graph: &RunningGraph, workload: &Workload) -> Result<()> {
    let report = run_load(
        graph.runtime(),
        workload,
        &LoadSpec {
            requests: 20,
            warmup: 0,
            arrival: Arrival::Closed { concurrency: 2 },
            seed: 0,
            label_output: None,
            progress: false,
        },
    );
    if report.error_count() > 0 {
        return Err(anyhow!("warm-up failed: {:?}", report.errors));
    }
    Ok(())
}

/// Runs [`PhasesConfig::runs`] comparisons.
///
/// # Errors
/// When the model cannot be profiled or served. Failed requests are recorded, not errors.
pub fn serf_phases(config: &PhasesConfig) -> Result<Vec<PhasesRun>> {
    let (name, path) = &config.model;
    let planning = ProfileOptions {
        samples: config.profile.samples * PLANNING_SAMPLES_FACTOR,
        rounds: PLANNING_ROUNDS,
        ..config.profile
    };
    eprintln!(
        "planning profile ({} requests per tuple):",
        planning.samples
    );
    let plan = Plan::from_profile(config, &profile_node(name, path, &planning)?)?;
    (0..config.runs.max(1))
        .map(|r| run_once(config, r, &plan))
        .collect()
}

fn phase_name(p: Option<usize>) -> &'static str {
    match p {
        Some(0) => "1 moderate",
        Some(1) => "2 low",
        Some(2) => "3 moderate",
        _ => "whole run",
    }
}

/// A share as a whole percentage, `–` when there is none (not Linux).
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "–".to_string(), |v| format!("{:.0} %", v * 100.0))
}

/// Per set-up and phase, the mean ONNX Runtime call and the machine's busy share: whether a set-up
/// was slower in a phase because its calls were, or because of what it decided.
fn phase_conditions_table(run: &PhasesRun) -> String {
    let mut s = format!(
        "\nPer phase, ms per ORT call / machine busy:\n\n| set-up | {} |\n|---|{}\n",
        (0..run.phases.len())
            .map(|p| phase_name(Some(p)))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(run.phases.len())
    );
    for setup in &run.setups {
        s.push_str(&format!("| {} |", setup.setup));
        for p in 0..run.phases.len() {
            match setup.phase_conditions.get(p) {
                Some(c) => s.push_str(&format!(" {:.3} / {} |", c.ms_per_call(), percent(c.busy))),
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The runs as Markdown: per run, mean latency per set-up and phase with SERF's ratio to the best
/// fixed configuration; then the medians of the per-run ratios, the ratios over all runs, and the
/// S4 targets.
pub fn phases_table(runs: &[PhasesRun]) -> String {
    let mut s = String::new();
    let scopes = [Some(0), Some(1), Some(2), None];
    for (r, run) in runs.iter().enumerate() {
        s.push_str(&format!(
            "\n### run {} — profile\n\n{}",
            r + 1,
            crate::serf::describe(&run.profile).unwrap_or_default()
        ));
        s.push_str(&format!(
            "\n### run {} — phases: {}\n\n| set-up | {} | failed | ms per ORT call | rows per call | machine busy | steal |\n|---|---|---|---|---|---|---|---|---|---|\n",
            r + 1,
            run.phases
                .iter()
                .map(|(rate, a, b)| format!("{rate:.1}/s for {a:.0}–{b:.0} s"))
                .collect::<Vec<_>>()
                .join(", "),
            scopes
                .iter()
                .map(|p| format!("{} ms", phase_name(*p)))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        for (i, setup) in run.setups.iter().enumerate() {
            s.push_str(&format!("| {} |", setup.setup));
            for p in scopes {
                s.push_str(&format!(" {:.2} |", run.mean(i, p, false)));
            }
            let c = &setup.conditions;
            s.push_str(&format!(
                " {} | {:.3} | {:.2} | {} | {} |\n",
                setup.failed.len(),
                c.ms_per_call(),
                c.rows_per_call(),
                percent(c.busy),
                percent(c.steal)
            ));
        }
        s.push_str("| **SERF / best fixed** |");
        for p in scopes {
            let (ratio, best) = run.ratio_to_best(p, false);
            s.push_str(&format!(" **{ratio:.3}** ({best}) |"));
        }
        s.push_str(" | | | | |\n| SERF / best fixed, settled |");
        for p in scopes.iter().take(3) {
            let (ratio, best) = run.ratio_to_best(*p, true);
            s.push_str(&format!(" {ratio:.3} ({best}) |"));
        }
        s.push_str(" | | | | | |\n");
        s.push_str(&phase_conditions_table(run));
        s.push_str(&format!(
            "\nOrder run: {}.\n",
            run.order
                .iter()
                .filter_map(|&i| run.setups.get(i))
                .map(|x| x.setup.to_string())
                .collect::<Vec<_>>()
                .join(", then ")
        ));
        for (c, utilisation) in &run.skipped {
            s.push_str(&format!(
                "\nNot run: fixed {c}, profiled utilisation {utilisation:.2} at moderate load (≥ {UNSTABLE_UTILISATION}: its queue only grows).\n"
            ));
        }
        if !run.left_out.is_empty() {
            s.push_str(&format!(
                "\nNot run: fixed {}, left out of the fixed set-ups asked for.\n",
                run.left_out
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(serf) = run.setups.first() {
            s.push_str(&format!(
                "\nSERF's configurations: {}\n",
                serf.configs
                    .iter()
                    .map(|(t, c)| format!("{c} at {t:.1} s"))
                    .collect::<Vec<_>>()
                    .join(" → ")
            ));
            if let Some(p) = &serf.serf {
                s.push_str(&online_summary(p));
            }
        }
        for other in run.setups.iter().filter(|x| x.setup.is_auto()).skip(1) {
            let whose = match other.setup {
                Setup::SerfThreads(_) => "The control's",
                _ => "Also",
            };
            s.push_str(&format!(
                "\n{whose} ({}) configurations: {}\n",
                other.setup,
                other
                    .configs
                    .iter()
                    .map(|(t, c)| format!("{c} at {t:.1} s"))
                    .collect::<Vec<_>>()
                    .join(" → ")
            ));
        }
    }
    s.push_str(&format!(
        "\n### median over {} run(s): SERF's mean latency / the best fixed configuration's\n\nPer run: the median of each run's ratio to that run's best fixed set-up in the scope (a minimum of noisy draws, biased against any policy that commits before it sees the run). Over all runs: SERF's mean latency over every request of every run against the fixed configuration whose mean over all runs is lowest (each set-up's mean latency estimated from all runs), with a 95 % interval from {BOOTSTRAP_DRAWS} bootstrap resamples of the runs (a target is resolved only when the whole interval is on its side).\n\n| scope | per run, whole phase | per run, settled (after {} s) | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval | target |\n|---|---|---|---|---|---|---|---|\n",
        runs.len(),
        runs.first().map_or(0.0, |r| r.settle_seconds)
    ));
    for p in scopes {
        let over_all_runs = |settled: bool| pooled_cells(runs, Compared::Serf, p, settled);
        let whole = median(runs.iter().map(|r| r.ratio_to_best(p, false).0).collect());
        let settled = if p.is_some() {
            format!(
                "{:.3}",
                median(runs.iter().map(|r| r.ratio_to_best(p, true).0).collect())
            )
        } else {
            String::new()
        };
        let target = if p.is_some() {
            "≤ 1.05 (within 5 %)"
        } else {
            "< 1 (beats every fixed)"
        };
        s.push_str(&format!(
            "| {} | {whole:.3} | {settled} | {} | {} | {target} |\n",
            phase_name(p),
            over_all_runs(false),
            if p.is_some() {
                over_all_runs(true)
            } else {
                " | ".to_string()
            }
        ));
    }
    let control = runs
        .iter()
        .flat_map(|r| r.setups.iter())
        .find_map(|x| match x.setup {
            Setup::SerfThreads(threads) => Some(threads),
            _ => None,
        });
    if let Some(threads) = control {
        s.push_str(&format!(
            "\n### the control: SERF auto with t={threads} only / the best fixed configuration with t={threads}\n\nWhat the `auto` machinery costs apart from SERF's choices: where the control ran the fixed configuration's own configuration throughout (its configurations per run above), a ratio above 1 is the machinery's cost plus the drift between the two set-ups. Pooled over all runs as above.\n\n| scope | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval |\n|---|---|---|---|---|\n"
        ));
        push_pooled_rows(&mut s, runs, Compared::Control(threads), &scopes);
    }
    let capped = runs
        .iter()
        .flat_map(|r| r.setups.iter())
        .find_map(|x| match x.setup {
            Setup::SerfCapped(permille) => Some(permille),
            _ => None,
        });
    if let Some(permille) = capped {
        let cap = f64::from(permille) / 1000.0;
        s.push_str(&format!(
            "\n### SERF auto with utilisation cap {cap:.3} / the best fixed configuration\n\nThe same SERF under `parallelism: {{auto: {{max_utilisation: {cap}}}}}`, served in the same runs as the default cap's, so both meet the same minutes of the machine; set beside the first table's SERF row it says which cap served this host better. Pooled over all runs as above.\n\n| scope | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval |\n|---|---|---|---|---|\n"
        ));
        push_pooled_rows(&mut s, runs, Compared::Capped(permille), &scopes);
    }
    s
}

/// One row per scope of `compared`'s pooled table: whole-phase cells, and settled ones for the
/// phases (not the whole run).
fn push_pooled_rows(
    s: &mut String,
    runs: &[PhasesRun],
    compared: Compared,
    scopes: &[Option<usize>],
) {
    for &p in scopes {
        let settled = if p.is_some() {
            pooled_cells(runs, compared, p, true)
        } else {
            " | ".to_string()
        };
        s.push_str(&format!(
            "| {} | {} | {settled} |\n",
            phase_name(p),
            pooled_cells(runs, compared, p, false)
        ));
    }
}

/// `ratio (config) | interval` cells of [`ratio_over_all_runs`] and [`ratio_interval`].
fn pooled_cells(runs: &[PhasesRun], compared: Compared, p: Option<usize>, settled: bool) -> String {
    let ratio = ratio_over_all_runs(runs, compared, p, settled).map_or_else(
        || "–".to_string(),
        |(ratio, config)| format!("{ratio:.3} ({config})"),
    );
    let interval = ratio_interval(runs, compared, p, settled, INTERVAL_SEED)
        .map_or_else(|| "–".to_string(), |(lo, hi)| format!("{lo:.3}–{hi:.3}"));
    format!("{ratio} | {interval}")
}

/// One set-up's latencies in one run and scope, summed: what pooling across runs needs.
#[derive(Debug, Clone, Copy)]
struct ScopeTotal {
    setup: Setup,
    sum_ms: f64,
    answered: usize,
    failed: usize,
}

/// Every set-up's [`ScopeTotal`] in `run` for scope `phase` (`None`: whole run).
fn scope_totals(run: &PhasesRun, phase: Option<usize>, settled: bool) -> Vec<ScopeTotal> {
    (0..run.setups.len())
        .map(|i| {
            let (sum_ms, answered) = run
                .latencies(i, phase, settled)
                .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
            ScopeTotal {
                setup: run.setups[i].setup,
                sum_ms,
                answered,
                failed: run.failed(i, phase, settled),
            }
        })
        .collect()
}

/// Which set-up's mean the report pools over runs, and against which fixed configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// SERF against every fixed configuration.
    Serf,
    /// The control [`Setup::SerfThreads`] against the fixed configurations with its threads.
    Control(usize),
    /// SERF under another utilisation cap ([`Setup::SerfCapped`]) against every fixed configuration.
    Capped(u16),
}

impl Compared {
    fn numerator(self) -> Setup {
        match self {
            Compared::Serf => Setup::Serf,
            Compared::Control(threads) => Setup::SerfThreads(threads),
            Compared::Capped(permille) => Setup::SerfCapped(permille),
        }
    }

    fn admits(self, fixed: Config) -> bool {
        match self {
            Compared::Serf | Compared::Capped(_) => true,
            Compared::Control(threads) => fixed.threads == threads,
        }
    }
}

/// `compared`'s pooled mean latency over the lowest pooled mean among the fixed configurations it
/// admits that failed no request in any of `runs` (each run a list of [`ScopeTotal`]s), and that
/// configuration.
fn pooled_ratio<'a>(
    runs: impl Iterator<Item = &'a [ScopeTotal]> + Clone,
    compared: Compared,
) -> Option<(f64, Config)> {
    let pooled = |setup: Setup| {
        let (sum, n, failed) = runs
            .clone()
            .flat_map(|r| r.iter().filter(move |t| t.setup == setup))
            .fold((0.0, 0usize, 0usize), |(s, n, f), t| {
                (s + t.sum_ms, n + t.answered, f + t.failed)
            });
        (n > 0).then(|| (sum / n as f64, failed))
    };
    let mut fixed: Vec<Config> = runs
        .clone()
        .flat_map(|r| r.iter())
        .filter_map(|t| match t.setup {
            Setup::Fixed(c) if compared.admits(c) => Some(c),
            _ => None,
        })
        .collect();
    fixed.sort();
    fixed.dedup();
    let (best, config) = fixed
        .into_iter()
        .filter_map(|c| match pooled(Setup::Fixed(c)) {
            Some((mean, 0)) => Some((mean, c)),
            _ => None,
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((pooled(compared.numerator())?.0 / best, config))
}

/// `compared`'s (SERF's, or the control's) mean latency over every request of every run in scope
/// `phase` (`None`: whole run) over the lowest such mean among the fixed configurations it admits
/// (each over the runs it ran in), and that
/// configuration: each set-up's mean latency estimated from all runs, compared with the
/// configuration that is best for the scope on average rather than with the luckiest fixed draw of
/// each run. A fixed configuration that failed requests in the scope in any run is not a candidate.
pub fn ratio_over_all_runs(
    runs: &[PhasesRun],
    compared: Compared,
    phase: Option<usize>,
    settled: bool,
) -> Option<(f64, Config)> {
    let totals: Vec<Vec<ScopeTotal>> = runs
        .iter()
        .map(|r| scope_totals(r, phase, settled))
        .collect();
    pooled_ratio(totals.iter().map(Vec::as_slice), compared)
}

/// Bootstrap draws behind [`ratio_interval`].
pub const BOOTSTRAP_DRAWS: usize = 2000;

/// The seed of the report's bootstrap resamples.
const INTERVAL_SEED: u64 = 0x5E8F;

/// A 95 % interval for [`ratio_over_all_runs`]: the 2.5th and 97.5th percentiles of the same ratio
/// over [`BOOTSTRAP_DRAWS`] resamples of the runs (drawn with replacement, as many as there are;
/// seeded, so a table rebuilt from the same runs is the same). The runs are the unit because the
/// machine drifts between set-ups served minutes apart, which is the noise that decides whether a
/// few per cent are resolved; requests within one set-up are not independent of that drift. `None`
/// with fewer than two runs or when no resample has a ratio.
pub fn ratio_interval(
    runs: &[PhasesRun],
    compared: Compared,
    phase: Option<usize>,
    settled: bool,
    seed: u64,
) -> Option<(f64, f64)> {
    if runs.len() < 2 {
        return None;
    }
    let totals: Vec<Vec<ScopeTotal>> = runs
        .iter()
        .map(|r| scope_totals(r, phase, settled))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ratios: Vec<f64> = (0..BOOTSTRAP_DRAWS)
        .filter_map(|_| {
            let picks: Vec<usize> = (0..totals.len())
                .map(|_| rng.random_range(0..totals.len()))
                .collect();
            pooled_ratio(picks.iter().map(|&i| totals[i].as_slice()), compared).map(|(r, _)| r)
        })
        .filter(|r| r.is_finite())
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

/// SERF's online re-profiling at the end of its run: counters, and per tuple the offline and the
/// measured service time, overall and per load band (bands with at least `BAND_MIN_SAMPLES` samples).
fn online_summary(p: &ParallelismSnapshot) -> String {
    let mut s = format!(
        "\nOnline re-profiling: {} re-evaluations, {} ranking changes, {} explorations, {} backlog switches, {} samples dropped, {} left out while a switch settled.\n\n| tuple (running × threads) | samples | offline ms | measured ms | measured ms by load (requests/s: ms, samples) |\n|---|---|---|---|---|\n",
        p.profile_updates, p.ranking_changes, p.explorations, p.backlog_switches, p.samples_dropped, p.samples_settling
    );
    for r in &p.service_rates {
        let by_load: Vec<String> = p
            .service_by_load
            .iter()
            .filter(|b| b.running == r.running && b.threads == r.threads)
            .filter(|b| b.samples >= BAND_MIN_SAMPLES)
            .map(|b| {
                format!(
                    "{:.0}–{:.0}: {:.3}, {}",
                    b.load.0,
                    b.load.1,
                    b.mean_s * 1e3,
                    b.samples
                )
            })
            .collect();
        s.push_str(&format!(
            "| {} × {} | {} | {:.3} | {} | {} |\n",
            r.running,
            r.threads,
            r.samples,
            1e3 / r.offline,
            r.measured
                .map_or_else(|| "–".to_string(), |m| format!("{:.3}", 1e3 / m)),
            if by_load.is_empty() {
                "–".to_string()
            } else {
                by_load.join("; ")
            }
        ));
    }
    s
}

/// Load bands with fewer samples than this are left out of the report (the scheduler's own threshold).
const BAND_MIN_SAMPLES: u64 = 20;

const COLORS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// Mean latency per time bin against send time, one line per set-up (SERF thick), phase
/// boundaries as vertical lines.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_phases(run: &PhasesRun, bin_seconds: f64, path: &Path) -> Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("{e}");
    let end = run.phases.last().map_or(1.0, |p| p.2);
    let bins = (end / bin_seconds).ceil().max(1.0) as usize;
    let series: Vec<(String, Vec<(f64, f64)>)> = run
        .setups
        .iter()
        .map(|s| {
            let points = (0..bins)
                .filter_map(|b| {
                    let (from, to) = (b as f64 * bin_seconds, (b + 1) as f64 * bin_seconds);
                    let m = s.mean_between(from, to);
                    m.is_finite().then_some(((from + to) / 2.0, m))
                })
                .collect();
            (s.setup.to_string(), points)
        })
        .collect();
    // Logarithmic: a fixed configuration that collapses under moderate load queues to seconds,
    // and on a linear axis SERF and the configuration it tracks would be one flat line.
    let ys = || series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y));
    let top = ys().fold(1.0, f64::max) * 1.2;
    let bottom = ys().filter(|y| *y > 0.0).fold(top, f64::min) * 0.8;
    let root = BitMapBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "{}: mean latency per {bin_seconds:.0} s, moderate → low → moderate load",
                run.profile.label.as_deref().unwrap_or("model")
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(
            0.0..end,
            (bottom..top)
                .log_scale()
                .with_key_points(super::plot::log_ticks(bottom, top)),
        )
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("mean latency (ms, log scale)")
        .y_label_formatter(&|v| format!("{}", (v * 1000.0).round() / 1000.0))
        .light_line_style(WHITE)
        .draw()
        .map_err(|x| e(&x))?;
    for (_, a, _) in run.phases.iter().skip(1) {
        chart
            .draw_series(LineSeries::new(
                vec![(*a, bottom), (*a, top)],
                BLACK.mix(0.4).stroke_width(1),
            ))
            .map_err(|x| e(&x))?;
    }
    for (i, (label, points)) in series.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let width = if i == 0 { 3 } else { 1 };
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(width)))
            .map_err(|x| e(&x))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(width))
            });
    }
    super::plot::draw_legend(&mut chart)?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_follows_the_phase_rates() {
        let times = schedule(&[(200.0, 10.0), (20.0, 10.0), (200.0, 10.0)], 1);
        let count = |a: f64, b: f64| times.iter().filter(|t| **t >= a && **t < b).count() as f64;
        assert!((count(0.0, 10.0) / 2000.0 - 1.0).abs() < 0.1);
        assert!((count(10.0, 20.0) / 200.0 - 1.0).abs() < 0.3);
        assert!((count(20.0, 30.0) / 2000.0 - 1.0).abs() < 0.1);
        assert!(times.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            times,
            schedule(&[(200.0, 10.0), (20.0, 10.0), (200.0, 10.0)], 1)
        );
    }

    /// `setup` having answered `n` requests, sent at 1.0, 1.5, … s, each in `ms`.
    fn served(setup: Setup, n: usize, ms: f64) -> SetupRun {
        SetupRun {
            setup,
            latencies: (0..n).map(|k| (1.0 + 0.5 * k as f64, ms)).collect(),
            failed: vec![],
            configs: vec![],
            serf: None,
            conditions: Conditions::default(),
            calls: Vec::new(),
            phase_conditions: Vec::new(),
        }
    }

    #[test]
    fn the_call_trace_gives_each_call_the_configuration_it_began_in() {
        let call = |began_s: f64, ms: f64, idle: Option<f64>| TracedCall {
            began_s,
            ms,
            idle_before_ms: idle,
        };
        let serf = SetupRun {
            configs: vec![(0.0, Config::new(2, 1)), (3.0, Config::new(1, 2))],
            calls: vec![call(0.5, 5.5, None), call(3.25, 3.5, Some(1.25))],
            ..served(Setup::Serf, 0, 0.0)
        };
        assert_eq!(serf.config_at(0.5), (Some(Config::new(2, 1)), 0.5));
        assert_eq!(serf.config_at(3.25), (Some(Config::new(1, 2)), 0.25));
        let fixed = served(Setup::Fixed(Config::new(1, 2)), 0, 0.0);
        assert_eq!(fixed.config_at(7.0), (Some(Config::new(1, 2)), 7.0));
        let dir = std::env::temp_dir().join(format!("weir-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("run1-{}.csv", serf.setup.slug()));
        write_call_trace(&serf, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            text,
            "began_s,since_switch_s,ms,idle_before_ms,concurrency,threads\n\
             0.500000,0.500,5.5000,,2,1\n\
             3.250000,0.250,3.5000,1.250,1,2\n"
        );
        assert_eq!(Setup::SerfCapped(600).slug(), "serf-cap-600");
        assert_eq!(Setup::Fixed(Config::new(1, 2)).slug(), "fixed-1x2");
    }

    /// A run of one phase (0–2 s) in which SERF and the fixed `(1, 2)` and `(2, 1)` each answered
    /// `n` requests, each set-up's in its own latency (ms).
    fn one_phase_run(n: usize, serf: f64, fixed_1_2: f64, fixed_2_1: f64) -> PhasesRun {
        PhasesRun {
            profile: Profile::from_rates(2, &[(1, vec![1.0])]).unwrap(),
            phases: vec![(1.0, 0.0, 2.0)],
            setups: vec![
                served(Setup::Serf, n, serf),
                served(Setup::Fixed(Config::new(1, 2)), n, fixed_1_2),
                served(Setup::Fixed(Config::new(2, 1)), n, fixed_2_1),
            ],
            order: vec![0, 1, 2],
            settle_seconds: 0.0,
            skipped: vec![],
            left_out: vec![],
        }
    }

    #[test]
    fn the_ratio_over_all_runs_compares_with_the_configuration_best_on_average() {
        let b = Config::new(2, 1);
        let run = |serf, fa, fb| one_phase_run(1, serf, fa, fb);
        // (1, 2) is lucky once (5 ms) but otherwise 14–15 ms; (2, 1) is steadily about 10 ms.
        let runs = vec![
            run(10.0, 5.0, 10.0),
            run(10.5, 14.0, 9.5),
            run(9.8, 15.0, 10.2),
        ];
        // Per run: 2.0, 1.105, 0.98 → median 1.105.
        let per_run = median(
            runs.iter()
                .map(|r| r.ratio_to_best(Some(0), false).0)
                .collect(),
        );
        assert!((per_run - 10.5 / 9.5).abs() < 1e-12);
        // Over all runs: SERF 10.1 against (2, 1)'s 9.9 ((1, 2): 11.33).
        let (ratio, best) = ratio_over_all_runs(&runs, Compared::Serf, Some(0), false).unwrap();
        assert_eq!(best, b);
        assert!((ratio - 30.3 / 29.7).abs() < 1e-12, "{ratio}");
        assert_eq!(ratio_over_all_runs(&[], Compared::Serf, None, false), None);
    }

    #[test]
    fn the_interval_resolves_a_steady_margin_and_not_a_margin_within_the_run_to_run_spread() {
        let run = |serf, fb| one_phase_run(2, serf, 50.0, fb);
        // The machine's speed moves both set-ups of a run by up to 20 %, SERF is 5 % faster in each
        // run: every resample is below 1.
        let steady: Vec<PhasesRun> = [1.0, 1.2, 0.9, 1.1, 1.0, 0.85]
            .iter()
            .map(|speed| run(9.5 * speed, 10.0 * speed))
            .collect();
        let (lo, hi) = ratio_interval(&steady, Compared::Serf, None, false, 1).unwrap();
        assert!(lo <= hi && hi < 1.0, "{lo}–{hi}");
        let (ratio, _) = ratio_over_all_runs(&steady, Compared::Serf, None, false).unwrap();
        assert!(lo <= ratio && ratio <= hi);
        // The same mean margin made of ±15 % swings from run to run is not resolved.
        let swinging: Vec<PhasesRun> = [0.8, 1.1, 0.8, 1.1, 0.8, 1.1]
            .iter()
            .map(|r| run(10.0 * r, 10.0))
            .collect();
        let (lo, hi) = ratio_interval(&swinging, Compared::Serf, None, false, 1).unwrap();
        assert!(lo < 1.0 && hi > 1.0, "{lo}–{hi}");
        // Reproducible, and undefined for a single run.
        assert_eq!(
            ratio_interval(&swinging, Compared::Serf, None, false, 1),
            Some((lo, hi))
        );
        assert_eq!(
            ratio_interval(&steady[..1], Compared::Serf, None, false, 1),
            None
        );
    }

    fn plan_config(rates: Option<(f64, f64)>, fixed: Vec<Config>) -> PhasesConfig {
        PhasesConfig {
            model: ("m".into(), PathBuf::from("m.onnx")),
            phase_seconds: 60.0,
            moderate: 0.55,
            low: 0.2,
            rates,
            fixed,
            settle_seconds: 8.0,
            burn_in_seconds: 0.0,
            bin_seconds: 2.0,
            runs: 1,
            seed: 1,
            profile: ProfileOptions::default(),
            control_threads: None,
            also_cap: None,
            calls_dir: None,
        }
    }

    /// `--also-max-utilisation`: a second SERF set-up with that cap runs in the same plan, is never
    /// anyone's "best fixed", is compared with every fixed configuration, and gets its own table.
    #[test]
    fn a_second_cap_runs_beside_serf_and_is_compared_with_every_fixed_configuration() {
        let profile = Profile::from_rates(2, &[(1, vec![100.0, 90.0]), (2, vec![160.0])]).unwrap();
        let (c12, c21) = (Config::new(1, 2), Config::new(2, 1));
        let config = PhasesConfig {
            also_cap: Some(0.6),
            ..plan_config(Some((150.0, 40.0)), vec![c12, c21])
        };
        let plan = Plan::from_profile(&config, &profile).unwrap();
        assert_eq!(
            plan.setups,
            vec![
                Setup::Serf,
                Setup::SerfCapped(600),
                Setup::Fixed(c12),
                Setup::Fixed(c21)
            ]
        );
        assert_eq!(Setup::SerfCapped(600).to_string(), "SERF auto, cap 0.600");

        // SERF 10 ms, the 0.6 cap 8 ms, fixed (1, 2) 9 ms, fixed (2, 1) 10 ms.
        let mut run = one_phase_run(4, 10.0, 9.0, 10.0);
        run.setups.insert(1, served(Setup::SerfCapped(600), 4, 8.0));
        assert_eq!(run.ratio_to_best(Some(0), false), (10.0 / 9.0, c12));
        let runs = [run];
        let (capped, with) =
            ratio_over_all_runs(&runs, Compared::Capped(600), Some(0), false).unwrap();
        assert_eq!(with, c12);
        assert!((capped - 8.0 / 9.0).abs() < 1e-12);
        let table = phases_table(&runs);
        assert!(
            table.contains("SERF auto with utilisation cap 0.600 / the best fixed"),
            "{table}"
        );
        assert!(
            table.contains("| 1 moderate | 0.889 (c=1 t=2) |"),
            "{table}"
        );
    }

    #[test]
    fn the_control_runs_auto_over_one_thread_count_and_is_compared_only_with_its_own() {
        let profile = Profile::from_rates(2, &[(1, vec![100.0, 90.0]), (2, vec![160.0])]).unwrap();
        let cut = with_threads_only(&profile, 1).unwrap();
        let configs: Vec<Config> = cut.candidates().into_iter().map(|(c, _)| c).collect();
        assert_eq!(configs, vec![Config::new(1, 1), Config::new(2, 1)]);
        assert!(cut.validate().is_ok());
        let err = with_threads_only(&profile, 3).unwrap_err().to_string();
        assert!(
            err.contains("no configuration with 3 intra-op threads"),
            "{err}"
        );

        let c21 = Config::new(2, 1);
        let config = PhasesConfig {
            control_threads: Some(1),
            ..plan_config(Some((150.0, 40.0)), vec![Config::new(1, 2), c21])
        };
        let plan = Plan::from_profile(&config, &profile).unwrap();
        assert_eq!(
            plan.setups,
            vec![
                Setup::Serf,
                Setup::SerfThreads(1),
                Setup::Fixed(Config::new(1, 2)),
                Setup::Fixed(c21)
            ]
        );
        let config = PhasesConfig {
            control_threads: Some(4),
            ..config
        };
        assert!(Plan::from_profile(&config, &profile).is_err());

        // SERF 10 ms, the control 8 ms, fixed (1, 2) 9 ms, fixed (2, 1) 10 ms.
        let mut run = one_phase_run(4, 10.0, 9.0, 10.0);
        run.setups.insert(1, served(Setup::SerfThreads(1), 4, 8.0));
        // The control is never SERF's "best fixed" ...
        assert_eq!(
            run.ratio_to_best(Some(0), false),
            (10.0 / 9.0, Config::new(1, 2))
        );
        let runs = [run];
        let (serf, best) = ratio_over_all_runs(&runs, Compared::Serf, Some(0), false).unwrap();
        assert_eq!(best, Config::new(1, 2));
        assert!((serf - 10.0 / 9.0).abs() < 1e-12);
        // ... and is itself compared with (2, 1), the only fixed configuration of one thread.
        let (control, with) =
            ratio_over_all_runs(&runs, Compared::Control(1), Some(0), false).unwrap();
        assert_eq!(with, c21);
        assert!((control - 0.8).abs() < 1e-12);
        let table = phases_table(&runs);
        assert!(
            table.contains("the control: SERF auto with t=1 only"),
            "{table}"
        );
        assert!(
            table.contains("| 1 moderate | 0.800 (c=2 t=1) |"),
            "{table}"
        );
    }

    #[test]
    fn the_plan_takes_given_rates_and_runs_only_the_fixed_set_ups_asked_for() {
        // Capacities c·μ_c: (1,1) 100/s, (1,2) 160/s, (2,1) 2 × 90 = 180/s.
        let profile = Profile::from_rates(2, &[(1, vec![100.0, 90.0]), (2, vec![160.0])]).unwrap();
        let by_fraction = Plan::from_profile(&plan_config(None, vec![]), &profile).unwrap();
        assert!((by_fraction.moderate - 99.0).abs() < 1e-9);
        assert!((by_fraction.low - 36.0).abs() < 1e-9);
        assert_eq!(by_fraction.skipped.len(), 1, "(1,1) at 0.99 is unstable");
        assert_eq!(by_fraction.setups.len(), 3);
        assert!(by_fraction.left_out.is_empty());

        let (c11, c12, c21) = (Config::new(1, 1), Config::new(1, 2), Config::new(2, 1));
        let given = Plan::from_profile(&plan_config(Some((150.0, 40.0)), vec![c21, c11]), &profile)
            .unwrap();
        assert_eq!((given.moderate, given.low), (150.0, 40.0));
        assert_eq!(given.setups, vec![Setup::Serf, Setup::Fixed(c21)]);
        assert_eq!(given.left_out, vec![c12]);
        assert_eq!(
            given.skipped.len(),
            1,
            "(1,1) is asked for but unstable at 150/s"
        );
        assert_eq!(given.widest, Some(c21));

        let err = Plan::from_profile(&plan_config(None, vec![Config::new(3, 1)]), &profile)
            .unwrap_err()
            .to_string();
        assert!(err.contains("c=3 t=1 is not in the profile"), "{err}");
    }

    #[test]
    fn the_order_rotates_so_every_set_up_runs_once_in_every_position() {
        assert_eq!(run_order(3, 0), vec![0, 1, 2]);
        assert_eq!(run_order(3, 1), vec![1, 2, 0]);
        assert_eq!(run_order(3, 2), vec![2, 0, 1]);
        assert_eq!(run_order(3, 3), run_order(3, 0));
        for position in 0..3 {
            let mut firsts: Vec<usize> = (0..3).map(|r| run_order(3, r)[position]).collect();
            firsts.sort_unstable();
            assert_eq!(firsts, vec![0, 1, 2], "position {position}");
        }
        assert_eq!(run_order(2, 1), vec![1, 0]);
    }

    #[test]
    fn online_summary_shows_offline_and_measured_times() {
        use weir_operators::model::{LoadServiceRate, ServiceRate};
        let p = ParallelismSnapshot {
            concurrency: 2,
            threads: 1,
            switches: 3,
            arrival_rate: 80.0,
            profile_updates: 12,
            ranking_changes: 2,
            explorations: 1,
            backlog_switches: 0,
            samples_dropped: 0,
            samples_settling: 0,
            reads_admission: true,
            waiting: 0,
            service_rates: vec![
                ServiceRate {
                    running: 1,
                    threads: 1,
                    samples: 40,
                    measured: Some(100.0),
                    offline: 125.0,
                },
                ServiceRate {
                    running: 1,
                    threads: 2,
                    samples: 3,
                    measured: None,
                    offline: 200.0,
                },
            ],
            service_by_load: vec![
                LoadServiceRate {
                    running: 1,
                    threads: 1,
                    load: (20.0, 25.0),
                    samples: 30,
                    mean_s: 0.0085,
                },
                LoadServiceRate {
                    running: 1,
                    threads: 1,
                    load: (100.0, 125.0),
                    samples: 10,
                    mean_s: 0.012,
                },
            ],
            standings: Vec::new(),
        };
        let s = online_summary(&p);
        assert!(
            s.contains("12 re-evaluations, 2 ranking changes, 1 explorations, 0 backlog switches"),
            "{s}"
        );
        assert!(
            s.contains("| 1 × 1 | 40 | 8.000 | 10.000 | 20–25: 8.500, 30 |"),
            "{s}"
        );
        assert!(s.contains("| 1 × 2 | 3 | 5.000 | – | – |"), "{s}");
    }

    #[test]
    fn the_phase_table_gives_each_set_ups_calls_and_busy_share_per_phase() {
        let mut run = one_phase_run(4, 5.0, 6.0, 7.0);
        run.setups[0].phase_conditions = vec![Conditions {
            calls: 4,
            rows: 4,
            call_seconds: 0.02,
            busy: Some(0.5),
            steal: Some(0.0),
        }];
        let s = phase_conditions_table(&run);
        assert!(s.contains("| set-up | 1 moderate |"), "{s}");
        assert!(s.contains("| SERF auto | 5.000 / 50 % |"), "{s}");
        // A set-up without readings shows none rather than zeros.
        assert!(s.contains("| fixed c=1 t=2 | – |"), "{s}");
    }

    #[test]
    fn ratios_compare_serf_with_the_best_fixed_per_phase() {
        let run = |setup, lat: [f64; 2]| SetupRun {
            latencies: vec![(1.0, lat[0]), (3.0, lat[1])],
            ..served(setup, 0, 0.0)
        };
        let r = PhasesRun {
            profile: Profile::from_rates(2, &[(1, vec![1.0])]).unwrap(),
            phases: vec![(1.0, 0.0, 2.0), (1.0, 2.0, 4.0)],
            setups: vec![
                run(Setup::Serf, [10.0, 10.0]),
                run(Setup::Fixed(Config::new(1, 1)), [20.0, 9.0]),
                run(Setup::Fixed(Config::new(2, 1)), [8.0, 40.0]),
            ],
            order: vec![0, 1, 2],
            settle_seconds: 0.0,
            skipped: vec![],
            left_out: vec![],
        };
        assert_eq!(
            r.ratio_to_best(Some(0), false),
            (10.0 / 8.0, Config::new(2, 1))
        );
        assert_eq!(
            r.ratio_to_best(Some(1), false),
            (10.0 / 9.0, Config::new(1, 1))
        );
        assert_eq!(
            r.ratio_to_best(None, false),
            (10.0 / 14.5, Config::new(1, 1))
        );

        // A configuration that shed load in a phase is no candidate there (nor over the whole run),
        // however fast the requests it did answer; elsewhere it still is.
        let mut shed = r.clone();
        shed.setups[2].failed = vec![0.5, 1.5];
        assert_eq!(shed.failed(2, Some(0), false), 2);
        assert_eq!(shed.failed(2, Some(1), false), 0);
        assert_eq!(
            shed.ratio_to_best(Some(0), false),
            (10.0 / 20.0, Config::new(1, 1))
        );
        assert_eq!(
            shed.ratio_to_best(None, false),
            (10.0 / 14.5, Config::new(1, 1))
        );
        shed.setups[1].failed = vec![1.0];
        assert!(shed.ratio_to_best(Some(0), false).0.is_nan());
        assert_eq!(
            ratio_over_all_runs(&[shed], Compared::Serf, Some(1), false),
            Some((10.0 / 9.0, Config::new(1, 1)))
        );
    }
}
