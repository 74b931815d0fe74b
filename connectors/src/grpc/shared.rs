//! What every RPC shares, and the one path every inference request takes (unary or on a stream):
//! token, model, conversion, the graph, the reply, the metrics.
//!
//! [`Shared`] holds the served graphs, the model-less front end, the configuration and the
//! server's [`Phase`]; the inference service, its streams and the health service read it, and the
//! server builds it and moves it through its phases.
//!
//! Authorization is the HTTP server's (the same token, read from the `authorization` metadata
//! entry as `Bearer <token>`); like HTTP, liveness needs none. A model's version is resolved as
//! over HTTP (`crate::models`): the one named, or the highest served when none is.
//!
//! A model name no graph has goes to the model-less front end when one is set and serves it
//! (`oip::ModelLess`: an INFaaS task or one of its variants), on the same path: the same
//! admission and byte budget, the same conversion (the request's `parameters` carry the
//! requirements, the reply's the variant and whether it was a cold start), the same timeout and
//! the same failures.

use std::sync::Arc;
use std::time::Instant;

use prost::Message;
use tokio::sync::watch;
use tonic::codegen::http::{HeaderMap, HeaderValue};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::Status;

use super::config::GrpcConfig;
use super::convert::{infer_request, infer_response};
use super::proto::{ModelInferRequest, ModelInferResponse};
use super::status::Failure;
use crate::http::metrics::{ModelMetrics, Outcome};
use crate::http::{authorized, ByteBudget, BytesPermit};
use crate::models::control::ModelControl;
use crate::models::modelless::{find, Found};
use crate::models::{ModelTable, ModelVersion};
use crate::oip::{infer_outputs, ModelLess, RequestTracing};
use crate::shared_memory::SharedMemory;

/// Where the server is in its life: health, readiness and open streams follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Built, not yet listening.
    Starting,
    /// Taking requests.
    Serving,
    /// Shutting down: in-flight requests are answered, streams take no new ones.
    Draining,
}

/// What every RPC reads: the served models and their request metrics over gRPC, the model-less
/// front end, the configuration and the phase.
pub(super) struct Shared {
    pub models: Arc<ModelTable>,
    pub graphs: Arc<ModelMetrics>,
    pub control: Option<Arc<dyn ModelControl>>,
    pub modelless: Option<Arc<dyn ModelLess>>,
    pub config: GrpcConfig,
    pub phase: watch::Sender<Phase>,
    /// The registered shared memory regions (off unless the server was given a registry).
    pub shared_memory: Arc<SharedMemory>,
    /// The process's byte budget, charged for inputs read from shared memory (messages are
    /// charged as they arrive, `admit.rs`).
    pub budget: Arc<ByteBudget>,
}

impl Shared {
    pub fn authorize(&self, metadata: &MetadataMap) -> Result<(), Failure> {
        self.authorize_headers(metadata.as_ref())
    }

    /// [`Self::authorize`] on the call's headers, read in place: every RPC passes here, and a
    /// copy of the map costs an allocation per entry.
    fn authorize_headers(&self, headers: &HeaderMap) -> Result<(), Failure> {
        if authorized(self.config.auth_token.as_ref(), headers) {
            Ok(())
        } else {
            Err(Failure::unauthenticated())
        }
    }

    /// What a read of `version` of `name` (empty: the highest served) finds, in the table or
    /// served model-less, and the versions it is served in.
    pub fn find(&self, name: &str, version: &str) -> Result<(Found, Vec<u64>), Failure> {
        find(
            &self.models.snapshot(),
            self.modelless.as_deref(),
            name,
            Some(version),
        )
        .map_err(|e| Failure::lookup(&e))
    }

    /// What answers requests for `version` of `name` (empty: the highest served): its graph,
    /// else the model-less front end if it serves it.
    pub fn target(&self, name: &str, version: &str) -> Result<Target<'_>, Failure> {
        let models = self.models.snapshot();
        match (models.contains(name), &self.modelless) {
            (true, _) => models
                .resolve(name, Some(version))
                .map(|v| Target::Graph(Arc::clone(v)))
                .map_err(|e| Failure::lookup(&e)),
            (false, Some(m)) if m.serves(name) => Ok(Target::ModelLess(m.as_ref())),
            _ => Err(Failure::unknown_model(name)),
        }
    }

    pub fn serving(&self) -> bool {
        *self.phase.borrow() == Phase::Serving
    }

    /// A unary `ModelInfer` call with the request headers `headers`: the token checked, the call
    /// traced when the server traces (its `traceparent` and `tracestate` read), then
    /// [`Self::infer_traced`]. The answer's `traceparent`, when traced, is returned with the reply
    /// for its initial metadata, and is in a failure's metadata.
    pub async fn unary_infer(
        &self,
        headers: &HeaderMap,
        request: ModelInferRequest,
    ) -> Result<(ModelInferResponse, Option<HeaderValue>), Status> {
        self.authorize_headers(headers).map_err(|f| f.status)?;
        let tracing = self.config.traces.as_ref().map(|t| {
            let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            t.decide(value("traceparent"), value("tracestate"), "grpc")
        });
        if let Some(t) = &tracing {
            crate::access_log::note_trace_id(t.context.span.trace_id_hex());
        }
        let traceparent = tracing
            .as_ref()
            .and_then(|t| HeaderValue::try_from(t.traceparent()).ok());
        match self.infer_traced(request, tracing).await {
            Ok(reply) => Ok((reply, traceparent)),
            Err(mut failure) => {
                // The request's span, in the error's metadata.
                if let Some(v) =
                    traceparent.and_then(|v| MetadataValue::try_from(v.as_bytes()).ok())
                {
                    failure.status.metadata_mut().insert("traceparent", v);
                }
                Err(failure.status)
            }
        }
    }

    /// Runs one request through its graph or the model-less front end; a graph's outcome goes to
    /// its metrics (the front end counts its own decisions).
    pub async fn infer(&self, request: ModelInferRequest) -> Result<ModelInferResponse, Failure> {
        self.infer_traced(request, None).await
    }

    /// As [`Self::infer`], for a request traced as `tracing` says.
    pub async fn infer_traced(
        &self,
        request: ModelInferRequest,
        tracing: Option<RequestTracing>,
    ) -> Result<ModelInferResponse, Failure> {
        crate::access_log::note_model(&request.model_name, &request.model_version);
        crate::access_log::note_request_id(Some(&request.id));
        let target = self.target(&request.model_name, &request.model_version)?;
        let name = request.model_name.clone();
        let started = Instant::now();
        let rows = target.rows(&request);
        let result = self.infer_on(target.clone(), request, tracing).await;
        if let Target::Graph(served) = target {
            let outcome = result.as_ref().map_or_else(|f| f.outcome, |_| Outcome::Ok);
            self.graphs.of(&name).record(outcome, started.elapsed());
            match &result {
                Ok(_) => served.stats.success(rows, started.elapsed()),
                Err(_) => served.stats.failure(started.elapsed()),
            }
        }
        result
    }

    async fn infer_on(
        &self,
        target: Target<'_>,
        mut request: ModelInferRequest,
        tracing: Option<RequestTracing>,
    ) -> Result<ModelInferResponse, Failure> {
        let mut parsed = infer_request(&request, request.encoded_len())?;
        parsed.trace = tracing;
        let placement = std::mem::take(&mut parsed.placement);
        let name = std::mem::take(&mut request.model_name);
        // The raw contents are copied into the parsed tensors: free them before the graph runs.
        drop(request);
        // Inputs in shared memory are charged to the budget before they are read, and held
        // until the answer, as a message's bytes are.
        let mut permit = BytesPermit::new(&self.budget);
        if !placement.inputs.is_empty() {
            let needed = placement.input_bytes();
            permit
                .hold(needed)
                .map_err(|_| Failure::budget(needed, self.budget.limit()))?;
            self.shared_memory.read_inputs(
                &placement,
                &mut parsed,
                self.config.max_message_bytes,
            )?;
        }
        let timeout = self.config.request_timeout;
        let mut answer = match target {
            Target::Graph(g) => infer_outputs(&g.runtime, parsed, timeout).await?,
            Target::ModelLess(m) => m.infer(&name, parsed, timeout).await?,
        };
        if !placement.outputs.is_empty() {
            self.shared_memory
                .write_outputs(&placement, &mut answer.outputs)?;
        }
        drop(permit);
        Ok(infer_response(answer)?)
    }
}

/// What answers a model's requests.
#[derive(Clone)]
pub(super) enum Target<'a> {
    /// A served version of a model (kept for the request's life: a reload does not move it).
    Graph(Arc<ModelVersion>),
    /// The model-less front end.
    ModelLess(&'a dyn ModelLess),
}

impl Target<'_> {
    /// The rows `request` carries: its first input's leading dimension when that input has one
    /// more dimension than the graph's, else one.
    fn rows(&self, request: &ModelInferRequest) -> u64 {
        match (self, request.inputs.first()) {
            (Target::Graph(v), Some(i)) => v.rows(
                &i.name,
                i.shape.len(),
                i.shape.first().and_then(|n| u64::try_from(*n).ok()),
            ),
            _ => 1,
        }
    }
}
