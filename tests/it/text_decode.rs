//! Text nodes against the libraries people use (`tests/python/text_reference.py`): `tokenize` and
//! `detokenize` against the Hugging Face `tokenizers` package on the same `tokenizer.json` (a small
//! WordLevel one and WordLlama's real one), and
//! `ctc_decode` against a numpy greedy decoder, on random scores of many lengths and on the
//! PP-OCRv4 recogniser's answer for a drawn word.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use weir::{load_graph, start, Response, RunningGraph, RuntimeOptions, Tensor, TensorData};

use crate::common::{channel, model, named, temp_dir, Replies};
use crate::reference::{batch_of_one, first_of_batch, ort_reference, python};
use crate::text_ops::TOKENIZER_JSON;

/// Writes `yaml` as `graph.yaml` in `dir` and starts it.
fn start_graph(dir: &Path, yaml: &str) -> RunningGraph {
    let path = dir.join("graph.yaml");
    std::fs::write(&path, yaml).expect("graph written");
    let graph = load_graph(&path).unwrap_or_else(|e| panic!("{e}"));
    start(graph.plan, RuntimeOptions::default()).expect("starts")
}

/// `text_reference.py`'s reply to `request`.
fn reference(request: &Value) -> Value {
    let (code, stdout, stderr) = python("text_reference.py", &[], request);
    assert_eq!(code, 0, "text_reference.py failed: {stderr}");
    serde_json::from_str(&stdout).expect("reply is JSON")
}

/// Submits every request of `inputs` at once (so they batch together); the replies in order.
fn infer_all(running: &RunningGraph, inputs: Vec<Vec<weir::NamedTensor>>) -> Vec<Response> {
    let replies = Replies::default();
    let (tx, rx) = channel();
    let n = inputs.len();
    for (tag, input) in inputs.into_iter().enumerate() {
        replies.submit(running, tag as u64, input, &tx);
    }
    drop(tx);
    let mut out: Vec<Option<Response>> = (0..n).map(|_| None).collect();
    for (tag, reply) in rx.iter() {
        let reply = reply.unwrap_or_else(|e| panic!("request {tag}: {e}"));
        out[tag as usize] = Some(reply);
    }
    out.into_iter()
        .map(|r| r.expect("every request answered"))
        .collect()
}

fn text_of(t: &Tensor) -> String {
    match &t.data {
        TensorData::Bytes(v) if v.len() == 1 => String::from_utf8(v[0].clone()).expect("UTF-8"),
        other => panic!("expected one BYTES element, got {:?}", other.dtype()),
    }
}

fn i64s(v: &Value) -> Vec<i64> {
    serde_json::from_value(v.clone()).expect("integers")
}

/// Texts a tokenizer meets: accents, scripts without spaces, emoji, punctuation runs, blank and
/// long ones.
const SENTENCES: [&str; 20] = [
    "Hello weir world!",
    "hello",
    "",
    "   ",
    "HELLO, WORLD!!! hello?",
    "Grüße aus Köln, ça va?",
    "naïve café résumé",
    "日本語のテキスト",
    "中文 文本 识别",
    "Привет, мир",
    "emoji 🎉🚀 hello 👍🏽",
    "tabs\tand\nnewlines\r\nhere",
    "a-b_c.d/e\\f",
    "numbers 3.14159 and 1999-12-31",
    "it's don't won't",
    "((nested [brackets] {here}))",
    "weir weir weir weir weir weir weir weir weir weir weir weir weir weir weir weir",
    "السلام عليكم",
    "x",
    "The quick brown fox jumps over the lazy dog while the world says hello to weir again and again",
];

#[test]
fn tokenize_and_detokenize_match_the_tokenizers_package() {
    let replies = round_trip(TOKENIZER_JSON.as_bytes());
    // The round trip is the lower-cased words the vocabulary knows.
    assert_eq!(
        text_of(replies[0].output("plain").expect("plain")),
        "hello weir world !"
    );
    assert_eq!(
        text_of(replies[0].output("marked").expect("marked")),
        "[CLS] hello weir world ! [SEP]"
    );
}

/// The same on a real tokenizer: WordLlama's (Llama 2's SentencePiece BPE with byte fallback), set
/// up with the pretrained models.
#[test]
fn a_pretrained_tokenizer_matches_the_tokenizers_package() {
    let file = std::fs::read(model("pretrained/wordllama_tokenizer.json")).expect("tokenizer");
    let replies = round_trip(&file);
    // Byte fallback gives every text back whole.
    assert_eq!(
        text_of(replies[10].output("plain").expect("plain")),
        SENTENCES[10]
    );
}

/// Every sentence of [`SENTENCES`] through `tokenize` and `detokenize` (special tokens skipped and
/// kept) with `tokenizer_json`, compared with the `tokenizers` package; the replies.
fn round_trip(tokenizer_json: &[u8]) -> Vec<Response> {
    let dir = temp_dir("text-reference");
    let tokenizer = dir.0.join("tokenizer.json");
    std::fs::write(&tokenizer, tokenizer_json).expect("tokenizer");
    let running = start_graph(
        &dir.0,
        "name: round_trip\n\
inputs:\n- {name: text, dtype: bytes, shape: []}\n\
nodes:\n\
  - tokenize: {id: tok, input: text, tokenizer: tokenizer.json, max_length: 512}\n\
  - detokenize: {id: plain, input: tok.input_ids, tokenizer: tokenizer.json}\n\
  - detokenize: {id: marked, input: tok.input_ids, tokenizer: tokenizer.json, skip_special_tokens: false}\n\
outputs:\n\
  - {name: ids, from: tok.input_ids}\n- {name: mask, from: tok.attention_mask}\n\
  - {name: plain, from: plain.text}\n- {name: marked, from: marked.text}\n",
    );
    let requests = SENTENCES
        .iter()
        .map(|s| {
            vec![named(
                "text",
                Tensor::bytes(vec![], vec![s.as_bytes().to_vec()]),
            )]
        })
        .collect();
    let replies = infer_all(&running, requests);
    let path = tokenizer.display().to_string();
    let encoded = reference(&json!({"op": "encode", "tokenizer": path, "texts": SENTENCES}));
    let ids: Vec<Vec<i64>> = replies
        .iter()
        .map(|r| {
            r.output("ids")
                .and_then(Tensor::as_i64)
                .expect("ids")
                .to_vec()
        })
        .collect();
    for (i, reply) in replies.iter().enumerate() {
        let what = format!("sentence {i} {:?}", SENTENCES[i]);
        assert_eq!(ids[i], i64s(&encoded["ids"][i]), "{what}: input_ids");
        let mask = reply.output("mask").and_then(Tensor::as_i64).expect("mask");
        assert_eq!(mask, i64s(&encoded["mask"][i]), "{what}: attention_mask");
    }
    for (skip, output) in [(true, "plain"), (false, "marked")] {
        let decoded = reference(&json!({
            "op": "decode", "tokenizer": path, "ids": ids, "skip_special_tokens": skip
        }));
        for (i, reply) in replies.iter().enumerate() {
            let got = text_of(reply.output(output).expect("text"));
            assert_eq!(got, decoded["texts"][i], "sentence {i}: {output}");
        }
    }
    running.shutdown();
    replies
}

#[test]
fn a_negative_token_id_fails_only_its_request() {
    let dir = temp_dir("detokenize-bad-id");
    std::fs::write(dir.0.join("tokenizer.json"), TOKENIZER_JSON).expect("tokenizer");
    let running = start_graph(
        &dir.0,
        "name: detok\n\
inputs:\n- {name: ids, dtype: i64, shape: [-1]}\n\
nodes:\n- detokenize: {id: d, input: ids, tokenizer: tokenizer.json}\n\
outputs:\n- {name: text, from: d.text}\n",
    );
    let ok = running
        .runtime()
        .infer(vec![named("ids", Tensor::i64(vec![3], vec![3, 4, 99]))])
        .expect("answered");
    // An id past the vocabulary is left out, as the Hugging Face library does.
    assert_eq!(text_of(ok.output("text").expect("text")), "hello weir");
    let err = running
        .runtime()
        .infer(vec![named("ids", Tensor::i64(vec![2], vec![3, -1]))])
        .expect_err("refused");
    assert!(err.to_string().contains("-1 is not a token id"), "{err}");
    running.shutdown();
}

/// Random scores, `[T, C]` per request with T from 0 to 30, softmax-like or with ties, for a
/// label file of multi-byte names.
#[test]
fn ctc_decode_matches_numpy_on_random_scores() {
    const CLASSES: usize = 7;
    let dir = temp_dir("ctc-random");
    let names = ["<blank>", "a", "ß", "語", "🎉", " ", "z"];
    std::fs::write(dir.0.join("keys.txt"), names.join("\n") + "\n").expect("keys");
    let running = start_graph(
        &dir.0,
        &format!(
            "name: ctc\n\
inputs:\n- {{name: scores, dtype: f32, shape: [-1, {CLASSES}]}}\n\
nodes:\n- ctc_decode: {{id: text, input: scores, labels: keys.txt, blank: 0}}\n\
outputs:\n- {{name: text, from: text.text}}\n- {{name: confidence, from: text.confidence}}\n"
        ),
    );
    let mut rng = StdRng::seed_from_u64(42);
    let mut all_scores = Vec::new();
    for i in 0..40 {
        let steps = if i < 2 { i } else { rng.random_range(1..=30) };
        let scores: Vec<f32> = (0..steps * CLASSES)
            .map(|_| {
                if i % 5 == 4 {
                    // Few distinct values: many ties.
                    f32::from(rng.random_range(0..3u8)) / 2.0
                } else {
                    rng.random::<f32>()
                }
            })
            .collect();
        all_scores.push((steps, scores));
    }
    let requests = all_scores
        .iter()
        .map(|(steps, s)| {
            vec![named(
                "scores",
                Tensor::f32(vec![*steps, CLASSES], s.clone()),
            )]
        })
        .collect();
    let replies = infer_all(&running, requests);
    let nested: Vec<Vec<Vec<f32>>> = all_scores
        .iter()
        .map(|(_, s)| s.chunks(CLASSES).map(<[f32]>::to_vec).collect())
        .collect();
    let labels = dir.0.join("keys.txt").display().to_string();
    let want = reference(&json!({"op": "ctc", "scores": nested, "labels": labels, "blank": 0}));
    let mut nonempty = 0;
    for (i, reply) in replies.iter().enumerate() {
        let text = text_of(reply.output("text").expect("text"));
        assert_eq!(text, want["texts"][i], "request {i}");
        nonempty += usize::from(!text.is_empty());
        let confidence = reply.output("confidence").expect("confidence");
        assert!(confidence.shape.is_empty());
        let want_conf = want["confidences"][i].as_f64().expect("number") as f32;
        crate::common::assert_close(
            confidence.as_f32().expect("f32"),
            &[want_conf],
            1e-5,
            "confidence",
        );
    }
    assert!(nonempty > 30, "{nonempty} texts decoded");
    running.shutdown();
}

/// Glyphs of a 5 × 7 pixel font, a row per string.
#[rustfmt::skip]
const GLYPHS: [(char, [&str; 7]); 6] = [
    ('2', [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"]),
    ('4', ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."]),
    ('E', ["#####", "#....", "#....", "####.", "#....", "#....", "#####"]),
    ('I', ["#####", "..#..", "..#..", "..#..", "..#..", "..#..", "#####"]),
    ('R', ["####.", "#...#", "#...#", "####.", "#.#..", "#..#.", "#...#"]),
    ('W', ["#...#", "#...#", "#...#", "#.#.#", "#.#.#", "##.##", "#...#"]),
];

/// `word` drawn dark on white in the 5 × 7 font, each font pixel `scale` × `scale`, from the left
/// of a 48 × 320 RGB image (the recogniser's input size: the text keeps its proportions).
fn draw(word: &str, scale: usize) -> Tensor {
    let (glyph_w, gap) = (5 * scale, 2 * scale);
    let (height, width) = (48, 320);
    let margin = (height - 7 * scale) / 2;
    let mut pixels = vec![255u8; height * width * 3];
    for (n, c) in word.chars().enumerate() {
        let rows = GLYPHS.iter().find(|g| g.0 == c).expect("a drawn glyph").1;
        for (gy, row) in rows.iter().enumerate() {
            for (gx, dot) in row.chars().enumerate() {
                if dot != '#' {
                    continue;
                }
                for y in 0..scale {
                    for x in 0..scale {
                        let py = margin + gy * scale + y;
                        let px = margin + n * (glyph_w + gap) + gx * scale + x;
                        let at = (py * width + px) * 3;
                        pixels[at..at + 3].fill(20);
                    }
                }
            }
        }
    }
    Tensor {
        shape: vec![height, width, 3],
        data: TensorData::U8(pixels),
    }
}

#[test]
fn ctc_decode_reads_the_pp_ocr_recogniser_as_numpy_does() {
    let dir = temp_dir("ctc-ppocr");
    let rec = model("pretrained/ch_PP-OCRv4_rec_infer.onnx");
    let keys = model("pretrained/ppocr_keys.txt");
    let running = start_graph(
        &dir.0,
        &format!(
            "name: recognise\n\
inputs:\n- {{name: image, dtype: u8, shape: [-1, -1, 3]}}\n\
nodes:\n\
  - resize: {{id: line, input: image, height: 48, width: 320, interpolation: bilinear}}\n\
  - cast: {{id: line_f32, input: line, to: f32}}\n\
  - transpose: {{id: line_chw, input: line_f32, perm: [2, 0, 1]}}\n\
  - normalize: {{id: rec_input, input: line_chw, mean: [127.5], std: [127.5]}}\n\
  - model: {{id: rec, path: {}, inputs: {{x: rec_input}}, batching: {{max_size: 4, max_delay_us: 2000}}}}\n\
  - ctc_decode: {{id: text, input: rec.softmax_11.tmp_0, labels: {}, blank: 0}}\n\
outputs:\n\
  - {{name: rec_input, from: rec_input}}\n- {{name: scores, from: rec.softmax_11.tmp_0}}\n\
  - {{name: text, from: text.text}}\n- {{name: confidence, from: text.confidence}}\n",
            rec.display(),
            keys.display()
        ),
    );
    let words = ["WEIR", "42"];
    let requests = words
        .iter()
        .map(|w| vec![named("image", draw(w, 4))])
        .collect();
    let replies = infer_all(&running, requests);
    let mut texts = Vec::new();
    for (word, reply) in words.iter().zip(&replies) {
        let input = reply.output("rec_input").expect("rec_input");
        let want = ort_reference(&rec, &[("x", &batch_of_one(input))]);
        let want = first_of_batch(&want[0].1);
        let scores = reply.output("scores").expect("scores");
        assert_eq!(scores.shape, want.shape, "{word}: scores shape");
        crate::common::assert_close(
            scores.as_f32().expect("f32"),
            want.as_f32().expect("f32"),
            1e-4,
            word,
        );
        // The numpy decoder on ONNX Runtime's own scores.
        let nested: Vec<Vec<f32>> = want
            .as_f32()
            .expect("f32")
            .chunks(want.shape[1])
            .map(<[f32]>::to_vec)
            .collect();
        let reference = reference(&json!({
            "op": "ctc", "scores": [nested], "labels": keys.display().to_string(), "blank": 0
        }));
        let text = text_of(reply.output("text").expect("text"));
        assert_eq!(text, reference["texts"][0], "{word}");
        let confidence = reply
            .output("confidence")
            .and_then(Tensor::as_f32)
            .expect("f32");
        let want_conf = reference["confidences"][0].as_f64().expect("number") as f32;
        crate::common::assert_close(confidence, &[want_conf], 1e-4, word);
        texts.push(text);
    }
    // The recogniser reads the drawn words.
    assert_eq!(texts, words.map(String::from).to_vec());
    running.shutdown();
}
