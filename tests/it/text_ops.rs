//! Post-processing nodes end to end: `softmax` against ONNX Runtime's own `Softmax`, `labels` on
//! the digits classifier, an index without a label failing only its request, and label files that
//! cannot serve refused at validation naming the field.

use std::path::Path;

use weir::{
    load_graph, plan_spec, start, DType, GraphSpec, LoadError, RequestError, RuntimeOptions,
    Tensor, TensorData,
};

use crate::common::{channel, model, named, run_python_script, temp_dir, Replies};
use crate::reference::ort_reference;

/// Writes `yaml` as `graph.yaml` in `dir` and loads it.
fn load(dir: &Path, yaml: &str) -> Result<weir::LoadedGraph, LoadError> {
    let path = dir.join("graph.yaml");
    std::fs::write(&path, yaml).expect("graph written");
    load_graph(&path)
}

/// A one-node ONNX model, `Softmax` along the last axis of a free-shaped `[n, 2, 5]` f32 input,
/// written by the `onnx` package of the set-up venv.
fn softmax_model(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("softmax.onnx");
    let script = "import sys, onnx\n\
from onnx import helper, TensorProto\n\
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['n', 2, 5])\n\
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['n', 2, 5])\n\
node = helper.make_node('Softmax', ['x'], ['y'], axis=-1)\n\
g = helper.make_graph([node], 'softmax', [x], [y])\n\
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])\n\
m.ir_version = 8\n\
onnx.save(m, sys.argv[1])\n";
    run_python_script(script, &[&path], "writing the softmax model");
    path
}

#[test]
fn softmax_matches_onnx_runtime() {
    let dir = temp_dir("softmax");
    let reference_model = softmax_model(&dir.0);
    let graph = load(
        &dir.0,
        "name: softmax\n\
inputs:\n  - {name: x, dtype: f32, shape: [2, 5]}\n\
nodes:\n  - softmax: {id: probs, input: x}\n\
outputs:\n  - {name: probs, from: probs}\n",
    )
    .expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    // Large, negative, equal and tiny scores: overflow without the max subtracted.
    let rows: Vec<Vec<f32>> = vec![
        vec![1.0, 2.0, 3.0, 4.0, 5.0, -1.0, 0.0, 1.0, 0.5, -0.5],
        vec![1000.0, 999.0, 998.0, -1000.0, 0.0, 7.0, 7.0, 7.0, 7.0, 7.0],
        vec![-80.0, -81.0, 1e-7, 88.0, 89.0, 0.25, -3.5, 12.0, 0.0, 2.0],
    ];
    let batch = Tensor::f32(vec![rows.len(), 2, 5], rows.concat());
    let want = ort_reference(&reference_model, &[("x", &batch)]);
    let want = want[0].1.as_f32().expect("f32").to_vec();
    for (r, row) in rows.iter().enumerate() {
        let reply = running
            .runtime()
            .infer(vec![named("x", Tensor::f32(vec![2, 5], row.clone()))])
            .expect("answered");
        let got = reply.output("probs").expect("probs");
        assert_eq!(got.shape, vec![2, 5]);
        crate::common::assert_close(
            got.as_f32().expect("f32"),
            &want[r * 10..(r + 1) * 10],
            1e-6,
            "softmax",
        );
    }
    running.shutdown();
}

const DIGIT_NAMES: [&str; 10] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];

fn labels_of(t: &Tensor) -> Vec<String> {
    match &t.data {
        TensorData::Bytes(v) => v
            .iter()
            .map(|b| String::from_utf8(b.clone()).expect("utf-8"))
            .collect(),
        other => panic!("expected BYTES, got {:?}", other.dtype()),
    }
}

#[test]
fn digits_classifier_answers_with_names() {
    let dir = temp_dir("labels-digits");
    std::fs::write(dir.0.join("digits.txt"), DIGIT_NAMES.join("\n") + "\n").expect("labels");
    let yaml = format!(
        "name: digits_named\n\
inputs:\n  - {{name: pixels, dtype: f32, shape: [64]}}\n\
nodes:\n\
  - normalize: {{id: scaled, input: pixels, mean: [0.0], std: [16.0]}}\n\
  - model: {{id: mlp, path: {}, inputs: {{x: scaled}}, batching: {{max_size: 8, max_delay_us: 500}}}}\n\
  - softmax: {{id: probs, input: mlp.probs}}\n\
  - argmax: {{id: class, input: mlp.probs}}\n\
  - labels: {{id: name, input: class, labels: digits.txt}}\n\
outputs:\n  - {{name: class, from: class}}\n  - {{name: name, from: name}}\n  - {{name: probs, from: probs}}\n",
        model("digits_mlp.onnx").display()
    );
    let graph = load(&dir.0, &yaml).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let csv = std::fs::read_to_string(model("digits_test.csv")).expect("digits test set");
    let mut right = 0;
    let items: Vec<(Vec<f32>, usize)> = csv
        .lines()
        .take(60)
        .map(|line| {
            let v: Vec<f32> = line
                .split(',')
                .map(|x| x.parse().expect("number"))
                .collect();
            (v[..64].to_vec(), v[64] as usize)
        })
        .collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, (pixels, _)) in items.iter().enumerate() {
        let inputs = vec![named("pixels", Tensor::f32(vec![64], pixels.clone()))];
        replies.submit(&running, i as u64, inputs, &tx);
    }
    drop(tx);
    for (tag, reply) in rx.iter() {
        let reply = reply.expect("answered");
        let class = reply
            .output("class")
            .and_then(Tensor::as_i64)
            .expect("class")[0] as usize;
        let names = labels_of(reply.output("name").expect("name"));
        assert_eq!(names, vec![DIGIT_NAMES[class].to_string()], "request {tag}");
        let probs = reply
            .output("probs")
            .and_then(Tensor::as_f32)
            .expect("probs");
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        if class == items[tag as usize].1 {
            right += 1;
        }
    }
    assert!(replies.counts().values().all(|&n| n == 1));
    assert!(right > 50, "{right}/60 digits named right");
    running.shutdown();
}

#[test]
fn an_index_without_a_label_fails_only_its_request() {
    let dir = temp_dir("labels-range");
    std::fs::write(dir.0.join("abc.txt"), "a\nb\r\nc").expect("labels");
    // Written with the Rust builder: the same node as `labels: {..., labels: abc.txt}`.
    let spec = GraphSpec::builder("lookup")
        .input("i", DType::I64, &[2])
        .labels("lookup", "i", "abc.txt")
        .output("names", "lookup")
        .build();
    let graph = plan_spec(&spec, &dir.0).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let replies = Replies::default();
    let (tx, rx) = channel();
    let requests: [[i64; 2]; 5] = [[0, 2], [1, 3], [2, 1], [-1, 0], [1, 1]];
    for (tag, idx) in requests.iter().enumerate() {
        let inputs = vec![named("i", Tensor::i64(vec![2], idx.to_vec()))];
        replies.submit(&running, tag as u64, inputs, &tx);
    }
    drop(tx);
    for (tag, reply) in rx.iter() {
        match (tag, reply) {
            (1 | 3, Err(RequestError::Node { node, message })) => {
                assert_eq!(node, "lookup");
                assert!(message.contains("has no label"), "{message}");
            }
            (1 | 3, other) => panic!("request {tag}: expected a node error, got {other:?}"),
            (_, reply) => {
                let reply = reply.unwrap_or_else(|e| panic!("request {tag}: {e}"));
                let names = labels_of(reply.output("names").expect("names"));
                let want: Vec<String> = requests[tag as usize]
                    .iter()
                    .map(|&i| ["a", "b", "c"][i as usize].to_string())
                    .collect();
                assert_eq!(names, want, "request {tag}");
            }
        }
    }
    assert_eq!(replies.counts().len(), requests.len());
    assert!(replies.counts().values().all(|&n| n == 1));
    running.shutdown();
}

#[test]
fn label_files_that_cannot_serve_are_refused_naming_the_field() {
    let dir = temp_dir("labels-bad");
    std::fs::write(dir.0.join("blank.txt"), "\n  \n\n").expect("blank");
    for (file, why) in [
        ("blank.txt", "holds no labels"),
        ("absent.txt", "does not exist"),
    ] {
        let yaml = format!(
            "name: bad\n\
inputs:\n  - {{name: i, dtype: i64, shape: [1]}}\n\
nodes:\n  - labels: {{id: lookup, input: i, labels: {file}}}\n\
outputs:\n  - {{name: names, from: lookup}}\n"
        );
        match load(&dir.0, &yaml) {
            Err(LoadError::Invalid(d)) => {
                let text = d.to_string();
                assert!(text.contains("nodes.lookup.labels"), "{text}");
                assert!(text.contains(why), "{file}: {text}");
                assert!(
                    text.contains("graph.yaml:5:"),
                    "{file}: not located: {text}"
                );
            }
            Ok(_) => panic!("{file}: validated"),
            Err(e) => panic!("{file}: {e}"),
        }
    }
}

/// A small WordLevel `tokenizer.json` with BERT's `[CLS] … [SEP]` template, as the Hugging Face
/// library writes one.
pub(crate) const TOKENIZER_JSON: &str = r#"{
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 0, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 1, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
    {"id": 2, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
  ],
  "normalizer": {"type": "Lowercase"},
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {
      "[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]},
      "[SEP]": {"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}
    }
  },
  "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "[UNK]",
            "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "weir": 4, "world": 5, "!": 6}}
}"#;

fn tokenize_graph(dir: &Path, max_length: usize) -> Result<weir::LoadedGraph, LoadError> {
    std::fs::write(dir.join("tokenizer.json"), TOKENIZER_JSON).expect("tokenizer");
    load(
        dir,
        &format!(
            "name: tokens\n\
inputs:\n  - {{name: text, dtype: bytes, shape: []}}\n\
nodes:\n  - tokenize: {{id: tok, input: text, tokenizer: tokenizer.json, max_length: {max_length}}}\n\
outputs:\n  - {{name: ids, from: tok.input_ids}}\n  - {{name: mask, from: tok.attention_mask}}\n"
        ),
    )
}

#[test]
fn texts_become_token_ids_of_their_own_length() {
    let dir = temp_dir("tokenize");
    let graph = tokenize_graph(&dir.0, 6).expect("valid");
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let text = |s: &[u8]| vec![named("text", Tensor::bytes(vec![], vec![s.to_vec()]))];
    let cases: [(&[u8], Vec<i64>); 3] = [
        (b"Hello weir world!", vec![1, 3, 4, 5, 6, 2]),
        (b"hello", vec![1, 3, 2]),
        (b"unknown words", vec![1, 0, 0, 2]),
    ];
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (tag, (t, _)) in cases.iter().enumerate() {
        replies.submit(&running, tag as u64, text(t), &tx);
    }
    // Seven tokens with the template, over max_length 6; and bytes that are not UTF-8.
    replies.submit(&running, 10, text(b"hello hello hello hello hello"), &tx);
    replies.submit(&running, 11, text(&[0xff, 0xfe]), &tx);
    drop(tx);
    for (tag, reply) in rx.iter() {
        match tag {
            10 | 11 => {
                // The client's text is at fault: an invalid request (a 4xx) naming the input.
                let Err(RequestError::Invalid { field, message }) = reply else {
                    panic!("request {tag}: expected an invalid request, got {reply:?}");
                };
                assert_eq!(field, "inputs.text");
                assert!(message.contains("node `tok`"), "{message}");
                let why = if tag == 10 {
                    "7 tokens, over max_length 6"
                } else {
                    "not UTF-8"
                };
                assert!(message.contains(why), "{message}");
            }
            _ => {
                let reply = reply.unwrap_or_else(|e| panic!("request {tag}: {e}"));
                let want = &cases[tag as usize].1;
                let ids = reply.output("ids").expect("ids");
                assert_eq!(ids.shape, vec![want.len()]);
                assert_eq!(ids.as_i64(), Some(&want[..]), "request {tag}");
                let mask = reply.output("mask").and_then(Tensor::as_i64).expect("mask");
                assert_eq!(mask, vec![1; want.len()]);
            }
        }
    }
    assert_eq!(replies.counts().len(), 5);
    running.shutdown();
}

#[test]
fn a_file_that_is_not_a_tokenizer_is_refused_naming_the_field() {
    let dir = temp_dir("tokenize-bad");
    tokenize_graph(&dir.0, 8).expect("valid");
    std::fs::write(
        dir.0.join("tokenizer.json"),
        r#"{"model": {"type": "Nope"}}"#,
    )
    .expect("json");
    let yaml = "name: tokens\n\
inputs:\n  - {name: text, dtype: bytes, shape: []}\n\
nodes:\n  - tokenize: {id: tok, input: text, tokenizer: tokenizer.json, max_length: 8}\n\
outputs:\n  - {name: ids, from: tok.input_ids}\n";
    match load(&dir.0, yaml) {
        Err(LoadError::Invalid(d)) => {
            let text = d.to_string();
            assert!(text.contains("nodes.tok.tokenizer"), "{text}");
            assert!(
                text.contains("is not a Hugging Face tokenizer.json"),
                "{text}"
            );
        }
        Ok(_) => panic!("validated"),
        Err(e) => panic!("{e}"),
    }
}
