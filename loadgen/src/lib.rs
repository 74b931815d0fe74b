//! Load for graphs and models, and what it measures: the requests ([`workload`]: random tensors
//! of a graph's input shapes or a labelled CSV data set), the loop that drives a running graph
//! with them (this module's [`run_load`]) and SERF's offline profile of a model's parallelism
//! configurations ([`profile`], `weir profile`), which is the same driving applied to each
//! configuration in turn. `weir run`, `weir profile` and the benchmarks share it.
//!
//! Drives a running graph with a workload, open- or closed-loop, and summarises what came back.
//!
//! Closed loop: `concurrency` client threads, each sending its next request when the previous one is
//! answered (latency = answer − send). Open loop: one dispatcher sends at Poisson arrival times
//! regardless of answers, so queueing shows (latency = answer − *scheduled* send, which counts a
//! late dispatcher against the system, avoiding coordinated omission). Every request is accounted
//! for: answered with outputs, answered with an error, or refused at admission.
//!
//! The open-loop dispatcher asks the kernel for a 1 ns timer slack (Linux) before it sleeps to each
//! arrival, so that its sleeps do not overrun by the default 50 µs. It still sends late when the
//! served model's threads hold every core (on 2 cores, a tenth of a millisecond at low load and
//! about half a millisecond at the top loads of `weir-bench serf`, `benchmarks/serf/README.md`);
//! how late is in the report
//! ([`LoadReport::mean_send_lateness`]), and the latency counts it, as it counts any delay after
//! the scheduled arrival.

pub mod profile;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use weir_engine::request::{RequestError, Response};
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::DType;

use crate::workload::{WorkItem, Workload};

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// `concurrency` clients, each waiting for its answer before sending again.
    Closed {
        /// Clients.
        concurrency: usize,
    },
    /// One client that sends each request `pause` after the answer to the previous one (and the
    /// first after `pause`): requests that find the graph idle for about that long.
    Paced {
        /// Time between an answer and the next request.
        pause: Duration,
    },
    /// Poisson arrivals at `rate` requests per second.
    Poisson {
        /// Mean requests per second.
        rate: f64,
    },
}

impl Arrival {
    /// The clients of a closed loop and the pause each takes before sending: `(c, 0)` for
    /// [`Arrival::Closed`], `(1, pause)` for [`Arrival::Paced`]; Poisson arrivals have no clients
    /// (`(0, 0)`).
    pub fn clients(&self) -> (usize, Duration) {
        match *self {
            Arrival::Closed { concurrency } => (concurrency.max(1), Duration::ZERO),
            Arrival::Paced { pause } => (1, pause),
            Arrival::Poisson { .. } => (0, Duration::ZERO),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Requests to send (after warm-up).
    pub requests: usize,
    /// Requests sent first and not counted.
    pub warmup: usize,
    /// Arrival process.
    pub arrival: Arrival,
    /// Seed for arrival times.
    pub seed: u64,
    /// Graph output compared with the label for accuracy (`None`: the first i64 output of one element).
    pub label_output: Option<String>,
    /// Show a progress bar.
    pub progress: bool,
}

/// What came back.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// Requests sent (excluding warm-up).
    pub sent: usize,
    /// Answered with outputs.
    pub ok: usize,
    /// Errors by class label, with one example message each.
    pub errors: BTreeMap<&'static str, (usize, String)>,
    /// Wall time of the measured part.
    pub elapsed: Duration,
    /// Latencies of answered requests, in microseconds.
    pub latency_us: Histogram<u64>,
    /// (correct, labelled) when the workload has labels.
    pub accuracy: Option<(usize, usize)>,
    /// Open loop: how late the dispatcher sent a request after its scheduled time, on average
    /// (part of every latency); zero for closed loop.
    pub mean_send_lateness: Duration,
}

impl LoadReport {
    /// Answers per second over the measured part.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Latency quantile `q` in milliseconds.
    pub fn latency_ms(&self, q: f64) -> f64 {
        self.latency_us.value_at_quantile(q) as f64 / 1000.0
    }

    /// Errors of every class.
    pub fn error_count(&self) -> usize {
        self.errors.values().map(|(n, _)| n).sum()
    }

    /// A human-readable summary.
    pub fn summary(&self, graph: &str) -> String {
        let mut s = format!(
            "graph `{graph}`: {} requests, {} ok, {} errors in {:.2} s → {:.1} req/s\n",
            self.sent,
            self.ok,
            self.error_count(),
            self.elapsed.as_secs_f64(),
            self.throughput()
        );
        if self.ok > 0 {
            s.push_str(&format!(
                "latency ms: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  mean {:.3}\n",
                self.latency_ms(0.5),
                self.latency_ms(0.9),
                self.latency_ms(0.99),
                self.latency_ms(0.999),
                self.latency_us.max() as f64 / 1000.0,
                self.latency_us.mean() / 1000.0
            ));
        }
        if let Some((correct, total)) = self.accuracy {
            s.push_str(&format!(
                "accuracy: {:.4} ({correct}/{total})\n",
                correct as f64 / total.max(1) as f64
            ));
        }
        for (class, (n, example)) in &self.errors {
            s.push_str(&format!("errors {class}: {n} (e.g. {example})\n"));
        }
        s
    }
}

struct Outcome {
    latency: Duration,
    /// Send time minus scheduled time (open loop; zero for closed loop).
    late: Duration,
    result: Result<Response, RequestError>,
    label: Option<i64>,
}

fn predicted_class(r: &Response, output: Option<&str>) -> Option<i64> {
    let t = match output {
        Some(name) => r.output(name)?,
        None => r
            .outputs
            .iter()
            .map(|o| &o.tensor)
            .find(|t| t.dtype() == DType::I64 && t.data.len() == 1)?,
    };
    t.as_i64().and_then(|v| v.first().copied())
}

struct Tally {
    report: LoadReport,
    labelled: usize,
    correct: usize,
    late_total: Duration,
    outcomes: u32,
}

impl Tally {
    fn new(sent: usize) -> Tally {
        Tally {
            report: LoadReport {
                sent,
                ok: 0,
                errors: BTreeMap::new(),
                elapsed: Duration::ZERO,
                latency_us: latency_histogram(),
                accuracy: None,
                mean_send_lateness: Duration::ZERO,
            },
            labelled: 0,
            correct: 0,
            late_total: Duration::ZERO,
            outcomes: 0,
        }
    }

    fn add(&mut self, o: Outcome, label_output: Option<&str>) {
        self.late_total += o.late;
        self.outcomes = self.outcomes.saturating_add(1);
        match o.result {
            Ok(r) => {
                self.report.ok += 1;
                let _ = self
                    .report
                    .latency_us
                    .record((o.latency.as_micros() as u64).max(1));
                if let Some(label) = o.label {
                    self.labelled += 1;
                    if predicted_class(&r, label_output) == Some(label) {
                        self.correct += 1;
                    }
                }
            }
            Err(e) => {
                let entry = self
                    .report
                    .errors
                    .entry(e.class().label())
                    .or_insert((0, e.to_string()));
                entry.0 += 1;
            }
        }
    }

    fn finish(mut self, elapsed: Duration) -> LoadReport {
        self.report.elapsed = elapsed;
        if self.outcomes > 0 {
            self.report.mean_send_lateness = self.late_total / self.outcomes;
        }
        if self.labelled > 0 {
            self.report.accuracy = Some((self.correct, self.labelled));
        }
        self.report
    }
}

/// Asks the kernel to wake this thread's sleeps within 1 ns of their deadline instead of the
/// default 50 µs (Linux; elsewhere nothing): the open-loop dispatcher's sleeps are arrival times.
fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and changes only this thread's
        // timer slack; no memory is passed to the kernel.
        let slack_ns: libc::c_ulong = 1;
        let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns) };
        if rc != 0 {
            tracing::debug!("Timer slack left at the default (prctl failed).");
        }
    }
}

/// A histogram of 1 µs to 1 h at 3 significant figures.
///
/// # Panics
/// Never: the bounds and precision are constants hdrhistogram accepts.
pub fn latency_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

fn progress_bar(n: usize, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(n as u64);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {per_sec} eta {eta}",
    ) {
        pb.set_style(style);
    }
    pb
}

/// Runs `spec` against `runtime` with requests from `workload`.
pub fn run_load(runtime: &GraphRuntime, workload: &Workload, spec: &LoadSpec) -> LoadReport {
    run_query_load(runtime, workload, spec, &[1])
}

/// Runs `spec` where each of its `requests` is a *query* of several rows (one graph request per
/// row, submitted together with [`GraphRuntime::submit_group`]): query `i` has
/// `rows_per_query[i % len]` rows (an empty slice means one). A query's latency is from its
/// scheduled send to its last row's answer; it counts as answered when every row was, and as
/// failed (with the first error) otherwise. Accuracy is only kept for one-row queries.
pub fn run_query_load(
    runtime: &GraphRuntime,
    workload: &Workload,
    spec: &LoadSpec,
    rows_per_query: &[usize],
) -> LoadReport {
    let sizes = QuerySizes(rows_per_query);
    if spec.warmup > 0 {
        let warm = LoadSpec {
            requests: spec.warmup,
            warmup: 0,
            progress: false,
            ..spec.clone()
        };
        let _ = drive(runtime, workload, &warm, 0, sizes);
    }
    drive(runtime, workload, spec, spec.warmup, sizes)
}

/// Rows of each query, cycling.
#[derive(Clone, Copy)]
struct QuerySizes<'a>(&'a [usize]);

impl QuerySizes<'_> {
    fn rows(&self, i: usize) -> usize {
        if self.0.is_empty() {
            1
        } else {
            self.0[i % self.0.len()].max(1)
        }
    }
}

/// Query `i`'s rows (`rows` items from the workload), copied out of the pool. A client holds its
/// request before it sends it, so this copy is made before the request's clock starts: it is the
/// pool's cost, not the graph's (a 602 KB image takes a visible part of a millisecond).
fn query_items(workload: &Workload, i: usize, rows: usize) -> Vec<WorkItem> {
    (0..rows.max(1)).map(|k| workload.item(i + k)).collect()
}

/// Submits a query's rows (from [`query_items`]) and calls `done` once with when its last row
/// was answered and its outcome; `Err` (with `done` uncalled) when it was refused at admission.
fn submit_query(
    runtime: &GraphRuntime,
    items: Vec<WorkItem>,
    done: impl FnOnce(Instant, Result<Response, RequestError>, Option<i64>) + Send + 'static,
) -> Result<(), (RequestError, Option<i64>)> {
    let rows = items.len();
    let items = match <[WorkItem; 1]>::try_from(items) {
        Ok([item]) => {
            let label = item.label;
            return runtime
                .submit(
                    item.inputs,
                    Box::new(move |r| done(Instant::now(), r, label)),
                )
                .map(|_| ())
                .map_err(|e| (e, label));
        }
        Err(items) => items,
    };
    // The last row to be answered reports the query: its outcome, or the first error.
    struct Pending<F> {
        left: usize,
        result: Option<Result<Response, RequestError>>,
        done: Option<F>,
    }
    let pending = Arc::new(std::sync::Mutex::new(Pending {
        left: rows,
        result: None,
        done: Some(done),
    }));
    let group = items
        .into_iter()
        .map(|item| {
            let pending = Arc::clone(&pending);
            let responder: weir_engine::request::Responder = Box::new(move |r| {
                let mut p = pending.lock().unwrap_or_else(|e| e.into_inner());
                p.left -= 1;
                if p.result.as_ref().is_none_or(|kept| kept.is_ok()) {
                    p.result = Some(r);
                }
                if p.left == 0 {
                    if let (Some(done), Some(result)) = (p.done.take(), p.result.take()) {
                        drop(p);
                        done(Instant::now(), result, None);
                    }
                }
            });
            (item.inputs, responder)
        })
        .collect();
    runtime
        .submit_group(group)
        .map(|_| ())
        .map_err(|e| (e, None))
}

fn drive(
    runtime: &GraphRuntime,
    workload: &Workload,
    spec: &LoadSpec,
    offset: usize,
    sizes: QuerySizes<'_>,
) -> LoadReport {
    let pb = progress_bar(spec.requests, spec.progress);
    let label_output = spec.label_output.as_deref();
    let mut tally = Tally::new(spec.requests);
    let started = Instant::now();
    match spec.arrival {
        Arrival::Closed { .. } | Arrival::Paced { .. } => {
            let (clients, pause) = spec.arrival.clients();
            let next = Arc::new(AtomicUsize::new(0));
            let (tx, rx) = unbounded::<Outcome>();
            std::thread::scope(|s| {
                for _ in 0..clients {
                    let (next, tx, pb) = (Arc::clone(&next), tx.clone(), pb.clone());
                    s.spawn(move || loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= spec.requests {
                            break;
                        }
                        if !pause.is_zero() {
                            std::thread::sleep(pause);
                        }
                        let (rtx, rrx) = bounded(1);
                        let items = query_items(workload, offset + i, sizes.rows(offset + i));
                        let sent = Instant::now();
                        let result = match submit_query(runtime, items, move |at, r, label| {
                            let _ = rtx.send((at, r, label));
                        }) {
                            Ok(()) => rrx.recv().unwrap_or_else(|_| {
                                (
                                    Instant::now(),
                                    Err(RequestError::ShuttingDown {
                                        graph: String::new(),
                                    }),
                                    None,
                                )
                            }),
                            Err((e, label)) => (Instant::now(), Err(e), label),
                        };
                        let _ = tx.send(Outcome {
                            latency: result.0 - sent,
                            late: Duration::ZERO,
                            result: result.1,
                            label: result.2,
                        });
                        pb.inc(1);
                    });
                }
                drop(tx);
                for o in rx.iter() {
                    tally.add(o, label_output);
                }
            });
        }
        Arrival::Poisson { rate } => {
            let (tx, rx) = unbounded::<Outcome>();
            let gaps = Exp::new(rate.max(1e-9)).ok();
            let mut rng = StdRng::seed_from_u64(spec.seed);
            std::thread::scope(|s| {
                let pb2 = pb.clone();
                s.spawn(move || {
                    tighten_timer_slack();
                    let mut at = Duration::ZERO;
                    for i in 0..spec.requests {
                        if let Some(g) = &gaps {
                            at += Duration::from_secs_f64(g.sample(&mut rng));
                        }
                        let scheduled = started + at;
                        let items = query_items(workload, offset + i, sizes.rows(offset + i));
                        let now = Instant::now();
                        if scheduled > now {
                            std::thread::sleep(scheduled - now);
                        }
                        let late = Instant::now().saturating_duration_since(scheduled);
                        let (tx2, pb3) = (tx.clone(), pb2.clone());
                        let submitted = submit_query(runtime, items, move |at, r, label| {
                            let _ = tx2.send(Outcome {
                                latency: at.saturating_duration_since(scheduled),
                                late,
                                result: r,
                                label,
                            });
                            pb3.inc(1);
                        });
                        if let Err((e, label)) = submitted {
                            let _ = tx.send(Outcome {
                                latency: scheduled.elapsed(),
                                late,
                                result: Err(e),
                                label,
                            });
                            pb2.inc(1);
                        }
                    }
                });
                for o in rx.iter().take(spec.requests) {
                    tally.add(o, label_output);
                }
            });
        }
    }
    pb.finish_and_clear();
    tally.finish(started.elapsed())
}
