//! Graphs as stream processors: `weir serve` with a JSON-lines stream (file in, file out) and with
//! a zenoh stream (requests published on one key expression, replies on another), as real
//! processes; every request answered exactly once, bad ones with an error document.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zenoh::Wait;

use crate::common::{direct_ort, model, repo, temp_dir, weir_home};

/// A child process SIGKILLed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn graph_with_stream(stream: &str) -> String {
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, batching: {{max_size: 8, max_delay_us: 200}}}}\noutputs:\n  - {{name: probs, from: m.probs}}\nstreams:\n  - {stream}\n",
        model("mlp_a.onnx").display()
    )
}

fn request(id: &str, x: &[f32]) -> Value {
    json!({"id": id, "inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": x}]})
}

fn row(i: usize) -> Vec<f32> {
    (0..64).map(|j| ((i * 64 + j) % 17) as f32 / 17.0).collect()
}

fn probs(reply: &Value) -> Vec<f32> {
    reply["outputs"][0]["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect()
}

fn assert_matches_direct(reply: &Value, x: &[f32]) {
    let want = direct_ort(&model("mlp_a.onnx"), "x", &[1, 64], x);
    let got = probs(reply);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5, "{g} vs {w}");
    }
}

#[test]
fn jsonl_stream_answers_every_line_once_and_errors_in_place() {
    weir_home();
    let dir = temp_dir("jsonl");
    let n = 40;
    let mut lines = Vec::new();
    for i in 0..n {
        lines.push(request(&format!("r{i}"), &row(i)).to_string());
        if i == 10 {
            lines.push("{not json".into());
            lines.push(String::new());
        }
        if i == 20 {
            lines.push(
                json!({"id": "wrong-shape", "inputs": [{"name": "x", "shape": [63], "datatype": "FP32", "data": vec![0.0; 63]}]})
                    .to_string(),
            );
        }
    }
    std::fs::write(dir.0.join("in.jsonl"), lines.join("\n")).expect("write input");
    let graph = dir.0.join("g.yaml");
    std::fs::write(
        &graph,
        graph_with_stream("jsonl: {input: in.jsonl, output: out.jsonl}"),
    )
    .expect("write graph");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg(&graph)
        .current_dir(repo())
        .output()
        .expect("weir serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("42 requests, 2 errors"), "{stderr}");
    let text = std::fs::read_to_string(dir.0.join("out.jsonl")).expect("output written");
    let replies: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(replies.len(), n + 2, "one line per request");
    let mut seen: HashMap<String, usize> = HashMap::new();
    for r in &replies {
        *seen
            .entry(r["id"].as_str().expect("id").to_string())
            .or_default() += 1;
    }
    assert!(seen.values().all(|&c| c == 1), "{seen:?}");
    let by_id: HashMap<&str, &Value> = replies
        .iter()
        .map(|r| (r["id"].as_str().unwrap_or(""), r))
        .collect();
    for i in [0, 11, 39] {
        assert_matches_direct(by_id[format!("r{i}").as_str()], &row(i));
    }
    // The malformed line is named by its line number (12: after r0..r10), the bad shape by its id.
    assert!(by_id["line-12"]["error"]
        .as_str()
        .expect("error")
        .contains("invalid JSON"));
    assert!(by_id["wrong-shape"]["error"]
        .as_str()
        .expect("error")
        .contains("shape"));
}

#[test]
fn zenoh_stream_answers_requests_published_on_a_key_expression() {
    weir_home();
    let dir = temp_dir("zenoh-stream");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let endpoint = format!("tcp/127.0.0.1:{port}");
    let graph = dir.0.join("g.yaml");
    std::fs::write(
        &graph,
        graph_with_stream(&format!(
            "zenoh: {{subscribe: weir/test/in, publish: weir/test/out, listen: [\"{endpoint}\"]}}"
        )),
    )
    .expect("write graph");
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg(&graph)
        .args(["--max-line-bytes", "100000"])
        .current_dir(repo())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("weir serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let _server = Killed(child);
    let mut line = String::new();
    BufReader::new(stderr)
        .read_line(&mut line)
        .expect("reads the first line");
    assert!(line.starts_with("weir streaming"), "{line}");

    let session = weir_connectors::zenoh_peer::open_peer(&[], std::slice::from_ref(&endpoint))
        .expect("test session");
    let replies = session
        .declare_subscriber("weir/test/out")
        .wait()
        .expect("subscriber");
    // Until the graph's subscriber is matched, publications can be missed: ping until answered.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no answer to pings");
        session
            .put("weir/test/in", request("ping", &row(0)).to_string())
            .wait()
            .expect("put");
        if let Ok(Some(_)) = replies.recv_timeout(Duration::from_millis(200)) {
            break;
        }
    }
    while let Ok(Some(_)) = replies.recv_timeout(Duration::from_millis(300)) {}
    // Blocking congestion control, as a client that must not lose requests would send them
    // (zenoh's default for puts drops a sample when the link's queue is full).
    let n = 50;
    let put = |body: String| {
        session
            .put("weir/test/in", body)
            .congestion_control(zenoh::qos::CongestionControl::Block)
            .wait()
            .expect("put");
    };
    for i in 0..n {
        put(request(&format!("z{i}"), &row(i)).to_string());
    }
    put("not a request".to_string());
    // Over the document cap: answered with an error, never parsed.
    put(format!("{{\"id\":\"{}\"}}", "x".repeat(200_000)));
    let mut got: HashMap<String, Value> = HashMap::new();
    let mut errors = Vec::new();
    while got.len() + errors.len() < n + 2 {
        let sample = replies
            .recv_timeout(Duration::from_secs(20))
            .expect("receive")
            .unwrap_or_else(|| panic!("only {} replies", got.len() + errors.len()));
        let v: Value = serde_json::from_slice(&sample.payload().to_bytes()).expect("JSON reply");
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            errors.push(e.to_string());
            continue;
        }
        let id = v["id"].as_str().expect("id").to_string();
        assert!(got.insert(id.clone(), v).is_none(), "{id} answered twice");
    }
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("over the limit of 100000 bytes")),
        "{errors:?}"
    );
    assert_eq!(got.len(), n);
    assert_matches_direct(&got["z7"], &row(7));
    let _ = session.close().wait();
}
