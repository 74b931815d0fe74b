//! The inference service's RPCs: liveness, readiness and metadata answered here, inference
//! handed to the shared request path ([`Shared::infer`]) and `ModelStreamInfer` to `stream.rs`.
//!
//! Every RPC but liveness checks the token first. A model's version is accepted and ignored, as
//! over HTTP: each graph is version 1. A model-less task is ready while the server is; it has no
//! metadata, as over HTTP, since its inputs are those of whichever variant a request picks.

use std::sync::Arc;

use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::admit::Held;
use super::proto::grpc_inference_service_server::GrpcInferenceService;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::{
    ModelInferRequest, ModelInferResponse, ModelMetadataRequest, ModelMetadataResponse,
    ModelReadyRequest, ModelReadyResponse, ModelStreamInferResponse, ServerLiveRequest,
    ServerLiveResponse, ServerMetadataRequest, ServerMetadataResponse, ServerReadyRequest,
    ServerReadyResponse,
};
use super::shared::{Shared, Target};
use super::status::Failure;
use super::stream::stream_infer;
use crate::http::metadata_shape;

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
