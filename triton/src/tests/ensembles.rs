//! Ensembles over small ONNX models written here: a two-step chain that loads and becomes a
//! two-node graph, and the dataflows Triton refuses.

use super::onnx::{self, FLOAT, INT64};
use super::{failure, loaded, TempRepo};
use crate::error::{EnsembleError, LoadError};
use crate::graph::graph;

/// `prep: x [N, 4] -> y [N, 4]` and `classify: x [N, 4] -> label [N, 2]`.
fn models(repo: &TempRepo) {
    repo.model_bytes(
        "prep",
        None,
        &onnx::model(&[("x", FLOAT, &[-1, 4])], &[("y", FLOAT, &[-1, 4])]),
    );
    repo.model_bytes(
        "classify",
        None,
        &onnx::model(&[("x", FLOAT, &[-1, 4])], &[("label", FLOAT, &[-1, 2])]),
    );
}

fn ensemble(repo: &TempRepo, name: &str, steps: &str) {
    let text = format!(
        r#"
        name: "{name}"
        platform: "ensemble"
        max_batch_size: 4
        input [ {{ name: "raw" data_type: TYPE_FP32 dims: [ 4 ] }} ]
        output [ {{ name: "label" data_type: TYPE_FP32 dims: [ 2 ] }} ]
        ensemble_scheduling {{ {steps} }}
        "#
    );
    repo.file(&format!("{name}/config.pbtxt"), text);
    std::fs::create_dir_all(repo.root.join(format!("{name}/1"))).unwrap();
}

const CHAIN: &str = r#"
    step [
      { model_name: "classify" model_version: -1
        input_map { key: "x" value: "features" }
        output_map { key: "label" value: "label" } },
      { model_name: "prep" model_version: 1
        input_map { key: "x" value: "raw" }
        output_map { key: "y" value: "features" } }
    ]"#;

#[test]
fn a_chain_runs_its_steps_in_dataflow_order_as_one_graph() {
    let repo = TempRepo::new("e-chain");
    models(&repo);
    ensemble(&repo, "pipeline", CHAIN);
    let r = repo.load();
    let served = loaded(&r, "pipeline").latest().unwrap();
    assert_eq!(
        served.steps,
        vec![(1, "prep".to_string(), 1), (0, "classify".to_string(), 1)]
    );
    let json = crate::json::config_json(&served.config).unwrap();
    assert_eq!(json["ensemble_scheduling"]["step"][1]["model_version"], 1);
    assert_eq!(json["model_transaction_policy"]["decoupled"], false);
    assert!(json
        .get("instance_group")
        .is_some_and(|g| g == &serde_json::json!([])));

    let g = graph(&r, "pipeline", None).unwrap();
    assert_eq!(g.inputs, vec![("raw".to_string(), "raw".to_string())]);
    let ids: Vec<&str> = g.spec.nodes.iter().map(|n| n.id().value.as_str()).collect();
    assert_eq!(ids, vec!["prep", "classify"]);
    let weir_engine::spec::NodeSpec::Model(classify) = &g.spec.nodes[1].value else {
        panic!("a model node");
    };
    assert_eq!(classify.inputs["x"].value, "prep.y");
    assert_eq!(classify.batching.max_size, 4);
    assert_eq!(g.spec.outputs[0].from.value, "classify.label");
    let valid = weir_engine::validate::validate(&g.spec, &r.root);
    assert!(
        valid.is_ok(),
        "{}",
        valid.err().map(|d| d.to_string()).unwrap_or_default()
    );
}

#[test]
fn a_cycle_is_refused_naming_the_steps_and_tensors() {
    let repo = TempRepo::new("e-cycle");
    models(&repo);
    ensemble(
        &repo,
        "looped",
        r#"step [
          { model_name: "prep" model_version: -1 input_map { key: "x" value: "back" } output_map { key: "y" value: "features" } },
          { model_name: "prep" model_version: -1 input_map { key: "x" value: "features" } output_map { key: "y" value: "back" } },
          { model_name: "classify" model_version: -1 input_map { key: "x" value: "raw" } output_map { key: "label" value: "label" } }
        ]"#,
    );
    let r = repo.load();
    let e = failure(&r, "looped");
    assert!(
        matches!(*e.kind, LoadError::Ensemble(EnsembleError::Cycle { .. })),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "model `looped` version 1: ensemble_scheduling has a cycle: step[0] (model `prep`) reads `back` from step[1] (model `prep`), which reads `features` from step[0] (model `prep`)"
    );
}

#[test]
fn a_step_naming_a_missing_or_broken_model_is_refused() {
    let repo = TempRepo::new("e-missing");
    models(&repo);
    repo.model_bytes("broken", Some("max_batch_size: [2"), &[]);
    ensemble(&repo, "absent", &CHAIN.replace("\"prep\"", "\"nowhere\""));
    ensemble(&repo, "failed", &CHAIN.replace("\"prep\"", "\"broken\""));
    ensemble(
        &repo,
        "old",
        &CHAIN.replace("model_version: 1", "model_version: 3"),
    );
    let r = repo.load();
    let e = failure(&r, "absent").to_string();
    assert!(
        e.ends_with(
            "ensemble_scheduling.step[1] runs model `nowhere`, which is not in the repository"
        ),
        "{e}"
    );
    let e = failure(&r, "failed").to_string();
    assert!(
        e.contains(
            "runs model `broken`, which failed to load (model `broken`: broken/config.pbtxt:1:"
        ),
        "{e}"
    );
    assert!(failure(&r, "old")
        .to_string()
        .contains("does not serve version 3"));
    // The models themselves still load.
    assert!(loaded(&r, "prep").latest().is_some());
}

#[test]
fn tensors_without_a_writer_written_twice_or_mismatched_are_refused() {
    let repo = TempRepo::new("e-tensors");
    models(&repo);
    repo.model_bytes(
        "ints",
        None,
        &onnx::model(&[("x", INT64, &[-1, 4])], &[("label", FLOAT, &[-1, 2])]),
    );
    ensemble(
        &repo,
        "nowriter",
        &CHAIN.replace("value: \"raw\"", "value: \"nothing\""),
    );
    ensemble(
        &repo,
        "twice",
        r#"step [
          { model_name: "classify" model_version: -1 input_map { key: "x" value: "raw" } output_map { key: "label" value: "label" } },
          { model_name: "classify" model_version: -1 input_map { key: "x" value: "raw" } output_map { key: "label" value: "label" } }
        ]"#,
    );
    ensemble(
        &repo,
        "mismatch",
        r#"step [ { model_name: "ints" model_version: -1 input_map { key: "x" value: "raw" } output_map { key: "label" value: "label" } } ]"#,
    );
    ensemble(
        &repo,
        "badmap",
        r#"step [ { model_name: "classify" model_version: -1 input_map { key: "image" value: "raw" } output_map { key: "label" value: "label" } } ]"#,
    );
    let r = repo.load();
    let e = failure(&r, "nowriter").to_string();
    assert!(e.ends_with("ensemble_scheduling.step[1] (model `prep`) reads tensor `nothing`, which no ensemble input or step output provides"), "{e}");
    let e = failure(&r, "twice").to_string();
    assert!(e.contains("tensor `label` is written twice: by step[0] (model `classify`) and by ensemble_scheduling.step[1]"), "{e}");
    let e = failure(&r, "mismatch").to_string();
    assert!(e.contains("tensor `raw`: data types differ: TYPE_FP32 [-1, 4] from the ensemble's inputs but TYPE_INT64 [-1, 4] from step[0] (model `ints`) input `x`"), "{e}");
    let e = failure(&r, "badmap").to_string();
    assert!(e.contains("ensemble_scheduling.step[0].input_map (model `classify`): `image` is not an input of the model (its inputs: x)"), "{e}");
}

#[test]
fn ensembles_of_ensembles_are_refused_for_now() {
    let repo = TempRepo::new("e-nested");
    models(&repo);
    ensemble(&repo, "inner", CHAIN);
    ensemble(
        &repo,
        "outer",
        r#"step [ { model_name: "inner" model_version: -1 input_map { key: "raw" value: "raw" } output_map { key: "label" value: "label" } } ]"#,
    );
    let r = repo.load();
    assert!(loaded(&r, "inner").latest().is_some());
    let e = failure(&r, "outer");
    assert!(matches!(*e.kind, LoadError::Unsupported { .. }), "{e}");
}

#[test]
fn a_steps_optional_input_that_no_tensor_feeds_runs_on_the_files_value() {
    let repo = TempRepo::new("e-optional");
    models(&repo);
    repo.model_bytes(
        "affine",
        Some(
            r#"max_batch_size: 4
            input [ { name: "x" data_type: TYPE_FP32 dims: [4] },
                    { name: "scale" data_type: TYPE_FP32 dims: [4] optional: true } ]
            output [ { name: "y" data_type: TYPE_FP32 dims: [4] } ]"#,
        ),
        &onnx::model_with_defaults(
            &[("x", FLOAT, &[-1, 4]), ("scale", FLOAT, &[-1, 4])],
            &[("y", FLOAT, &[-1, 4])],
            &[("scale", &[1, 4], &[2.0, 3.0, 4.0, 5.0])],
        ),
    );
    ensemble(
        &repo,
        "scaled",
        r#"
        step [
          { model_name: "affine" model_version: -1
            input_map { key: "x" value: "raw" }
            output_map { key: "y" value: "features" } },
          { model_name: "classify" model_version: -1
            input_map { key: "x" value: "features" }
            output_map { key: "label" value: "label" } }
        ]"#,
    );
    let r = repo.load();
    let g = graph(&r, "scaled", None).unwrap();
    let affine = g
        .spec
        .nodes
        .iter()
        .find_map(|n| match &n.value {
            weir_engine::spec::NodeSpec::Model(m) if m.id.value == "affine" => Some(m),
            _ => None,
        })
        .expect("an `affine` node");
    assert!(!affine.inputs.contains_key("scale"));
    if let Err(d) = weir_engine::validate::validate(&g.spec, &r.root) {
        panic!("{d}");
    }
}
