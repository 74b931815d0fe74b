//! `weir serve --model-repository`: a Triton model repository served through the real process.
//! Versions answer under `/versions/{v}` and an unversioned request reaches the highest; a model
//! without `config.pbtxt` is auto-completed from its ONNX file; a model whose configuration sets
//! a field weir does not know is refused naming the file, line and field while the others
//! serve; answers equal ONNX Runtime's; perf_analyzer runs against a repository model.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{
    assert_close, direct_ort, model, refused_start, repo, temp_dir, weir_home, TempDir,
};
use crate::serve::http;

/// A `weir serve --model-repository` process, killed when dropped.
pub(crate) struct RepoServer {
    child: Child,
    pub(crate) http: String,
    pub(crate) grpc: String,
    pub(crate) stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// The repository's root.
    pub(crate) root: std::path::PathBuf,
    _dir: TempDir,
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

pub(crate) fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
    std::fs::copy(from, to).expect("copy model");
}

/// A repository: `digits` (two versions, a config serving both, batch 8), `ocr_cls` (no config:
/// auto-complete), `bad` (a config with an unknown field).
fn start() -> RepoServer {
    start_with(&[])
}

/// [`start`]'s repository served with `args` added.
pub(crate) fn start_with(args: &[&str]) -> RepoServer {
    weir_home();
    let dir = temp_dir("triton-repo");
    let root = dir.0.join("models");
    for v in ["1", "2"] {
        copy(
            &model("digits_mlp.onnx"),
            &root.join(format!("digits/{v}/model.onnx")),
        );
    }
    write(
        &root.join("digits/config.pbtxt"),
        "name: \"digits\"\nmax_batch_size: 8\nversion_policy: { all {} }\ndynamic_batching { max_queue_delay_microseconds: 100 }\n",
    );
    copy(
        &model("pretrained/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
        &root.join("ocr_cls/1/model.onnx"),
    );
    copy(&model("digits_mlp.onnx"), &root.join("bad/1/model.onnx"));
    write(
        &root.join("bad/config.pbtxt"),
        "name: \"bad\"\nnot_a_field: 3\n",
    );
    serve(dir, root, args)
}

/// `weir serve --model-repository root` with `args` added, ready; `dir` (holding `root`) is
/// removed with the server.
pub(crate) fn serve(dir: TempDir, root: std::path::PathBuf, args: &[&str]) -> RepoServer {
    serve_with_env(dir, root, args, &[])
}

/// As [`serve`], the process's environment given `env` too.
pub(crate) fn serve_with_env(
    dir: TempDir,
    root: std::path::PathBuf,
    args: &[&str],
    env: &[(&str, &Path)],
) -> RepoServer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .current_dir(repo())
        .args(["serve", "--model-repository"])
        .arg(&root)
        .args(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().copied())
        .env_remove("WEIR_AUTH_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir serve starts");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = std::sync::Arc::clone(&stderr);
    let err = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let mut s = sink.lock().expect("stderr");
            if s.len() < 1 << 16 {
                s.push_str(&line);
                s.push('\n');
            }
        }
    });
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = |prefix: &str| {
        let line = lines
            .next()
            .and_then(Result::ok)
            .unwrap_or_else(|| panic!("no `{prefix}` line: {}", stderr.lock().expect("stderr")));
        line.trim()
            .strip_prefix(prefix)
            .expect("address line")
            .to_string()
    };
    let http_addr = next("weir serving http://");
    let grpc = next("weir serving grpc://");
    std::thread::spawn(move || lines.for_each(drop));
    let served = RepoServer {
        child,
        http: http_addr,
        grpc,
        stderr,
        root,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while http(&served.http, "GET", "/v2/health/ready", &[], b"").0 != 200 {
        assert!(Instant::now() < deadline, "server never became ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    served
}

pub(crate) fn get(s: &RepoServer, path: &str) -> (u16, Value) {
    let (code, body) = http(&s.http, "GET", path, &[], b"");
    (
        code,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

pub(crate) fn infer(s: &RepoServer, path: &str, rows: usize) -> (u16, Value) {
    let data: Vec<f32> = (0..rows * 64).map(|i| (i % 17) as f32 / 16.0).collect();
    let body =
        json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, 64], "data": data}]});
    let (code, reply) = http(&s.http, "POST", path, &[], body.to_string().as_bytes());
    (
        code,
        serde_json::from_str(&reply).unwrap_or(Value::String(reply)),
    )
}

#[test]
fn a_repository_serves_versions_autocompletes_and_refuses_bad_configs_by_field() {
    let s = start();
    // The bad model is refused naming the file, the line and the field; the others serve.
    let log = s.stderr.lock().expect("stderr").clone();
    assert!(
        log.contains("bad/config.pbtxt:2") && log.contains("not_a_field"),
        "{log}"
    );
    assert_eq!(get(&s, "/v2/models/bad").0, 404);
    // Versions.
    let (code, meta) = get(&s, "/v2/models/digits");
    assert_eq!(code, 200, "{meta}");
    assert_eq!(meta["versions"], json!(["1", "2"]));
    assert_eq!(meta["platform"], "onnxruntime_onnx");
    let (code, err) = get(&s, "/v2/models/digits/versions/3");
    assert_eq!(code, 404);
    assert!(
        err["error"].as_str().unwrap_or("").contains("version `3`"),
        "{err}"
    );
    // The configuration as given, completed from the file.
    let (code, config) = get(&s, "/v2/models/digits/versions/1/config");
    assert_eq!(code, 200, "{config}");
    assert_eq!(config["max_batch_size"], 8);
    assert_eq!(config["input"][0]["name"], "x");
    assert_eq!(config["input"][0]["dims"], json!([64]));
    assert_eq!(
        config["dynamic_batching"]["max_queue_delay_microseconds"],
        100
    );
    // No config.pbtxt: Triton's auto-complete (free batch dimension -> max_batch_size 4).
    let (code, auto) = get(&s, "/v2/models/ocr_cls/config");
    assert_eq!(code, 200, "{auto}");
    assert_eq!(auto["max_batch_size"], 4);
    assert_eq!(auto["input"][0]["data_type"], "TYPE_FP32");
    assert_eq!(auto["input"][0]["dims"], json!([3, -1, -1]));
    // Answers equal ONNX Runtime's, by version and unversioned.
    let data: Vec<f32> = (0..3 * 64).map(|i| (i % 17) as f32 / 16.0).collect();
    let want = direct_ort(&model("digits_mlp.onnx"), "x", &[3, 64], &data);
    for path in [
        "/v2/models/digits/infer",
        "/v2/models/digits/versions/1/infer",
        "/v2/models/digits/versions/2/infer",
    ] {
        let (code, reply) = infer(&s, path, 3);
        assert_eq!(code, 200, "{path}: {reply}");
        let got: Vec<f32> = reply["outputs"][0]["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|v| v.as_f64().expect("number") as f32)
            .collect();
        assert_close(&got, &want, 1e-5, path);
    }
    assert_eq!(infer(&s, "/v2/models/digits/versions/9/infer", 1).0, 404);
    // Statistics by version: the unversioned request went to version 2.
    let (_, v1) = get(&s, "/v2/models/digits/versions/1/stats");
    let (_, v2) = get(&s, "/v2/models/digits/versions/2/stats");
    assert_eq!(
        v1["model_stats"][0]["inference_stats"]["success"]["count"], 1,
        "{v1}"
    );
    assert_eq!(
        v2["model_stats"][0]["inference_stats"]["success"]["count"], 2,
        "{v2}"
    );
    assert_eq!(v2["model_stats"][0]["inference_count"], 6, "{v2}");
    let (_, all) = get(&s, "/v2/models/digits/stats");
    assert_eq!(
        all["model_stats"].as_array().map(Vec::len),
        Some(2),
        "{all}"
    );
}

#[test]
fn perf_analyzer_runs_against_a_repository_model_over_grpc() {
    let s = start();
    let dir = weir_home().join("perf_analyzer");
    let out = Command::new(dir.join("bin/perf_analyzer"))
        .env("LD_LIBRARY_PATH", dir.join("lib"))
        .args(["-m", "digits", "-u", &s.grpc, "-i", "grpc", "-b", "2"])
        .args([
            "--concurrency-range",
            "2",
            "--measurement-mode",
            "count_windows",
        ])
        .args([
            "--measurement-request-count",
            "50",
            "--stability-percentage",
            "1000",
        ])
        .args(["--max-trials", "3"])
        .output()
        .expect("perf_analyzer runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Server:"), "{text}");
    let (_, stats) = get(&s, "/v2/models/digits/versions/2/stats");
    let st = &stats["model_stats"][0];
    let requests = st["inference_stats"]["success"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert!(requests > 0, "{stats}");
    // Batch 2: every request carried two rows.
    assert_eq!(
        st["inference_count"].as_u64(),
        Some(2 * requests),
        "{stats}"
    );
}

/// A graph file whose model node runs `node` (the YAML of its `repository:` and other fields)
/// on the 64 pixels of `digits`, in a folder of its own.
fn repository_graph(node: &str) -> (TempDir, std::path::PathBuf) {
    let out = weir_engine::onnx::read_metadata(&model("digits_mlp.onnx"))
        .expect("digits metadata")
        .outputs[0]
        .name
        .clone();
    let dir = temp_dir("repository-node");
    let path = dir.0.join("pipeline.yaml");
    write(
        &path,
        &format!(
            "name: pipeline\ninputs:\n  - {{name: pixels, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: classify, {node}, inputs: {{x: pixels}}}}\noutputs:\n  - {{name: scores, from: classify.{out}}}\n"
        ),
    );
    (dir, path)
}

/// `weir serve` of `graph` beside the repository at `root` (none when `None`), expected to
/// refuse to start: its stderr.
fn refused(graph: &Path, root: Option<&Path>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.current_dir(repo())
        .arg("serve")
        .arg(graph)
        .args(["--http", "127.0.0.1:0"]);
    if let Some(root) = root {
        cmd.arg("--model-repository").arg(root);
    }
    refused_start(&mut cmd, "with a bad repository node")
}

#[test]
fn a_graph_node_runs_a_repository_model_by_name_and_version() {
    let (_graph_dir, graph) = repository_graph("repository: {name: digits, version: 2}");
    let s = start_with(&[graph.to_str().expect("path")]);
    // The graph serves beside the repository's own models, and answers as ONNX Runtime does.
    let data: Vec<f32> = (0..64).map(|i| (i % 17) as f32 / 16.0).collect();
    let want = direct_ort(&model("digits_mlp.onnx"), "x", &[1, 64], &data);
    let body =
        json!({"inputs": [{"name": "pixels", "datatype": "FP32", "shape": [64], "data": data}]});
    let (code, reply) = http(
        &s.http,
        "POST",
        "/v2/models/pipeline/infer",
        &[],
        body.to_string().as_bytes(),
    );
    assert_eq!(code, 200, "{reply}");
    let reply: Value = serde_json::from_str(&reply).expect("JSON reply");
    let got: Vec<f32> = reply["outputs"][0]["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("number") as f32)
        .collect();
    assert_close(&got, &want, 1e-5, "the repository model inside a graph");
    assert_eq!(
        get(&s, "/v2/models/digits").0,
        200,
        "the model serves alone too"
    );
    let root = s.root.clone();

    // What cannot be resolved is refused at start, naming the node and why (the repository
    // stays while the first server runs).
    for (node, root, expected) in [
        (
            "repository: nothing",
            Some(&root),
            "no model repository holds a model `nothing`",
        ),
        (
            "repository: {name: digits, version: 7}",
            Some(&root),
            "model `digits` version 7",
        ),
        ("repository: bad", Some(&root), "model `bad`"),
        (
            "repository: digits, batching: {max_size: 2}",
            Some(&root),
            "`batching` is set both here and by repository model `digits`",
        ),
        (
            "repository: digits, path: x.onnx",
            Some(&root),
            "`path` is set both here",
        ),
        ("repository: digits", None, "--model-repository"),
    ] {
        let (_dir, graph) = repository_graph(node);
        let err = refused(&graph, root.map(|p| p.as_path()));
        assert!(
            err.contains("nodes.classify.repository") || err.contains("node `classify`"),
            "{node}: {err}"
        );
        assert!(err.contains(expected), "{node}: {err}");
    }
    drop(s);
}
