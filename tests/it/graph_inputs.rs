//! Graph inputs with free and symbolic dimensions: each request brings its own sizes, inputs that
//! share a name must agree, and requests of different sizes are answered as ONNX Runtime answers
//! each alone.

use std::path::Path;

use weir::{plan_spec, start, DType, ErrorClass, GraphSpec, RequestError, RuntimeOptions, Tensor};

use crate::common::{channel, model, named, Replies};
use crate::reference::ort_reference;

/// `seq_pool.onnx` behind two graph inputs sharing the symbolic dimension `seq`.
fn seq_pool_graph() -> GraphSpec {
    let yaml = format!(
        "name: pool
inputs:
  - {{name: ids, dtype: i64, shape: [seq]}}
  - {{name: mask, dtype: INT64, shape: [seq]}}
nodes:
  - model:
      id: pool
      path: {}
      inputs: {{input_ids: ids, attention_mask: mask}}
      batching: {{max_size: 8, max_delay_us: 20000}}
outputs:
  - {{name: pooled, from: pool.pooled}}
  - {{name: tokens, from: pool.tokens}}
",
        model("seq_pool.onnx").display()
    );
    GraphSpec::from_yaml(&yaml, "pool.yaml").expect("parses")
}

fn ids(len: usize, seed: i64) -> Tensor {
    Tensor::i64(
        vec![len],
        (0..len as i64).map(|i| (i * 7 + seed) % 50).collect(),
    )
}

#[test]
fn symbolic_dimensions_must_agree_within_a_request() {
    let graph = plan_spec(&seq_pool_graph(), Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let err = running
        .runtime()
        .infer(vec![
            named("ids", ids(5, 1)),
            named("mask", Tensor::i64(vec![4], vec![1; 4])),
        ])
        .expect_err("refused");
    assert_eq!(err.class(), ErrorClass::InvalidRequest);
    match err {
        RequestError::Invalid { field, message } => {
            assert_eq!(field, "inputs.mask.shape");
            assert!(
                message.contains("`seq` is 4 here but 5 in `ids`"),
                "{message}"
            );
        }
        other => panic!("expected an invalid request, got {other:?}"),
    }
    running.shutdown();
}

/// Requests of lengths 1 to 9 at once (so dynamic batches see several lengths): each is
/// answered once, with ONNX Runtime's answer for that request alone.
#[test]
fn requests_of_different_lengths_are_each_answered_as_alone() {
    let graph = plan_spec(&seq_pool_graph(), Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let replies = Replies::default();
    let (tx, rx) = channel();
    let lengths: Vec<usize> = (0..18).map(|i| 1 + i % 9).collect();
    for (tag, &len) in lengths.iter().enumerate() {
        let mask = Tensor::i64(vec![len], vec![1; len]);
        replies.submit(
            &running,
            tag as u64,
            vec![named("ids", ids(len, tag as i64)), named("mask", mask)],
            &tx,
        );
    }
    drop(tx);
    let mut answers: Vec<_> = rx.iter().collect();
    answers.sort_by_key(|(tag, _)| *tag);
    assert_eq!(answers.len(), lengths.len());
    assert!(
        replies.counts().values().all(|&n| n == 1),
        "answered once each"
    );
    for (tag, reply) in answers {
        let len = lengths[tag as usize];
        let response = reply.expect("answered");
        let batch_of_one = |t: Tensor| Tensor {
            shape: [vec![1], t.shape].concat(),
            data: t.data,
        };
        let want = ort_reference(
            &model("seq_pool.onnx"),
            &[
                ("input_ids", &batch_of_one(ids(len, tag as i64))),
                (
                    "attention_mask",
                    &batch_of_one(Tensor::i64(vec![len], vec![1; len])),
                ),
            ],
        );
        for (name, reference) in want {
            let output = if name == "pooled" { "pooled" } else { "tokens" };
            let got = response.output(output).expect("output");
            assert_eq!(got.shape, reference.shape[1..], "{name} of request {tag}");
            assert_eq!(got.data, reference.data, "{name} of request {tag}");
        }
    }
    running.shutdown();
}

#[test]
fn free_and_named_dimensions_build_and_a_bad_one_is_refused() {
    let ok = GraphSpec::builder("free")
        .input("ids", DType::I64, &[-1])
        .input_dims("mask", DType::I64, vec!["seq".into()])
        .build();
    assert_eq!(ok.inputs[0].shape.value, vec![(-1).into()]);
    let yaml =
        "name: g\ninputs:\n  - {name: x, dtype: f32, shape: [3, -2]}\nnodes: []\noutputs: []\n";
    let spec = GraphSpec::from_yaml(yaml, "g.yaml").expect("parses");
    let err = plan_spec(&spec, Path::new("."))
        .expect_err("refused")
        .to_string();
    assert!(err.contains("has shape [3, -2]"), "{err}");
}
