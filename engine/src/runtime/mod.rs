//! A running graph in this process: timely workers, admission, and the reply path.
//!
//! [`GraphRuntime::start`] launches `workers` timely worker threads, each compiling the plan into
//! its own dataflow. [`GraphRuntime::submit`] (`admission`) checks a request's tensors against the
//! graph inputs (`input_checks`: a bad request is refused here with the field that is wrong, and
//! never enters the dataflow), applies the in-flight limit, registers the responder and hands the
//! request to a worker's ingress round-robin. [`GraphRuntime::shutdown`] stops admission, lets
//! every admitted request finish, and joins the workers: nothing admitted is ever dropped.
//!
//! The handles the runtime shares with parts built before it ([`RuntimeParts`]: the reply table
//! with its request log, and admission's counters) are made by the caller first and passed in, so
//! a stateful node's proxy or a SERF control loop holds them from its own constructor.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use timely::scheduling::SyncActivator;
use timely::{Config, WorkerConfig};
use tracing::{error, info};

use crate::compile::{compile, NodeFactory};
use crate::dataflow::egress::{replicated_nodes, ReplyTable};
use crate::dataflow::exchange::PROCESS_SHIFT;
use crate::dataflow::ingress::ingress;
use crate::plan::Plan;
use crate::request::{AdmittedRequest, RequestError, Response};
use crate::tensor::NamedTensor;

mod admission;
mod input_checks;

/// How the runtime runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeOptions {
    /// Timely worker threads.
    pub workers: usize,
    /// Requests admitted and not yet answered, at most; more are refused as overloaded.
    pub max_in_flight: usize,
    /// Most requests the ingress puts in one batch.
    pub max_ingress_batch: usize,
    /// Keep the path of one request in this many (0: none) for the dashboard
    /// ([`crate::trace::PathStore`]).
    pub path_every: u32,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            workers: 1,
            max_in_flight: 4096,
            max_ingress_batch: 64,
            path_every: crate::trace::paths::DEFAULT_EVERY,
        }
    }
}

/// One process of a timely cluster: graph workers spread over several processes (timely's own
/// cluster mode, TCP between processes). Every process runs the same graph with the same
/// `workers`; requests enter at any process and are answered there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// This process's index, `0..addresses.len()`.
    pub process: usize,
    /// `host:port` of every process, in index order (timely's host file).
    pub addresses: Vec<String>,
}

/// Errors starting a runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Timely could not start its workers.
    #[error("starting timely workers: {0}")]
    Timely(String),
    /// A worker could not compile the plan.
    #[error("compiling the graph: {0}")]
    Compile(String),
}

struct Worker {
    requests: Sender<AdmittedRequest>,
    activator: SyncActivator,
}

/// Admission's counters of one runtime, readable from any thread: how many requests the graph
/// admitted so far and how many of them are not answered yet. Unlike an executor's own counters
/// they see a request the moment it enters, even while the dataflow has not yet moved it on.
/// Made before the runtime ([`RuntimeParts`]); the runtime counts into it.
#[derive(Debug, Clone, Default)]
pub struct AdmissionGauge {
    admitted: Arc<AtomicU64>,
    in_flight: Arc<AtomicUsize>,
}

impl AdmissionGauge {
    /// Requests admitted so far (rows, one per request; refused ones not counted).
    pub fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    /// Requests admitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }
}

/// The handles a runtime shares with what is built before it, made first by the caller.
#[derive(Debug, Clone)]
pub struct RuntimeParts {
    /// Pending requests and how to answer them; with replicated stateful nodes, the request log
    /// and the release gate too.
    pub replies: Arc<ReplyTable>,
    /// Admission's counters.
    pub admission: AdmissionGauge,
}

impl RuntimeParts {
    /// Parts for `plan` with nothing shared yet: a reply table gating on the plan's replicated
    /// stateful nodes, without a release hook, and fresh counters.
    pub fn for_plan(plan: &Plan) -> RuntimeParts {
        RuntimeParts {
            replies: Arc::new(ReplyTable::new(
                Arc::default(),
                replicated_nodes(plan),
                None,
            )),
            admission: AdmissionGauge::default(),
        }
    }
}

/// Whether a running graph can answer now: `Err` says why not (a model node with no live
/// replica, say). Readiness probes ask it; the graph itself keeps running either way.
pub type ReadinessCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// A graph running in this process.
pub struct GraphRuntime {
    plan: Arc<Plan>,
    /// Read on every submit (shared by all callers), written once at shutdown.
    workers: RwLock<Option<Vec<Worker>>>,
    guards: Mutex<Option<timely::communication::WorkerGuards<()>>>,
    replies: Arc<ReplyTable>,
    next_id: AtomicU64,
    next_worker: AtomicUsize,
    admission: AdmissionGauge,
    closed: AtomicBool,
    /// Keep each pending request's inputs (replicated stateful nodes may need it run again).
    log_requests: bool,
    options: RuntimeOptions,
    /// Set once by whoever built the nodes (they know what the graph needs to answer).
    readiness: OnceLock<ReadinessCheck>,
    /// Recent requests' paths.
    paths: crate::trace::PathStore,
}

impl std::fmt::Debug for GraphRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphRuntime")
            .field("graph", &self.plan.name)
            .field("options", &self.options)
            .finish()
    }
}

impl GraphRuntime {
    /// Starts `plan` on `options.workers` timely worker threads, building nodes with `factory`.
    ///
    /// # Errors
    /// When timely cannot start or a worker cannot compile the plan.
    pub fn start(
        plan: Plan,
        factory: Arc<dyn NodeFactory>,
        options: RuntimeOptions,
    ) -> Result<GraphRuntime, RuntimeError> {
        let parts = RuntimeParts::for_plan(&plan);
        GraphRuntime::start_in(plan, factory, options, None, parts)
    }

    /// As [`GraphRuntime::start`], around the handles in `parts`, as one process of a timely
    /// cluster when `cluster` is given (this blocks until every process of the cluster has
    /// connected).
    ///
    /// # Errors
    /// As [`GraphRuntime::start`], or when the cluster cannot form.
    pub fn start_in(
        plan: Plan,
        factory: Arc<dyn NodeFactory>,
        options: RuntimeOptions,
        cluster: Option<ClusterOptions>,
        parts: RuntimeParts,
    ) -> Result<GraphRuntime, RuntimeError> {
        let workers = options.workers.max(1);
        let process = cluster.as_ref().map_or(0, |c| c.process);
        if let Some(c) = &cluster {
            if c.process >= c.addresses.len() {
                return Err(RuntimeError::Timely(format!(
                    "process index {} is not below the {} addresses given",
                    c.process,
                    c.addresses.len()
                )));
            }
        }
        let first_worker = process * workers;
        let plan = Arc::new(plan);
        let RuntimeParts { replies, admission } = parts;
        let log_requests = replies.keeps_requests();
        let mut senders = Vec::with_capacity(workers);
        let mut receivers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = unbounded::<AdmittedRequest>();
            senders.push(tx);
            receivers.push(Some(rx));
        }
        let receivers: Arc<Mutex<Vec<Option<Receiver<AdmittedRequest>>>>> =
            Arc::new(Mutex::new(receivers));
        let (ready_tx, ready_rx) = unbounded::<(usize, Result<SyncActivator, String>)>();
        let threads_per_process = cluster.as_ref().map(|_| workers);
        let communication = match cluster {
            None => timely::CommunicationConfig::Process(workers),
            Some(c) => timely::CommunicationConfig::Cluster {
                threads: workers,
                process: c.process,
                addresses: c.addresses,
                report: false,
                zerocopy: false,
            },
        };
        let config = Config {
            communication,
            worker: WorkerConfig::default(),
        };
        let worker_plan = Arc::clone(&plan);
        let worker_replies = Arc::clone(&replies);
        let max_batch = options.max_ingress_batch.max(1);
        let guards = timely::execute(config, move |worker| {
            let index = worker.index() - first_worker;
            let rx = receivers
                .lock()
                .ok()
                .and_then(|mut r| r.get_mut(index).and_then(Option::take));
            let Some(rx) = rx else {
                let _ = ready_tx.send((index, Err("ingress channel already taken".into())));
                return;
            };
            let ready = ready_tx.clone();
            let result = worker.dataflow::<u64, _, _>(|scope| {
                let input = ingress(
                    scope,
                    worker_plan.inputs.clone(),
                    rx,
                    max_batch,
                    Arc::clone(&worker_replies),
                    |act| {
                        let _ = ready.send((index, Ok(act)));
                    },
                );
                compile(
                    &worker_plan,
                    scope,
                    input,
                    factory.as_ref(),
                    Arc::clone(&worker_replies),
                    threads_per_process,
                )
            });
            if let Err(e) = result {
                let _ = ready_tx.send((index, Err(e.to_string())));
                return;
            }
            while worker.step_or_park(None) {}
        })
        .map_err(RuntimeError::Timely)?;

        let mut activators: Vec<Option<SyncActivator>> = (0..workers).map(|_| None).collect();
        let mut failure = None;
        let mut got = 0;
        while got < workers {
            match ready_rx.recv_timeout(Duration::from_secs(60)) {
                Ok((i, Ok(act))) => {
                    if let Some(slot) = activators.get_mut(i) {
                        if slot.replace(act).is_none() {
                            got += 1;
                        }
                    }
                }
                Ok((_, Err(e))) => {
                    failure = Some(e);
                    break;
                }
                Err(_) => {
                    failure = Some("workers did not start within 60 s".into());
                    break;
                }
            }
        }
        // A worker registers its activator before compiling; a compile error may follow it.
        if failure.is_none() {
            if let Ok((_, Err(e))) = ready_rx.recv_timeout(Duration::from_millis(1)) {
                failure = Some(e);
            }
        }
        let workers_vec: Vec<Worker> = senders
            .into_iter()
            .zip(activators)
            .filter_map(|(requests, act)| {
                act.map(|activator| Worker {
                    requests,
                    activator,
                })
            })
            .collect();
        if let Some(e) = failure {
            // Dropping the senders ends every ingress; the guards join the workers.
            for w in &workers_vec {
                let _ = w.activator.activate();
            }
            drop(workers_vec);
            drop(guards);
            return Err(RuntimeError::Compile(e));
        }
        info!(graph = %plan.name, workers, "Graph running.");
        Ok(GraphRuntime {
            plan,
            workers: RwLock::new(Some(workers_vec)),
            guards: Mutex::new(Some(guards)),
            replies,
            next_id: AtomicU64::new(((process as u64) << PROCESS_SHIFT) | 1),
            next_worker: AtomicUsize::new(0),
            admission,
            closed: AtomicBool::new(false),
            log_requests,
            paths: crate::trace::PathStore::new(options.path_every),
            options,
            readiness: OnceLock::new(),
        })
    }

    /// Installs the check readiness probes ask (once; a second call is ignored and returns
    /// false).
    pub fn set_readiness(&self, check: ReadinessCheck) -> bool {
        self.readiness.set(check).is_ok()
    }

    /// Why the graph cannot answer now (`None`: it can, or nothing was installed to say).
    pub fn unready(&self) -> Option<String> {
        if self.closed.load(Ordering::Acquire) {
            return Some(format!("graph `{}` is shutting down", self.plan.name));
        }
        self.readiness.get().and_then(|check| check().err())
    }

    /// The plan being run.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Requests admitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.admission.in_flight()
    }

    /// Requests admitted and not yet answered, at most (the `max_in_flight` option): no client
    /// request of more rows than this can ever be admitted whole.
    pub fn max_in_flight(&self) -> usize {
        self.options.max_in_flight.max(1)
    }

    /// A live view of admission's counters, for a component that must see the load where it
    /// enters the graph (SERF's control loop of a graph's only model node).
    pub fn admission(&self) -> AdmissionGauge {
        self.admission.clone()
    }

    /// Requests answered so far.
    pub fn answered(&self) -> u64 {
        self.replies.answered()
    }

    /// Second answers suppressed so far (0 unless a branch failed after another answered).
    pub fn duplicate_answers(&self) -> u64 {
        self.replies.duplicates()
    }

    /// Sampled requests and their batch records, from which a reply's spans are built.
    pub fn traces(&self) -> &crate::trace::TraceBook {
        self.replies.requests().traces()
    }

    /// Recent requests' paths ([`crate::trace::PathStore`]): a front end picks requests at
    /// admission and keeps their timelines at the reply.
    pub fn paths(&self) -> &crate::trace::PathStore {
        &self.paths
    }

    /// The reply table (liveness of request attempts, the release gate).
    pub fn replies(&self) -> &Arc<ReplyTable> {
        &self.replies
    }

    /// Takes a durability announcement of a replicated stateful node: replies waiting on it go.
    pub fn announce_durable(&self, d: weir_hams::protocol::Durable) {
        self.replies.announce(d);
    }

    /// Submits a request and waits for its reply.
    ///
    /// # Errors
    /// As [`GraphRuntime::submit`], or the request's own error.
    pub fn infer(&self, inputs: Vec<NamedTensor>) -> Result<Response, RequestError> {
        let (tx, rx) = bounded(1);
        self.submit(
            inputs,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        rx.recv().unwrap_or_else(|_| {
            Err(RequestError::ShuttingDown {
                graph: self.plan.name.clone(),
            })
        })
    }

    /// Stops admission, waits until every admitted request is answered, and stops the workers.
    pub fn shutdown(&self) {
        self.closed.store(true, Ordering::Release);
        let workers = self
            .workers
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(workers) = workers {
            let activators: Vec<SyncActivator> = workers.into_iter().map(|w| w.activator).collect();
            for a in &activators {
                let _ = a.activate();
            }
        }
        let guards = self.guards.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(guards) = guards {
            for result in guards.join() {
                if let Err(e) = result {
                    error!(error = %e, "A timely worker ended with an error.");
                }
            }
            info!(graph = %self.plan.name, answered = self.replies.answered(), "Graph stopped.");
        }
    }
}

impl Drop for GraphRuntime {
    fn drop(&mut self) {
        self.shutdown();
    }
}
