//! Span export over OTLP/gRPC with the OpenTelemetry crates: the [`SpanSink`] behind
//! `--otlp-endpoint` of `weir serve` and `weir executor`.
//!
//! The engine builds finished spans itself, from lineage and the batch records it keeps
//! (`weir_engine::trace`), with the ids and times the request really had; so this crate uses
//! neither the SDK's tracer nor its batch processor, only its span data type and the OTLP
//! exporter. [`OtlpSink::export`] never blocks its caller (a request path): spans go onto a
//! bounded queue, and those that do not fit are dropped and counted. One thread drains the queue
//! in batches of at most [`MAX_BATCH`] spans (or what arrived within [`FLUSH_INTERVAL`]) and
//! exports each under [`EXPORT_TIMEOUT`] on a runtime of its own; a batch the collector does not
//! take (down, unreachable, slow) is dropped and counted too, and requests never wait for it.
//! The counts are in `/metrics` ([`OtlpSink::metrics`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue, Value};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use opentelemetry_sdk::Resource;
use prometheus_client::encoding::DescriptorEncoder;
use tracing::{info, warn};
use weir_engine::metrics::{counter, Collector};
use weir_engine::trace::{self as wtrace, AttributeValue, SpanRecord, SpanSink};

/// Spans waiting for export, at most; more are dropped and counted.
pub const QUEUE_CAPACITY: usize = 8192;
/// Spans in one export, at most.
pub const MAX_BATCH: usize = 512;
/// Longest a span waits on the queue before its batch is sent.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(500);
/// Longest one export may take; a batch not taken by then is dropped.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors starting the exporter.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not a usable URL.
    #[error("--otlp-endpoint `{endpoint}`: {message}")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
        /// Why it cannot be used.
        message: String,
    },
    /// The export thread could not start.
    #[error("starting the span exporter: {0}")]
    Start(String),
}

#[derive(Debug, Default)]
struct Counts {
    exported: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_export_failed: AtomicU64,
}

/// Exports spans to an OTLP/gRPC collector (see the module docs).
pub struct OtlpSink {
    queue: SyncSender<SpanRecord>,
    counts: Arc<Counts>,
}

impl fmt::Debug for OtlpSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpSink")
            .field("exported", &self.counts.exported.load(Ordering::Relaxed))
            .finish()
    }
}

impl OtlpSink {
    /// Starts exporting to the collector at `endpoint` (`http://host:4317`) as service
    /// `service` (the `service.name` resource attribute). The connection is made lazily: a
    /// collector that is not up yet (or never) does not stop the start.
    ///
    /// # Errors
    /// When `endpoint` is not an `http://` or `https://` URL, or the export thread cannot
    /// start.
    pub fn start(endpoint: &str, service: &str) -> Result<Arc<OtlpSink>, OtlpError> {
        let bad = |message: &str| OtlpError::Endpoint {
            endpoint: endpoint.to_string(),
            message: message.to_string(),
        };
        let rest = endpoint
            .strip_prefix("http://")
            .or_else(|| endpoint.strip_prefix("https://"))
            .ok_or_else(|| bad("give an http:// or https:// URL (OTLP over gRPC)"))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad("the URL names no host"));
        }
        let (tx, rx) = sync_channel(QUEUE_CAPACITY);
        let counts = Arc::new(Counts::default());
        let thread_counts = Arc::clone(&counts);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| OtlpError::Start(e.to_string()))?;
        let mut exporter = {
            let _guard = runtime.enter();
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .with_timeout(EXPORT_TIMEOUT)
                .build()
                .map_err(|e| bad(&e.to_string()))?
        };
        exporter.set_resource(
            &Resource::builder_empty()
                .with_service_name(service.to_string())
                .build(),
        );
        let target = endpoint.to_string();
        std::thread::Builder::new()
            .name("weir-otlp".into())
            .spawn(move || export_loop(runtime, exporter, rx, thread_counts, target))
            .map_err(|e| OtlpError::Start(e.to_string()))?;
        info!(endpoint, service, "Exporting trace spans over OTLP.");
        Ok(Arc::new(OtlpSink { queue: tx, counts }))
    }

    /// Spans exported so far.
    pub fn exported(&self) -> u64 {
        self.counts.exported.load(Ordering::Relaxed)
    }

    /// Spans dropped so far (queue full, or an export the collector did not take).
    pub fn dropped(&self) -> u64 {
        self.counts.dropped_queue_full.load(Ordering::Relaxed)
            + self.counts.dropped_export_failed.load(Ordering::Relaxed)
    }

    /// The exporter's counters for `/metrics`: `weir_trace_spans_exported_total` and
    /// `weir_trace_spans_dropped_total{reason}`.
    pub fn metrics(&self) -> impl Collector {
        ExportCounts(Arc::clone(&self.counts))
    }
}

/// The exporter's counters as metric families.
#[derive(Debug)]
struct ExportCounts(Arc<Counts>);

impl Collector for ExportCounts {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let counts = &self.0;
        counter(
            &mut encoder,
            weir_engine::metrics::TRACE_SPANS_EXPORTED_TOTAL,
            "Trace spans the OTLP collector took.",
            [(
                Vec::<(&str, &str)>::new(),
                counts.exported.load(Ordering::Relaxed),
            )],
        )?;
        counter(
            &mut encoder,
            weir_engine::metrics::TRACE_SPANS_DROPPED_TOTAL,
            "Trace spans dropped: the export queue was full, or the collector did not take \
             their batch in time.",
            [
                (
                    [("reason", "queue_full")],
                    counts.dropped_queue_full.load(Ordering::Relaxed),
                ),
                (
                    [("reason", "export_failed")],
                    counts.dropped_export_failed.load(Ordering::Relaxed),
                ),
            ],
        )
    }
}

impl SpanSink for OtlpSink {
    fn export(&self, spans: Vec<SpanRecord>) {
        for span in spans {
            // Full, or the export thread is gone: either way the span is dropped, not waited for.
            if self.queue.try_send(span).is_err() {
                self.counts
                    .dropped_queue_full
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Drains the queue in batches and exports them, until every sender is gone.
fn export_loop(
    runtime: tokio::runtime::Runtime,
    exporter: opentelemetry_otlp::SpanExporter,
    rx: Receiver<SpanRecord>,
    counts: Arc<Counts>,
    endpoint: String,
) {
    let failing = AtomicBool::new(false);
    loop {
        let first = match rx.recv() {
            Ok(s) => s,
            Err(_) => return,
        };
        let mut batch = vec![first];
        let until = Instant::now() + FLUSH_INTERVAL;
        let mut closed = false;
        while batch.len() < MAX_BATCH {
            match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(s) => batch.push(s),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    closed = true;
                    break;
                }
            }
        }
        let n = batch.len() as u64;
        let data: Vec<SpanData> = batch.into_iter().map(span_data).collect();
        // The timer is made inside the runtime: `timeout` needs its reactor when it is created.
        let outcome = runtime
            .block_on(async { tokio::time::timeout(EXPORT_TIMEOUT, exporter.export(data)).await });
        match outcome {
            Ok(Ok(())) => {
                counts.exported.fetch_add(n, Ordering::Relaxed);
                if failing.swap(false, Ordering::Relaxed) {
                    info!(endpoint = %endpoint, "The OTLP collector takes spans again.");
                }
            }
            Ok(Err(e)) => {
                counts.dropped_export_failed.fetch_add(n, Ordering::Relaxed);
                if !failing.swap(true, Ordering::Relaxed) {
                    warn!(endpoint = %endpoint, error = %e, "The OTLP collector did not take spans; they are dropped (counted in weir_trace_spans_dropped_total) until it does.");
                }
            }
            Err(_) => {
                counts.dropped_export_failed.fetch_add(n, Ordering::Relaxed);
                if !failing.swap(true, Ordering::Relaxed) {
                    warn!(endpoint = %endpoint, "An OTLP export timed out; spans are dropped (counted in weir_trace_spans_dropped_total) until the collector answers.");
                }
            }
        }
        if closed {
            return;
        }
    }
}

/// The SDK's span data for `span`.
fn span_data(span: SpanRecord) -> SpanData {
    let state = span
        .state
        .as_deref()
        .and_then(|s| TraceState::from_key_value(parse_state(s)).ok())
        .unwrap_or_default();
    SpanData {
        span_context: SpanContext::new(
            TraceId::from_bytes(span.context.trace_id),
            SpanId::from_bytes(span.context.span_id),
            TraceFlags::SAMPLED,
            false,
            state,
        ),
        parent_span_id: span.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: span.parent_is_remote,
        span_kind: match span.kind {
            wtrace::SpanKind::Server => SpanKind::Server,
            wtrace::SpanKind::Client => SpanKind::Client,
            wtrace::SpanKind::Internal => SpanKind::Internal,
        },
        name: Cow::Owned(span.name),
        start_time: span.start,
        end_time: span.end.max(span.start),
        attributes: span
            .attributes
            .into_iter()
            .map(|(k, v)| {
                KeyValue::new(
                    k,
                    match v {
                        AttributeValue::Int(i) => Value::I64(i),
                        AttributeValue::Str(s) => Value::from(s),
                        AttributeValue::Bool(b) => Value::Bool(b),
                    },
                )
            })
            .collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: if span.error {
            Status::error("")
        } else {
            Status::Unset
        },
        instrumentation_scope: InstrumentationScope::builder("weir").build(),
    }
}

/// The `key=value` members of a `tracestate` header.
fn parse_state(state: &str) -> Vec<(String, String)> {
    state
        .split(',')
        .filter_map(|m| {
            let (k, v) = m.trim().split_once('=')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_endpoint_is_refused_by_name() {
        let e = OtlpSink::start("localhost:4317", "weir").unwrap_err();
        assert!(e.to_string().contains("--otlp-endpoint"), "{e}");
        assert!(OtlpSink::start("http://", "weir").is_err());
    }

    #[test]
    fn spans_past_the_queue_are_dropped_and_counted_not_blocked() {
        // Nothing listens there: every export fails, and nothing waits on it.
        let sink = OtlpSink::start("http://127.0.0.1:9", "weir").unwrap();
        let span = SpanRecord {
            context: wtrace::SpanContext {
                trace_id: [1; 16],
                span_id: [2; 8],
                sampled: true,
            },
            parent: None,
            parent_is_remote: false,
            state: Some("k=v".into()),
            name: "s".into(),
            kind: wtrace::SpanKind::Server,
            start: std::time::SystemTime::now(),
            end: std::time::SystemTime::now(),
            attributes: vec![("weir.node", AttributeValue::Str("n".into()))],
            error: false,
        };
        // Returns at once whatever the collector does: what does not fit is dropped.
        sink.export(vec![span; QUEUE_CAPACITY + MAX_BATCH + 10]);
        assert!(sink.dropped() >= 10);
        let text = weir_engine::metrics::text(sink.metrics()).unwrap();
        assert!(
            text.contains("weir_trace_spans_dropped_total{reason=\"queue_full\"}"),
            "{text}"
        );
    }
}
