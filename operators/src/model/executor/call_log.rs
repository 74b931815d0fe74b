//! The call log: every inference call of an executor, one by one, kept only while someone records
//! (profiling a node through the graph: the serving path's own call times and the arrivals of the
//! jobs it answered). Off, it costs one relaxed flag read per call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Job;

/// Every call, kept only between [`super::LoadStats::record_calls`] and
/// [`super::LoadStats::take_calls`].
#[derive(Debug, Default)]
pub(super) struct CallLog {
    on: AtomicBool,
    calls: Mutex<RecordedCalls>,
}

/// What the call log kept between [`super::LoadStats::record_calls`] and
/// [`super::LoadStats::take_calls`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedCalls {
    /// Every call, in the order they ended.
    pub calls: Vec<CallRecord>,
    /// When each job answered meanwhile had been queued at the node (its arrival there), in time
    /// order.
    pub arrivals: Vec<Instant>,
}

/// One call of a session, as the call log keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRecord {
    /// When the call returned.
    pub ended_at: Instant,
    /// How long it took.
    pub duration: Duration,
    /// How long its session thread had been idle before it (since the end of its last call; `None`
    /// for the thread's first call, or a call of several rows: `idle_gap`).
    pub idle_before: Option<Duration>,
}

impl CallLog {
    fn kept(&self) -> std::sync::MutexGuard<'_, RecordedCalls> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the arrivals of `jobs`, answered now, while recording.
    pub(super) fn record_arrivals(&self, jobs: &[Job]) {
        if self.on.load(Ordering::Relaxed) {
            self.kept()
                .arrivals
                .extend(jobs.iter().map(|j| j.enqueued_at));
        }
    }

    /// Keeps a call that just ended, while recording.
    pub(super) fn record_call(&self, duration: Duration, idle_before: Option<Duration>) {
        if self.on.load(Ordering::Relaxed) {
            let record = CallRecord {
                ended_at: Instant::now(),
                duration,
                idle_before,
            };
            self.kept().calls.push(record);
        }
    }

    /// Starts recording, forgetting anything kept before.
    pub(super) fn start(&self) {
        *self.kept() = RecordedCalls::default();
        self.on.store(true, Ordering::Relaxed);
    }

    /// Stops recording and returns what was kept, the arrivals sorted.
    pub(super) fn take(&self) -> RecordedCalls {
        self.on.store(false, Ordering::Relaxed);
        let mut kept = std::mem::take(&mut *self.kept());
        kept.arrivals.sort_unstable();
        kept
    }
}
