//! The flags of `weir serve` that a platform team sets rather than a model's author: TLS on both
//! listeners, the metrics listener and its compatibility names, probes without the token, the
//! access log, shared memory for clients on the host; and what they build (the TLS
//! configuration, the process's and Triton's metrics sources, the shared memory registry).
//! docs/deployment.md is the guide to them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use weir_connectors::grpc::GrpcServer;
use weir_connectors::http::triton_metrics::{triton_source, NodeTotals, TritonModel};
use weir_connectors::http::{HttpServer, MetricsSource};
use weir_connectors::oip::Traces;
use weir_connectors::shared_memory::SharedMemory;
use weir_connectors::tls::{ServerTls, TlsFiles};
use weir_engine::trace::Sampler;

use crate::RunningGraph;

/// Metric names added beside weir's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum MetricsCompat {
    /// Triton's `nv_inference_*` families, labelled by model and version.
    Triton,
}

/// Kinds of shared memory a client may hand tensors over in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SharedMemoryKind {
    /// POSIX shared memory objects (Triton's system shared memory extension).
    System,
}

/// The operational flags (see the module docs).
#[derive(Debug, Args)]
pub(crate) struct OperateArgs {
    /// PEM certificate chain (leaf first) both listeners serve TLS with; with --tls-key. Re-read
    /// on SIGHUP and when the files change (checked every 2 s), for new connections only; a
    /// reload that fails keeps the certificate in use and logs an error.
    #[arg(long, env = "WEIR_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (PKCS#8, RSA or EC).
    #[arg(long, env = "WEIR_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: clients must present a certificate that chains to one of them
    /// (mutual TLS); others are refused in the handshake. Reloaded with --tls-cert.
    #[arg(long, env = "WEIR_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Address of a listener serving `/metrics` alone, without the bearer token and in
    /// plaintext (bind it where only the scraper reaches); port 0 picks a free one, printed
    /// after the HTTP and gRPC addresses.
    #[arg(long, env = "WEIR_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Leave readiness (HTTP `/v2/health/ready`, gRPC `ServerReady`) open when a token is set,
    /// for probes that hold none. Liveness and `grpc.health.v1` are always open; by default
    /// readiness needs the token.
    #[arg(long)]
    pub health_unauthenticated: bool,
    /// Also write another server's metric names in `/metrics`: `triton` adds Triton's
    /// `nv_inference_*` families (labels model, version).
    #[arg(long, value_enum, env = "WEIR_METRICS_COMPAT")]
    pub metrics_compat: Option<MetricsCompat>,
    /// Turn off the access log (one `weir::access` event per HTTP request and gRPC call, on by
    /// default at info).
    #[arg(long)]
    pub no_access_log: bool,
    /// OTLP/gRPC collector (`http://host:4317`) to export traces to: infer requests over HTTP
    /// and gRPC read the client's W3C `traceparent` and answer with their own, and sampled
    /// requests' spans (one per node they visit, from their lineage) are exported in batches.
    /// A collector that is down costs dropped spans (counted in
    /// `weir_trace_spans_dropped_total`), never a slower request. Off without it.
    #[arg(long, env = "WEIR_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Share of new traces sampled (0 to 1), for requests without a `traceparent` (or with a
    /// malformed one); a client's `sampled` flag is always followed (OpenTelemetry's
    /// ParentBased(TraceIdRatioBased)). Needs --otlp-endpoint.
    #[arg(long, env = "WEIR_TRACE_SAMPLING", default_value_t = 0.0, requires = "otlp_endpoint", value_parser = parse_ratio)]
    pub trace_sampling: f64,
    /// Serve Triton's shared memory extension: `system` lets clients on this host register
    /// POSIX shared memory objects (over loopback only) and name them for inputs and outputs
    /// instead of sending the tensors (HTTP `/v2/systemsharedmemory/…`, gRPC
    /// `SystemSharedMemory*`). Off by default: a registered region lets a client have the server
    /// read and write that object; behind a proxy on the same host every client arrives over
    /// loopback, so leave it off there. See docs/triton.md.
    #[arg(long, value_enum, env = "WEIR_SHARED_MEMORY")]
    pub shared_memory: Option<SharedMemoryKind>,
}

/// A sampling ratio: a number from 0 to 1.
fn parse_ratio(text: &str) -> std::result::Result<f64, String> {
    let r: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=1.0).contains(&r) {
        Ok(r)
    } else {
        Err(format!("{r} is not between 0 and 1"))
    }
}

impl OperateArgs {
    /// The shared memory registry both servers share: serving the extension when asked for,
    /// refusing every registration when not.
    pub(crate) fn shared_memory(&self) -> Arc<SharedMemory> {
        match self.shared_memory {
            Some(SharedMemoryKind::System) => SharedMemory::system(),
            None => SharedMemory::off(),
        }
    }

    /// The TLS configuration asked for, read and checked.
    pub(crate) fn tls(&self) -> Result<Option<Arc<ServerTls>>> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let files = TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            client_ca: self.tls_client_ca.clone(),
        };
        ServerTls::load(files)
            .map(Some)
            .context("--tls-cert / --tls-key / --tls-client-ca")
    }

    /// The tracing asked for (`--otlp-endpoint`), its exporter started, and the exporter's
    /// metrics source.
    pub(crate) fn traces(&self) -> Result<Option<(Traces, MetricsSource)>> {
        let Some(endpoint) = &self.otlp_endpoint else {
            return Ok(None);
        };
        let sink = weir_otel::OtlpSink::start(endpoint, "weir")?;
        let metrics = weir_connectors::http::metrics::source(sink.metrics());
        let traces = Traces {
            sampler: Sampler::new(self.trace_sampling),
            sink,
        };
        Ok(Some((traces, metrics)))
    }

    /// The metrics sources these flags add: the process's, and Triton's names when asked for
    /// (over the graphs `running`, counting both servers' requests).
    pub(crate) fn metrics_sources(
        &self,
        running: &[RunningGraph],
        http: &HttpServer,
        grpc: &GrpcServer,
    ) -> Vec<MetricsSource> {
        let mut sources = vec![weir_connectors::process_metrics::process_source()];
        if self.metrics_compat == Some(MetricsCompat::Triton) {
            sources.push(triton(running, http, grpc));
        }
        sources
    }
}

/// Triton's families over `running`, from both servers' request metrics and each graph's
/// executors.
fn triton(running: &[RunningGraph], http: &HttpServer, grpc: &GrpcServer) -> MetricsSource {
    let requests = [http.graph_metrics(), grpc.graph_metrics()];
    let models = running
        .iter()
        .map(|graph| {
            let name = graph.runtime().plan().name.clone();
            let metrics = requests.iter().map(|r| r.of(&name)).collect();
            let stats = graph.executor_stats_reader();
            TritonModel {
                name,
                requests: metrics,
                runtime: graph.runtime_handle(),
                nodes: Box::new(move || {
                    stats()
                        .into_iter()
                        .map(|(_, s)| NodeTotals {
                            runs: s.runs,
                            jobs: s.jobs_answered,
                            busy: s.busy,
                            sojourn: s.sojourn,
                        })
                        .collect()
                }),
            }
        })
        .collect();
    triton_source(models)
}
