//! An OTLP/gRPC trace collector inside the benchmark: it decodes every export with the published
//! OpenTelemetry protobuf definitions (`opentelemetry-proto`) and counts the spans per
//! `service.name`, so the table can show that a sampled run's spans really left the process and
//! arrived. It keeps counts only, never the spans: a collector that kept them would grow with the
//! run and take memory from the server being measured.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;

/// Spans received, per `service.name`.
#[derive(Debug, Clone, Default)]
struct Counts(Arc<Mutex<HashMap<String, u64>>>);

#[tonic::async_trait]
impl TraceService for Counts {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                    AnyValue::StringValue(s) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_default();
            let spans: usize = rs.scope_spans.iter().map(|s| s.spans.len()).sum();
            *counts.entry(service).or_default() += spans as u64;
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A collector serving on a loopback port of its own runtime until dropped.
pub(crate) struct Receiver {
    counts: Counts,
    /// The endpoint to export to (`http://127.0.0.1:<port>`).
    pub(crate) url: String,
    _runtime: tokio::runtime::Runtime,
}

impl Receiver {
    /// Starts a collector on a free loopback port.
    pub(crate) fn start() -> Result<Receiver> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let url = format!("http://{}", listener.local_addr()?);
        let counts = Counts::default();
        let service = TraceServiceServer::new(counts.clone());
        runtime.spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        Ok(Receiver {
            counts,
            url,
            _runtime: runtime,
        })
    }

    /// Spans received so far from service `service`.
    pub(crate) fn spans(&self, service: &str) -> u64 {
        let counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(service).copied().unwrap_or(0)
    }
}
