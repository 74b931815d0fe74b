//! Every Open Inference Protocol datatype end to end: one graph per type over
//! `.weir/models/dtypes/<t>.onnx` (input `x` of the type, shape `[N, 4]`; `y = Identity(x)`; `z` a
//! sum as FP64, or for strings each element with a suffix), served by a real `weir serve` and
//! asked through HTTP JSON, Triton's own client (`tritonclient[http]`, binary and JSON), and a
//! JSON-lines stream. Every answer must equal ONNX Runtime's own, as
//! `tests/python/ort_reference.py` computes it from the same request: floats to the bit (JSON
//! carries each as its exact double, non-finite ones as `"NaN"`/`"Infinity"`), integers to the
//! unit over their full range. Besides: model metadata names each type and shows `-1` for the
//! batch; JSON numbers that do not fit the type are 400s naming the field and the element; a
//! scalar input works in JSON and binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::common::{model, repo, temp_dir, weir_home};
use crate::reference::python;
use crate::serve::Server;

/// One datatype: its model file's stem, its YAML name, its protocol name, and `z`'s type.
struct Kind {
    file: &'static str,
    yaml: &'static str,
    oip: &'static str,
    z: &'static str,
}

const fn kind(file: &'static str, yaml: &'static str, oip: &'static str) -> Kind {
    Kind {
        file,
        yaml,
        oip,
        z: "FP64",
    }
}

const KINDS: [Kind; 14] = [
    kind("bool", "bool", "BOOL"),
    kind("u8", "u8", "UINT8"),
    kind("u16", "u16", "UINT16"),
    kind("u32", "u32", "UINT32"),
    kind("u64", "u64", "UINT64"),
    kind("i8", "i8", "INT8"),
    kind("i16", "i16", "INT16"),
    kind("i32", "i32", "INT32"),
    kind("i64", "i64", "INT64"),
    kind("f16", "f16", "FP16"),
    kind("f32", "f32", "FP32"),
    kind("f64", "f64", "FP64"),
    kind("bf16", "bf16", "BF16"),
    Kind {
        file: "string",
        yaml: "bytes",
        oip: "BYTES",
        z: "BYTES",
    },
];

impl Kind {
    fn graph_name(&self) -> String {
        format!("dt_{}", self.file)
    }

    fn onnx(&self) -> PathBuf {
        model(&format!("dtypes/{}.onnx", self.file))
    }

    /// The graph serving this type's model, with `extra` YAML appended (a `streams:` section).
    fn graph(&self, extra: &str) -> String {
        format!(
            "name: {}\ninputs:\n  - {{name: x, dtype: {}, shape: [4]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: z, from: m.z}}\n{extra}",
            self.graph_name(),
            self.yaml,
            self.onnx().display()
        )
    }

    /// Eight values (two rows of four) each exactly representable in the type, its extremes
    /// among them.
    fn exact(&self) -> Value {
        let ints = |min: Value, max: Value, minus_one: Value| {
            json!([min, max, 0, 1, minus_one, 42, 7, 100])
        };
        match self.oip {
            "BOOL" => json!([true, false, true, true, false, false, true, false]),
            "UINT8" => ints(json!(0), json!(u8::MAX), json!(254)),
            "UINT16" => ints(json!(0), json!(u16::MAX), json!(300)),
            "UINT32" => ints(json!(0), json!(u32::MAX), json!(70000)),
            "UINT64" => ints(json!(0), json!(u64::MAX), json!(u64::MAX - 1)),
            "INT8" => ints(json!(i8::MIN), json!(i8::MAX), json!(-1)),
            "INT16" => ints(json!(i16::MIN), json!(i16::MAX), json!(-1)),
            "INT32" => ints(json!(i32::MIN), json!(i32::MAX), json!(-1)),
            "INT64" => ints(json!(i64::MIN), json!(i64::MAX), json!(-1)),
            // Largest finite value, smallest normal and subnormal, a negative zero.
            "FP16" => json!([
                0.5,
                -2.0,
                65504.0,
                -0.0,
                6.103515625e-05,
                5.960464477539063e-08,
                3.0,
                -1.25
            ]),
            "BF16" => json!([
                0.5,
                -2.0,
                3.3895313892515355e38,
                -0.0,
                1.5,
                9.183549615799121e-41,
                256.0,
                -7.5
            ]),
            "FP32" => json!([
                0.5,
                -2.0,
                3.4028234663852886e38,
                -0.0,
                1.401298464324817e-45,
                0.25,
                1024.0,
                -7.5
            ]),
            "FP64" => json!([
                0.1,
                -2.5,
                1.7976931348623157e308,
                -0.0,
                5e-324,
                1e-300,
                3.0,
                0.3333333333333333
            ]),
            _ => json!([
                "",
                "a",
                "héllo",
                "日本語",
                "emoji 🙂",
                "x y",
                "\"quoted\"",
                "back\\slash"
            ]),
        }
    }

    /// For float types: values the type must round (once, to nearest-even, from the double the
    /// JSON number reads as) and the non-finite ones.
    fn rounding(&self) -> Option<Value> {
        matches!(self.oip, "FP16" | "BF16" | "FP32" | "FP64").then(|| {
            json!([
                0.1,
                0.3333333333333333,
                1e-8,
                -2.6457513110645907,
                "NaN",
                "Infinity",
                "-Infinity",
                65519.9
            ])
        })
    }

    /// The requests every path sends, by id.
    fn requests(&self) -> Vec<(&'static str, Value)> {
        let mut out = vec![("exact", request(self.oip, &[2, 4], self.exact()))];
        if let Some(data) = self.rounding() {
            out.push(("rounding", request(self.oip, &[2, 4], data)));
        }
        out
    }
}

fn request(datatype: &str, shape: &[usize], data: Value) -> Value {
    json!({"inputs": [{"name": "x", "datatype": datatype, "shape": shape, "data": data}]})
}

/// ONNX Runtime's answer to `request` on `onnx`, or why it gave none (it refuses the model).
fn reference(onnx: &Path, request: &Value) -> Result<Value, String> {
    let script = repo().join("tests/python/ort_reference.py");
    assert!(script.is_file(), "{} is missing", script.display());
    let onnx = onnx.display().to_string();
    match python("ort_reference.py", &[&onnx], request) {
        (0, out, _) => Ok(serde_json::from_str(&out).expect("the reference writes JSON")),
        (1, _, err) => Err(err),
        (code, _, err) => panic!("ort_reference.py failed ({code}) on {request}: {err}"),
    }
}

/// The types this set-up has a model for and ONNX Runtime runs, with the reference answer to
/// each of their requests; a missing model or one ONNX Runtime refuses is skipped, said on stderr.
fn available() -> Vec<(&'static Kind, HashMap<&'static str, Value>)> {
    weir_home();
    let mut out = Vec::new();
    for k in &KINDS {
        if !k.onnx().is_file() {
            eprintln!("skipping {}: {} is missing", k.oip, k.onnx().display());
            continue;
        }
        let answers: Result<HashMap<_, _>, String> = k
            .requests()
            .into_iter()
            .map(|(id, r)| reference(&k.onnx(), &r).map(|a| (id, a)))
            .collect();
        match answers {
            Ok(a) => out.push((k, a)),
            Err(e) => eprintln!("skipping {}: ONNX Runtime refuses its model: {e}", k.oip),
        }
    }
    assert!(
        out.iter().filter(|(k, _)| k.oip != "BF16").count() == KINDS.len() - 1,
        "only BF16 may be skipped"
    );
    out
}

/// Whether two JSON elements are the same value: integers exactly, floats to the bit.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(p), Some(q), _, _) => p == q,
                (_, _, Some(p), Some(q)) => p == q,
                _ => match (x.as_f64(), y.as_f64()) {
                    (Some(p), Some(q)) => p.to_bits() == q.to_bits(),
                    _ => false,
                },
            }
        }
        _ => a == b,
    }
}

/// Asserts that `got` holds every output of `want` with the same datatype, shape and elements.
fn assert_same_outputs(got: &Value, want: &Value, what: &str) {
    let outputs = |v: &Value| -> HashMap<String, Value> {
        v["outputs"]
            .as_array()
            .unwrap_or_else(|| panic!("{what}: no outputs in {v}"))
            .iter()
            .map(|o| (o["name"].as_str().unwrap_or("").to_string(), o.clone()))
            .collect()
    };
    let got = outputs(got);
    for (name, w) in outputs(want) {
        let g = got
            .get(&name)
            .unwrap_or_else(|| panic!("{what}: no output {name}"));
        assert_eq!(g["datatype"], w["datatype"], "{what}: {name}'s datatype");
        assert_eq!(g["shape"], w["shape"], "{what}: {name}'s shape");
        let (gd, wd) = (g["data"].as_array(), w["data"].as_array());
        let (gd, wd) = (gd.expect("data"), wd.expect("data"));
        assert_eq!(gd.len(), wd.len(), "{what}: {name}'s element count");
        for (i, (p, q)) in gd.iter().zip(wd).enumerate() {
            assert!(
                same_value(p, q),
                "{what}: {name}[{i}] is {p}, ONNX Runtime says {q}"
            );
        }
    }
}

#[test]
fn every_datatype_over_http_json_and_tritonclient_matches_onnxruntime() {
    let kinds = available();
    let graphs: Vec<String> = kinds.iter().map(|(k, _)| k.graph("")).collect();
    let server = Server::start(&graphs, &[]);
    for (k, answers) in &kinds {
        let name = k.graph_name();
        let (status, meta) = server.get(&format!("/v2/models/{name}"));
        assert_eq!(status, 200, "{meta}");
        let meta: Value = serde_json::from_str(&meta).expect("metadata is JSON");
        assert_eq!(
            meta["inputs"][0],
            json!({"name": "x", "datatype": k.oip, "shape": [-1, 4]})
        );
        assert_eq!(meta["outputs"][0]["datatype"], k.oip, "{meta}");
        assert_eq!(meta["outputs"][1]["datatype"], k.z, "{meta}");
        for (id, request) in k.requests() {
            let what = format!("{} {id} over HTTP JSON", k.oip);
            let path = format!("/v2/models/{name}/infer");
            let (status, body) = server.post(&path, &[], request.to_string().as_bytes());
            assert_eq!(status, 200, "{what}: {body}");
            let reply: Value = serde_json::from_str(&body).expect("reply is JSON");
            assert_same_outputs(&reply, &answers[id], &what);
        }
        // Triton's client sends what numpy holds: the exact values (JSON carries no NaN for it).
        let modes: &[&str] = if k.oip == "BF16" {
            &["binary"]
        } else {
            &["binary", "json"]
        };
        for mode in modes {
            let what = format!("{} through tritonclient ({mode})", k.oip);
            let args = [
                "--url",
                &server.addr,
                "--model",
                &name,
                "--mode",
                mode,
                "--outputs",
                "y,z",
            ];
            let (code, out, err) = python(
                "dtype_client.py",
                &args,
                &request(k.oip, &[2, 4], k.exact()),
            );
            assert_eq!(code, 0, "{what}: {err}");
            let reply: Value = serde_json::from_str(&out).expect("the client writes JSON");
            assert_same_outputs(&reply, &answers["exact"], &what);
        }
    }
}

#[test]
fn json_numbers_outside_the_type_are_400s_naming_the_element() {
    let kinds: Vec<&Kind> = KINDS
        .iter()
        .filter(|k| matches!(k.file, "u8" | "i8" | "i32" | "f16" | "bool") && k.onnx().is_file())
        .collect();
    let graphs: Vec<String> = kinds.iter().map(|k| k.graph("")).collect();
    let server = Server::start(&graphs, &[]);
    let cases = [
        (
            "u8",
            json!([0, 1, 2, 256]),
            "element 3 is `256`: outside UINT8's range 0..=255",
        ),
        (
            "i8",
            json!([-129, 0, 0, 0]),
            "element 0 is `-129`: outside INT8's range",
        ),
        (
            "i32",
            json!([1, 2.5, 0, 0]),
            "element 1 is `2.5`: not an integer literal",
        ),
        (
            "f16",
            json!([1, 2, 65520, 0]),
            "element 2 is `65520`: beyond FP16's largest finite value",
        ),
        (
            "bool",
            json!([true, 1, false, true]),
            "element 1 is `1`: not true or false",
        ),
    ];
    for (file, data, says) in cases {
        let k = KINDS.iter().find(|k| k.file == file).expect("known type");
        let body = request(k.oip, &[4], data).to_string();
        let (status, reply) = server.post(
            &format!("/v2/models/{}/infer", k.graph_name()),
            &[],
            body.as_bytes(),
        );
        assert_eq!(status, 400, "{file}: {reply}");
        assert!(
            reply.contains("inputs[0] (x).data") && reply.contains(says),
            "{file}: {reply}"
        );
    }
}

#[test]
fn every_datatype_through_a_json_lines_stream_matches_onnxruntime() {
    let kinds = available();
    let dir = temp_dir("dtypes-stream");
    let mut graphs = Vec::new();
    for (k, _) in &kinds {
        let lines: Vec<String> = k
            .requests()
            .into_iter()
            .map(|(id, mut r)| {
                r["id"] = json!(id);
                r.to_string()
            })
            .collect();
        std::fs::write(dir.0.join(format!("in_{}.jsonl", k.file)), lines.join("\n"))
            .expect("write requests");
        let streams = format!(
            "streams:\n  - jsonl: {{input: in_{0}.jsonl, output: out_{0}.jsonl}}\n",
            k.file
        );
        let path = dir.0.join(format!("{}.yaml", k.file));
        std::fs::write(&path, k.graph(&streams)).expect("write graph");
        graphs.push(path);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .args(&graphs)
        .current_dir(repo())
        .output()
        .expect("weir serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for (k, answers) in &kinds {
        let text = std::fs::read_to_string(dir.0.join(format!("out_{}.jsonl", k.file)))
            .expect("replies written");
        let replies: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert_eq!(replies.len(), answers.len(), "{}: {text}", k.oip);
        for reply in &replies {
            let id = reply["id"].as_str().expect("id");
            let what = format!("{} {id} through a stream", k.oip);
            assert!(reply.get("error").is_none(), "{what}: {reply}");
            assert_same_outputs(reply, &answers[id], &what);
        }
    }
}

/// A graph input that is a scalar (`s: []`, read by `argmax`, whose answer is always `[0]`):
/// sent as a bare JSON number, as a one-element array, as binary data (`tritonclient`), and as a
/// batch of three scalars (shape `[3]`, three rows).
#[test]
fn a_scalar_graph_input_in_json_binary_and_as_a_batch() {
    weir_home();
    let graph = "name: scalar\ninputs:\n  - {name: s, dtype: f32, shape: []}\nnodes:\n  - argmax: {id: a, input: s}\noutputs:\n  - {name: index, from: a.index}\n";
    let server = Server::start(&[graph.to_string()], &[]);
    let (_, meta) = server.get("/v2/models/scalar");
    let meta: Value = serde_json::from_str(&meta).expect("metadata is JSON");
    assert_eq!(meta["inputs"][0]["shape"], json!([-1]), "{meta}");
    let one =
        json!({"outputs": [{"name": "index", "datatype": "INT64", "shape": [1], "data": [0]}]});
    for (shape, data) in [(json!([]), json!(2.5)), (json!([]), json!([2.5]))] {
        let body =
            json!({"inputs": [{"name": "s", "datatype": "FP32", "shape": shape, "data": data}]});
        let (status, reply) =
            server.post("/v2/models/scalar/infer", &[], body.to_string().as_bytes());
        assert_eq!(status, 200, "{data}: {reply}");
        let reply: Value = serde_json::from_str(&reply).expect("reply is JSON");
        assert_same_outputs(&reply, &one, &format!("scalar {data} in JSON"));
    }
    let body =
        json!({"inputs": [{"name": "s", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]}]});
    let (status, reply) = server.post("/v2/models/scalar/infer", &[], body.to_string().as_bytes());
    assert_eq!(status, 200, "{reply}");
    let three = json!({"outputs": [{"name": "index", "datatype": "INT64", "shape": [3, 1], "data": [0, 0, 0]}]});
    assert_same_outputs(
        &serde_json::from_str(&reply).expect("JSON"),
        &three,
        "a batch of scalars",
    );
    let args = [
        "--url",
        &server.addr,
        "--model",
        "scalar",
        "--mode",
        "binary",
        "--outputs",
        "index",
    ];
    let scalar = json!({"inputs": [{"name": "s", "datatype": "FP32", "shape": [], "data": [2.5]}]});
    let (code, out, err) = python("dtype_client.py", &args, &scalar);
    assert_eq!(code, 0, "scalar in binary: {err}");
    let reply: Value = serde_json::from_str(&out).expect("the client writes JSON");
    assert_same_outputs(&reply, &one, "scalar in binary");
}

/// A model without a batch dimension whose second input is a scalar (`s: []`), asked with the
/// scalar as a bare JSON number, as a one-element array, and as binary data (`tritonclient`).
#[test]
fn a_scalar_input_in_json_and_binary() {
    weir_home();
    let onnx = model("unbatched_scale.onnx");
    let graph = format!(
        "name: scale\ninputs:\n  - {{name: x, dtype: f32, shape: [3, 4]}}\n  - {{name: s, dtype: f32, shape: []}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x, s: s}}, batch: false}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: total, from: m.total}}\n",
        onnx.display()
    );
    let server = Server::start(&[graph], &[]);
    let x: Vec<f32> = (0..12).map(|i| i as f32 / 4.0 - 1.0).collect();
    let with_scalar = |s: Value| {
        json!({"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [3, 4], "data": x},
            {"name": "s", "datatype": "FP32", "shape": [], "data": s},
        ]})
    };
    let want = reference(&onnx, &with_scalar(json!([2.5]))).expect("ONNX Runtime runs the model");
    assert_eq!(want["outputs"][1]["shape"], json!([]), "{want}");
    for s in [json!(2.5), json!([2.5])] {
        let body = with_scalar(s.clone()).to_string();
        let (status, reply) = server.post("/v2/models/scale/infer", &[], body.as_bytes());
        assert_eq!(status, 200, "s = {s}: {reply}");
        let reply: Value = serde_json::from_str(&reply).expect("reply is JSON");
        assert_same_outputs(&reply, &want, &format!("scalar {s} in JSON"));
    }
    // Binary, through Triton's client: the scalar is a numpy array of shape `()`.
    let args = [
        "--url",
        &server.addr,
        "--model",
        "scale",
        "--mode",
        "binary",
        "--outputs",
        "y,total",
    ];
    let (code, out, err) = python("dtype_client.py", &args, &with_scalar(json!([2.5])));
    assert_eq!(code, 0, "scalar in binary: {err}");
    let reply: Value = serde_json::from_str(&out).expect("the client writes JSON");
    assert_same_outputs(&reply, &want, "scalar in binary");
}
