//! The front ends of `weir serve`: HTTP and gRPC over one request-byte budget (TLS on both when
//! asked for, its files reloaded while serving), the metrics listener, the graphs' streaming
//! connectors and offline jobs, served until a signal and then drained.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use weir_connectors::grpc::{GrpcConfig, GrpcServer};
use weir_connectors::http::{AuthToken, ByteBudget, HttpConfig, HttpServer, MetricsServer};
use weir_connectors::models::control::ModelControl;
use weir_connectors::models::ModelTable;
use weir_connectors::offline::{CpuUtilisation, OfflineConfig, OfflineJobs, PauseSignal, Throttle};
use weir_connectors::stream::StreamOptions;
use weir_connectors::tls::{ServerTls, RELOAD_POLL};

use super::modelless::ModelLess;
use super::ServeArgs;
use crate::cli::process::shutdown_signal;
use crate::{GraphRuntime, RunningGraph, StreamConnector};

/// Where `weir serve` listens when it is given no listener and serves no stream.
pub(super) const DEFAULT_HTTP: &str = "127.0.0.1:8000";

/// The servers and streams built over the running graphs, not yet listening.
pub(super) struct FrontEnds {
    http_server: HttpServer,
    grpc_server: GrpcServer,
    /// The HTTP address, when HTTP is served.
    http: Option<String>,
    /// TLS of both listeners, when asked for.
    tls: Option<Arc<ServerTls>>,
    /// The `/metrics` listener's server and address, when asked for.
    metrics: Option<(MetricsServer, String)>,
    streams: Vec<(Arc<GraphRuntime>, StreamConnector)>,
    stream_options: StreamOptions,
    /// The graphs' runtimes, for offline jobs.
    handles: Vec<Arc<GraphRuntime>>,
    modelless: Option<Arc<weir_modelless::ModelLessServer>>,
}

impl FrontEnds {
    /// The HTTP and gRPC servers over the model table (the graphs of `running` and the
    /// repositories' models, loaded and unloaded through `control`) and the model-less front end,
    /// with the process's metrics, and the graphs' streaming connectors.
    pub(super) fn build(
        args: &ServeArgs,
        running: &[RunningGraph],
        models: Arc<ModelTable>,
        control: Option<Arc<dyn ModelControl>>,
        modelless: Option<&ModelLess>,
    ) -> Result<FrontEnds> {
        let token = match (&args.auth_token_file, &args.auth_token) {
            (Some(path), _) => Some(AuthToken::from_file(path)?),
            (None, Some(t)) => Some(AuthToken::new(t)?),
            (None, None) => None,
        };
        let tls = args.ops.tls()?;
        let (traces, trace_metrics) = args.ops.traces()?.unzip();
        let config = HttpConfig {
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            max_body_bytes: args.max_body_bytes,
            max_inflight_bytes: args.max_inflight_bytes,
            header_timeout: Duration::from_millis(args.header_timeout_ms),
            max_connections: args.max_connections,
            drain_timeout: Duration::from_millis(args.drain_timeout_ms),
            auth_token: token,
            health_unauthenticated: args.ops.health_unauthenticated,
            tls: tls.clone(),
            traces: traces.clone(),
        };
        let grpc_config = GrpcConfig {
            request_timeout: config.request_timeout,
            max_message_bytes: args.max_body_bytes,
            auth_token: config.auth_token.clone(),
            stream_in_flight: args.grpc_stream_in_flight as usize,
            max_connections: args.max_connections as usize,
            drain_timeout: config.drain_timeout,
            idle_timeout: config.header_timeout,
            max_inflight_bytes: args.max_inflight_bytes,
            health_unauthenticated: args.ops.health_unauthenticated,
            tls: tls.clone(),
            traces,
            ..Default::default()
        };
        let handles: Vec<Arc<GraphRuntime>> =
            running.iter().map(RunningGraph::runtime_handle).collect();
        // One budget of request bytes for the whole process, both transports charging it.
        let budget = ByteBudget::new(args.max_inflight_bytes);
        // One table of models for both transports: a model's statistics count every request.
        let mut grpc_server =
            GrpcServer::with_models(Arc::clone(&models), grpc_config, Arc::clone(&budget));
        let mut metrics = vec![
            grpc_server.metrics_source(),
            crate::operator_metrics(running),
        ];
        metrics.extend(modelless.map(ModelLess::metrics_source));
        metrics.extend(trace_metrics);
        let mut http_server = HttpServer::with_models(models, config, metrics, budget);
        let sources = args
            .ops
            .metrics_sources(running, &http_server, &grpc_server);
        http_server = http_server.with_metrics(sources);
        let metrics = args
            .ops
            .metrics_addr
            .clone()
            .map(|addr| (http_server.metrics_server(), addr));
        if let Some(m) = modelless {
            http_server = http_server.with_modelless(Arc::clone(&m.front) as _);
            grpc_server = grpc_server.with_modelless(Arc::clone(&m.front) as _);
        }
        if let Some(c) = control {
            http_server = http_server.with_model_control(Arc::clone(&c));
            grpc_server = grpc_server.with_model_control(c);
        }
        // One registry of shared memory regions for both transports, as in Triton.
        let regions = args.ops.shared_memory();
        http_server = http_server.with_shared_memory(Arc::clone(&regions));
        grpc_server = grpc_server.with_shared_memory(regions);
        let streams: Vec<(Arc<GraphRuntime>, StreamConnector)> = running
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
            (None, true) => Some(DEFAULT_HTTP.to_string()),
            (None, false) => None,
        };
        if let Some(feed) = args.ui.feed(
            http.as_deref(),
            running,
            modelless.map(|m| Arc::clone(&m.front)),
        ) {
            http_server = http_server.with_status(feed);
        }
        let stream_options = StreamOptions {
            request_timeout: Duration::from_millis(args.request_timeout_ms),
            max_line_bytes: args.max_line_bytes.unwrap_or(args.max_body_bytes),
            ..Default::default()
        };
        Ok(FrontEnds {
            http_server,
            grpc_server,
            http,
            tls,
            metrics,
            streams,
            stream_options,
            handles,
            modelless: modelless.map(|m| Arc::clone(&m.front)),
        })
    }

    /// Starts the offline jobs and the streams, serves the listeners until SIGTERM or Ctrl-C
    /// (or, with no listener, until every stream ends), then drains the offline jobs and the
    /// streams.
    pub(super) async fn serve_until_stopped(self, args: &ServeArgs) -> Result<()> {
        let FrontEnds {
            http_server,
            grpc_server,
            http,
            tls,
            metrics,
            streams,
            stream_options,
            handles,
            modelless,
        } = self;
        // The machine's utilisation is sampled only for what reads it: model-less load reports
        // and the offline throttle.
        let cpu = (modelless.is_some() || args.offline_dir.is_some())
            .then(|| CpuUtilisation::spawn(Duration::from_secs(1), args.offline_max_utilisation));
        if let (Some(front), Some(cpu)) = (&modelless, &cpu) {
            front.spawn_reports(Arc::clone(cpu));
        }
        let offline = match &args.offline_dir {
            Some(root) => {
                let config = OfflineConfig {
                    root: root.clone(),
                    max_running: args.offline_running as usize,
                    max_jobs: 256,
                    max_in_flight: args.offline_in_flight as usize,
                    stream: stream_options,
                };
                let mut signals: Vec<Arc<dyn PauseSignal>> =
                    cpu.iter().map(|c| Arc::clone(c) as _).collect();
                if let Some(front) = &modelless {
                    signals.push(Arc::clone(front) as _);
                }
                Some(
                    OfflineJobs::new(
                        config,
                        &handles,
                        modelless.as_ref().map(|m| Arc::clone(m) as _),
                        Arc::new(Throttle::new(signals)),
                    )
                    .with_context(|| format!("--offline-dir {}", root.display()))?,
                )
            }
            None => None,
        };
        let http_server = match &offline {
            Some(jobs) => http_server.with_offline(Arc::clone(jobs)),
            None => http_server,
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
        if http.is_some() || args.grpc.is_some() || metrics.is_some() {
            let listeners = Listeners {
                http: http.as_deref(),
                grpc: args.grpc.as_deref(),
                http_server,
                grpc_server,
                metrics,
                tls,
            };
            serve_listeners(listeners, stop_tx.clone()).await?;
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
                    return Ok(());
                }
                _ = shutdown_signal() => {}
            }
        }
        let _ = stop_tx.send(true);
        if let Some(jobs) = &offline {
            jobs.shutdown(Duration::from_millis(args.drain_timeout_ms))
                .await;
        }
        let mut finished = Vec::new();
        while let Some(r) = tasks.join_next().await {
            finished.push(r);
        }
        report_streams(finished);
        Ok(())
    }
}

/// The listeners to serve and what serves them.
struct Listeners<'a> {
    http: Option<&'a str>,
    grpc: Option<&'a str>,
    http_server: HttpServer,
    grpc_server: GrpcServer,
    metrics: Option<(MetricsServer, String)>,
    tls: Option<Arc<ServerTls>>,
}

/// Binds the listeners asked for, prints their addresses (HTTP, gRPC, then metrics; `https` and
/// `grpcs` under TLS), and serves them until SIGTERM or Ctrl-C, which `stop` then passes on to
/// the streams. Under TLS the certificate files are watched meanwhile.
async fn serve_listeners(
    listeners: Listeners<'_>,
    stop: tokio::sync::watch::Sender<bool>,
) -> Result<()> {
    use std::io::Write;
    let Listeners {
        http,
        grpc,
        http_server,
        grpc_server,
        metrics,
        tls,
    } = listeners;
    let http_listener = bind(http).await?;
    let grpc_listener = bind(grpc).await?;
    let (metrics_server, metrics_addr) = metrics.unzip();
    let metrics_listener = bind(metrics_addr.as_deref()).await?;
    let secure = if tls.is_some() { "s" } else { "" };
    if let Some(l) = &http_listener {
        println!("weir serving http{secure}://{}", l.local_addr()?);
    }
    if let Some(l) = &grpc_listener {
        println!("weir serving grpc{secure}://{}", l.local_addr()?);
    }
    if let Some(l) = &metrics_listener {
        println!("weir serving metrics http://{}/metrics", l.local_addr()?);
    }
    std::io::stdout().flush()?;
    let reloader = tls.as_ref().map(|t| t.spawn_reloader(RELOAD_POLL));
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
    let metrics_run = async {
        if let (Some(server), Some(l)) = (metrics_server, metrics_listener) {
            server.serve(l, when_stopped()).await;
        }
        Ok::<(), anyhow::Error>(())
    };
    let result = tokio::try_join!(http_run, grpc_run, metrics_run);
    signal.abort();
    if let Some(r) = reloader {
        r.abort();
    }
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

fn stream_kind(c: &StreamConnector) -> &'static str {
    match c {
        StreamConnector::Jsonl { .. } => "JSON-lines",
        StreamConnector::Zenoh { .. } => "zenoh",
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
