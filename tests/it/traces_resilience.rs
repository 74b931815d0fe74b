//! Traces of the resilience mechanisms, through real processes and the OTLP receiver of
//! [`crate::traces`]: a reply the HAMS release gate holds until its state is durable on the
//! backup (the primary's state link slowed) has one `release wait` span under the request's
//! server span, naming the replicated node; a request whose job ParM reconstructed (its replica,
//! a `weir executor`, frozen with SIGSTOP) has a `reconstruct <node>` span under the model
//! node's hop, naming the coding group, `k` and the reason, and a request answered for real has
//! none.

use std::collections::HashSet;

use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::Value;

use crate::common::{model, signal, temp_dir};
use crate::distributed::{loopback, Executor};
use crate::hams::{pair, track_graph, TRACK};
use crate::ops::{wait_until, Launched};
use crate::serve::{http, http_full, mlp_request};
use crate::traces::{parts, traceparent, Collector, Span};

fn text(span: &Span, key: &str) -> String {
    match span.attributes.get(key) {
        Some(AnyValue::StringValue(v)) => v.clone(),
        other => panic!("{key} of {span:?}: {other:?}"),
    }
}

/// `weir serve` over the graph file `path`, exporting spans to `collector`, once ready.
fn serve(path: &str, collector: &Collector) -> (Launched, String) {
    let server = Launched::start(
        &[],
        &[
            path,
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
    (server, addr)
}

#[test]
fn a_reply_held_until_its_state_is_durable_has_a_release_wait_span() {
    let collector = Collector::start();
    let dir = temp_dir("traces-hams");
    // The primary's state reaches the backup a second late: every reply waits for it.
    let (a, b) = pair(&dir.0, "trh", &TRACK, &["--state-delay-ms", "1000"], &[]);
    let path = track_graph(&dir.0, "track-trh", &[&a, &b], "nspb");
    let (server, addr) = serve(&path.display().to_string(), &collector);
    let trace = "7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c7c";
    let (status, head, body) = http_full(
        &addr,
        "POST",
        "/v2/models/track-trh/infer",
        &[("traceparent", format!("00-{trace}-1212121212121212-01"))],
        &mlp_request(8, "[8]", "FP32"),
    );
    assert_eq!(status, 200, "{body}");
    let (_, server_span, _) = parts(&traceparent(&head));
    wait_until("the request's spans, the release wait's included", || {
        let spans = collector.of_trace(trace);
        spans.iter().any(|s| s.name == "release wait") && spans.iter().any(|s| s.name == "track")
    });
    let spans = collector.of_trace(trace);
    let waits: Vec<&Span> = spans.iter().filter(|s| s.name == "release wait").collect();
    assert_eq!(waits.len(), 1, "{spans:#?}");
    assert_eq!(
        waits[0].parent, server_span,
        "under the request's server span"
    );
    assert_eq!(text(waits[0], "weir.node"), "track");
    assert!(
        waits[0].int("weir.state_version").is_some(),
        "{:?}",
        waits[0]
    );
    drop(server);
    drop((a, b));
}

/// Whether an HTTP infer reply's `reconstructed` output is 1.
fn reconstructed(reply: &str) -> bool {
    let reply: Value = serde_json::from_str(reply).expect("a JSON reply");
    let outputs = reply["outputs"].as_array().expect("outputs");
    let flag = outputs
        .iter()
        .find(|o| o["name"] == "reconstructed")
        .expect("the reconstructed output");
    flag["data"][0].as_i64() == Some(1)
}

#[test]
fn a_reconstructed_answer_has_a_reconstruct_span_under_its_model_hop() {
    let collector = Collector::start();
    let endpoint = loopback();
    let executor = Executor::serving("tr-slow", &endpoint, "affine.onnx");
    let dir = temp_dir("traces-parity");
    // Jobs alternate between an in-process replica and the executor, frozen below: each coding
    // group of two holds one job that can only be reconstructed.
    let yaml = format!(
        "name: affine\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: tr-slow, endpoint: \"{endpoint}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      replicas: [local, tr-slow]\n      routing: round_robin\n      executor: {{timeout_ms: 60000}}\n      resilience: {{parity: {{k: 2, parity_model: {}}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        model("affine.onnx").display(),
        model("affine_parity_k2.onnx").display()
    );
    let path = dir.0.join("affine.yaml");
    std::fs::write(&path, yaml).expect("write graph");
    let (server, addr) = serve(&path.display().to_string(), &collector);
    signal(executor.pid(), "-STOP");
    let body = mlp_request(16, "[16]", "FP32");
    let replies: Vec<(String, bool)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let (addr, body) = (&addr, &body);
                s.spawn(move || {
                    let trace = format!("{:032x}", 0xabc0 + i);
                    let (status, _, reply) = http_full(
                        addr,
                        "POST",
                        "/v2/models/affine/infer",
                        &[("traceparent", format!("00-{trace}-3434343434343434-01"))],
                        body,
                    );
                    assert_eq!(status, 200, "{reply}");
                    (trace, reconstructed(&reply))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client thread"))
            .collect()
    });
    signal(executor.pid(), "-CONT");
    let rebuilt: HashSet<&str> = replies
        .iter()
        .filter(|(_, r)| *r)
        .map(|(t, _)| t.as_str())
        .collect();
    assert!(
        !rebuilt.is_empty(),
        "the frozen replica's jobs were reconstructed"
    );
    for (trace, _) in &replies {
        wait_until("the request's model hop", || {
            collector.of_trace(trace).iter().any(|s| s.name == "m")
        });
    }
    for (trace, was_rebuilt) in &replies {
        let spans = collector.of_trace(trace);
        let spans_named =
            |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
        let rebuilds = spans_named("reconstruct m");
        if !was_rebuilt {
            assert!(rebuilds.is_empty(), "answered for real: {spans:#?}");
            continue;
        }
        assert_eq!(rebuilds.len(), 1, "{spans:#?}");
        let hop = spans_named("m");
        assert_eq!(
            rebuilds[0].parent, hop[0].span_id,
            "under the model node's hop"
        );
        assert_eq!(rebuilds[0].int("weir.parity.k"), Some(2));
        assert!(rebuilds[0].int("weir.parity.group").is_some());
        assert_eq!(text(rebuilds[0], "weir.parity.reason"), "late");
        assert_eq!(text(rebuilds[0], "weir.node"), "m");
    }
    drop(server);
    drop(executor);
}
