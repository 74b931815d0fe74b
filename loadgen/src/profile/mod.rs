//! SERF profiling on ONNX Runtime: measures the service rates `μ_1..μ_c` of every parallelism
//! configuration of one model node with real sessions, and writes them as a `weir_serf` profile
//! (`weir profile`, SERF §IV-B): every configuration with `c·t` at most the cores planned for,
//! measured with the node's own spinning and pinning, saved beside the graph.
//!
//! A tuple `(i, t)` is measured with `i` sessions of `t` intra-op threads each (spinning as the
//! node's `executor.spinning`, recorded in the profile), one request stream per session on its own
//! thread, all fed the same random input of the model's shape. Every stream warms up first, then
//! all start together behind a barrier and run back to back; a stream that has its share of
//! measured requests keeps running (unmeasured) until every stream has its share, so each measured
//! request really ran with `i` requests at once. The times go to
//! [`weir_serf::profile::build_profile`], which computes `μ_i` and the SCV and re-measures
//! non-homogeneous tuples.
//!
//! Decision: the service time is the time of one `Session::run` call, measured around the call.
//! By default ([`MeasuredIn::Graph`], [`in_graph`]) the calls are the node's own, inside a running
//! one-node graph fed through the serving path, and the path's time per request outside the call is
//! measured too ([`Profile::path_s`]); [`MeasuredIn::Sessions`] measures bare sessions back to back
//! as described above, the paper's way, which under-predicts what the serving process sees on a
//! machine whose cores the node fills (see [`in_graph`] for why).
//!
//! After the tuples, both ways measure the service of requests that start alone after the node was
//! idle for each of [`IDLE_PAUSES`], per thread count ([`Profile::after_idle`], `weir_serf::idle`):
//! at low load most requests do, and they are slower than back to back.
//!
//! The model, the configuration table and the scheduler are `weir_serf`'s; nothing here decides.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use ort::session::Session;
use tracing::warn;
use weir_operators::model::pinning::{pin_current_thread, CorePins, PinError};
use weir_operators::model::synthetic::{SyntheticError, SyntheticInputs};
use weir_operators::model::{ExecError, OrtRuntime};
use weir_serf::config::Config;
use weir_serf::idle::{AfterIdle, IdlePoint};
use weir_serf::profile::{
    build_profile, BuildError, BuildOptions, MeasuredIn, Profile, ProfileError,
};
use weir_serf::table::TableError;

mod graph;
pub mod in_graph;
mod report;

pub use graph::{load_for_profiling, model_nodes, profile_path, select_nodes, NodeToProfile};
pub use report::describe;

/// Load levels and requests per experiment of the exhaustive plan SERF's cost is compared with
/// (Table II: 10 levels, 5000 requests).
pub const EXHAUSTIVE_PLAN: (usize, usize) = (10, 5000);

/// How [`profile_node`] measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProfileOptions {
    /// Cores `F`: every configuration has `c·t ≤ cores`.
    pub cores: usize,
    /// Measured requests per tuple (the paper: 10).
    pub samples: usize,
    /// Requests for the second measurement of a tuple with SCV above 0.1 (0: none).
    pub retry_samples: usize,
    /// Interleaved rounds the samples are split across; each tuple keeps its median round
    /// ([`weir_serf::profile::BuildOptions::rounds`]).
    pub rounds: usize,
    /// Unmeasured requests per stream before measuring.
    pub warmup: usize,
    /// Seed of the random input.
    pub seed: u64,
    /// Print a line per measured tuple on stderr.
    pub progress: bool,
    /// Whether the sessions' intra-op threads spin while idle (the node's `executor.spinning`).
    pub spinning: bool,
    /// Pin each stream's thread and its intra-op workers as the node's executor would
    /// (`executor.pin_cores_from`; stream `k` of a tuple is session thread `k`).
    pub pin_cores_from: Option<usize>,
    /// Where the calls are measured (module docs); the default is [`MeasuredIn::Graph`].
    pub measure_in: MeasuredIn,
    /// Idle time between two rounds ([`weir_serf::profile::BuildOptions::round_gap`]; zero: back
    /// to back).
    pub round_gap: Duration,
    /// In a graph ([`MeasuredIn::Graph`]), measure tuple `(i, t)` with `i` clients instead of
    /// `i + 1` ([`in_graph::GraphProfiler::without_queue`]).
    pub without_queue: bool,
}

impl ProfileOptions {
    /// The executor settings a node measured this way runs with (spinning and pinning; the rest
    /// default).
    pub fn executor(&self) -> weir_engine::spec::ExecutorSpec {
        weir_engine::spec::ExecutorSpec {
            spinning: self.spinning,
            pin_cores_from: self.pin_cores_from,
            ..weir_engine::spec::ExecutorSpec::default()
        }
    }
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            samples: 10,
            retry_samples: 40,
            rounds: 3,
            warmup: 2,
            seed: 7,
            progress: true,
            spinning: false,
            pin_cores_from: None,
            measure_in: MeasuredIn::Graph,
            round_gap: Duration::ZERO,
            without_queue: false,
        }
    }
}

/// Why one tuple could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// A session could not be created.
    #[error(transparent)]
    Session(#[from] ExecError),
    /// ONNX Runtime failed a call.
    #[error("ONNX Runtime: {0}")]
    Ort(String),
    /// A request stream's thread panicked.
    #[error("a request stream panicked")]
    Panicked,
    /// The one-node graph a tuple is measured in could not be built or started.
    #[error("profiling graph: {0}")]
    Graph(String),
    /// A request through the profiling graph failed.
    #[error("profiling request failed: {0}")]
    Request(String),
}

/// Errors profiling a model node.
#[derive(Debug, thiserror::Error)]
pub enum SerfError {
    /// No random request could be made for the model (signature unreadable, or an input that
    /// is neither f32 nor i64).
    #[error(transparent)]
    Inputs(#[from] SyntheticError),
    /// Measuring failed.
    #[error(transparent)]
    Build(#[from] BuildError<MeasureError>),
    /// The serving path's time per request could not be measured.
    #[error("measuring the path time: {0}")]
    PathTime(MeasureError),
    /// The service after idle gaps could not be measured.
    #[error("measuring the service after idle gaps: {0}")]
    AfterIdle(MeasureError),
    /// The profiler's threads cannot be pinned as asked.
    #[error(transparent)]
    Pin(#[from] PinError),
    /// The profile could not be saved or checked.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The profile yields no table.
    #[error(transparent)]
    Table(#[from] TableError),
    /// `--node` names no model node of the graph.
    #[error("the graph has no model node `{0}`")]
    NoSuchNode(String),
}

/// One timed call of `inputs` on `session`.
fn call(session: &mut Session, inputs: &SyntheticInputs) -> Result<Duration, MeasureError> {
    inputs
        .timed_call(session)
        .map_err(|e| MeasureError::Ort(e.to_string()))
}

/// Runs one stream per session at once and returns at least `samples` service times (seconds),
/// each measured while every stream was running (module docs).
/// With `pins`, stream `k` runs on [`CorePins::caller`]`(k, threads)`.
fn measure_streams(
    sessions: &mut [Session],
    inputs: &SyntheticInputs,
    (samples, warmup): (usize, usize),
    pins: Option<(&CorePins, usize)>,
) -> Result<Vec<f64>, MeasureError> {
    let streams = sessions.len();
    let share = samples.div_ceil(streams.max(1));
    let barrier = Barrier::new(streams);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let stream = |k: usize, session: &mut Session| -> Result<Vec<f64>, MeasureError> {
        let pinned = pins.map_or(Ok(()), |(p, threads)| {
            pin_current_thread(p.caller(k, threads))
        });
        if let Err(e) = pinned {
            warn!(error = %e, "Profiling stream not pinned.");
        }
        let warm = (0..warmup).try_for_each(|_| call(session, inputs).map(drop));
        barrier.wait();
        if let Err(e) = warm {
            failed.store(true, Ordering::SeqCst);
            return Err(e);
        }
        let mut times = Vec::with_capacity(share);
        while done.load(Ordering::SeqCst) < streams && !failed.load(Ordering::SeqCst) {
            match call(session, inputs) {
                Ok(d) if times.len() < share => {
                    times.push(d.as_secs_f64());
                    if times.len() == share {
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    failed.store(true, Ordering::SeqCst);
                    return Err(e);
                }
            }
        }
        Ok(times)
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = sessions
            .iter_mut()
            .enumerate()
            .map(|(k, session)| s.spawn(move || stream(k, session)))
            .collect();
        let mut all = Vec::with_capacity(share * streams);
        let mut first_error = None;
        for h in handles {
            match h.join() {
                Ok(Ok(times)) => all.extend(times),
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(_) => first_error = first_error.or(Some(MeasureError::Panicked)),
            }
        }
        first_error.map_or(Ok(all), Err)
    })
}

/// Measures every configuration of the model at `path` (node id `node`, used as the profile's
/// label and in progress lines) on `options.cores` cores and returns its profile, with
/// [`Profile::wall_s`] set to the whole run's wall time (session creation included).
///
/// # Errors
/// [`SerfError`] when the model cannot be read or loaded, or a call fails.
pub fn profile_node(
    node: &str,
    path: &Path,
    options: &ProfileOptions,
) -> Result<Profile, SerfError> {
    let started = Instant::now();
    let cores = options.cores.max(1);
    let total = weir_serf::profile::plan(cores, &[1]).len() * options.rounds.max(1);
    let mut measured = 0;
    let build = BuildOptions {
        samples: options.samples.max(1),
        retry_samples: options.retry_samples,
        rounds: options.rounds.max(1),
        round_gap: options.round_gap,
    };
    let mut progress = |tuple: Config, times: &[f64], took: Duration| {
        measured += 1;
        if options.progress {
            let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
            eprintln!(
                "profile `{node}`: [{}/{total}] i={} t={}: mean service {:.3} ms over {} requests ({:.2} s)",
                measured.min(total),
                tuple.concurrency,
                tuple.threads,
                mean * 1e3,
                times.len(),
                took.as_secs_f64()
            );
        }
    };
    let samples = options.samples.max(1);
    let idle_progress = |threads: usize, pause: Duration, times: &[f64], path: Option<f64>| {
        if options.progress {
            eprintln!(
                "profile `{node}`: t={threads} after {} ms idle: mean service {:.3} ms over {} requests{}",
                pause.as_millis(),
                times.iter().sum::<f64>() / times.len().max(1) as f64 * 1e3,
                times.len(),
                path.map_or_else(String::new, |p| format!(", path {:.3} ms", p * 1e3))
            );
        }
    };
    let mut profile = match options.measure_in {
        MeasuredIn::Sessions => {
            let mut bare = BareSessions::new(node, path, options)?;
            let mut profile = build_profile(cores, &[1], build, |tuple: Config, samples| {
                let tuple_started = Instant::now();
                let times = bare.measure(tuple, samples)?;
                progress(tuple, &times, tuple_started.elapsed());
                Ok(times)
            })?;
            measure_after_idle(&mut profile, |threads, pause| {
                let times = bare.after_idle(threads, pause, samples)?;
                idle_progress(threads, pause, &times, None);
                Ok((times, None))
            })
            .map_err(SerfError::AfterIdle)?;
            profile
        }
        MeasuredIn::Graph => {
            let mut graphs = in_graph::GraphProfiler::new(path, options.executor());
            if options.without_queue {
                graphs = graphs.without_queue();
            }
            let built = build_profile(cores, &[1], build, |tuple: Config, samples| {
                let tuple_started = Instant::now();
                let times = graphs.measure(tuple, (samples, options.warmup))?;
                progress(tuple, &times, tuple_started.elapsed());
                Ok(times)
            });
            let measured = built.map_err(SerfError::from).and_then(|mut profile| {
                measure_after_idle(&mut profile, |threads, pause| {
                    let (times, path) =
                        graphs.after_idle(threads, pause, (samples, options.warmup))?;
                    idle_progress(threads, pause, &times, Some(path));
                    Ok((times, Some(path)))
                })
                .map_err(SerfError::AfterIdle)?;
                let path = graphs
                    .path_time(samples * PATH_REQUESTS_FACTOR)
                    .map_err(SerfError::PathTime)?;
                profile.path_s = Some(path);
                Ok(profile)
            });
            graphs.shutdown();
            measured?
        }
    };
    profile.label = Some(node.to_string());
    profile.wall_s = Some(started.elapsed().as_secs_f64());
    profile.spinning = Some(options.spinning);
    profile.measured_in = Some(options.measure_in);
    Ok(profile)
}

/// The idle pauses before the requests that measure service after idle gaps (`weir_serf::idle`):
/// from a gap shorter than a call to one longer than the threads' spinning and a virtual CPU's halt.
pub const IDLE_PAUSES: [Duration; 3] = [
    Duration::from_millis(2),
    Duration::from_millis(10),
    Duration::from_millis(50),
];

/// Measures, for every thread count of `profile`'s series (inter-node 1) and every pause of
/// [`IDLE_PAUSES`], the service of requests that start alone after that pause (`measure(t, pause)`
/// returns their times, seconds, and their mean path time outside the call when measured in a
/// graph), and records them in [`Profile::after_idle`] and its effort.
fn measure_after_idle(
    profile: &mut Profile,
    mut measure: impl FnMut(usize, Duration) -> Result<(Vec<f64>, Option<f64>), MeasureError>,
) -> Result<(), MeasureError> {
    let threads: Vec<usize> = profile
        .series
        .iter()
        .filter(|s| s.inter_node == 1)
        .map(|s| s.threads)
        .collect();
    for t in threads {
        let mut points = Vec::with_capacity(IDLE_PAUSES.len());
        for pause in IDLE_PAUSES {
            let (times, path) = measure(t, pause)?;
            if times.is_empty() {
                continue;
            }
            let total: f64 = times.iter().sum();
            if let Some(effort) = &mut profile.effort {
                effort.experiments += 1;
                effort.requests += times.len();
                effort.service_s += total;
            }
            points.push(IdlePoint {
                gap_s: pause.as_secs_f64(),
                mean_service_s: total / times.len() as f64,
                samples: times.len(),
                mean_path_s: path,
            });
        }
        if !points.is_empty() {
            profile.after_idle.push(AfterIdle { threads: t, points });
        }
    }
    Ok(())
}

/// Requests the path time is measured over, per profiled request of a tuple (it is a difference of
/// two means, so it needs more than a tuple's ten).
const PATH_REQUESTS_FACTOR: usize = 3;

/// Bare sessions of one profiling run ([`MeasuredIn::Sessions`]), created per `t` as tuples need them.
struct BareSessions<'a> {
    node: &'a str,
    path: &'a Path,
    options: &'a ProfileOptions,
    inputs: SyntheticInputs,
    pins: Option<CorePins>,
    sessions: BTreeMap<usize, Vec<Session>>,
}

impl<'a> BareSessions<'a> {
    fn new(node: &'a str, path: &'a Path, options: &'a ProfileOptions) -> Result<Self, SerfError> {
        Ok(Self {
            node,
            path,
            options,
            inputs: SyntheticInputs::random(path, options.seed)?,
            pins: options
                .pin_cores_from
                .map(CorePins::from_first)
                .transpose()?,
            sessions: BTreeMap::new(),
        })
    }

    /// The first `n` sessions of `threads` intra-op threads, created as needed.
    fn sessions(&mut self, threads: usize, n: usize) -> Result<&mut [Session], MeasureError> {
        let runtime = OrtRuntime::get()?;
        let pool = self.sessions.entry(threads).or_default();
        while pool.len() < n {
            let workers = self
                .pins
                .as_ref()
                .and_then(|p| p.workers(pool.len(), threads));
            let settings = weir_operators::model::SessionSettings {
                intra_op_threads: threads,
                spinning: self.options.spinning,
                worker_affinity: workers.as_deref(),
                ..Default::default()
            };
            pool.push(runtime.session_on(self.node, self.path, &settings)?);
        }
        Ok(&mut pool[..n])
    }

    fn measure(&mut self, tuple: Config, samples: usize) -> Result<Vec<f64>, MeasureError> {
        let (warmup, pins) = (self.options.warmup, self.pins.clone());
        let inputs = self.inputs.clone();
        let pool = self.sessions(tuple.threads, tuple.concurrency)?;
        measure_streams(
            pool,
            &inputs,
            (samples, warmup),
            pins.as_ref().map(|p| (p, tuple.threads)),
        )
    }

    /// `samples` times of calls on one `threads`-thread session, each after `pause` idle, after
    /// the warm-up calls back to back; on stream 0's core when pinned.
    fn after_idle(
        &mut self,
        threads: usize,
        pause: Duration,
        samples: usize,
    ) -> Result<Vec<f64>, MeasureError> {
        let (warmup, pins) = (self.options.warmup, self.pins.clone());
        let inputs = self.inputs.clone();
        let session = &mut self.sessions(threads, 1)?[0];
        std::thread::scope(|s| {
            s.spawn(|| {
                if let Some(p) = &pins {
                    if let Err(e) = pin_current_thread(p.caller(0, threads)) {
                        warn!(error = %e, "Profiling stream not pinned.");
                    }
                }
                for _ in 0..warmup {
                    call(session, &inputs)?;
                }
                (0..samples)
                    .map(|_| {
                        std::thread::sleep(pause);
                        call(session, &inputs).map(|d| d.as_secs_f64())
                    })
                    .collect()
            })
            .join()
            .unwrap_or(Err(MeasureError::Panicked))
        })
    }
}

/// The cores this process may plan for: the machine's, counted before any reservation of cores
/// for a model node (`weir_operators::model::pinning::reserve_for_node`), else what the OS grants.
pub fn available_cores() -> usize {
    weir_operators::model::pinning::cpus_before_reservation().unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// Where profiles are measured, from a `--bare-sessions` flag.
pub fn measured_in(bare_sessions: bool) -> MeasuredIn {
    if bare_sessions {
        MeasuredIn::Sessions
    } else {
        MeasuredIn::Graph
    }
}

/// A non-negative, finite number of seconds, as the profiling flags take them (`--round-gap`,
/// `--spread-profile`).
///
/// # Errors
/// When `text` is not a number, or is negative or not finite.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|e| format!("`{text}` is not a number of seconds: {e}"))?;
    Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("`{text}`: seconds must be finite and not negative"))
}
