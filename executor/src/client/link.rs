//! Telling a dead link from a slow model, and zenoh's own answers from an executor's.
//!
//! An executor publishes a load report on `<prefix>/load` every half second whatever its models
//! are doing, so the reports are its heartbeat: [`Heartbeat`] records when one last arrived. A
//! link that goes dark while both ends run is seen by the silence long before zenoh's own lease
//! closes the session (ten seconds by default, and never if the link heals first): a replica
//! silent for [`SILENCE_LIMIT`] takes no new jobs, and the first report after the silence
//! revives it (the pool's revival callbacks). A query that times out while the heartbeat is
//! fresh met a slow model, not a dead link; both are re-dispatched, but only the dead link stops
//! the replica taking work.
//!
//! The reports also carry the executor's own counters (queue, jobs held, served, errors);
//! [`LastReport`] keeps the newest one's figures for the replica's model, which the status
//! board shows beside the graph's own view of the replica.
//!
//! The executor answers every failure with a weir error document; an error reply that is not one
//! ([`TransportReply`]) comes from zenoh itself — a router's `Timeout` sent on the executor's
//! behalf when the query's time ran out, say — and is the link's failure, never the model's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weir_operators::model::{ExecutorReport, ReplicaError};

use crate::protocol::{LoadReport, ModelLoad};
use crate::server::LOAD_REPORT_EVERY;

use super::workers::MAX_REPORT_BYTES;

/// Heartbeat silence after which the link is taken for dead (six missed load reports: a loaded
/// machine delays a report or two, a cut link stops them all).
pub const SILENCE_LIMIT: Duration = LOAD_REPORT_EVERY.saturating_mul(6);

/// When an executor was last heard from (a load report, or a reply).
#[derive(Debug)]
pub(crate) struct Heartbeat {
    last: Mutex<Instant>,
    /// Whether the silence was noticed (logged once per silence).
    silent: AtomicBool,
}

impl Heartbeat {
    /// Heard just now (a replica starts fresh: its first report is half a second away).
    pub(crate) fn new() -> Self {
        Heartbeat {
            last: Mutex::new(Instant::now()),
            silent: AtomicBool::new(false),
        }
    }

    /// Records a sign of life; true when it ends a silence that took the replica out.
    pub(crate) fn heard(&self) -> bool {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.silent.swap(false, Ordering::AcqRel)
    }

    /// How long since the last sign of life.
    pub(crate) fn quiet_for(&self) -> Duration {
        self.last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// Whether the link is taken for dead now; true the first time a silence is seen (for a
    /// single warning), in the second field.
    pub(crate) fn check_silence(&self) -> (bool, bool) {
        let silent = self.quiet_for() >= SILENCE_LIMIT;
        if !silent {
            return (false, false);
        }
        let first = !self.silent.swap(true, Ordering::AcqRel);
        (true, first)
    }
}

/// The newest load report's figures for one model, when it came and the executor's device.
#[derive(Debug, Default)]
pub(crate) struct LastReport(Mutex<Option<(Instant, String, ModelLoad)>>);

impl LastReport {
    /// Keeps what the load report `bytes` says of model `model`. Reports are hostile: one
    /// larger than [`MAX_REPORT_BYTES`], not a report, or without the model changes nothing
    /// (it still counts as a sign of life, elsewhere).
    pub(crate) fn keep(&self, bytes: &[u8], model: &str) {
        if bytes.len() > MAX_REPORT_BYTES {
            return;
        }
        let Ok(mut report) = serde_json::from_slice::<LoadReport>(bytes) else {
            return;
        };
        if let Some(load) = report.models.remove(model) {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), report.device, load));
        }
    }

    /// The executor as it reports itself, last heard `heard_ago`.
    pub(crate) fn read(&self, heard_ago: Duration) -> ExecutorReport {
        let last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let Some((at, device, load)) = last.as_ref() else {
            return ExecutorReport {
                heard_ago,
                ..Default::default()
            };
        };
        ExecutorReport {
            heard_ago,
            reported_ago: Some(at.elapsed()),
            device: device.clone(),
            queue_depth: load.queue_depth,
            in_flight: load.in_flight,
            runs: load.runs,
            rows: load.rows,
            served: load.served,
            errors: load.errors,
            busy: Duration::from_secs_f64(load.busy_ms.clamp(0.0, 1e12) / 1e3),
            sessions: load.sessions,
            preferred_batch: load.preferred_batch,
        }
    }
}

/// An error reply that is not an executor's document: zenoh's own (its routers' `Timeout`, or
/// anything else a transport layer may answer with).
pub(crate) struct TransportReply<'a>(pub &'a [u8]);

impl TransportReply<'_> {
    /// Whether zenoh says the query's time ran out.
    pub(crate) fn is_timeout(&self) -> bool {
        self.0 == b"Timeout"
    }
}

/// Why a query ended without the executor's answer, as the pool sees it: always *unavailable*
/// (another replica may serve it), with the cause named for the operator.
pub(crate) fn timed_out(
    replica: &str,
    timeout: Duration,
    heartbeat: &Heartbeat,
    origin: &str,
) -> ReplicaError {
    let quiet = heartbeat.quiet_for();
    let cause = if quiet >= SILENCE_LIMIT {
        format!(
            "its link is silent (no heartbeat for {} ms)",
            quiet.as_millis()
        )
    } else {
        format!(
            "it is alive (heartbeat {} ms ago): a slow model",
            quiet.as_millis()
        )
    };
    ReplicaError::Unavailable(format!(
        "executor `{replica}` did not answer within {} ms ({origin}); {cause}",
        timeout.as_millis()
    ))
}

/// A transport error reply that is not a time-out, as the pool sees it: *unavailable*.
pub(crate) fn transport_error(replica: &str, body: &[u8]) -> ReplicaError {
    let shown = String::from_utf8_lossy(&body[..body.len().min(120)]).into_owned();
    ReplicaError::Unavailable(format!(
        "the link to executor `{replica}` failed (zenoh answered `{}`)",
        weir_connectors::echo::quote(&shown)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silence_is_seen_once_and_ended_by_a_sign_of_life() {
        let h = Heartbeat::new();
        assert_eq!(h.check_silence(), (false, false));
        *h.last.lock().unwrap() = Instant::now() - SILENCE_LIMIT - Duration::from_millis(1);
        assert_eq!(h.check_silence(), (true, true));
        assert_eq!(h.check_silence(), (true, false), "warned once");
        assert!(h.heard(), "the silence ends");
        assert_eq!(h.check_silence(), (false, false));
        assert!(!h.heard());
    }

    #[test]
    fn the_newest_report_of_the_model_is_kept_and_junk_is_not() {
        let kept = LastReport::default();
        assert_eq!(kept.read(Duration::ZERO).reported_ago, None);
        let report = |rows: u64| {
            format!(
                r#"{{"executor":"e","device":"cpu","models":{{"m":{{"queue_depth":1,"runs":2,"rows":{rows},"busy_ms":4.0,"served":3,"errors":0}},"other":{{"queue_depth":9,"runs":9,"rows":9,"busy_ms":9.0}}}}}}"#
            )
        };
        kept.keep(report(5).as_bytes(), "m");
        kept.keep(b"not json", "m");
        kept.keep(report(6).as_bytes(), "absent");
        let r = kept.read(Duration::from_millis(100));
        assert_eq!((r.rows, r.runs, r.queue_depth), (5, 2, 1));
        assert_eq!((r.served, r.errors, r.in_flight), (Some(3), Some(0), None));
        assert_eq!(r.busy, Duration::from_millis(4));
        assert_eq!(r.device, "cpu");
        assert!(r.reported_ago.is_some());
        assert_eq!(r.heard_ago, Duration::from_millis(100));
        kept.keep(report(7).as_bytes(), "m");
        assert_eq!(kept.read(Duration::ZERO).rows, 7);
    }

    #[test]
    fn a_time_out_names_a_dead_link_or_a_slow_model() {
        let h = Heartbeat::new();
        let slow = timed_out("cpu-a", Duration::from_secs(5), &h, "zenoh: Timeout");
        assert!(matches!(&slow, ReplicaError::Unavailable(m) if m.contains("slow model")));
        *h.last.lock().unwrap() = Instant::now() - SILENCE_LIMIT;
        let dead = timed_out("cpu-a", Duration::from_secs(5), &h, "zenoh: Timeout");
        assert!(matches!(&dead, ReplicaError::Unavailable(m) if m.contains("link is silent")));
        assert!(TransportReply(b"Timeout").is_timeout());
        assert!(!TransportReply(b"{\"kind\":\"model\"}").is_timeout());
        let other = transport_error("cpu-a", b"route gone");
        assert!(matches!(&other, ReplicaError::Unavailable(m) if m.contains("route gone")));
    }
}
