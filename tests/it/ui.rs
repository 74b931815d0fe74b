//! The dashboard and its status feed on a real `weir serve`: the feed's JSON and event stream
//! (bounded subscribers, behind the token, off with `--no-ui`), and `/ui` in headless Chromium
//! (Debian's chromium and chromium-driver, driven by selenium from the set-up venv through
//! tests/python/ui_check.py): no console errors, every node on the page, figures moving under
//! load, a SIGKILLed remote executor shown down within two seconds, the model-less repository's
//! page, a HAMS failover's new primary, a request's path drawn as a timeline of its hops, and a
//! fan-out's gather counting its joins beside a remote executor's own reported counters.
//! Screenshots are written into each test's temporary folder (or `WEIR_UI_SCREENSHOTS`, to keep
//! them).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::common::model;
use crate::common::{repo, temp_dir, weir_home};
use crate::distributed::{loopback, Executor};
use crate::fanout::{graph_yaml, sum_model, write_graph};
use crate::hams::{pair, track_graph, TRACK};
use crate::ops::{wait_until, Launched};
use crate::serve::{http, Server};
use crate::traces::fanout_body;

/// The status document of the server at `addr` (with `headers`).
fn status(addr: &str, headers: &[(&str, String)]) -> (u16, Value) {
    let (code, body) = http(addr, "GET", "/v2/weir/status", headers, b"");
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// Opens the event stream; returns the connection after its status line and headers were read
/// (`None` with the status when it was refused).
fn open_stream(addr: &str) -> Result<BufReader<TcpStream>, u16> {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "GET /v2/weir/status/stream HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .expect("writes");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let code: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).expect("header");
        if h.trim().is_empty() {
            break;
        }
    }
    if code == 200 {
        Ok(r)
    } else {
        Err(code)
    }
}

/// The next event's document on an open stream (chunked framing skipped).
fn next_event(r: &mut BufReader<TcpStream>) -> Value {
    loop {
        let mut line = String::new();
        assert!(r.read_line(&mut line).expect("reads") > 0, "stream ended");
        if let Some(doc) = line.strip_prefix("data: ") {
            return serde_json::from_str(doc.trim()).expect("an event is one JSON document");
        }
    }
}

#[test]
fn the_status_feed_shows_the_plan_streams_to_a_bounded_number_and_keeps_to_the_token() {
    let graph = crate::serve::mlp_graph();
    let server = Server::start(std::slice::from_ref(&graph), &["--ui-max-viewers", "2"]);
    let (code, doc) = status(&server.addr, &[]);
    assert_eq!(code, 200);
    let g = &doc["graphs"][0];
    assert_eq!(g["name"], "mlp");
    assert_eq!(g["nodes"][0]["id"], "m");
    assert_eq!(g["nodes"][0]["kind"], "model");
    assert_eq!(g["nodes"][0]["replicas"][0]["name"], "local");
    let edges: Vec<(String, String)> = g["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap().into(),
                e["to"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        [
            ("ingress".into(), "m".into()),
            ("m".into(), "egress".into())
        ]
    );
    // Two streams at once, a third refused; each stream moves on.
    let mut a = open_stream(&server.addr).expect("first stream");
    let mut b = open_stream(&server.addr).expect("second stream");
    assert_eq!(open_stream(&server.addr).err(), Some(503));
    let first = next_event(&mut a)["sample"].as_u64().expect("sample");
    assert!(next_event(&mut a)["sample"].as_u64().expect("sample") > first);
    next_event(&mut b);
    drop(a);
    // The place comes back once the server sees the client gone (at its next tick).
    let mut again = None;
    for _ in 0..200 {
        if let Ok(s) = open_stream(&server.addr) {
            again = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    next_event(&mut again.expect("a closed stream's place is taken again"));
    // The page and its assets are served from the binary.
    let (code, page) = server.get("/ui");
    assert_eq!(code, 200);
    assert!(page.contains("/ui/app.js"));
    assert_eq!(server.get("/ui/layout.js").0, 200);
    drop(server);

    // Behind a token: the bearer token, or Basic with it as password (what a browser sends).
    let token = Server::start(std::slice::from_ref(&graph), &["--auth-token", "s3cret"]);
    assert_eq!(status(&token.addr, &[]).0, 401);
    assert_eq!(token.get("/ui").0, 401);
    let bearer = [("Authorization", "Bearer s3cret".to_string())];
    assert_eq!(status(&token.addr, &bearer).0, 200);
    let basic = [("Authorization", "Basic dWk6czNjcmV0".to_string())]; // ui:s3cret
    assert_eq!(status(&token.addr, &basic).0, 200);
    assert_eq!(
        http(&token.addr, "GET", "/ui", &basic, b"").0,
        200,
        "the page takes Basic credentials"
    );
    drop(token);

    let off = Server::start(&[graph], &["--no-ui"]);
    assert_eq!(status(&off.addr, &[]).0, 404);
    assert_eq!(off.get("/ui").0, 404);
}

/// An ensemble of two MLPs on the same normalised input, joined and ranked: `m` on the remote
/// `executors` (each with its instance type) and in-process, `m2` in-process.
fn ensemble_graph(executors: &[(&Executor, &str)]) -> String {
    let mut yaml =
        "name: mlp\ninputs:\n  - {name: x, dtype: f32, shape: [64]}\nexecutors:\n".to_string();
    for (e, instance_type) in executors {
        yaml.push_str(&format!(
            "  - {{name: {}, endpoint: \"{}\", labels: {{instance_type: {instance_type}}}}}\n",
            e.name(),
            e.endpoint()
        ));
    }
    let mut names: Vec<&str> = executors.iter().map(|(e, _)| e.name()).collect();
    names.push("local");
    yaml.push_str(&format!(
        "nodes:\n  - normalize: {{id: scaled, input: x, mean: [0.0], std: [2.0]}}\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: scaled}}\n      batching: {{max_size: 8}}\n      executor: {{timeout_ms: 2000}}\n      replicas: [{}]\n  - model: {{id: m2, path: {}, inputs: {{x: scaled}}}}\n  - concat: {{id: both, inputs: [m.probs, m2.probs], axis: 0}}\n  - argmax: {{id: best, input: both}}\noutputs:\n  - {{name: probs, from: m.probs}}\n  - {{name: best, from: best}}\n",
        model("mlp_a.onnx").display(),
        names.join(", "),
        model("mlp_b.onnx").display()
    ));
    yaml
}

/// Requests to `model` (input `x` of `len` f32) in a loop until `stop`; counts the answers.
fn load(
    addr: String,
    model: &str,
    len: usize,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let body = serde_json::json!({"inputs": [{"name": "x", "shape": [len], "datatype": "FP32",
        "data": vec![0.25f32; len]}]})
    .to_string()
    .into_bytes();
    let answers = load_body(addr, model, body, stop);
    std::thread::spawn(move || answers.join().expect("load thread").0)
}

/// Requests with `body` to `model` in a loop until `stop`; counts the answers and the 200s.
fn load_body(
    addr: String,
    model: &str,
    body: Vec<u8>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(u64, u64)> {
    let path = format!("/v2/models/{model}/infer");
    std::thread::spawn(move || {
        let (answered, ok) = (AtomicU64::new(0), AtomicU64::new(0));
        while !stop.load(Ordering::Relaxed) {
            let (code, _) = http(&addr, "POST", &path, &[], &body);
            assert_ne!(code, 0, "every request gets an answer");
            answered.fetch_add(1, Ordering::Relaxed);
            if code == 200 {
                ok.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (answered.load(Ordering::Relaxed), ok.load(Ordering::Relaxed))
    })
}

/// Node `id` of the first graph of a status document.
fn node<'a>(doc: &'a Value, id: &str) -> &'a Value {
    doc["graphs"][0]["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["id"] == id))
        .unwrap_or_else(|| panic!("node {id} in {doc}"))
}

/// Where a test's screenshots go: `WEIR_UI_SCREENSHOTS/<tag>` or the test's folder.
fn screenshots(dir: &Path, tag: &str) -> PathBuf {
    match std::env::var_os("WEIR_UI_SCREENSHOTS") {
        Some(d) => PathBuf::from(d).join(tag),
        None => dir.join("screenshots"),
    }
}

/// Runs tests/python/ui_check.py with `args`; panics with its findings when a check failed.
fn ui_check(args: &[String]) -> Value {
    for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            Path::new(tool).exists(),
            "{tool} missing: run scripts/setup.sh (its browser part installs Debian's chromium and chromium-driver)"
        );
    }
    let out = std::process::Command::new(weir_home().join("venv/bin/python"))
        .arg(repo().join("tests/python/ui_check.py"))
        .args(args)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let findings: Value = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    assert!(
        out.status.success(),
        "the dashboard check failed: {findings}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    findings
}

#[test]
fn the_dashboard_draws_the_graph_moves_under_load_and_shows_a_killed_executor_down() {
    let dir = temp_dir("ui-remote");
    let e0 = Executor::serving("ui-e0", &loopback(), "mlp_a.onnx");
    let mut e1 = Executor::serving("ui-e1", &loopback(), "mlp_a.onnx");
    let yaml = ensemble_graph(&[(&e0, "cpu-small"), (&e1, "cpu-large")]);
    let repository = dir.0.join("repository");
    let out = crate::model_repository::register("digits_tiny", &repository, &["--no-int8"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(&[yaml], &["--repository", repository.to_str().unwrap()]);
    let (_, doc) = status(&server.addr, &[]);
    assert_eq!(doc["modelless"]["tasks"][0]["name"], "digits");
    // One query loads a variant: the repository page shows its instance.
    let (code, reply) =
        crate::modelless_serve::query_at(&server.addr, "digits", serde_json::json!({}));
    assert_eq!(code, 200, "{reply}");
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(server.addr.clone(), "mlp", 64, Arc::clone(&stop));
    let findings = ui_check(&[
        format!("--url=http://{}", server.addr),
        "--graph=mlp".into(),
        "--nodes=scaled,m,m2,both,best".into(),
        format!("--screenshots={}", screenshots(&dir.0, "remote").display()),
        format!("--kill-pid={}", e1.pid()),
        "--kill-node=m".into(),
        "--kill-replica=ui-e1".into(),
        "--repository-task=digits".into(),
        format!(
            "--down-deadline-s={}",
            std::env::var("WEIR_UI_DOWN_DEADLINE_S").unwrap_or_else(|_| "2".into())
        ),
    ]);
    stop.store(true, Ordering::Relaxed);
    let answered = loader.join().expect("load thread");
    e1.sigkill();
    assert!(answered > 0);
    assert!(
        findings["replica_down_after_s"].as_f64().is_some(),
        "{findings}"
    );
    assert_eq!(findings["console_errors"], serde_json::json!([]));
    assert!(findings["screenshots"]
        .as_array()
        .is_some_and(|s| s.len() >= 3));
    // The status document agrees with the page.
    let (_, doc) = status(&server.addr, &[]);
    let replicas = node(&doc, "m")["replicas"]
        .as_array()
        .expect("replicas")
        .clone();
    let alive = |name: &str| {
        replicas
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["alive"].clone())
    };
    assert_eq!(alive("ui-e1"), Some(Value::Bool(false)), "{replicas:?}");
    assert_eq!(alive("ui-e0"), Some(Value::Bool(true)), "{replicas:?}");
    drop(e0);
}

#[test]
fn the_dashboard_shows_a_hams_failover_s_new_primary() {
    let dir = temp_dir("ui-hams");
    let (mut a, b) = pair(&dir.0, "ui", &TRACK, &[], &[]);
    let path = track_graph(&dir.0, "track", &[&a, &b], "nspb");
    let yaml = std::fs::read_to_string(&path).expect("graph");
    let server = Server::start(&[yaml], &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load(server.addr.clone(), "track", 8, Arc::clone(&stop));
    let findings = ui_check(&[
        format!("--url=http://{}", server.addr),
        "--graph=track".into(),
        "--nodes=track".into(),
        format!("--screenshots={}", screenshots(&dir.0, "hams").display()),
        "--hams-node=track".into(),
        format!("--hams-new-primary={}", b.name),
        format!("--kill-pid={}", a.pid()),
        "--down-deadline-s=30".into(),
    ]);
    stop.store(true, Ordering::Relaxed);
    loader.join().expect("load thread");
    a.sigkill();
    assert!(
        findings["hams_primary"]
            .as_str()
            .is_some_and(|p| p.contains(&a.name)),
        "the first primary shown: {findings}"
    );
    assert!(findings["new_primary"].as_str().is_some(), "{findings}");
    let (_, doc) = status(&server.addr, &[]);
    let hams = &doc["graphs"][0]["nodes"][0]["hams"];
    assert_eq!(hams["primary"], Value::String(b.name.clone()), "{hams}");
    assert!(hams["epoch"].as_u64().is_some_and(|e| e >= 1));
    assert!(!doc["graphs"][0]["failovers"]
        .as_array()
        .expect("failovers")
        .is_empty());
}

#[test]
fn the_dashboard_draws_a_request_s_path_with_every_node_it_passed() {
    let dir = temp_dir("ui-path");
    let e0 = Executor::serving("path-e0", &loopback(), "mlp_a.onnx");
    let yaml = ensemble_graph(&[(&e0, "cpu-small")]);
    let server = Server::start(&[yaml], &["--ui-path-every", "1"]);
    for id in ["path-0", "path-1", "path-typed"] {
        crate::request_paths::infer_with_id(&server, id, &[]);
    }
    let path_nodes = ["ingress", "scaled", "m", "m2", "both", "best"];
    // The API's timeline holds every node of the path, and the model hop its replica.
    let (code, body) = server.get("/v2/weir/requests/path-1");
    assert_eq!(code, 200, "{body}");
    let path: Value = serde_json::from_str(&body).expect("json");
    let hops = path["hops"].as_array().expect("hops");
    for n in path_nodes {
        assert!(hops.iter().any(|h| h["node"] == n), "{n} missing: {path}");
    }
    let m = hops.iter().find(|h| h["node"] == "m").expect("m");
    assert!(
        m["replica"] == "path-e0" || m["replica"] == "local",
        "the replica that ran it: {m}"
    );
    let findings = ui_check(&[
        format!("--url=http://{}", server.addr),
        "--graph=mlp".into(),
        "--nodes=scaled,m,m2,both,best".into(),
        format!("--screenshots={}", screenshots(&dir.0, "path").display()),
        "--no-load".into(),
        "--path-click=path-1".into(),
        "--path-type=path-typed".into(),
        format!("--path-nodes={}", path_nodes.join(",")),
    ]);
    assert_eq!(findings["console_errors"], serde_json::json!([]));
    for (key, id) in [("path_clicked", "path-1"), ("path_typed", "path-typed")] {
        let shown = &findings[key];
        assert_eq!(shown["id"], id, "{findings}");
        assert_eq!(
            shown["nodes"].as_array().map(Vec::len),
            Some(path_nodes.len()),
            "{findings}"
        );
    }
    drop(e0);
}

#[test]
fn the_dashboard_shows_a_gather_s_joins_and_a_remote_executor_s_own_counters() {
    let dir = temp_dir("ui-gather");
    let model = sum_model(&dir.0);
    let e = Executor::serving("ui-ge", &loopback(), &model.display().to_string());
    let yaml = graph_yaml(&model, 1024, Some((&[&e], &["ui-ge"])));
    let path = write_graph(&dir.0, &yaml, 1024).display().to_string();
    let server = Launched::start(&[], &[path.as_str(), "--http", "127.0.0.1:0"], &["http"]);
    let addr = server.addr("http").to_string();
    wait_until("ready", || {
        http(&addr, "GET", "/v2/health/ready", &[], b"").0 == 200
    });
    let (_, idle) = status(&addr, &[]);
    assert_eq!(node(&idle, "all")["live"]["joined"], 0, "{idle}");
    let stop = Arc::new(AtomicBool::new(false));
    let loader = load_body(addr.clone(), "fanout", fanout_body(), Arc::clone(&stop));
    let findings = ui_check(&[
        format!("--url=http://{addr}"),
        "--graph=fanout".into(),
        "--nodes=crops,f,m,idx,name,all".into(),
        format!("--screenshots={}", screenshots(&dir.0, "gather").display()),
        "--gather-node=all".into(),
        "--replica-figures=m/ui-ge".into(),
    ]);
    // Under load, the gather's and the executor's figures move between two samples.
    let (_, before) = status(&addr, &[]);
    let executor = |doc: &Value| node(doc, "m")["replicas"][0]["executor"].clone();
    let (joined, served) = (
        node(&before, "all")["live"]["joined"]
            .as_u64()
            .expect("joined"),
        executor(&before)["served"].as_u64().expect("served"),
    );
    wait_until("the figures move", || {
        let (_, doc) = status(&addr, &[]);
        node(&doc, "all")["live"]["joined"].as_u64() > Some(joined)
            && executor(&doc)["served"].as_u64() > Some(served)
    });
    stop.store(true, Ordering::Relaxed);
    let (answered, ok) = loader.join().expect("load thread");
    assert_eq!(answered, ok, "every fan-out request succeeds");
    assert_eq!(findings["console_errors"], serde_json::json!([]));
    assert!(findings["gather_figures"]["row"].is_string(), "{findings}");
    assert!(
        findings["replica_figures"]["served"].is_string(),
        "{findings}"
    );
    // Once idle: every request joined once from its two parts, nothing left open, and the
    // executor's own report (every half second) counts every part it ran.
    let mut doc = Value::Null;
    wait_until("the executor reports every part", || {
        doc = status(&addr, &[]).1;
        let x = executor(&doc);
        x["rows"].as_u64() >= Some(2 * ok) && x["in_flight"] == 0
    });
    let g = &node(&doc, "all")["live"];
    assert_eq!(g["joined"].as_u64(), Some(ok), "{g}");
    assert_eq!(g["parts"].as_u64(), Some(2 * ok), "{g}");
    for open_or_lost in ["waiting", "failed", "dropped"] {
        assert_eq!(g[open_or_lost], 0, "{g}");
    }
    assert!(
        g["mean_wait_ms"].is_f64() || g["mean_wait_ms"].is_null(),
        "{g}"
    );
    // `/metrics` counts the same joins.
    let (code, metrics) = http(&addr, "GET", "/metrics", &[], b"");
    assert_eq!(code, 200);
    let series = format!("weir_gather_joined_total{{graph=\"fanout\",node=\"all\"}} {ok}");
    assert!(
        metrics.lines().any(|l| l == series),
        "{series} in {metrics}"
    );
    let r = &node(&doc, "m")["replicas"][0];
    assert_eq!(r["name"], "ui-ge");
    assert_eq!(r["alive"], true, "{r}");
    assert!(r["heard_ago_s"].is_f64(), "{r}");
    let x = &r["executor"];
    assert_eq!(x["errors"], 0, "{x}");
    assert!(
        x["served"].as_u64().is_some_and(|s| s > 0 && s <= 2 * ok),
        "{x}"
    );
    assert!(x["report_age_s"].is_f64(), "{x}");
    drop(server);
    drop(e);
}
