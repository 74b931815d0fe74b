//! Offline jobs (`POST /v2/offline`) through a real `weir serve`: a file of requests answered once
//! each into another file with the job's parameters added, hostile submissions refused naming the
//! field while inference goes on, and the utilisation throttle pausing a job that is then
//! cancelled with every request it read still answered once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::temp_dir;
use crate::serve::{http, mlp_graph, Server};

fn request(id: &str) -> String {
    json!({"id": id, "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
           "data": vec![0.25f32; 64]}]})
    .to_string()
}

fn submit(server: &Server, body: &Value) -> (u16, Value) {
    let (status, text) = server.post("/v2/offline", &[], body.to_string().as_bytes());
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn status(server: &Server, id: &str) -> Value {
    let (code, text) = server.get(&format!("/v2/offline/{id}"));
    assert_eq!(code, 200, "{text}");
    serde_json::from_str(&text).expect("status JSON")
}

fn wait_for(server: &Server, id: &str, states: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = status(server, id);
        if states.iter().any(|w| s["state"] == *w) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "job never reached {states:?}: {s}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reply ids in `path`, with how often each appears.
fn reply_ids(path: &std::path::Path) -> (HashMap<String, usize>, Vec<Value>) {
    let text = std::fs::read_to_string(path).expect("output file");
    let docs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("reply line is JSON"))
        .collect();
    let mut ids = HashMap::new();
    for d in &docs {
        *ids.entry(d["id"].as_str().expect("id").to_string())
            .or_default() += 1;
    }
    (ids, docs)
}

#[test]
fn a_job_answers_every_line_once_with_its_parameters() {
    let dir = temp_dir("offline-run");
    let mut lines: Vec<String> = (0..300).map(|i| request(&format!("r{i}"))).collect();
    lines.push("{not json".to_string());
    lines.push(r#"{"id": "bad-input", "inputs": [{"name": "nope", "shape": [1], "datatype": "FP32", "data": [1]}]}"#.to_string());
    std::fs::write(dir.0.join("in.jsonl"), lines.join("\n")).unwrap();
    let root = dir.0.display().to_string();
    let server = Server::start(
        &[mlp_graph()],
        &["--offline-dir", &root, "--offline-max-utilisation", "1"],
    );
    let (code, job) = submit(
        &server,
        &json!({"model": "mlp", "input": "in.jsonl", "output": "out.jsonl",
                "parameters": {"min_accuracy": 0.9}}),
    );
    assert_eq!(code, 202, "{job}");
    let id = job["id"].as_str().expect("job id").to_string();
    let done = wait_for(&server, &id, &["done", "failed"]);
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(done["requests"], 302);
    assert_eq!(done["answered"], 302);
    assert_eq!(done["errors"], 2);
    let (ids, docs) = reply_ids(&dir.0.join("out.jsonl"));
    assert_eq!(docs.len(), 302);
    for i in 0..300 {
        assert_eq!(ids.get(&format!("r{i}")), Some(&1), "r{i} answered once");
    }
    assert_eq!(ids.get("bad-input"), Some(&1));
    let ok = docs.iter().find(|d| d["id"] == "r7").expect("r7");
    assert_eq!(ok["parameters"]["min_accuracy"], 0.9);
    assert!(docs
        .iter()
        .any(|d| d["id"] == "bad-input" && d["error"].is_string()));
    let (code, list) = server.get("/v2/offline");
    assert_eq!(code, 200);
    assert!(list.contains(&id), "{list}");
}

#[test]
fn hostile_submissions_are_refused_naming_the_field() {
    let dir = temp_dir("offline-hostile");
    std::fs::write(dir.0.join("in.jsonl"), request("a")).unwrap();
    std::fs::write(dir.0.join("taken.jsonl"), "").unwrap();
    let root = dir.0.display().to_string();
    let server = Server::start(&[mlp_graph()], &["--offline-dir", &root]);
    let cases = [
        (
            json!({"model": "mlp", "input": "../in.jsonl", "output": "o1"}),
            "input",
        ),
        (
            json!({"model": "mlp", "input": "/etc/passwd", "output": "o2"}),
            "input",
        ),
        (
            json!({"model": "mlp", "input": "missing.jsonl", "output": "o3"}),
            "input",
        ),
        (
            json!({"model": "mlp", "input": "in.jsonl", "output": "taken.jsonl"}),
            "output",
        ),
        (
            json!({"model": "mlp", "input": "in.jsonl", "output": "sub/../../x"}),
            "output",
        ),
        (
            json!({"model": "nope", "input": "in.jsonl", "output": "o4"}),
            "model",
        ),
        (
            json!({"model": "mlp", "input": "in.jsonl", "output": "o5", "extra": 1}),
            "body",
        ),
        (
            json!({"model": "mlp", "input": "x".repeat(5000), "output": "o6"}),
            "input",
        ),
    ];
    for (body, field) in cases {
        let (code, reply) = submit(&server, &body);
        assert_eq!(code, 400, "{body} → {reply}");
        let message = reply["error"].as_str().unwrap_or_default();
        assert!(message.starts_with(field), "{body} → {message}");
    }
    let huge = vec![b' '; 100 << 10];
    assert_eq!(server.post("/v2/offline", &[], &huge).0, 413);
    assert_eq!(server.get("/v2/offline/job-999").0, 404);
    assert_eq!(server.get("/v2/offline/../../etc").0, 404);
    assert_eq!(server.post_good(&[]).0, 200, "inference still answered");
    assert!(!dir.0.parent().unwrap().join("x").exists());

    let off = Server::start(&[mlp_graph()], &[]);
    let (code, reply) = submit(&off, &json!({"model": "mlp", "input": "a", "output": "b"}));
    assert_eq!(code, 404);
    assert!(reply["error"]
        .as_str()
        .unwrap_or_default()
        .contains("--offline-dir"));
}

#[test]
fn a_busy_machine_pauses_a_job_and_a_cancelled_job_answers_what_it_read() {
    let dir = temp_dir("offline-throttle");
    let lines: Vec<String> = (0..2000).map(|i| request(&format!("t{i}"))).collect();
    std::fs::write(dir.0.join("in.jsonl"), lines.join("\n")).unwrap();
    let root = dir.0.display().to_string();
    // Threshold 0: any CPU use at all pauses offline work.
    let server = Server::start(
        &[mlp_graph()],
        &["--offline-dir", &root, "--offline-max-utilisation", "0"],
    );
    let (code, job) = submit(
        &server,
        &json!({"model": "mlp", "input": "in.jsonl", "output": "out.jsonl"}),
    );
    assert_eq!(code, 202, "{job}");
    let id = job["id"].as_str().expect("job id").to_string();
    let paused = wait_for(&server, &id, &["paused"]);
    let reason = paused["paused_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("CPU utilisation"), "{paused}");
    assert_eq!(server.post_good(&[]).0, 200, "online requests go on");
    let (code, _) = http(
        &server.addr,
        "DELETE",
        &format!("/v2/offline/{id}"),
        &[],
        b"",
    );
    assert_eq!(code, 200);
    let end = wait_for(&server, &id, &["cancelled", "done"]);
    assert_eq!(end["state"], "cancelled", "{end}");
    let read = end["requests"].as_u64().expect("count");
    assert!(read < 2000, "a paused job read everything: {end}");
    assert_eq!(end["answered"], read);
    let (ids, docs) = reply_ids(&dir.0.join("out.jsonl"));
    assert_eq!(docs.len() as u64, read);
    assert!(ids.values().all(|n| *n == 1));
}
