//! Bad requests are refused with the field that is wrong, and the graph keeps serving.

use std::path::Path;

use weir::{
    plan_spec, start, DType, ErrorClass, GraphSpec, ModelBuilder, NamedTensor, RequestError,
    RuntimeOptions, Tensor, TensorData,
};

use crate::common::{model, named};

fn field_of(e: RequestError) -> String {
    match e {
        RequestError::Invalid { field, .. } => field,
        other => panic!("expected an invalid-request error, got {other:?}"),
    }
}

#[test]
fn malformed_requests_are_refused_and_serving_continues() {
    let spec = GraphSpec::builder("mlp")
        .input("x", DType::F32, &[64])
        .model(ModelBuilder::new("mlp", model("mlp_a.onnx")).input("x", "x"))
        .output("probs", "mlp.probs")
        .build();
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rt = running.runtime();
    let good = || vec![named("x", Tensor::f32(vec![64], vec![0.5; 64]))];
    let cases: Vec<(Vec<NamedTensor>, &str)> = vec![
        (
            vec![named("x", Tensor::f32(vec![63], vec![0.5; 63]))],
            "inputs.x.shape",
        ),
        (
            vec![named("x", Tensor::f32(vec![8, 8], vec![0.5; 64]))],
            "inputs.x.shape",
        ),
        (
            vec![named("x", Tensor::i64(vec![64], vec![1; 64]))],
            "inputs.x.datatype",
        ),
        (
            vec![named(
                "x",
                Tensor {
                    shape: vec![64],
                    data: TensorData::F32(vec![0.5; 10]),
                },
            )],
            "inputs.x.data",
        ),
        (vec![], "inputs.x"),
        (
            vec![
                named("x", Tensor::f32(vec![64], vec![0.5; 64])),
                named("y", Tensor::f32(vec![1], vec![0.0])),
            ],
            "inputs.y",
        ),
    ];
    for (inputs, field) in cases {
        let err = rt.infer(inputs).expect_err("refused");
        assert_eq!(err.class(), ErrorClass::InvalidRequest);
        assert_eq!(field_of(err), field);
        // The graph keeps serving.
        let ok = rt
            .infer(good())
            .expect("a good request after a bad one is answered");
        assert_eq!(ok.output("probs").map(|t| t.shape.clone()), Some(vec![10]));
    }
    assert_eq!(rt.in_flight(), 0);
    running.shutdown();
}

#[test]
fn over_the_in_flight_limit_is_overloaded_not_a_hang() {
    let spec = GraphSpec::builder("sq")
        .input("image", DType::F32, &[3, 224, 224])
        .model(
            ModelBuilder::new("squeezenet", model("squeezenet_random.onnx"))
                .input("data_0", "image"),
        )
        .output("probs", "squeezenet")
        .build();
    let graph = plan_spec(&spec, Path::new(".")).expect("valid");
    let running = start(
        graph.plan,
        RuntimeOptions {
            max_in_flight: 2,
            ..RuntimeOptions::default()
        },
    )
    .expect("starts");
    let image = || {
        vec![named(
            "image",
            Tensor::f32(vec![3, 224, 224], vec![0.1; 3 * 224 * 224]),
        )]
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut admitted = 0;
    let mut overloaded = 0;
    for _ in 0..20 {
        let tx = tx.clone();
        match running.runtime().submit(
            image(),
            Box::new(move |r| tx.send(r.is_ok()).expect("send")),
        ) {
            Ok(_) => admitted += 1,
            Err(e) => {
                assert_eq!(e.class(), ErrorClass::Overloaded, "{e}");
                overloaded += 1;
            }
        }
    }
    drop(tx);
    assert!(
        overloaded > 0,
        "20 instant submissions with a limit of 2 should overflow"
    );
    assert_eq!(rx.iter().filter(|ok| *ok).count(), admitted);
    running.shutdown();
}
