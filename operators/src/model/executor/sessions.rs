//! The session threads of an executor: a fixed executor's threads each block on the shared queue
//! with their one session, which a caller may borrow to run a lone job itself while the executor
//! is idle ([`run_here`]: no hand-off to the session thread and back); a switchable executor's threads take jobs only while their index is
//! below the concurrency in force, and run each batch on the session made for the intra-op threads
//! in force when the batch was taken ([`super::super::parallelism`]). Each thread may be pinned to
//! a core ([`super::super::pinning`]); a batch's call is timed and counted, then its jobs answered.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use ort::session::Session;
use tracing::{debug, warn};

use super::batching::{form_calls, gather_batch, run, Call};
use super::row_cost::thread_cpu_time;
use super::{ExecutorConfig, Job, LoadStats};
use crate::model::parallelism::Switchboard;
use crate::model::pinning::{pin_current_thread, CorePins};
use crate::model::synthetic::SyntheticInputs;
use crate::model::ExecError;

/// The node's [`CorePins`] when `pin_cores_from` is set.
pub(super) fn core_pins(config: &ExecutorConfig) -> Result<Option<CorePins>, ExecError> {
    config
        .pin_cores_from
        .map(CorePins::from_first)
        .transpose()
        .map_err(|e| ExecError::Session {
            node: config.node.clone(),
            path: config.path.display().to_string(),
            message: e.to_string(),
        })
}

/// Pins the calling session thread to `cpu`; a failure leaves it where the OS put it, logged.
pub(super) fn pin_or_warn(node: &str, cpu: usize) {
    if let Err(e) = pin_current_thread(cpu) {
        warn!(node = %node, error = %e, "Session thread not pinned.");
    }
}

/// Starts session thread `i` of node `node`, named `ort-<node>-<i>`.
pub(super) fn spawn_session_thread(
    node: String,
    i: usize,
    run: impl FnOnce() + Send + 'static,
) -> Result<JoinHandle<()>, ExecError> {
    std::thread::Builder::new()
        .name(format!("ort-{node}-{i}"))
        .spawn(run)
        .map_err(|e| ExecError::Session {
            node,
            path: String::new(),
            message: format!("spawning a session thread: {e}"),
        })
}

/// A fixed executor's session and when its last call ended. Its thread locks it for each batch;
/// a caller finding the executor idle may take it instead for one job ([`run_here`]).
pub(super) struct SessionSlot {
    session: Session,
    idle_since: Option<Instant>,
}

/// A [`SessionSlot`] shared by its thread and callers.
pub(super) type SharedSession = Arc<Mutex<SessionSlot>>;

impl SessionSlot {
    /// `session`, not called yet.
    pub(super) fn shared(session: Session) -> SharedSession {
        Arc::new(Mutex::new(SessionSlot {
            session,
            idle_since: None,
        }))
    }

    /// Runs `jobs` ([`run_jobs`]), keeping when the call ended for the next one's idle gap.
    fn run(&mut self, config: &ExecutorConfig, stats: &LoadStats, (jobs, rows): (Vec<Job>, usize)) {
        let idle_before = idle_gap(self.idle_since, rows);
        self.idle_since = Some(run_jobs(
            &mut self.session,
            config,
            stats,
            (jobs, rows),
            idle_before,
        ));
    }
}

/// Runs `job` on the calling thread with `slot` (locked by the caller, who found the executor
/// idle): counted as dequeued at once, answered expired if its deadline passed, else run as a call
/// of its own, its `done` called before this returns.
pub(super) fn run_here(
    slot: &mut SessionSlot,
    config: &ExecutorConfig,
    stats: &LoadStats,
    job: Job,
) {
    stats.dequeued.fetch_add(1, Ordering::Relaxed);
    let Some(job) = job.unless_expired(&config.node, Instant::now()) else {
        return;
    };
    let rows = job.rows();
    slot.run(config, stats, (vec![job], rows));
}

pub(super) fn session_loop(
    slot: SharedSession,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
) {
    let mut carried: Option<Job> = None;
    loop {
        let first = match carried.take() {
            Some(j) => j,
            None => match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
        };
        let (jobs, rows) = gather_batch(first, config, stats, rx, &mut carried, config.instances);
        if jobs.is_empty() {
            continue;
        }
        // Held by a caller only for one call it started while the executor was idle.
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.run(config, stats, (jobs, rows));
    }
}

/// Calls each pre-created session of a switchable executor gets before it serves, so that the
/// first jobs after a switch run on a warm session (see [`crate::model::synthetic`]).
pub const SWITCHABLE_WARMUP_CALLS: usize = 2;

/// The random request a switchable executor warms its sessions with; `None` (logged) when the
/// model's inputs have no synthetic form, in which case sessions start cold.
pub(super) fn warmup_inputs(config: &ExecutorConfig) -> Option<SyntheticInputs> {
    match SyntheticInputs::random(&config.path, 0) {
        Ok(inputs) => Some(inputs),
        Err(e) => {
            warn!(node = %config.node, error = %e, "Sessions start cold: no warm-up request for this model.");
            None
        }
    }
}

/// Runs [`SWITCHABLE_WARMUP_CALLS`] calls on `session`. A failing call is logged, not an error:
/// warming is an optimisation, and real requests get their own errors.
pub(super) fn warm_up(node: &str, session: &mut Session, inputs: &SyntheticInputs, threads: usize) {
    for _ in 0..SWITCHABLE_WARMUP_CALLS {
        if let Err(e) = inputs.timed_call(session) {
            warn!(node, threads, error = %e, "Warm-up call failed; the session starts cold.");
            return;
        }
    }
}

/// The loop of thread `i` of a switchable executor (see [`crate::model::parallelism`]): takes jobs only
/// while `i < c`, runs each batch on its session for the `t` in force when the batch was taken.
/// With `pins`, the thread moves to the core [`CorePins::caller`] gives for the `t` of each call.
pub(super) fn switchable_loop(
    i: usize,
    mut sessions: Vec<(usize, Session)>,
    config: &ExecutorConfig,
    stats: &LoadStats,
    (rx, wake): (&Receiver<Job>, &Receiver<()>),
    board: &Switchboard,
    pins: Option<&CorePins>,
) {
    let mut carried: Option<Job> = None;
    let mut on_cpu: Option<usize> = None;
    let mut idle_since: Option<Instant> = None;
    loop {
        // A job carried over from the last gather was already taken: it runs whatever happened
        // since, so going inactive never strands it.
        let first = match carried.take() {
            Some(j) => j,
            None => {
                if !board.wait_active(i) {
                    return;
                }
                crossbeam_channel::select! {
                    recv(rx) -> job => match job {
                        Ok(j) => j,
                        Err(_) => return,
                    },
                    // Told to look at the configuration again (this thread may be inactive now).
                    recv(wake) -> _ => continue,
                }
            }
        };
        let active = board.current().concurrency;
        let (jobs, rows) = gather_batch(first, config, stats, rx, &mut carried, active);
        if jobs.is_empty() {
            continue;
        }
        let threads = board.current().threads;
        let pos = sessions
            .iter()
            .position(|(t, _)| *t == threads)
            .unwrap_or(0);
        let Some((session_threads, session)) = sessions.get_mut(pos) else {
            // No session at all cannot happen (start creates at least one per thread); answer
            // rather than lose the jobs.
            for job in jobs {
                (job.done)(Err(ExecError::Inference {
                    node: config.node.clone(),
                    message: "no session for the current parallelism".into(),
                }));
            }
            continue;
        };
        if let Some(cpu) = pins.map(|p| p.caller(i, *session_threads)) {
            if on_cpu != Some(cpu) {
                pin_or_warn(&config.node, cpu);
                on_cpu = Some(cpu);
            }
        }
        let idle_before = idle_gap(idle_since, rows);
        let call = board.begin_call(*session_threads, idle_before);
        idle_since = Some(run_jobs(session, config, stats, (jobs, rows), idle_before));
        board.end_call(call, rows, !config.call.batched());
    }
}

/// How long a session thread whose last call ended at `idle_since` has been idle before a call of
/// `rows` rows starting now: `None` for its first call, and for several rows (of rows run one after
/// the other, only the first started after the gap).
pub(super) fn idle_gap(idle_since: Option<Instant>, rows: usize) -> Option<Duration> {
    idle_since
        .filter(|_| rows == 1)
        .map(|t| Instant::now().saturating_duration_since(t))
}

/// Runs `jobs` (`rows` rows in all) on a session thread idle for `idle_before` ([`idle_gap`]):
/// cut into calls ([`form_calls`]: one, but for a padded node's batch of mixed lengths), each
/// call's jobs answered as soon as it ends; returns when the last call ended.
fn run_jobs(
    session: &mut Session,
    config: &ExecutorConfig,
    stats: &LoadStats,
    (jobs, rows): (Vec<Job>, usize),
    mut idle_before: Option<Duration>,
) -> Instant {
    let mut ended = Instant::now();
    for call in form_calls(config, stats, jobs, rows) {
        ended = run_call(session, config, stats, call, idle_before.take());
    }
    ended
}

/// Runs one call (batched) or one call per row, counts the calls, adds a padded call's time to
/// the node's cost model, and answers each job; returns when the last call ended.
fn run_call(
    session: &mut Session,
    config: &ExecutorConfig,
    stats: &LoadStats,
    call: Call,
    idle_before: Option<Duration>,
) -> Instant {
    let Call {
        jobs,
        rows,
        padded_len,
    } = call;
    let running = stats.call_running();
    let cpu_before = stats.measures_row_cost().then(thread_cpu_time).flatten();
    let started = Instant::now();
    let (result, calls) = run(session, config, &jobs, rows);
    let ended = Instant::now();
    drop(running);
    // One call's CPU time on this thread, its cost per row by batch size (`row_cost.rs`).
    if let (Some(before), true, 1) = (cpu_before, result.is_ok(), calls) {
        if let Some(after) = thread_cpu_time() {
            stats.record_row_cost(rows, after.saturating_sub(before));
        }
    }
    for trace in jobs.iter().filter_map(|j| j.trace.as_ref()) {
        trace.record_call(started, ended, rows);
    }
    if calls > 1 {
        // Row by row: each call counted, one row each, the time shared evenly.
        let each = (ended - started) / u32::try_from(calls).unwrap_or(u32::MAX);
        for k in 0..calls {
            stats.record_run(1, each, idle_before.filter(|_| k == 0), result.is_ok());
        }
    } else {
        stats.record_run(rows, ended - started, idle_before, result.is_ok());
        if let (Some(len), true) = (padded_len, result.is_ok()) {
            stats.record_padded_call(rows, len, ended - started);
        }
    }
    stats.record_answers(&jobs, ended);
    match result {
        Ok(per_job) => {
            for (job, outputs) in jobs.into_iter().zip(per_job) {
                (job.done)(Ok(outputs));
            }
        }
        Err(e) => {
            debug!(node = %config.node, error = %e, "Inference failed.");
            for job in jobs {
                (job.done)(Err(e.clone()));
            }
        }
    }
    ended
}
