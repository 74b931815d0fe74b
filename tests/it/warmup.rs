//! A model node's `warmup:` through the real `weir serve`: every session runs its warm-up calls
//! before the server reports ready (read from the node's warm-up counter, apart from served
//! calls), zeros and seeded random values for a model with a free dimension and a given shape,
//! a JSON file of one request's inputs, and bad warm-ups refused naming the field.

use std::process::Stdio;

use crate::common::{model, refused_start, temp_dir};
use crate::serve::{mlp_request, serve_command, Server, INFER};

/// The value of `family{graph="<graph>",node="<node>"}` in a `/metrics` page.
fn counter(metrics: &str, family: &str, graph: &str, node: &str) -> Option<f64> {
    let labels = format!("{family}{{graph=\"{graph}\",node=\"{node}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&labels))
        .and_then(|v| v.trim().parse().ok())
}

fn mlp_graph(warmup: &str, extra: &str) -> String {
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, batching: {{max_size: 4}}{extra}, warmup: {warmup}}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    )
}

#[test]
fn every_session_runs_its_warm_up_calls_before_the_server_is_ready() {
    let server = Server::start(
        &[mlp_graph(
            "{data: random, seed: 7, runs: 3, batch_size: 2}",
            ", executor: {instances: 2}",
        )],
        &[],
    );
    // Ready now: the two sessions ran three calls each, and nothing was served yet.
    let (_, metrics) = server.get("/metrics");
    let warm = "weir_executor_warmup_runs_total";
    assert_eq!(counter(&metrics, warm, "mlp", "m"), Some(6.0), "{metrics}");
    let runs = "weir_executor_runs_total";
    assert_eq!(counter(&metrics, runs, "mlp", "m"), Some(0.0), "{metrics}");
    assert_eq!(server.get("/v2/models/mlp/ready").0, 200);
    let (code, body) = server.post(INFER, &[], &mlp_request(64, "[64]", "FP32"));
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = server.get("/metrics");
    assert_eq!(counter(&metrics, warm, "mlp", "m"), Some(6.0), "{metrics}");
    assert_eq!(counter(&metrics, runs, "mlp", "m"), Some(1.0), "{metrics}");
}

/// `seq_pool.onnx` (inputs `input_ids`, `attention_mask`: `[batch, seq]`, i64) as node `id`.
fn seq_node(id: &str, warmup: &str) -> String {
    format!(
        "  - model: {{id: {id}, path: {}, inputs: {{input_ids: ids, attention_mask: mask}}, batching: {{max_size: 4}}, warmup: {warmup}}}\n",
        model("seq_pool.onnx").display()
    )
}

#[test]
fn zeros_and_random_warm_a_model_with_a_free_dimension_at_the_given_shape() {
    let graph = format!(
        "name: pool\ninputs:\n  - {{name: ids, dtype: i64, shape: [seq]}}\n  - {{name: mask, dtype: i64, shape: [seq]}}\nnodes:\n{}{}outputs:\n  - {{name: a, from: zeros.pooled}}\n  - {{name: b, from: random.pooled}}\n",
        seq_node(
            "zeros",
            "{runs: 2, shape: {input_ids: [5], attention_mask: [5]}}"
        ),
        seq_node(
            "random",
            "{data: random, seed: 1, runs: 4, batch_size: 3, shape: {input_ids: [9], attention_mask: [9]}}"
        ),
    );
    let server = Server::start(&[graph], &[]);
    let (_, metrics) = server.get("/metrics");
    let warm = "weir_executor_warmup_runs_total";
    assert_eq!(
        counter(&metrics, warm, "pool", "zeros"),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        counter(&metrics, warm, "pool", "random"),
        Some(4.0),
        "{metrics}"
    );
}

#[test]
fn a_json_file_of_one_request_warms_the_node() {
    let dir = temp_dir("warmup-file");
    let file = dir.0.join("warm.json");
    let data: Vec<f32> = (0..64).map(|i| i as f32 / 64.0).collect();
    let body = serde_json::json!({"inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": data}]});
    std::fs::write(&file, body.to_string()).expect("write");
    let server = Server::start(
        &[mlp_graph(
            &format!("{{file: {}, runs: 2}}", file.display()),
            "",
        )],
        &[],
    );
    let (_, metrics) = server.get("/metrics");
    assert_eq!(
        counter(&metrics, "weir_executor_warmup_runs_total", "mlp", "m"),
        Some(2.0),
        "{metrics}"
    );
}

/// Runs `weir serve` on `graph`, which must fail to start; returns its stderr.
fn refused(graph: String) -> String {
    let (mut cmd, _dir) = serve_command("warmup-refused", &[graph]);
    cmd.args(["--http", "127.0.0.1:0"]);
    refused_start(&mut cmd, "it did not refuse the graph")
}

#[test]
fn a_bad_warm_up_file_is_refused_naming_the_field() {
    let dir = temp_dir("warmup-bad-file");
    let cases = [
        // 63 elements for a shape of 64.
        (
            serde_json::json!({"inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": vec![0.5f32; 63]}]}).to_string(),
            "inputs[0]",
        ),
        // A name the model does not have.
        (
            serde_json::json!({"inputs": [{"name": "y", "shape": [64], "datatype": "FP32", "data": vec![0.5f32; 64]}]}).to_string(),
            "names no input of the model",
        ),
        // The wrong datatype.
        (
            serde_json::json!({"inputs": [{"name": "x", "shape": [64], "datatype": "INT64", "data": vec![1; 64]}]}).to_string(),
            "the model takes FP32",
        ),
        ("{\"inputs\": [".to_string(), "invalid JSON"),
    ];
    for (i, (text, expected)) in cases.into_iter().enumerate() {
        let file = dir.0.join(format!("bad{i}.json"));
        std::fs::write(&file, text).expect("write");
        let stderr = refused(mlp_graph(&format!("{{file: {}}}", file.display()), ""));
        assert!(
            stderr.contains("nodes.m.warmup.file") && stderr.contains(expected),
            "case {i}: {stderr}"
        );
    }
    // A file that is not there is refused at its YAML position.
    let stderr = refused(mlp_graph("{file: no_such.json}", ""));
    assert!(
        stderr.contains("nodes.m.warmup.file") && stderr.contains(":5:"),
        "{stderr}"
    );
}

#[test]
fn bad_warm_up_settings_are_refused_with_their_yaml_position() {
    let free = format!(
        "name: pool\ninputs:\n  - {{name: ids, dtype: i64, shape: [seq]}}\n  - {{name: mask, dtype: i64, shape: [seq]}}\nnodes:\n{}outputs:\n  - {{name: a, from: p.pooled}}\n",
        seq_node("p", "{runs: 2, shape: {input_ids: [5]}}")
    );
    let stderr = refused(free);
    assert!(
        stderr.contains("nodes.p.warmup.shape.attention_mask")
            && stderr.contains("free dimensions"),
        "{stderr}"
    );
    for (warmup, field) in [
        ("{runs: 0}", "nodes.m.warmup.runs"),
        ("{batch_size: 9}", "nodes.m.warmup.batch_size"),
        ("{seed: 3}", "nodes.m.warmup.seed"),
        ("{shape: {x: [63]}}", "nodes.m.warmup.shape.x"),
        ("{shape: {z: [64]}}", "nodes.m.warmup.shape.z"),
        ("{data: ones}", "warmup"),
    ] {
        let stderr = refused(mlp_graph(warmup, ""));
        assert!(
            stderr.contains(field) && stderr.contains(":5:"),
            "{warmup}: {stderr}"
        );
    }
}

#[test]
fn a_warm_up_call_that_fails_fails_the_start_naming_the_node() {
    // Token 99999999 is past the model's vocabulary: its Gather refuses it when the call runs.
    let dir = temp_dir("warmup-fails");
    let file = dir.0.join("out_of_vocabulary.json");
    let body = serde_json::json!({"inputs": [
        {"name": "input_ids", "shape": [3], "datatype": "INT64", "data": [1, 99_999_999, 3]},
        {"name": "attention_mask", "shape": [3], "datatype": "INT64", "data": [1, 1, 1]},
    ]});
    std::fs::write(&file, body.to_string()).expect("write");
    let graph = format!(
        "name: pool\ninputs:\n  - {{name: ids, dtype: i64, shape: [seq]}}\n  - {{name: mask, dtype: i64, shape: [seq]}}\nnodes:\n{}outputs:\n  - {{name: a, from: p.pooled}}\n",
        seq_node("p", &format!("{{file: {}}}", file.display()))
    );
    let stderr = refused(graph);
    assert!(
        stderr.contains("node `p`: warm-up failed") && stderr.contains("Gather"),
        "{stderr}"
    );
}

#[test]
fn a_remote_executor_warms_each_session_with_its_own_flag() {
    let dir = temp_dir("warmup-executor");
    let log = dir.0.join("executor.log");
    let endpoint = crate::distributed::loopback();
    let model_arg = format!("m={}", model("mlp_a.onnx").display());
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_weir"));
    cmd.args(["executor", "--name", "warm-e", "--listen", &endpoint])
        .args([
            "--model",
            &model_arg,
            "--instances",
            "2",
            "--warmup-runs",
            "3",
        ])
        .env("WEIR_LOG", "info")
        .current_dir(crate::common::repo())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"));
    let mut child = cmd.spawn().expect("weir executor starts");
    // Its first line says it serves: the sessions were made, and warmed, before it.
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.starts_with("weir executor warm-e serving"), "{line}");
    let text = std::fs::read_to_string(&log).expect("the log");
    assert!(
        text.lines()
            .any(|l| l.contains("Sessions warmed up.") && l.contains("calls=6")),
        "{text}"
    );
}
