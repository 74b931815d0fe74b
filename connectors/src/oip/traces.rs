//! Traces of Open Inference Protocol requests: each transport reads the client's W3C
//! `traceparent`/`tracestate` (HTTP headers, gRPC metadata), decides with [`Traces::decide`], and
//! answers with the `traceparent` of the request's server span; [`super::infer_outputs`] runs a
//! sampled request under its trace id and, once its rows are answered, exports the server span
//! and the spans its rows' lineage names ([`weir_engine::trace::request_spans`]).
//!
//! A request that is not sampled still gets a server span id (the header it is answered with),
//! and nothing else: no lookup, no record, no export.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::SystemTime;

use weir_engine::request::{RequestError, Response};
use weir_engine::runtime::GraphRuntime;
use weir_engine::trace::{
    request_spans, AttributeValue, RequestTrace, Sampler, SpanKind, SpanRecord, SpanSink,
};

/// A front end's tracing: the sampling rule and where spans go.
#[derive(Debug, Clone)]
pub struct Traces {
    /// OpenTelemetry's `ParentBased(TraceIdRatioBased)` at the configured ratio.
    pub sampler: Sampler,
    /// The exporter.
    pub sink: Arc<dyn SpanSink>,
}

impl Traces {
    /// The trace of a request that came over `protocol` with these header values.
    pub fn decide(
        &self,
        traceparent: Option<&str>,
        tracestate: Option<&str>,
        protocol: &'static str,
    ) -> RequestTracing {
        RequestTracing {
            context: self.sampler.decide(traceparent, tracestate),
            sink: Arc::clone(&self.sink),
            protocol,
            started: SystemTime::now(),
        }
    }
}

/// One request's trace, carried with the parsed request to the graph.
#[derive(Debug, Clone)]
pub struct RequestTracing {
    /// The decision: trace id, server span id, sampled or not.
    pub context: RequestTrace,
    /// Where its spans go.
    pub sink: Arc<dyn SpanSink>,
    /// `http` or `grpc`.
    pub protocol: &'static str,
    /// When the request arrived.
    pub started: SystemTime,
}

impl PartialEq for RequestTracing {
    fn eq(&self, other: &Self) -> bool {
        self.context == other.context && self.protocol == other.protocol
    }
}

impl RequestTracing {
    /// The `traceparent` the response carries: the request's server span.
    pub fn traceparent(&self) -> String {
        self.context.span.traceparent()
    }

    /// The trace id to run the request's rows under, when it is sampled.
    pub(crate) fn sampled_trace_id(&self) -> Option<[u8; 16]> {
        self.context
            .span
            .sampled
            .then_some(self.context.span.trace_id)
    }

    /// Exports one step a front end took for the request before its graph ran (a model-less
    /// front end's choice of variant and worker), as a child of the request's server span; an
    /// unsampled request exports nothing.
    pub fn export_step(
        &self,
        name: String,
        start: SystemTime,
        attributes: Vec<(&'static str, AttributeValue)>,
        error: bool,
    ) {
        if !self.context.span.sampled {
            return;
        }
        let span = SpanRecord {
            context: weir_engine::trace::SpanContext {
                span_id: weir_engine::trace::context::new_span_id(),
                ..self.context.span
            },
            parent: Some(self.context.span.span_id),
            parent_is_remote: false,
            state: self.context.state.clone(),
            name,
            kind: SpanKind::Internal,
            start,
            end: SystemTime::now(),
            attributes,
            error,
        };
        self.sink.export(vec![span]);
    }

    /// Exports the request's spans, when sampled: its server span and one per hop its rows'
    /// lineage names (each once, though several rows passed it). `answers` is `None` when the
    /// request's deadline passed before every row was answered.
    pub(crate) fn finish(
        &self,
        runtime: &GraphRuntime,
        answers: Option<&[Result<Response, RequestError>]>,
    ) {
        if !self.context.span.sampled {
            return;
        }
        let ended = SystemTime::now();
        let plan = runtime.plan();
        let rows = answers.map_or(0, <[_]>::len);
        let failed = answers.is_none_or(|a| a.iter().any(Result::is_err));
        let mut spans = vec![SpanRecord {
            context: self.context.span,
            parent: self.context.parent,
            parent_is_remote: true,
            state: self.context.state.clone(),
            name: format!("{} infer {}", self.protocol, plan.name),
            kind: SpanKind::Server,
            start: self.started,
            end: ended,
            attributes: vec![
                ("weir.graph", AttributeValue::Str(plan.name.clone())),
                ("weir.protocol", AttributeValue::Str(self.protocol.into())),
                (
                    "weir.rows",
                    AttributeValue::Int(i64::try_from(rows).unwrap_or(i64::MAX)),
                ),
            ],
            error: failed,
        }];
        let mut seen = HashSet::new();
        for response in answers.into_iter().flatten().flatten() {
            for span in request_spans(
                runtime.traces(),
                plan,
                &self.context,
                response.request_id,
                &response.lineage,
                (self.started, ended),
            ) {
                if seen.insert(span.context.span_id) {
                    spans.push(span);
                }
            }
        }
        self.sink.export(spans);
    }
}
