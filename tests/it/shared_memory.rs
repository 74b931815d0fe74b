//! Triton's system shared memory extension on a real `weir serve`: Triton's clients move tensors
//! through POSIX shared memory over HTTP and gRPC (answers equal to ONNX Runtime's and to the same
//! requests with their tensors in the message, mistakes refused naming what is wrong); the
//! extension is off unless asked for, registers only over loopback, and refuses hostile
//! registrations naming the field, the process answering throughout; an input read from a region
//! is charged to the byte budget before it is read. `perf_analyzer --shared-memory system` is in
//! `triton_tools.rs`.

use std::net::{IpAddr, UdpSocket};
use std::process::Stdio;

use serde_json::Value;

use crate::common::model;
use crate::grpc::Served;
use crate::reference::python;
use crate::serve::{http, mlp_graph, Server};

#[test]
fn tritons_clients_move_tensors_through_shared_memory_over_http_and_grpc() {
    let served = Served::start(&[mlp_graph()], &["--shared-memory", "system"]);
    let onnx = model("mlp_a.onnx").display().to_string();
    for (protocol, url) in [("http", &served.http), ("grpc", &served.grpc)] {
        let args = [protocol, "--url", url, "--onnx", &onnx, "--model", "mlp"];
        let (code, out, err) = python("shm_client.py", &args, &Value::Null);
        assert_eq!(code, 0, "shm_client.py {protocol}:\n{out}\n{err}");
        let seen: Value = serde_json::from_str(out.trim()).expect("one JSON line");
        assert_eq!(seen["requests"], 20, "{protocol}: {seen}");
        assert_eq!(seen["max_error"], 0.0, "{protocol}: {seen}");
        assert_eq!(seen["status"]["out"][1], 8, "{protocol}: {seen}");
        assert_eq!(seen["status"]["out"][2], 16 + 40, "{protocol}: {seen}");
        let errors = [
            "byte_size",
            "cuda",
            "missing_key",
            "past_object",
            "shrunk",
            "small_output",
            "taken_name",
            "unknown_region",
        ];
        assert_eq!(seen["errors"], serde_json::json!(errors), "{protocol}");
        assert_eq!(
            seen["after_unregister"],
            serde_json::json!([["out"], []]),
            "{protocol}"
        );
    }
}

/// An address of this host other than loopback, when it has one (the interface a default route
/// leaves by; a UDP `connect` sends nothing).
fn outward_address() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

fn register(addr: &str, name: &str, body: &str) -> (u16, String) {
    let path = format!("/v2/systemsharedmemory/region/{name}/register");
    http(addr, "POST", &path, &[], body.as_bytes())
}

#[test]
fn shared_memory_is_off_unless_asked_for_and_registers_only_over_loopback() {
    // Off: registrations are refused saying how to turn it on, requests naming a region are
    // refused naming the field, the metadata does not name the extension.
    let off = Server::start(&[mlp_graph()], &[]);
    let (code, body) = register(&off.addr, "r", r#"{"key": "/k", "byte_size": 8}"#);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("--shared-memory system"), "{body}");
    assert_eq!(off.get("/v2/systemsharedmemory/status"), (200, "[]".into()));
    let (_, metadata) = off.get("/v2");
    assert!(!metadata.contains("system_shared_memory"), "{metadata}");
    let request = r#"{"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
        "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 256}}]}"#;
    let (code, body) = off.post("/v2/models/mlp/infer", &[], request.as_bytes());
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("inputs[0] (x).parameters.shared_memory_region"),
        "{body}"
    );
    assert!(body.contains("--shared-memory system"), "{body}");

    // On, listening on every address.
    let on = Server::start_at(
        "0.0.0.0:0",
        &[mlp_graph()],
        &["--shared-memory", "system"],
        Stdio::null(),
    );
    let port = on.addr.rsplit(':').next().expect("a port").to_string();
    let local = format!("127.0.0.1:{port}");
    let (_, metadata) = http(&local, "GET", "/v2", &[], b"");
    assert!(metadata.contains("system_shared_memory"), "{metadata}");
    let object = std::path::Path::new("/dev/shm").join(format!("weir_it_{}", std::process::id()));
    std::fs::write(&object, [0u8; 64]).expect("a shared memory object");
    let key = format!("/{}", object.file_name().unwrap().to_string_lossy());
    let link = object.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&object, &link).expect("a link under /dev/shm");
    let link_key = format!("/{}", link.file_name().unwrap().to_string_lossy());
    let long = "n".repeat(300);
    let hostile = [
        ("r", "not json".to_string(), "not JSON"),
        ("r", r#"{"key": 5, "byte_size": 8}"#.to_string(), "key"),
        ("r", format!(r#"{{"key": "{key}"}}"#), "byte_size"),
        (
            "r",
            format!(r#"{{"key": "{key}", "byte_size": -1}}"#),
            "byte_size",
        ),
        (
            "r",
            format!(r#"{{"key": "{key}", "offset": 18446744073709551615, "byte_size": 2}}"#),
            "offset",
        ),
        (
            "r",
            format!(r#"{{"key": "{key}", "byte_size": 65}}"#),
            "offset",
        ),
        (
            "r",
            r#"{"key": "/../etc/passwd", "byte_size": 1}"#.to_string(),
            "key",
        ),
        (
            "r",
            format!(r#"{{"key": "{link_key}", "byte_size": 1}}"#),
            "symbolic link",
        ),
        (
            &long,
            format!(r#"{{"key": "{key}", "byte_size": 1}}"#),
            "name",
        ),
    ];
    for (name, body, field) in &hostile {
        let (code, reply) = register(&local, name, body);
        assert_eq!(code, 400, "{body}: {reply}");
        assert!(reply.contains(field), "{body}: {reply} should name {field}");
    }
    std::fs::remove_file(&link).expect("link removed");
    assert_eq!(
        http(&local, "GET", "/v2/systemsharedmemory/status", &[], b"").1,
        "[]"
    );
    // A client on another host is refused; the same registration over loopback is kept.
    let good = format!(r#"{{"key": "{key}", "offset": 0, "byte_size": 64}}"#);
    match outward_address() {
        Some(ip) => {
            let outside = format!("{ip}:{port}");
            let (code, reply) = register(&outside, "r", &good);
            assert_eq!(code, 403, "{reply}");
            assert!(reply.contains("loopback"), "{reply}");
        }
        None => eprintln!("no address besides loopback here: the remote refusal is not exercised"),
    }
    assert_eq!(register(&local, "r", &good).0, 200);
    let (code, status) = http(
        &local,
        "GET",
        "/v2/systemsharedmemory/region/r/status",
        &[],
        b"",
    );
    assert_eq!(code, 200, "{status}");
    let status: Value = serde_json::from_str(&status).expect("status JSON");
    assert_eq!(status[0]["key"], key.as_str());
    assert_eq!(status[0]["byte_size"], 64);
    let unknown = http(
        &local,
        "GET",
        "/v2/systemsharedmemory/region/q/status",
        &[],
        b"",
    );
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    assert_eq!(
        http(&local, "GET", "/v2/cudasharedmemory/status", &[], b"").1,
        "[]"
    );
    std::fs::remove_file(&object).expect("object removed");
    // The server answered throughout.
    assert_eq!(http(&local, "GET", "/v2/health/ready", &[], b"").0, 200);
}

/// An input read from shared memory is charged to the request byte budget before it is read: past
/// the budget the request is refused as a body past it is (503), and a smaller one is answered.
#[test]
fn inputs_in_shared_memory_are_charged_to_the_byte_budget() {
    let server = Server::start(
        &[mlp_graph()],
        &[
            "--shared-memory",
            "system",
            "--max-inflight-bytes",
            "100000",
            "--max-body-bytes",
            "100000",
        ],
    );
    let rows = 400; // 400 × 64 floats: 102,400 bytes, past the budget
    let object =
        std::path::Path::new("/dev/shm").join(format!("weir_it_budget_{}", std::process::id()));
    std::fs::write(&object, vec![0u8; rows * 256]).expect("a shared memory object");
    let key = format!("/{}", object.file_name().unwrap().to_string_lossy());
    let body = format!(r#"{{"key": "{key}", "byte_size": {}}}"#, rows * 256);
    let registered = register(&server.addr, "big", &body);
    let request = |n: usize| {
        format!(
            r#"{{"inputs": [{{"name": "x", "shape": [{n}, 64], "datatype": "FP32",
                "parameters": {{"shared_memory_region": "big", "shared_memory_byte_size": {}}}}}]}}"#,
            n * 256
        )
    };
    let over = server.post("/v2/models/mlp/infer", &[], request(rows).as_bytes());
    let within = server.post("/v2/models/mlp/infer", &[], request(2).as_bytes());
    std::fs::remove_file(&object).expect("object removed");
    assert_eq!(registered.0, 200, "{}", registered.1);
    assert_eq!(over.0, 503, "{}", over.1);
    assert_eq!(within.0, 200, "{}", within.1);
    let reply: Value = serde_json::from_str(&within.1).expect("reply JSON");
    assert_eq!(reply["outputs"][0]["shape"], serde_json::json!([2, 10]));
}
