//! The inference service's RPCs: liveness, readiness and metadata answered here, inference
//! handed to the shared request path ([`Shared::infer`]) and `ModelStreamInfer` to `stream.rs`.
//!
//! Every RPC but liveness checks the token first. A name is looked up as over HTTP: the model
//! table's versions first, then the names served model-less, which answer metadata,
//! configuration and statistics as a model of version 1 (a task's variants share its signature)
//! and are ready while the server is.

use std::sync::Arc;

use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::admit::Held;
use super::proto::grpc_inference_service_server::GrpcInferenceService;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::{
    CudaSharedMemoryRegisterRequest, CudaSharedMemoryRegisterResponse,
    CudaSharedMemoryStatusRequest, CudaSharedMemoryStatusResponse,
    CudaSharedMemoryUnregisterRequest, CudaSharedMemoryUnregisterResponse, ModelConfigRequest,
    ModelConfigResponse, ModelInferRequest, ModelInferResponse, ModelMetadataRequest,
    ModelMetadataResponse, ModelReadyRequest, ModelReadyResponse, ModelStatisticsRequest,
    ModelStatisticsResponse, ModelStreamInferResponse, RepositoryIndexRequest,
    RepositoryIndexResponse, RepositoryModelLoadRequest, RepositoryModelLoadResponse,
    RepositoryModelUnloadRequest, RepositoryModelUnloadResponse, ServerLiveRequest,
    ServerLiveResponse, ServerMetadataRequest, ServerMetadataResponse, ServerReadyRequest,
    ServerReadyResponse, SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterResponse,
    SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusResponse,
    SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterResponse,
};
use super::shared::Shared;
use super::shared_memory;
use super::stream::stream_infer;
use crate::models::config::{metadata_shape, Tensor};

/// `inference.GRPCInferenceService`.
pub(super) struct InferService(pub Arc<Shared>);

fn tensor_metadata(t: &Tensor, batched: bool) -> TensorMetadata {
    TensorMetadata {
        name: t.name.clone(),
        datatype: t.ty.dtype.oip_name().to_string(),
        shape: metadata_shape(&t.ty.shape, batched),
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
            ready: self.0.serving() && self.0.models.snapshot().unready().is_none(),
        }))
    }

    async fn model_ready(
        &self,
        request: Request<ModelReadyRequest>,
    ) -> Result<Response<ModelReadyResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.get_ref();
        // A model or version not served (never loaded, or unloaded) is not ready, as Triton
        // answers it, rather than an error: clients poll readiness across loads and unloads.
        let served = self.0.target(&r.name, &r.version).is_ok();
        Ok(Response::new(ModelReadyResponse {
            ready: served && self.0.serving(),
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
            extensions: crate::models::extensions(self.0.shared_memory.enabled())
                .into_iter()
                .map(str::to_string)
                .collect(),
        }))
    }

    async fn model_metadata(
        &self,
        request: Request<ModelMetadataRequest>,
    ) -> Result<Response<ModelMetadataResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.get_ref();
        let (found, versions) = self.0.find(&r.name, &r.version).map_err(|f| f.status)?;
        let sig = found.signature(&r.name);
        let batched = sig.batched();
        Ok(Response::new(ModelMetadataResponse {
            name: sig.name,
            versions: versions.iter().map(u64::to_string).collect(),
            platform: sig.platform,
            inputs: sig
                .inputs
                .iter()
                .map(|t| tensor_metadata(t, batched))
                .collect(),
            outputs: sig
                .outputs
                .iter()
                .map(|t| tensor_metadata(t, batched))
                .collect(),
        }))
    }

    async fn model_config(
        &self,
        request: Request<ModelConfigRequest>,
    ) -> Result<Response<ModelConfigResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.get_ref();
        let (found, _) = self.0.find(&r.name, &r.version).map_err(|f| f.status)?;
        Ok(Response::new(ModelConfigResponse {
            config: found.config_proto(),
        }))
    }

    async fn model_statistics(
        &self,
        request: Request<ModelStatisticsRequest>,
    ) -> Result<Response<ModelStatisticsResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.get_ref();
        super::models::statistics(
            &self.0.models.snapshot(),
            self.0.modelless.as_deref(),
            &r.name,
            &r.version,
        )
        .map(Response::new)
        .map_err(|f| f.status)
    }

    async fn model_infer(
        &self,
        request: Request<ModelInferRequest>,
    ) -> Result<Response<ModelInferResponse>, Status> {
        // The server answers this call in `unary.rs`; this is the same answer for a caller that
        // holds the service alone.
        let (metadata, _, message) = request.into_parts();
        let (reply, traceparent) = self.0.unary_infer(metadata.as_ref(), message).await?;
        let mut response = Response::new(reply);
        if let Some(v) = traceparent.and_then(|v| MetadataValue::try_from(v.as_bytes()).ok()) {
            response.metadata_mut().insert("traceparent", v);
        }
        Ok(response)
    }

    async fn repository_index(
        &self,
        request: Request<RepositoryIndexRequest>,
    ) -> Result<Response<RepositoryIndexResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let ready = request.get_ref().ready;
        Ok(Response::new(super::repository::index(
            self.0.control.as_ref(),
            ready,
        )))
    }

    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Result<Response<RepositoryModelLoadResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.into_inner();
        super::repository::load(self.0.control.as_ref(), r.model_name, r.parameters).await?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Result<Response<RepositoryModelUnloadResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let r = request.into_inner();
        super::repository::unload(self.0.control.as_ref(), r.model_name, r.parameters).await?;
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }

    async fn system_shared_memory_status(
        &self,
        request: Request<SystemSharedMemoryStatusRequest>,
    ) -> Result<Response<SystemSharedMemoryStatusResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let name = &request.get_ref().name;
        shared_memory::system_status(&self.0.shared_memory, name).map(Response::new)
    }

    async fn system_shared_memory_register(
        &self,
        request: Request<SystemSharedMemoryRegisterRequest>,
    ) -> Result<Response<SystemSharedMemoryRegisterResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        let peer = request.remote_addr();
        shared_memory::system_register(&self.0.shared_memory, request.get_ref(), peer)?;
        Ok(Response::new(SystemSharedMemoryRegisterResponse {}))
    }

    async fn system_shared_memory_unregister(
        &self,
        request: Request<SystemSharedMemoryUnregisterRequest>,
    ) -> Result<Response<SystemSharedMemoryUnregisterResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        shared_memory::system_unregister(&self.0.shared_memory, &request.get_ref().name);
        Ok(Response::new(SystemSharedMemoryUnregisterResponse {}))
    }

    async fn cuda_shared_memory_status(
        &self,
        request: Request<CudaSharedMemoryStatusRequest>,
    ) -> Result<Response<CudaSharedMemoryStatusResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        shared_memory::cuda_status(&request.get_ref().name)?;
        Ok(Response::new(CudaSharedMemoryStatusResponse::default()))
    }

    async fn cuda_shared_memory_register(
        &self,
        request: Request<CudaSharedMemoryRegisterRequest>,
    ) -> Result<Response<CudaSharedMemoryRegisterResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        Err(shared_memory::cuda_register())
    }

    async fn cuda_shared_memory_unregister(
        &self,
        request: Request<CudaSharedMemoryUnregisterRequest>,
    ) -> Result<Response<CudaSharedMemoryUnregisterResponse>, Status> {
        self.0.authorize(request.metadata()).map_err(|f| f.status)?;
        Ok(Response::new(CudaSharedMemoryUnregisterResponse {}))
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
