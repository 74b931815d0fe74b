//! Remote workers as model-less serving's control plane sees them ("INFaaS: Automated
//! Model-less Inference Serving", §3.5 (b), §4.2): each watched executor's liveliness and load
//! reports, turned into the metadata store's events and recorded with a [`Dispatcher`].
//!
//! - The executor's `<prefix>/alive` token appearing is [`Event::WorkerUp`]; its disappearing
//!   (the process died, its link dropped, it stopped) is [`Event::WorkerDown`], after an
//!   [`Event::Unloaded`] for every variant it was serving, so no query is sent there again.
//! - Each load report (`<prefix>/load`, every half second) is compared with the previous one:
//!   a model that appears is [`Event::Loaded`], one that disappears [`Event::Unloaded`], and every
//!   model in both gets an [`Event::InstanceLoad`]: rows per second and mean call time over the
//!   interval, and the jobs queued now. The executor's [`Event::WorkerLoad`] is the share of its
//!   sessions' time spent holding calls (inside ONNX Runtime, or an emulated type's wait) over the
//!   interval, 0 with nothing loaded.
//!
//! A worker's id is its executor's key prefix, which is also where commands for it go. Reports
//! are hostile: one larger than [`MAX_REPORT_BYTES`] or not a report is dropped and logged, and
//! counters that go backwards (a restarted executor) restart the interval instead of giving
//! negative rates. Who may publish on an executor's keys is zenoh's access control's to decide,
//! as for the executor's replies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::warn;
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::state::{Event, Worker};
use zenoh::pubsub::Subscriber;
use zenoh::sample::SampleKind;
use zenoh::{Session, Wait};

use crate::protocol::LoadReport;
use weir_connectors::zenoh_peer::SessionError;

/// The largest load report read.
pub const MAX_REPORT_BYTES: usize = 1 << 20;

/// One executor to watch: its key prefix (the worker id) and its executor type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedExecutor {
    /// Key prefix, e.g. `weir/executor/a`.
    pub prefix: String,
    /// Executor type (a variant's `config.hardware`).
    pub hardware: String,
}

/// The subscriptions feeding the dispatcher; dropping it stops them.
pub struct WorkerWatch {
    _subscribers: Vec<Subscriber<()>>,
}

impl std::fmt::Debug for WorkerWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerWatch").finish_non_exhaustive()
    }
}

/// What is known of one worker between its reports.
#[derive(Debug, Default)]
struct Seen {
    alive: bool,
    last: Option<(Instant, LoadReport)>,
}

impl WorkerWatch {
    /// Watches `executors` over `session`, recording their events with `dispatcher`.
    ///
    /// # Errors
    /// When a subscription cannot be declared.
    pub fn start(
        session: &Session,
        executors: &[WatchedExecutor],
        dispatcher: Arc<dyn Dispatcher>,
    ) -> Result<WorkerWatch, SessionError> {
        let zenoh_err = |e: zenoh::Error| SessionError(e.to_string());
        let mut subscribers = Vec::new();
        for executor in executors {
            let prefix = executor.prefix.trim_end_matches('/').to_string();
            let seen = Arc::new(Mutex::new(Seen::default()));
            let (worker, watched, record) = (
                Worker {
                    id: prefix.clone(),
                    hardware: executor.hardware.clone(),
                },
                Arc::clone(&seen),
                Arc::clone(&dispatcher),
            );
            subscribers.push(
                session
                    .liveliness()
                    .declare_subscriber(format!("{prefix}/alive"))
                    .history(true)
                    .callback(move |sample| {
                        let up = sample.kind() == SampleKind::Put;
                        let mut seen = watched.lock().unwrap_or_else(|p| p.into_inner());
                        for event in liveliness_events(&worker, &mut seen, up) {
                            record.record(event);
                        }
                    })
                    .wait()
                    .map_err(zenoh_err)?,
            );
            let (id, record) = (prefix.clone(), Arc::clone(&dispatcher));
            subscribers.push(
                session
                    .declare_subscriber(format!("{prefix}/load"))
                    .callback(move |sample| {
                        let bytes = sample.payload().to_bytes();
                        if bytes.len() > MAX_REPORT_BYTES {
                            warn!(worker = %id, bytes = bytes.len(), "Load report too large, dropped.");
                            return;
                        }
                        let report: LoadReport = match serde_json::from_slice(&bytes) {
                            Ok(r) => r,
                            Err(e) => {
                                warn!(worker = %id, error = %e, "Undecodable load report, dropped.");
                                return;
                            }
                        };
                        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                        if !seen.alive {
                            return;
                        }
                        let now = Instant::now();
                        for event in report_events(&id, seen.last.as_ref(), now, &report) {
                            record.record(event);
                        }
                        seen.last = Some((now, report));
                    })
                    .wait()
                    .map_err(zenoh_err)?,
            );
        }
        Ok(WorkerWatch {
            _subscribers: subscribers,
        })
    }
}

/// The events of `worker`'s liveliness token appearing (`up`) or disappearing.
fn liveliness_events(worker: &Worker, seen: &mut Seen, up: bool) -> Vec<Event> {
    if up == seen.alive {
        return Vec::new();
    }
    seen.alive = up;
    if up {
        return vec![Event::WorkerUp(worker.clone())];
    }
    let served = seen.last.take().map(|(_, r)| r.models).unwrap_or_default();
    served
        .into_keys()
        .map(|variant| Event::Unloaded {
            variant,
            worker: worker.id.clone(),
        })
        .chain([Event::WorkerDown {
            worker: worker.id.clone(),
        }])
        .collect()
}

/// The events a load report of `worker` at `now` makes, given the previous one.
fn report_events(
    worker: &str,
    previous: Option<&(Instant, LoadReport)>,
    now: Instant,
    report: &LoadReport,
) -> Vec<Event> {
    let empty = BTreeMap::new();
    let (since, before) = previous.map_or((None, &empty), |(t, r)| (Some(*t), &r.models));
    let seconds = since.map_or(0.0, |t| now.saturating_duration_since(t).as_secs_f64());
    // The executor's utilisation: the share of its sessions' time spent holding calls (inside
    // ONNX Runtime, or an emulated type's wait) over the interval; with nothing loaded, none.
    let (mut held_ms, mut sessions) = (0.0f64, 0u64);
    for (variant, load) in &report.models {
        if let Some(old) = before.get(variant) {
            let now_ms = load.busy_ms + load.held_ms;
            let then_ms = old.busy_ms + old.held_ms;
            if now_ms.is_finite() && then_ms.is_finite() {
                held_ms += (now_ms - then_ms).max(0.0);
                sessions += u64::from(load.sessions);
            }
        }
    }
    let utilisation = match (seconds > 0.0, sessions, report.models.is_empty()) {
        (false, _, _) => None,
        (true, _, true) => Some(0.0),
        (true, 0, false) => None,
        (true, n, false) => Some((held_ms / (seconds * 1e3 * n as f64)).clamp(0.0, 1.0)),
    };
    let mut events: Vec<Event> = before
        .keys()
        .filter(|m| !report.models.contains_key(*m))
        .map(|variant| Event::Unloaded {
            variant: variant.clone(),
            worker: worker.to_string(),
        })
        .collect();
    for (variant, load) in &report.models {
        let Some(old) = before.get(variant) else {
            events.push(Event::Loaded {
                variant: variant.clone(),
                worker: worker.to_string(),
            });
            continue;
        };
        let (rows, runs) = (
            load.rows.checked_sub(old.rows),
            load.runs.checked_sub(old.runs),
        );
        let (Some(rows), Some(runs)) = (rows, runs) else {
            // Counters went backwards: a new interval starts with this report.
            continue;
        };
        let busy_ms = (load.busy_ms - old.busy_ms).max(0.0);
        events.push(Event::InstanceLoad {
            variant: variant.clone(),
            worker: worker.to_string(),
            qps: if seconds > 0.0 {
                rows as f64 / seconds
            } else {
                0.0
            },
            mean_latency_ms: if runs > 0 { busy_ms / runs as f64 } else { 0.0 },
            outstanding: u32::try_from(load.queue_depth).unwrap_or(u32::MAX),
        });
    }
    if let Some(utilisation) = utilisation {
        events.push(Event::WorkerLoad {
            worker: worker.to_string(),
            utilisation,
        });
    }
    events
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::ModelLoad;

    fn report(models: &[(&str, u64, u64, f64, u64)]) -> LoadReport {
        LoadReport {
            executor: "a".into(),
            device: "cpu".into(),
            models: models
                .iter()
                .map(|(name, runs, rows, busy_ms, queue_depth)| {
                    (
                        name.to_string(),
                        ModelLoad {
                            queue_depth: *queue_depth,
                            runs: *runs,
                            rows: *rows,
                            busy_ms: *busy_ms,
                            held_ms: 0.0,
                            sessions: 1,
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn reports_become_lifecycle_and_load_events() {
        let t0 = Instant::now();
        let first = report(&[("v1", 10, 20, 5.0, 0)]);
        assert_eq!(
            report_events("w", None, t0, &first),
            vec![Event::Loaded {
                variant: "v1".into(),
                worker: "w".into()
            }]
        );
        let t1 = t0 + Duration::from_secs(2);
        let second = report(&[("v1", 14, 40, 13.0, 3), ("v2", 0, 0, 0.0, 0)]);
        let events = report_events("w", Some(&(t0, first.clone())), t1, &second);
        assert_eq!(
            events,
            vec![
                Event::InstanceLoad {
                    variant: "v1".into(),
                    worker: "w".into(),
                    qps: 10.0,
                    mean_latency_ms: 2.0,
                    outstanding: 3
                },
                Event::Loaded {
                    variant: "v2".into(),
                    worker: "w".into()
                },
                // 8 ms of calls in 2 s on one session.
                Event::WorkerLoad {
                    worker: "w".into(),
                    utilisation: 0.004
                },
            ]
        );
        let third = report(&[("v2", 1, 1, 1.0, 0)]);
        let events = report_events("w", Some(&(t1, second)), t1, &third);
        assert_eq!(
            events[0],
            Event::Unloaded {
                variant: "v1".into(),
                worker: "w".into()
            }
        );
        // A restarted executor's counters go backwards: no rate for that interval.
        let restarted = report(&[("v2", 0, 0, 0.0, 0)]);
        assert!(report_events("w", Some(&(t1, third)), t1, &restarted).is_empty());
    }

    #[test]
    fn a_worker_going_down_unloads_what_it_served_first() {
        let worker = Worker {
            id: "w".into(),
            hardware: "local".into(),
        };
        let mut seen = Seen::default();
        assert_eq!(
            liveliness_events(&worker, &mut seen, true),
            vec![Event::WorkerUp(worker.clone())]
        );
        assert!(liveliness_events(&worker, &mut seen, true).is_empty());
        seen.last = Some((Instant::now(), report(&[("v1", 0, 0, 0.0, 0)])));
        assert_eq!(
            liveliness_events(&worker, &mut seen, false),
            vec![
                Event::Unloaded {
                    variant: "v1".into(),
                    worker: "w".into()
                },
                Event::WorkerDown { worker: "w".into() },
            ]
        );
        assert!(seen.last.is_none());
    }
}
