//! The pretrained text graph `graphs/topics.yaml` (WordLlama's token embeddings, built into a
//! topic classifier at set-up) served by `weir serve` over HTTP JSON: each sentence's topic
//! scores equal ONNX Runtime's own answer (`tests/python/ort_reference.py`) on the token ids the
//! Hugging Face `tokenizers` package gives for the same `tokenizer.json`, and the topic is named.

use serde_json::json;
use weir::{Tensor, TensorData};

use crate::common::model;
use crate::pretrained::{graph, infer, output};
use crate::reference::{first_of_batch, ort_reference, python};
use crate::serve::Server;

const SENTENCES: [(&str, &str); 8] = [
    ("The team won the football match last night", "sports"),
    ("It will rain tomorrow with strong winds", "weather"),
    ("I baked fresh bread for dinner", "food"),
    ("The new smartphone runs faster software", "technology"),
    ("Stocks fell as the bank raised interest rates", "finance"),
    ("The doctor said the patient is recovering", "health"),
    (
        "We booked a hotel near the beach for our vacation",
        "travel",
    ),
    ("The band played a great concert", "music"),
];

#[test]
fn the_topic_graph_answers_as_onnxruntime_on_the_reference_tokens() {
    let server = Server::start(&[graph("topics")], &[]);
    let onnx = model("pretrained/wordllama_topics.onnx");
    let tokenizer = model("pretrained/wordllama_tokenizer.json");
    let texts: Vec<&str> = SENTENCES.iter().map(|s| s.0).collect();
    let request =
        json!({"op": "encode", "tokenizer": tokenizer.display().to_string(), "texts": texts});
    let (code, stdout, stderr) = python("text_reference.py", &[], &request);
    assert_eq!(code, 0, "text_reference.py failed: {stderr}");
    let encoded: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    for (i, (sentence, topic)) in SENTENCES.iter().enumerate() {
        let text = Tensor::bytes(vec![], vec![sentence.as_bytes().to_vec()]);
        let got = infer(&server, "topics", &[("text", &text)]);
        let ids: Vec<i64> = serde_json::from_value(encoded["ids"][i].clone()).expect("ids");
        let mask: Vec<i64> = serde_json::from_value(encoded["mask"][i].clone()).expect("mask");
        let n = ids.len();
        let want = ort_reference(
            &onnx,
            &[
                ("input_ids", &Tensor::i64(vec![1, n], ids)),
                ("attention_mask", &Tensor::i64(vec![1, n], mask)),
            ],
        );
        let want = first_of_batch(&want[0].1);
        let scores = output(&got, "scores");
        assert_eq!(scores.shape, want.shape, "{sentence}");
        crate::common::assert_close(
            scores.as_f32().expect("f32"),
            want.as_f32().expect("f32"),
            1e-5,
            sentence,
        );
        let TensorData::Bytes(names) = &output(&got, "topic").data else {
            panic!("topic is not BYTES");
        };
        assert_eq!(names, &vec![topic.as_bytes().to_vec()], "{sentence}");
    }
}

/// A text over the node's `max_length` (512 tokens) is a 400 naming the input through the real
/// process, and the server goes on answering.
#[test]
fn an_over_long_text_is_refused_naming_the_input_and_the_server_goes_on() {
    let server = Server::start(&[graph("topics")], &[]);
    let long = "the team won the match ".repeat(400);
    let body =
        json!({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [], "data": [long]}]});
    let (status, reply) = server.post("/v2/models/topics/infer", &[], body.to_string().as_bytes());
    assert_eq!(status, 400, "{reply:.300}");
    assert!(reply.contains("inputs.text"), "{reply:.300}");
    assert!(reply.contains("max_length"), "{reply:.300}");
    let text = Tensor::bytes(vec![], vec![SENTENCES[0].0.as_bytes().to_vec()]);
    let got = infer(&server, "topics", &[("text", &text)]);
    let TensorData::Bytes(names) = &output(&got, "topic").data else {
        panic!("topic is not BYTES");
    };
    assert_eq!(names, &vec![b"sports".to_vec()]);
}
