//! Traces through real processes, received by a real OTLP/gRPC endpoint in the test that decodes
//! every export with the published OpenTelemetry protobuf definitions (`opentelemetry-proto`): a
//! request through a fan-out graph whose model node runs on a remote `weir executor` is one trace
//! under the client's `traceparent`, its span tree the graph's path (the executor's span under the
//! model node's hop span, each fan-out part's first hop naming its part after the gather, the
//! gather a span of its own); a request without a `traceparent`, or with a malformed one, sampled
//! at 1.0 starts a new trace answered in the response header (HTTP and gRPC); at sampling 0
//! nothing of an unsampled request is exported; a model-less request's trace names the variant
//! and worker chosen for it. The receiver is shared with [`crate::traces_resilience`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::json;
use tonic::metadata::MetadataValue;
use weir_connectors::grpc::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use weir_connectors::grpc::proto::model_infer_request::InferInputTensor;
use weir_connectors::grpc::proto::ModelInferRequest;

use crate::common::temp_dir;
use crate::distributed::{free_port, loopback, Executor};
use crate::fanout::{graph_yaml, sum_model, write_graph};
use crate::grpc::{channel, runtime};
use crate::ops::{access_events, wait_until, Launched};
use crate::serve::{http, http_full, mlp_graph, mlp_request, INFER};

/// One received span, flattened.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(crate) service: String,
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    pub(crate) parent: String,
    pub(crate) name: String,
    pub(crate) attributes: HashMap<String, AnyValue>,
}

impl Span {
    pub(crate) fn int(&self, key: &str) -> Option<i64> {
        match self.attributes.get(key) {
            Some(AnyValue::IntValue(i)) => Some(*i),
            _ => None,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An OTLP/gRPC trace endpoint keeping every span it is sent.
#[derive(Debug, Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .and_then(|a| a.value.as_ref()?.value.clone())
                .map(|v| match v {
                    AnyValue::StringValue(s) => s,
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for span in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                kept.push(Span {
                    service: service.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: span
                        .attributes
                        .into_iter()
                        .filter_map(|a| Some((a.key, a.value?.value?)))
                        .collect(),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A receiver serving on a free loopback port until the test ends, and its endpoint URL.
pub(crate) struct Collector {
    spans: Receiver,
    pub(crate) url: String,
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    pub(crate) fn start() -> Collector {
        let rt = runtime();
        let port = free_port();
        let spans = Receiver::default();
        let service = TraceServiceServer::new(spans.clone());
        rt.spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve(([127, 0, 0, 1], port).into())
                .await;
        });
        Collector {
            spans,
            url: format!("http://127.0.0.1:{port}"),
            _runtime: rt,
        }
    }

    pub(crate) fn of_trace(&self, trace_id: &str) -> Vec<Span> {
        let spans = self.spans.0.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    fn all(&self) -> Vec<Span> {
        self.spans.0.lock().unwrap().clone()
    }
}

/// The `traceparent` header of an HTTP response head.
pub(crate) fn traceparent(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("traceparent")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no traceparent in {head}"))
}

/// `(trace id, span id, sampled)` of a `traceparent`.
pub(crate) fn parts(tp: &str) -> (String, String, bool) {
    let f: Vec<&str> = tp.split('-').collect();
    assert_eq!(f.len(), 4, "{tp}");
    (f[1].to_string(), f[2].to_string(), f[3] == "01")
}

/// A fan-out request: a one-channel 6×8 image and two boxes kept (scores above 0.5).
pub(crate) fn fanout_body() -> Vec<u8> {
    json!({"inputs": [
        {"name": "image", "datatype": "UINT8", "shape": [6, 8, 1], "data": vec![1; 48]},
        {"name": "boxes", "datatype": "FP32", "shape": [2, 4], "data": [0, 0, 2, 2, 3, 1, 5, 3]},
        {"name": "scores", "datatype": "FP32", "shape": [2], "data": [0.9, 0.8]},
    ]})
    .to_string()
    .into_bytes()
}

#[test]
fn a_request_through_a_remote_executor_and_a_fanout_is_one_trace_along_the_graph() {
    let collector = Collector::start();
    let dir = temp_dir("traces-fanout");
    let model = sum_model(&dir.0);
    let executor = Executor::serving_with(
        "tr-e",
        &loopback(),
        &model.display().to_string(),
        &["--otlp-endpoint", collector.url.as_str()],
    );
    let yaml = graph_yaml(&model, 1024, Some((&[&executor], &["tr-e"])));
    let path = write_graph(&dir.0, &yaml, 1024);
    let path = path.display().to_string();
    let server = Launched::start(
        &[],
        &[
            path.as_str(),
            "--http",
            "127.0.0.1:0",
            "--otlp-endpoint",
            collector.url.as_str(),
        ],
        &["http"],
    );
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (status, head, body) = http_full(
        &addr,
        "POST",
        "/v2/models/fanout/infer",
        &[("traceparent", client.to_string())],
        &fanout_body(),
    );
    assert_eq!(status, 200, "{body}");
    let (trace, server_span, sampled) = parts(&traceparent(&head));
    assert_eq!(
        trace, "0af7651916cd43dd8448eb211c80319c",
        "the client's trace"
    );
    assert!(sampled);
    let names =
        |spans: &[Span]| -> HashSet<String> { spans.iter().map(|s| s.name.clone()).collect() };
    wait_until("the trace's spans, the executor's included", || {
        let n = names(&collector.of_trace(&trace));
        [
            "ingress",
            "crops",
            "f",
            "m",
            "executor m",
            "idx",
            "name",
            "all",
        ]
        .iter()
        .all(|want| n.contains(*want))
    });
    // Both processes' batches are in by now; let any late span of this trace arrive too.
    std::thread::sleep(Duration::from_millis(800));
    let spans = collector.of_trace(&trace);
    let by_id: HashMap<&str, &Span> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let parent_of = |s: &Span| by_id.get(s.parent.as_str()).map(|p| p.name.as_str());
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    // The server span: the response's, under the client's span.
    let root = by_id.get(server_span.as_str()).expect("the server span");
    assert_eq!(root.name, "http infer fanout");
    assert_eq!(root.parent, "b7ad6b7169203331");
    assert_eq!(root.service, "weir");
    // Every other span's parent is in the trace: one tree.
    for s in &spans {
        if s.span_id != server_span {
            assert!(by_id.contains_key(s.parent.as_str()), "orphan {s:?}");
        }
    }
    // The graph's path: ingress → crops → (per part) f → m → idx → name → all.
    assert_eq!(parent_of(named("ingress")[0]), Some("http infer fanout"));
    assert_eq!(parent_of(named("crops")[0]), Some("ingress"));
    // The parts' hops (the gather's reply carries them, its part entries kept as gathered-part
    // entries: the row is whole again), each under the fan-out, naming its part of two.
    assert!(!named("f").is_empty());
    for f in named("f") {
        assert_eq!(parent_of(f), Some("crops"));
        assert_eq!(f.int("weir.part_count"), Some(2), "{f:?}");
        assert!(
            f.int("weir.part_index").is_some_and(|i| i == 0 || i == 1),
            "{f:?}"
        );
    }
    for m in named("m") {
        assert_eq!(parent_of(m), Some("f"));
        assert_eq!(
            m.attributes.get("weir.remote"),
            Some(&AnyValue::BoolValue(true))
        );
    }
    for e in named("executor m") {
        assert_eq!(
            parent_of(e),
            Some("m"),
            "the executor's span is under the hop"
        );
        assert_eq!(e.service, "weir-executor-tr-e");
        assert!(e.int("weir.batch_size").is_some_and(|b| b >= 1), "{e:?}");
    }
    for i in named("idx") {
        assert_eq!(parent_of(i), Some("m"));
    }
    let gather = named("all");
    assert_eq!(gather.len(), 1, "the gather joins the parts once");
    assert!(gather[0].int("weir.inputs").is_some_and(|n| n >= 2));
    assert_eq!(
        gather[0].int("weir.part_index"),
        None,
        "the gathered row is whole"
    );
    drop(server);
    drop(executor);
}

/// One gRPC inference of the mlp graph with `traceparent` metadata when given; returns the
/// `traceparent` the response's metadata carries.
fn grpc_traced(addr: &str, parent: Option<&str>) -> String {
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(addr).await);
        let mut request = tonic::Request::new(ModelInferRequest {
            model_name: "mlp".into(),
            inputs: vec![InferInputTensor {
                name: "x".into(),
                datatype: "FP32".into(),
                shape: vec![1, 64],
                ..Default::default()
            }],
            raw_input_contents: vec![0.25f32.to_le_bytes().repeat(64).into()],
            ..Default::default()
        });
        if let Some(p) = parent {
            let value = MetadataValue::try_from(p).expect("metadata");
            request.metadata_mut().insert("traceparent", value);
        }
        let response = client.model_infer(request).await.expect("gRPC infer");
        response
            .metadata()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .expect("traceparent metadata")
            .to_string()
    })
}

#[test]
fn without_or_with_a_malformed_traceparent_a_new_trace_starts_and_is_answered() {
    let collector = Collector::start();
    let server = Launched::start(
        &[mlp_graph()],
        &[
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--otlp-endpoint",
            collector.url.as_str(),
            "--trace-sampling",
            "1",
            "--log-format",
            "json",
        ],
        &["http", "grpc"],
    );
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let body = mlp_request(64, "[64]", "FP32");
    let (status, head, _) = http_full(&addr, "POST", INFER, &[], &body);
    assert_eq!(status, 200);
    let (fresh, _, sampled) = parts(&traceparent(&head));
    assert!(sampled, "sampling 1.0 samples every new trace");
    let malformed = "00-not-a-trace-01";
    let (status, head, _) = http_full(
        &addr,
        "POST",
        INFER,
        &[("traceparent", malformed.to_string())],
        &body,
    );
    assert_eq!(
        status, 200,
        "a malformed traceparent never fails the request"
    );
    let (renewed, _, sampled) = parts(&traceparent(&head));
    assert!(sampled);
    assert_ne!(renewed, fresh, "a new trace");
    let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (grpc_trace, _, _) = parts(&grpc_traced(server.addr("grpc"), Some(client)));
    assert_eq!(grpc_trace, "4bf92f3577b34da6a3ce929d0e0e4736");
    for (trace, root) in [
        (&fresh, "http infer mlp"),
        (&renewed, "http infer mlp"),
        (&grpc_trace, "grpc infer mlp"),
    ] {
        wait_until("the request's spans", || {
            let spans = collector.of_trace(trace);
            spans.iter().any(|s| s.name == root) && spans.iter().any(|s| s.name == "ingress")
        });
    }
    // The access log carries each request's trace id.
    wait_until("access lines with trace ids", || {
        let ids: HashSet<String> = access_events(&server.log_text())
            .iter()
            .filter_map(|e| e["trace_id"].as_str().map(str::to_string))
            .collect();
        ids.contains(&fresh) && ids.contains(&renewed) && ids.contains(&grpc_trace)
    });
}

#[test]
fn at_sampling_zero_unsampled_requests_export_nothing() {
    let collector = Collector::start();
    let server = Launched::start(
        &[mlp_graph()],
        &[
            "--http",
            "127.0.0.1:0",
            "--otlp-endpoint",
            collector.url.as_str(),
        ],
        &["http"],
    );
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let body = mlp_request(64, "[64]", "FP32");
    let mut unsampled = Vec::new();
    for i in 0..5 {
        let headers = if i % 2 == 0 {
            Vec::new()
        } else {
            // A client that decided not to sample.
            vec![(
                "traceparent",
                "00-11111111111111111111111111111111-2222222222222222-00".to_string(),
            )]
        };
        let (status, head, _) = http_full(&addr, "POST", INFER, &headers, &body);
        assert_eq!(status, 200);
        let (trace, _, sampled) = parts(&traceparent(&head));
        assert!(!sampled);
        unsampled.push(trace);
    }
    // A sampled client's request afterwards: once its spans are in, anything exported before
    // it (the queue is first in, first out) is in too.
    let marker = "00-33333333333333333333333333333333-4444444444444444-01";
    let (status, _, _) = http_full(
        &addr,
        "POST",
        INFER,
        &[("traceparent", marker.to_string())],
        &body,
    );
    assert_eq!(status, 200);
    wait_until("the sampled client's spans", || {
        !collector
            .of_trace("33333333333333333333333333333333")
            .is_empty()
    });
    let stray: Vec<Span> = collector
        .all()
        .into_iter()
        .filter(|s| s.trace_id != "33333333333333333333333333333333")
        .collect();
    assert!(stray.is_empty(), "unsampled spans exported: {stray:?}");
    assert!(unsampled.iter().all(|t| collector.of_trace(t).is_empty()));
}

#[test]
fn a_model_less_request_s_trace_names_the_variant_and_worker_it_chose() {
    let collector = Collector::start();
    let dir = temp_dir("traces-modelless");
    let repository = dir.0.join("repository");
    let out = crate::model_repository::register("digits_tiny", &repository, &["--no-int8"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Launched::start(
        &[],
        &[
            "--http",
            "127.0.0.1:0",
            "--repository",
            repository.to_str().expect("utf-8 path"),
            "--otlp-endpoint",
            collector.url.as_str(),
        ],
        &["http"],
    );
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let body = json!({"id": "traced", "parameters": {},
        "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
                    "data": crate::modelless_serve::PIXELS.to_vec()}]})
    .to_string();
    let trace = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
    let (status, head, reply) = http_full(
        &addr,
        "POST",
        "/v2/models/digits/infer",
        &[("traceparent", format!("00-{trace}-6b6b6b6b6b6b6b6b-01"))],
        body.as_bytes(),
    );
    assert_eq!(status, 200, "{reply}");
    let reply: serde_json::Value = serde_json::from_str(&reply).expect("json reply");
    let (answered_trace, server_span, sampled) = parts(&traceparent(&head));
    assert_eq!(answered_trace, trace);
    assert!(sampled);
    // The choice is a child of the request's server span and names what the reply names.
    wait_until("the choice and the graph's spans", || {
        let spans = collector.of_trace(trace);
        spans.iter().any(|s| s.name == "choose digits")
            && spans.iter().any(|s| s.span_id == server_span)
    });
    let spans = collector.of_trace(trace);
    let choose = spans
        .iter()
        .find(|s| s.name == "choose digits")
        .expect("the choice span");
    assert_eq!(choose.parent, server_span, "{spans:#?}");
    let text = |s: &Span, key: &str| match s.attributes.get(key) {
        Some(AnyValue::StringValue(v)) => v.clone(),
        other => panic!("{key}: {other:?}"),
    };
    assert_eq!(text(choose, "weir.task"), "digits");
    assert_eq!(
        text(choose, "weir.variant"),
        reply["parameters"]["variant"].as_str().expect("variant")
    );
    assert_eq!(
        text(choose, "weir.worker"),
        reply["parameters"]["worker"].as_str().expect("worker")
    );
    assert_eq!(
        choose.attributes.get("weir.cold_start"),
        Some(&AnyValue::BoolValue(true)),
        "the first request loads the variant"
    );
    assert_eq!(choose.int("weir.moves"), Some(0));
    // The variant's graph ran under the same server span: its model node's hop is in the trace.
    assert!(
        spans
            .iter()
            .any(|s| s.parent == server_span && s.name != "choose digits"),
        "{spans:#?}"
    );
}
