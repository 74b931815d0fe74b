//! Live parallelism of one model node's executor (SERF, paper §IV-A/§IV-D, note `notes/serf.md`
//! §2.12, requirements S1–S3): the switchboard the executor's threads read their configuration
//! from, and the control loop that feeds arrivals to `weir_serf`'s scheduler and applies its
//! switches.
//!
//! **Switching** ([`Switchboard`]). A switchable executor starts `c_max` threads (the largest
//! concurrency among its configurations). Thread `i` owns one session per thread count `t` it can
//! run with (every `t` of a configuration `(c, t)` with `c > i`), all created at start, so a switch
//! never loads a model. Thread `i` takes jobs only while `i < c`; otherwise it parks on a condition
//! variable. A switch to `(c, t)` is a write under a lock plus a wake-up: jobs taken after it run on
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
//! one relaxed atomic add per submitted job.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use tracing::{debug, info, warn};
use weir_serf::config::Config;
use weir_serf::scheduler::{Scheduler, SchedulerError, SchedulerOptions};
use weir_serf::table::Candidates;

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
}

/// The parallelism gauges of a switchable executor at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParallelismSnapshot {
    /// Requests running at once now.
    pub concurrency: usize,
    /// Intra-op threads of each new request now.
    pub threads: usize,
    /// Switches applied since start.
    pub switches: u64,
    /// The scheduler's last arrival-rate estimate, requests per second (0 before the first period).
    pub arrival_rate: f64,
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

    /// The gauges now.
    pub(crate) fn snapshot(&self) -> ParallelismSnapshot {
        ParallelismSnapshot {
            concurrency: self.concurrency.load(Ordering::Relaxed),
            threads: self.threads.load(Ordering::Relaxed),
            switches: self.switches.load(Ordering::Relaxed),
            arrival_rate: f64::from_bits(self.rate_bits.load(Ordering::Relaxed)),
        }
    }
}

/// The SERF control loop of one `auto` node: a thread that stops when this is dropped.
#[derive(Debug)]
pub(crate) struct Controller {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Controller {
    /// Starts the loop over `board` with `options`.
    pub(crate) fn start(
        board: Arc<Switchboard>,
        options: AutoOptions,
    ) -> Result<Controller, SchedulerError> {
        let origin = Instant::now();
        let scheduler = Scheduler::new(
            options.candidates,
            options.initial,
            options.scheduler,
            Duration::ZERO,
        )?;
        let tick = (options.scheduler.period / 10).max(Duration::from_millis(10));
        let (stop, stopped) = bounded::<()>(0);
        let node = board.node.clone();
        let handle = std::thread::Builder::new()
            .name(format!("serf-{node}"))
            .spawn(move || control_loop(&board, scheduler, tick, origin, &stopped))
            .map_err(|e| SchedulerError::BadOptions(format!("spawning the control thread: {e}")))?;
        Ok(Controller {
            stop: Some(stop),
            handle: Some(handle),
        })
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stop = None;
        if let Some(h) = self.handle.take() {
            if h.thread().id() != std::thread::current().id() && h.join().is_err() {
                warn!("A SERF control thread panicked.");
            }
        }
    }
}

fn control_loop(
    board: &Switchboard,
    mut scheduler: Scheduler,
    tick: Duration,
    origin: Instant,
    stopped: &Receiver<()>,
) {
    loop {
        match stopped.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = origin.elapsed();
        scheduler.record_arrivals(now, board.take_arrivals());
        let before = scheduler.last_estimate();
        let switch = scheduler.poll(now);
        if let Some(est) = scheduler.last_estimate() {
            board.set_rate(est.rate);
            if before != Some(est) {
                debug!(node = %board.node, lambda = est.rate, arrivals = est.arrivals, current = %scheduler.current(), "SERF update.");
            }
        }
        let Some(sw) = switch else { continue };
        match board.set(sw.to.concurrency, sw.to.threads) {
            Ok(_) => info!(
                node = %board.node,
                from = %sw.from,
                to = %sw.to,
                lambda = sw.lambda,
                planned_lambda = sw.planned_lambda,
                reason = ?sw.reason,
                "Parallelism switched."
            ),
            Err(e) => warn!(node = %board.node, error = %e, "Parallelism switch refused."),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_per_thread_cover_every_configuration() {
        let configs = [Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)];
        let (board, wakes) = Switchboard::new("n", &configs, Config::new(1, 2)).unwrap();
        assert_eq!(board.thread_count(), 2);
        assert_eq!(wakes.len(), 2);
        assert_eq!(board.thread_counts_of(0), vec![1, 2]);
        assert_eq!(board.thread_counts_of(1), vec![1]);
        assert!(matches!(
            board.set(2, 2),
            Err(ParallelismError::Unknown { .. })
        ));
        assert_eq!(board.set(2, 1), Ok(true));
        assert_eq!(board.set(2, 1), Ok(false));
        // Thread 1 was told to look again when it went active? No: wake-ups go to threads ≥ c.
        assert!(wakes[1].try_recv().is_err());
        assert_eq!(board.set(1, 1), Ok(true));
        assert!(wakes[1].try_recv().is_ok());
        let s = board.snapshot();
        assert_eq!((s.concurrency, s.threads, s.switches), (1, 1, 2));
        assert!(board.wait_active(0));
        board.stop();
        assert!(!board.wait_active(1));
        assert!(Switchboard::new("n", &configs, Config::new(3, 1)).is_err());
    }
}
