//! The inference service's unary RPCs, and the one path every inference request takes (unary or
//! on a stream): token, model, conversion, the graph, the reply, the metrics.
//!
//! Authorization is the HTTP server's (the same token, read from the `authorization` metadata
//! entry as `Bearer <token>`); like HTTP, liveness needs none. A model's version is accepted and
//! ignored, as over HTTP: each graph is version 1.

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
use crate::oip::infer_outputs;

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

/// What every RPC reads: the graphs, the configuration and the phase.
pub(super) struct Shared {
    pub graphs: BTreeMap<String, Served>,
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

    fn graph(&self, name: &str) -> Result<&Served, Failure> {
        self.graphs
            .get(name)
            .ok_or_else(|| Failure::unknown_model(name))
    }

    pub fn serving(&self) -> bool {
        *self.phase.borrow() == Phase::Serving
    }

    /// Runs one request through its graph and records its outcome.
    pub async fn infer(&self, request: ModelInferRequest) -> Result<ModelInferResponse, Failure> {
        let served = self.graph(&request.model_name)?;
        let started = Instant::now();
        let result = self.infer_on(served, request).await;
        let outcome = result.as_ref().map_or_else(|f| f.outcome, |_| Outcome::Ok);
        served.metrics.record(outcome, started.elapsed());
        result
    }

    async fn infer_on(
        &self,
        served: &Served,
        request: ModelInferRequest,
    ) -> Result<ModelInferResponse, Failure> {
        let parsed = infer_request(&request, request.encoded_len())?;
        // The raw contents are copied into the parsed tensors: free them before the graph runs.
        drop(request);
        let answer = infer_outputs(&served.runtime, parsed, self.config.request_timeout).await?;
        Ok(infer_response(answer)?)
    }
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
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
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
            .graph(&request.get_ref().name)
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
        let plan = self
            .0
            .graph(&request.get_ref().name)
            .map_err(|f| f.status)?
            .runtime
            .plan();
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
