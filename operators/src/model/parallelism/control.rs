//! The SERF control loop of one `auto` node (the parent module's docs, *Control loop*): a thread
//! that reads the node's load each tick, feeds it to the scheduler, publishes the gauges and
//! applies the switches the scheduler decides.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use tracing::{debug, info, warn};
use weir_engine::runtime::AdmissionGauge;
use weir_serf::config::Config;
use weir_serf::scheduler::{Reprofile, Scheduler, SchedulerError, Standing};

use super::{AutoOptions, Switchboard};
use crate::model::executor::LoadStats;

/// The SERF control loop of one `auto` node: a thread that stops when this is dropped.
#[derive(Debug)]
pub(crate) struct Controller {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl Controller {
    /// Starts the loop over `board` with `options`; `stats` are the executor's counters (its queue
    /// length feeds the scheduler's backlog guard).
    pub(crate) fn start(
        board: Arc<Switchboard>,
        stats: Arc<LoadStats>,
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
        let admission = options.admission;
        board.gauges().reads_admission = admission.is_some();
        let handle = std::thread::Builder::new()
            .name(format!("serf-{node}"))
            .spawn(move || {
                let load = Load {
                    board: &board,
                    stats: &stats,
                    admission: admission.as_ref(),
                };
                control_loop(load, scheduler, tick, origin, &stopped)
            })
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

/// One control tick's reading of a node's load: rows that arrived since the last tick and requests
/// waiting in front of the sessions now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExecutorLoad {
    arrivals: u64,
    queued: u64,
}

impl ExecutorLoad {
    /// The reading for a node that reads its load at the graph's admission: the requests admitted
    /// since the last tick (`None` on the first tick with the gauge: the executor's own count), and
    /// as waiting whichever is larger, the executor's queue or every request in the graph beyond the
    /// `running` the sessions can hold — requests held up in the dataflow before the node count too.
    fn with_admission(self, admitted: Option<u64>, in_flight: u64, running: u64) -> ExecutorLoad {
        ExecutorLoad {
            arrivals: admitted.unwrap_or(self.arrivals),
            queued: self.queued.max(in_flight.saturating_sub(running)),
        }
    }
}

/// Where the control loop reads a node's load: its switchboard (arrivals, service times), its
/// executor's counters (queue), and the graph's admission when the node takes every request.
struct Load<'a> {
    board: &'a Switchboard,
    stats: &'a LoadStats,
    admission: Option<&'a AdmissionGauge>,
}

fn control_loop(
    Load {
        board,
        stats,
        admission,
    }: Load<'_>,
    mut scheduler: Scheduler,
    tick: Duration,
    origin: Instant,
    stopped: &Receiver<()>,
) {
    let mut admitted_before: Option<u64> = None;
    loop {
        match stopped.recv_timeout(tick) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = origin.elapsed();
        let at_executor = ExecutorLoad {
            arrivals: board.take_arrivals(),
            queued: stats.queue_depth(),
        };
        let load = match admission {
            Some(gauge) => {
                let admitted = gauge.admitted();
                let seen = at_executor.with_admission(
                    admitted_before.map(|before| admitted.saturating_sub(before)),
                    gauge.in_flight() as u64,
                    board.current().concurrency as u64,
                );
                admitted_before = Some(admitted);
                seen
            }
            None => at_executor,
        };
        board.waiting.store(load.queued, Ordering::Relaxed);
        scheduler.record_arrivals(now, load.arrivals);
        for s in board.take_samples() {
            scheduler.record_service(now, s);
        }
        scheduler.record_queue(load.queued);
        let before = scheduler.last_estimate();
        let switch = scheduler.poll(now);
        if let Some(est) = scheduler.last_estimate() {
            board.set_rate(est.rate);
            if before != Some(est) {
                debug!(node = %board.node, lambda = est.rate, arrivals = est.arrivals, current = %scheduler.current(), "SERF update.");
                board.publish(&scheduler);
            }
        }
        for r in scheduler.take_reprofiles() {
            log_reprofile(&board.node, &r);
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
                standings = %standings_line(&scheduler.decider().standings([sw.to, sw.from], sw.planned_lambda)),
                "Parallelism switched."
            ),
            Err(e) => warn!(node = %board.node, error = %e, "Parallelism switch refused."),
        }
    }
}

fn log_reprofile(node: &str, r: &Reprofile) {
    let list = |v: &[Config]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" < ")
    };
    let evidenced = r
        .evidenced
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    info!(
        node = %node,
        lambda = r.lambda,
        planned_lambda = r.planned_lambda,
        before = %list(&r.before),
        after = %list(&r.after),
        measured_tuples = r.measured_tuples,
        evidenced = %evidenced,
        unconfirmed = ?r.unconfirmed,
        standings = %standings_line(&r.standings),
        "SERF re-profile changed the ranking."
    );
}

/// Standings as one log field: what each configuration was judged at, `; `-separated.
fn standings_line(standings: &[Standing]) -> String {
    standings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_admission_a_backlog_held_before_the_executor_counts_as_waiting() {
        let at_executor = ExecutorLoad {
            arrivals: 135,
            queued: 0,
        };
        // Starved dataflow: the executor saw 135 rows and an empty queue; the graph admitted 245
        // and holds 40 requests, 2 of which the sessions can run.
        assert_eq!(
            at_executor.with_admission(Some(245), 40, 2),
            ExecutorLoad {
                arrivals: 245,
                queued: 38
            }
        );
        // First tick with the gauge: the executor's own arrival count; the queue wins when larger.
        let queued = ExecutorLoad {
            arrivals: 7,
            queued: 12,
        };
        assert_eq!(
            queued.with_admission(None, 5, 2),
            ExecutorLoad {
                arrivals: 7,
                queued: 12
            }
        );
        // Fewer in flight than the sessions hold: nothing waits.
        assert_eq!(at_executor.with_admission(Some(3), 1, 2).queued, 0);
    }
}
