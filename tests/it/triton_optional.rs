//! Triton's `optional: true` inputs through the real process. The model is `y = x * scale + bias`
//! whose `scale` is an overridable initializer (listed among the graph's inputs with a value in
//! the file), so ONNX Runtime runs it with or without `scale`. A request leaving `scale` out
//! answers what ONNX Runtime answers without it (the file's value), one giving it what ONNX
//! Runtime answers with it — over JSON, and through tritonclient HTTP and gRPC with both kinds
//! interleaved on a batching model and on one that does not batch, each answered once by id. The
//! configuration shows which inputs are optional; `optional: true` on an input the file has no
//! value for is refused at load, naming the field and why.

use std::path::Path;

use serde_json::{json, Value};
use weir::Tensor;

use crate::common::{assert_close, repo, run_python_script, temp_dir, weir_home};
use crate::reference::{ort_reference, outputs_from_json, request_json};
use crate::serve::http;
use crate::triton_repository::{copy, get, serve, write, RepoServer};

/// Writes `y = x * scale + bias` (x, scale, y: `[N, 4]` f32; `scale` an initializer of
/// `[[2, 3, 4, 5]]` listed among the inputs, IR 8; `bias` `[0.5, -1, 0, 1]`) to `path`.
pub(crate) fn affine_model(path: &Path) {
    let script = r#"
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T

x = helper.make_tensor_value_info('x', T.FLOAT, ['N', 4])
scale = helper.make_tensor_value_info('scale', T.FLOAT, ['N', 4])
y = helper.make_tensor_value_info('y', T.FLOAT, ['N', 4])
inits = [numpy_helper.from_array(np.array([[2, 3, 4, 5]], np.float32), 'scale'),
         numpy_helper.from_array(np.array([0.5, -1, 0, 1], np.float32), 'bias')]
nodes = [helper.make_node('Mul', ['x', 'scale'], ['m']),
         helper.make_node('Add', ['m', 'bias'], ['y'])]
g = helper.make_graph(nodes, 'affine', [x, scale], [y], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
"#;
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    run_python_script(
        script,
        &[path],
        "writing a model with an overridable initializer",
    );
}

const BATCHED: &str = r#"max_batch_size: 8
input [
  { name: "x" data_type: TYPE_FP32 dims: [4] },
  { name: "scale" data_type: TYPE_FP32 dims: [4] optional: true }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 }
"#;

const UNBATCHED: &str = r#"max_batch_size: 0
input [
  { name: "x" data_type: TYPE_FP32 dims: [-1, 4] },
  { name: "scale" data_type: TYPE_FP32 dims: [-1, 4] optional: true }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [-1, 4] } ]
"#;

/// `x` is a real input (no initializer): it cannot be optional.
const NO_DEFAULT: &str = r#"max_batch_size: 0
input [
  { name: "x" data_type: TYPE_FP32 dims: [-1, 4] optional: true },
  { name: "scale" data_type: TYPE_FP32 dims: [-1, 4] optional: true }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [-1, 4] } ]
"#;

/// One JSON request to `model`; its `y`.
fn infer_y(s: &RepoServer, model: &str, inputs: &[(&str, &Tensor)]) -> Tensor {
    let body = request_json(inputs).to_string();
    let path = format!("/v2/models/{model}/infer");
    let (code, reply) = http(&s.http, "POST", &path, &[], body.as_bytes());
    assert_eq!(code, 200, "{path}: {reply}");
    let outputs = outputs_from_json(&serde_json::from_str(&reply).expect("a JSON reply"));
    outputs
        .into_iter()
        .find(|(n, _)| n == "y")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no `y` in {reply}"))
}

fn same(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    let (Some(g), Some(w)) = (got.as_f32(), want.as_f32()) else {
        panic!("{what}: f32 tensors expected");
    };
    assert_close(g, w, 1e-6, what);
}

#[test]
fn optional_inputs_run_on_the_files_value_when_left_out_and_on_the_requests_when_given() {
    weir_home();
    let dir = temp_dir("triton-optional");
    let root = dir.0.join("models");
    let file = root.join("affine/1/model.onnx");
    affine_model(&file);
    for name in ["affine_whole", "no_default"] {
        copy(&file, &root.join(format!("{name}/1/model.onnx")));
    }
    write(&root.join("affine/config.pbtxt"), BATCHED);
    write(&root.join("affine_whole/config.pbtxt"), UNBATCHED);
    write(&root.join("no_default/config.pbtxt"), NO_DEFAULT);
    let s = serve(dir, root, &[]);

    // The configuration shows which inputs are optional, as Triton's does.
    for model in ["affine", "affine_whole"] {
        let (code, config) = get(&s, &format!("/v2/models/{model}/config"));
        assert_eq!(code, 200, "{config}");
        let flags: Vec<(Value, Value)> = config["input"]
            .as_array()
            .map(|ts| {
                ts.iter()
                    .map(|t| (t["name"].clone(), t["optional"].clone()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            flags,
            [(json!("x"), json!(false)), (json!("scale"), json!(true))],
            "{model}: {config}"
        );
    }

    // JSON requests: without `scale` as ONNX Runtime without it; with it as ONNX Runtime with it.
    let x = Tensor::f32(vec![2, 4], vec![1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 2.0]);
    let scale = Tensor::f32(vec![2, 4], vec![10.0, 20.0, 30.0, 40.0, 1.0, 1.0, 1.0, 1.0]);
    let plain = ort_reference(&file, &[("x", &x)]);
    let given = ort_reference(&file, &[("x", &x), ("scale", &scale)]);
    assert_ne!(plain[0].1, given[0].1, "the test needs `scale` to matter");
    for model in ["affine", "affine_whole"] {
        same(&infer_y(&s, model, &[("x", &x)]), &plain[0].1, model);
        same(
            &infer_y(&s, model, &[("x", &x), ("scale", &scale)]),
            &given[0].1,
            model,
        );
    }

    // tritonclient over HTTP and gRPC, with and without `scale` interleaved: under dynamic
    // batching on `affine`, one request per call on `affine_whole`.
    for model in ["affine", "affine_whole"] {
        let out = std::process::Command::new(weir_home().join("venv/bin/python"))
            .arg(repo().join("tests/python/optional_client.py"))
            .args(["--http", &s.http, "--grpc", &s.grpc, "--model", model])
            .arg("--onnx")
            .arg(&file)
            .args(["--optional", "scale", "--requests", "40"])
            .output()
            .expect("python runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "optional_client.py failed:\n{stdout}\n{}\nserver:\n{}",
            String::from_utf8_lossy(&out.stderr),
            s.stderr.lock().expect("stderr")
        );
        let seen: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
        for client in ["http", "grpc"] {
            let c = &seen[client];
            assert_eq!(
                c["optional"],
                json!({"x": false, "scale": true}),
                "{model} {client}: {c}"
            );
            assert_eq!(c["sent"], json!(40), "{model} {client}: {c}");
            assert_eq!(c["answers_per_id"], json!([1]), "{model} {client}: {c}");
            assert_eq!(c["errors"], json!([]), "{model} {client}: {c}");
            let diff = c["max_abs_diff"].as_f64().unwrap_or(f64::INFINITY);
            assert!(diff <= 1e-6, "{model} {client}: {c}");
        }
    }

    // `optional: true` on an input the file holds no value for is refused at load, naming the
    // model's field and why; the other models keep serving.
    let (code, body) = http(&s.http, "POST", "/v2/repository/index", &[], b"{}");
    assert_eq!(code, 200, "{body}");
    let index: Value = serde_json::from_str(&body).expect("JSON");
    let refused = index
        .as_array()
        .and_then(|models| models.iter().find(|m| m["name"] == "no_default"))
        .unwrap_or_else(|| panic!("no_default in the index: {index}"));
    assert_eq!(refused["state"], json!("UNAVAILABLE"), "{refused}");
    let reason = refused["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("input[0].optional") && reason.contains("no default value"),
        "{reason}"
    );
    let (code, _) = get(&s, "/v2/models/no_default/ready");
    assert_ne!(code, 200);
    same(
        &infer_y(&s, "affine", &[("x", &x)]),
        &plain[0].1,
        "affine after",
    );
}
