//! A Triton ensemble of three steps through the real process: `chain` runs `first`, `second` and
//! `third` (small ONNX models with seeded weights, written here, none with a `config.pbtxt`), its
//! tensors wired by `input_map`/`output_map`, and answers what running the three models in ONNX
//! Runtime one after the other gives, for its final output and for the middle tensor it also
//! returns.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{assert_close, direct_ort, run_python_script, temp_dir, weir_home};
use crate::serve::http;
use crate::triton_repository::{serve, write};

/// `first: x [N, 4] -> y [N, 8]` (MatMul), `second: x [N, 8] -> y [N, 8]` (Relu of x + b),
/// `third: x [N, 8] -> y [N, 3]` (MatMul then Tanh), weights from a fixed seed.
fn models(root: &Path) {
    let script = r#"
import sys, os, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto as T

rng = np.random.default_rng(54)

def save(name, n_in, n_out, nodes, inits):
    x = helper.make_tensor_value_info('x', T.FLOAT, ['N', n_in])
    y = helper.make_tensor_value_info('y', T.FLOAT, ['N', n_out])
    g = helper.make_graph(nodes, name, [x], [y], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    os.makedirs(os.path.join(sys.argv[1], name, '1'), exist_ok=True)
    onnx.save(m, os.path.join(sys.argv[1], name, '1', 'model.onnx'))

def w(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

n = helper.make_node
save('first', 4, 8, [n('MatMul', ['x', 'w'], ['y'])], [w('w', (4, 8))])
save('second', 8, 8, [n('Add', ['x', 'b'], ['s']), n('Relu', ['s'], ['y'])], [w('b', (8,))])
save('third', 8, 3, [n('MatMul', ['x', 'w'], ['m']), n('Tanh', ['m'], ['y'])], [w('w', (8, 3))])
"#;
    run_python_script(script, &[root], "writing the ensemble's step models");
}

const CHAIN: &str = r#"name: "chain"
platform: "ensemble"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]
output [
  { name: "out" data_type: TYPE_FP32 dims: [3] },
  { name: "hidden" data_type: TYPE_FP32 dims: [8] }
]
ensemble_scheduling { step [
  { model_name: "third" model_version: -1
    input_map { key: "x" value: "hidden" } output_map { key: "y" value: "out" } },
  { model_name: "first" model_version: -1
    input_map { key: "x" value: "x" } output_map { key: "y" value: "projected" } },
  { model_name: "second" model_version: -1
    input_map { key: "x" value: "projected" } output_map { key: "y" value: "hidden" } }
] }
"#;

fn output(reply: &Value, name: &str) -> Vec<f32> {
    let o = reply["outputs"]
        .as_array()
        .and_then(|all| all.iter().find(|o| o["name"] == name))
        .unwrap_or_else(|| panic!("no output `{name}`: {reply}"));
    o["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_f64().expect("a number") as f32)
        .collect()
}

#[test]
fn a_three_step_ensemble_equals_its_steps_run_one_after_another_in_onnx_runtime() {
    weir_home();
    let dir = temp_dir("triton-ensemble");
    let root = dir.0.join("models");
    std::fs::create_dir_all(&root).expect("mkdir");
    models(&root);
    write(&root.join("chain/config.pbtxt"), CHAIN);
    std::fs::create_dir_all(root.join("chain/1")).expect("mkdir");
    let model = |name: &str| root.join(format!("{name}/1/model.onnx"));
    let (first, second, third) = (model("first"), model("second"), model("third"));
    let server = serve(dir, root.clone(), &[]);
    for rows in [1usize, 3] {
        let x: Vec<f32> = (0..rows * 4).map(|i| (i as f32 - 5.0) / 3.0).collect();
        let body =
            json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, 4], "data": x}]});
        let (code, reply) = http(
            &server.http,
            "POST",
            "/v2/models/chain/infer",
            &[],
            body.to_string().as_bytes(),
        );
        assert_eq!(code, 200, "{reply}");
        let reply: Value = serde_json::from_str(&reply).expect("JSON reply");
        let projected = direct_ort(&first, "x", &[rows, 4], &x);
        let hidden = direct_ort(&second, "x", &[rows, 8], &projected);
        let out = direct_ort(&third, "x", &[rows, 8], &hidden);
        assert_close(&output(&reply, "hidden"), &hidden, 1e-5, "hidden");
        assert_close(&output(&reply, "out"), &out, 1e-5, "out");
    }
    let (code, config) = http(&server.http, "GET", "/v2/models/chain/config", &[], b"");
    assert_eq!(code, 200, "{config}");
    let config: Value = serde_json::from_str(&config).expect("JSON config");
    assert_eq!(
        config["ensemble_scheduling"]["step"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "{config}"
    );
}
