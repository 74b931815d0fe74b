//! Auto-complete of the set-up's real models, each without a configuration (or with a partial
//! one), against the effective configuration Triton's rules give, written out as Triton would
//! print it.

use super::{loaded, weir_model, TempRepo};
use crate::json::config_json;
use crate::load::{load, LoadOptions};
use crate::pbtxt;

/// Loads `name` (its `model.onnx` from `.weir/models/<file>`, configuration `config`) and
/// compares its effective configuration with `expected`.
fn check(file: &str, name: &str, config: Option<&str>, expected: &str) {
    let repo = TempRepo::new(&format!("ac-{name}"));
    repo.model(name, config, &weir_model(file), &[1]);
    let loaded_repo = repo.load();
    let got = &loaded(&loaded_repo, name).versions[&1]
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let want = pbtxt::parse(expected, "expected").unwrap().config;
    assert_eq!(
        got,
        &want,
        "\n got: {}\nwant: {}",
        config_json(got).unwrap(),
        config_json(&want).unwrap()
    );
}

/// Triton's defaults for an ONNX model of this name, without the parts that vary.
fn common(name: &str) -> String {
    format!(
        r#"
        name: "{name}"
        platform: "onnxruntime_onnx"
        backend: "onnxruntime"
        default_model_filename: "model.onnx"
        version_policy {{ latest {{ num_versions: 1 }} }}
        instance_group [ {{ name: "{name}" kind: KIND_CPU count: 2 }} ]
        optimization {{ input_pinned_memory {{ enable: true }} output_pinned_memory {{ enable: true }} }}
        "#
    )
}

#[test]
fn a_free_batch_dimension_batches_by_four_with_dynamic_batching() {
    // x: [N, 64] -> probs: [N, 10]
    let expected = common("digits")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 64 ] } ]
        output [ { name: "probs" data_type: TYPE_FP32 dims: [ 10 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("digits_mlp.onnx", "digits", None, &expected);
}

#[test]
fn ocr_detector_and_recogniser_keep_their_free_dimensions() {
    // x: [N, 3, H, W] -> sigmoid_0.tmp_0: [N, 1, H, W]
    let det = common("det")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]
        output [ { name: "sigmoid_0.tmp_0" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("pretrained/ch_PP-OCRv4_det_infer.onnx", "det", None, &det);
    // x: [N, 3, ?, W] -> softmax_11.tmp_0: [N, T, 6625]
    let rec = common("rec")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]
        output [ { name: "softmax_11.tmp_0" data_type: TYPE_FP32 dims: [ -1, 6625 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("pretrained/ch_PP-OCRv4_rec_infer.onnx", "rec", None, &rec);
    // A literal -1 first dimension is as free as a named one.
    let cls = common("cls")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]
        output [ { name: "save_infer_model/scale_0.tmp_1" data_type: TYPE_FP32 dims: [ 2 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check(
        "pretrained/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        "cls",
        None,
        &cls,
    );
}

#[test]
fn magika_takes_int32_bytes() {
    let expected = common("magika")
        + r#"
        max_batch_size: 4
        input [ { name: "bytes" data_type: TYPE_INT32 dims: [ 2048 ] } ]
        output [ { name: "target_label" data_type: TYPE_FP32 dims: [ 214 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check(
        "pretrained/magika_standard_v3_3.onnx",
        "magika",
        None,
        &expected,
    );
}

#[test]
fn a_batch_fixed_to_one_does_not_batch_and_keeps_the_file_dims() {
    // data_0: [1, 3, 224, 224] -> softmaxout_1: [1, 1000, 1, 1]
    let expected = common("squeezenet")
        + r#"
        input [ { name: "data_0" data_type: TYPE_FP32 dims: [ 1, 3, 224, 224 ] } ]
        output [ { name: "softmaxout_1" data_type: TYPE_FP32 dims: [ 1, 1000, 1, 1 ] } ]
        "#;
    check("squeezenet_random.onnx", "squeezenet", None, &expected);
}

#[test]
fn a_model_without_a_batch_dimension_keeps_its_shapes_and_scalars_become_dims_of_one() {
    // x: [3, 4], s: [] -> y: [3, 4], total: []
    let expected = common("scale")
        + r#"
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 4 ] },
                { name: "s" data_type: TYPE_FP32 dims: [ 1 ] } ]
        output [ { name: "y" data_type: TYPE_FP32 dims: [ 3, 4 ] },
                 { name: "total" data_type: TYPE_FP32 dims: [ 1 ] } ]
        "#;
    check("unbatched_scale.onnx", "scale", None, &expected);
}

#[test]
fn silero_vad_cannot_batch_because_of_its_scalar_sample_rate() {
    // input: [?, ?], state: [2, ?, 128], sr: [] -> output: [?, 1], stateN: [?, ?, ?]
    let expected = common("vad")
        + r#"
        input [ { name: "input" data_type: TYPE_FP32 dims: [ -1, -1 ] },
                { name: "state" data_type: TYPE_FP32 dims: [ 2, -1, 128 ] },
                { name: "sr" data_type: TYPE_INT64 dims: [ 1 ] } ]
        output [ { name: "output" data_type: TYPE_FP32 dims: [ -1, 1 ] },
                 { name: "stateN" data_type: TYPE_FP32 dims: [ -1, -1, -1 ] } ]
        "#;
    check("pretrained/silero_vad.onnx", "vad", None, &expected);
}

#[test]
fn several_outputs_and_int64_inputs() {
    // input_ids, attention_mask: [N, seq] -> tokens: [N, seq, 4], pooled: [N, 4]
    let expected = common("pool")
        + r#"
        max_batch_size: 4
        input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] },
                { name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] } ]
        output [ { name: "tokens" data_type: TYPE_FP32 dims: [ -1, 4 ] },
                 { name: "pooled" data_type: TYPE_FP32 dims: [ 4 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("seq_pool.onnx", "pool", None, &expected);
}

#[test]
fn strings_and_a_per_request_scalar_output() {
    let strings = common("strings")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_STRING dims: [ 4 ] } ]
        output [ { name: "y" data_type: TYPE_STRING dims: [ 4 ] },
                 { name: "z" data_type: TYPE_STRING dims: [ 4 ] } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("dtypes/string.onnx", "strings", None, &strings);
    // z: [N] is one scalar per request: dims [1] reshaped to [].
    let bools = common("bools")
        + r#"
        max_batch_size: 4
        input [ { name: "x" data_type: TYPE_BOOL dims: [ 4 ] } ]
        output [ { name: "y" data_type: TYPE_BOOL dims: [ 4 ] },
                 { name: "z" data_type: TYPE_FP64 dims: [ 1 ] reshape { shape: [ ] } } ]
        dynamic_batching { preferred_batch_size: [ 4 ] }
        "#;
    check("dtypes/bool.onnx", "bools", None, &bools);
}

#[test]
fn a_partial_configuration_keeps_what_it_says_and_fills_the_rest() {
    // Inputs given, outputs left out: only the outputs are filled; max_batch_size 8 stays, and
    // since neither scheduler is set the backend adds dynamic batching.
    let config = r#"
        max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 64 ] } ]
        instance_group [ { count: 1 kind: KIND_CPU } ]
        parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
    "#;
    let expected = r#"
        name: "digits"
        platform: "onnxruntime_onnx"
        backend: "onnxruntime"
        default_model_filename: "model.onnx"
        version_policy { latest { num_versions: 1 } }
        max_batch_size: 8
        input [ { name: "x" data_type: TYPE_FP32 dims: [ 64 ] } ]
        output [ { name: "probs" data_type: TYPE_FP32 dims: [ 10 ] } ]
        instance_group [ { name: "digits_0" kind: KIND_CPU count: 1 } ]
        dynamic_batching { preferred_batch_size: [ 8 ] }
        parameters { key: "intra_op_thread_count" value: { string_value: "2" } }
        optimization { input_pinned_memory { enable: true } output_pinned_memory { enable: true } }
    "#;
    check("digits_mlp.onnx", "digits", Some(config), expected);
}

#[test]
fn a_complete_configuration_is_not_auto_completed() {
    // Inputs and outputs both given: Triton's backend completes nothing, so max_batch_size stays
    // 0 and the whole [-1, 64] shape is one request's.
    let config = r#"
        input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 64 ] } ]
        output [ { name: "probs" data_type: TYPE_FP32 dims: [ -1, 10 ] } ]
    "#;
    let expected = common("digits")
        + r#"
        input [ { name: "x" data_type: TYPE_FP32 dims: [ -1, 64 ] } ]
        output [ { name: "probs" data_type: TYPE_FP32 dims: [ -1, 10 ] } ]
        "#;
    check("digits_mlp.onnx", "digits", Some(config), &expected);
}

#[test]
fn the_json_config_is_tritons_shape() {
    let repo = TempRepo::new("ac-json");
    repo.model("digits", None, &weir_model("digits_mlp.onnx"), &[1]);
    let loaded_repo = repo.load();
    let served = loaded(&loaded_repo, "digits").latest().unwrap();
    let j = config_json(&served.config).unwrap();
    assert_eq!(j["name"], "digits");
    assert_eq!(j["platform"], "onnxruntime_onnx");
    assert_eq!(j["backend"], "onnxruntime");
    assert_eq!(j["max_batch_size"], 4);
    assert_eq!(j["input"][0]["name"], "x");
    assert_eq!(j["input"][0]["data_type"], "TYPE_FP32");
    assert_eq!(j["input"][0]["dims"], serde_json::json!([64]));
    assert_eq!(j["output"][0]["dims"], serde_json::json!([10]));
    assert_eq!(
        j["dynamic_batching"]["preferred_batch_size"],
        serde_json::json!([4])
    );
    assert_eq!(j["dynamic_batching"]["max_queue_delay_microseconds"], 0);
    assert_eq!(j["instance_group"][0]["kind"], "KIND_CPU");
    assert_eq!(j["instance_group"][0]["count"], 2);
    assert_eq!(j["version_policy"]["latest"]["num_versions"], 1);
    assert_eq!(j["optimization"]["input_pinned_memory"]["enable"], true);
    assert_eq!(j["default_model_filename"], "model.onnx");
}

#[test]
fn a_config_given_as_json_replaces_the_file_and_is_checked_as_text_is() {
    let repo = TempRepo::new("json-config");
    repo.model(
        "digits",
        Some("max_batch_size: 4"),
        &weir_model("digits_mlp.onnx"),
        &[1],
    );
    let options = |json: &str| LoadOptions {
        config_overrides: [("digits".to_string(), json.to_string())].into(),
        ..LoadOptions::default()
    };
    let r = load(&repo.root, &options(r#"{"max_batch_size": 2}"#)).unwrap();
    let model = r.model("digits").expect("loaded");
    assert_eq!(model.latest().expect("a version").config.max_batch_size, 2);
    let r = load(&repo.root, &options(r#"{"max_batch_sise": 2}"#)).unwrap();
    let err = r.models["digits"].outcome.as_ref().unwrap_err().to_string();
    assert!(err.contains("`config` parameter"), "{err}");
    let r = load(&repo.root, &options(r#"{"max_batch_size": 2} trailing"#)).unwrap();
    assert!(r.models["digits"].outcome.is_err());
}
