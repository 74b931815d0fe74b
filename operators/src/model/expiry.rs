//! Deadline-aware dispatch: a job nobody waits for any more is answered, not run.
//!
//! Under overload a first-come queue serves requests in arrival order whether or not their clients
//! still wait. Once the queue's wait passes the clients' timeout every call answers a request
//! whose client has gone, and goodput falls towards nothing while the executor stays busy (the
//! collapse Clipper and INFaaS avoid by dropping late queries, and Triton's queue policy with
//! `timeout_action: REJECT`). So a request's deadline is kept with it in the graph's request log
//! at admission ([`weir_engine::runtime::GraphRuntime::submit_until`]); the model operator gives
//! each job the latest deadline of its rows ([`Deadlines::of_rows`]: a job holding a row without
//! a deadline has none), and every place a job waits checks it just before the job would run —
//! the operator's held-back jobs, an executor's queue, a replica pool's dispatch, and a remote
//! executor's queue (sent the time left, not a clock reading, so no clocks need agree). A late job
//! is answered [`ExecError::Expired`], which reaches the client as its one answer
//! ([`weir_engine::request::RequestError::Expired`], HTTP 504). A job already running finishes.
//!
//! Only a graph whose requests are all admitted in this process checks deadlines: in a timely
//! cluster, rows admitted by another process have no entry in this one's log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_engine::dataflow::egress::RequestLog;

use super::ExecError;

/// How far past `deadline` `now` is, if it is past.
pub fn lateness(deadline: Option<Instant>, now: Instant) -> Option<Duration> {
    deadline
        .filter(|d| now >= *d)
        .map(|d| now.saturating_duration_since(d))
}

/// The error a job `late` past its deadline at `node` is answered with.
pub fn expired(node: &str, late: Duration) -> ExecError {
    ExecError::Expired {
        node: node.to_string(),
        late_ms: u64::try_from(late.as_millis()).unwrap_or(u64::MAX),
    }
}

/// The latest of `deadlines`, or `None` when any is `None` (a job runs while any of its rows is
/// still awaited).
pub fn latest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    let mut latest: Option<Instant> = None;
    for d in deadlines {
        let d = d?;
        latest = Some(latest.map_or(d, |l| l.max(d)));
    }
    latest
}

/// One model node's view of its graph's request deadlines, and its count of rows not run.
#[derive(Debug, Clone)]
pub struct Deadlines {
    log: Option<Arc<RequestLog>>,
    /// The log whose trace book the node records sampled rows in (`log` unless set apart).
    traced: Option<Arc<RequestLog>>,
    expired: Arc<AtomicU64>,
}

impl Deadlines {
    /// Deadlines read from `log` (`None`: jobs get none, as in a cluster), counting into
    /// `expired`.
    pub fn new(log: Option<Arc<RequestLog>>, expired: Arc<AtomicU64>) -> Self {
        Deadlines {
            traced: log.clone(),
            log,
            expired,
        }
    }

    /// The same, recording sampled rows in `log`'s trace book (a cluster's process reads no
    /// deadlines, since rows admitted elsewhere have none here, but traces the rows it admitted).
    pub fn with_traces(mut self, log: Option<Arc<RequestLog>>) -> Self {
        self.traced = log;
        self
    }

    /// The deadline of a job holding the rows of `request_ids`.
    pub fn of_rows(&self, request_ids: &[u64]) -> Option<Instant> {
        let log = self.log.as_ref()?;
        latest(request_ids.iter().map(|&id| log.deadline(id)))
    }

    /// The graph's trace book (kept by the same request log), when the node reads one.
    pub fn traces(&self) -> Option<&weir_engine::trace::TraceBook> {
        self.traced.as_deref().map(RequestLog::traces)
    }

    /// Counts `rows` rows answered expired instead of run.
    pub fn count_expired(&self, rows: usize) {
        self.expired.fetch_add(rows as u64, Ordering::Relaxed);
    }

    /// Rows answered expired so far.
    pub fn expired_rows(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_late_only_once_every_row_is() {
        let now = Instant::now();
        let (early, late) = (
            now - Duration::from_millis(5),
            now + Duration::from_millis(5),
        );
        assert_eq!(latest([Some(early), Some(late)]), Some(late));
        assert_eq!(latest([Some(early), None]), None);
        assert_eq!(latest([]), None);
        assert_eq!(lateness(Some(early), now), Some(Duration::from_millis(5)));
        assert_eq!(lateness(Some(late), now), None);
        assert_eq!(lateness(None, now), None);
    }

    #[test]
    fn rows_take_their_deadlines_from_the_request_log() {
        let log = Arc::new(RequestLog::default());
        let soon = Instant::now() + Duration::from_secs(1);
        log.insert(1, Some(soon), Box::new(|_| {}));
        log.insert(2, None, Box::new(|_| {}));
        let counted = Arc::new(AtomicU64::new(0));
        let d = Deadlines::new(Some(log), Arc::clone(&counted));
        assert_eq!(d.of_rows(&[1]), Some(soon));
        assert_eq!(d.of_rows(&[1, 2]), None);
        // An id the log does not hold (answered already, or another process's) has none.
        assert_eq!(d.of_rows(&[3]), None);
        d.count_expired(2);
        assert_eq!((counted.load(Ordering::Relaxed), d.expired_rows()), (2, 2));
        let unlogged = Deadlines::new(None, Arc::default());
        assert_eq!(unlogged.of_rows(&[1]), None);
    }
}
