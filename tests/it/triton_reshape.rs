//! Triton repositories whose tensors reach the model in another shape, through the real process:
//! the set-up's pretrained models (PP-OCR's text detector, Magika, silero-vad) served with no
//! `config.pbtxt` answer what ONNX Runtime answers — silero-vad's scalar sample rate arrives as
//! the `[1]` its auto-completed configuration declares — and a configuration's `reshape` of an
//! input and an output gives the model the file's shape and the client the configuration's.

use serde_json::Value;
use weir::{Tensor, TensorData};

use crate::common::{model, temp_dir, weir_home};
use crate::reference::{ort_reference, outputs_from_json, request_json};
use crate::serve::http;
use crate::triton_repository::{copy, get, serve, write, RepoServer};

/// One JSON inference request to `path`; each output as a tensor by name.
fn infer(s: &RepoServer, path: &str, inputs: &[(&str, &Tensor)]) -> Vec<(String, Tensor)> {
    let body = request_json(inputs).to_string();
    let (code, reply) = http(&s.http, "POST", path, &[], body.as_bytes());
    assert_eq!(code, 200, "{path}: {reply}");
    outputs_from_json(&serde_json::from_str(&reply).expect("a JSON reply"))
}

fn output<'a>(outputs: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &outputs
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no output `{name}` in {outputs:?}"))
        .1
}

/// `got` equals ONNX Runtime's `want`: the same shape, values within `tol`.
fn assert_same(got: &Tensor, want: &Tensor, tol: f32, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    let (Some(g), Some(w)) = (got.as_f32(), want.as_f32()) else {
        panic!("{what}: f32 tensors expected");
    };
    crate::common::assert_close(g, w, tol, what);
}

fn f32_tensor(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| ((i * 7 + seed * 13) % 29) as f32 / 29.0 - 0.5)
        .collect();
    Tensor::f32(shape.to_vec(), data)
}

#[test]
fn the_setups_pretrained_models_serve_with_no_config_as_onnxruntime_answers() {
    weir_home();
    let dir = temp_dir("triton-pretrained");
    let root = dir.0.join("models");
    let files = [
        ("ocr_det", "pretrained/ch_PP-OCRv4_det_infer.onnx"),
        ("magika", "pretrained/magika_standard_v3_3.onnx"),
        ("silero", "pretrained/silero_vad_16k_op15.onnx"),
    ];
    for (name, file) in files {
        copy(&model(file), &root.join(format!("{name}/1/model.onnx")));
    }
    let s = serve(dir, root, &[]);

    // Auto-complete as Triton's: the detector and Magika batch (every first dimension free);
    // silero-vad's state has a fixed first dimension, so it does not, and its scalar `sr` is
    // declared `[1]`.
    for (name, batches) in [("ocr_det", true), ("magika", true), ("silero", false)] {
        let (code, config) = get(&s, &format!("/v2/models/{name}/config"));
        assert_eq!(code, 200, "{name}: {config}");
        let mbs = config["max_batch_size"].as_i64().unwrap_or_default();
        assert_eq!(mbs > 0, batches, "{name}: {config}");
    }
    let (_, silero) = get(&s, "/v2/models/silero/config");
    let sr = silero["input"]
        .as_array()
        .and_then(|inputs| inputs.iter().find(|t| t["name"] == "sr"))
        .expect("an `sr` input");
    assert_eq!(sr["dims"], Value::from(vec![1]), "{silero}");

    let image = f32_tensor(&[1, 3, 64, 96], 1);
    let got = infer(&s, "/v2/models/ocr_det/infer", &[("x", &image)]);
    let want = ort_reference(&model(files[0].1), &[("x", &image)]);
    assert_same(output(&got, &want[0].0), &want[0].1, 1e-4, "ocr_det");

    // Two files' features in one request: a batch of two.
    let features: Vec<i32> = (0..2 * 2048).map(|i| i * 31 % 257).collect();
    let bytes = Tensor {
        shape: vec![2, 2048],
        data: TensorData::I32(features),
    };
    let got = infer(&s, "/v2/models/magika/infer", &[("bytes", &bytes)]);
    let want = ort_reference(&model(files[1].1), &[("bytes", &bytes)]);
    assert_same(output(&got, &want[0].0), &want[0].1, 1e-5, "magika");

    // One 32 ms chunk of 16 kHz audio with a zero state; `sr` sent as the `[1]` the
    // configuration declares, run by ONNX Runtime as the file's scalar.
    let audio = f32_tensor(&[1, 512], 2);
    let state = Tensor::f32(vec![2, 1, 128], vec![0.0; 256]);
    let rate = |shape: Vec<usize>| Tensor {
        shape,
        data: TensorData::I64(vec![16000]),
    };
    let got = infer(
        &s,
        "/v2/models/silero/infer",
        &[("input", &audio), ("state", &state), ("sr", &rate(vec![1]))],
    );
    let want = ort_reference(
        &model(files[2].1),
        &[("input", &audio), ("state", &state), ("sr", &rate(vec![]))],
    );
    for (name, tensor) in &want {
        assert_same(output(&got, name), tensor, 1e-5, &format!("silero {name}"));
    }
}

#[test]
fn a_configured_reshape_gives_the_model_its_shape_and_the_client_the_configs() {
    weir_home();
    let dir = temp_dir("triton-reshape");
    let root = dir.0.join("models");
    copy(
        &model("digits_mlp.onnx"),
        &root.join("digits_grid/1/model.onnx"),
    );
    // The file takes x [N, 64] and gives probs [N, 10]; clients send 8 × 8 images and receive
    // 2 × 5 scores.
    write(
        &root.join("digits_grid/config.pbtxt"),
        r#"max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [8, 8] reshape { shape: [64] } } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [2, 5] reshape { shape: [10] } } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
"#,
    );
    // A reshape that cannot hold the dims' elements is refused at load, naming the field.
    copy(
        &model("digits_mlp.onnx"),
        &root.join("bad_grid/1/model.onnx"),
    );
    write(
        &root.join("bad_grid/config.pbtxt"),
        r#"max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [8, 8] reshape { shape: [63] } } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [10] } ]
"#,
    );
    let s = serve(dir, root, &[]);

    let (_, metadata) = get(&s, "/v2/models/digits_grid");
    assert_eq!(
        metadata["inputs"][0]["shape"],
        serde_json::json!([-1, 8, 8])
    );
    assert_eq!(
        metadata["outputs"][0]["shape"],
        serde_json::json!([-1, 2, 5])
    );

    let images = f32_tensor(&[3, 8, 8], 3);
    let got = infer(&s, "/v2/models/digits_grid/infer", &[("x", &images)]);
    let flat = Tensor {
        shape: vec![3, 64],
        data: images.data.clone(),
    };
    let want = ort_reference(&model("digits_mlp.onnx"), &[("x", &flat)]);
    let mut want = want[0].1.clone();
    want.shape = vec![3, 2, 5];
    assert_same(output(&got, "probs"), &want, 1e-5, "digits_grid");

    // A request whose image is not 8 × 8 is refused naming the input; the model keeps serving.
    let wrong = f32_tensor(&[1, 4, 16], 4);
    let body = request_json(&[("x", &wrong)]).to_string();
    let (code, reply) = http(
        &s.http,
        "POST",
        "/v2/models/digits_grid/infer",
        &[],
        body.as_bytes(),
    );
    assert_eq!(code, 400, "{reply}");
    assert!(reply.contains('x'), "{reply}");
    infer(&s, "/v2/models/digits_grid/infer", &[("x", &images)]);

    let (code, index) = {
        let (code, body) = http(&s.http, "POST", "/v2/repository/index", &[], b"{}");
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap_or_default(),
        )
    };
    assert_eq!(code, 200);
    let bad = index
        .as_array()
        .and_then(|models| models.iter().find(|m| m["name"] == "bad_grid"))
        .unwrap_or_else(|| panic!("bad_grid in the index: {index}"));
    let reason = bad["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("input[0].reshape.shape") && reason.contains("[63]"),
        "{reason}"
    );
}
