//! `weir serve`: graphs over HTTP and gRPC (the Open Inference Protocol) and their streaming
//! connectors, until SIGTERM or Ctrl-C. One signal drains every listener at once.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use weir_connectors::models::{ModelTable, ModelVersion, Models};

use crate::{RunningGraph, RuntimeOptions};

use super::cluster::ClusterArgs;
use super::files::{load_with, FileArgs};
use super::process::install_zenoh_security;

mod listen;
mod modelless;
mod ops;
mod repository;
mod ui;

/// `weir serve`'s flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Graph YAML files; each is a model named by its graph's `name`.
    #[arg(required_unless_present_any = ["repository", "model_repositories"])]
    graphs: Vec<PathBuf>,
    /// A Triton model repository (`<model>/config.pbtxt`, `<model>/<version>/model.onnx`),
    /// repeatable: every model is served, each version its policy names, with its configuration
    /// auto-completed from the ONNX file as Triton does (see docs/triton.md).
    #[arg(long = "model-repository")]
    model_repositories: Vec<PathBuf>,
    /// How --model-repository models are loaded (Triton's modes): `none` loads all at start and
    /// nothing after; `explicit` loads the --load-model ones, then what the repository API
    /// (`POST /v2/repository/models/{m}/load|unload`) asks for; `poll` loads all, then reloads a
    /// model whose files change, loads a new one and unloads a removed one.
    #[arg(
        long,
        value_enum,
        default_value = "none",
        requires = "model_repositories"
    )]
    model_control_mode: repository::ControlMode,
    /// A model to load at start in `explicit` mode (repeatable; `*` loads all).
    #[arg(long = "load-model", requires = "model_repositories")]
    load_models: Vec<String>,
    /// Seconds between readings of the model repositories in `poll` mode.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    repository_poll_secs: u64,
    /// A model repository (`weir model register`): each of its tasks is served as a model named
    /// after the task, model-less — a request's `parameters` (`latency_ms`, `min_accuracy`,
    /// `max_cost`, or `variant`) pick the variant, loaded on first use.
    #[arg(long)]
    repository: Option<PathBuf>,
    /// A `weir executor --repository` process the model-less front end may load variants on, and
    /// its executor type (a variant's hardware), as NAME=HARDWARE (repeatable). Reached over
    /// zenoh through --zenoh-connect / --zenoh-listen; load commands are signed with --control-key-file.
    #[arg(long = "executor", value_parser = crate::modelless::remote::ExecutorSlot::parse, requires = "repository")]
    executors: Vec<crate::modelless::remote::ExecutorSlot>,
    /// Autoscale the model-less front end (INFaaS §4.2) as this YAML file says: `autoscale:`
    /// (thresholds and intervals, the paper's defaults) and `launch:` (per executor type, the
    /// command that starts an executor, `{name}` and `{hardware}` filled in; started executors
    /// connect to --zenoh-listen). See docs/model-less-executors.md.
    #[arg(long, requires = "repository")]
    autoscale: Option<PathBuf>,
    /// Load a variant before serving, as VARIANT=WORKER (WORKER: `local`, or an --executor's
    /// NAME; repeatable): a fixed pool of instances, as Triton's `--load-model` gives. Serving
    /// starts once every one has loaded; one that fails stops the start.
    #[arg(long = "preload", value_parser = parse_preload, requires = "repository")]
    preload: Vec<(String, String)>,
    /// HTTP address to listen on (port 0 picks a free one; the bound address is printed). Default
    /// 127.0.0.1:8000, unless the graphs declare `streams:` or --grpc is given (then no HTTP
    /// unless asked for).
    #[arg(long, env = "WEIR_HTTP")]
    http: Option<String>,
    /// gRPC address to listen on (KServe v2 `inference.GRPCInferenceService` and
    /// `grpc.health.v1`), beside or instead of HTTP; port 0 picks a free one, printed after the
    /// HTTP address. Messages are capped at --max-body-bytes both ways.
    #[arg(long, env = "WEIR_GRPC")]
    grpc: Option<String>,
    /// Requests running at once on one gRPC ModelStreamInfer stream; the next is read off the
    /// stream when one is answered.
    #[arg(long, default_value_t = 64, env = "WEIR_GRPC_STREAM_IN_FLIGHT",
          value_parser = clap::value_parser!(u32).range(1..))]
    grpc_stream_in_flight: u32,
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
    /// Request bytes held by all requests at once, over HTTP and gRPC together (one budget); past
    /// it new HTTP requests get 503 with Retry-After and gRPC messages RESOURCE_EXHAUSTED with
    /// retry-after. A gRPC message is charged twice its length plus what it decodes into. At
    /// least --max-body-bytes.
    #[arg(long, default_value_t = 1 << 30, env = "WEIR_MAX_INFLIGHT_BYTES")]
    max_inflight_bytes: usize,
    /// Longest a client may take to send a request's headers, in milliseconds, counted from when
    /// the connection is ready for a request (so an idle kept-alive connection is closed after it
    /// too); then its connection is closed. A gRPC connection from which nothing arrives for as
    /// long is closed (the server pings each at half of it, so live clients answer and stay).
    #[arg(long, default_value_t = 10_000, env = "WEIR_HEADER_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout_ms: u64,
    /// HTTP connections open at once; past it a connection gets 503 with Retry-After and is
    /// closed. The gRPC listener holds as many of its own, closing one past them on accept. Keep
    /// it below the file-descriptor limit (`ulimit -n`).
    #[arg(long, default_value_t = 1024, env = "WEIR_MAX_CONNECTIONS",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// On SIGTERM, longest to wait in milliseconds for requests in flight before closing their
    /// connections; requests already in a graph are still answered by its shutdown.
    #[arg(long, default_value_t = 30_000, env = "WEIR_DRAIN_TIMEOUT_MS")]
    drain_timeout_ms: u64,
    /// File holding a bearer token every endpoint but liveness requires (readiness too, unless
    /// --health-unauthenticated; keep it mode 0600: a file readable by group or others is warned
    /// about).
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
    /// Folder offline jobs (`POST /v2/offline`) read their inputs from and write their outputs to;
    /// without it offline jobs are off.
    #[arg(long, env = "WEIR_OFFLINE_DIR")]
    offline_dir: Option<PathBuf>,
    /// Offline jobs pause while the machine's CPU utilisation is above this fraction (INFaaS's
    /// 40 %).
    #[arg(long, default_value_t = 0.4, env = "WEIR_OFFLINE_MAX_UTILISATION")]
    offline_max_utilisation: f64,
    /// Offline jobs running at once; later ones queue.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    offline_running: u32,
    /// Requests of one offline job in flight at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    offline_in_flight: u32,
    #[command(flatten)]
    files: FileArgs,
    #[command(flatten)]
    ops: ops::OperateArgs,
    #[command(flatten)]
    ui: ui::UiArgs,
}

impl ServeArgs {
    /// Whether the access log is on (`--no-access-log` turns it off).
    pub(crate) fn access_log(&self) -> bool {
        !self.ops.no_access_log
    }
}

/// Longest a `--preload` may take, executors' start included.
const PRELOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Reads `VARIANT=WORKER`.
fn parse_preload(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((v, w)) if !v.is_empty() && !w.is_empty() => Ok((v.to_string(), w.to_string())),
        _ => Err(format!("`{text}`: expected VARIANT=WORKER")),
    }
}

/// Runs `weir serve` until a signal stops it: check the flags, start the graphs, start the
/// model-less front end (and its autoscaler and preloads), build the front ends over both, serve
/// until a signal, then stop what was started in reverse order.
///
/// # Errors
/// When a flag is inconsistent, a graph or the repository cannot be served, or a listener
/// cannot bind.
pub fn run(args: ServeArgs) -> Result<()> {
    install_zenoh_security(
        args.zenoh_config.as_deref(),
        args.control_key_file.as_deref(),
    )?;
    check_limits(&args)?;
    let running = start_graphs(&args)?;
    // One table of models for every transport, built before what fills and serves it.
    let table = Arc::new(ModelTable::new(graph_models(&running)));
    let repositories = start_repositories(&args, &running, &table)?;
    let poller = match (&repositories, args.model_control_mode) {
        (Some(r), repository::ControlMode::Poll) => Some(repository::Poller::start(Arc::clone(r))?),
        _ => None,
    };
    let autoscale = args
        .autoscale
        .as_deref()
        .map(crate::modelless::scaling::AutoscaleFile::read)
        .transpose()?;
    // Built before the model-less front end, which the autoscaler's loads run on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let modelless = modelless::start(&args, &running, autoscale.as_ref(), rt.handle())?;
    let control = repositories
        .clone()
        .map(|r| r as Arc<dyn weir_connectors::models::control::ModelControl>);
    let front_ends = listen::FrontEnds::build(&args, &running, table, control, modelless.as_ref())?;
    rt.block_on(front_ends.serve_until_stopped(&args))?;
    // The autoscaler and the poller stop before what they act on.
    drop(modelless);
    drop(poller);
    if let Some(r) = repositories {
        r.shutdown();
    }
    for graph in running {
        graph.shutdown();
    }
    eprintln!("weir stopped");
    Ok(())
}

/// Each graph as version 1 of the model named by it.
fn graph_models(running: &[RunningGraph]) -> Models {
    let mut models = Models::default();
    for r in running {
        let mut version = ModelVersion::of_graph(r.runtime_handle());
        version.execution = Some(r.execution_stats());
        models.insert(&r.runtime().plan().name, version);
    }
    models
}

/// The model repositories, their start-up loads made, when any is served.
fn start_repositories(
    args: &ServeArgs,
    running: &[RunningGraph],
    table: &Arc<ModelTable>,
) -> Result<Option<Arc<repository::Repositories>>> {
    if args.model_repositories.is_empty() {
        return Ok(None);
    }
    if !args.load_models.is_empty() && args.model_control_mode != repository::ControlMode::Explicit
    {
        bail!(
            "--load-model is for --model-control-mode explicit (the other modes load every model)"
        );
    }
    let settings = repository::Settings {
        roots: args.model_repositories.clone(),
        mode: args.model_control_mode,
        load: args.load_models.clone(),
        poll_interval: std::time::Duration::from_secs(args.repository_poll_secs),
        drain: std::time::Duration::from_millis(args.drain_timeout_ms),
        options: runtime_options(args),
        reserved: running
            .iter()
            .map(|r| r.runtime().plan().name.clone())
            .collect(),
    };
    repository::Repositories::start(settings, Arc::clone(table)).map(Some)
}

/// Refuses limits that contradict each other.
fn check_limits(args: &ServeArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&args.offline_max_utilisation) {
        bail!(
            "--offline-max-utilisation ({}) must be between 0 and 1",
            args.offline_max_utilisation
        );
    }
    if args.max_inflight_bytes < args.max_body_bytes {
        bail!(
            "--max-inflight-bytes ({}) is below --max-body-bytes ({}): bodies between the two would be refused forever",
            args.max_inflight_bytes,
            args.max_body_bytes
        );
    }
    Ok(())
}

/// The dataflow options every graph (and every model-less variant's graph) runs with.
fn runtime_options(args: &ServeArgs) -> RuntimeOptions {
    RuntimeOptions {
        workers: args.workers,
        max_in_flight: args.max_in_flight,
        path_every: args.ui.path_every(args.http.as_deref()),
        ..RuntimeOptions::default()
    }
}

/// Loads and starts every graph file, refusing two graphs of one name.
fn start_graphs(args: &ServeArgs) -> Result<Vec<RunningGraph>> {
    let mut running: Vec<RunningGraph> = Vec::new();
    for path in &args.graphs {
        let graph = load_with(
            path,
            &args.files,
            args.repository.as_deref(),
            &args.model_repositories,
        )?;
        if graph.warnings.warnings().count() > 0 {
            eprintln!("{}", graph.warnings);
        }
        let name = graph.plan.name.clone();
        if running.iter().any(|r| r.runtime().plan().name == name) {
            bail!(
                "{}: a graph named `{name}` is already served",
                path.display()
            );
        }
        let distributed = crate::DistributedOptions {
            listen: args.zenoh_listen.clone(),
            connect: args.zenoh_connect.clone(),
            cluster: args.cluster.options()?,
        };
        let started = crate::TopologyBuilder::new(graph.plan)
            .options(runtime_options(args))
            .distributed(distributed)
            .build()
            .with_context(|| format!("starting graph `{name}` from {}", path.display()))?;
        running.push(started);
    }
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::parse_preload;

    #[test]
    fn a_preload_names_a_variant_and_a_worker() {
        assert_eq!(
            parse_preload("m.fp32-all-t1-b1-cpu=exec-a"),
            Ok(("m.fp32-all-t1-b1-cpu".to_string(), "exec-a".to_string()))
        );
        for bad in ["m", "=w", "m=", ""] {
            assert!(parse_preload(bad).is_err(), "{bad}");
        }
    }
}
