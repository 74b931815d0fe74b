//! Optional graph inputs (`optional: true`) in YAML and the builder: a request may leave the
//! input out, and is then answered as ONNX Runtime answers without it (the model file's value);
//! requests with and without it, interleaved under dynamic batching, are each answered once with
//! their own answer. Graphs whose optional input has no value to fill are refused naming why:
//! here those binding a model's overridable initializer, `tests/invalid/optional_*.yaml` the
//! others.

use std::path::Path;

use weir::{plan_spec, start, DType, GraphSpec, ModelBuilder, RuntimeOptions, Tensor};

use crate::common::{assert_close, channel, named, temp_dir, Replies};
use crate::reference::ort_reference;
use crate::triton_optional::affine_model;

fn yaml(model: &Path) -> String {
    format!(
        "name: affine
inputs:
  - {{name: x, dtype: f32, shape: [4]}}
  - {{name: scale, dtype: f32, shape: [4], optional: true}}
nodes:
  - model:
      id: affine
      path: {}
      inputs: {{x: x, scale: scale}}
      batching: {{max_size: 8, max_delay_us: 20000}}
outputs:
  - {{name: y, from: affine.y}}
",
        model.display()
    )
}

fn row(i: usize, seed: f32) -> Vec<f32> {
    (0..4).map(|k| (i * 4 + k) as f32 * 0.25 - seed).collect()
}

#[test]
fn requests_without_an_optional_input_get_the_models_value_and_batch_with_those_that_give_it() {
    let dir = temp_dir("optional-inputs");
    let file = dir.0.join("affine.onnx");
    affine_model(&file);
    let spec = GraphSpec::from_yaml(&yaml(&file), "affine.yaml").expect("parses");
    let built = GraphSpec::builder("affine")
        .input("x", DType::F32, &[4])
        .input("scale", DType::F32, &[4])
        .optional("scale")
        .model(
            ModelBuilder::new("affine", &file)
                .input("x", "x")
                .input("scale", "scale")
                .batching(8, 20_000),
        )
        .output("y", "affine.y")
        .build();
    assert_eq!(built, spec);

    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    // The value filled in is the file's, per request (its batch dimension of 1 dropped).
    assert_eq!(
        graph.plan.inputs[1].default,
        Some(Tensor::f32(vec![4], vec![2.0, 3.0, 4.0, 5.0]))
    );
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let replies = Replies::default();
    let (tx, rx) = channel();
    let n = 24;
    for i in 0..n {
        let mut inputs = vec![named("x", Tensor::f32(vec![4], row(i, 1.0)))];
        if i % 2 == 1 {
            inputs.push(named("scale", Tensor::f32(vec![4], row(i, -3.0))));
        }
        replies.submit(&running, i as u64, inputs, &tx);
    }
    drop(tx);
    let mut answers: Vec<_> = rx.iter().collect();
    answers.sort_by_key(|(tag, _)| *tag);
    assert_eq!(answers.len(), n);
    assert!(
        replies.counts().values().all(|&c| c == 1),
        "answered once each"
    );

    // ONNX Runtime on the rows without `scale` (its value from the file), then on those with it.
    let stack = |rows: &mut dyn Iterator<Item = Vec<f32>>| {
        let data: Vec<f32> = rows.flatten().collect();
        Tensor::f32(vec![data.len() / 4, 4], data)
    };
    let plain_x = stack(&mut (0..n).step_by(2).map(|i| row(i, 1.0)));
    let given_x = stack(&mut (1..n).step_by(2).map(|i| row(i, 1.0)));
    let given_scale = stack(&mut (1..n).step_by(2).map(|i| row(i, -3.0)));
    let plain = ort_reference(&file, &[("x", &plain_x)]);
    let given = ort_reference(&file, &[("x", &given_x), ("scale", &given_scale)]);
    let plain = plain[0].1.as_f32().expect("f32").to_vec();
    let given = given[0].1.as_f32().expect("f32").to_vec();
    for (tag, reply) in answers {
        let i = tag as usize;
        let y = reply.expect("answered");
        let y = y.output("y").expect("y");
        assert_eq!(y.shape, vec![4], "request {i}");
        let want = if i.is_multiple_of(2) {
            &plain[(i / 2) * 4..(i / 2) * 4 + 4]
        } else {
            &given[(i / 2) * 4..(i / 2) * 4 + 4]
        };
        assert_close(
            y.as_f32().expect("f32"),
            want,
            1e-6,
            &format!("request {i}"),
        );
    }
    running.shutdown();
}

/// Graphs binding the model's overridable `scale` that cannot run: on a remote executor (which
/// feeds a model only the inputs it cannot run without), and an optional input read by two
/// models holding different values for it. Each is refused naming the field and why.
#[test]
fn optional_inputs_without_one_value_to_fill_are_refused_naming_why() {
    let dir = temp_dir("optional-refused");
    let file = dir.0.join("affine.onnx");
    affine_model(&file);
    let other = dir.0.join("other.onnx");
    let script = r#"
import sys, onnx
from onnx import numpy_helper
m = onnx.load(sys.argv[1])
scale = m.graph.initializer[0]
values = numpy_helper.to_array(scale) * 2
scale.CopyFrom(numpy_helper.from_array(values, 'scale'))
onnx.save(m, sys.argv[2])
"#;
    crate::common::run_python_script(script, &[&file, &other], "doubling the model's scale");
    let refused = |yaml: &str| -> String {
        let spec = GraphSpec::from_yaml(yaml, "g.yaml").expect("parses");
        match plan_spec(&spec, Path::new(".")) {
            Ok(_) => panic!("validated:\n{yaml}"),
            Err(e) => e.to_string(),
        }
    };

    let remote = format!(
        "name: g
inputs:
  - {{name: x, dtype: f32, shape: [4]}}
  - {{name: scale, dtype: f32, shape: [4], optional: true}}
executors:
  - {{name: far, endpoint: tcp/127.0.0.1:9}}
nodes:
  - model: {{id: affine, path: {}, inputs: {{x: x, scale: scale}}, replicas: [far]}}
outputs:
  - {{name: y, from: affine.y}}
",
        file.display()
    );
    let err = refused(&remote);
    assert!(
        err.contains("nodes.affine.inputs.scale") && err.contains("remote executors"),
        "{err}"
    );

    let two = format!(
        "name: g
inputs:
  - {{name: x, dtype: f32, shape: [4]}}
  - {{name: scale, dtype: f32, shape: [4], optional: true}}
nodes:
  - model: {{id: a, path: {}, inputs: {{x: x, scale: scale}}}}
  - model: {{id: b, path: {}, inputs: {{x: x, scale: scale}}}}
outputs:
  - {{name: ya, from: a.y}}
  - {{name: yb, from: b.y}}
",
        file.display(),
        other.display()
    );
    let err = refused(&two);
    assert!(
        err.contains("inputs.scale.optional") && err.contains("another value for it"),
        "{err}"
    );
}
