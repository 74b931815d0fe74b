//! Each feature's resolution, on specs written in YAML (no model file is read).

use std::path::Path;
use std::time::Duration;

use super::{parallelism, parity, placement, stateful, streams};
use crate::onnx::{ElementType, ModelMetadata, TensorInfo};
use crate::placement::ReplicaTarget;
use crate::spec::{GraphSpec, ModelSpec, NodeSpec, ReplicationMode};
use crate::stream::{StreamConnector, StreamEnd};
use crate::tensor::{DType, Dim};

fn graph(nodes: &str) -> GraphSpec {
    let text = format!(
        "name: g\ninputs: [{{name: x, dtype: f32, shape: [4]}}]\n\
         executors: [{{name: gpu-a, endpoint: tcp/10.0.0.1:7447}}]\n\
         nodes:\n{nodes}\noutputs: [{{name: y, from: m.y}}]\n"
    );
    GraphSpec::from_yaml(&text, "test.yaml").unwrap()
}

fn model(spec: &GraphSpec) -> &ModelSpec {
    match &spec.nodes[0].value {
        NodeSpec::Model(m) => m,
        other => panic!("not a model: {other:?}"),
    }
}

fn tensor(name: &str, dims: &[Dim]) -> TensorInfo {
    TensorInfo {
        name: name.into(),
        element: ElementType::Supported(DType::F32),
        dims: dims.to_vec(),
        names: vec![None; dims.len()],
    }
}

#[test]
fn a_node_without_replicas_runs_in_process_and_a_list_keeps_its_order() {
    let bare = graph("  - model: {id: m, path: m.onnx, inputs: {x: x}}");
    let executors = placement::executors(&bare);
    assert_eq!(
        placement::replica_set(model(&bare), &executors),
        [ReplicaTarget::Local]
    );
    let listed =
        graph("  - model: {id: m, path: m.onnx, inputs: {x: x}, replicas: [gpu-a, local]}");
    let executors = placement::executors(&listed);
    let set = placement::replica_set(model(&listed), &executors);
    assert_eq!(set.len(), 2);
    let ReplicaTarget::Remote(e) = &set[0] else {
        panic!("{set:?}")
    };
    assert_eq!(e.key_prefix, "weir/executor/gpu-a");
    assert_eq!(e.endpoint.as_deref(), Some("tcp/10.0.0.1:7447"));
    assert_eq!(set[1], ReplicaTarget::Local);
}

#[test]
fn fixed_parallelism_is_the_executor_setting() {
    let spec = graph(
        "  - model: {id: m, path: m.onnx, inputs: {x: x}, parallelism: {concurrency: 3, threads: 2}}",
    );
    let (executor, auto) = parallelism::executor_config(model(&spec), Path::new("."), None);
    assert_eq!((executor.instances, executor.intra_op_threads), (3, 2));
    assert!(auto.is_none());
    let plain = graph("  - model: {id: m, path: m.onnx, inputs: {x: x}, executor: {instances: 2}}");
    let (executor, _) = parallelism::executor_config(model(&plain), Path::new("."), None);
    assert_eq!(executor, model(&plain).executor);
}

/// Node `m`'s parity plan, planned with the node's own executor and no remote executors.
fn parity_of(spec: &GraphSpec, base: &str) -> Option<super::ParityPlan> {
    let m = model(spec);
    parity::parity_plan("m", m, Path::new(base), &m.executor, &[])
}

#[test]
fn a_parity_model_resolves_against_the_graph_folder() {
    let spec = graph(
        "  - model: {id: m, path: m.onnx, inputs: {x: x}, executor: {instances: 4}, resilience: {parity: {k: 3, parity_model: p.onnx}}}",
    );
    let plan = parity_of(&spec, "/graphs").unwrap();
    assert_eq!((plan.k(), plan.r()), (3, 1));
    let node = &plan.models[0];
    assert_eq!(
        (node.id.as_str(), node.path.as_path()),
        ("m.parity", Path::new("/graphs/p.onnx"))
    );
    assert_eq!(
        (plan.encoder.id.as_str(), plan.decoder.id.as_str()),
        ("m.parity_encode", "m.parity_decode")
    );
    assert_eq!(
        node.executor.instances, 2,
        "m/k parity instances, rounded up"
    );
    assert_eq!(node.replicas, [crate::placement::ReplicaTarget::Local]);
    let bare = graph("  - model: {id: m, path: m.onnx, inputs: {x: x}}");
    assert!(parity_of(&bare, "/graphs").is_none());
    assert_eq!(
        (plan.decoder.decode, plan.decoder.floor),
        (
            crate::spec::DecodeAfter::Quantile(99.0),
            std::time::Duration::from_millis(crate::spec::DEFAULT_FLOOR_MS)
        ),
        "the default rule"
    );
}

#[test]
fn r_parity_models_are_r_nodes_with_their_own_batching_and_executor() {
    let spec = graph(
        "  - model: {id: m, path: m.onnx, inputs: {x: x}, batching: {max_size: 8}, resilience: {parity: {k: 2, parity_models: [p0.onnx, p1.onnx], batching: {max_size: 2}, executor: {instances: 3}}}}",
    );
    let plan = parity_of(&spec, "/g").unwrap();
    assert_eq!(plan.r(), 2);
    let ids: Vec<(&str, usize)> = plan
        .models
        .iter()
        .map(|n| (n.id.as_str(), n.index))
        .collect();
    assert_eq!(ids, [("m.parity", 0), ("m.parity1", 1)]);
    assert!(plan
        .models
        .iter()
        .all(|n| n.batching.max_size == 2 && n.executor.instances == 3));
}

#[test]
fn the_decode_rule_is_read_from_the_yaml() {
    for (after, want) in [
        ("p99.9", crate::spec::DecodeAfter::Quantile(99.9)),
        ("40", crate::spec::DecodeAfter::Millis(40.0)),
        ("first_available", crate::spec::DecodeAfter::FirstAvailable),
    ] {
        let spec = graph(&format!(
            "  - model: {{id: m, path: m.onnx, inputs: {{x: x}}, resilience: {{parity: {{k: 2, parity_model: p.onnx, decode: {{after: {after}, floor_ms: 5}}}}}}}}"
        ));
        let plan = parity_of(&spec, ".").unwrap();
        assert_eq!(plan.decoder.decode, want);
        assert_eq!(plan.decoder.floor, std::time::Duration::from_millis(5));
    }
    let bad = GraphSpec::from_yaml(
        "name: g\ninputs: [{name: x, dtype: f32, shape: [2]}]\nnodes:\n  - model: {id: m, path: m.onnx, inputs: {x: x}, resilience: {parity: {k: 2, parity_model: p.onnx, decode: {after: p100}}}}\noutputs: [{name: y, from: m.y}]\n",
        "bad.yaml",
    );
    let e = bad.expect_err("p100 refused").to_string();
    assert!(e.contains("first_available"), "{e}");
}

#[test]
fn state_takes_the_models_shapes_and_remus_keeps_one_batch_in_flight() {
    let meta = ModelMetadata {
        inputs: vec![
            tensor("x", &[Dim::Dynamic, Dim::Fixed(4)]),
            tensor("h_in", &[Dim::Fixed(1), Dim::Fixed(8)]),
        ],
        outputs: vec![
            tensor("y", &[Dim::Dynamic, Dim::Fixed(4)]),
            tensor("h_out", &[Dim::Fixed(1), Dim::Fixed(8)]),
        ],
        overridable: Vec::new(),
    };
    let remus = graph(
        "  - model: {id: m, path: m.onnx, inputs: {x: x}, state: {inputs: [h_in], outputs: [h_out]}, \
         replication: {mode: remus, pipeline: 6}}",
    );
    let node = stateful::stateful_node(model(&remus), &meta).unwrap();
    assert_eq!(node.state.len(), 1);
    assert_eq!(node.state[0].shape, [1, 8]);
    assert_eq!((node.mode, node.pipeline), (ReplicationMode::Remus, 1));
    let bare = graph(
        "  - model: {id: m, path: m.onnx, inputs: {x: x}, state: {inputs: [h_in], outputs: [h_out]}}",
    );
    let node = stateful::stateful_node(model(&bare), &meta).unwrap();
    assert_eq!(node.mode, ReplicationMode::None);
    assert_eq!(node.detect, Duration::from_millis(250));
    assert!(stateful::stateful_node(
        model(&graph("  - model: {id: m, path: m.onnx, inputs: {x: x}}")),
        &meta
    )
    .is_none());
}

#[test]
fn a_dash_is_stdio_and_a_file_is_relative_to_the_graph() {
    let mut spec = graph("  - model: {id: m, path: m.onnx, inputs: {x: x}}");
    spec.streams = GraphSpec::from_yaml(
        "name: s\ninputs: []\nnodes: []\noutputs: []\nstreams: [{jsonl: {input: in.jsonl, output: \"-\"}}]\n",
        "s.yaml",
    )
    .unwrap()
    .streams;
    let planned = streams::connectors(&spec, Path::new("/graphs"));
    let [StreamConnector::Jsonl { input, output, .. }] = planned.as_slice() else {
        panic!("{planned:?}")
    };
    assert_eq!(input, &StreamEnd::File("/graphs/in.jsonl".into()));
    assert_eq!(output, &StreamEnd::Stdio);
}
