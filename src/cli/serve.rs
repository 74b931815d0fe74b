//! `weir serve`: graphs over HTTP and gRPC (the Open Inference Protocol) and their streaming
//! connectors, until SIGTERM or Ctrl-C. One signal drains every listener at once.

use std::path::PathBuf;
use std::sync::Arc;

use crate::RuntimeOptions;
use anyhow::{bail, Context, Result};
use clap::Args;

use super::cluster::ClusterArgs;
use super::files::{load_with, FileArgs};
use super::process::{install_zenoh_security, shutdown_signal};

/// `weir serve`'s flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Graph YAML files; each is a model named by its graph's `name`.
    #[arg(required_unless_present = "repository")]
    graphs: Vec<PathBuf>,
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

/// Runs `weir serve` until a signal stops it.
///
/// # Errors
/// When a flag is inconsistent, a graph or the repository cannot be served, or a listener
/// cannot bind.
pub fn run(args: ServeArgs) -> Result<()> {
    install_zenoh_security(
        args.zenoh_config.as_deref(),
        args.control_key_file.as_deref(),
    )?;
    let token = match (&args.auth_token_file, &args.auth_token) {
        (Some(path), _) => Some(weir_connectors::http::AuthToken::from_file(path)?),
        (None, Some(t)) => Some(weir_connectors::http::AuthToken::new(t)?),
        (None, None) => None,
    };
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
    let mut running = Vec::new();
    for path in &args.graphs {
        let graph = load_with(path, &args.files, args.repository.as_deref())?;
        if graph.warnings.warnings().count() > 0 {
            eprintln!("{}", graph.warnings);
        }
        let name = graph.plan.name.clone();
        if running
            .iter()
            .any(|r: &crate::RunningGraph| r.runtime().plan().name == name)
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
        let distributed = crate::DistributedOptions {
            listen: args.zenoh_listen.clone(),
            connect: args.zenoh_connect.clone(),
            cluster: args.cluster.options()?,
        };
        running.push(
            crate::start_distributed(graph.plan, options, &distributed)
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
    let handles: Vec<Arc<crate::GraphRuntime>> = running
        .iter()
        .map(crate::RunningGraph::runtime_handle)
        .collect();
    let grpc_config = weir_connectors::grpc::GrpcConfig {
        request_timeout: config.request_timeout,
        max_message_bytes: args.max_body_bytes,
        auth_token: config.auth_token.clone(),
        stream_in_flight: args.grpc_stream_in_flight as usize,
        max_connections: args.max_connections as usize,
        drain_timeout: config.drain_timeout,
        idle_timeout: config.header_timeout,
        max_inflight_bytes: args.max_inflight_bytes,
        ..Default::default()
    };
    // One budget of request bytes for the whole process, both transports charging it.
    let budget = weir_connectors::http::ByteBudget::new(args.max_inflight_bytes);
    let grpc_server = weir_connectors::grpc::GrpcServer::with_byte_budget(
        handles.clone(),
        grpc_config,
        Arc::clone(&budget),
    );
    let offline_handles = handles.clone();
    let autoscale = args
        .autoscale
        .as_deref()
        .map(crate::modelless::scaling::AutoscaleFile::read)
        .transpose()?;
    // Built before the front ends, which the autoscaler's loads run on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let modelless = match &args.repository {
        Some(dir) => {
            let options = RuntimeOptions {
                workers: args.workers,
                max_in_flight: args.max_in_flight,
                ..RuntimeOptions::default()
            };
            let remote = crate::modelless::remote::RemoteOptions {
                executors: args.executors.clone(),
                listen: args.zenoh_listen.clone(),
                connect: args.zenoh_connect.clone(),
                control_key: crate::hams::control_auth::key().map(<[u8]>::to_vec),
                launchable: autoscale
                    .iter()
                    .flat_map(|f| f.launch.keys().cloned())
                    .collect(),
            };
            let front = crate::modelless::ModelLessServer::start(dir, options, &remote)?;
            let tasks: Vec<&str> = front.tasks().collect();
            if tasks.is_empty() {
                bail!(
                    "{}: no task has a variant this process can serve",
                    dir.display()
                );
            }
            for task in &tasks {
                if running.iter().any(|r| r.runtime().plan().name == *task) {
                    bail!("task `{task}` has the name of a graph served too");
                }
            }
            eprintln!("weir serving model-less tasks: {}", tasks.join(", "));
            Some(front)
        }
        None => None,
    };
    let mut metrics = vec![
        grpc_server.metrics_source(),
        crate::operator_metrics(&running),
    ];
    let autoscaler = match (&modelless, &autoscale) {
        (Some(front), Some(file)) => Some(front.autoscale(file, rt.handle().clone())?),
        _ => None,
    };
    if let Some(front) = &modelless {
        metrics.push(front.metrics_source(autoscaler.as_ref().map(|a| a.metrics())));
        for (variant, worker) in &args.preload {
            let id = match worker.as_str() {
                crate::modelless::LOCAL_WORKER => worker.clone(),
                name => args
                    .executors
                    .iter()
                    .find(|e| e.name == name)
                    .map(crate::modelless::remote::ExecutorSlot::prefix)
                    .with_context(|| {
                        format!("--preload {variant}={worker}: no --executor named `{worker}`")
                    })?,
            };
            rt.block_on(front.preload_when_up(variant, &id, PRELOAD_TIMEOUT))
                .map_err(|e| anyhow::anyhow!("--preload {variant}={worker}: {e}"))?;
        }
    }
    let server =
        weir_connectors::http::HttpServer::with_byte_budget(handles, config, metrics, budget);
    let (server, grpc_server) = match &modelless {
        Some(front) => (
            server.with_modelless(Arc::clone(front) as _),
            grpc_server.with_modelless(Arc::clone(front) as _),
        ),
        None => (server, grpc_server),
    };
    let streams: Vec<(Arc<crate::GraphRuntime>, crate::StreamConnector)> = running
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
    let http = match (&args.http, streams.is_empty() && args.grpc.is_none()) {
        (Some(addr), _) => Some(addr.clone()),
        (None, true) => Some("127.0.0.1:8000".to_string()),
        (None, false) => None,
    };
    let stream_options = weir_connectors::stream::StreamOptions {
        request_timeout: std::time::Duration::from_millis(args.request_timeout_ms),
        max_line_bytes: args.max_line_bytes.unwrap_or(args.max_body_bytes),
        ..Default::default()
    };
    rt.block_on(async {
        // The machine's utilisation is sampled only for what reads it: model-less load reports
        // and the offline throttle.
        let cpu = (modelless.is_some() || args.offline_dir.is_some()).then(|| {
            weir_connectors::offline::CpuUtilisation::spawn(
                std::time::Duration::from_secs(1),
                args.offline_max_utilisation,
            )
        });
        if let (Some(front), Some(cpu)) = (&modelless, &cpu) {
            front.spawn_reports(Arc::clone(cpu));
        }
        let offline = match &args.offline_dir {
            Some(root) => {
                let config = weir_connectors::offline::OfflineConfig {
                    root: root.clone(),
                    max_running: args.offline_running as usize,
                    max_jobs: 256,
                    max_in_flight: args.offline_in_flight as usize,
                    stream: stream_options,
                };
                let mut signals: Vec<Arc<dyn weir_connectors::offline::PauseSignal>> =
                    cpu.iter().map(|c| Arc::clone(c) as _).collect();
                if let Some(front) = &modelless {
                    signals.push(Arc::clone(front) as _);
                }
                let throttle = weir_connectors::offline::Throttle::new(signals);
                Some(
                    weir_connectors::offline::OfflineJobs::new(
                        config,
                        &offline_handles,
                        modelless.as_ref().map(|m| Arc::clone(m) as _),
                        Arc::new(throttle),
                    )
                    .with_context(|| format!("--offline-dir {}", root.display()))?,
                )
            }
            None => None,
        };
        let server = match &offline {
            Some(jobs) => server.with_offline(Arc::clone(jobs)),
            None => server,
        };
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
        if http.is_some() || args.grpc.is_some() {
            serve_listeners(
                http.as_deref(),
                args.grpc.as_deref(),
                server,
                grpc_server,
                stop_tx.clone(),
            )
            .await?;
        } else {
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
        let _ = stop_tx.send(true);
        if let Some(jobs) = &offline {
            jobs.shutdown(std::time::Duration::from_millis(args.drain_timeout_ms))
                .await;
        }
        let mut finished = Vec::new();
        while let Some(r) = tasks.join_next().await {
            finished.push(r);
        }
        report_streams(finished);
        anyhow::Ok(())
    })?;
    // The autoscaler stops before what it acts on.
    drop(autoscaler);
    for graph in running {
        graph.shutdown();
    }
    eprintln!("weir stopped");
    Ok(())
}

/// Binds the HTTP and gRPC listeners asked for, prints their addresses (HTTP first), and serves
/// both until SIGTERM or Ctrl-C, which `stop` then passes on to the streams.
async fn serve_listeners(
    http: Option<&str>,
    grpc: Option<&str>,
    http_server: weir_connectors::http::HttpServer,
    grpc_server: weir_connectors::grpc::GrpcServer,
    stop: tokio::sync::watch::Sender<bool>,
) -> Result<()> {
    use std::io::Write;
    let http_listener = bind(http).await?;
    let grpc_listener = bind(grpc).await?;
    if let Some(l) = &http_listener {
        println!("weir serving http://{}", l.local_addr()?);
    }
    if let Some(l) = &grpc_listener {
        println!("weir serving grpc://{}", l.local_addr()?);
    }
    std::io::stdout().flush()?;
    let stopped = stop.subscribe();
    let signal = tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let when_stopped = move || {
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    };
    let http_run = async {
        match http_listener {
            Some(l) => http_server
                .serve(l, when_stopped())
                .await
                .map_err(anyhow::Error::from),
            None => Ok(()),
        }
    };
    let grpc_run = async {
        match grpc_listener {
            Some(l) => grpc_server
                .serve(l, when_stopped())
                .await
                .map_err(anyhow::Error::from),
            None => Ok(()),
        }
    };
    let result = tokio::try_join!(http_run, grpc_run);
    signal.abort();
    result.map(|_| ())
}

/// A listener on `addr`, when one is asked for.
async fn bind(addr: Option<&str>) -> Result<Option<tokio::net::TcpListener>> {
    match addr {
        Some(a) => tokio::net::TcpListener::bind(a)
            .await
            .map(Some)
            .with_context(|| format!("binding {a}")),
        None => Ok(None),
    }
}

type StreamOutcome = (
    String,
    Result<weir_connectors::stream::StreamReport, weir_connectors::stream::StreamError>,
);

fn stream_kind(c: &crate::StreamConnector) -> &'static str {
    match c {
        crate::StreamConnector::Jsonl { .. } => "JSON-lines",
        crate::StreamConnector::Zenoh { .. } => "zenoh",
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
