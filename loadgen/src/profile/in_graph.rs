//! Profiling a model node through the serving path: each tuple `(i, t)` is measured on the node's
//! executor inside a running one-node graph (`instances: i`, `intra_op_threads: t`), fed by the
//! load generator through admission, the dataflow and the answer path, and the service times are
//! the executor's own call durations ([`weir_operators::model::LoadStats::record_calls`]).
//!
//! Why (decision, against the paper's bare-session profile, SERF §IV-B): on a machine whose cores
//! the node's threads fill, the same calls take 10–40 % longer inside the serving process than back
//! to back on bare sessions, because weir's own threads (timely worker, load generator, answer
//! path) share the cores with the intra-op threads, and a bare profile under-predicts every
//! measured latency for that reason (`benchmarks/serf/README.md`: scaling the model to the
//! in-graph call time removes most of the error). Measuring where the node serves keeps the
//! paper's method — `μ_i` from about ten requests with `i` running at once — and changes only
//! where the clock is read.
//!
//! Every tuple runs closed-loop with `i + 1` clients, so that a request always waits behind the `i`
//! in service and every measured call really ran with `i` at once; the first `samples` calls are
//! kept (the last ones of a run drain with fewer). With [`GraphProfiler::without_queue`] a tuple
//! runs with `i` clients instead: no request waits, so the answer path and the next request's way
//! in run in the gap a call leaves on its own slot rather than beside the other slots' calls —
//! on a machine whose cores the tuple fills, the waiting client's path work is what slows one slot
//! (`benchmarks/serf/README.md`), at the price of calls that ran with slightly
//! fewer than `i` at once. The *path time* — what a request spends outside
//! the call — is measured once on the `(1, 1)` graph with a single client: mean answer latency
//! minus mean call time.
//!
//! *Service after idle gaps* ([`GraphProfiler::after_idle`], `weir_serf::idle`): on the `(1, t)`
//! graph, one client that pauses before each request, so every call starts alone on a node idle for
//! the pause (plus the path's fraction of a millisecond). The same requests give the path's time
//! after each pause (answer latency minus call time), which grows as the serving threads park
//! (`weir_serf::profile::Profile::path_after`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use weir_engine::onnx::{read_metadata, ElementType};
use weir_engine::spec::{ExecutorSpec, GraphSpec, ModelBuilder};
use weir_serf::config::Config;

use super::MeasureError;
use crate::workload::Workload;
use crate::{run_load, Arrival, LoadReport, LoadSpec};
use weir_engine::runtime::RuntimeOptions;
use weir_runtime::{plan_spec, start, RunningGraph};

/// The id of the model node in the one-node graph.
pub const NODE: &str = "model";

/// A running one-node graph of the model at `path` with `config`'s layout (`instances: c`,
/// `intra_op_threads: t`, the rest of `executor` kept, no batching), every model input fed by a graph
/// input of its shape (a dynamic dimension read as 1) and the first output answered; with a
/// one-request random workload for it.
///
/// # Errors
/// [`MeasureError::Graph`] when the model cannot be read, has an input that is neither f32 nor
/// i64, or the graph does not plan or start.
pub fn one_node_graph(
    path: &Path,
    config: Config,
    executor: ExecutorSpec,
) -> Result<(RunningGraph, Workload), MeasureError> {
    let failed = |what: String| MeasureError::Graph(format!("{}: {what}", path.display()));
    let meta = read_metadata(path).map_err(|e| failed(e.to_string()))?;
    let output = meta
        .outputs
        .first()
        .ok_or_else(|| failed("the model has no output".into()))?;
    let mut model = ModelBuilder::new(NODE, path).executor(ExecutorSpec {
        instances: config.concurrency,
        intra_op_threads: config.threads,
        ..executor
    });
    let mut spec = GraphSpec::builder("profile");
    for (k, input) in meta.inputs.iter().enumerate() {
        let ElementType::Supported(dtype) = input.element else {
            return Err(failed(format!(
                "input `{}` is neither f32 nor i64",
                input.name
            )));
        };
        let shape: Vec<i64> = input
            .synthetic_shape(true)
            .iter()
            .map(|&n| n as i64)
            .collect();
        let name = format!("x{k}");
        spec = spec.input(&name, dtype, &shape);
        model = model.input(&input.name, &name);
    }
    let spec = spec
        .model(model)
        .output("y", &format!("{NODE}.{}", output.name))
        .build();
    let graph = plan_spec(&spec, Path::new(".")).map_err(|d| failed(d.to_string()))?;
    let workload = Workload::random(&graph.plan, 1, 7);
    let running =
        start(graph.plan, RuntimeOptions::default()).map_err(|e| failed(e.to_string()))?;
    Ok((running, workload))
}

/// Runs `requests` closed-loop with `clients` clients; an error answer fails the measurement.
fn closed_loop(
    graph: &RunningGraph,
    workload: &Workload,
    requests: usize,
    clients: usize,
) -> Result<LoadReport, MeasureError> {
    drive(
        graph,
        workload,
        requests,
        Arrival::Closed {
            concurrency: clients,
        },
    )
}

/// Runs `requests` arriving by `arrival`; an error answer fails the measurement.
fn drive(
    graph: &RunningGraph,
    workload: &Workload,
    requests: usize,
    arrival: Arrival,
) -> Result<LoadReport, MeasureError> {
    let report = run_load(
        graph.runtime(),
        workload,
        &LoadSpec {
            requests,
            warmup: 0,
            arrival,
            seed: 0,
            label_output: None,
            progress: false,
        },
    );
    match report.errors.values().next() {
        Some((_, example)) => Err(MeasureError::Request(example.clone())),
        None => Ok(report),
    }
}

/// Runs `requests` arriving by `arrival` and returns the duration of every call the node made
/// meanwhile (seconds, in the order they ended) with the load report.
fn timed(
    graph: &RunningGraph,
    workload: &Workload,
    requests: usize,
    arrival: Arrival,
) -> Result<(Vec<f64>, LoadReport), MeasureError> {
    let load = graph
        .executor_load(NODE)
        .ok_or_else(|| MeasureError::Graph("the one-node graph has no local executor".into()))?;
    load.record_calls();
    let report = drive(graph, workload, requests, arrival);
    let calls: Vec<f64> = load
        .take_calls()
        .calls
        .iter()
        .map(|c| c.duration.as_secs_f64())
        .collect();
    Ok((calls, report?))
}

/// Mean answer latency of `report` minus the mean of `calls`, seconds, never negative: the path's
/// time outside the call when every request made one call.
fn outside_the_call(calls: &[f64], report: &LoadReport) -> f64 {
    let call = calls.iter().sum::<f64>() / calls.len().max(1) as f64;
    (report.latency_us.mean() / 1e6 - call).max(0.0)
}

/// The one-node graphs of one profiling run, one per tuple, started on first use and kept across
/// rounds (starting a graph creates its sessions, which rounds should not repeat).
pub struct GraphProfiler<'a> {
    path: &'a Path,
    executor: ExecutorSpec,
    graphs: BTreeMap<Config, (RunningGraph, Workload)>,
    waiting_clients: usize,
}

impl<'a> GraphProfiler<'a> {
    /// Profiles the model at `path` with `executor`'s spinning and pinning.
    pub fn new(path: &'a Path, executor: ExecutorSpec) -> Self {
        Self {
            path,
            executor,
            graphs: BTreeMap::new(),
            waiting_clients: 1,
        }
    }

    /// Measures every tuple `(i, t)` with `i` clients, none waiting (module docs).
    pub fn without_queue(self) -> Self {
        Self {
            waiting_clients: 0,
            ..self
        }
    }

    fn graph(&mut self, tuple: Config) -> Result<&(RunningGraph, Workload), MeasureError> {
        if !self.graphs.contains_key(&tuple) {
            let started = one_node_graph(self.path, tuple, self.executor)?;
            self.graphs.insert(tuple, started);
        }
        self.graphs
            .get(&tuple)
            .ok_or_else(|| MeasureError::Graph("a started graph went missing".into()))
    }

    /// At least `samples` service times (seconds) of tuple `tuple`, each from a call that ran with
    /// `tuple.concurrency` calls at once (nearly, [`Self::without_queue`]), after `warmup`
    /// unmeasured requests per client (module docs).
    ///
    /// # Errors
    /// When the graph cannot start or a request fails.
    pub fn measure(
        &mut self,
        tuple: Config,
        (samples, warmup): (usize, usize),
    ) -> Result<Vec<f64>, MeasureError> {
        let clients = tuple.concurrency + self.waiting_clients;
        let (graph, workload) = self.graph(tuple)?;
        closed_loop(graph, workload, warmup * clients, clients)?;
        let (mut calls, _) = timed(
            graph,
            workload,
            samples + 2 * tuple.concurrency,
            Arrival::Closed {
                concurrency: clients,
            },
        )?;
        calls.truncate(samples);
        Ok(calls)
    }

    /// `samples` service times (seconds) of requests with `threads` intra-op threads that each
    /// started alone after the node had been idle for `pause` (plus the path's own time), after
    /// `warmup` requests back to back (module docs), and their mean time on the path outside the
    /// call (mean answer latency minus mean call time, never negative).
    ///
    /// # Errors
    /// When the graph cannot start or a request fails.
    pub fn after_idle(
        &mut self,
        threads: usize,
        pause: Duration,
        (samples, warmup): (usize, usize),
    ) -> Result<(Vec<f64>, f64), MeasureError> {
        let (graph, workload) = self.graph(Config::new(1, threads))?;
        closed_loop(graph, workload, warmup, 1)?;
        let (calls, report) = timed(graph, workload, samples, Arrival::Paced { pause })?;
        let path = outside_the_call(&calls, &report);
        Ok((calls, path))
    }

    /// The serving path's mean time per request outside the model call, seconds (never negative):
    /// `requests` one at a time on the `(1, 1)` graph, mean answer latency minus mean call time.
    ///
    /// # Errors
    /// When the graph cannot start or a request fails.
    pub fn path_time(&mut self, requests: usize) -> Result<f64, MeasureError> {
        let (graph, workload) = self.graph(Config::new(1, 1))?;
        closed_loop(graph, workload, 2, 1)?;
        let (calls, report) = timed(
            graph,
            workload,
            requests.max(1),
            Arrival::Closed { concurrency: 1 },
        )?;
        Ok(outside_the_call(&calls, &report))
    }

    /// Stops every graph.
    pub fn shutdown(self) {
        for (_, (graph, _)) in self.graphs {
            graph.shutdown();
        }
    }
}
