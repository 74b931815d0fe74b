//! Repositories that are wrong or hostile: each refusal names the model, the file and the field,
//! and never stops the other models from loading.

use super::onnx::{self, FLOAT};
use super::{failure, loaded, weir_model, TempRepo};
use crate::error::LoadError;
use crate::load::{load, LoadOptions};
use weir_engine::paths::FileError;

/// `x: [N, 4] -> y: [N, 2]`.
fn small() -> Vec<u8> {
    onnx::model(&[("x", FLOAT, &[-1, 4])], &[("y", FLOAT, &[-1, 2])])
}

#[test]
fn one_bad_model_never_stops_the_others() {
    let repo = TempRepo::new("h-isolation");
    repo.model_bytes("good", None, &small());
    repo.model_bytes("broken", Some("max_batch_size: [1"), &small());
    repo.model_bytes("garbage", None, b"\xff\xff not onnx");
    let r = repo.load();
    assert_eq!(r.models.len(), 3);
    assert!(loaded(&r, "good").latest().is_some());
    assert!(matches!(
        *failure(&r, "broken").kind,
        LoadError::Syntax { .. }
    ));
    let e = failure(&r, "garbage");
    assert!(matches!(*e.kind, LoadError::Onnx(_)), "{e}");
    assert_eq!(r.served().count(), 1);
}

#[test]
fn bad_text_format_names_the_file_line_and_column() {
    let repo = TempRepo::new("h-syntax");
    repo.model_bytes(
        "m",
        Some("name: \"m\"\nmax_batch_size: 4\ninput [ { name: \"x\" data_type: FP32 } ]\n"),
        &small(),
    );
    let e = failure(&repo.load(), "m").to_string();
    assert!(e.starts_with("model `m`: m/config.pbtxt:3:"), "{e}");
    assert!(e.contains("FP32"), "{e}");
}

#[test]
fn an_unknown_field_is_a_parse_error_and_an_unimplemented_one_is_named() {
    let repo = TempRepo::new("h-fields");
    repo.model_bytes(
        "unknown",
        Some("name: \"unknown\"\nmax_batch_sise: 4\n"),
        &small(),
    );
    repo.model_bytes(
        "unimplemented",
        Some("optimization { cuda { graphs: true } }\nresponse_cache { enable: true }\nparameters { key: \"execution_mode\" value { string_value: \"1\" } }\n"),
        &small(),
    );
    let r = repo.load();
    let e = failure(&r, "unknown");
    assert!(matches!(*e.kind, LoadError::Syntax { .. }), "{e}");
    assert!(e.to_string().contains("max_batch_sise"), "{e}");
    let e = failure(&r, "unimplemented").to_string();
    assert_eq!(
        e,
        "model `unimplemented`: unimplemented/config.pbtxt sets `optimization.cuda`, `parameters[\"execution_mode\"]` and `response_cache.enable`, which weir does not implement"
    );
}

#[test]
fn a_huge_config_is_refused_before_it_is_read() {
    let repo = TempRepo::new("h-huge");
    let mut text = String::from("name: \"m\"\n");
    text.push_str(&"# padding\n".repeat((1 << 20) / 10 + 1));
    repo.model_bytes("m", Some(&text), &small());
    let r = repo.load();
    let e = failure(&r, "m");
    assert!(
        matches!(
            *e.kind,
            LoadError::File(FileError::TooLarge {
                limit: 1_048_576,
                ..
            })
        ),
        "{e}"
    );
}

#[test]
fn symlinks_out_of_the_root_are_refused() {
    let outside = TempRepo::new("h-outside");
    let secret_config = outside.file("config.pbtxt", "name: \"m\"");
    let secret_onnx = outside.file("model.onnx", small());
    std::fs::create_dir_all(outside.root.join("elsewhere/1")).unwrap();
    std::fs::write(outside.root.join("elsewhere/1/model.onnx"), small()).unwrap();

    let repo = TempRepo::new("h-links");
    // A config that is a link out of the root.
    std::fs::create_dir_all(repo.root.join("cfg/1")).unwrap();
    std::fs::write(repo.root.join("cfg/1/model.onnx"), small()).unwrap();
    std::os::unix::fs::symlink(&secret_config, repo.root.join("cfg/config.pbtxt")).unwrap();
    // A model file that is a link out of the root.
    std::fs::create_dir_all(repo.root.join("file/1")).unwrap();
    std::os::unix::fs::symlink(&secret_onnx, repo.root.join("file/1/model.onnx")).unwrap();
    // A model folder that is a link out of the root.
    std::os::unix::fs::symlink(outside.root.join("elsewhere"), repo.root.join("folder")).unwrap();
    // A version folder that is a link out of the root.
    std::fs::create_dir_all(repo.root.join("version")).unwrap();
    std::os::unix::fs::symlink(
        outside.root.join("elsewhere/1"),
        repo.root.join("version/1"),
    )
    .unwrap();
    // A link inside the root is fine.
    repo.model_bytes("real", None, &small());
    std::os::unix::fs::symlink(repo.root.join("real"), repo.root.join("alias")).unwrap();

    let r = repo.load();
    for name in ["cfg", "file", "folder", "version"] {
        let e = failure(&r, name);
        assert!(
            matches!(*e.kind, LoadError::File(FileError::OutsideRoot { .. }))
                || e.to_string().contains("outside the path root"),
            "{name}: {e}"
        );
    }
    assert!(loaded(&r, "alias").latest().is_some());
    assert!(loaded(&r, "real").latest().is_some());
}

#[test]
fn version_folders_follow_tritons_rules() {
    let repo = TempRepo::new("h-versions");
    repo.model_bytes("m", Some("version_policy { all { } }"), &small());
    for folder in ["2", "latest", "007", "warmup", "configs", "3abc"] {
        repo.file(&format!("m/{folder}/model.onnx"), small());
    }
    repo.file("m/10", "a file, not a folder");
    let r = repo.load();
    let m = loaded(&r, "m");
    assert_eq!(m.versions.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    let warnings = &r.models["m"].warnings;
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings
        .iter()
        .any(|w| w.contains("007") && w.contains("leading zero")));
    assert!(warnings.iter().any(|w| w.contains("latest")));
}

#[test]
fn names_and_folders_that_cannot_be_models() {
    let repo = TempRepo::new("h-names");
    repo.model_bytes(".hidden", None, &small());
    repo.file("README.md", "not a model");
    repo.model_bytes("other", Some("name: \"m\""), &small());
    let r = repo.load();
    assert_eq!(r.models.keys().collect::<Vec<_>>(), vec!["other"]);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let e = failure(&r, "other").to_string();
    assert!(
        e.contains("names model `m`, but its folder is `other`"),
        "{e}"
    );
}

#[test]
fn a_config_naming_a_tensor_the_file_lacks_is_refused_with_both_values() {
    let repo = TempRepo::new("h-contradicts");
    let io = |input: &str, dtype: &str, dims: &str| {
        format!(
            "max_batch_size: 4\ninput [ {{ name: \"{input}\" data_type: {dtype} dims: {dims} }} ]\noutput [ {{ name: \"y\" data_type: TYPE_FP32 dims: [2] }} ]\n"
        )
    };
    repo.model_bytes("name", Some(&io("image", "TYPE_FP32", "[4]")), &small());
    repo.model_bytes("dtype", Some(&io("x", "TYPE_FP16", "[4]")), &small());
    repo.model_bytes("dims", Some(&io("x", "TYPE_FP32", "[5]")), &small());
    let fixed = onnx::model(&[("x", FLOAT, &[1, 4])], &[("y", FLOAT, &[1, 2])]);
    repo.model_bytes("batch", Some("max_batch_size: 8"), &fixed);
    let r = repo.load();
    let cases = [
        ("name", "input[0].name: the configuration says input `image`, but name/1/model.onnx has inputs `x`"),
        ("dtype", "input[0].data_type: the configuration says TYPE_FP16, but dtype/1/model.onnx has TYPE_FP32"),
        ("dims", "input[0].dims: the configuration says [-1, 5] with the batch dimension, but dims/1/model.onnx has [-1, 4] for input `x`"),
        ("batch", "max_batch_size: the configuration says 8 (batching, which needs every input and output to have a dynamic first dimension), but batch/1/model.onnx has a first dimension fixed to 1 on input `x`"),
    ];
    for (model, message) in cases {
        let e = failure(&r, model);
        assert!(matches!(*e.kind, LoadError::Contradicts { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("model `{model}` version 1: {message}")
        );
    }
}

#[test]
fn values_triton_refuses_and_values_weir_does_not_implement() {
    let repo = TempRepo::new("h-values");
    let cases = [
        (
            "negative",
            "max_batch_size: -1",
            "max_batch_size: -1 is negative",
        ),
        (
            "preferred",
            "max_batch_size: 4 dynamic_batching { preferred_batch_size: [8] }",
            "dynamic_batching.preferred_batch_size[0]",
        ),
        (
            "delay",
            "max_batch_size: 4 dynamic_batching { default_queue_policy { timeout_action: DELAY } }",
            "DELAY is not implemented",
        ),
        (
            "kind_model",
            "instance_group [ { kind: KIND_MODEL } ]",
            "KIND_MODEL",
        ),
        (
            "cpu_gpus",
            "instance_group [ { kind: KIND_CPU gpus: [0] } ]",
            "instance_group[0].gpus",
        ),
        (
            "level",
            "optimization { graph { level: 7 } }",
            "optimization.graph.level: 7",
        ),
        (
            "threads",
            "parameters { key: \"intra_op_thread_count\" value { string_value: \"many\" } }",
            "not an integer",
        ),
        (
            "filename",
            "backend: \"onnxruntime\" default_model_filename: \"../../etc/passwd\"",
            "default_model_filename",
        ),
        (
            "pytorch",
            "backend: \"pytorch\"",
            "backend `pytorch` is neither",
        ),
        (
            "policy",
            "version_policy { specific { versions: [7] } }",
            "no version is served",
        ),
    ];
    for (model, config, _) in cases {
        repo.model_bytes(model, Some(config), &small());
    }
    let r = repo.load();
    for (model, _, needle) in cases {
        let e = failure(&r, model).to_string();
        assert!(e.contains(needle), "{model}: {e}");
    }
}

#[test]
fn without_auto_complete_a_configuration_is_required_and_complete() {
    let repo = TempRepo::new("h-strict");
    repo.model_bytes("bare", None, &small());
    repo.model_bytes(
        "partial",
        Some("max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [4] } ]"),
        &small(),
    );
    repo.model_bytes(
        "complete",
        Some("max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [4] } ]\noutput [ { name: \"y\" data_type: TYPE_FP32 dims: [2] } ]"),
        &small(),
    );
    let options = LoadOptions {
        autocomplete: false,
        ..LoadOptions::default()
    };
    let r = load(&repo.root, &options).unwrap();
    assert!(failure(&r, "bare")
        .to_string()
        .contains("auto-complete is off"));
    // No outputs listed: the check of inputs still passes, and the model serves no output.
    assert!(loaded(&r, "partial").latest().is_some());
    assert!(loaded(&r, "complete").latest().is_some());
}

#[test]
fn the_onnx_file_may_be_named_by_the_config() {
    let repo = TempRepo::new("h-filename");
    repo.file(
        "m/config.pbtxt",
        "backend: \"onnxruntime\"\ndefault_model_filename: \"net.onnx\"",
    );
    std::fs::create_dir_all(repo.root.join("m/1")).unwrap();
    std::fs::copy(
        weir_model("digits_tiny.onnx"),
        repo.root.join("m/1/net.onnx"),
    )
    .unwrap();
    let r = repo.load();
    let served = loaded(&r, "m").latest().unwrap();
    assert!(served
        .model_file
        .as_ref()
        .unwrap()
        .ends_with("m/1/net.onnx"));
    assert_eq!(served.config.max_batch_size, 4);
}

#[test]
fn a_state_input_is_not_also_an_input() {
    // Auto-complete lists every file input, the state's too; Triton then counts the state input
    // twice and refuses the model, and so does weir.
    let repo = TempRepo::new("h-state-twice");
    let model = onnx::model(
        &[("x", FLOAT, &[-1, 4]), ("h_in", FLOAT, &[-1, 16])],
        &[("y", FLOAT, &[-1, 4]), ("h_out", FLOAT, &[-1, 16])],
    );
    repo.model_bytes(
        "tracker",
        Some("sequence_batching { state [ { input_name: \"h_in\" output_name: \"h_out\" data_type: TYPE_FP32 dims: [16] } ] }"),
        &model,
    );
    let r = repo.load();
    let e = failure(&r, "tracker").to_string();
    assert!(
        e.ends_with("input: the configuration says 3 inputs with the sequence controls and states (`x`, `h_in`, `h_in`), but tracker/1/model.onnx has 2 inputs (`x`, `h_in`)"),
        "{e}"
    );
}
