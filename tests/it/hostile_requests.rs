//! Bad and hostile request bodies against a real `weir serve`. Each kind of malformed request
//! (bad JSON, unknown model, input or output, wrong datatype or shape, data not matching its
//! shape, binary sizes that do not add up, a body over the limit) gets its status and a JSON
//! error naming what is wrong, and the server answers the next good request. Shape bombs
//! (dimensions whose product is 0, wraps or overflows), zero-row batches, batches over the
//! in-flight limit, a 20 MB nested `data`, 1 MB of parameters on 1,000 rows, 5 MB names: each gets
//! a 4xx naming the field, an error body under the cap, the server stays ready and answers a
//! normal request, and its resident memory grows by no more than a small multiple of the hostile
//! body. Boxes a client sends to a fan-out: ones that do not fit get a 4xx naming them,
//! non-finite ones are dropped, and 20,000 make no more parts than the node's bound. A JSON-lines
//! stream fed a shape bomb answers it with an error document and the next line with a reply.

use rstest::rstest;
use serde_json::Value;

use crate::common::{temp_dir, weir_home};
use crate::serve::{mlp_graph, mlp_request, Server, INFER};
use crate::streams::graph_with_stream;

/// Error bodies are capped at 4096 bytes of text; JSON quoting adds a little.
const ERROR_BODY_MAX: usize = 4096 + 64;

/// The graph's in-flight limit for these tests: rows beyond it are refused.
const MAX_IN_FLIGHT: usize = 1000;

/// Resident memory of process `pid`, in KiB, from `/proc/<pid>/status`.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

fn body(shape: &str, data: &str) -> String {
    format!(r#"{{"inputs":[{{"name":"x","shape":{shape},"datatype":"FP32","data":{data}}}]}}"#)
}

fn values(n: usize) -> String {
    format!("[{}]", vec!["0.25"; n].join(","))
}

/// Posts `hostile`, checks the 4xx, the field named and the error's size, then that the server
/// still answers a good request; returns the RSS growth in KiB.
fn refused(server: &Server, hostile: &[u8], field: &str) -> u64 {
    let before = rss_kib(server.pid());
    let (status, reply) = server.post(INFER, &[], hostile);
    assert!((400..500).contains(&status), "{status}: {reply:.300}");
    assert!(
        reply.len() <= ERROR_BODY_MAX,
        "error body of {} bytes",
        reply.len()
    );
    let json: Value = serde_json::from_str(&reply).expect("error body is JSON");
    let error = json["error"].as_str().expect("error text");
    assert!(
        error.starts_with(field),
        "expected `{field}` in `{error:.300}`"
    );
    assert_eq!(server.get("/v2/health/ready").0, 200, "still ready");
    let (status, good) = server.post_good(&[]);
    assert_eq!(status, 200, "{good}");
    let good: Value = serde_json::from_str(&good).expect("reply JSON");
    assert_eq!(good["outputs"][0]["shape"], serde_json::json!([10]));
    rss_kib(server.pid()).saturating_sub(before)
}

#[test]
fn hostile_bodies_get_a_4xx_naming_the_field_and_the_server_stays_up() {
    let max = MAX_IN_FLIGHT.to_string();
    let server = Server::start(&[mlp_graph()], &["--max-in-flight", &max]);
    let shape = "inputs[0] (x).shape";
    for (shape_text, data) in [
        ("[1099511627776,0]", "[]".to_string()),
        ("[288230376151711745,64]", values(64)),
        ("[4611686018427387904,0]", "[]".to_string()),
        ("[18446744073709551615,64]", values(64)),
        ("[0,64]", "[]".to_string()),
        ("[2,0]", "[[],[]]".to_string()),
        ("[1001,64]", values(1001 * 64)),
    ] {
        refused(&server, body(shape_text, &data).as_bytes(), shape);
    }
    // A batch of 0 rows whose row shape the data could carry, and zero-size rows.
    let zero_rows = body("[0,64]", &format!("[{}]", " ".repeat(128)));
    refused(&server, zero_rows.as_bytes(), shape);
}

#[test]
fn oversized_text_and_nesting_stay_bounded() {
    let max = MAX_IN_FLIGHT.to_string();
    let server = Server::start(&[mlp_graph()], &["--max-in-flight", &max]);
    let kib = |bytes: usize| (bytes / 1024) as u64;

    // 20 MB of nested data against a 64-element shape: refused at element 65, no tree built.
    let nested = format!("[{}]", vec!["[0,0,0,0]"; 2 << 20].join(","));
    let hostile = body("[1,64]", &nested);
    assert!(hostile.len() > 20 << 20);
    let grown = refused(&server, hostile.as_bytes(), "inputs[0] (x).data");
    assert!(grown < 4 * kib(hostile.len()), "RSS grew {grown} KiB");

    // Parameters on a 1,000-row batch: 1 MB (over their own cap), and 60 KiB (under it, but
    // past the request's size once multiplied by the rows). Refused, never copied per row.
    for parameter_bytes in [1 << 20, 60 << 10] {
        let params = format!(r#"{{"p":"{}"}}"#, "v".repeat(parameter_bytes));
        let hostile = format!(
            r#"{{"parameters":{params},"inputs":[{{"name":"x","shape":[1000,64],"datatype":"FP32","data":{}}}]}}"#,
            values(64_000)
        );
        let grown = refused(&server, hostile.as_bytes(), "parameters");
        assert!(grown < 4 * kib(hostile.len()), "RSS grew {grown} KiB");
    }

    // 5 MB names and datatypes are quoted short.
    let long = "n".repeat(5 << 20);
    let hostile = format!(
        r#"{{"inputs":[{{"name":"{long}","shape":[64],"datatype":"FP32","data":{}}}]}}"#,
        values(64)
    );
    let grown = refused(&server, hostile.as_bytes(), "inputs[0] (nnn");
    assert!(grown < 4 * kib(hostile.len()), "RSS grew {grown} KiB");
    let hostile = format!(
        r#"{{"inputs":[{{"name":"x","shape":[64],"datatype":"{long}","data":{}}}]}}"#,
        values(64)
    );
    refused(&server, hostile.as_bytes(), "inputs[0] (x).datatype");

    // Parameters of a few rows are still carried through and echoed.
    let ok = format!(
        r#"{{"parameters":{{"slo_ms":5}},"inputs":[{{"name":"x","shape":[3,64],"datatype":"FP32","data":{}}}]}}"#,
        values(192)
    );
    let (status, reply) = server.post(INFER, &[], ok.as_bytes());
    assert_eq!(status, 200, "{reply}");
    let reply: Value = serde_json::from_str(&reply).expect("reply JSON");
    assert_eq!(reply["parameters"]["slo_ms"], 5);
    assert_eq!(reply["outputs"][0]["shape"], serde_json::json!([3, 10]));
}

#[test]
fn a_jsonl_stream_answers_a_shape_bomb_with_an_error_and_goes_on() {
    weir_home();
    let dir = temp_dir("hostile-jsonl");
    let bomb = r#"{"id":"bomb","inputs":[{"name":"x","shape":[1099511627776,0],"datatype":"FP32","data":[]}]}"#;
    let good = format!(
        r#"{{"id":"good","inputs":[{{"name":"x","shape":[64],"datatype":"FP32","data":{}}}]}}"#,
        values(64)
    );
    std::fs::write(dir.0.join("in.jsonl"), format!("{bomb}\n{good}\n")).expect("write input");
    let graph = dir.0.join("g.yaml");
    std::fs::write(
        &graph,
        graph_with_stream("jsonl: {input: in.jsonl, output: out.jsonl}"),
    )
    .expect("write graph");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg(&graph)
        .current_dir(crate::common::repo())
        .output()
        .expect("weir serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = std::fs::read_to_string(dir.0.join("out.jsonl")).expect("output written");
    let replies: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(replies.len(), 2, "{text:.500}");
    let by_id = |id: &str| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply for {id}"))
    };
    let error = by_id("bomb")["error"].as_str().expect("error document");
    assert!(error.starts_with("inputs[0] (x).shape"), "{error}");
    assert_eq!(
        by_id("good")["outputs"][0]["shape"],
        serde_json::json!([10])
    );
}

/// A request body for the boxes graph: a 6×8 one-channel image, `boxes` and `scores` as JSON.
fn boxes_request(boxes: &[[f32; 4]], scores: &[f32]) -> Vec<u8> {
    let num = |v: f32| {
        if v.is_finite() {
            v.to_string()
        } else {
            format!("\"{v}\"").replace("inf", "Infinity")
        }
    };
    let flat: Vec<String> = boxes.iter().flatten().map(|&v| num(v)).collect();
    let scores: Vec<String> = scores.iter().map(|&v| num(v)).collect();
    format!(
        r#"{{"inputs":[{{"name":"image","shape":[6,8,1],"datatype":"UINT8","data":[{}]}},{{"name":"boxes","shape":[{},4],"datatype":"FP32","data":[{}]}},{{"name":"scores","shape":[{}],"datatype":"FP32","data":[{}]}}]}}"#,
        vec!["7"; 48].join(","),
        boxes.len(),
        flat.join(","),
        scores.len(),
        scores.join(",")
    )
    .into_bytes()
}

#[test]
fn boxes_a_client_sends_are_checked_through_weir_serve() {
    let graph = "name: boxes\n\
inputs:\n  - {name: image, dtype: u8, shape: [-1, -1, 1]}\n  - {name: boxes, dtype: f32, shape: [-1, 4]}\n  - {name: scores, dtype: f32, shape: [-1]}\n\
nodes:\n\
  - crop_boxes: {id: crops, image: image, boxes: boxes, scores: scores, height: 2, width: 2, interpolation: nearest, min_score: 0.5, max_boxes: 4}\n\
  - gather: {id: all, inputs: {crops: crops.image}}\n\
outputs:\n  - {name: crops, from: all.crops}\n  - {name: count, from: all.count}\n"
        .to_string();
    let server = Server::start(&[graph], &[]);
    let infer = "/v2/models/boxes/infer";
    let count_of = |reply: &str| -> serde_json::Value {
        let json: serde_json::Value = serde_json::from_str(reply).expect("reply JSON");
        json["outputs"]
            .as_array()
            .and_then(|o| o.iter().find(|t| t["name"] == "count"))
            .map(|t| t["data"][0].clone())
            .unwrap_or_default()
    };
    // Scores that do not match the boxes: a 400 naming the boxes.
    let (status, reply) = server.post(
        infer,
        &[],
        &boxes_request(&[[0.0, 0.0, 2.0, 2.0]; 2], &[0.9, 0.9, 0.9]),
    );
    assert_eq!(status, 400, "{reply}");
    assert!(reply.contains("inputs.boxes"), "{reply}");
    assert!(reply.contains("2 boxes but scores of shape [3]"), "{reply}");
    // Non-finite coordinates and scores are dropped: no part, a valid answer.
    let nan = [f32::NAN, 0.0, 2.0, 2.0];
    let inf = [0.0, 0.0, f32::INFINITY, 2.0];
    let (status, reply) = server.post(
        infer,
        &[],
        &boxes_request(&[nan, inf, inf], &[0.9, 0.9, f32::NAN]),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(count_of(&reply), serde_json::json!(0));
    // Twenty thousand boxes: at most `max_boxes` parts.
    let many = vec![[1.0, 1.0, 3.0, 3.0]; 20_000];
    let (status, reply) = server.post(infer, &[], &boxes_request(&many, &vec![1.0; 20_000]));
    assert_eq!(status, 200, "{reply:.300}");
    assert_eq!(count_of(&reply), serde_json::json!(4));
    // Still ready, and a good request is answered.
    assert_eq!(server.get("/v2/health/ready").0, 200);
    let (status, reply) = server.post(infer, &[], &boxes_request(&[[0.0, 0.0, 2.0, 2.0]], &[0.9]));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(count_of(&reply), serde_json::json!(1));
}

/// The header of a binary request announcing 256 bytes of `x`.
const BINARY_HEADER: &[u8] = br#"{"inputs":[{"name":"x","shape":[64],"datatype":"FP32","parameters":{"binary_data_size":256}}]}"#;

/// A JSON request whose `x` holds 64 ones of `datatype`, with `tail` after the inputs.
fn ones(datatype: &str, tail: &str) -> Vec<u8> {
    format!(
        r#"{{"inputs":[{{"name":"x","shape":[64],"datatype":"{datatype}","data":[{}]}}]{tail}}}"#,
        vec!["1"; 64].join(",")
    )
    .into_bytes()
}

/// One bad request to a fresh mlp server (started with `extra`) gets `status` with a JSON error
/// naming `needle`, and the server stays ready and keeps answering good requests.
#[rstest]
#[case::bad_json_is_400(INFER, vec![], b"{\"inputs\": [".to_vec(), 400, "invalid JSON", &[])]
#[case::unknown_model_is_404(
    "/v2/models/nope/infer",
    vec![],
    mlp_request(64, "[64]", "FP32"),
    404,
    "unknown model `nope`",
    &[]
)]
#[case::unknown_input_is_400(
    INFER,
    vec![],
    br#"{"inputs":[{"name":"y","shape":[1],"datatype":"FP32","data":[1]}]}"#.to_vec(),
    400,
    "has no input `y`",
    &[]
)]
#[case::missing_input_is_400(
    INFER,
    vec![],
    br#"{"inputs":[]}"#.to_vec(),
    400,
    "missing input `x`",
    &[]
)]
#[case::wrong_datatype_is_400(INFER, vec![], ones("INT64", ""), 400, "expected f32, got i64", &[])]
#[case::sequence_of_two_rows_is_400(
    INFER,
    vec![],
    format!(
        r#"{{"inputs":[{{"name":"x","shape":[2,64],"datatype":"FP32","data":[{}]}}],"parameters":{{"sequence_id":7}}}}"#,
        vec!["1"; 128].join(",")
    )
    .into_bytes(),
    400,
    "a request of a sequence carries one row, not 2",
    &[]
)]
#[case::unknown_datatype_is_400(
    INFER,
    vec![],
    br#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP8","data":[1]}]}"#.to_vec(),
    400,
    "unknown datatype `FP8`",
    &[]
)]
#[case::wrong_shape_is_400(
    INFER,
    vec![],
    mlp_request(63, "[63]", "FP32"),
    400,
    "inputs.x.shape: expected [64], got [63]",
    &[]
)]
#[case::data_not_matching_shape_is_400(
    INFER,
    vec![],
    mlp_request(10, "[64]", "FP32"),
    400,
    "shape [64] needs 64 elements, got 10",
    &[]
)]
#[case::negative_dimension_is_400(
    INFER,
    vec![],
    mlp_request(64, "[-64]", "FP32"),
    400,
    "dimension -64 is negative",
    &[]
)]
#[case::body_over_the_limit_is_413(
    INFER,
    vec![],
    mlp_request(400, "[400]", "FP32"),
    413,
    "body over the limit of 1000 bytes",
    &["--max-body-bytes", "1000"]
)]
#[case::unknown_output_is_400(
    INFER,
    vec![],
    ones("FP32", r#","outputs":[{"name":"logits"}]"#),
    400,
    "has no output `logits`",
    &[]
)]
#[case::binary_sizes_that_do_not_add_up_are_400(
    INFER,
    vec![("Inference-Header-Content-Length", BINARY_HEADER.len().to_string())],
    [BINARY_HEADER, &[0u8; 100]].concat(),
    400,
    "only 100 binary bytes remain",
    &[]
)]
fn a_bad_request_is_refused_and_serving_continues(
    #[case] path: &str,
    #[case] headers: Vec<(&str, String)>,
    #[case] body: Vec<u8>,
    #[case] status: u16,
    #[case] needle: &str,
    #[case] extra: &[&str],
) {
    let server = Server::start(&[mlp_graph()], extra);
    let (got, text) = server.post(path, &headers, &body);
    assert_eq!(got, status, "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let message = json["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no `error` field: {text}"));
    assert!(
        message.contains(needle),
        "`{message}` does not mention `{needle}`"
    );
    assert_eq!(server.get("/v2/health/ready").0, 200);
    let (ok, text) = server.post_good(&[]);
    assert_eq!(ok, 200, "a good request after a bad one: {text}");
}
