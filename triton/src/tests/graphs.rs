//! Served versions as weir graphs, each checked by the engine's own validation.

use super::onnx::{self, FLOAT};
use super::{loaded, weir_model, TempRepo};
use crate::error::GraphError;
use crate::graph::{graph, ServedGraph};
use crate::load::Repository;
use weir_engine::spec::{
    Device, GraphLevel, ModelSpec, NodeSpec, SequenceControl, SequenceInputSpec,
};

fn only_node(g: &ServedGraph) -> &ModelSpec {
    assert_eq!(g.spec.nodes.len(), 1);
    match &g.spec.nodes[0].value {
        NodeSpec::Model(m) => m,
        other => panic!("{}", other.kind_name()),
    }
}

fn valid(g: &ServedGraph, r: &Repository) {
    if let Err(d) = weir_engine::validate::validate(&g.spec, &r.root) {
        panic!("{d}");
    }
}

#[test]
fn a_batching_model_is_one_batched_node() {
    let repo = TempRepo::new("g-digits");
    repo.model("digits", None, &weir_model("digits_mlp.onnx"), &[1, 2]);
    let r = repo.load();
    // The default policy serves the latest version only.
    assert_eq!(
        loaded(&r, "digits")
            .versions
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![2]
    );
    let g = graph(&r, "digits", None).unwrap();
    assert_eq!(g.spec.name.value, "digits");
    let m = only_node(&g);
    assert!(m.batch.value);
    assert_eq!((m.batching.max_size, m.batching.max_delay_us), (4, 0));
    assert_eq!((m.executor.instances, m.executor.intra_op_threads), (2, 1));
    assert_eq!(m.inputs["x"].value, "x");
    assert_eq!(g.spec.outputs[0].name.value, "probs");
    assert_eq!(g.spec.outputs[0].from.value, "digits.probs");
    valid(&g, &r);
    assert!(matches!(
        graph(&r, "digits", Some(1)),
        Err(GraphError::NotServed { .. })
    ));
}

#[test]
fn batching_instances_threads_and_optimisation_come_from_the_config() {
    let repo = TempRepo::new("g-settings");
    let config = r#"
        max_batch_size: 8
        dynamic_batching { max_queue_delay_microseconds: 500 default_queue_policy { default_timeout_microseconds: 2000 } }
        instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_AUTO } ]
        parameters { key: "intra_op_thread_count" value { string_value: "2" } }
        parameters { key: "inter_op_thread_count" value { string_value: "1" } }
        optimization { graph { level: 1 } }
    "#;
    repo.model("digits", Some(config), &weir_model("digits_mlp.onnx"), &[1]);
    let r = repo.load();
    let timeout = loaded(&r, "digits").latest().unwrap().queue_timeout();
    assert_eq!(
        timeout,
        Some(crate::QueueTimeout {
            default_us: 2000,
            allow_override: false
        })
    );
    let g = graph(&r, "digits", Some(1)).unwrap();
    let m = only_node(&g);
    assert_eq!((m.batching.max_size, m.batching.max_delay_us), (8, 500));
    assert_eq!((m.executor.instances, m.executor.intra_op_threads), (3, 2));
    assert_eq!(m.executor.graph_optimization, GraphLevel::Extended);
    valid(&g, &r);
}

#[test]
fn a_model_without_batching_is_unbatched_and_triton_names_become_identifiers() {
    let repo = TempRepo::new("g-unbatched");
    repo.model(
        "resnet50.onnx",
        None,
        &weir_model("resnet50_random.onnx"),
        &[1],
    );
    let r = repo.load();
    let g = graph(&r, "resnet50.onnx", None).unwrap();
    assert_eq!(g.spec.name.value, "resnet50_onnx");
    assert_eq!(
        g.inputs,
        vec![("gpu_0/data_0".to_string(), "gpu_0_data_0".to_string())]
    );
    let m = only_node(&g);
    assert!(!m.batch.value);
    assert_eq!(m.inputs["gpu_0/data_0"].value, "gpu_0_data_0");
    assert_eq!(g.spec.outputs[0].name.value, "gpu_0/softmax_1");
    valid(&g, &r);
}

#[test]
fn real_models_with_free_dimensions_validate() {
    let repo = TempRepo::new("g-ocr");
    repo.model(
        "det",
        None,
        &weir_model("pretrained/ch_PP-OCRv4_det_infer.onnx"),
        &[1],
    );
    repo.model(
        "cls",
        None,
        &weir_model("pretrained/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
        &[1],
    );
    repo.model(
        "squeezenet",
        None,
        &weir_model("squeezenet_random.onnx"),
        &[1],
    );
    let r = repo.load();
    for name in ["det", "cls", "squeezenet"] {
        valid(&graph(&r, name, None).unwrap(), &r);
    }
}

#[test]
fn gpu_groups_run_on_cuda_device_zero_and_a_file_scalar_declared_as_one_element_is_reshaped() {
    let repo = TempRepo::new("g-unsupported");
    repo.model(
        "gpu",
        Some("instance_group [ { count: 2 kind: KIND_GPU gpus: [0] } ]"),
        &weir_model("digits_mlp.onnx"),
        &[1],
    );
    repo.model(
        "gpu1",
        Some("instance_group [ { kind: KIND_GPU gpus: [1] } ]"),
        &weir_model("digits_mlp.onnx"),
        &[1],
    );
    repo.model(
        "mixed",
        Some("instance_group [ { kind: KIND_CPU }, { kind: KIND_GPU } ]"),
        &weir_model("digits_mlp.onnx"),
        &[1],
    );
    repo.model("scalar", None, &weir_model("unbatched_scale.onnx"), &[1]);
    let r = repo.load();
    let g = graph(&r, "gpu", None).unwrap();
    let m = only_node(&g);
    assert_eq!((m.executor.device, m.executor.instances), (Device::Cuda, 2));
    valid(&g, &r);
    let e = graph(&r, "gpu1", None).unwrap_err();
    assert!(
        matches!(e, GraphError::GpuInstances { group: 0, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("CUDA device 0 only"), "{e}");
    let e = graph(&r, "mixed", None).unwrap_err().to_string();
    assert!(e.contains("instance_group[1].kind"), "{e}");
    // `unbatched_scale.onnx` takes a scalar second input and gives a scalar output, which
    // auto-complete declares `[1]`: reshape nodes give the model its scalar and the client its
    // `[1]`.
    let g = graph(&r, "scalar", None).unwrap();
    let reshapes: Vec<&weir_engine::spec::ReshapeSpec> = g
        .spec
        .nodes
        .iter()
        .filter_map(|n| match &n.value {
            weir_engine::spec::NodeSpec::Reshape(r) => Some(r),
            _ => None,
        })
        .collect();
    let shapes: Vec<(&str, &[i64])> = reshapes
        .iter()
        .map(|r| (r.input.value.as_str(), r.shape.value.as_slice()))
        .collect();
    assert_eq!(shapes, [("s", &[][..]), ("scalar.total", &[1][..])]);
    valid(&g, &r);
}

#[test]
fn sequence_control_inputs_are_graph_inputs_filled_from_the_parameters() {
    let repo = TempRepo::new("g-controls");
    let model = onnx::model(
        &[
            ("x", FLOAT, &[-1, 4]),
            ("START", FLOAT, &[-1, 1]),
            ("CORRID", onnx::UINT64, &[-1, 1]),
        ],
        &[("y", FLOAT, &[-1, 4])],
    );
    repo.model_bytes(
        "controls",
        Some(
            r#"max_batch_size: 4
            input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]
            output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]
            sequence_batching { control_input [
              { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [0, 1] } ] },
              { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
            ] }"#,
        ),
        &model,
    );
    let r = repo.load();
    let g = graph(&r, "controls", None).unwrap();
    let inputs: Vec<(&str, Option<SequenceInputSpec>)> = g
        .spec
        .inputs
        .iter()
        .map(|i| {
            (
                i.value.name.value.as_str(),
                i.value.sequence.as_ref().map(|s| s.value),
            )
        })
        .collect();
    assert_eq!(
        inputs,
        vec![
            ("x", None),
            (
                "START",
                Some(SequenceInputSpec {
                    control: SequenceControl::Start,
                    false_true: Some([0.0, 1.0])
                })
            ),
            (
                "CORRID",
                Some(SequenceInputSpec {
                    control: SequenceControl::Id,
                    false_true: None
                })
            ),
        ]
    );
    // Only the client's tensors are renamed-or-not inputs; the controls are filled by weir.
    assert_eq!(g.inputs, vec![("x".to_string(), "x".to_string())]);
    let m = only_node(&g);
    assert_eq!(m.inputs["START"].value, "START");
    assert_eq!(m.inputs["CORRID"].value, "CORRID");
    valid(&g, &r);
}

#[test]
fn implicit_sequence_state_is_a_per_sequence_stateful_node() {
    let repo = TempRepo::new("g-state");
    let model = onnx::model(
        &[("x", FLOAT, &[-1, 4]), ("h_in", FLOAT, &[-1, 16])],
        &[("y", FLOAT, &[-1, 4]), ("h_out", FLOAT, &[-1, 16])],
    );
    repo.model_bytes(
        "tracker",
        Some(
            r#"max_batch_size: 8
            input [ { name: "x" data_type: TYPE_FP32 dims: [4] } ]
            output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]
            sequence_batching {
              max_sequence_idle_microseconds: 5000000
              state [ { input_name: "h_in" output_name: "h_out" data_type: TYPE_FP32 dims: [16]
                        initial_state [ { name: "zeros" data_type: TYPE_FP32 dims: [16] zero_data: true } ] } ]
            }"#,
        ),
        &model,
    );
    let r = repo.load();
    let g = graph(&r, "tracker", None).unwrap();
    let m = only_node(&g);
    let state = m.state.as_ref().unwrap();
    assert_eq!(state.inputs[0].value, "h_in");
    let per = state.per_sequence.as_ref().unwrap();
    assert_eq!((per.batch_axis.value, per.idle_timeout_ms.value), (0, 5000));
    assert_eq!(m.batching.max_size, 8);
    valid(&g, &r);
}

/// `x [N, 4]` and `scale [N, 4]` (an initializer `[[2, 3, 4, 5]]`) → `y [N, 4]`.
fn affine() -> Vec<u8> {
    onnx::model_with_defaults(
        &[("x", FLOAT, &[-1, 4]), ("scale", FLOAT, &[-1, 4])],
        &[("y", FLOAT, &[-1, 4])],
        &[("scale", &[1, 4], &[2.0, 3.0, 4.0, 5.0])],
    )
}

#[test]
fn an_optional_input_is_a_graph_input_filled_with_the_files_value() {
    let repo = TempRepo::new("g-optional");
    let inputs = |scale: &str| {
        format!(
            r#"max_batch_size: 4
            input [ {{ name: "x" data_type: TYPE_FP32 dims: [4] }},
                    {{ name: "scale" data_type: TYPE_FP32 optional: true {scale} }} ]
            output [ {{ name: "y" data_type: TYPE_FP32 dims: [4] }} ]"#
        )
    };
    repo.model_bytes("affine", Some(&inputs("dims: [4]")), &affine());
    repo.model_bytes(
        "reshaped",
        Some(&inputs("dims: [2, 2] reshape { shape: [4] }")),
        &affine(),
    );
    let r = repo.load();
    let g = graph(&r, "affine", None).unwrap();
    assert!(g.spec.inputs[1].value.optional);
    assert_eq!(only_node(&g).inputs["scale"].value, "scale");
    let checked = weir_engine::validate::validate(&g.spec, &r.root).unwrap();
    assert_eq!(
        checked.inputs[1].default,
        Some(weir_engine::tensor::Tensor::f32(
            vec![4],
            vec![2.0, 3.0, 4.0, 5.0]
        ))
    );
    // The value fills the model's input; a reshape node in between has none to fill.
    let g = graph(&r, "reshaped", None).unwrap();
    let err = weir_engine::validate::validate(&g.spec, &r.root)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("graph input `scale` is optional") && err.contains("is not a model"),
        "{err}"
    );
}
