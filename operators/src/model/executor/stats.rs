//! An executor's load counters: lock-free atomics bumped on the serving path (queue, calls, rows,
//! errors, busy time, each job's time at the node, batch-size and call-duration buckets), read as
//! a [`LoadSnapshot`] by the SERF controller, `weir run`'s summary and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weir_engine::spec::PadWhen;

use super::batch_buckets::{bucket_of, BATCH_BUCKETS};
use super::call_cost::{Coefficients, Decision, PadChooser};
use super::call_log::{CallLog, RecordedCalls};
use super::row_cost::{RowCost, RowCostSnapshot};
use super::Job;

/// Counters of one executor; every field only grows except `running`, a gauge.
#[derive(Debug, Default)]
pub struct LoadStats {
    /// Calls running now on the executor's sessions (batching waits for company only while
    /// every session runs one).
    running: AtomicU64,
    pub(super) enqueued: AtomicU64,
    pub(super) dequeued: AtomicU64,
    runs: AtomicU64,
    rows: AtomicU64,
    errors: AtomicU64,
    /// Warm-up calls run before the sessions served (not among `runs`).
    warmup_runs: AtomicU64,
    busy_ns: AtomicU64,
    /// Time session threads held calls beyond ONNX Runtime (an emulated instance type's wait).
    held_ns: AtomicU64,
    /// Jobs answered by a call (ok or failed) and their time from queued to answered, summed.
    jobs_answered: AtomicU64,
    sojourn_ns: AtomicU64,
    /// Runs by batch size: 1, 2, 3–4, 5–8, ..., 129+.
    batch_sizes: [AtomicU64; BATCH_BUCKETS],
    /// Calls by duration, bucketed by [`CALL_SECONDS_BOUNDS`] (the last is open).
    call_seconds: [AtomicU64; CALL_BUCKETS],
    /// Each call's duration, while someone records them.
    call_log: CallLog,
    /// A padded node's cost model of its calls, and how it cut batches of mixed lengths.
    pad_chooser: Mutex<PadChooser>,
    padded_batches: AtomicU64,
    split_batches: AtomicU64,
    /// A node's cost per row by batch size, where it measures it (`row_cost.rs`).
    row_cost: Option<RowCost>,
}

/// A call counted in [`LoadStats::calls_running`] while it lives (dropped when the call ends,
/// also by a panic).
pub(super) struct RunningCall<'a>(&'a LoadStats);

impl Drop for RunningCall<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

const CALL_BUCKETS: usize = 13;

/// Upper bounds of the call-duration buckets, in seconds (the last bucket is open).
pub const CALL_SECONDS_BOUNDS: [f64; CALL_BUCKETS - 1] = [
    0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0,
];

/// A copy of an executor's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadSnapshot {
    /// Jobs queued.
    pub enqueued: u64,
    /// Jobs taken by a session.
    pub dequeued: u64,
    /// Inference calls.
    pub runs: u64,
    /// Rows inferred.
    pub rows: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Warm-up calls run on the sessions before they served (not among `runs`).
    pub warmup_runs: u64,
    /// Time inside ONNX Runtime, summed over sessions.
    pub busy: Duration,
    /// Time session threads held calls beyond ONNX Runtime (an emulated type's wait), summed.
    pub held: Duration,
    /// Jobs answered by a call (ok or failed).
    pub jobs_answered: u64,
    /// Time from queued to answered (waiting in the node's queue plus the call), summed over the
    /// answered jobs: the sojourn a queueing model of the node predicts.
    pub sojourn: Duration,
    /// Calls per batch-size bucket (see [`super::BATCH_BUCKET_BOUNDS`]).
    pub batch_sizes: [u64; BATCH_BUCKETS],
    /// Calls per duration bucket (see [`CALL_SECONDS_BOUNDS`]).
    pub call_seconds: [u64; CALL_BUCKETS],
    /// A padded node's batches of mixed lengths run as one padded call.
    pub padded_batches: u64,
    /// A padded node's batches of mixed lengths split into calls of nearer lengths.
    pub split_batches: u64,
    /// A node's measured CPU time per row by batch size and the batch size it prefers (`None`
    /// where it does not measure them).
    pub row_cost: Option<RowCostSnapshot>,
}

impl LoadSnapshot {
    /// Jobs waiting in the queue.
    pub fn queue_depth(&self) -> u64 {
        self.enqueued.saturating_sub(self.dequeued)
    }

    /// Mean rows per call.
    pub fn mean_batch_size(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.rows as f64 / self.runs as f64
        }
    }
}

impl LoadStats {
    /// Counters of a node that measures its cost per row by batch size and stops growing its
    /// calls past the largest size no dearer per row than the cheapest (`row_cost.rs`).
    pub fn measuring_row_cost() -> LoadStats {
        LoadStats {
            row_cost: Some(RowCost::default()),
            ..LoadStats::default()
        }
    }

    /// Most rows a job or call should hold now, of at most `max_batch`: fewer where larger calls
    /// have measured dearer per row.
    pub fn rows_now(&self, max_batch: usize) -> usize {
        self.row_cost
            .as_ref()
            .map_or(max_batch, |c| c.rows_now(max_batch))
    }

    /// Most rows the gather starting now may take, of at most `max_batch` (as
    /// [`LoadStats::rows_now`], but measuring every size while cold and a neighbouring one now
    /// and then).
    pub(super) fn rows_for_gather(&self, max_batch: usize) -> usize {
        self.row_cost
            .as_ref()
            .map_or(max_batch, |c| c.rows_for_gather(max_batch))
    }

    /// Whether calls' CPU time is to be recorded ([`LoadStats::record_row_cost`]).
    pub(super) fn measures_row_cost(&self) -> bool {
        self.row_cost.is_some()
    }

    /// Adds a successful call of `rows` rows that took `cpu` of its thread's CPU time.
    pub(super) fn record_row_cost(&self, rows: usize, cpu: Duration) {
        if let Some(c) = &self.row_cost {
            c.record(rows, cpu);
        }
    }

    /// The mean time a row has taken in the calls so far (`None` before the first call).
    pub fn time_per_row(&self) -> Option<Duration> {
        let rows = self.rows.load(Ordering::Relaxed);
        (rows > 0).then(|| Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed) / rows))
    }

    /// Calls running now on the executor's sessions.
    pub fn calls_running(&self) -> u64 {
        self.running.load(Ordering::Acquire)
    }

    /// A session starts a call: [`LoadStats::calls_running`] counts it until the guard drops.
    pub(super) fn call_running(&self) -> RunningCall<'_> {
        self.running.fetch_add(1, Ordering::AcqRel);
        RunningCall(self)
    }

    /// Counts `jobs`, answered now, with their time since they were queued.
    pub(super) fn record_answers(&self, jobs: &[Job], now: Instant) {
        self.call_log.record_arrivals(jobs);
        let sojourn: Duration = jobs
            .iter()
            .map(|j| now.saturating_duration_since(j.enqueued_at))
            .sum();
        self.jobs_answered
            .fetch_add(jobs.len() as u64, Ordering::Relaxed);
        self.sojourn_ns
            .fetch_add(sojourn.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(super) fn record_run(
        &self,
        rows: usize,
        elapsed: Duration,
        idle_before: Option<Duration>,
        ok: bool,
    ) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(elapsed.as_nanos() as u64, Ordering::Relaxed);
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.batch_sizes[bucket_of(rows)].fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        let bucket = CALL_SECONDS_BOUNDS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(CALL_BUCKETS - 1);
        self.call_seconds[bucket].fetch_add(1, Ordering::Relaxed);
        self.call_log.record_call(elapsed, idle_before);
    }

    /// Cuts a padded node's batch of jobs of `(rows, length)` into calls (indices into `jobs`):
    /// one padded call under [`PadWhen::Always`], as the cost model says under
    /// [`PadWhen::Cheaper`]; a batch of mixed lengths is counted by how it was cut.
    pub(super) fn choose_calls(&self, when: PadWhen, jobs: &[(usize, usize)]) -> Vec<Vec<usize>> {
        let mixed = jobs.windows(2).any(|w| w[0].1 != w[1].1);
        if !mixed || when == PadWhen::Always {
            if mixed {
                self.padded_batches.fetch_add(1, Ordering::Relaxed);
            }
            return vec![(0..jobs.len()).collect()];
        }
        let (groups, decision) = self
            .pad_chooser
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .choose(jobs);
        match decision {
            Decision::Padded => &self.padded_batches,
            Decision::Split => &self.split_batches,
        }
        .fetch_add(1, Ordering::Relaxed);
        groups
    }

    /// Adds a padded node's call of `rows` rows padded to `len` that took `elapsed` to its cost
    /// model.
    pub(super) fn record_padded_call(&self, rows: usize, len: usize, elapsed: Duration) {
        self.pad_chooser
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(rows, len, elapsed.as_secs_f64() * 1e6);
    }

    /// A padded node's fitted cost of its calls (`None` before its first call).
    pub fn call_cost(&self) -> Option<Coefficients> {
        self.pad_chooser
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .coefficients()
    }

    /// Counts one warm-up call (see [`crate::model::executor::ExecutorConfig::warmup`]).
    pub(crate) fn record_warmup(&self) {
        self.warmup_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts keeping every call, in the order they end, and the arrival of every job answered
    /// (forgetting any kept before).
    pub fn record_calls(&self) {
        self.call_log.start();
    }

    /// Stops keeping calls and returns those kept since [`LoadStats::record_calls`], with the
    /// arrivals sorted.
    pub fn take_calls(&self) -> RecordedCalls {
        self.call_log.take()
    }

    /// Jobs waiting in the queue now (queued, not yet taken by a session).
    pub fn queue_depth(&self) -> u64 {
        self.enqueued
            .load(Ordering::Relaxed)
            .saturating_sub(self.dequeued.load(Ordering::Relaxed))
    }

    /// Counts `d` of a session thread holding a call beyond ONNX Runtime.
    pub fn add_held(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.held_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> LoadSnapshot {
        let load = |buckets: &[AtomicU64], out: &mut [u64]| {
            for (o, b) in out.iter_mut().zip(buckets) {
                *o = b.load(Ordering::Relaxed);
            }
        };
        let mut batch_sizes = [0; BATCH_BUCKETS];
        load(&self.batch_sizes, &mut batch_sizes);
        let mut call_seconds = [0; CALL_BUCKETS];
        load(&self.call_seconds, &mut call_seconds);
        LoadSnapshot {
            enqueued: self.enqueued.load(Ordering::Relaxed),
            dequeued: self.dequeued.load(Ordering::Relaxed),
            runs: self.runs.load(Ordering::Relaxed),
            rows: self.rows.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            warmup_runs: self.warmup_runs.load(Ordering::Relaxed),
            busy: Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed)),
            held: Duration::from_nanos(self.held_ns.load(Ordering::Relaxed)),
            jobs_answered: self.jobs_answered.load(Ordering::Relaxed),
            sojourn: Duration::from_nanos(self.sojourn_ns.load(Ordering::Relaxed)),
            batch_sizes,
            call_seconds,
            padded_batches: self.padded_batches.load(Ordering::Relaxed),
            split_batches: self.split_batches.load(Ordering::Relaxed),
            row_cost: self.row_cost.as_ref().map(RowCost::snapshot),
        }
    }
}
