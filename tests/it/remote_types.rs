//! Every datatype through model nodes on a remote `weir executor` (Arrow IPC over zenoh on
//! loopback), a model without a batch dimension there, and padded batching there: the answers are
//! ONNX Runtime's own.

use std::path::Path;

use weir::{plan_spec, start, DType, GraphSpec, RuntimeOptions, Tensor, TensorData};

use crate::common::{model, named};
use crate::distributed::{loopback, Executor};
use crate::reference::{first_of_batch, ort_reference};

/// The set-up's model file for `dtype` (`x [N, 4] → y = x, z`).
fn dtype_model(dtype: DType) -> String {
    match dtype {
        DType::Bytes => "dtypes/string.onnx".into(),
        other => format!("dtypes/{}.onnx", other.name()),
    }
}

/// Four elements of `dtype`, with something of every kind the type holds (negatives, fractions,
/// non-ASCII text).
fn four(dtype: DType) -> TensorData {
    let ints = [0i64, 1, 7, 100];
    let floats = [0.5f64, -1.25, 3.0, 1e-3];
    match dtype {
        DType::Bool => TensorData::Bool(vec![true, false, true, true]),
        DType::U8 => TensorData::U8(ints.iter().map(|&v| v as u8).collect()),
        DType::U16 => TensorData::U16(ints.iter().map(|&v| v as u16 * 300).collect()),
        DType::U32 => TensorData::U32(ints.iter().map(|&v| v as u32 * 70_000).collect()),
        DType::U64 => TensorData::U64(ints.iter().map(|&v| v as u64 * (1 << 40)).collect()),
        DType::I8 => TensorData::I8(ints.iter().map(|&v| -(v as i8)).collect()),
        DType::I16 => TensorData::I16(ints.iter().map(|&v| v as i16 * -300).collect()),
        DType::I32 => TensorData::I32(ints.iter().map(|&v| v as i32 * -70_000).collect()),
        DType::I64 => TensorData::I64(ints.iter().map(|&v| v * -(1 << 40)).collect()),
        DType::F16 => TensorData::F16(floats.iter().map(|&v| half::f16::from_f64(v)).collect()),
        DType::F32 => TensorData::F32(floats.iter().map(|&v| v as f32).collect()),
        DType::F64 => TensorData::F64(floats.to_vec()),
        DType::Bf16 => TensorData::Bf16(floats.iter().map(|&v| half::bf16::from_f64(v)).collect()),
        DType::Bytes => TensorData::Bytes(vec![
            b"a".to_vec(),
            "bé".as_bytes().to_vec(),
            Vec::new(),
            b"xyz".to_vec(),
        ]),
    }
}

/// A graph with one node per datatype and the unbatched model, every node on executor `remote`.
fn graph(endpoint: &str) -> GraphSpec {
    let mut inputs = String::new();
    let mut nodes = String::new();
    let mut outputs = String::new();
    for dtype in DType::ALL {
        let t = dtype.name();
        inputs.push_str(&format!("  - {{name: x_{t}, dtype: {t}, shape: [4]}}\n"));
        nodes.push_str(&format!(
            "  - model: {{id: t_{t}, path: {}, inputs: {{x: x_{t}}}, replicas: [remote]}}\n",
            model(&dtype_model(dtype)).display()
        ));
        outputs.push_str(&format!(
            "  - {{name: y_{t}, from: t_{t}.y}}\n  - {{name: z_{t}, from: t_{t}.z}}\n"
        ));
    }
    inputs.push_str(
        "  - {name: x, dtype: f32, shape: [3, 4]}\n  - {name: s, dtype: f32, shape: []}\n",
    );
    nodes.push_str(&format!(
        "  - model: {{id: scale, path: {}, batch: false, inputs: {{x: x, s: s}}, replicas: [remote]}}\n",
        model("unbatched_scale.onnx").display()
    ));
    outputs.push_str("  - {name: y, from: scale.y}\n  - {name: total, from: scale.total}\n");
    let yaml = format!(
        "name: types\ninputs:\n{inputs}executors:\n  - {{name: remote, endpoint: \"{endpoint}\"}}\nnodes:\n{nodes}outputs:\n{outputs}"
    );
    GraphSpec::from_yaml(&yaml, "types.yaml").expect("parses")
}

#[test]
fn every_datatype_and_an_unbatched_model_run_on_a_remote_executor_as_in_onnxruntime() {
    let endpoint = loopback();
    let mut extra: Vec<String> = Vec::new();
    for dtype in DType::ALL {
        extra.push("--model".into());
        extra.push(format!(
            "t_{}={}",
            dtype.name(),
            model(&dtype_model(dtype)).display()
        ));
    }
    extra.push("--model".into());
    extra.push(format!("scale={}", model("unbatched_scale.onnx").display()));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let _executor = Executor::serving_with("remote", &endpoint, "dtypes/f32.onnx", &extra);
    let planned = plan_spec(&graph(&endpoint), Path::new(".")).expect("valid");
    let running = start(planned.plan, RuntimeOptions::default()).expect("starts");
    let mut request: Vec<_> = DType::ALL
        .iter()
        .map(|&d| {
            named(
                &format!("x_{}", d.name()),
                Tensor {
                    shape: vec![4],
                    data: four(d),
                },
            )
        })
        .collect();
    let x = Tensor::f32(vec![3, 4], (0..12).map(|i| i as f32 - 5.5).collect());
    let s = Tensor::f32(vec![], vec![-0.75]);
    request.push(named("x", x.clone()));
    request.push(named("s", s.clone()));
    let reply = running.runtime().infer(request).expect("answered");
    for dtype in DType::ALL {
        let t = dtype.name();
        let x = Tensor {
            shape: vec![1, 4],
            data: four(dtype),
        };
        for (name, want) in ort_reference(&model(&dtype_model(dtype)), &[("x", &x)]) {
            let got = reply
                .output(&format!("{name}_{t}"))
                .unwrap_or_else(|| panic!("{name}_{t}"));
            assert_eq!(got, &first_of_batch(&want), "{name} of {t}");
        }
    }
    for (name, want) in ort_reference(&model("unbatched_scale.onnx"), &[("x", &x), ("s", &s)]) {
        assert_eq!(
            reply.output(&name),
            Some(&want),
            "{name} of the unbatched model"
        );
    }
    running.shutdown();
}

/// A `batch: false` node on a model whose first dimension could be a batch dimension: an executor
/// reading it as one refuses the node's jobs naming the flag it needs, and one started with
/// `--unbatched` runs them with the tensors as they are.
#[test]
fn an_unbatched_node_needs_an_executor_that_calls_the_model_unbatched() {
    let onnx = model("dtypes/f32.onnx");
    let yaml = |endpoint: &str| {
        format!(
            "name: whole\ninputs:\n  - {{name: x, dtype: f32, shape: [-1, 4]}}\nexecutors:\n  - {{name: e, endpoint: \"{endpoint}\"}}\nnodes:\n  - model: {{id: m, path: {}, batch: false, inputs: {{x: x}}, replicas: [e]}}\noutputs:\n  - {{name: z, from: m.z}}\n",
            onnx.display()
        )
    };
    let x = Tensor::f32(vec![2, 4], (0..8).map(|i| i as f32).collect());
    for unbatched in [false, true] {
        let endpoint = loopback();
        let extra: &[&str] = if unbatched {
            &["--unbatched", "m"]
        } else {
            &[]
        };
        let _executor = Executor::serving_with("e", &endpoint, "dtypes/f32.onnx", extra);
        let spec = GraphSpec::from_yaml(&yaml(&endpoint), "whole.yaml").expect("parses");
        let planned = plan_spec(&spec, Path::new(".")).expect("valid");
        let running = start(planned.plan, RuntimeOptions::default()).expect("starts");
        let answer = running.runtime().infer(vec![named("x", x.clone())]);
        running.shutdown();
        match (unbatched, answer) {
            (false, Err(e)) => assert!(e.to_string().contains("--unbatched m"), "{e}"),
            (true, Ok(reply)) => {
                let want = ort_reference(&onnx, &[("x", &x)]);
                let z = want.iter().find(|(n, _)| n == "z").expect("z");
                assert_eq!(reply.output("z"), Some(&z.1));
            }
            (_, other) => panic!("unbatched executor {unbatched}: {other:?}"),
        }
    }
}

/// Padded batching on a remote executor (`--pad m=seq:0`): requests of different lengths, sent
/// as the graph's jobs, are each answered as ONNX Runtime answers them alone; a dimension the
/// model does not have stops the executor at start, naming it.
#[test]
fn a_remote_executor_pads_requests_of_different_lengths() {
    let onnx = model("seq_pool.onnx");
    let endpoint = loopback();
    let _executor = Executor::serving_with(
        "e",
        &endpoint,
        "seq_pool.onnx",
        &["--pad", "m=seq:0", "--max-delay-us", "20000"],
    );
    let yaml = format!(
        "name: pooled\ninputs:\n  - {{name: ids, dtype: i64, shape: [seq]}}\n  - {{name: mask, dtype: i64, shape: [seq]}}\nexecutors:\n  - {{name: e, endpoint: \"{endpoint}\"}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{input_ids: ids, attention_mask: mask}}, batching: {{max_size: 8}}, replicas: [e]}}\noutputs:\n  - {{name: pooled, from: m.pooled}}\n",
        onnx.display()
    );
    let spec = GraphSpec::from_yaml(&yaml, "pooled.yaml").expect("parses");
    let planned = plan_spec(&spec, Path::new(".")).expect("valid");
    let running = start(planned.plan, RuntimeOptions::default()).expect("starts");
    let replies = crate::common::Replies::default();
    let (tx, rx) = crate::common::channel();
    let request = |len: usize| {
        let ids = Tensor::i64(
            vec![len],
            (0..len as i64).map(|i| (i * 3 + 1) % 50).collect(),
        );
        let mask = Tensor::i64(vec![len], vec![1; len]);
        (ids, mask)
    };
    let lengths: Vec<usize> = (0..12).map(|i| 2 + (i * 5) % 11).collect();
    for (tag, &len) in lengths.iter().enumerate() {
        let (ids, mask) = request(len);
        replies.submit(
            &running,
            tag as u64,
            vec![named("ids", ids), named("mask", mask)],
            &tx,
        );
    }
    drop(tx);
    let answers: Vec<_> = rx.iter().collect();
    assert_eq!(answers.len(), lengths.len());
    assert!(
        replies.counts().values().all(|&n| n == 1),
        "answered once each"
    );
    for (tag, reply) in answers {
        let (ids, mask) = request(lengths[tag as usize]);
        let want = ort_reference(
            &onnx,
            &[
                ("input_ids", &crate::reference::batch_of_one(&ids)),
                ("attention_mask", &crate::reference::batch_of_one(&mask)),
            ],
        );
        let pooled = want.iter().find(|(n, _)| n == "pooled").expect("pooled");
        let reply = reply.expect("answered");
        assert_eq!(
            reply.output("pooled"),
            Some(&first_of_batch(&pooled.1)),
            "request {tag}"
        );
    }
    running.shutdown();
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["executor", "--name", "bad", "--listen", &loopback()])
        .args([
            "--model",
            &format!("m={}", onnx.display()),
            "--pad",
            "m=length:0",
        ])
        .output()
        .expect("runs");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("no input of the model has a dimension named `length`"),
        "{said}"
    );
}
