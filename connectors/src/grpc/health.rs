//! `grpc.health.v1`: SERVING while the server takes requests, NOT_SERVING before and while it
//! drains (and, on Check, while a served model has a node with no live replica). The empty
//! service name and `inference.GRPCInferenceService` are known; any other is NOT_FOUND on Check
//! and SERVICE_UNKNOWN on Watch, as the protocol asks.
//!
//! Health needs no token: orchestrators' gRPC probes (Kubernetes' among them) send no metadata,
//! and it tells no more than liveness and readiness do. A Watch sends the status, then each change,
//! and ends once the server drains (so an open Watch never holds the shutdown up).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::health_proto::health_check_response::ServingStatus;
use super::health_proto::health_server::Health;
use super::health_proto::{HealthCheckRequest, HealthCheckResponse};
use super::shared::{Phase, Shared};

/// The services this server reports on.
const KNOWN: [&str; 2] = ["", "inference.GRPCInferenceService"];

pub(super) struct HealthService(pub Arc<Shared>);

fn status_of(phase: Phase) -> HealthCheckResponse {
    let status = match phase {
        Phase::Serving => ServingStatus::Serving,
        Phase::Starting | Phase::Draining => ServingStatus::NotServing,
    };
    HealthCheckResponse {
        status: status.into(),
    }
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        if !KNOWN.contains(&request.get_ref().service.as_str()) {
            return Err(Status::not_found("service: unknown service"));
        }
        let mut status = status_of(*self.0.phase.borrow());
        // Serving, but a model cannot answer now (a node with no live replica): not serving.
        if status.status == i32::from(ServingStatus::Serving)
            && self.0.models.snapshot().unready().is_some()
        {
            status.status = ServingStatus::NotServing.into();
        }
        Ok(Response::new(status))
    }

    type WatchStream = ReceiverStream<Result<HealthCheckResponse, Status>>;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let (tx, rx) = mpsc::channel(2);
        if !KNOWN.contains(&request.get_ref().service.as_str()) {
            let unknown = HealthCheckResponse {
                status: ServingStatus::ServiceUnknown.into(),
            };
            let _ = tx.try_send(Ok(unknown));
            return Ok(Response::new(ReceiverStream::new(rx)));
        }
        let mut phase = self.0.phase.subscribe();
        tokio::spawn(async move {
            loop {
                let now = *phase.borrow_and_update();
                if tx.send(Ok(status_of(now))).await.is_err() || now == Phase::Draining {
                    return;
                }
                if phase.changed().await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
