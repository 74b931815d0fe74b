//! Model-less queries through a real `weir serve --repository` (the INFaaS paper's query modes,
//! §3.1, and its variant selection, §4.1, with the cold start of a variant not yet loaded): the
//! digits architectures registered with the real `weir model register`, then queries that name
//! the task and their requirements. The variant each picks is checked against the repository's own
//! figures (the same the server decides on), its outputs against ONNX Runtime on that variant's
//! file, the first use of a variant is a cold start and the next is not, an explicit variant is
//! served as named, and impossible or malformed requirements are 400s naming the closest variant
//! or the field.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use weir_infaas::repository::Repository;
use weir_infaas::variant::{GraphLevel, Variant};

use crate::common::{assert_close, direct_ort, temp_dir, TempDir};
use crate::serve::Server;

pub(crate) const ARCHITECTURES: [&str; 3] = ["digits_tiny", "digits_mlp", "digits_wide"];

fn register(root: &Path) {
    for name in ARCHITECTURES {
        let out = crate::model_repository::register(name, root, &["--no-int8"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// What the server may choose from: the variants of the local type (batch-specialised builds
/// too, padded to their batch).
fn servable(repo: &Repository) -> Vec<Variant> {
    repo.variants_of_task("digits")
        .filter(|v| v.config.hardware == "local")
        .cloned()
        .collect()
}

/// The paper's pick among variants that must be loaded: least load + inference time (§4.1).
pub(crate) fn cold_pick(candidates: &[Variant], min_accuracy: f64) -> String {
    candidates
        .iter()
        .filter(|v| v.accuracy >= min_accuracy)
        .min_by(|a, b| {
            let cost =
                |v: &Variant| v.profile.load_ms + v.profile.inference_ms(1).unwrap_or(f64::MAX);
            cost(a)
                .total_cmp(&cost(b))
                .then_with(|| a.name.cmp(&b.name))
        })
        .expect("a candidate")
        .name
        .clone()
}

pub(crate) const PIXELS: [f32; 64] = {
    let mut p = [0.0f32; 64];
    let mut i = 0;
    while i < 64 {
        p[i] = ((i * 7) % 17) as f32 / 16.0;
        i += 1;
    }
    p
};

fn query(server: &Server, model: &str, parameters: Value) -> (u16, Value) {
    query_at(&server.addr, model, parameters)
}

/// One JSON infer request of [`PIXELS`] to `model` over HTTP at `addr`: status and reply.
pub(crate) fn query_at(addr: &str, model: &str, parameters: Value) -> (u16, Value) {
    query_as(addr, model, "q", parameters)
}

/// [`query_at`] with the request id `id`.
pub(crate) fn query_as(addr: &str, model: &str, id: &str, parameters: Value) -> (u16, Value) {
    let body = json!({"id": id, "parameters": parameters,
        "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": PIXELS.to_vec()}]});
    let (status, text) = crate::serve::http(
        addr,
        "POST",
        &format!("/v2/models/{model}/infer"),
        &[],
        body.to_string().as_bytes(),
    );
    (
        status,
        serde_json::from_str(&text).unwrap_or(json!({"raw": text})),
    )
}

/// The digits family registered into a temporary repository, and what a server may pick from.
pub(crate) struct Registered {
    pub(crate) dir: TempDir,
    pub(crate) root: PathBuf,
    pub(crate) repo: Repository,
    pub(crate) candidates: Vec<Variant>,
}

impl Registered {
    pub(crate) fn new(tag: &str) -> Registered {
        let dir = temp_dir(tag);
        let root = dir.0.join("repository");
        register(&root);
        let repo = Repository::open(&root).expect("repository");
        let candidates = servable(&repo);
        Registered {
            dir,
            root,
            repo,
            candidates,
        }
    }
}

/// The file of `v`'s weights with a dynamic batch (a batch-specialised build takes only its
/// batch), for running one row through ONNX Runtime directly.
pub(crate) fn dynamic_file(repo: &Repository, candidates: &[Variant], v: &Variant) -> PathBuf {
    let twin = candidates
        .iter()
        .find(|c| {
            c.model == v.model
                && c.config.precision == v.config.precision
                && c.config.fixed_batch.is_none()
        })
        .expect("a dynamic build of the chosen architecture");
    repo.file_path(twin).expect("its file")
}

/// The name of the tiny architecture's fully optimised variant.
pub(crate) fn tiny(candidates: &[Variant]) -> String {
    candidates
        .iter()
        .find(|v| v.model == "digits_tiny" && v.config.graph_level == GraphLevel::All)
        .expect("tiny")
        .name
        .clone()
}

/// A JSON array of numbers as `f32`s.
pub(crate) fn floats_of(data: &Value) -> Vec<f32> {
    data.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

pub(crate) fn served_variant(reply: &Value) -> (String, bool) {
    (
        reply["parameters"]["variant"]
            .as_str()
            .expect("variant in the reply")
            .to_string(),
        reply["parameters"]["cold_start"]
            .as_bool()
            .expect("cold_start in the reply"),
    )
}

#[test]
fn tasks_pick_variants_by_requirement_load_them_once_and_refuse_what_cannot_be_met() {
    let Registered {
        dir,
        root,
        repo,
        candidates,
    } = Registered::new("modelless-serve");
    for arch in ARCHITECTURES {
        assert!(
            candidates.iter().any(|v| v.model == arch),
            "{arch} has a servable variant"
        );
    }
    let jobs = dir.0.join("jobs");
    std::fs::create_dir_all(&jobs).expect("jobs folder");
    let lines: Vec<String> = (0..40)
        .map(|i| {
            json!({"id": format!("o{i}"), "inputs": [{"name": "x", "shape": [1, 64],
                   "datatype": "FP32", "data": PIXELS.to_vec()}]})
            .to_string()
        })
        .collect();
    std::fs::write(jobs.join("in.jsonl"), lines.join("\n")).expect("job input");
    let server = Server::start(
        &[],
        &[
            "--repository",
            &root.display().to_string(),
            "--offline-dir",
            &jobs.display().to_string(),
            "--offline-max-utilisation",
            "1",
        ],
    );

    // Loose: nothing is loaded, so the least load + inference time wins (§4.1), cold.
    let (status, reply) = query(&server, "digits", json!({"min_accuracy": 0.5}));
    assert_eq!(status, 200, "{reply}");
    let (loose, cold) = served_variant(&reply);
    assert_eq!(loose, cold_pick(&candidates, 0.5));
    assert!(cold, "the first query of a variant is a cold start");
    let v = repo.variant(&loose).expect("chosen variant is registered");
    let want = direct_ort(&dynamic_file(&repo, &candidates, v), "x", &[1, 64], &PIXELS);
    let got = floats_of(&reply["outputs"][0]["data"]);
    assert_close(&got, &want, 1e-5, "the chosen variant's outputs");

    // Tight: only architectures at 0.98 or better qualify (the accuracy asked is a minimum).
    let (status, reply) = query(&server, "digits", json!({"min_accuracy": 0.98}));
    assert_eq!(status, 200, "{reply}");
    let (tight, _) = served_variant(&reply);
    assert!(repo.variant(&tight).expect("registered").accuracy >= 0.98);
    if repo.variant(&loose).expect("registered").accuracy < 0.98 {
        assert_ne!(
            tight, loose,
            "an accuracy change selects another architecture"
        );
        assert_eq!(tight, cold_pick(&candidates, 0.98));
    }
    // Once loaded it is Active and preferred (§4.1), and warm: no second cold start.
    let (status, reply) = query(&server, "digits", json!({"min_accuracy": 0.98}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(served_variant(&reply), (tight.clone(), false));

    // Explicit: as a parameter of the task, and as the model's name (the explicit mode of §3.1).
    let tiny = tiny(&candidates);
    let (status, reply) = query(&server, "digits", json!({"variant": tiny}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(served_variant(&reply).0, tiny);
    let (status, reply) = query(&server, &tiny, json!({}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(served_variant(&reply).0, tiny);

    // A batch-specialised build takes its batch only: three rows run padded to eight, and each
    // row's outputs are the dynamic build's.
    let fixed = candidates
        .iter()
        .find(|v| v.model == "digits_mlp" && v.config.fixed_batch == Some(8))
        .expect("a batch-8 build");
    let dynamic = candidates
        .iter()
        .find(|v| v.model == "digits_mlp" && v.config.fixed_batch.is_none())
        .expect("a dynamic build");
    let rows: Vec<f32> = (0..3)
        .flat_map(|r| PIXELS.iter().map(move |p| p * (r as f32 + 1.0) / 3.0))
        .collect();
    let body =
        json!({"inputs": [{"name": "x", "shape": [3, 64], "datatype": "FP32", "data": rows}]});
    let (status, text) = server.post(
        &format!("/v2/models/{}/infer", fixed.name),
        &[],
        body.to_string().as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("reply");
    assert_eq!(reply["outputs"][0]["shape"], json!([3, 10]), "{reply}");
    let got = floats_of(&reply["outputs"][0]["data"]);
    let want = direct_ort(
        &repo.file_path(dynamic).expect("file"),
        "x",
        &[3, 64],
        &rows,
    );
    assert_close(&got, &want, 1e-5, "a padded batch-8 call's rows");

    // Impossible requirements: a 400 naming the closest variant (§4.1).
    let (status, reply) = query(&server, "digits", json!({"min_accuracy": 0.9999}));
    assert_eq!(status, 400, "{reply}");
    let message = reply["error"].as_str().expect("error text");
    assert!(message.contains("closest variant: digits_"), "{message}");
    let (status, reply) = query(&server, "digits", json!({"latency_ms": 0.000001}));
    assert_eq!(status, 400, "{reply}");

    // Malformed requirements name their field.
    for (parameters, field) in [
        (json!({"min_accuracy": "high"}), "parameters.min_accuracy"),
        (json!({"latency_ms": -3}), "parameters.latency_ms"),
        (json!({"variant": "nope"}), "parameters.variant"),
        (json!({"variant": 7}), "parameters.variant"),
    ] {
        let (status, reply) = query(&server, "digits", parameters.clone());
        assert_eq!(status, 400, "{parameters} → {reply}");
        let message = reply["error"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{parameters} → {message}");
    }
    assert_eq!(
        server.get("/v2/models/nothing/infer").0,
        405,
        "GET is not infer"
    );
    let (status, _) = query(&server, "nothing", json!({}));
    assert_eq!(status, 404);

    // An offline job on the task (`offline_query`, §3.1): its parameters pick the variant of every
    // line.
    let submit = json!({"model": "digits", "input": "in.jsonl", "output": "out.jsonl",
                        "parameters": {"min_accuracy": 0.98}});
    let (status, text) = server.post("/v2/offline", &[], submit.to_string().as_bytes());
    assert_eq!(status, 202, "{text}");
    let id = serde_json::from_str::<Value>(&text).expect("job")["id"]
        .as_str()
        .expect("job id")
        .to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, status) = server.get(&format!("/v2/offline/{id}"));
        let status: Value = serde_json::from_str(&status).expect("status");
        if status["state"] == "done" {
            assert_eq!(status["answered"], 40);
            assert_eq!(status["errors"], 0);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "job never finished: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = std::fs::read_to_string(jobs.join("out.jsonl")).expect("job output");
    assert_eq!(out.lines().count(), 40);
    for line in out.lines() {
        let reply: Value = serde_json::from_str(line).expect("reply");
        let variant = reply["parameters"]["variant"].as_str().expect("variant");
        assert!(repo.variant(variant).expect("registered").accuracy >= 0.98);
    }

    // Decisions and states are in /metrics.
    let (_, metrics) = server.get("/metrics");
    assert!(metrics.contains("weir_infaas_decisions_total"), "{metrics}");
    assert!(metrics.contains("weir_infaas_instances"), "{metrics}");
}

/// A batch-specialised build is a graph node only where the node states its batch
/// (`batching: {fixed_size: 8}`): left unstated, or stated wrong, the graph is refused naming the
/// field; stated, the node is planned as batched calls padded to eight (and at the graph
/// optimisation level the node names).
#[test]
fn a_fixed_batch_model_is_a_node_only_when_its_batch_is_stated() {
    let dir = temp_dir("modelless-fixed");
    let root = dir.0.join("repository");
    let out = crate::model_repository::register("digits_mlp", &root, &["--no-int8"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let repo = Repository::open(&root).expect("repository");
    let fixed = repo
        .variants_of_task("digits")
        .find(|v| v.config.fixed_batch == Some(8))
        .expect("a batch-8 build");
    let file = repo.file_path(fixed).expect("its file");
    let graph = |batching: &str| {
        format!(
            "name: fixed\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: m, path: {:?}, inputs: {{x: x}}, batching: {batching}, executor: {{graph_optimization: basic}}}}\noutputs:\n  - {{name: y, from: m.{}}}\n",
            file.display().to_string(),
            weir_engine::onnx::read_metadata(&file).expect("metadata").outputs[0].name
        )
    };
    let plan = |batching: &str| {
        let spec = weir::GraphSpec::from_yaml(&graph(batching), "fixed.yaml").expect("parses");
        weir::plan_spec(&spec, &dir.0)
    };
    let unstated = plan("{max_size: 8}").expect_err("a fixed batch is not inferred");
    assert!(unstated.to_string().contains("fixed_size: 8"), "{unstated}");
    let wrong = plan("{max_size: 8, fixed_size: 4}").expect_err("the wrong batch");
    assert!(wrong.to_string().contains("batching.fixed_size"), "{wrong}");
    let planned = plan("{max_size: 8, fixed_size: 8}").expect("stated").plan;
    let described = planned.describe();
    assert!(
        described.contains("padded to its fixed batch of 8"),
        "{described}"
    );
    assert!(
        described.contains("graph optimisation basic"),
        "{described}"
    );
}

/// A graph's model node that names a task (`task: {name: digits, min_accuracy: …}`) runs the
/// variant the selection policy picks for it from `--repository`, with that variant's outputs; a
/// requirement no variant meets, an unknown task, a node with both a file and a task, and a task
/// node without a repository are refused at start, naming the node.
#[test]
fn a_task_node_runs_the_variant_the_policy_picks_and_bad_ones_are_refused_naming_the_node() {
    let r = Registered::new("task-node");
    let yaml = |task: &str, extra: &str| {
        format!(
            "name: classify\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {{id: digits_node, task: {task}, inputs: {{x: x}}{extra}}}\n  - argmax: {{id: label, input: digits_node.probs}}\noutputs:\n  - {{name: probs, from: digits_node.probs}}\n  - {{name: label, from: label}}\n"
        )
    };
    let graph = |task: &str, extra: &str| {
        let path = r.dir.0.join(format!("g{}.yaml", task.len() + extra.len()));
        std::fs::write(&path, yaml(task, extra)).expect("graph");
        path.display().to_string()
    };
    let root = r.root.display().to_string();

    let accurate = yaml("{name: digits, min_accuracy: 0.98}", "");
    let server = Server::start(&[accurate], &["--repository", &root]);
    let (status, text) = server.post(
        "/v2/models/classify/infer",
        &[],
        json!({"inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": PIXELS.to_vec()}]})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("reply");
    let pick = cold_pick(&r.candidates, 0.98);
    let chosen = r.repo.variant(&pick).expect("registered");
    assert!(chosen.accuracy >= 0.98, "{pick}");
    let probs = reply["outputs"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["name"] == "probs"))
        .expect("probs");
    let want = direct_ort(
        &dynamic_file(&r.repo, &r.candidates, chosen),
        "x",
        &[1, 64],
        &PIXELS,
    );
    assert_close(
        &floats_of(&probs["data"]),
        &want,
        1e-5,
        "the task node's outputs",
    );
    drop(server);

    for (task, extra, names) in [
        (
            "{name: digits, min_accuracy: 0.9999}",
            "",
            "closest variant: digits_",
        ),
        ("nothing", "", "task `nothing`"),
        ("digits", ", path: x.onnx", "both `path:` and `task:`"),
        ("{name: digits, min_accuracy: 3}", "", "task.min_accuracy"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "serve",
                &graph(task, extra),
                "--repository",
                &root,
                "--http",
                "127.0.0.1:0",
            ])
            .output()
            .expect("weir serve runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{task}: started");
        assert!(
            stderr.contains("nodes.digits_node.task"),
            "{task}: {stderr}"
        );
        assert!(stderr.contains(names), "{task}: {stderr}");
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", &graph("digits", ""), "--http", "127.0.0.1:0"])
        .output()
        .expect("weir serve runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--repository"), "{stderr}");
}
