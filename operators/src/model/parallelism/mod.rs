//! Live parallelism of one model node's executor ("SERF: Efficient Scheduling for Fast DNN Serving
//! via Judicious Parallelism", §IV-A and §IV-D): the switchboard the executor's threads read their
//! configuration from, and the control loop that feeds arrivals to `weir_serf`'s scheduler and
//! applies its switches.
//!
//! **Switching** ([`Switchboard`]). A switchable executor starts `c_max` threads (the largest
//! concurrency among its configurations). Thread `i` owns one session per thread count `t` it can
//! run with (every `t` of a configuration `(c, t)` with `c > i`), all created and warmed at start,
//! so a switch never loads a model or runs a cold session. Thread `i` takes jobs only while
//! `i < c`; otherwise it parks on a condition variable. A switch to `(c, t)` is a write under a lock plus a wake-up: jobs taken after it run on
//! the `t`-thread session, and threads `≥ c` stop taking jobs. Batches already running keep their
//! session and threads. Jobs wait in the one shared queue, never in a thread, so a smaller `c`
//! strands nothing: the remaining active threads take them. A job dequeued at the very instant of a
//! switch runs to completion on the thread that took it (it was in flight at the switch).
//!
//! **Control loop** ([`Controller`]). A plain thread per `auto` node (not a tokio task: the executor
//! lives outside any async runtime, e.g. in `weir executor` or a test), owned by the executor and
//! stopped when it is dropped. Submitted rows are counted by the executor into an atomic counter;
//! every `period / 10` (at least 10 ms) the thread moves the count into
//! [`weir_serf::scheduler::Scheduler`] with the current time, polls it, and applies a decided switch,
//! logging it at INFO with node, from, to, `λ̂` and the reason. What it costs on the request path is
//! one relaxed atomic add per submitted job. The waiting requests the backlog guard watches are read
//! each tick too: the executor's queue, or — for a graph's only model node, started with the
//! graph's admission counters ([`AutoOptions::admission`]) — the larger of that and every request
//! admitted to the graph and not answered beyond the `c` the sessions hold, and then the arrivals
//! are admission's count as well. A dataflow starved of CPU holds requests before they reach the
//! executor, where neither its queue nor its arrival count sees them; admission sees them at once.
//!
//! **Online re-profiling** ([`weir_serf::online`]). Each executor thread brackets its calls with
//! [`Switchboard::begin_call`] / [`Switchboard::end_call`]: a short lock keeps the number of calls
//! running and its integral over time, so a call knows the mean number of calls that ran with it
//! (time-weighted, rounded: the tuple `i` it counts for), its duration per row, and how long after
//! the last switch it began (zero when one came while it ran: the scheduler leaves out the calls of
//! a switch's first quarter second, `weir_serf::online`, *Settling after a switch*). Samples wait in a
//! bounded buffer (beyond [`SAMPLE_BUFFER`] between two ticks they are dropped and counted); the
//! control thread hands them to the scheduler on each tick, which blends them into the profile,
//! re-evaluates every few updates and may explore (see `weir_serf::scheduler`). A re-evaluation that
//! changes the ranking is logged at INFO; counters and the measured rates are in the snapshot.
//! Batched calls of more than one row are not samples: the model has no batching, and a batch's
//! time is not one request's service time.
//!
//! This file holds the switchboard and the gauges; `control.rs` the control loop.

mod control;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};
use weir_engine::runtime::AdmissionGauge;
use weir_serf::config::Config;
use weir_serf::online::BandEstimate;
use weir_serf::scheduler::{Scheduler, SchedulerOptions, ServedCall, Standing};
use weir_serf::table::Candidates;

pub mod metrics;

pub(crate) use control::Controller;

/// Service-time samples kept between two control ticks; more are dropped (and counted).
pub const SAMPLE_BUFFER: usize = 4096;

/// Why a configuration could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParallelismError {
    /// The executor was started with one fixed configuration.
    #[error("node `{node}`: the executor runs a fixed configuration and cannot switch")]
    Fixed {
        /// Node id.
        node: String,
    },
    /// The configuration's sessions were not created at start.
    #[error("node `{node}`: concurrency {concurrency} × {threads} threads is not among the configurations prepared at start")]
    Unknown {
        /// Node id.
        node: String,
        /// Concurrency asked for.
        concurrency: usize,
        /// Threads asked for.
        threads: usize,
    },
}

/// What `parallelism: auto` starts an executor with.
#[derive(Debug, Clone)]
pub struct AutoOptions {
    /// The configurations and their profiled service rates.
    pub candidates: Candidates,
    /// The configuration to start in (must be a candidate).
    pub initial: Config,
    /// The scheduler's estimator window, period and hysteresis.
    pub scheduler: SchedulerOptions,
    /// The graph's admission counters, when the node takes every request admitted: the control
    /// loop then reads its load there (module docs).
    pub admission: Option<AdmissionGauge>,
}

/// The service rate of one tuple (`running` requests at once, `threads` intra-op threads each) as the
/// online re-profiling sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServiceRate {
    /// Requests running at once, `i`.
    pub running: usize,
    /// Intra-op threads per request, `t`.
    pub threads: usize,
    /// Service times measured for it while serving.
    pub samples: u64,
    /// The measured rate `μ_i` in requests per second, once it overrides the offline one (back to
    /// back: calls after an idle gap counted at their back-to-back speed, `weir_serf::online`).
    pub measured: Option<f64>,
    /// The offline profile's rate.
    pub offline: f64,
}

/// The service time of one tuple measured within one band of arrival rates (online re-profiling with load
/// bands, `weir_serf::online`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadServiceRate {
    /// Requests running at once, `i`.
    pub running: usize,
    /// Intra-op threads per request, `t`.
    pub threads: usize,
    /// The arrival rates of the band, `[low, high)` requests per second.
    pub load: (f64, f64),
    /// Service times measured in the band.
    pub samples: u64,
    /// Their mean, seconds.
    pub mean_s: f64,
}

impl From<&BandEstimate> for LoadServiceRate {
    fn from(b: &BandEstimate) -> Self {
        LoadServiceRate {
            running: b.tuple.concurrency,
            threads: b.tuple.threads,
            load: b.load,
            samples: b.samples,
            mean_s: b.measured_s,
        }
    }
}

/// The parallelism gauges of a switchable executor at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct ParallelismSnapshot {
    /// Requests running at once now.
    pub concurrency: usize,
    /// Intra-op threads of each new request now.
    pub threads: usize,
    /// Switches applied since start.
    pub switches: u64,
    /// The scheduler's last arrival-rate estimate, requests per second (0 before the first period).
    pub arrival_rate: f64,
    /// Re-evaluations of the configurations with measured service rates.
    pub profile_updates: u64,
    /// Re-evaluations that changed the configurations' ranking.
    pub ranking_changes: u64,
    /// Explorations of configurations without fresh measurements.
    pub explorations: u64,
    /// Switches away from a configuration whose queue kept growing (the scheduler's backlog guard).
    pub backlog_switches: u64,
    /// Service-time samples dropped because the buffer was full.
    pub samples_dropped: u64,
    /// Service times left out because their call began while a switch settled
    /// (`weir_serf::online`, *Settling after a switch*).
    pub samples_settling: u64,
    /// Whether arrivals and waiting requests are read where requests enter the graph (the graph's
    /// only model node) rather than at the executor's queue.
    pub reads_admission: bool,
    /// Requests waiting in front of the sessions at the last control tick (what the backlog guard
    /// watches).
    pub waiting: u64,
    /// Every tuple's rate, in tuple order (empty without online re-profiling).
    pub service_rates: Vec<ServiceRate>,
    /// Every tuple's service time per load band, in tuple then load order (empty without load bands).
    pub service_by_load: Vec<LoadServiceRate>,
    /// Every configuration as the scheduler weighed it at its last update: predicted latency,
    /// utilisation and cap at the planned load (empty before the first update).
    pub standings: Vec<Standing>,
}

/// The calls running now and their integral over time, for the mean concurrency of each call.
#[derive(Debug)]
struct Meter {
    running: usize,
    since: Instant,
    /// ∫ running dt since start, in seconds.
    area: f64,
    /// When the configuration last changed (`None`: never since start).
    switched_at: Option<Instant>,
}

impl Meter {
    fn advance(&mut self, now: Instant) {
        self.area += self.running as f64 * now.saturating_duration_since(self.since).as_secs_f64();
        self.since = now;
    }
}

/// A call in progress (see [`Switchboard::begin_call`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallStart {
    at: Instant,
    area: f64,
    threads: usize,
    /// How long the session thread had been idle before it (`None`: unknown, or a call of several
    /// rows).
    idle_before: Option<Duration>,
}

/// What the control thread publishes about the online re-profiling.
#[derive(Debug, Default)]
struct ProfileGauges {
    profile_updates: u64,
    ranking_changes: u64,
    explorations: u64,
    backlog_switches: u64,
    samples_settling: u64,
    reads_admission: bool,
    service_rates: Vec<ServiceRate>,
    service_by_load: Vec<LoadServiceRate>,
    standings: Vec<Standing>,
}

#[derive(Debug)]
struct Current {
    config: Config,
    stopping: bool,
}

/// The configuration a switchable executor's threads follow, and its gauges.
#[derive(Debug)]
pub(crate) struct Switchboard {
    node: String,
    configs: Vec<Config>,
    current: Mutex<Current>,
    changed: Condvar,
    /// One bounded(1) wake-up channel per thread, to interrupt a wait for a job when the thread
    /// goes inactive.
    wakes: Vec<Sender<()>>,
    concurrency: AtomicUsize,
    threads: AtomicUsize,
    switches: AtomicU64,
    arrivals: AtomicU64,
    rate_bits: AtomicU64,
    meter: Mutex<Meter>,
    samples: Mutex<Vec<ServedCall>>,
    samples_dropped: AtomicU64,
    gauges: Mutex<ProfileGauges>,
    /// Requests waiting in front of the node's sessions at the last tick.
    waiting: AtomicU64,
}

impl Switchboard {
    /// A switchboard for `configs` starting at `initial`, and the wake-up receivers of threads
    /// `0..c_max`.
    pub(crate) fn new(
        node: &str,
        configs: &[Config],
        initial: Config,
    ) -> Result<(Arc<Switchboard>, Vec<Receiver<()>>), ParallelismError> {
        let mut configs = configs.to_vec();
        configs.sort();
        configs.dedup();
        if !configs.contains(&initial) {
            return Err(ParallelismError::Unknown {
                node: node.to_string(),
                concurrency: initial.concurrency,
                threads: initial.threads,
            });
        }
        let c_max = configs.iter().map(|c| c.concurrency).max().unwrap_or(1);
        let (wakes, rxs): (Vec<_>, Vec<_>) = (0..c_max).map(|_| bounded(1)).unzip();
        Ok((
            Arc::new(Switchboard {
                node: node.to_string(),
                configs,
                current: Mutex::new(Current {
                    config: initial,
                    stopping: false,
                }),
                changed: Condvar::new(),
                wakes,
                concurrency: AtomicUsize::new(initial.concurrency),
                threads: AtomicUsize::new(initial.threads),
                switches: AtomicU64::new(0),
                arrivals: AtomicU64::new(0),
                rate_bits: AtomicU64::new(0f64.to_bits()),
                meter: Mutex::new(Meter {
                    running: 0,
                    since: Instant::now(),
                    area: 0.0,
                    switched_at: None,
                }),
                samples: Mutex::new(Vec::new()),
                samples_dropped: AtomicU64::new(0),
                gauges: Mutex::new(ProfileGauges::default()),
                waiting: AtomicU64::new(0),
            }),
            rxs,
        ))
    }

    /// Threads the executor runs (`c_max`).
    pub(crate) fn thread_count(&self) -> usize {
        self.wakes.len()
    }

    /// The thread counts thread `i` needs a session for.
    pub(crate) fn thread_counts_of(&self, i: usize) -> Vec<usize> {
        let mut ts: Vec<usize> = self
            .configs
            .iter()
            .filter(|c| c.concurrency > i)
            .map(|c| c.threads.max(1))
            .collect();
        ts.sort_unstable();
        ts.dedup();
        ts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The configuration in force.
    pub(crate) fn current(&self) -> Config {
        self.lock().config
    }

    /// Applies `(concurrency, threads)` to jobs taken from now on; returns whether it changed.
    pub(crate) fn set(&self, concurrency: usize, threads: usize) -> Result<bool, ParallelismError> {
        let to = Config::new(concurrency, threads);
        if !self.configs.contains(&to) {
            return Err(ParallelismError::Unknown {
                node: self.node.clone(),
                concurrency,
                threads,
            });
        }
        {
            let mut cur = self.lock();
            if cur.config == to {
                return Ok(false);
            }
            cur.config = to;
            // Under `current`'s lock, so a call that takes a job after it sees the switch too.
            self.meter().switched_at = Some(Instant::now());
            self.concurrency.store(concurrency, Ordering::Relaxed);
            self.threads.store(threads, Ordering::Relaxed);
            self.switches.fetch_add(1, Ordering::Relaxed);
        }
        self.changed.notify_all();
        for wake in self.wakes.iter().skip(concurrency) {
            // Full means a wake-up is already pending: enough.
            let _ = wake.try_send(());
        }
        Ok(true)
    }

    /// Blocks thread `i` until it is active (`true`), or until the executor stops while it is
    /// inactive (`false`: the thread ends; the active ones drain the queue).
    pub(crate) fn wait_active(&self, i: usize) -> bool {
        let mut cur = self.lock();
        loop {
            if i < cur.config.concurrency {
                return true;
            }
            if cur.stopping {
                return false;
            }
            cur = self.changed.wait(cur).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Tells parked threads the executor is stopping.
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.changed.notify_all();
    }

    /// Counts `rows` submitted rows (arrivals for the scheduler).
    pub(crate) fn record_arrivals(&self, rows: u64) {
        self.arrivals.fetch_add(rows, Ordering::Relaxed);
    }

    fn take_arrivals(&self) -> u64 {
        self.arrivals.swap(0, Ordering::Relaxed)
    }

    fn set_rate(&self, rate: f64) {
        self.rate_bits.store(rate.to_bits(), Ordering::Relaxed);
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the start of a call with `threads` intra-op threads on a session thread idle for
    /// `idle_before` before it (`None`: unknown, or a call of several rows, whose later rows did not
    /// start after the gap).
    pub(crate) fn begin_call(&self, threads: usize, idle_before: Option<Duration>) -> CallStart {
        let at = Instant::now();
        let mut m = self.meter();
        m.advance(at);
        m.running += 1;
        CallStart {
            at,
            area: m.area,
            threads,
            idle_before,
        }
    }

    /// Marks the end of the call `start`, which served `rows` rows (one sample per call; `per_row`
    /// when the rows ran one after the other, otherwise only a one-row call is a sample), with the
    /// idle gap [`Switchboard::begin_call`] was given.
    pub(crate) fn end_call(&self, start: CallStart, rows: usize, per_row: bool) {
        let now = Instant::now();
        let (mean_running, since_switch) = {
            let mut m = self.meter();
            m.advance(now);
            m.running = m.running.saturating_sub(1);
            let span = now.saturating_duration_since(start.at).as_secs_f64();
            let mean = if span > 0.0 {
                (m.area - start.area) / span
            } else {
                1.0
            };
            // A switch after the call began gives zero: the call ran across it.
            (
                mean,
                m.switched_at.map(|s| start.at.saturating_duration_since(s)),
            )
        };
        if rows == 0 || (!per_row && rows > 1) {
            return;
        }
        let seconds = now.saturating_duration_since(start.at).as_secs_f64() / rows as f64;
        let running = (mean_running.round() as usize).clamp(1, self.thread_count().max(1));
        let mut samples = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        if samples.len() < SAMPLE_BUFFER {
            samples.push(ServedCall {
                tuple: Config::new(running, start.threads),
                seconds,
                idle_before: start.idle_before,
                since_switch,
            });
        } else {
            self.samples_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn take_samples(&self) -> Vec<ServedCall> {
        std::mem::take(&mut *self.samples.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn gauges(&self) -> std::sync::MutexGuard<'_, ProfileGauges> {
        self.gauges.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn publish(&self, scheduler: &Scheduler) {
        let c = scheduler.counters();
        let mut g = self.gauges();
        g.profile_updates = c.reevaluations;
        g.ranking_changes = c.ranking_changes;
        g.explorations = c.explorations;
        g.backlog_switches = c.backlogs;
        g.samples_settling = c.settling;
        g.standings = scheduler.standings();
        if let Some(online) = scheduler.online() {
            let min = online.options().min_samples;
            g.service_rates = online
                .tuples()
                .map(|t| ServiceRate {
                    running: t.tuple.concurrency,
                    threads: t.tuple.threads,
                    samples: t.samples,
                    measured: t.measured_rate(min),
                    offline: 1.0 / t.offline_s,
                })
                .collect();
            g.service_by_load = online.band_estimates().map(LoadServiceRate::from).collect();
        }
    }

    /// The gauges now.
    pub(crate) fn snapshot(&self) -> ParallelismSnapshot {
        let g = self.gauges();
        ParallelismSnapshot {
            concurrency: self.concurrency.load(Ordering::Relaxed),
            threads: self.threads.load(Ordering::Relaxed),
            switches: self.switches.load(Ordering::Relaxed),
            arrival_rate: f64::from_bits(self.rate_bits.load(Ordering::Relaxed)),
            profile_updates: g.profile_updates,
            ranking_changes: g.ranking_changes,
            explorations: g.explorations,
            backlog_switches: g.backlog_switches,
            samples_dropped: self.samples_dropped.load(Ordering::Relaxed),
            samples_settling: g.samples_settling,
            reads_admission: g.reads_admission,
            waiting: self.waiting.load(Ordering::Relaxed),
            service_rates: g.service_rates.clone(),
            service_by_load: g.service_by_load.clone(),
            standings: g.standings.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
