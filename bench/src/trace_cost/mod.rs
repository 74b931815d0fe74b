//! The tracing experiment: what OpenTelemetry tracing costs `weir serve`'s HTTP path. One graph
//! (squeezenet) and four in-process HTTP servers over it on loopback, which differ only in their
//! tracing: off (no `--otlp-endpoint`), and exporting over OTLP/gRPC at a sampling ratio of 0,
//! 0.01 and 1 (`--trace-sampling`). Clients send no `traceparent`, so each request starts a new
//! trace and the ratio alone decides what is sampled. The spans go to a collector inside the
//! benchmark ([`receiver`]), which decodes each export and counts its spans, so the table shows
//! the work was really done: spans received per request, and spans the exporter dropped.
//!
//! Each repeat measures the four servers back to back at each client concurrency, through the
//! TLS experiment's closed loop (keep-alive connections opened before the clock starts), the
//! order reversed on every other repeat; the table gives medians over repeats, the spread
//! (min–max), and each traced server against tracing off as the median of the per-repeat ratios.

mod plot;
mod receiver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use weir_connectors::http::{HttpConfig, HttpServer};
use weir_connectors::oip::Traces;
use weir_engine::trace::{Sampler, SpanSink};
use weir_otel::OtlpSink;

pub use plot::plot_tracing;

use crate::client::{closed_loop, connect, prepare, Measured, Until};
use crate::http::{layout_for, LocalServer};
use crate::overhead::{first_input, model_input, spread, weir_graph, IMAGE};
use receiver::Receiver;

/// Settings of the tracing experiment.
#[derive(Debug, Clone)]
pub struct TracingBenchConfig {
    /// The model (display name, file).
    pub model: (String, std::path::PathBuf),
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// Requests per measurement.
    pub requests: usize,
    /// Repetitions.
    pub repeats: usize,
}

/// The sampling ratios measured beside tracing off.
pub const RATIOS: [f64; 3] = [0.0, 0.01, 1.0];

/// How one server traces: off, or exporting at a sampling ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Setting {
    /// No exporter: requests are neither decided nor answered with a `traceparent`.
    Off,
    /// Exporting over OTLP, new traces sampled at this ratio.
    Sampled(f64),
}

impl Setting {
    /// The setting's name in the table and the plot.
    pub fn label(self) -> String {
        match self {
            Setting::Off => "off".into(),
            Setting::Sampled(r) => format!("{} %", r * 100.0),
        }
    }
}

/// One server's figures at one concurrency.
#[derive(Debug, Clone)]
pub struct Column {
    /// How it traced.
    pub setting: Setting,
    /// Per repeat.
    pub measured: Vec<Measured>,
    /// Requests it answered in all (warm-up included).
    pub requests: u64,
    /// Spans the collector received from it.
    pub spans_received: u64,
    /// Spans its exporter dropped (queue full, or an export the collector did not take).
    pub spans_dropped: u64,
}

impl Column {
    /// Spans received per request answered.
    pub fn spans_per_request(&self) -> f64 {
        self.spans_received as f64 / self.requests.max(1) as f64
    }
}

/// One concurrency: tracing off first, then each ratio of [`RATIOS`].
#[derive(Debug, Clone)]
pub struct TracingRow {
    /// Client concurrency.
    pub concurrency: usize,
    /// Off, then the ratios.
    pub columns: Vec<Column>,
}

/// One server under test: its tracing, address and exporter.
struct Traced {
    setting: Setting,
    server: LocalServer,
    sink: Option<Arc<OtlpSink>>,
    service: String,
}

/// A server over `graph` tracing as `setting`, exporting to `collector` as `service`.
fn traced_server(
    graph: &weir::RunningGraph,
    setting: Setting,
    collector: &Receiver,
    service: String,
) -> Result<Traced> {
    let sink = match setting {
        Setting::Off => None,
        Setting::Sampled(_) => Some(OtlpSink::start(&collector.url, &service)?),
    };
    let traces = match (setting, &sink) {
        (Setting::Sampled(ratio), Some(sink)) => Some(Traces {
            sampler: Sampler::new(ratio),
            sink: Arc::clone(sink) as Arc<dyn SpanSink>,
        }),
        _ => None,
    };
    let config = HttpConfig {
        traces,
        ..HttpConfig::default()
    };
    let http = HttpServer::new(vec![graph.runtime_handle()], config, Vec::new());
    let server = LocalServer::spawn(move |listener, stopped| async move {
        let _ = http.serve(listener, stopped).await;
    })?;
    Ok(Traced {
        setting,
        server,
        sink,
        service,
    })
}

/// Waits until every exporter has handed on what it queued: its counts (and the collector's)
/// stop moving for a few flush intervals.
fn drain(servers: &[Traced], collector: &Receiver) {
    let snapshot = || -> Vec<(u64, u64, u64)> {
        servers
            .iter()
            .filter_map(|t| {
                let sink = t.sink.as_ref()?;
                Some((sink.exported(), sink.dropped(), collector.spans(&t.service)))
            })
            .collect()
    };
    let settle = weir_otel::FLUSH_INTERVAL * 3;
    let give_up = Instant::now() + weir_otel::EXPORT_TIMEOUT * 2;
    let mut last = snapshot();
    let mut since = Instant::now();
    while Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
        let now = snapshot();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= settle {
            return;
        }
    }
}

/// Runs the tracing experiment.
///
/// # Errors
/// When the model, the collector, a server or a run fails (any answer but 200).
pub fn tracing(config: &TracingBenchConfig) -> Result<Vec<TracingRow>> {
    let (_, path) = &config.model;
    let (input, output) =
        model_input(path).with_context(|| format!("reading {}", path.display()))?;
    let collector = Receiver::start()?;
    let settings: Vec<Setting> = std::iter::once(Setting::Off)
        .chain(RATIOS.iter().map(|&r| Setting::Sampled(r)))
        .collect();
    let mut rows = Vec::new();
    for &c in &config.concurrency {
        let (graph, workload) = weir_graph(path, &input, &output, &IMAGE, layout_for(c))?;
        let data = first_input(&workload);
        let servers = settings
            .iter()
            .map(|&s| traced_server(&graph, s, &collector, format!("weir-c{c}-{}", s.label())))
            .collect::<Result<Vec<_>>>()?;
        let requests: Vec<_> = servers
            .iter()
            .map(|t| prepare(&t.server.addr, "overhead", &IMAGE, &data, true))
            .collect();
        let clients = |t: &Traced| connect(&t.server.addr, c);
        let warm = 4;
        let per_client = config.requests.div_ceil(c);
        let mut measured: Vec<Vec<Measured>> = vec![Vec::new(); servers.len()];
        // Warm every server (sessions, allocations, the exporters' connections).
        for (t, request) in servers.iter().zip(&requests) {
            closed_loop(
                clients(t)?,
                std::slice::from_ref(request),
                Until::Requests(warm),
            )?;
        }
        for r in 0..config.repeats {
            eprintln!("c={c}: repeat {}/{}", r + 1, config.repeats);
            let mut order: Vec<usize> = (0..servers.len()).collect();
            if r % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let pool = clients(&servers[i])?;
                let request = std::slice::from_ref(&requests[i]);
                measured[i].push(closed_loop(pool, request, Until::Requests(per_client))?);
            }
        }
        drain(&servers, &collector);
        let answered = ((warm + config.repeats * per_client) * c) as u64;
        let columns = servers
            .iter()
            .zip(measured)
            .map(|(t, measured)| Column {
                setting: t.setting,
                measured,
                requests: answered,
                spans_received: collector.spans(&t.service),
                spans_dropped: t.sink.as_ref().map_or(0, |s| s.dropped()),
            })
            .collect::<Vec<_>>();
        if let Some(col) = columns
            .iter()
            .find(|col| col.setting == Setting::Sampled(1.0) && col.spans_received == 0)
        {
            bail!(
                "sampling {} exported no span: the collector received nothing",
                col.setting.label()
            );
        }
        drop(servers);
        graph.shutdown();
        rows.push(TracingRow {
            concurrency: c,
            columns,
        });
    }
    Ok(rows)
}

/// Per repeat, `column`'s figure `pick` over tracing off's.
pub(crate) fn ratios(row: &TracingRow, column: &Column, pick: fn(&Measured) -> f64) -> Vec<f64> {
    let off = &row.columns[0];
    column
        .measured
        .iter()
        .zip(&off.measured)
        .map(|(m, o)| pick(m) / pick(o).max(1e-9))
        .collect()
}

/// The tracing table as Markdown: per concurrency and setting, req/s, p50 and p99 and each over
/// tracing off's, and the spans that reached the collector.
pub fn tracing_table(rows: &[TracingRow]) -> String {
    let mut s = String::from(
        "| clients | tracing | req/s | / off | p50 ms | / off | p99 ms | / off | spans per request | spans exported/s | spans dropped |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        for col in &row.columns {
            let pick = |f: fn(&Measured) -> f64| col.measured.iter().map(f).collect::<Vec<_>>();
            let ratio = |f: fn(&Measured) -> f64| {
                if col.setting == Setting::Off {
                    "1".to_string()
                } else {
                    spread(&ratios(row, col, f), 3)
                }
            };
            let rate = pick(|m| m.0);
            let spans_per_s: Vec<f64> = rate.iter().map(|r| r * col.spans_per_request()).collect();
            let (per_request, per_s, dropped) = if col.setting == Setting::Off {
                ("–".to_string(), "–".to_string(), "–".to_string())
            } else {
                (
                    format!("{:.3}", col.spans_per_request()),
                    spread(&spans_per_s, 1),
                    col.spans_dropped.to_string(),
                )
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                row.concurrency,
                col.setting.label(),
                spread(&rate, 1),
                ratio(|m| m.0),
                spread(&pick(|m| m.1), 2),
                ratio(|m| m.1),
                spread(&pick(|m| m.2), 2),
                ratio(|m| m.2),
                per_request,
                per_s,
                dropped,
            ));
        }
    }
    s
}
