//! The `weir` command line: validate graphs, run them over workloads, run benchmarks.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use tracing_subscriber::EnvFilter;
use weir::bench::http::{default_models, http, http_table, HttpBenchConfig};
use weir::bench::overhead::{overhead, overhead_table, Layout, OverheadConfig};
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::workload::Workload;
use weir::{load_graph_under, start, LoadError, OrtRuntime, RuntimeOptions};

/// weir serves ML service graphs: ONNX models and tensor ops compiled into timely dataflow.
#[derive(Debug, Parser)]
#[command(name = "weir", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse, validate and plan a graph, printing every problem with its YAML location.
    Validate(ValidateArgs),
    /// Serve a graph in-process over a generated workload and print throughput, latency and accuracy.
    Run(RunArgs),
    /// Serve graphs over HTTP with the Open Inference Protocol (KServe v2), until SIGTERM or Ctrl-C.
    Serve(ServeArgs),
    /// Serve ONNX models to graphs on other processes or hosts over zenoh, until SIGTERM or Ctrl-C.
    Executor(ExecutorArgs),
    /// Train a digits classifier (MLP or LeNet-style CNN) with candle and write it as ONNX.
    Train(TrainArgs),
    /// ParM parity models.
    #[command(subcommand)]
    Parity(ParityCommand),
    /// Kairos: pick a heterogeneous executor pool within a budget from latency profiles.
    Plan(PlanArgs),
    /// Run a benchmark experiment (see benchmarks/README.md).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// SERF: measure every (concurrency × intra-op threads) configuration of the graph's model
    /// nodes on ONNX Runtime and save `<graph dir>/<node>.serf.json`.
    Profile(ProfileArgs),
}

#[derive(Debug, Args)]
struct TrainArgs {
    /// Architecture: `mlp` (64-128-64-10) or `lenet`.
    #[arg(long, default_value = "mlp")]
    arch: String,
    /// The digits data (scikit-learn's digits.csv.gz).
    #[arg(long, default_value = ".weir/data/digits.csv.gz")]
    data: PathBuf,
    /// Where the ONNX model goes.
    #[arg(long)]
    out: PathBuf,
    /// Epochs.
    #[arg(long, default_value_t = 60)]
    epochs: usize,
    /// Seed (same seed, same data: bit-identical weights).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Subcommand)]
enum ParityCommand {
    /// Train a parity model with the deployed model's architecture: F_P(Σ X_i) ≈ Σ F(X_i).
    Train(ParityTrainArgs),
}

#[derive(Debug, Args)]
struct ParityTrainArgs {
    /// The deployed model (ONNX, one input [N, features], one output).
    #[arg(long)]
    deployed: PathBuf,
    /// Coding-group size.
    #[arg(long, default_value_t = 2)]
    k: usize,
    /// Encoder: `sum` or `concat`.
    #[arg(long, default_value = "sum")]
    encoder: String,
    /// The deployed model's training data (digits.csv.gz).
    #[arg(long, default_value = ".weir/data/digits.csv.gz")]
    data: PathBuf,
    /// Where the parity model goes.
    #[arg(long)]
    out: PathBuf,
    /// Epochs (default: the paper's 500).
    #[arg(long)]
    epochs: Option<usize>,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(Debug, Args)]
struct PlanArgs {
    /// Budget in $ per hour.
    #[arg(long)]
    budget: f64,
    /// Latency target (p99, ms); default: the profile's own.
    #[arg(long)]
    qos_ms: Option<f64>,
    /// Latency profile YAML (see kairos/src/profile), or `paper:<model>` for a built-in one
    /// (ncf, rm2, wnd, mtwnd, dien).
    #[arg(long)]
    profiles: String,
    /// Also write the chosen pool's `executors:` fragment here.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ExecutorArgs {
    /// Name graphs list in their `executors:` section; the key prefix is `weir/executor/<name>`.
    #[arg(long, default_value = "executor")]
    name: String,
    /// Key-expression prefix, instead of `weir/executor/<name>`.
    #[arg(long)]
    key: Option<String>,
    /// zenoh endpoint to listen on, e.g. `tcp/127.0.0.1:7447` (repeatable).
    #[arg(long)]
    listen: Vec<String>,
    /// zenoh endpoint to connect to, e.g. a graph's `--zenoh-listen` (repeatable).
    #[arg(long)]
    connect: Vec<String>,
    /// zenoh configuration file (JSON5): TLS, user/password, access control; see
    /// examples/zenoh-secure. Without one (or listen endpoints in it), listens on loopback only.
    #[arg(long, env = "WEIR_ZENOH_CONFIG")]
    zenoh_config: Option<PathBuf>,
    /// Key file shared by the graph and its executors: HAMS role assignments are signed with it
    /// (HMAC-SHA256) and executors apply only assignments that verify.
    #[arg(long, env = "WEIR_CONTROL_KEY_FILE")]
    control_key_file: Option<PathBuf>,
    /// A model to serve, as NAME=PATH; graphs reach it under their model node's id (repeatable).
    #[arg(long = "model", value_parser = parse_model_arg)]
    models: Vec<(String, PathBuf)>,
    /// A stateful model to serve (HAMS), as NAME=PATH: primary or backup of the graph's node
    /// NAME as the graph assigns it; its state tensors come with the assignment (repeatable).
    #[arg(long = "stateful", value_parser = parse_model_arg)]
    stateful: Vec<(String, PathBuf)>,
    /// Run each batch's rows of stateful models in a seeded order chosen per (node, version,
    /// epoch), journaled: the non-determinism of a GPU's reduction order or of racing inputs.
    #[arg(long)]
    perturb: bool,
    /// Delay every state tuple sent to a backup by this many milliseconds (a slow state link).
    #[arg(long, default_value_t = 0)]
    state_delay_ms: u64,
    /// Emulated extra compute per batch of a stateful model, in milliseconds (a sleep after the
    /// real inference: a GPU model's batch time without using this machine's cores).
    #[arg(long, default_value_t = 0.0)]
    compute_ms: f64,
    /// Chaos for tests: send every HAMS protocol message twice (receivers must act on each once).
    #[arg(long)]
    duplicate_messages: bool,
    /// Chaos for tests: swap every other pair of state tuples on the way to the backup.
    #[arg(long)]
    reorder_messages: bool,
    /// Device to run on: cpu or cuda.
    #[arg(long, default_value = "cpu", value_parser = parse_device)]
    device: weir::Device,
    /// Intra-op threads per session.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Sessions per model (requests run at once).
    #[arg(long, default_value_t = 1)]
    instances: usize,
    /// Most rows per call, for models with a dynamic batch dimension.
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// Longest a request waits for others to join its batch, in microseconds.
    #[arg(long, default_value_t = 0)]
    max_delay_us: u64,
    /// Jobs each model's queue holds.
    #[arg(long, default_value_t = 64)]
    queue_capacity: usize,
    /// Emulate an instance F times slower (F ≥ 1): after each real inference, sleep (F − 1) × its
    /// measured time before replying (Kairos experiments; the price goes in the graph's labels).
    #[arg(long)]
    slowdown: Option<f64>,
    /// Emulate an instance type whose call of n rows takes BASE_MS + PER_ROW_MS × n milliseconds
    /// (e.g. `26.2,0.05` GPU-like, `3.4,0.33` CPU-like): each call is held until then, or for its
    /// real time if longer. Every job is then its own call (`--max-batch` does not apply).
    #[arg(long, value_name = "BASE_MS,PER_ROW_MS", conflicts_with = "slowdown")]
    emulate_latency: Option<weir_executor::emulation::LatencyProfile>,
}

fn parse_model_arg(text: &str) -> Result<(String, PathBuf), String> {
    let (name, path) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=PATH"))?;
    if name.is_empty() || path.is_empty() {
        return Err(format!("`{text}` is not NAME=PATH"));
    }
    Ok((name.to_string(), PathBuf::from(path)))
}

fn parse_device(text: &str) -> Result<weir::Device, String> {
    match text {
        "cpu" => Ok(weir::Device::Cpu),
        "cuda" => Ok(weir::Device::Cuda),
        other => Err(format!("unknown device `{other}` (cpu or cuda)")),
    }
}

/// Where the files a graph names may be, and how large.
#[derive(Debug, Clone, Args)]
struct FileArgs {
    /// Every file a graph names (models, profiles, stream inputs and outputs) must resolve, symlinks
    /// followed, to a path under this folder (default: no such root).
    #[arg(long, env = "WEIR_PATH_ROOT")]
    path_root: Option<PathBuf>,
    /// Largest model file a graph may name, in bytes.
    #[arg(long, default_value_t = weir::FileRules::default().max_model_bytes, env = "WEIR_MAX_MODEL_BYTES")]
    max_model_bytes: u64,
}

impl FileArgs {
    fn rules(&self) -> Result<weir::FileRules> {
        let rules = match &self.path_root {
            Some(root) => weir::FileRules::under(root).context("--path-root")?,
            None => weir::FileRules::default(),
        };
        Ok(weir::FileRules {
            max_model_bytes: self.max_model_bytes,
            ..rules
        })
    }
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Graph YAML files.
    #[arg(required = true)]
    graphs: Vec<PathBuf>,
    /// Fail on warnings too.
    #[arg(long)]
    deny_warnings: bool,
    /// Also load every model into ONNX Runtime (checks the environment, not only the spec).
    #[arg(long)]
    check_env: bool,
    /// Print the plan as Graphviz DOT instead of text.
    #[arg(long)]
    dot: bool,
    #[command(flatten)]
    files: FileArgs,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Graph YAML file.
    graph: PathBuf,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Requests to send (after warm-up).
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Open loop: Poisson arrivals at this many requests per second.
    #[arg(long, conflicts_with = "concurrency")]
    rate: Option<f64>,
    /// Closed loop: this many clients, each waiting for its answer (the default, with 4).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Requests sent first and not counted.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timely worker threads.
    #[arg(long, default_value_t = 1, env = "WEIR_WORKERS")]
    workers: usize,
    /// Labelled CSV (features then label per row, .csv or .csv.gz) to send instead of random tensors.
    #[arg(long)]
    dataset: Option<PathBuf>,
    /// Graph output compared with the label (default: the first i64 output of one element).
    #[arg(long)]
    label_output: Option<String>,
    /// Seed for random inputs and arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Requests admitted at once, at most; more are refused as overloaded.
    #[arg(long, default_value_t = 4096)]
    max_in_flight: usize,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    files: FileArgs,
}

/// timely's cluster options: the same command runs once per process, each with its own index.
#[derive(Debug, Clone, Args)]
struct ClusterArgs {
    /// Processes in the timely cluster (graph workers spread over all of them).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// This process's index in the cluster, 0-based.
    #[arg(long, default_value_t = 0)]
    process: usize,
    /// File with one `host:port` per process, in index order (default: 127.0.0.1:2101, 2102, ...).
    #[arg(long)]
    hostfile: Option<PathBuf>,
}

impl ClusterArgs {
    fn options(&self) -> Result<Option<weir::ClusterOptions>> {
        if self.processes <= 1 && self.hostfile.is_none() {
            return Ok(None);
        }
        let addresses: Vec<String> = match &self.hostfile {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect(),
            None => (0..self.processes)
                .map(|i| format!("127.0.0.1:{}", 2101 + i))
                .collect(),
        };
        if self.hostfile.is_some() && self.processes > 1 && addresses.len() != self.processes {
            bail!(
                "--processes {} but the host file lists {} addresses",
                self.processes,
                addresses.len()
            );
        }
        if self.process >= addresses.len() {
            bail!(
                "--process {} is not below the {} processes",
                self.process,
                addresses.len()
            );
        }
        Ok(Some(weir::ClusterOptions {
            process: self.process,
            addresses,
        }))
    }
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Graph YAML files; each is a model named by its graph's `name`.
    #[arg(required = true)]
    graphs: Vec<PathBuf>,
    /// HTTP address to listen on (port 0 picks a free one; the bound address is printed). Default
    /// 127.0.0.1:8000, unless the graphs declare `streams:` (then no HTTP unless asked for).
    #[arg(long, env = "WEIR_HTTP")]
    http: Option<String>,
    /// zenoh endpoint the graphs listen on, for executors started with `--connect` (repeatable).
    #[arg(long)]
    zenoh_listen: Vec<String>,
    /// zenoh endpoint to connect to besides the executors' own (repeatable).
    #[arg(long)]
    zenoh_connect: Vec<String>,
    /// zenoh configuration file (JSON5) for every zenoh session of the graphs (remote executors,
    /// zenoh streams): TLS, user/password, access control; see examples/zenoh-secure.
    #[arg(long, env = "WEIR_ZENOH_CONFIG")]
    zenoh_config: Option<PathBuf>,
    /// Key file shared by the graph and its executors: HAMS role assignments are signed with it
    /// (HMAC-SHA256) and executors apply only assignments that verify.
    #[arg(long, env = "WEIR_CONTROL_KEY_FILE")]
    control_key_file: Option<PathBuf>,
    /// Timely worker threads per graph.
    #[arg(long, default_value_t = 1, env = "WEIR_WORKERS")]
    workers: usize,
    /// Requests admitted at once per graph; more get 503.
    #[arg(long, default_value_t = 1024, env = "WEIR_MAX_IN_FLIGHT")]
    max_in_flight: usize,
    /// Per-request deadline in milliseconds, the body's upload included; an upload unfinished by
    /// then gets 408, an answer not ready by then 504.
    #[arg(long, default_value_t = 30_000, env = "WEIR_REQUEST_TIMEOUT_MS")]
    request_timeout_ms: u64,
    /// Largest request body in bytes; larger gets 413.
    #[arg(long, default_value_t = 64 << 20, env = "WEIR_MAX_BODY_BYTES")]
    max_body_bytes: usize,
    /// Request body bytes held by all requests at once; past it new requests get 503 with
    /// Retry-After. At least --max-body-bytes.
    #[arg(long, default_value_t = 1 << 30, env = "WEIR_MAX_INFLIGHT_BYTES")]
    max_inflight_bytes: usize,
    /// Longest a client may take to send a request's headers, in milliseconds, counted from when
    /// the connection is ready for a request (so an idle kept-alive connection is closed after it
    /// too); then its connection is closed.
    #[arg(long, default_value_t = 10_000, env = "WEIR_HEADER_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// HTTP connections open at once; past it a connection gets 503 with Retry-After and is
    /// closed. Keep it below the file-descriptor limit (`ulimit -n`).
    #[arg(long, default_value_t = 1024, env = "WEIR_MAX_CONNECTIONS",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// On SIGTERM, longest to wait in milliseconds for requests in flight before closing their
    /// connections; requests already in a graph are still answered by its shutdown.
    #[arg(long, default_value_t = 30_000, env = "WEIR_DRAIN_TIMEOUT_MS")]
    drain_timeout_ms: u64,
    /// File holding a bearer token every endpoint but liveness requires (keep it mode 0600; a
    /// file readable by group or others is warned about).
    #[arg(long, conflicts_with = "auth_token")]
    auth_token_file: Option<PathBuf>,
    /// Bearer token every endpoint but liveness requires. Command-line arguments are visible to
    /// other local users (`ps`): prefer --auth-token-file or the WEIR_AUTH_TOKEN env var.
    #[arg(long, env = "WEIR_AUTH_TOKEN", hide_env_values = true)]
    auth_token: Option<String>,
    /// Longest JSON line a JSON-lines stream reads, in bytes; a longer line is skipped and answered
    /// with an error document (default: --max-body-bytes).
    #[arg(long, env = "WEIR_MAX_LINE_BYTES")]
    max_line_bytes: Option<usize>,
    #[command(flatten)]
    files: FileArgs,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// weir's in-process path against bare ONNX Runtime: saturated throughput and latency at
    /// concurrency 1, same library, model and thread settings, in one process.
    Overhead(OverheadArgs),
    /// `weir serve` over HTTP (JSON and binary) against the in-process path and bare ONNX Runtime,
    /// at client concurrency 1, 4 and 16.
    Http(HttpArgs),
    /// A model node on a `weir executor` process over zenoh against in-process, and the time from
    /// an executor's SIGKILL to the re-dispatch of its work.
    Remote(RemoteArgs),
    /// ParM: tail latency when one replica's host hiccups (SIGSTOP/SIGCONT), against no parity and
    /// against spending the parity instance on one more replica session.
    Parm(ParmArgs),
    /// SERF's predicted mean latency against measured, per configuration and load, on ONNX Runtime.
    Serf(SerfBenchArgs),
    /// Kairos routing on executors of emulated instance types (`--emulate-latency`), queries of
    /// production-trace sizes: the planned heterogeneous pool and the homogeneous ones within the
    /// budget under every policy (Kairos, least outstanding, round robin); the largest Poisson
    /// rate whose median p99 over trials meets the target, and goodput at a fixed rate.
    #[command(name = "kairos-live")]
    KairosLive(KairosLiveArgs),
    /// HAMS: normal-case latency and throughput of NSPB and Remus-like replication against no
    /// backup on three service graphs, and stateful failover time (detection, protocol,
    /// handover) over repeated SIGKILLs of a primary.
    Hams(HamsBenchArgs),
}

#[derive(Debug, Args)]
struct HamsBenchArgs {
    /// Requests per measurement.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Closed-loop client concurrency.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Measurements per (graph, mode); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Failover trials per mode.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Most rows per batch at the stateful nodes.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Emulated extra compute per batch at every stateful node, ms (`weir executor --compute-ms`).
    #[arg(long, default_value_t = 0.0)]
    compute_ms: f64,
    /// Batches between two state copies under the `checkpoint` baseline.
    #[arg(long, default_value_t = 100)]
    checkpoint_every: u64,
    /// Instead of the overhead and failover tables: the online learner's overhead per batch size
    /// (comma-separated sizes), with a plot (`--plot`).
    #[arg(long, value_delimiter = ',')]
    sweep_batch: Vec<usize>,
    /// Instead: the lineage's cost per batch of 64 rows against the path length (R16).
    #[arg(long)]
    lineage: bool,
    /// Instead: X7, released outputs a checkpoint replay contradicts under non-determinism, for
    /// each of these checkpoint intervals (comma-separated batches), against NSPB; `--trials`
    /// failovers each, plot beside `--plot` as `divergence.png`.
    #[arg(long, value_delimiter = ',')]
    divergence: Vec<u64>,
    /// Where the batch sweep's plot goes.
    #[arg(long, default_value = "benchmarks/hams/batch_sweep.png")]
    plot: PathBuf,
    /// Only these service graphs (autopilot, tracker, online; comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "autopilot,tracker,online"
    )]
    services: Vec<String>,
}

#[derive(Debug, Args)]
struct KairosLiveArgs {
    /// Instance types as NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR (comma-separated): a call of n
    /// rows takes BASE + PER_ROW × n ms (`weir executor --emulate-latency`). Default: the paper's
    /// DIEN latency fits on g4dn.xlarge and r5n.large (notes/kairos.md §2.7) ×4, at their prices.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "emu.gpu:26.24:0.0495:0.526,emu.cpu:3.36:0.3271:0.149"
    )]
    types: Vec<String>,
    /// Instances per type of the heterogeneous pool (comma-separated, one per type); default: the
    /// pool `weir plan` picks for the types' profile and the budget.
    #[arg(long, value_delimiter = ',')]
    hetero: Option<Vec<usize>>,
    /// Budget in $/h every pool fits in.
    #[arg(long, default_value_t = 2.5)]
    budget: f64,
    /// p99 latency target of a query, ms.
    #[arg(long, default_value_t = 140.0)]
    qos_ms: f64,
    /// Hidden width of the 64→W→W→10 MLP served.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Where Kairos's latencies come from, all given as a profile in the graph's YAML but the last:
    /// `measured` (each type's query latency measured through weir before the sweep), `nominal`
    /// (the types' BASE + PER_ROW × rows), or `learned` (online, from the node's own jobs).
    #[arg(long, default_value = "measured")]
    kairos_latency: String,
    /// First offered rate of each sweep, queries/s.
    #[arg(long, default_value_t = 40.0)]
    start_rate: f64,
    /// Factor between consecutive rates of the sweep.
    #[arg(long, default_value_t = 1.2)]
    rate_step: f64,
    /// Highest rate of the sweep, queries/s.
    #[arg(long, default_value_t = 210.0)]
    max_rate: f64,
    /// Seconds of load per trial (at least --min-queries queries).
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Fewest queries per trial.
    #[arg(long, default_value_t = 200)]
    min_queries: usize,
    /// Trials per rate; the sweep judges the median p99 over them.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// Offered rate of the goodput runs (the same for every set-up), queries/s.
    #[arg(long, default_value_t = 80.0)]
    goodput_rate: f64,
    /// Routing policies, each run on every pool (kairos, kairos_one_per_call, least_outstanding,
    /// round_robin).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "kairos,kairos_one_per_call,least_outstanding,round_robin"
    )]
    policies: Vec<String>,
    /// Where every trial goes (tab-separated).
    #[arg(long, default_value = "benchmarks/kairos/live_points.txt")]
    points: PathBuf,
    /// Where the Markdown table goes.
    #[arg(long, default_value = "benchmarks/kairos/live.md")]
    table: PathBuf,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/kairos/live.png")]
    plot: PathBuf,
}

#[derive(Debug, Args)]
struct ParmArgs {
    /// The deployed model (also its own parity model here: same cost).
    #[arg(long, default_value = ".weir/models/squeezenet_random.onnx")]
    model: PathBuf,
    /// Coding-group size.
    #[arg(long, default_value_t = 2)]
    k: usize,
    /// Poisson arrivals per second.
    #[arg(long, default_value_t = 40.0)]
    rate: f64,
    /// Requests per set-up.
    #[arg(long, default_value_t = 1500)]
    requests: usize,
    /// How long each hiccup freezes the remote replica's host, ms.
    #[arg(long, default_value_t = 100)]
    freeze_ms: u64,
    /// Time between hiccups, ms.
    #[arg(long, default_value_t = 1000)]
    period_ms: u64,
    /// Where the PNG plot goes.
    #[arg(long, default_value = "benchmarks/parm/parm.png")]
    plot: PathBuf,
}

#[derive(Debug, Args)]
struct RemoteArgs {
    /// The model (default: the zoo's squeezenet).
    #[arg(long, default_value = ".weir/zoo/squeezenet.onnx")]
    model: PathBuf,
    /// Sessions per executor.
    #[arg(long, default_value_t = 2)]
    instances: usize,
    /// Closed-loop client counts.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    concurrency: Vec<usize>,
    /// Requests per measurement.
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Repeats per side; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// SIGKILLs in the failover part.
    #[arg(long, default_value_t = 5)]
    kills: usize,
}

#[derive(Debug, Args)]
struct HttpArgs {
    /// Models, as NAME=PATH (default: the zoo's squeezenet and resnet50 under .weir/zoo).
    #[arg(long = "model")]
    models: Vec<String>,
    /// Client concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    concurrency: Vec<usize>,
    /// Requests per measurement (resnet50 gets a fifth).
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Repetitions; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Where to save a PNG plot of the sweep.
    #[arg(long, default_value = "benchmarks/http/http.png")]
    plot: PathBuf,
}

#[derive(Debug, Args)]
struct OverheadArgs {
    /// Models, as NAME=PATH (default: the zoo's squeezenet and resnet50 under .weir/zoo).
    #[arg(long = "model")]
    models: Vec<String>,
    /// Requests per throughput chunk (bare and weir take turns, chunk by chunk).
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Latency call pairs per repeat (bare and weir alternate call by call, concurrency 1).
    #[arg(long, default_value_t = 200)]
    latency_requests: usize,
    /// Throughput chunks per side, and latency repeats; medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Validate(a) => validate(a),
        Command::Run(a) => run(a),
        Command::Serve(a) => serve(a),
        Command::Executor(a) => executor(a),
        Command::Train(a) => train(a),
        Command::Parity(ParityCommand::Train(a)) => parity_train(a),
        Command::Plan(a) => plan(a),
        Command::Bench(BenchCommand::Overhead(a)) => bench_overhead(a),
        Command::Bench(BenchCommand::Http(a)) => bench_http(a),
        Command::Bench(BenchCommand::Remote(a)) => bench_remote(a),
        Command::Bench(BenchCommand::Parm(a)) => bench_parm(a),
        Command::Profile(a) => profile(a),
        Command::Bench(BenchCommand::Serf(a)) => bench_serf(a),
        Command::Bench(BenchCommand::KairosLive(a)) => bench_kairos_live(a),
        Command::Bench(BenchCommand::Hams(a)) => bench_hams(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: &Path, files: &FileArgs) -> Result<weir::LoadedGraph> {
    load_graph_under(path, &files.rules()?).map_err(|e| match e {
        LoadError::Invalid(d) => anyhow!("{d}"),
        other => anyhow!(other),
    })
}

fn validate(args: ValidateArgs) -> Result<()> {
    let mut failed = 0;
    for path in &args.graphs {
        match load(path, &args.files) {
            Ok(graph) => {
                let warnings = graph.warnings.warnings().count();
                if warnings > 0 {
                    eprintln!("{}", graph.warnings);
                }
                if args.check_env {
                    let running = start(graph.plan.clone(), RuntimeOptions::default())
                        .with_context(|| format!("starting {}", path.display()))?;
                    running.shutdown();
                }
                if args.dot {
                    print!("{}", graph.plan.dot());
                } else {
                    print!("{}", graph.plan.describe());
                    println!(
                        "{}: ok{}",
                        path.display(),
                        if warnings > 0 {
                            format!(" ({warnings} warning(s))")
                        } else {
                            String::new()
                        }
                    );
                }
                if args.deny_warnings && warnings > 0 {
                    failed += 1;
                }
            }
            Err(e) => {
                eprintln!("{e:#}\n");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} graph(s) failed validation",
            args.graphs.len()
        );
    }
    Ok(())
}

fn run(args: RunArgs) -> Result<()> {
    let graph = load(&args.graph, &args.files)?;
    if graph.warnings.warnings().count() > 0 {
        eprintln!("{}", graph.warnings);
    }
    let workload = match &args.dataset {
        Some(path) => Workload::labelled_csv(&graph.plan, path)?,
        None => Workload::random(&graph.plan, 16, args.seed),
    };
    let arrival = match (args.rate, args.concurrency) {
        (Some(rate), _) => Arrival::Poisson { rate },
        (None, c) => Arrival::Closed {
            concurrency: c.unwrap_or(4),
        },
    };
    let name = graph.plan.name.clone();
    let options = RuntimeOptions {
        workers: args.workers,
        max_in_flight: args.max_in_flight,
        ..RuntimeOptions::default()
    };
    let distributed = weir::DistributedOptions {
        cluster: args.cluster.options()?,
        ..Default::default()
    };
    let running = weir::start_distributed(graph.plan, options, &distributed)
        .with_context(|| format!("starting graph `{name}`"))?;
    if let Ok(rt) = OrtRuntime::get() {
        eprintln!("ONNX Runtime: {}", rt.library().display());
    }
    eprintln!(
        "running `{name}`: {} requests ({arrival:?}), {} worker(s), workload: {}",
        args.requests,
        args.workers,
        match &args.dataset {
            Some(p) => p.display().to_string(),
            None => "random tensors".into(),
        }
    );
    let spec = LoadSpec {
        requests: args.requests,
        warmup: args.warmup,
        arrival,
        seed: args.seed,
        label_output: args.label_output.clone(),
        progress: !args.no_progress,
    };
    let report = run_load(running.runtime(), &workload, &spec);
    let stats = running.executor_stats();
    let duplicates = running.runtime().duplicate_answers();
    let parity: Vec<_> = running
        .parity_services()
        .into_iter()
        .map(|(node, s)| (node, s.stats()))
        .collect();
    running.shutdown();
    print!("{}", report.summary(&name));
    for (node, p) in parity {
        println!(
            "node `{node}` (ParM): {} coding groups, {} answers reconstructed, {} late real predictions dropped",
            p.groups, p.reconstructed, p.late_real
        );
    }
    for (node, s) in stats {
        println!(
            "node `{node}`: {} rows in {} calls (mean batch {:.2}), busy {:.2} s, queue depth {}, errors {}",
            s.rows,
            s.runs,
            s.mean_batch_size(),
            s.busy.as_secs_f64(),
            s.queue_depth(),
            s.errors
        );
    }
    if duplicates > 0 {
        println!("second answers suppressed: {duplicates}");
    }
    if report.ok + report.error_count() != report.sent {
        bail!(
            "{} requests sent but {} answered",
            report.sent,
            report.ok + report.error_count()
        );
    }
    Ok(())
}

fn bench_overhead(args: OverheadArgs) -> Result<()> {
    let models = parse_models(&args.models)?;
    let config = OverheadConfig {
        models,
        requests: args.requests,
        latency_requests: args.latency_requests,
        repeats: args.repeats.max(1),
        throughput_layout: Layout {
            instances: 2,
            threads: 1,
        },
        latency_layout: Layout {
            instances: 1,
            threads: 2,
        },
    };
    let rows = overhead(&config)?;
    let rt = OrtRuntime::get()?;
    println!("ONNX Runtime: {}", rt.build_info());
    println!("machine: {} cores; {} requests per throughput run, {} per latency run, median of {} chunks; {} alternating latency pairs\n", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), config.requests, config.latency_requests, config.repeats, config.latency_requests * config.repeats);
    print!("{}", overhead_table(&rows, &config));
    Ok(())
}

/// Installs this process's zenoh configuration file and HAMS control key, when given: both are
/// one per process, read once before any session opens.
fn install_zenoh_security(
    zenoh_config: Option<&Path>,
    control_key_file: Option<&Path>,
) -> Result<()> {
    if let Some(path) = zenoh_config {
        weir_connectors::zenoh_peer::use_config_file(path)?;
    }
    if let Some(path) = control_key_file {
        let max = weir::hams::control_auth::MAX_KEY_FILE_BYTES;
        let text = weir_engine::paths::read_capped(path, max, &Default::default())?;
        weir::hams::control_auth::use_key(&text)
            .with_context(|| format!("the control key file {}", path.display()))?;
    }
    Ok(())
}

fn serve(args: ServeArgs) -> Result<()> {
    install_zenoh_security(
        args.zenoh_config.as_deref(),
        args.control_key_file.as_deref(),
    )?;
    let token = match (&args.auth_token_file, &args.auth_token) {
        (Some(path), _) => Some(weir_connectors::http::AuthToken::from_file(path)?),
        (None, Some(t)) => Some(weir_connectors::http::AuthToken::new(t)?),
        (None, None) => None,
    };
    if args.max_inflight_bytes < args.max_body_bytes {
        bail!(
            "--max-inflight-bytes ({}) is below --max-body-bytes ({}): bodies between the two would be refused forever",
            args.max_inflight_bytes,
            args.max_body_bytes
        );
    }
    let mut running = Vec::new();
    for path in &args.graphs {
        let graph = load(path, &args.files)?;
        if graph.warnings.warnings().count() > 0 {
            eprintln!("{}", graph.warnings);
        }
        let name = graph.plan.name.clone();
        if running
            .iter()
            .any(|r: &weir::RunningGraph| r.runtime().plan().name == name)
        {
            bail!(
                "{}: a graph named `{name}` is already served",
                path.display()
            );
        }
        let options = RuntimeOptions {
            workers: args.workers,
            max_in_flight: args.max_in_flight,
            ..RuntimeOptions::default()
        };
        let distributed = weir::DistributedOptions {
            listen: args.zenoh_listen.clone(),
            connect: args.zenoh_connect.clone(),
            cluster: args.cluster.options()?,
        };
        running.push(
            weir::start_distributed(graph.plan, options, &distributed)
                .with_context(|| format!("starting graph `{name}` from {}", path.display()))?,
        );
    }
    let config = weir_connectors::http::HttpConfig {
        request_timeout: std::time::Duration::from_millis(args.request_timeout_ms),
        max_body_bytes: args.max_body_bytes,
        max_inflight_bytes: args.max_inflight_bytes,
        header_timeout: std::time::Duration::from_millis(args.header_timeout_ms),
        max_connections: args.max_connections,
        drain_timeout: std::time::Duration::from_millis(args.drain_timeout_ms),
        auth_token: token,
    };
    let server = weir_connectors::http::HttpServer::new(
        running
            .iter()
            .map(weir::RunningGraph::runtime_handle)
            .collect(),
        config,
        running
            .iter()
            .map(weir::RunningGraph::executor_metrics)
            .collect(),
    );
    let streams: Vec<(Arc<weir::GraphRuntime>, weir::StreamConnector)> = running
        .iter()
        .flat_map(|r| {
            let runtime = r.runtime_handle();
            r.runtime()
                .plan()
                .streams
                .clone()
                .into_iter()
                .map(move |c| (Arc::clone(&runtime), c))
        })
        .collect();
    let http = match (&args.http, streams.is_empty()) {
        (Some(addr), _) => Some(addr.clone()),
        (None, true) => Some("127.0.0.1:8000".to_string()),
        (None, false) => None,
    };
    let stream_options = weir_connectors::stream::StreamOptions {
        request_timeout: std::time::Duration::from_millis(args.request_timeout_ms),
        max_line_bytes: args.max_line_bytes.unwrap_or(args.max_body_bytes),
        ..Default::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        for (runtime, connector) in streams {
            let what = format!(
                "{} stream of `{}`",
                stream_kind(&connector),
                runtime.plan().name
            );
            let stop = stop_rx.clone();
            tasks.spawn(async move {
                let report =
                    weir_connectors::stream::run_stream(runtime, connector, stream_options, stop)
                        .await;
                (what, report)
            });
        }
        match &http {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding {addr}"))?;
                let addr = listener.local_addr()?;
                println!("weir serving http://{addr}");
                use std::io::Write;
                std::io::stdout().flush()?;
                let stop = stop_tx.clone();
                server
                    .serve(listener, async move {
                        shutdown_signal().await;
                        let _ = stop.send(true);
                    })
                    .await?;
            }
            None => {
                eprintln!("weir streaming ({} connector(s))", tasks.len());
                let all_done = async {
                    let mut finished = Vec::new();
                    while let Some(r) = tasks.join_next().await {
                        finished.push(r);
                    }
                    finished
                };
                tokio::select! {
                    finished = all_done => {
                        report_streams(finished);
                        return anyhow::Ok(());
                    }
                    _ = shutdown_signal() => {}
                }
            }
        }
        let _ = stop_tx.send(true);
        let mut finished = Vec::new();
        while let Some(r) = tasks.join_next().await {
            finished.push(r);
        }
        report_streams(finished);
        anyhow::Ok(())
    })?;
    for graph in running {
        graph.shutdown();
    }
    eprintln!("weir stopped");
    Ok(())
}

type StreamOutcome = (
    String,
    Result<weir_connectors::stream::StreamReport, weir_connectors::stream::StreamError>,
);

fn stream_kind(c: &weir::StreamConnector) -> &'static str {
    match c {
        weir::StreamConnector::Jsonl { .. } => "JSON-lines",
        weir::StreamConnector::Zenoh { .. } => "zenoh",
    }
}

/// Prints what each streaming connector did, on stderr (stdout may be a stream).
fn report_streams(finished: Vec<Result<StreamOutcome, tokio::task::JoinError>>) {
    for outcome in finished {
        match outcome {
            Ok((what, Ok(r))) => eprintln!("{what}: {} requests, {} errors", r.requests, r.errors),
            Ok((what, Err(e))) => eprintln!("{what} stopped: {e}"),
            Err(e) => eprintln!("a stream connector panicked: {e}"),
        }
    }
}

fn print_progress(p: &weir_training::Progress, what: &str) {
    eprintln!(
        "epoch {:>4}/{}  loss {:.5}  {what} {:.4}",
        p.epoch, p.epochs, p.loss, p.accuracy
    );
}

fn train(args: TrainArgs) -> Result<()> {
    let architecture = match args.arch.as_str() {
        "mlp" => weir_training::Architecture::digits_mlp(),
        "lenet" => weir_training::Architecture::LeNet,
        other => bail!("unknown architecture `{other}` (mlp or lenet)"),
    };
    let mut options = weir_training::TrainOptions::new(architecture, &args.data, &args.out);
    options.schedule.epochs = args.epochs;
    options.schedule.seed = args.seed;
    let report = weir_training::train_classifier(&options, |p| print_progress(p, "test accuracy"))
        .context("training")?;
    println!(
        "wrote {} ({} parameters): train accuracy {:.4}, test accuracy {:.4}",
        report.out.display(),
        report.parameters,
        report.train_accuracy,
        report.test_accuracy
    );
    Ok(())
}

fn parity_train(args: ParityTrainArgs) -> Result<()> {
    let mut options =
        weir_training::ParityOptions::new(&args.deployed, args.k, &args.data, &args.out);
    options.encoder = match args.encoder.as_str() {
        "sum" => weir_training::Encoder::Sum,
        "concat" => weir_training::Encoder::Concat,
        other => bail!("unknown encoder `{other}` (sum or concat)"),
    };
    if let Some(e) = args.epochs {
        options.schedule.epochs = e;
    }
    options.schedule.seed = args.seed;
    let report = weir_training::train_parity(&options, |p| print_progress(p, "degraded accuracy"))
        .context("training the parity model")?;
    println!(
        "wrote {} (k = {}): deployed accuracy {:.4}, degraded-mode accuracy {:.4}",
        report.out.display(),
        report.k,
        report.deployed_accuracy,
        report.degraded_accuracy
    );
    Ok(())
}

fn plan(args: PlanArgs) -> Result<()> {
    let profile = match args.profiles.strip_prefix("paper:") {
        Some(name) => weir_kairos::profile::paper::PaperModel::from_name(name)
            .ok_or_else(|| anyhow!("no built-in profile `{name}` (ncf, rm2, wnd, mtwnd, dien)"))?
            .profile()
            .to_yaml(),
        None => std::fs::read_to_string(&args.profiles)
            .with_context(|| format!("reading {}", args.profiles))?,
    };
    let report = weir_kairos::planner::plan_report(&profile, args.budget, args.qos_ms, None)
        .context("planning")?;
    eprint!("{}", report.ranking);
    print!("{}", report.executors_yaml);
    if let Some(out) = &args.out {
        std::fs::write(out, &report.executors_yaml)
            .with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

fn executor(args: ExecutorArgs) -> Result<()> {
    install_zenoh_security(
        args.zenoh_config.as_deref(),
        args.control_key_file.as_deref(),
    )?;
    let options = weir_executor::server::ExecutorOptions {
        name: args.name.clone(),
        key: args.key,
        listen: args.listen,
        connect: args.connect,
        models: args.models,
        device: args.device,
        threads: args.threads,
        instances: args.instances,
        max_batch: args.max_batch,
        max_delay: std::time::Duration::from_micros(args.max_delay_us),
        queue_capacity: args.queue_capacity,
        emulation: weir_executor::emulation::Emulation::from_options(
            args.slowdown,
            args.emulate_latency,
        )?,
        stateful: args.stateful,
        stateful_options: weir_executor::stateful::StatefulOptions {
            threads: args.threads,
            perturb: args.perturb,
            state_delay: std::time::Duration::from_millis(args.state_delay_ms),
            compute: std::time::Duration::from_secs_f64(args.compute_ms.max(0.0) / 1e3),
            duplicate_messages: args.duplicate_messages,
            reorder_messages: args.reorder_messages,
        },
    };
    let server = weir_executor::server::ExecutorServer::start(&options)
        .with_context(|| format!("starting executor `{}`", args.name))?;
    println!(
        "weir executor {} serving {} under {}",
        args.name,
        server.models().join(","),
        server.key_prefix()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(shutdown_signal());
    eprintln!("weir executor {}: stopping", args.name);
    server.shutdown();
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

fn parse_models(given: &[String]) -> Result<Vec<(String, PathBuf)>> {
    if given.is_empty() {
        return Ok(default_models());
    }
    given
        .iter()
        .map(|m| {
            m.split_once('=')
                .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
                .ok_or_else(|| anyhow!("--model takes NAME=PATH, got `{m}`"))
        })
        .collect()
}

fn bench_parm(args: ParmArgs) -> Result<()> {
    use weir::bench::parm::{parm, parm_table, ParmBenchConfig};
    let config = ParmBenchConfig {
        model: args.model,
        k: args.k.max(2),
        rate: args.rate,
        requests: args.requests,
        freeze_ms: args.freeze_ms,
        period_ms: args.period_ms.max(args.freeze_ms + 1),
    };
    let rows = parm(&config)?;
    print_machine()?;
    let costs = weir::bench::parm::coding_costs(&config)?;
    print!("{}", parm_table(&rows, &costs, &config)?);
    write_plot(&args.plot, |p| weir::bench::plot::plot_parm(&rows, p));
    let cost_plot = args.plot.with_file_name("coding_cost.png");
    write_plot(&cost_plot, |p| {
        weir::bench::plot::plot_coding_cost(&costs, p)
    });
    Ok(())
}

fn bench_kairos_live(args: KairosLiveArgs) -> Result<()> {
    use weir::bench::kairos_live::{
        default_model, kairos_live, kairos_live_points, kairos_live_table, plot_kairos_live,
        EmulatedType, KairosLatency, KairosLiveConfig, Policy,
    };
    let types = args
        .types
        .iter()
        .map(|t| EmulatedType::parse(t))
        .collect::<Result<Vec<_>>>()?;
    let policies = args
        .policies
        .iter()
        .map(|p| {
            Policy::parse(p).ok_or_else(|| {
                anyhow::anyhow!("unknown policy `{p}` (kairos, kairos_one_per_call, least_outstanding or round_robin)")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let kairos_latency = KairosLatency::parse(&args.kairos_latency).ok_or_else(|| {
        anyhow::anyhow!(
            "--kairos-latency `{}`: give `measured`, `nominal` or `learned`",
            args.kairos_latency
        )
    })?;
    let config = KairosLiveConfig {
        types,
        hetero: args.hetero,
        budget_per_hour: args.budget,
        qos_ms: args.qos_ms,
        hidden: args.hidden,
        kairos_latency,
        start_rate: args.start_rate,
        rate_step: args.rate_step,
        max_rate: args.max_rate,
        seconds_per_trial: args.seconds,
        min_queries: args.min_queries,
        trials: args.trials.max(1),
        goodput_rate: args.goodput_rate,
        policies,
    };
    let home = weir::bench::weir_home();
    let model = default_model(&home, config.hidden);
    let (results, info) = kairos_live(&config, &model)?;
    let table = kairos_live_table(&config, &info, &results);
    println!("{table}");
    let machine = format!(
        "\nMachine: {} CPUs, load average at the end {}; ONNX Runtime: {}.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        weir::OrtRuntime::get()
            .map(|r| r.build_info().to_string())
            .unwrap_or_else(|e| e.to_string())
    );
    println!("{machine}");
    if let Some(dir) = args.table.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.table, format!("{table}{machine}"))
        .with_context(|| format!("writing {}", args.table.display()))?;
    std::fs::write(&args.points, kairos_live_points(&results))
        .with_context(|| format!("writing {}", args.points.display()))?;
    match plot_kairos_live(&config, &results, &args.plot) {
        Ok(()) => eprintln!("plot: {}", args.plot.display()),
        Err(e) => eprintln!("no plot ({e})"),
    }
    Ok(())
}

fn bench_hams(args: HamsBenchArgs) -> Result<()> {
    use weir::bench::hams::{failover, overhead, tables, HamsBenchConfig};
    let home = weir::bench::weir_home();
    let config = HamsBenchConfig {
        models: std::fs::canonicalize(home.join("models"))
            .context("the models folder (run scripts/setup.sh first)")?,
        requests: args.requests,
        concurrency: args.concurrency.max(1),
        repeats: args.repeats.max(1),
        trials: args.trials,
        batch: args.batch.max(1),
        compute_ms: args.compute_ms.max(0.0),
        checkpoint_every: args.checkpoint_every.max(1),
        services: args
            .services
            .iter()
            .map(|s| weir::bench::hams::Service::parse(s))
            .collect::<Result<_>>()?,
    };
    print_machine()?;
    if args.lineage {
        let hops = [1, 2, 4, 8, 12];
        let costs = weir::bench::hams::lineage_cost(64, &hops, 2000);
        println!(
            "lineage per batch of 64 rows (append one hop + dependency scan), median of 2000\n"
        );
        println!("| hops on the path | µs per batch | µs per row |\n|---|---|---|");
        for (n, us) in &costs {
            println!("| {n} | {us:.1} | {:.2} |", us / 64.0);
        }
        let path = args.plot.with_file_name("lineage_cost.png");
        let points: Vec<(usize, f64, f64)> =
            costs.iter().map(|&(n, us)| (n, us, us / 64.0)).collect();
        write_plot(&path, |p| weir::bench::plot::plot_lineage_cost(&points, p));
        return Ok(());
    }
    if !args.divergence.is_empty() {
        use weir::bench::hams_divergence::{divergence, divergence_points, divergence_table};
        let rows = divergence(&config, &args.divergence)?;
        print!("{}", divergence_table(&rows, &config));
        let path = args.plot.with_file_name("divergence.png");
        write_plot(&path, |p| {
            weir::bench::plot::plot_hams_divergence(&divergence_points(&rows), p)
        });
        let broken: usize = rows
            .iter()
            .map(|r| r.trials.iter().filter(|t| !t.answered_once).count())
            .sum();
        if broken > 0 {
            bail!("{broken} trials lost or duplicated a request");
        }
        return Ok(());
    }
    if !args.sweep_batch.is_empty() {
        let rows = weir::bench::hams::batch_sweep(&config, &args.sweep_batch)?;
        print!("{}", weir::bench::hams::sweep_table(&rows, &config));
        let title = format!(
            "HAMS overhead, 1 MiB online learner, {} ms/batch",
            config.compute_ms
        );
        write_plot(&args.plot, |p| {
            weir::bench::plot::plot_hams_batch_sweep(&rows, &title, p)
        });
        return Ok(());
    }
    let rows = overhead(&config)?;
    let failovers = failover(&config)?;
    print!("{}", tables(&rows, &failovers, &config));
    let broken: usize = failovers
        .iter()
        .map(|(_, t)| t.iter().filter(|t| !t.exactly_once).count())
        .sum();
    if broken > 0 {
        bail!("{broken} failover trials lost or duplicated a request");
    }
    Ok(())
}

fn bench_remote(args: RemoteArgs) -> Result<()> {
    use weir::bench::remote::{failover, remote_overhead, remote_table, RemoteBenchConfig};
    let config = RemoteBenchConfig {
        model: args.model,
        instances: args.instances.max(1),
        concurrency: args.concurrency,
        requests: args.requests,
        repeats: args.repeats.max(1),
        kills: args.kills,
    };
    let rows = remote_overhead(&config)?;
    let failover = failover(&config)?;
    print_machine()?;
    print!("{}", remote_table(&rows, &failover, &config));
    if failover.errors > 0 {
        bail!("{} requests failed during failover", failover.errors);
    }
    Ok(())
}

fn bench_http(args: HttpArgs) -> Result<()> {
    let config = HttpBenchConfig {
        models: parse_models(&args.models)?,
        concurrency: args.concurrency,
        requests: args.requests,
        repeats: args.repeats.max(1),
    };
    let rows = http(&config)?;
    println!("ONNX Runtime: {}", OrtRuntime::get()?.build_info());
    println!("machine: {} cores; {} requests per measurement (resnet50: a fifth), median of {} repeats\n", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), config.requests, config.repeats);
    print!("{}", http_table(&rows));
    write_plot(&args.plot, |p| weir::bench::plot::plot_http(&rows, p));
    Ok(())
}

#[derive(Debug, Args)]
struct ProfileArgs {
    /// Graph YAML file; profiles go next to it.
    graph: PathBuf,
    /// Profile only this model node.
    #[arg(long)]
    node: Option<String>,
    /// Measured requests per tuple (the paper: 10).
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Interleaved rounds the samples are split across; each tuple keeps its median round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Cores to plan for (default: all available).
    #[arg(long)]
    cores: Option<usize>,
    /// Measure bare sessions back to back (the paper's way) instead of the node's executor in a
    /// running one-node graph.
    #[arg(long)]
    bare_sessions: bool,
    /// Seconds of idle time between two rounds (default: back to back): spreads the rounds over
    /// minutes on a host whose speed moves at that scale (costs wall time only; on the 2-vCPU VM
    /// it did not make the prediction reliably better, benchmarks/SERF.md).
    #[arg(long, value_parser = parse_seconds, default_value = "0")]
    round_gap: std::time::Duration,
}

/// A non-negative, finite number of seconds.
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|e| format!("`{text}` is not a number of seconds: {e}"))?;
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("`{text}`: seconds must be finite and not negative"))
}

#[derive(Debug, Args)]
struct SerfBenchArgs {
    /// ONNX model (repeat to measure several; default: the zoo's squeezenet, with `--phases`
    /// its shufflenet).
    #[arg(long = "model")]
    models: Vec<PathBuf>,
    /// Requests at the highest load (lower loads get proportionally fewer).
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Fewest requests at any point.
    #[arg(long, default_value_t = 150)]
    min_requests: usize,
    /// Most seconds one point may take.
    #[arg(long, default_value_t = 6.0)]
    point_seconds: f64,
    /// Load levels.
    #[arg(long, default_value_t = 10)]
    loads: usize,
    /// Measured requests per profiling tuple.
    #[arg(long, default_value_t = 10)]
    samples: usize,
    /// Interleaved profiling rounds the samples are split across (each tuple keeps its median).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Where the Markdown table goes.
    #[arg(long, default_value = "benchmarks/serf/ort.md")]
    table: PathBuf,
    /// Where the plot goes.
    #[arg(long, default_value = "benchmarks/serf/ort.png")]
    plot: PathBuf,
    /// Instead: the moderate → low → moderate load run, `parallelism: auto` against every fixed
    /// configuration (first `--model` only).
    #[arg(long)]
    phases: bool,
    /// Seconds per phase (`--phases`).
    #[arg(long, default_value_t = 60.0)]
    phase_seconds: f64,
    /// Moderate load as a fraction of the largest configuration capacity (`--phases`).
    #[arg(long, default_value_t = 0.55)]
    moderate: f64,
    /// Low load, same unit (`--phases`).
    #[arg(long, default_value_t = 0.2)]
    low: f64,
    /// Moderate load in requests per second, instead of `--moderate` (`--phases`; with
    /// `--low-rate`): batches taken on different days then serve the same load and pool.
    #[arg(long, requires = "low_rate")]
    moderate_rate: Option<f64>,
    /// Low load in requests per second, instead of `--low` (`--phases`; with `--moderate-rate`).
    #[arg(long, requires = "moderate_rate")]
    low_rate: Option<f64>,
    /// A fixed configuration to run, as `CONCURRENCYxTHREADS` (`--phases`; repeat for several;
    /// default: every one stable at moderate load).
    #[arg(long = "fixed", value_parser = parse_fixed_config)]
    fixed: Vec<weir_serf::config::Config>,
    /// Also run the control set-up (`--phases`): `parallelism: auto` over the profile cut to the
    /// configurations with this many intra-op threads, which beside the fixed configuration it
    /// settles in measures what the `auto` machinery itself costs.
    #[arg(long)]
    control_threads: Option<usize>,
    /// Also run SERF with this utilisation cap (`--phases`; `parallelism: {auto:
    /// {max_utilisation: U}}`, 0 < U ≤ 1), in the same runs as SERF with the default cap.
    #[arg(long, value_parser = parse_utilisation)]
    also_max_utilisation: Option<f64>,
    /// Write every call of every set-up's model node to `run<R>-<set-up>.csv` in this folder
    /// (`--phases`; `benchmarks/serf/call_trace.py` reads them).
    #[arg(long)]
    calls_csv: Option<PathBuf>,
    /// Seed of the first run's arrivals; run `r` uses `seed + r` (`--phases`).
    #[arg(long, default_value_t = 11)]
    seed: u64,
    /// Seconds of moderate load served on a throwaway graph before each run's first measured
    /// set-up (`--phases`; 0: none).
    #[arg(long, default_value_t = 20.0)]
    burn_in: f64,
    /// Whether intra-op threads spin while idle, in the profile and in every graph served.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    spinning: bool,
    /// Pin session threads and intra-op workers to cores from this index of the process's CPUs
    /// on, in the profile and in every graph served (`executor.pin_cores_from`; default: the OS
    /// places them).
    #[arg(long)]
    pin_cores_from: Option<usize>,
    /// Cores the model node may use: the configurations profiled and served are those with
    /// `c·t` at most this (default: all available). With `--pin-cores-from`, a host with more
    /// cores serves the node on these alone: they are reserved for it, and the load generator and
    /// weir's own threads are kept on the rest.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    cores: Option<u16>,
    /// With `--cores` and `--pin-cores-from`: pin the node's threads but leave the process's other
    /// threads free to run on its cores too (as every run before the reservation did), to compare.
    #[arg(long, requires_all = ["cores", "pin_cores_from"])]
    share_node_cores: bool,
    /// Profile bare sessions back to back (the paper's way) instead of the node's executor in a
    /// running one-node graph.
    #[arg(long)]
    bare_sessions: bool,
    /// Also profile the model again just before each configuration's loads and predict its
    /// points from that profile as well (a column beside the prediction from the profile taken
    /// once): how much of the error is the profile's age on a host whose speed drifts.
    #[arg(long, conflicts_with_all = ["phases", "spread_profile"])]
    reprofile: bool,
    /// Also take a second profile right after the first with its rounds (at least five) spread
    /// over this many seconds, and predict every point from it as well: whether a profile that
    /// samples several moments predicts better than one that catches one.
    #[arg(long, value_parser = parse_seconds, conflicts_with = "phases")]
    spread_profile: Option<std::time::Duration>,
    /// Also take a second profile right after the first whose tuples `(i, t)` run with `i`
    /// clients (none waiting) instead of `i + 1`, and predict every point from it as well.
    #[arg(long, conflicts_with_all = ["phases", "reprofile", "spread_profile"])]
    profile_without_queue: bool,
    /// Whole comparisons to run; the report quotes medians (`--phases`).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Where the phases table goes (`--phases`).
    #[arg(long, default_value = "benchmarks/serf/phases.md")]
    phases_table: PathBuf,
    /// Where the latency-over-time plot goes (`--phases`; the last run's).
    #[arg(long, default_value = "benchmarks/serf/phases.png")]
    phases_plot: PathBuf,
}

/// Draws a benchmark's plot at `path` with `draw` and says where it went, or why not. A plot that
/// cannot be drawn never loses the measurements printed and saved before it: a host without the
/// font library makes plotters' font loading panic, which is caught here. A failed drawing leaves
/// no file behind: the bitmap backend writes its blank canvas when dropped during the panic, and a
/// white PNG beside a table reads as a plot of nothing.
fn write_plot(path: &Path, draw: impl FnOnce(&Path) -> Result<()>) {
    let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| draw(path))) {
        Ok(Ok(())) => {
            println!("plot: {}", path.display());
            return;
        }
        Ok(Err(e)) => format!("{e:#}"),
        Err(_) => "drawing panicked (is the font library, fontconfig, installed?)".to_string(),
    };
    // Nothing to remove is the usual case when drawing failed before the canvas existed.
    let _ = std::fs::remove_file(path);
    eprintln!("no plot written ({}): {why}", path.display());
}

/// A utilisation cap: a number above 0 and at most 1.
fn parse_utilisation(text: &str) -> std::result::Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(u) if weir_engine::spec::AutoSpec::accepts_max_utilisation(u) => Ok(u),
        _ => Err(format!(
            "`{text}` is not a utilisation above 0 and at most 1 (e.g. 0.6)"
        )),
    }
}

/// A fixed configuration from `CONCURRENCYxTHREADS` (`2x1`: two requests at once, one intra-op
/// thread each).
fn parse_fixed_config(text: &str) -> std::result::Result<weir_serf::config::Config, String> {
    let bad = || format!("`{text}` is not CONCURRENCYxTHREADS with both at least 1 (e.g. 2x1)");
    let (c, t) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let c: usize = c.trim().parse().map_err(|_| bad())?;
    let t: usize = t.trim().parse().map_err(|_| bad())?;
    if c == 0 || t == 0 {
        return Err(bad());
    }
    Ok(weir_serf::config::Config::new(c, t))
}

/// Where profiles are measured, from `--bare-sessions`.
fn measured_in(bare_sessions: bool) -> weir_serf::profile::MeasuredIn {
    if bare_sessions {
        weir_serf::profile::MeasuredIn::Sessions
    } else {
        weir_serf::profile::MeasuredIn::Graph
    }
}

/// The machine's cores for this process (as before `weir bench serf` reserved the node's).
fn cores() -> usize {
    weir_operators::model::pinning::cpus_before_reservation().unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// The cores `weir bench serf` plans the model node for: `--cores`, else the machine's.
fn node_cores(args: &SerfBenchArgs) -> usize {
    args.cores.map_or_else(cores, usize::from)
}

/// The machine line of the SERF benchmarks' reports: the machine's cores and, where `--cores` or
/// `--pin-cores-from` narrowed them, the node's.
fn serf_machine_line(args: &SerfBenchArgs) -> String {
    let reserved = if weir_operators::model::pinning::cpus_before_reservation().is_some() {
        "; the node's cores reserved for it, the process's other threads kept off them"
    } else {
        ""
    };
    let pinned = args
        .pin_cores_from
        .map_or_else(|| "no".to_string(), |k| format!("from core {k}{reserved}"));
    format!(
        "machine: {} cores, the model node planned for {} (threads pinned: {pinned})",
        cores(),
        node_cores(args)
    )
}

fn profile(args: ProfileArgs) -> Result<()> {
    use weir::serf::{
        describe, load_for_profiling, profile_node, profile_path, select_nodes, ProfileOptions,
    };
    let graph = load_for_profiling(&args.graph).map_err(|e| match e {
        LoadError::Invalid(d) => anyhow!("{d}"),
        other => anyhow!(other),
    })?;
    for node in select_nodes(&graph.plan, args.node.as_deref())? {
        let options = ProfileOptions {
            cores: args.cores.unwrap_or_else(cores).max(1),
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            spinning: node.spinning,
            pin_cores_from: node.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            round_gap: args.round_gap,
            ..ProfileOptions::default()
        };
        let profile = profile_node(&node.id, &node.path, &options)?;
        let out = profile_path(&args.graph, &node.id);
        profile.save(&out)?;
        print!("{}", describe(&profile)?);
        println!("saved {}\n", out.display());
    }
    Ok(())
}

fn bench_serf_phases(args: &SerfBenchArgs, models: Vec<(String, PathBuf)>) -> Result<()> {
    use weir::bench::serf_phases::{phases_table, plot_phases, serf_phases, PhasesConfig};
    use weir::serf::ProfileOptions;
    let model = models
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no model"))?;
    let config = PhasesConfig {
        model,
        phase_seconds: args.phase_seconds.max(1.0),
        moderate: args.moderate,
        low: args.low,
        rates: args.moderate_rate.zip(args.low_rate),
        fixed: args.fixed.clone(),
        control_threads: args.control_threads,
        also_cap: args.also_max_utilisation,
        calls_dir: args.calls_csv.clone(),
        settle_seconds: 8.0,
        burn_in_seconds: args.burn_in,
        bin_seconds: 2.0,
        runs: args.runs.max(1),
        seed: args.seed,
        profile: ProfileOptions {
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            cores: node_cores(args),
            spinning: args.spinning,
            pin_cores_from: args.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            ..ProfileOptions::default()
        },
    };
    if let Some(dir) = &config.calls_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let load_before = load_average();
    let runs = serf_phases(&config)?;
    let text = format!(
        "ONNX Runtime: {}\n{}; load average (1 min) before / after: {load_before} / {}\nmodel: {} ({}); phases: {}, {} s each; arrivals seeded {} + run; intra-op spinning {}; profile: {} requests per tuple, fresh each run (SERF starts from it)\n{}",
        OrtRuntime::get()?.build_info(),
        serf_machine_line(args),
        load_average(),
        config.model.0,
        config.model.1.display(),
        match config.rates {
            Some((moderate, low)) => format!("moderate {moderate}/s, low {low}/s (given; a planning profile taken once before run 1 chose the fixed set-ups)"),
            None => format!("moderate {} × / low {} × the largest configuration capacity of a planning profile taken once before run 1 (10 × the runs' requests per tuple)", config.moderate, config.low),
        },
        config.phase_seconds,
        config.seed,
        if config.profile.spinning { "on" } else { "off" },
        config.profile.samples,
        phases_table(&runs)
    );
    print!("{text}");
    std::fs::write(&args.phases_table, &text)
        .with_context(|| format!("writing {}", args.phases_table.display()))?;
    println!("\ntable: {}", args.phases_table.display());
    if let Some(last) = runs.last() {
        write_plot(&args.phases_plot, |p| {
            plot_phases(last, config.bin_seconds, p)
        });
    }
    Ok(())
}

/// The 1-minute load average (Linux), to show how busy the shared machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

fn bench_serf(args: SerfBenchArgs) -> Result<()> {
    use weir::bench::serf::{plot_serf, serf_bench, serf_table, SecondProfile, SerfBenchConfig};
    use weir::serf::{describe, ProfileOptions};
    if let (Some(first), Some(node), false) = (
        args.pin_cores_from,
        args.cores.map(usize::from),
        args.share_node_cores,
    ) {
        if node < cores() {
            // Before any runtime or session starts a thread: every later one inherits it.
            let kept = weir_operators::model::pinning::reserve_for_node(first, node)
                .context("reserving the node's cores (--cores with --pin-cores-from)")?;
            eprintln!(
                "CPUs {kept:?} reserved for the model node; the process's other threads run on the rest"
            );
        } else {
            eprintln!("the node's {node} cores are all this process has: none reserved");
        }
    }
    let paths = if args.models.is_empty() {
        // The phases run needs a model whose intra- and inter-request configurations trade
        // places with the load (see `weir::bench::serf_phases`); on 2 cores squeezenet's do not.
        let default = if args.phases {
            "shufflenet"
        } else {
            "squeezenet"
        };
        vec![PathBuf::from(format!(".weir/zoo/{default}.onnx"))]
    } else {
        args.models.clone()
    };
    let models = paths
        .into_iter()
        .map(|p| {
            let name = p
                .file_stem()
                .map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned());
            (name, p)
        })
        .collect();
    if args.phases {
        return bench_serf_phases(&args, models);
    }
    let config = SerfBenchConfig {
        models,
        requests: args.requests,
        min_requests: args.min_requests.max(1),
        point_seconds: args.point_seconds,
        loads: args.loads.max(1),
        headroom: 0.9,
        profile: ProfileOptions {
            samples: args.samples.max(1),
            rounds: args.rounds.max(1),
            cores: node_cores(&args),
            spinning: args.spinning,
            pin_cores_from: args.pin_cores_from,
            measure_in: measured_in(args.bare_sessions),
            ..ProfileOptions::default()
        },
        second_profile: if args.reprofile {
            Some(SecondProfile::BeforeEachConfiguration)
        } else if args.profile_without_queue {
            Some(SecondProfile::WithoutQueue)
        } else {
            args.spread_profile
                .map(|over| SecondProfile::Spread { over })
        },
    };
    let load_before = load_average();
    let results = serf_bench(&config)?;
    let mut text = format!(
        "ONNX Runtime: {}\nmachine load average (1 min) before / after: {load_before} / {}\n{}; requests per point: {} × k/{} (at least {}, at most {} s × λ); profile: {} requests per tuple\n\n",
        OrtRuntime::get()?.build_info(),
        load_average(),
        serf_machine_line(&args),
        config.requests,
        config.loads,
        config.min_requests,
        config.point_seconds,
        config.profile.samples
    );
    for r in &results {
        text.push_str(&describe(&r.profile)?);
        text.push('\n');
        if let Some((
            kind @ (SecondProfile::Spread { .. } | SecondProfile::WithoutQueue),
            seconds,
        )) = &r.second_profiles
        {
            if let Some((_, second)) = seconds.first() {
                text.push_str(&format!("The second profile, {}:\n", kind.describe()));
                text.push_str(&describe(second)?);
                text.push('\n');
            }
        }
    }
    text.push_str(&serf_table(&results));
    print!("{text}");
    std::fs::write(&args.table, &text)
        .with_context(|| format!("writing {}", args.table.display()))?;
    println!("\ntable: {}", args.table.display());
    write_plot(&args.plot, |p| plot_serf(&results, p));
    Ok(())
}

/// The ONNX Runtime build and the core count, the first lines of every benchmark's output.
fn print_machine() -> Result<()> {
    println!("ONNX Runtime: {}", OrtRuntime::get()?.build_info());
    println!(
        "machine: {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    Ok(())
}
