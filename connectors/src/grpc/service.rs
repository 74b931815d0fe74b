//! The inference service's unary RPCs, and the one path every inference request takes (unary or
//! on a stream): token, model, conversion, the graph, the reply, the metrics.
//!
//! Authorization is the HTTP server's (the same token, read from the `authorization` metadata
//! entry as `Bearer <token>`); like HTTP, liveness needs none. A model's version is accepted and
//! ignored, as over HTTP: each graph is version 1.
//!
//! A model name no graph has goes to the model-less front end when one is set and serves it
//! (`oip::ModelLess`: an INFaaS task or one of its variants), on the same path: the same
//! admission and byte budget, the same conversion (the request's `parameters` carry the
//! requirements, the reply's the variant and whether it was a cold start), the same timeout and
//! the same failures. A served task is ready while the server is; it has no metadata, as over
//! HTTP, since its inputs are those of whichever variant a request picks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use prost::Message;
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status, Streaming};
use weir_engine::runtime::GraphRuntime;

use super::admit::Held;
use super::convert::{infer_request, infer_response};
use super::proto::grpc_inference_service_server::GrpcInferenceService;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::{
    ModelInferRequest, ModelInferResponse, ModelMetadataRequest, ModelMetadataResponse,
    ModelReadyRequest, ModelReadyResponse, ModelStreamInferResponse, ServerLiveRequest,
    ServerLiveResponse, ServerMetadataRequest, ServerMetadataResponse, ServerReadyRequest,
    ServerReadyResponse,
};
use super::server::GrpcConfig;
use super::status::Failure;
use super::stream::stream_infer;
use crate::http::metrics::{GraphMetrics, Outcome};
use crate::http::{authorized, metadata_shape};
use crate::oip::{infer_outputs, ModelLess};

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

/// One served graph.
pub(super) struct Served {
    pub runtime: Arc<GraphRuntime>,
    pub metrics: Arc<GraphMetrics>,
}

/// What every RPC reads: the graphs, the model-less front end, the configuration and the phase.
pub(super) struct Shared {
    pub graphs: BTreeMap<String, Served>,
    pub modelless: Option<Arc<dyn ModelLess>>,
    pub config: GrpcConfig,
    pub phase: watch::Sender<Phase>,
}

impl Shared {
    pub fn authorize(&self, metadata: &MetadataMap) -> Result<(), Failure> {
        if authorized(
            self.config.auth_token.as_ref(),
            &metadata.clone().into_headers(),
        ) {
            Ok(())
        } else {
            Err(Failure::unauthenticated())
        }
    }

    /// What answers requests for `name`: its graph, else the model-less front end if it serves it.
    fn target(&self, name: &str) -> Result<Target<'_>, Failure> {
        match (self.graphs.get(name), &self.modelless) {
            (Some(g), _) => Ok(Target::Graph(g)),
            (None, Some(m)) if m.serves(name) => Ok(Target::ModelLess(m.as_ref())),
            _ => Err(Failure::unknown_model(name)),
        }
    }

    pub fn serving(&self) -> bool {
        *self.phase.borrow() == Phase::Serving
    }

    /// Runs one request through its graph or the model-less front end; a graph's outcome goes to
    /// its metrics (the front end counts its own decisions).
    pub async fn infer(&self, request: ModelInferRequest) -> Result<ModelInferResponse, Failure> {
        crate::access_log::note_model(&request.model_name, &request.model_version);
        crate::access_log::note_request_id(Some(&request.id));
        let target = self.target(&request.model_name)?;
        let started = Instant::now();
        let result = self.infer_on(target, request).await;
        if let Target::Graph(served) = target {
            let outcome = result.as_ref().map_or_else(|f| f.outcome, |_| Outcome::Ok);
            served.metrics.record(outcome, started.elapsed());
        }
        result
    }

    async fn infer_on(
        &self,
        target: Target<'_>,
        mut request: ModelInferRequest,
    ) -> Result<ModelInferResponse, Failure> {
        let parsed = infer_request(&request, request.encoded_len())?;
        let name = std::mem::take(&mut request.model_name);
        // The raw contents are copied into the parsed tensors: free them before the graph runs.
        drop(request);
        let timeout = self.config.request_timeout;
        let answer = match target {
            Target::Graph(g) => infer_outputs(&g.runtime, parsed, timeout).await?,
            Target::ModelLess(m) => m.infer(&name, parsed, timeout).await?,
        };
        Ok(infer_response(answer)?)
    }
}

/// What answers a model's requests.
#[derive(Clone, Copy)]
enum Target<'a> {
    Graph(&'a Served),
    ModelLess(&'a dyn ModelLess),
}

/// `inference.GRPCInferenceService`.
pub(super) struct InferService(pub Arc<Shared>);

fn tensor_metadata(name: &str, ty: &weir_engine::tensor::TensorType) -> TensorMetadata {
    TensorMetadata {
        name: name.to_string(),
        datatype: ty.dtype.oip_name().to_string(),
        shape: metadata_shape(&ty.shape),
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for InferService {
    async fn server_live(
        &self,
        _: Request<ServerLiveRequest>,
    ) -> Result<Response<ServerLiveResponse>, Status> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(
        &self,
        request: Request<ServerReadyRequest>,
    ) -> Result<Response<ServerReadyResponse>, Status> {
        if !self.0.config.health_unauthenticated {
            self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        }
        Ok(Response::new(ServerReadyResponse {
            ready: self.0.serving(),
        }))
    }

    async fn model_ready(
        &self,
        request: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        self.0
            .target(&request.get_ref().name)
            .map_err(|f| f.status)?;
        Ok(Response::new(ModelReadyResponse {
            ready: self.0.serving(),
        }))
    }

    async fn server_metadata(
        &self,
        request: Request<ServerMetadataRequest>,
    ) -> Result<Response<ServerMetadataResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        Ok(Response::new(ServerMetadataResponse {
            name: "weir".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            extensions: vec!["binary_tensor_data".into()],
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let name = &request.get_ref().name;
        let plan = match self.0.target(name).map_err(|f| f.status)? {
            Target::Graph(g) => g.runtime.plan(),
            Target::ModelLess(_) => return Err(Failure::no_metadata(name).status),
        };
        Ok(Response::new(ModelMetadataResponse {
            name: plan.name.clone(),
            versions: vec!["1".into()],
            platform: "weir_graph".into(),
            inputs: plan
                .inputs
                .iter()
                .map(|i| tensor_metadata(&i.name, &i.ty))
                .collect(),
            outputs: plan
                .outputs
                .iter()
                .map(|o| tensor_metadata(&o.name, &o.ty))
                .collect(),
        }))
    }

    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        self.0
            .infer(request.into_inner())
            .await
            .map(Response::new)
            .map_err(|f| f.status)
    }

    type ModelStreamInferStream = ReceiverStream<Result<ModelStreamInferResponse, Status>>;

    async fn model_stream_infer(
        &self,
        request: Request<Streaming<ModelInferRequest>>,
    ) -> Result<Response<Self::ModelStreamInferStream>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let held = request
            .extensions()
            .get::<Held>()
            .cloned()
            .unwrap_or_default();
        Ok(Response::new(stream_infer(
            Arc::clone(&self.0),
            request.into_inner(),
            held,
        )))
    }
}
