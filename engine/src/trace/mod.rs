//! Traces built from lineage: what a sampled request's spans are, made from what the engine
//! already records, and handed to an exporter.
//!
//! - [`context`]: W3C `traceparent`/`tracestate` and the front end's sampling decision.
//! - [`book`]: a graph's [`TraceBook`]: which pending requests are sampled, and per batch a node
//!   ran that held a sampled row, its times (a bounded ring, written only for such batches).
//! - [`carry`]: a sampled request's trace id and its hops' records, carried with its rows across
//!   a timely cluster's exchange.
//! - [`paths`]: a graph's [`PathStore`]: the hops of some recent requests, read off their spans
//!   for the dashboard.
//! - [`spans`]: at the reply, a request's lineage names exactly which batch records are its
//!   spans and which span is each one's parent ([`request_spans`]).
//!
//! Nothing is recorded for a request that is not sampled: an operator asks
//! [`TraceBook::is_active`] (one relaxed atomic load) before it looks further. The exporter
//! behind [`SpanSink`] lives outside the engine (`weir-otel`, OTLP); the engine only builds
//! [`SpanRecord`]s.

pub mod book;
pub mod carry;
pub mod context;
pub mod paths;
pub mod spans;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

pub use book::{HopRecord, ReleaseWait, TraceBook};
pub use carry::TraceCarry;
pub use context::{hop_span_id, RequestTrace, Sampler, SpanContext};
pub use paths::{PathHop, PathStore, RequestPath};
pub use spans::request_spans;

/// What a span describes, as OpenTelemetry's span kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A request received (the front end's span, a remote executor's).
    Server,
    /// A call to another process (a model node whose replica is remote).
    Client,
    /// Work inside the process.
    Internal,
}

/// A span attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
    /// A flag.
    Bool(bool),
}

/// One finished span, ready to export.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// The span's trace and id (`sampled` is true for every exported span).
    pub context: SpanContext,
    /// Its parent span, `None` for a root.
    pub parent: Option<[u8; 8]>,
    /// Whether the parent is in another process (the client's span, the hop span an executor
    /// received).
    pub parent_is_remote: bool,
    /// The client's `tracestate`, carried on.
    pub state: Option<Arc<str>>,
    /// Span name.
    pub name: String,
    /// Span kind.
    pub kind: SpanKind,
    /// When it started.
    pub start: SystemTime,
    /// When it ended.
    pub end: SystemTime,
    /// Attributes (keys are fixed names).
    pub attributes: Vec<(&'static str, AttributeValue)>,
    /// Whether the work it describes failed.
    pub error: bool,
}

/// Where finished spans go. Implementations never block the caller (they queue and drop when
/// full), because callers are request paths.
pub trait SpanSink: Send + Sync + std::fmt::Debug {
    /// Takes `spans` for export.
    fn export(&self, spans: Vec<SpanRecord>);
}

/// A job's trace, carried with it to whatever runs it: the span its call is a child of, and
/// slots shared by every clone: the runner fills one with the call's times, ParM another when it
/// decodes the job's answer instead (both read by the model operator when the job is answered).
/// The slots sit behind one pointer, so a job carries one word for them.
#[derive(Debug, Clone)]
pub struct JobTrace {
    /// The model node's span for this job (trace id and hop span id, sampled).
    pub parent: SpanContext,
    slots: Arc<JobSlots>,
}

#[derive(Debug, Default)]
struct JobSlots {
    /// Filled once by the session thread that ran the job.
    call: OnceLock<CallTiming>,
    /// The replica the job was last sent to (a node with a pool of them sets it).
    replica: Mutex<Option<String>>,
    /// Filled once when ParM reconstructs the job's answer.
    reconstruction: OnceLock<Reconstruction>,
}

impl JobTrace {
    /// A trace for a job of node span `parent`, its call not run yet.
    pub fn new(parent: SpanContext) -> JobTrace {
        JobTrace {
            parent,
            slots: Arc::default(),
        }
    }

    /// Records that ParM decoded the job's answer (the first record wins).
    pub fn record_reconstruction(&self, reconstruction: Reconstruction) {
        let _ = self.slots.reconstruction.set(reconstruction);
    }

    /// How ParM decoded the job's answer, if it did.
    pub fn reconstruction(&self) -> Option<Reconstruction> {
        self.slots.reconstruction.get().cloned()
    }

    /// Notes that the job was sent to replica `name` (a re-dispatch overwrites it).
    pub fn sent_to(&self, name: &str) {
        *self.slots.replica.lock().unwrap_or_else(|p| p.into_inner()) = Some(name.to_string());
    }

    /// The replica the job was last sent to, if any was noted.
    pub fn replica(&self) -> Option<String> {
        self.slots
            .replica
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records the call that ran the job (the first record wins).
    pub fn record_call(&self, started: Instant, ended: Instant, rows: usize) {
        let _ = self.slots.call.set(CallTiming {
            started,
            ended,
            rows,
        });
    }

    /// The call that ran the job, once recorded.
    pub fn call(&self) -> Option<CallTiming> {
        self.slots.call.get().copied()
    }
}

/// One ONNX Runtime call as a job's runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallTiming {
    /// When the call started.
    pub started: Instant,
    /// When it returned.
    pub ended: Instant,
    /// Rows in the call (the batch size, jobs of other requests included).
    pub rows: usize,
}

/// A job's answer decoded from its coding group (ParM) instead of taken from its replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconstruction {
    /// The coding group (numbered per node from 0).
    pub group: u64,
    /// Jobs per group.
    pub k: usize,
    /// Why: `late` (no prediction by the decode deadline) or `failed` (its replica answered an
    /// error).
    pub reason: &'static str,
    /// When the job's prediction counted as unavailable (its deadline, or the failure's answer).
    pub unavailable_at: SystemTime,
    /// When the answer was decoded.
    pub decoded_at: SystemTime,
}

/// The wall-clock time of `at`, an instant in the past or present of this process.
pub fn wall_time(at: Instant) -> SystemTime {
    let ago = Instant::now().saturating_duration_since(at);
    SystemTime::now()
        .checked_sub(ago)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Microseconds of `d`, as a span attribute.
pub fn micros(d: Duration) -> AttributeValue {
    AttributeValue::Int(i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}
