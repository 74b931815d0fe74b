//! Keeping a request's path for the dashboard: at admission, whether to record it (every request
//! sampled for tracing, and the runtime's [`weir_engine::trace::PathStore::pick`] for the
//! others: one relaxed atomic when it is not picked); at the reply, its rows' hops read off their
//! spans ([`weir_engine::trace::request_spans`]) into the graph's store.

use std::collections::HashSet;
use std::time::SystemTime;

use weir_engine::request::{original_id, RequestError, Response};
use weir_engine::runtime::GraphRuntime;
use weir_engine::trace::paths::MAX_PATH_HOPS;
use weir_engine::trace::{request_spans, RequestPath, RequestTrace, SpanContext};

use super::RequestTracing;

/// A request whose path is being recorded.
#[derive(Debug)]
pub(crate) struct PathRecording {
    trace: RequestTrace,
    started: SystemTime,
}

impl PathRecording {
    /// Whether to record the path of the request `tracing` describes, on `runtime`: `Some` for a
    /// request sampled for tracing or picked by the runtime's store (none when the store picks
    /// none: nobody can look).
    pub(crate) fn begin(
        runtime: &GraphRuntime,
        tracing: Option<&RequestTracing>,
    ) -> Option<PathRecording> {
        let paths = runtime.paths();
        if paths.every() == 0 {
            return None;
        }
        if let Some(t) = tracing.filter(|t| t.context.span.sampled) {
            return Some(PathRecording {
                trace: t.context.clone(),
                started: t.started,
            });
        }
        let trace_id = paths.pick()?;
        Some(PathRecording {
            trace: RequestTrace {
                span: SpanContext {
                    trace_id,
                    span_id: [0x70, 0x61, 0x74, 0x68, 0, 0, 0, 1],
                    sampled: true,
                },
                parent: None,
                state: None,
            },
            started: SystemTime::now(),
        })
    }

    /// The trace id the request's rows run under (their model hops record their times for it).
    pub(crate) fn trace_id(&self) -> [u8; 16] {
        self.trace.span.trace_id
    }

    /// Keeps the path of the request the client calls `client_id`, answered with `answers`
    /// (each row's hops, once though several rows passed them).
    pub(crate) fn finish(
        &self,
        runtime: &GraphRuntime,
        client_id: Option<&str>,
        answers: &[Result<Response, RequestError>],
    ) {
        let ended = SystemTime::now();
        let mut seen = HashSet::new();
        let mut spans = Vec::new();
        let mut first = None;
        for response in answers.iter().flatten() {
            first.get_or_insert(original_id(response.request_id));
            for span in request_spans(
                runtime.traces(),
                runtime.plan(),
                &self.trace,
                response.request_id,
                &response.lineage,
                (self.started, ended),
            ) {
                // One past the limit, so the path knows it was cut.
                if spans.len() <= MAX_PATH_HOPS && seen.insert(span.context.span_id) {
                    spans.push(span);
                }
            }
        }
        let Some(engine_id) = first else {
            return;
        };
        runtime.paths().keep(RequestPath::from_spans(
            client_id,
            engine_id,
            (self.started, ended),
            answers.len(),
            &spans,
        ));
    }
}
