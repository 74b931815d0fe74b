//! A Triton sequence model through the real process and Triton's own clients: a configuration
//! with `sequence_batching` control inputs (START as FP32, END as INT32, READY as BOOL, CORRID
//! as UINT64) and implicit state runs, weir filling the control tensors from each request's
//! `sequence_id`, `sequence_start` and `sequence_end` and keeping the state per sequence. The
//! model (an accumulator that restarts from `x + 100` on START, echoes CORRID and END, and zeroes
//! its answer on a row not READY) answers every step of two interleaved sequences as the
//! sequence batcher would have it, over HTTP and gRPC.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{repo, run_python_script, temp_dir, weir_home};
use crate::triton_repository::{serve, write};

/// The accumulator: `acc = START ? x + 100 : state_in + x`, times READY; `y = state_out = acc`,
/// `corr = CORRID`, `ended = END`. Every tensor has a free batch dimension.
fn accumulator(path: &Path) {
    let script = "import sys, onnx\n\
from onnx import helper, TensorProto as T\n\
v = helper.make_tensor_value_info\n\
ins = [v('x', T.FLOAT, ['N', 4]), v('START', T.FLOAT, ['N', 1]), v('END', T.INT32, ['N', 1]),\n\
       v('READY', T.BOOL, ['N', 1]), v('CORRID', T.UINT64, ['N', 1]), v('state_in', T.FLOAT, ['N', 4])]\n\
outs = [v('y', T.FLOAT, ['N', 4]), v('state_out', T.FLOAT, ['N', 4]), v('corr', T.UINT64, ['N', 1]),\n\
        v('ended', T.INT32, ['N', 1])]\n\
c = lambda name, value: helper.make_tensor(name, T.FLOAT, [], [value])\n\
n = helper.make_node\n\
nodes = [n('Add', ['x', 'hundred'], ['fresh']), n('Add', ['state_in', 'x'], ['carried']),\n\
         n('Sub', ['one', 'START'], ['keep']), n('Mul', ['START', 'fresh'], ['a']),\n\
         n('Mul', ['keep', 'carried'], ['b']), n('Add', ['a', 'b'], ['acc']),\n\
         n('Cast', ['READY'], ['ready'], to=T.FLOAT), n('Mul', ['acc', 'ready'], ['y']),\n\
         n('Identity', ['y'], ['state_out']), n('Identity', ['CORRID'], ['corr']),\n\
         n('Identity', ['END'], ['ended'])]\n\
g = helper.make_graph(nodes, 'accumulator', ins, outs, [c('hundred', 100.0), c('one', 1.0)])\n\
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])\n\
m.ir_version = 8\n\
onnx.checker.check_model(m)\n\
onnx.save(m, sys.argv[1])\n";
    run_python_script(script, &[path], "writing the accumulator model");
}

const CONFIG: &str = r#"name: "acc"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]
output [
  { name: "y" data_type: TYPE_FP32 dims: [4] },
  { name: "corr" data_type: TYPE_UINT64 dims: [1] },
  { name: "ended" data_type: TYPE_INT32 dims: [1] }
]
sequence_batching {
  max_sequence_idle_microseconds: 600000000
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [0, 1] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [0, 1] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY bool_false_true: [false, true] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "state_in" output_name: "state_out" data_type: TYPE_FP32 dims: [4]
            initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [4] zero_data: true } ] } ]
}
"#;

/// What the sequence batcher gives for `sequence_client.py`'s steps with sequence ids `base + 1`
/// and `base + 2`: `(sequence, y, corr, ended)` per step.
fn expected(base: u64) -> Vec<Value> {
    let (a, b) = (base + 1, base + 2);
    let step = |seq: u64, y: [f32; 4], ended: i32| json!({"sequence": seq, "y": y, "corr": seq, "ended": ended});
    vec![
        step(a, [101.0, 102.0, 103.0, 104.0], 0),
        step(b, [110.0; 4], 0),
        step(a, [102.0, 103.0, 104.0, 105.0], 0),
        step(b, [115.0; 4], 1),
        step(a, [104.0, 105.0, 106.0, 107.0], 1),
        step(a, [107.0; 4], 0),
    ]
}

#[test]
fn sequence_control_inputs_are_filled_from_tritonclient_sequence_parameters() {
    weir_home();
    let dir = temp_dir("triton-sequences");
    let root = dir.0.join("models");
    std::fs::create_dir_all(root.join("acc/1")).expect("mkdir");
    accumulator(&root.join("acc/1/model.onnx"));
    write(&root.join("acc/config.pbtxt"), CONFIG);
    let server = serve(dir, root, &[]);
    let out = std::process::Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("tests/python/sequence_client.py"))
        .args([
            "--http",
            &server.http,
            "--grpc",
            &server.grpc,
            "--model",
            "acc",
        ])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "sequence_client.py failed:\n{stdout}\n{}\nserver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.stderr.lock().expect("stderr")
    );
    let seen: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    for (client, base) in [("http", 10), ("grpc", 20)] {
        let s = &seen[client];
        assert_eq!(s["inputs"], json!(["x"]), "{client}: {s}");
        assert_eq!(s["steps"], json!(expected(base)), "{client}: {s}");
        let refused = s["no_sequence"].as_str().unwrap_or_default();
        assert!(
            refused.contains("parameters.sequence_id"),
            "{client}: a request naming no sequence is refused naming the field: {refused}"
        );
    }
}
