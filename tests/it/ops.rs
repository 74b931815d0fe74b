//! `weir serve` as a platform team runs it, as a real process: JSON access-log lines (one per HTTP
//! request and gRPC call, every field parsed and checked) and `--no-access-log`; `/metrics` on its
//! own listener without the token while the API needs it, readiness left open by
//! `--health-unauthenticated`, the process's metrics, and Triton's metric names checked against a
//! known count of requests. The process launcher here serves tls.rs too.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tonic::metadata::MetadataValue;
use weir_connectors::grpc::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use weir_connectors::grpc::proto::model_infer_request::InferInputTensor;
use weir_connectors::grpc::proto::{ModelInferRequest, ServerReadyRequest};

use crate::common::TempDir;
use crate::grpc::{channel, runtime};
use crate::serve::{http, mlp_graph, mlp_request, serve_command, INFER};

/// A `weir serve` process, SIGKILLed when dropped, with the addresses it printed by scheme
/// (`http`, `https`, `grpc`, `grpcs`, `metrics`) and its stderr in a file.
pub(crate) struct Launched {
    pub(crate) child: Child,
    pub(crate) addrs: HashMap<String, String>,
    pub(crate) log: PathBuf,
    _dir: TempDir,
}

impl Launched {
    /// Starts `weir serve` over `graphs` with `args`, and reads its address lines until one per
    /// scheme in `schemes` is in.
    pub(crate) fn start(graphs: &[String], args: &[&str], schemes: &[&str]) -> Launched {
        let (mut cmd, dir) = serve_command("ops", graphs);
        let log = dir.0.join("stderr.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        cmd.args(args)
            .env_remove("WEIR_AUTH_TOKEN")
            .env_remove("WEIR_LOG")
            .env_remove("WEIR_LOG_FORMAT")
            .env_remove("WEIR_ZENOH_CONFIG");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("weir serve starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut addrs = HashMap::new();
        while addrs.len() < schemes.len() {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("weir serve printed no more address lines; its log:\n{log}");
            };
            let Some(rest) = line.trim().strip_prefix("weir serving ") else {
                continue;
            };
            let (scheme, addr) = match rest.strip_prefix("metrics http://") {
                Some(a) => ("metrics", a.trim_end_matches("/metrics")),
                None => rest.split_once("://").expect("scheme://address"),
            };
            addrs.insert(scheme.to_string(), addr.to_string());
        }
        std::thread::spawn(move || lines.for_each(drop));
        Launched {
            child,
            addrs,
            log,
            _dir: dir,
        }
    }

    pub(crate) fn addr(&self, scheme: &str) -> &str {
        self.addrs
            .get(scheme)
            .unwrap_or_else(|| panic!("no {scheme} address in {:?}", self.addrs))
    }

    /// The log's lines so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (30 s at most) until `ready` holds.
pub(crate) fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn grpc_request(id: &str) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "mlp".into(),
        model_version: "1".into(),
        id: id.into(),
        inputs: vec![InferInputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: vec![1, 64],
            ..Default::default()
        }],
        raw_input_contents: vec![0.25f32.to_le_bytes().repeat(64).into()],
        ..Default::default()
    }
}

/// `n` gRPC inferences of the mlp graph on `addr`, ids `g0..`, with `token` when given.
fn grpc_infers(addr: &str, n: usize, token: Option<&str>) {
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(addr).await);
        for i in 0..n {
            let mut request = tonic::Request::new(grpc_request(&format!("g{i}")));
            if let Some(t) = token {
                let value = MetadataValue::try_from(format!("Bearer {t}")).expect("metadata");
                request.metadata_mut().insert("authorization", value);
            }
            client.model_infer(request).await.expect("gRPC infer");
        }
    });
}

/// The access-log events in a JSON log.
pub(crate) fn access_events(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "weir::access")
        .collect()
}

#[test]
fn json_access_logs_carry_every_field_of_each_request() {
    let server = Launched::start(
        &[mlp_graph()],
        &[
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
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
    let (status, _) = http(&addr, "POST", INFER, &[], &body);
    assert_eq!(status, 200);
    let tagged = [("x-request-id", "edge-7".to_string())];
    assert_eq!(http(&addr, "POST", INFER, &tagged, &body).0, 200);
    assert_eq!(
        http(
            &addr,
            "POST",
            "/v2/models/nope/versions/2/infer",
            &[],
            &body
        )
        .0,
        404
    );
    grpc_infers(server.addr("grpc"), 1, None);
    // The control routes (repository, shared memory) are logged as the protocol's are.
    let control = [
        ("POST", "/v2/repository/index"),
        ("GET", "/v2/systemsharedmemory/status"),
    ];
    for (method, path) in control {
        assert_eq!(http(&addr, method, path, &[], b"").0, 200, "{path}");
    }
    let mut events = Vec::new();
    wait_until("six access-log lines", || {
        events = access_events(&server.log_text());
        events
            .iter()
            .filter(|e| e["path"] != "/v2/health/ready")
            .count()
            >= 6
    });
    let every_line_is_json = server
        .log_text()
        .lines()
        .all(|l| serde_json::from_str::<Value>(l).is_ok());
    assert!(every_line_is_json, "{}", server.log_text());
    let find = |pred: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .find(|e| pred(e))
            .unwrap_or_else(|| panic!("no such event in {events:#?}"))
            .clone()
    };
    for (method, path) in control {
        let e = find(&|e| e["path"] == path);
        assert_eq!(
            (e["method"].as_str(), e["status"].as_u64()),
            (Some(method), Some(200))
        );
    }
    let first = find(&|e| e["path"] == INFER && e["request_id"] == "r1");
    assert_eq!(first["protocol"], "http");
    assert_eq!(first["method"], "POST");
    assert_eq!(first["model"], "mlp");
    assert!(first.get("version").is_none(), "{first}");
    assert_eq!(first["status"], 200);
    assert_eq!(first["level"], "INFO");
    assert_eq!(first["bytes_in"], body.len() as u64);
    assert!(
        first["bytes_out"].as_u64().is_some_and(|n| n > 10),
        "{first}"
    );
    assert!(
        first["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0),
        "{first}"
    );
    assert!(
        first["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{first}"
    );
    assert!(first["timestamp"].as_str().is_some(), "{first}");
    // A proxy's request id wins over the body's.
    find(&|e| e["path"] == INFER && e["request_id"] == "edge-7");
    let unknown = find(&|e| e["status"] == 404);
    assert_eq!(unknown["model"], "nope");
    assert_eq!(unknown["version"], "2");
    let grpc = find(&|e| {
        e["protocol"] == "grpc" && e["rpc"] == "inference.GRPCInferenceService/ModelInfer"
    });
    assert_eq!(grpc["model"], "mlp");
    assert_eq!(grpc["version"], "1");
    assert_eq!(grpc["status"], 0);
    assert_eq!(grpc["request_id"], "g0");
    assert!(grpc["bytes_in"].as_u64().is_some_and(|n| n > 256), "{grpc}");
    assert!(grpc["bytes_out"].as_u64().is_some_and(|n| n > 10), "{grpc}");
    assert!(
        grpc["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{grpc}"
    );
}

#[test]
fn no_access_log_leaves_the_log_without_request_lines() {
    let server = Launched::start(
        &[mlp_graph()],
        &[
            "--http",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--no-access-log",
        ],
        &["http"],
    );
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let (status, _) = http(&addr, "POST", INFER, &[], &mlp_request(64, "[64]", "FP32"));
    assert_eq!(status, 200);
    // The server answered; its event (had there been one) is written before the answer.
    assert!(
        access_events(&server.log_text()).is_empty(),
        "{}",
        server.log_text()
    );
}

/// The value of the sample `series` (name and labels, exactly) in a Prometheus text page.
fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_listen_apart_without_the_token_with_tritons_names() {
    let server = Launched::start(
        &[mlp_graph()],
        &[
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--metrics-compat",
            "triton",
            "--health-unauthenticated",
            "--auth-token",
            "s3cret",
        ],
        &["http", "grpc", "metrics"],
    );
    let api = server.addr("http").to_string();
    let metrics_addr = server.addr("metrics").to_string();
    // Readiness is open to a probe without the token; everything else but liveness is not.
    wait_until("ready", || {
        http(&api, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    assert_eq!(http(&api, "GET", "/v2/health/live", &[], b"").0, 200);
    assert_eq!(http(&api, "GET", "/metrics", &[], b"").0, 401);
    assert_eq!(http(&api, "GET", "/v2/models/mlp/ready", &[], b"").0, 401);
    let auth = [("Authorization", "Bearer s3cret".to_string())];
    let body = mlp_request(64, "[64]", "FP32");
    for _ in 0..5 {
        assert_eq!(http(&api, "POST", INFER, &auth, &body).0, 200);
    }
    assert_eq!(http(&api, "POST", INFER, &auth, b"{not json").0, 400);
    grpc_infers(server.addr("grpc"), 3, Some("s3cret"));
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(server.addr("grpc")).await);
        let ready = client
            .server_ready(ServerReadyRequest {})
            .await
            .expect("ServerReady without a token")
            .into_inner();
        assert!(ready.ready);
    });
    let (status, page) = http(&metrics_addr, "GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        http(&metrics_addr, "GET", "/v2/health/ready", &[], b"").0,
        404
    );
    let labels = "{model=\"mlp\",version=\"1\"}";
    let triton = |name: &str| {
        sample(&page, &format!("{name}{labels}")).unwrap_or_else(|| panic!("{name}: {page}"))
    };
    assert_eq!(triton("nv_inference_request_success"), 8.0);
    assert_eq!(triton("nv_inference_request_failure"), 1.0);
    assert_eq!(triton("nv_inference_count"), 8.0);
    let execs = triton("nv_inference_exec_count");
    assert!((1.0..=8.0).contains(&execs), "{execs}");
    assert!(triton("nv_inference_request_duration_us") > 0.0);
    assert!(triton("nv_inference_compute_infer_duration_us") > 0.0);
    for name in [
        "nv_inference_queue_duration_us",
        "nv_inference_compute_input_duration_us",
        "nv_inference_compute_output_duration_us",
    ] {
        assert!(triton(name) >= 0.0);
        assert!(page.contains(&format!("# TYPE {name} counter\n")), "{page}");
    }
    // The same exposition as the API's, weir's own families included.
    assert_eq!(
        sample(&page, "weir_requests_total{graph=\"mlp\",outcome=\"ok\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(
            &page,
            "weir_grpc_requests_total{graph=\"mlp\",outcome=\"ok\"}"
        ),
        Some(3.0)
    );
    let (status, api_page) = http(&api, "GET", "/metrics", &auth, b"");
    assert_eq!(status, 200);
    assert!(
        api_page.contains("nv_inference_request_success{"),
        "{api_page}"
    );
    for name in [
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_threads",
    ] {
        let v = sample(&page, name).unwrap_or_else(|| panic!("{name}: {page}"));
        assert!(v >= 1.0, "{name} {v}");
    }
    assert!(
        sample(&page, "process_cpu_seconds_total").is_some_and(|v| v > 0.0),
        "{page}"
    );
}

/// Writes `text` to `path` through a rename, as a rotation does.
pub(crate) fn replace_file(path: &Path, text: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
