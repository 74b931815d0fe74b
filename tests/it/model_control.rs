//! Model control of `weir serve --model-repository` through the real process: the repository
//! index, explicit loads, reloads under load (every request answered once, by id, while the
//! model's graphs are swapped), unloads, a configuration given as JSON, Triton's own clients over
//! gRPC and HTTP, `poll` mode following the repository's files, `none` mode refusing, and hostile
//! control requests refused by field with the server still serving.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::model;
use crate::serve::http;
use crate::triton_repository::{copy, get, infer, start_with, write, RepoServer};

fn post(s: &RepoServer, path: &str, body: &Value) -> (u16, Value) {
    let (code, reply) = http(&s.http, "POST", path, &[], body.to_string().as_bytes());
    (
        code,
        serde_json::from_str(&reply).unwrap_or(Value::String(reply)),
    )
}

/// The index rows of `model`: (version, state, reason).
fn rows(s: &RepoServer, model: &str) -> Vec<(String, String, String)> {
    let (code, index) = post(s, "/v2/repository/index", &json!({}));
    assert_eq!(code, 200, "{index}");
    index
        .as_array()
        .expect("an array")
        .iter()
        .filter(|e| e["name"] == model)
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
            (text("version"), text("state"), text("reason"))
        })
        .collect()
}

fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One digits request with an id: status and the id echoed.
fn infer_with_id(s: &RepoServer, id: &str) -> (u16, Value) {
    let data: Vec<f32> = (0..64).map(|i| (i % 17) as f32 / 16.0).collect();
    let body = json!({"id": id, "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 64], "data": data}]});
    post(s, "/v2/models/digits/infer", &body)
}

#[test]
fn explicit_mode_loads_reloads_under_load_and_unloads() {
    let s = start_with(&["--model-control-mode", "explicit", "--load-model", "digits"]);
    // Only what --load-model named serves; the index names every model of the repository.
    assert_eq!(
        rows(&s, "digits"),
        [
            ("1".into(), "READY".into(), String::new()),
            ("2".into(), "READY".into(), String::new())
        ]
    );
    assert_eq!(
        rows(&s, "ocr_cls"),
        [(String::new(), "UNAVAILABLE".into(), "not loaded".into())]
    );
    assert_eq!(get(&s, "/v2/models/ocr_cls").0, 404);
    let (code, ready) = post(&s, "/v2/repository/index", &json!({"ready": true}));
    assert_eq!(code, 200);
    assert!(ready
        .as_array()
        .expect("array")
        .iter()
        .all(|e| e["name"] == "digits"));

    // Load: served once the call returns.
    let (code, reply) = post(&s, "/v2/repository/models/ocr_cls/load", &json!({}));
    assert_eq!(code, 200, "{reply}");
    assert_eq!(get(&s, "/v2/models/ocr_cls/ready").0, 200);
    // A model whose configuration is bad is refused naming the field, and stays unavailable.
    let (code, reply) = post(&s, "/v2/repository/models/bad/load", &json!({}));
    assert_eq!(code, 400, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap_or("")
            .contains("not_a_field"),
        "{reply}"
    );
    assert_eq!(rows(&s, "bad")[0].1, "UNAVAILABLE");

    // Warm-up samples run on the version's session before it serves: `count` executions per
    // session while no client request was counted; a sample whose data file does not fill its tensor fails the load, naming the field and the
    // file.
    for (name, data) in [
        ("warm", "zero_data: true"),
        ("warm_bad", "input_data_file: \"short.bin\""),
    ] {
        copy(
            &model("digits_mlp.onnx"),
            &s.root.join(format!("{name}/1/model.onnx")),
        );
        write(&s.root.join(format!("{name}/warmup/short.bin")), "abc");
        write(
            &s.root.join(format!("{name}/config.pbtxt")),
            &format!(
                "max_batch_size: 8\nmodel_warmup [ {{ name: \"sample\" batch_size: 4 count: 2 inputs {{ key: \"x\" value: {{ data_type: TYPE_FP32 dims: [ 64 ] {data} }} }} }} ]\n"
            ),
        );
    }
    let (code, reply) = post(&s, "/v2/repository/models/warm/load", &json!({}));
    assert_eq!(code, 200, "{reply}");
    let (_, stats) = get(&s, "/v2/models/warm/stats");
    let st = &stats["model_stats"][0];
    // `count` 2 on each of the two sessions (Triton's default CPU instance count): four
    // executions, no request.
    assert_eq!(st["execution_count"], 4, "{stats}");
    assert_eq!(st["inference_stats"]["success"]["count"], 0, "{stats}");
    let (code, reply) = post(&s, "/v2/repository/models/warm_bad/load", &json!({}));
    assert_eq!(code, 400, "{reply}");
    let error = reply["error"].as_str().unwrap_or("");
    assert!(
        error.contains("model_warmup") && error.contains("short.bin"),
        "{reply}"
    );

    // Reloads while four clients keep sending: every request answered once, none failed.
    let answers: Mutex<Vec<(String, u16, Value)>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for client in 0..4 {
            let (s, answers, stop) = (&s, &answers, &stop);
            scope.spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Acquire) {
                    let id = format!("c{client}-{n}");
                    let (code, reply) = infer_with_id(s, &id);
                    answers.lock().expect("answers").push((id, code, reply));
                    n += 1;
                }
            });
        }
        for round in 0..3 {
            // The last round gives the configuration as JSON: one version only from then on.
            let body = if round == 2 {
                let config =
                    json!({"max_batch_size": 4, "version_policy": {"latest": {"num_versions": 1}}});
                json!({"parameters": {"config": config.to_string()}})
            } else {
                json!({})
            };
            let (code, reply) = post(&s, "/v2/repository/models/digits/load", &body);
            assert_eq!(code, 200, "reload {round}: {reply}");
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Release);
    });
    let answers = answers.into_inner().expect("answers");
    assert!(answers.len() > 20, "{} requests", answers.len());
    let mut ids: Vec<&str> = answers.iter().map(|(id, ..)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), answers.len(), "each request answered once");
    for (id, code, reply) in &answers {
        assert_eq!(*code, 200, "{id}: {reply}");
        assert_eq!(reply["id"], json!(id));
    }
    let (_, meta) = get(&s, "/v2/models/digits");
    assert_eq!(meta["versions"], json!(["2"]), "{meta}");
    let (_, config) = get(&s, "/v2/models/digits/config");
    assert_eq!(config["max_batch_size"], 4, "{config}");
    assert_eq!(infer(&s, "/v2/models/digits/infer", 3).0, 200);

    // Unload: refused at once, unavailable once its graphs stopped.
    let (code, reply) = post(&s, "/v2/repository/models/ocr_cls/unload", &json!({}));
    assert_eq!(code, 200, "{reply}");
    assert_eq!(get(&s, "/v2/models/ocr_cls/ready").0, 404);
    wait_until("ocr_cls unloaded", Duration::from_secs(30), || {
        rows(&s, "ocr_cls")
            .iter()
            .all(|(_, state, reason)| state == "UNAVAILABLE" && reason == "unloaded")
    });
    // Unloading what is not loaded does nothing; a model of no repository is not found.
    assert_eq!(
        post(&s, "/v2/repository/models/ocr_cls/unload", &json!({})).0,
        200
    );
    assert_eq!(
        post(&s, "/v2/repository/models/nothing/load", &json!({})).0,
        404
    );

    // Hostile control requests: each refused naming what is wrong, the server serving on.
    let cases: [(&str, Vec<u8>, u16, &str); 6] = [
        (
            "/v2/repository/models/..%2Fmodels%2Fdigits/load",
            b"{}".to_vec(),
            404,
            "no model",
        ),
        (
            "/v2/repository/models/digits/load",
            br#"{"parameters": {"file:1/model.onnx": "AAAA"}}"#.to_vec(),
            400,
            "file:1/model.onnx",
        ),
        (
            "/v2/repository/models/digits/load",
            br#"{"parameters": {"config": 3}}"#.to_vec(),
            400,
            "config",
        ),
        (
            "/v2/repository/models/digits/unload",
            br#"{"parameters": {"unload_dependents": "yes"}}"#.to_vec(),
            400,
            "unload_dependents",
        ),
        (
            "/v2/repository/models/digits/load",
            b"[1, 2".to_vec(),
            400,
            "not JSON",
        ),
        (
            "/v2/repository/models/digits/load",
            vec![b' '; 5 << 20],
            413,
            "bytes",
        ),
    ];
    for (path, body, status, named) in cases {
        let (code, reply) = http(&s.http, "POST", path, &[], &body);
        assert_eq!(code, status, "{path}: {reply}");
        assert!(reply.contains(named), "{path}: {reply}");
    }
    let (code, reply) = post(
        &s,
        "/v2/repository/models/digits/load",
        &json!({"parameters": {"config": "{\"max_batch_size\": \"many\"}"}}),
    );
    assert_eq!(code, 400, "{reply}");
    assert!(
        reply["error"].as_str().unwrap_or("").contains("config"),
        "{reply}"
    );
    // The failed reload left digits serving.
    assert_eq!(infer(&s, "/v2/models/digits/infer", 2).0, 200);
    assert!(rows(&s, "digits")
        .iter()
        .all(|(_, state, _)| state == "READY"));

    // Triton's own clients, over gRPC and HTTP.
    let (code, out, err) = crate::reference::python(
        "repository_client.py",
        &["--grpc", &s.grpc, "--http", &s.http, "--model", "digits"],
        &json!(null),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let seen: Value = serde_json::from_str(out.trim()).expect("one JSON line");
    for client in ["grpc", "http"] {
        let index = seen[client]["index"].as_array().expect("an index");
        assert!(
            index
                .iter()
                .any(|e| e["name"] == "digits" && e["state"] == "READY"),
            "{client}: {seen}"
        );
        assert_eq!(seen[client]["versions"], json!(["2"]), "{client}: {seen}");
    }
}

#[test]
fn poll_mode_follows_the_repository_and_none_mode_refuses_loads() {
    let s = start_with(&[
        "--model-control-mode",
        "poll",
        "--repository-poll-secs",
        "1",
    ]);
    assert_eq!(get(&s, "/v2/models/ocr_cls/ready").0, 200);
    // Loads and unloads through the API are refused in poll mode.
    let (code, reply) = post(&s, "/v2/repository/models/ocr_cls/unload", &json!({}));
    assert_eq!(code, 403, "{reply}");
    // A new model folder is loaded.
    copy(
        &model("digits_mlp.onnx"),
        &s.root.join("fresh/1/model.onnx"),
    );
    wait_until("fresh loaded", Duration::from_secs(30), || {
        get(&s, "/v2/models/fresh/ready").0 == 200
    });
    // A changed configuration reloads the model.
    write(
        &s.root.join("digits/config.pbtxt"),
        "name: \"digits\"\nmax_batch_size: 8\nversion_policy: { specific { versions: [1] } }\n",
    );
    wait_until("digits reloaded", Duration::from_secs(30), || {
        get(&s, "/v2/models/digits").1["versions"] == json!(["1"])
    });
    // A removed folder is unloaded.
    std::fs::remove_dir_all(s.root.join("ocr_cls")).expect("removed");
    wait_until("ocr_cls unloaded", Duration::from_secs(30), || {
        get(&s, "/v2/models/ocr_cls/ready").0 == 404
    });
    assert_eq!(infer(&s, "/v2/models/digits/infer", 2).0, 200);
    drop(s);

    let s = start_with(&[]);
    let (code, reply) = post(&s, "/v2/repository/models/digits/load", &json!({}));
    assert_eq!(code, 403, "{reply}");
    assert!(
        reply["error"].as_str().unwrap_or("").contains("explicit"),
        "{reply}"
    );
    assert_eq!(rows(&s, "digits").len(), 2);
}
