//! `weir serve` as a real process, spoken to with raw HTTP and with Triton's own Python client
//! (`tritonclient[http]`, installed by scripts/setup.sh), answers compared with onnxruntime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{model, repo, signal, temp_dir, weir_home, TempDir};

pub(crate) const INFER: &str = "/v2/models/mlp/infer";

/// A `weir serve` process, SIGKILLed when dropped (so a failing test leaves nothing behind).
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) addr: String,
    _dir: TempDir,
}

pub(crate) fn mlp_graph() -> String {
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, batching: {{max_size: 16, max_delay_us: 500}}}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    )
}

fn squeezenet_graph() -> String {
    format!(
        "name: sq\ninputs:\n  - {{name: image, dtype: f32, shape: [3, 224, 224]}}\nnodes:\n  - model: {{id: s, path: {}, inputs: {{data_0: image}}, executor: {{instances: 2}}}}\noutputs:\n  - {{name: probs, from: s}}\n",
        model("squeezenet_random.onnx").display()
    )
}

/// `weir serve` over `graphs`, each written to a file in a fresh temporary folder (returned, so it
/// lives as long as the process needs it).
pub(crate) fn serve_command(tag: &str, graphs: &[String]) -> (Command, TempDir) {
    weir_home();
    let dir = temp_dir(tag);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.arg("serve").current_dir(repo());
    for (i, g) in graphs.iter().enumerate() {
        let path = dir.0.join(format!("g{i}.yaml"));
        std::fs::write(&path, g).expect("write graph");
        cmd.arg(path);
    }
    (cmd, dir)
}

impl Server {
    pub(crate) fn start(graphs: &[String], extra: &[&str]) -> Server {
        Server::start_with_stderr(graphs, extra, Stdio::null())
    }

    /// As [`Server::start`], with the process's log (stderr) going to `stderr`.
    pub(crate) fn start_with_stderr(graphs: &[String], extra: &[&str], stderr: Stdio) -> Server {
        Server::start_at("127.0.0.1:0", graphs, extra, stderr)
    }

    /// As [`Server::start_with_stderr`], listening on `http` (`addr` is then what it bound).
    pub(crate) fn start_at(http: &str, graphs: &[String], extra: &[&str], stderr: Stdio) -> Server {
        let (mut cmd, dir) = serve_command("serve", graphs);
        cmd.args(["--http", http])
            .args(extra)
            .env_remove("WEIR_AUTH_TOKEN")
            .env_remove("WEIR_ZENOH_CONFIG");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("weir serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reads the address line");
        let addr = line
            .trim()
            .strip_prefix("weir serving http://")
            .unwrap_or_else(|| panic!("unexpected first line `{line}`"))
            .to_string();
        let server = Server {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // 401: serving, behind a token (the auth test checks readiness itself).
        while !matches!(server.get("/v2/health/ready").0, 200 | 401) {
            assert!(Instant::now() < deadline, "server never became ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        http(&self.addr, "GET", path, &[], b"")
    }

    pub(crate) fn post(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> (u16, String) {
        http(&self.addr, "POST", path, headers, body)
    }

    /// Posts `bytes` to `path` as the one element of the BYTES input `input` (shape `[1]`), in
    /// the binary extension: the JSON header, then the element's length (4 bytes, little-endian)
    /// and the bytes. Returns the status and reply body.
    pub(crate) fn post_bytes_element(
        &self,
        path: &str,
        input: &str,
        bytes: &[u8],
    ) -> (u16, String) {
        let header = format!(
            r#"{{"inputs":[{{"name":"{input}","shape":[1],"datatype":"BYTES","parameters":{{"binary_data_size":{}}}}}]}}"#,
            bytes.len() + 4
        );
        let length = u32::try_from(bytes.len()).expect("an element under 4 GiB");
        let body = [header.as_bytes(), &length.to_le_bytes(), bytes].concat();
        self.post(
            path,
            &[
                ("Content-Type", "application/octet-stream".into()),
                ("Inference-Header-Content-Length", header.len().to_string()),
            ],
            &body,
        )
    }

    /// A well-formed request to the mlp graph.
    pub(crate) fn post_good(&self, headers: &[(&str, String)]) -> (u16, String) {
        self.post(INFER, headers, &mlp_request(64, "[64]", "FP32"))
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn sigterm(&self) {
        signal(self.child.id(), "-TERM");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on its own connection; returns status and body.
pub(crate) fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    let (status, _, body) = http_full(addr, method, path, headers, body);
    (status, body)
}

/// [`http`], with the response's head (status line and headers) too.
pub(crate) fn http_full(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String, String) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (0, String::new(), String::new());
    };
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if s.write_all(head.as_bytes())
        .and_then(|_| s.write_all(body))
        .is_err()
    {
        return (0, String::new(), String::new());
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .map(|(h, b)| (h.to_string(), b.to_string()))
        .unwrap_or_default();
    (status, head, body)
}

/// A served model as the Python client sees it, and the ONNX file it checks answers against.
struct Served {
    model: &'static str,
    input: &'static str,
    output: &'static str,
    onnx: &'static str,
    onnx_input: &'static str,
    shape: &'static str,
}

const SQUEEZENET: Served = Served {
    model: "sq",
    input: "image",
    output: "probs",
    onnx: "squeezenet_random.onnx",
    onnx_input: "data_0",
    shape: "3,224,224",
};
const MLP: Served = Served {
    model: "mlp",
    input: "x",
    output: "probs",
    onnx: "mlp_a.onnx",
    onnx_input: "x",
    shape: "64",
};

/// Arguments of `triton_client.py <command>` for `served` on `addr`, then `extra`.
fn client_args(command: &str, addr: &str, served: &Served, extra: &[&str]) -> Vec<String> {
    let onnx = model(served.onnx).display().to_string();
    let mut args: Vec<String> = [
        command,
        "--url",
        addr,
        "--model",
        served.model,
        "--input",
        served.input,
        "--output",
        served.output,
        "--onnx",
        &onnx,
        "--onnx-input",
        served.onnx_input,
        "--shape",
        served.shape,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn python(args: &[String]) -> (bool, String) {
    let out = Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("tests/python/triton_client.py"))
        .args(args)
        .output()
        .expect("python runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

pub(crate) fn mlp_request(data_len: usize, shape: &str, datatype: &str) -> Vec<u8> {
    let data = vec!["0.25"; data_len].join(",");
    format!(r#"{{"id":"r1","inputs":[{{"name":"x","shape":{shape},"datatype":"{datatype}","data":[{data}]}}]}}"#).into_bytes()
}

#[test]
fn tritonclient_json_and_binary_match_direct_onnxruntime() {
    let server = Server::start(&[squeezenet_graph(), mlp_graph()], &[]);
    for mode in ["json", "binary"] {
        let (ok, out) = python(&client_args(
            "infer",
            &server.addr,
            &SQUEEZENET,
            &["--requests", "6", "--concurrency", "2", "--mode", mode],
        ));
        assert!(ok, "squeezenet {mode}: {out}");
        assert!(out.contains("\"answered\": 6"), "{out}");
        let (ok, out) = python(&client_args(
            "infer",
            &server.addr,
            &MLP,
            &[
                "--requests",
                "32",
                "--batch",
                "4",
                "--concurrency",
                "4",
                "--mode",
                mode,
            ],
        ));
        assert!(ok, "mlp {mode}: {out}");
    }
}

#[test]
fn metadata_and_health_speak_the_protocol() {
    let server = Server::start(&[mlp_graph()], &[]);
    let args = [
        "metadata",
        "--url",
        &server.addr,
        "--model",
        "mlp",
        "--inputs",
        "x",
        "--outputs",
        "probs",
    ];
    let (ok, out) = python(&args.map(String::from));
    assert!(ok, "{out}");
    assert!(out.contains("\"shape\": [-1, 64]"), "{out}");
    assert_eq!(server.get("/v2/health/live").0, 200);
    assert_eq!(server.get("/v2/models/mlp/versions/1/ready").0, 200);
    assert_eq!(server.get("/v2/models/nope").0, 404);
}

#[test]
fn five_hundred_concurrent_requests_are_all_answered_correctly() {
    let server = Server::start(&[mlp_graph()], &[]);
    let (ok, out) = python(&client_args(
        "burst",
        &server.addr,
        &MLP,
        &["--requests", "500"],
    ));
    assert!(ok, "{out}");
    assert!(out.contains("\"answered\": 500"), "{out}");
    let (_, metrics) = server.get("/metrics");
    assert!(
        metrics.contains("weir_requests_total{graph=\"mlp\",outcome=\"ok\"} 500"),
        "{metrics}"
    );
    assert!(
        metrics.contains("weir_executor_rows_total{graph=\"mlp\",node=\"m\"} 500"),
        "{metrics}"
    );
    assert!(
        metrics.contains("weir_node_batch_size_count{graph=\"mlp\",node=\"m\"}"),
        "{metrics}"
    );
    // A batched node of one CPU thread measures its cost per row by batch size; a cold one
    // measures single rows first.
    assert!(
        metrics.contains("weir_node_row_cpu_seconds{graph=\"mlp\",node=\"m\",batch_le=\"1\"} "),
        "{metrics}"
    );
    for counter in [
        "weir_executor_jobs_answered_total",
        "weir_executor_job_seconds_total",
    ] {
        let line = format!("{counter}{{graph=\"mlp\",node=\"m\"}} ");
        let value = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|v| v.parse::<f64>().ok());
        assert!(value.is_some_and(|v| v > 0.0), "{counter}: {metrics}");
    }
    assert!(
        metrics.contains(
            "weir_executor_inference_seconds_bucket{graph=\"mlp\",node=\"m\",le=\"+Inf\"}"
        ),
        "{metrics}"
    );
}

/// Two graphs in one process: every metric family is written once (one `# TYPE` line, as the
/// text format requires), with both graphs' series under it.
#[test]
fn metrics_of_several_graphs_write_each_family_once() {
    let second = mlp_graph().replacen("name: mlp", "name: mlp2", 1);
    let server = Server::start(&[mlp_graph(), second], &[]);
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200, "{metrics}");
    let mut types = std::collections::HashMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("# TYPE ")) {
        *types.entry(line).or_insert(0) += 1;
    }
    assert!(
        types.contains_key("# TYPE weir_executor_runs_total counter"),
        "{metrics}"
    );
    assert!(types.values().all(|&n| n == 1), "{types:?}");
    for graph in ["mlp", "mlp2"] {
        let series = format!("weir_executor_runs_total{{graph=\"{graph}\",node=\"m\"}}");
        assert!(metrics.contains(&series), "{series}: {metrics}");
    }
}

#[test]
fn sigterm_drains_requests_in_flight_then_exits() {
    let mut server = Server::start(&[squeezenet_graph()], &[]);
    let mut client = Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("tests/python/triton_client.py"))
        .args(client_args(
            "burst",
            &server.addr,
            &SQUEEZENET,
            &["--announce", "--requests", "40"],
        ))
        .stdout(Stdio::piped())
        .spawn()
        .expect("client starts");
    let mut lines = BufReader::new(client.stdout.take().expect("stdout")).lines();
    let started = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(started.contains("started"), "{started}");
    // Wait until every request has been admitted (so none is refused at the door) and some are
    // still in flight, then ask the server to stop: those must all be answered.
    let deadline = Instant::now() + Duration::from_secs(30);
    let metric = |m: &str, prefix: &str| -> u64 {
        m.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    loop {
        let (_, m) = server.get("/metrics");
        let in_flight = metric(&m, "weir_graph_in_flight{graph=\"sq\"}");
        let done = metric(&m, "weir_requests_total{graph=\"sq\",outcome=\"ok\"}");
        if in_flight > 0 && in_flight + done >= 40 {
            break;
        }
        assert!(
            Instant::now() < deadline && done < 40,
            "never saw all 40 admitted with some in flight (in flight {in_flight}, done {done})"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    server.sigterm();
    let summary = lines.next().and_then(Result::ok).unwrap_or_default();
    let _ = client.wait();
    assert!(
        summary.contains("\"ok\": true") && summary.contains("\"answered\": 40"),
        "in-flight requests were not all answered: {summary}"
    );
    let status = server.child.wait().expect("server exits");
    assert!(status.success(), "server exit status {status:?}");
    assert_eq!(
        server.get("/v2/health/live").0,
        0,
        "server still accepting after SIGTERM"
    );
}

#[test]
fn deadline_is_answered_with_an_error_not_silence() {
    let server = Server::start(&[squeezenet_graph()], &["--request-timeout-ms", "1"]);
    let body = format!(
        r#"{{"inputs":[{{"name":"image","shape":[3,224,224],"datatype":"FP32","data":[{}]}}]}}"#,
        vec!["0.5"; 3 * 224 * 224].join(",")
    );
    let (status, body) = server.post("/v2/models/sq/infer", &[], body.as_bytes());
    // The deadline covers the upload too: 408 when it passes while the body is still arriving,
    // 504 when it passes in the graph.
    assert!(matches!(status, 408 | 504), "{status} {body}");
    assert!(body.contains("deadline of 1 ms"), "{body}");
    assert_eq!(server.get("/v2/health/ready").0, 200);
}

#[test]
fn bearer_token_guards_every_endpoint_but_liveness() {
    let server = Server::start(&[mlp_graph()], &["--auth-token", "s3cret"]);
    assert_eq!(server.get("/v2/health/live").0, 200);
    assert_eq!(server.get("/v2/health/ready").0, 401);
    assert_eq!(
        http(
            &server.addr,
            "GET",
            "/v2/health/ready",
            &[("Authorization", "Bearer s3cret".to_string())],
            b""
        )
        .0,
        200
    );
    assert_eq!(server.get("/metrics").0, 401);
    let (status, body) = server.post_good(&[]);
    assert_eq!(status, 401, "{body}");
    let auth = [("Authorization", "Bearer s3cret".to_string())];
    let (status, body) = server.post_good(&auth);
    assert_eq!(status, 200, "{body}");
    let wrong = [("Authorization", "Bearer s3cres".to_string())];
    assert_eq!(server.post_good(&wrong).0, 401);
}

#[test]
fn overload_is_503_not_a_hang() {
    // The one admitted request is held by a frozen (SIGSTOPped) executor, so every later request
    // meets a full in-flight limit however slowly the machine parses them: deterministic overflow.
    use crate::distributed::{loopback, Executor};
    let endpoint = loopback();
    let executor = Executor::serving("held", &endpoint, "mlp_a.onnx");
    let graph = format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: held, endpoint: \"{endpoint}\"}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, replicas: [held], executor: {{timeout_ms: 60000}}}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    );
    let server = Server::start(&[graph], &["--max-in-flight", "1"]);
    let stop = |sig: &str| signal(executor.pid(), sig);
    stop("-STOP");
    std::thread::scope(|s| {
        let first = s.spawn(|| server.post_good(&[]));
        // Give the first request ample time to be admitted (a 64-float body); it then holds the
        // only slot for as long as the executor stays frozen.
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            !first.is_finished(),
            "the first request should be held by the frozen executor"
        );
        for _ in 0..5 {
            let (status, body) = server.post_good(&[]);
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("overloaded"), "{body}");
        }
        stop("-CONT");
        let (status, body) = first.join().expect("client thread");
        assert_eq!(
            status, 200,
            "the held request is answered once the executor thaws: {body}"
        );
    });
}

#[test]
fn request_parameters_travel_through_the_graph_and_come_back() {
    let server = Server::start(&[mlp_graph()], &[]);
    let body = format!(
        r#"{{"id":"p1","parameters":{{"slo_ms":5,"min_accuracy":0.9}},"inputs":[{{"name":"x","shape":[2,64],"datatype":"FP32","data":[{}]}}]}}"#,
        vec!["0.5"; 128].join(",")
    );
    let (status, text) = server.post(INFER, &[], body.as_bytes());
    assert_eq!(status, 200, "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON reply");
    assert_eq!(json["id"], "p1");
    assert_eq!(json["parameters"]["slo_ms"], 5);
    assert_eq!(json["parameters"]["min_accuracy"], 0.9);
    assert_eq!(json["outputs"][0]["shape"], serde_json::json!([2, 10]));
}
