//! `weir serve --grpc` as a real process, spoken to with Triton's own gRPC client
//! (`tritonclient[grpc]`, through `tests/python/grpc_client.py`) and with the tonic client
//! generated from the same `.proto`: every RPC, raw and typed contents of every kind of datatype,
//! malformed requests refused by field with the server still ready, the bearer token, a stream of
//! 1,000 requests each answered once, health, metrics by protocol, and SIGTERM with a stream open.
//! Memory: messages that would decode past the byte budget (typed int64 and empty byte strings)
//! are refused with RESOURCE_EXHAUSTED while the server's resident memory stays within a bound set
//! by the budget; an oversize message gets RESOURCE_EXHAUSTED too; a silent connection is closed.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use weir_connectors::grpc::health_proto::health_check_response::ServingStatus;
use weir_connectors::grpc::health_proto::health_client::HealthClient;
use weir_connectors::grpc::health_proto::HealthCheckRequest;
use weir_connectors::grpc::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use weir_connectors::grpc::proto::infer_parameter::ParameterChoice;
use weir_connectors::grpc::proto::model_infer_request::InferInputTensor;
use weir_connectors::grpc::proto::{
    InferParameter, InferTensorContents, ModelInferRequest, ServerLiveRequest,
};

use crate::common::{assert_close, model, signal, TempDir};
use crate::hostile_requests::rss_kib;
use crate::reference::python;
use crate::serve::{http, mlp_graph, serve_command};

/// Largest message the servers here take (the HTTP body cap).
const MAX_BYTES: usize = 4 << 20;

/// Datatypes served by identity graphs `dt_<file>` (as `tests/python/grpc_client.py` names them).
const DTYPES: [(&str, &str); 10] = [
    ("bool", "bool"),
    ("u8", "u8"),
    ("i8", "i8"),
    ("u64", "u64"),
    ("i64", "i64"),
    ("f16", "f16"),
    ("bf16", "bf16"),
    ("f32", "f32"),
    ("f64", "f64"),
    ("string", "bytes"),
];

fn dtype_graph(file: &str, yaml: &str) -> String {
    format!(
        "name: dt_{file}\ninputs:\n  - {{name: x, dtype: {yaml}, shape: [4]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: z, from: m.z}}\n",
        model(&format!("dtypes/{file}.onnx")).display()
    )
}

/// A `weir serve --http --grpc` process, SIGKILLed when dropped.
pub(crate) struct Served {
    child: Child,
    pub(crate) http: String,
    pub(crate) grpc: String,
    _dir: TempDir,
}

impl Served {
    pub(crate) fn start(graphs: &[String], extra: &[&str]) -> Served {
        let (mut cmd, dir) = serve_command("grpc", graphs);
        let max = MAX_BYTES.to_string();
        cmd.args(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
            .args(["--max-body-bytes", &max])
            .args(extra)
            .env_remove("WEIR_AUTH_TOKEN");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("weir serve starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = |prefix: &str| {
            let line = lines
                .next()
                .and_then(Result::ok)
                .unwrap_or_else(|| panic!("no `{prefix}` line"));
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("unexpected line `{line}`"))
                .to_string()
        };
        let http_addr = next("weir serving http://");
        let grpc = next("weir serving grpc://");
        // Keep reading stdout so the process never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let served = Served {
            child,
            http: http_addr,
            grpc,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(
            http(&served.http, "GET", "/v2/health/ready", &[], b"").0,
            200 | 401
        ) {
            assert!(Instant::now() < deadline, "server never became ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        served
    }

    /// Runs `grpc_client.py <command>` against this server; returns its JSON line.
    pub(crate) fn client(&self, command: &str, extra: &[&str]) -> Value {
        let onnx = model("mlp_a.onnx").display().to_string();
        let max = MAX_BYTES.to_string();
        let mut args = vec![
            command,
            "--url",
            &self.grpc,
            "--onnx",
            &onnx,
            "--max-bytes",
            &max,
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = python("grpc_client.py", &args, &Value::Null);
        assert_eq!(code, 0, "grpc_client.py {command} failed:\n{out}\n{err}");
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: `{out}`"))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn all_graphs() -> Vec<String> {
    let mut graphs = vec![mlp_graph()];
    graphs.extend(DTYPES.iter().map(|(f, y)| dtype_graph(f, y)));
    graphs
}

#[test]
fn tritonclient_grpc_every_rpc_and_datatype_raw_and_typed() {
    let server = Served::start(&all_graphs(), &[]);
    let rpcs = server.client("rpcs", &[]);
    assert_eq!(rpcs["outputs"], serde_json::json!([5, 10]), "{rpcs}");
    let dtypes = server.client("dtypes", &[]);
    for t in [
        "BOOL", "UINT8", "INT8", "UINT64", "INT64", "FP32", "FP64", "BYTES",
    ] {
        assert_eq!(
            dtypes["dtypes"][t],
            serde_json::json!(["raw", "typed"]),
            "{t}: {dtypes}"
        );
    }
    for t in ["FP16", "BF16"] {
        assert_eq!(
            dtypes["dtypes"][t],
            serde_json::json!(["raw"]),
            "{t}: {dtypes}"
        );
    }
}

#[test]
fn malformed_grpc_requests_are_refused_by_field_and_the_server_stays_ready() {
    let server = Served::start(&all_graphs(), &[]);
    let bad = server.client("bad", &[]);
    assert_eq!(bad["ready_after"], true, "{bad}");
    let refused = bad["refused"].as_array().expect("refused list");
    assert_eq!(refused.len(), 12, "{bad}");
    let (_, metrics) = http(&server.http, "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("weir_grpc_requests_total{graph=\"mlp\",outcome=\"invalid_request\"}"),
        "{metrics}"
    );
}

#[test]
fn grpc_needs_the_bearer_token_except_for_liveness() {
    let server = Served::start(&[mlp_graph()], &["--auth-token", "s3cret-grpc"]);
    let seen = server.client("auth", &["--token", "s3cret-grpc"]);
    assert_eq!(seen["ModelInfer/missing"], "UNAUTHENTICATED", "{seen}");
    assert_eq!(seen["ModelInfer/wrong"], "UNAUTHENTICATED", "{seen}");
    assert_eq!(seen["with_token"], "OK", "{seen}");
}

#[test]
fn a_stream_of_1000_requests_answers_every_id_once_and_a_bad_one_with_its_error() {
    let server = Served::start(&[mlp_graph()], &["--grpc-stream-in-flight", "16"]);
    let seen = server.client("stream", &["--count", "1000"]);
    assert_eq!(seen["answered_once"], 1000, "{seen}");
    assert_eq!(seen["errors"].as_array().map(Vec::len), Some(1), "{seen}");
    let (_, metrics) = http(&server.http, "GET", "/metrics", &[], b"");
    assert!(
        metrics.contains("weir_grpc_requests_total{graph=\"mlp\",outcome=\"ok\"} 1000\n"),
        "{metrics}"
    );
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

pub(crate) async fn channel(addr: &str) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connects")
}

fn mlp_request(id: usize) -> ModelInferRequest {
    ModelInferRequest {
        model_name: "mlp".into(),
        id: id.to_string(),
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

#[test]
fn health_check_and_watch_follow_the_server() {
    let server = Served::start(&[mlp_graph()], &[]);
    runtime().block_on(async {
        let mut health = HealthClient::new(channel(&server.grpc).await);
        for service in ["", "inference.GRPCInferenceService"] {
            let status = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .expect("check")
                .into_inner()
                .status;
            assert_eq!(status, ServingStatus::Serving as i32, "`{service}`");
        }
        let unknown = health
            .check(HealthCheckRequest {
                service: "nope".into(),
            })
            .await
            .expect_err("an unknown service");
        assert_eq!(unknown.code(), tonic::Code::NotFound);
        let mut watch = health
            .watch(HealthCheckRequest::default())
            .await
            .expect("watch")
            .into_inner();
        let first = watch.message().await.expect("a status").expect("one");
        assert_eq!(first.status, ServingStatus::Serving as i32);
        signal(server.child.id(), "-TERM");
        let next = watch.message().await.expect("a status").expect("one");
        assert_eq!(next.status, ServingStatus::NotServing as i32);
        assert!(watch.message().await.expect("ends cleanly").is_none());
    });
}

#[test]
fn sigterm_with_a_stream_open_answers_what_is_in_flight_then_closes_it() {
    let mut server = Served::start(&[mlp_graph()], &["--grpc-stream-in-flight", "8"]);
    let pid = server.child.id();
    let (answered, ended) = runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(&server.grpc).await);
        let (tx, rx) = mpsc::channel(4);
        // The sending half stays open: the server, not the client, ends the stream.
        let sender = tokio::spawn(async move {
            let mut sent = 0usize;
            while tx.send(mlp_request(sent)).await.is_ok() && sent < 100_000 {
                sent += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let mut replies = client
            .model_stream_infer(ReceiverStream::new(rx))
            .await
            .expect("stream opens")
            .into_inner();
        let mut answered: HashMap<String, usize> = HashMap::new();
        let ended = loop {
            match tokio::time::timeout(Duration::from_secs(60), replies.message()).await {
                Err(_) => panic!("the stream neither answered nor ended within 60 s"),
                Ok(Ok(Some(reply))) => {
                    assert_eq!(reply.error_message, "", "a request failed during the drain");
                    let id = reply.infer_response.expect("a reply").id;
                    *answered.entry(id).or_default() += 1;
                    if answered.len() == 50 {
                        signal(pid, "-TERM");
                    }
                }
                Ok(Ok(None)) => break Ok(()),
                Ok(Err(status)) => break Err(status),
            }
        };
        sender.abort();
        (answered, ended)
    });
    assert!(ended.is_ok(), "the stream ended with {ended:?}, not OK");
    assert!(answered.len() >= 50, "{} answered", answered.len());
    assert!(answered.values().all(|&n| n == 1), "an id answered twice");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "weir serve did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "weir serve exited with {status}");
}

fn parameter(choice: ParameterChoice) -> InferParameter {
    InferParameter {
        parameter_choice: Some(choice),
    }
}

#[test]
fn interleaved_sequences_over_grpc_equal_each_run_alone() {
    use crate::sequences::{reference, seq_graph, step_input};
    let server = Served::start(&[seq_graph(8, 60_000, &[], "")], &[]);
    let steps = 4;
    let want: Vec<Vec<Vec<f32>>> = (0..2).map(|s| reference(s, steps)).collect();
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(&server.grpc).await);
        for t in 0..steps {
            for (s, want) in want.iter().enumerate() {
                let mut parameters = HashMap::from([(
                    "sequence_id".to_string(),
                    parameter(ParameterChoice::Uint64Param(100 + s as u64)),
                )]);
                if t == 0 {
                    parameters.insert(
                        "sequence_start".into(),
                        parameter(ParameterChoice::BoolParam(true)),
                    );
                }
                if t + 1 == steps {
                    parameters.insert(
                        "sequence_end".into(),
                        parameter(ParameterChoice::BoolParam(true)),
                    );
                }
                let x: Vec<u8> = step_input(s, t)
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect();
                let reply = client
                    .model_infer(ModelInferRequest {
                        model_name: "seq".into(),
                        parameters,
                        inputs: vec![InferInputTensor {
                            name: "x".into(),
                            datatype: "FP32".into(),
                            shape: vec![1, 4],
                            ..Default::default()
                        }],
                        raw_input_contents: vec![x.into()],
                        ..Default::default()
                    })
                    .await
                    .unwrap_or_else(|e| panic!("sequence {s} step {t}: {e}"))
                    .into_inner();
                let y: Vec<f32> = reply.raw_output_contents[0]
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                assert_close(&y, &want[t], 1e-5, &format!("sequence {s} step {t}"));
            }
        }
    });
}

#[test]
fn a_grpc_connection_past_the_cap_is_closed_and_its_slot_comes_back() {
    let server = Served::start(&[mlp_graph()], &["--max-connections", "2"]);
    runtime().block_on(async {
        let live = |channel: Channel| async move {
            GrpcInferenceServiceClient::new(channel)
                .server_live(ServerLiveRequest {})
                .await
                .map(|r| r.into_inner().live)
        };
        let first = channel(&server.grpc).await;
        let second = channel(&server.grpc).await;
        assert!(live(first.clone()).await.expect("first connection"));
        assert!(live(second.clone()).await.expect("second connection"));
        // A third connection is closed on accept: its call fails.
        let third = Endpoint::from_shared(format!("http://{}", server.grpc))
            .expect("endpoint")
            .connect_lazy();
        assert!(live(third).await.is_err(), "a third connection was served");
        drop(first);
        // The closed connection's slot comes back (the server sees the close a little later).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let again = Endpoint::from_shared(format!("http://{}", server.grpc))
                .expect("endpoint")
                .connect_lazy();
            if live(again).await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "the slot never came back");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(live(second).await.expect("second connection still served"));
    });
}

/// The byte budget of the memory tests: small beside what a maximal message decodes into.
const BUDGET: usize = 16 << 20;

/// A request to `dt_i64` or `dt_string` whose typed contents expand most when decoded: `n` int64
/// ones (1 byte each on the wire, 8 in memory) or `n` empty byte strings (2 bytes on the wire, a
/// 24-byte `Vec` in memory).
fn expanding(i: usize, n: usize) -> ModelInferRequest {
    let (model, datatype, contents) = if i.is_multiple_of(2) {
        let ints = InferTensorContents {
            int64_contents: vec![1; n],
            ..Default::default()
        };
        ("dt_i64", "INT64", ints)
    } else {
        let empty = InferTensorContents {
            bytes_contents: vec![Vec::new(); n / 2],
            ..Default::default()
        };
        ("dt_string", "BYTES", empty)
    };
    ModelInferRequest {
        model_name: model.into(),
        id: i.to_string(),
        inputs: vec![InferInputTensor {
            name: "x".into(),
            datatype: datatype.into(),
            shape: vec![4],
            contents: Some(contents),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The largest resident memory of `pid` seen while `work` runs, in KiB.
fn peak_rss_during<T>(pid: u32, work: impl FnOnce() -> T) -> (u64, T) {
    let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (Arc::clone(&peak), Arc::clone(&done));
        std::thread::spawn(move || {
            while !done.load(Ordering::Acquire) {
                peak.fetch_max(rss_kib(pid), Ordering::AcqRel);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let out = work();
    done.store(true, Ordering::Release);
    sampler.join().expect("sampler");
    (peak.load(Ordering::Acquire), out)
}

#[test]
fn messages_decoding_past_the_byte_budget_are_refused_and_memory_stays_bounded() {
    let graphs = [
        mlp_graph(),
        dtype_graph("i64", "i64"),
        dtype_graph("string", "bytes"),
    ];
    let budget = BUDGET.to_string();
    // 64 large uploads share one connection: on a loaded machine the client's acknowledgement
    // of the server's keep-alive ping (due within half the idle timeout) can queue behind them,
    // so the idle timeout is set well past what this test is about.
    let server = Served::start(
        &graphs,
        &[
            "--max-inflight-bytes",
            &budget,
            "--header-timeout-ms",
            "60000",
        ],
    );
    let pid = server.child.id();
    let rt = runtime();
    let grpc = rt.block_on(channel(&server.grpc));
    let mut client = GrpcInferenceServiceClient::new(grpc.clone());
    rt.block_on(client.model_infer(mlp_request(0)))
        .expect("a normal request before");
    let before = rss_kib(pid);
    // 32 concurrent maximal messages (each decodes to far more than the budget) and 32 of a
    // sixteenth of the size (each fits the budget alone, two or three at once).
    let maximal = MAX_BYTES - 1024;
    let (peak, codes) = peak_rss_during(pid, || {
        rt.block_on(async {
            let mut calls = tokio::task::JoinSet::new();
            for i in 0..64 {
                let mut client = GrpcInferenceServiceClient::new(grpc.clone())
                    .max_decoding_message_size(MAX_BYTES);
                let n = if i < 32 { maximal } else { maximal / 16 };
                calls.spawn(async move {
                    let refused = client
                        .model_infer(expanding(i, n))
                        .await
                        .expect_err("no such request is served");
                    (i, refused)
                });
            }
            calls.join_all().await
        })
    });
    for (i, status) in &codes {
        let what = format!("request {i}: {status:?}");
        if *i < 32 {
            assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{what}");
        } else {
            // Admitted, then refused for its contents (4 elements declared), or refused at the
            // budget while others held it.
            assert!(
                matches!(
                    status.code(),
                    tonic::Code::ResourceExhausted | tonic::Code::InvalidArgument
                ),
                "{what}"
            );
        }
        if status.code() == tonic::Code::ResourceExhausted {
            assert!(status.message().contains("--max-inflight-bytes"), "{what}");
            assert!(status.metadata().get("retry-after").is_some(), "{what}");
        }
    }
    // What the server may hold: the budget's worth of admitted messages and their decoded form,
    // plus what is not charged (HTTP/2 windows of 1 MiB, replies, allocator slack), well under
    // three budgets. Unbounded, one maximal int64 message alone decodes to 32 MiB and more, and
    // 32 of them at once to hundreds.
    let grown = peak.saturating_sub(before);
    assert!(
        grown < (3 * BUDGET as u64) / 1024,
        "resident memory grew by {grown} KiB against a budget of {} KiB",
        BUDGET / 1024
    );
    // The budget comes back: a normal request is served (its permits are released as the
    // refused calls' answers are dropped, a moment after the client has them).
    rt.block_on(async {
        let mut tries = 0;
        loop {
            match client.model_infer(mlp_request(1)).await {
                Ok(reply) => break assert_eq!(reply.into_inner().id, "1"),
                Err(s) if s.code() == tonic::Code::ResourceExhausted && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(s) => panic!("a normal request after the barrage: {s:?}"),
            }
        }
    });
}

#[test]
fn an_oversize_message_is_resource_exhausted_naming_the_cap() {
    let server = Served::start(&[mlp_graph()], &[]);
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(&server.grpc).await);
        let mut big = mlp_request(0);
        big.raw_input_contents = vec![vec![0u8; MAX_BYTES + 1].into()];
        let refused = client.model_infer(big).await.expect_err("over the cap");
        assert_eq!(
            refused.code(),
            tonic::Code::ResourceExhausted,
            "{refused:?}"
        );
        assert!(
            refused.message().contains("--max-body-bytes"),
            "{refused:?}"
        );
        let reply = client.model_infer(mlp_request(1)).await.expect("served");
        assert_eq!(reply.into_inner().id, "1");
    });
}

#[test]
fn a_connection_that_sends_nothing_is_closed_after_the_idle_timeout() {
    use std::io::Read;
    let server = Served::start(&[mlp_graph()], &["--header-timeout-ms", "300"]);
    let mut silent = std::net::TcpStream::connect(&server.grpc).expect("connects");
    // Generous: the test asserts that the server closes it, not when.
    silent
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let mut buf = [0u8; 1024];
    let closed = loop {
        match silent.read(&mut buf) {
            // The server's own HTTP/2 preface (SETTINGS) comes first.
            Ok(n) if n > 0 => continue,
            Ok(_) => break true,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(e) => panic!("the silent connection was not closed: {e}"),
        }
    };
    assert!(closed);
    // A client that speaks is served, on a connection idle between its calls.
    runtime().block_on(async {
        let mut client = GrpcInferenceServiceClient::new(channel(&server.grpc).await);
        client.model_infer(mlp_request(0)).await.expect("served");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let reply = client.model_infer(mlp_request(1)).await.expect("served");
        assert_eq!(reply.into_inner().id, "1");
    });
}
