//! ParM end to end at the default decode rule (a prediction is unavailable when later than the
//! node's p99 latency, or when its replica failed): an affine model (exactly decodable: its
//! parity model adds the bias twice) whose node runs on an in-process replica and a remote
//! executor that is frozen with SIGSTOP (a straggling host). The frozen host's requests are
//! answered by reconstruction, marked as such, equal to the model's real outputs; when the host
//! thaws its late predictions are dropped, and every request is answered exactly once. A replica
//! SIGKILLed between two jobs of a group: the second is reconstructed, not failed. Without any
//! straggler the parity-coded digits graph answers exactly what the plain one does. With r = 2
//! parity models (ParM §7) and both replicas frozen, every request is rebuilt from the two parity
//! outputs alone. The parity model node runs on a remote replica of its own (an executor serving
//! it under `m.parity`).

use std::time::{Duration, Instant};

use weir::{load_graph, start, RuntimeOptions, Tensor};

use crate::common::{assert_close, channel, direct_ort, model, named, repo, signal, Replies};
use crate::distributed::{loopback, Executor};

#[test]
fn a_frozen_replicas_requests_are_reconstructed_and_answered_once() {
    let endpoint = loopback();
    let executor = Executor::serving("slow", &endpoint, "affine.onnx");
    let yaml = format!(
        "name: affine\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: slow, endpoint: \"{endpoint}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      replicas: [local, slow]\n      executor: {{timeout_ms: 60000}}\n      resilience: {{parity: {{k: 2, parity_model: {}}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        model("affine.onnx").display(),
        model("affine_parity_k2.onnx").display()
    );
    let path = std::env::temp_dir().join(format!("weir-it-parity-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    let _ = std::fs::remove_file(&path);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    signal(executor.pid(), "-STOP");

    let replies = Replies::default();
    let n = 60u64;
    let rows = affine_rows(n, 11);
    let reconstructed = affine_answers(
        &running,
        &replies,
        &rows,
        1e-4,
        Duration::from_secs(30),
        "while a replica is frozen",
    );
    assert!(
        reconstructed >= 1,
        "the frozen replica's requests were reconstructed"
    );
    let service = running
        .parity_services()
        .into_iter()
        .next()
        .expect("parity node")
        .1;
    assert_eq!(service.stats().reconstructed as i64, reconstructed);
    assert_eq!(
        service.stats().reconstructed_late as i64,
        reconstructed,
        "a frozen replica's jobs are late, not failed: {:?}",
        service.stats()
    );

    // Thaw: the late real predictions come back and are dropped.
    signal(executor.pid(), "-CONT");
    let deadline = Instant::now() + Duration::from_secs(20);
    while service.stats().late_real < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(service.stats().late_real >= 1, "{:?}", service.stats());
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    assert_eq!(replies.counts().len() as u64, n);
    running.shutdown();
}

#[test]
fn digits_on_three_executors_with_one_stalled_are_all_answered_and_mostly_right() {
    let executors: Vec<Executor> = (0..3)
        .map(|i| {
            let endpoint = loopback();
            Executor::serving(&format!("d{i}"), &endpoint, "digits_mlp.onnx")
        })
        .collect();
    let mut yaml =
        "name: digits_parity\ninputs:\n  - {name: pixels, dtype: f32, shape: [64]}\nexecutors:\n"
            .to_string();
    for (i, e) in executors.iter().enumerate() {
        yaml.push_str(&format!(
            "  - {{name: d{i}, endpoint: \"{}\"}}\n",
            e.endpoint()
        ));
    }
    yaml.push_str(&format!(
        "nodes:\n  - normalize: {{id: scaled, input: pixels, mean: [0.0], std: [16.0]}}\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: scaled}}\n      replicas: [d0, d1, d2]\n      executor: {{timeout_ms: 60000}}\n      resilience: {{parity: {{k: 2, parity_model: {}}}}}\n  - argmax: {{id: class, input: m.probs}}\noutputs:\n  - {{name: class, from: class}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        model("digits_mlp.onnx").display(),
        model("digits_mlp_parity_k2.onnx").display()
    ));
    let path =
        std::env::temp_dir().join(format!("weir-it-digits-parity-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    let _ = std::fs::remove_file(&path);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rows: Vec<(Vec<f32>, i64)> = std::fs::read_to_string(model("digits_test.csv"))
        .expect("digits_test.csv")
        .lines()
        .map(|l| {
            let v: Vec<f32> = l
                .split(',')
                .map(|x| x.trim().parse().expect("number"))
                .collect();
            (v[..64].to_vec(), v[64] as i64)
        })
        .collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    let n = rows.len();
    for (i, (x, _)) in rows.iter().enumerate() {
        if i == n / 3 {
            signal(executors[1].pid(), "-STOP"); // stalls mid-run, jobs in flight
        }
        let row = vec![named("pixels", Tensor::f32(vec![64], x.clone()))];
        replies.submit(&running, i as u64, row, &tx);
    }
    let (mut correct, mut reconstructed, mut correct_reconstructed) = (0, 0, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..n {
        let (tag, r) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("every request answered while d1 is stalled");
        let reply = r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let class = reply
            .output("class")
            .and_then(Tensor::as_i64)
            .expect("class")[0];
        let flag = reply
            .output("reconstructed")
            .and_then(Tensor::as_i64)
            .expect("flag")[0];
        let right = class == rows[tag as usize].1;
        correct += usize::from(right);
        reconstructed += usize::from(flag == 1);
        correct_reconstructed += usize::from(flag == 1 && right);
    }
    signal(executors[1].pid(), "-CONT");
    assert!(
        reconstructed >= 1,
        "d1's stalled requests were reconstructed"
    );
    let degraded = correct_reconstructed as f64 / reconstructed as f64;
    eprintln!(
        "digits with d1 stalled: accuracy {:.4} ({correct}/{n}); {reconstructed} reconstructed, degraded-mode accuracy {degraded:.4}",
        correct as f64 / n as f64
    );
    assert!(correct as f64 / n as f64 > 0.8, "{correct}/{n}");
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    assert_eq!(replies.counts().len(), n);
    running.shutdown();
}

/// The digits test set's rows and labels.
fn digits_rows() -> Vec<(Vec<f32>, i64)> {
    std::fs::read_to_string(model("digits_test.csv"))
        .expect("digits_test.csv")
        .lines()
        .map(|l| {
            let v: Vec<f32> = l
                .split(',')
                .map(|x| x.trim().parse().expect("number"))
                .collect();
            (v[..64].to_vec(), v[64] as i64)
        })
        .collect()
}

/// Runs `graph` over `rows`, a few requests in flight at a time; each request's class and
/// reconstructed flag (0 without the output), by row.
fn classify(graph: &weir::RunningGraph, rows: &[(Vec<f32>, i64)]) -> Vec<(i64, i64)> {
    const IN_FLIGHT: usize = 4;
    let replies = Replies::default();
    let (tx, rx) = channel();
    let submit = |i: usize| {
        let row = vec![named("pixels", Tensor::f32(vec![64], rows[i].0.clone()))];
        replies.submit(graph, i as u64, row, &tx);
    };
    let mut next = 0;
    while next < rows.len().min(IN_FLIGHT) {
        submit(next);
        next += 1;
    }
    let mut out = vec![(-1, -1); rows.len()];
    for _ in 0..rows.len() {
        let (tag, r) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every request answered");
        let reply = r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let class = reply
            .output("class")
            .and_then(Tensor::as_i64)
            .expect("class")[0];
        let flag = reply
            .output("reconstructed")
            .and_then(Tensor::as_i64)
            .map_or(0, |f| f[0]);
        out[tag as usize] = (class, flag);
        if next < rows.len() {
            submit(next);
            next += 1;
        }
    }
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    assert_eq!(replies.counts().len(), rows.len());
    out
}

#[test]
fn without_a_straggler_the_parity_coded_digits_graph_answers_what_the_deployed_model_answers() {
    let rows = digits_rows();
    let plain = start(
        load_graph(&repo().join("graphs/digits.yaml"))
            .expect("valid")
            .plan,
        RuntimeOptions::default(),
    )
    .expect("starts");
    let want = classify(&plain, &rows);
    plain.shutdown();
    let coded = start(
        load_graph(&repo().join("graphs/digits_parity.yaml"))
            .expect("valid")
            .plan,
        RuntimeOptions::default(),
    )
    .expect("starts");
    let got = classify(&coded, &rows);
    let stats = coded
        .parity_services()
        .into_iter()
        .next()
        .expect("parity node")
        .1
        .stats();
    coded.shutdown();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g.1, 0, "row {i} reconstructed ({stats:?})");
        assert_eq!(w.0, g.0, "row {i}: the deployed model's class");
    }
    assert_eq!(stats.reconstructed, 0, "{stats:?}");
    assert_eq!(stats.real as usize, rows.len(), "{stats:?}");
    assert!(stats.groups >= (rows.len() / 2) as u64 - 1, "{stats:?}");
}

#[test]
fn a_replica_killed_mid_group_has_its_job_reconstructed_not_failed() {
    let endpoint = loopback();
    let mut executor = Executor::serving("d1", &endpoint, "affine.onnx");
    let yaml = format!(
        "name: affine_killed\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: d1, endpoint: \"{endpoint}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      replicas: [d1]\n      executor: {{timeout_ms: 5000}}\n      resilience: {{parity: {{k: 2, parity_model: {}, decode: {{after: 10000}}}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        model("affine.onnx").display(),
        model("affine_parity_k2.onnx").display()
    );
    let path =
        std::env::temp_dir().join(format!("weir-it-parity-kill-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    let _ = std::fs::remove_file(&path);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let rows: Vec<Vec<f32>> = (0..2u64)
        .map(|i| {
            (0..16)
                .map(|j| ((i * 16 + j) % 7) as f32 / 7.0 - 0.3)
                .collect()
        })
        .collect();
    let replies = Replies::default();
    let (tx, rx) = channel();
    let ask = |tag: usize| {
        replies.submit(
            &running,
            tag as u64,
            vec![named("x", Tensor::f32(vec![16], rows[tag].clone()))],
            &tx,
        );
        let (got, r) = rx.recv_timeout(Duration::from_secs(60)).expect("answered");
        assert_eq!(got, tag as u64);
        let reply = r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let y = reply
            .output("y")
            .and_then(Tensor::as_f32)
            .expect("y")
            .to_vec();
        let want = direct_ort(&model("affine.onnx"), "x", &[1, 16], &rows[tag]);
        assert_close(&y, &want, 1e-4, &format!("request {tag}"));
        reply
            .output("reconstructed")
            .and_then(Tensor::as_i64)
            .expect("flag")[0]
    };
    // The group's first job is answered by the replica; then the replica dies, and the group's
    // second job, which fails for want of a replica, is rebuilt from the parity output. The
    // decode deadline (10 s) is past the executor's time-out (5 s), so on a loaded machine the
    // job is rebuilt because it failed, never because it was merely late.
    assert_eq!(ask(0), 0, "the first job's real prediction");
    executor.sigkill();
    assert_eq!(ask(1), 1, "the second job reconstructed");
    // The counters are bumped after the answer is handed over: read them once they caught up.
    let service = running
        .parity_services()
        .into_iter()
        .next()
        .expect("parity node")
        .1;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut stats = service.stats();
    while stats.reconstructed_failed + stats.reconstructed_late + stats.unrecovered == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
        stats = service.stats();
    }
    assert_eq!(
        (
            stats.reconstructed_failed,
            stats.reconstructed_late,
            stats.unrecovered
        ),
        (1, 0, 0),
        "{stats:?}"
    );
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    running.shutdown();
}

/// Parity model 1 (of r = 2) for the affine model and k = 2: the same weights, bias
/// (1 + 2)·b, so that F_P1(X_1 + 2X_2) = F(X_1) + 2F(X_2) exactly.
fn affine_second_parity_model(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("affine_parity_k2_1.onnx");
    crate::common::run_python_script(
        "import sys, onnx\nfrom onnx import numpy_helper\nm = onnx.load(sys.argv[1])\nfor i, t in enumerate(m.graph.initializer):\n    if t.name == 'fc.bias':\n        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 3.0, t.name))\nonnx.save(m, sys.argv[2])\n",
        &[&model("affine.onnx"), &out],
        "writing the second affine parity model",
    );
    out
}

#[test]
fn two_frozen_replicas_are_both_reconstructed_with_two_parity_models() {
    let dir = crate::common::temp_dir("parity-r2");
    let second = affine_second_parity_model(&dir.0);
    let executors: Vec<Executor> = (0..2)
        .map(|i| Executor::serving(&format!("s{i}"), &loopback(), "affine.onnx"))
        .collect();
    // Both replicas frozen: every group of two loses both predictions, which only r = 2 decodes.
    let yaml = format!(
        "name: affine_r2\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: s0, endpoint: \"{}\"}}\n  - {{name: s1, endpoint: \"{}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      replicas: [s0, s1]\n      executor: {{timeout_ms: 60000}}\n      resilience:\n        parity:\n          k: 2\n          parity_models: [{}, {}]\n          decode: {{after: 300}}\n          executor: {{instances: 1}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        executors[0].endpoint(),
        executors[1].endpoint(),
        model("affine.onnx").display(),
        model("affine_parity_k2.onnx").display(),
        second.display()
    );
    let path = dir.0.join("graph.yaml");
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    let plan = graph.plan.describe();
    for stage in [
        "m.parity_encode",
        "m.parity ",
        "m.parity1 ",
        "m.parity_decode",
    ] {
        assert!(plan.contains(stage), "the plan shows {stage}:\n{plan}");
    }
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    for e in &executors {
        signal(e.pid(), "-STOP");
    }
    let n = 20u64;
    let rows = affine_rows(n, 13);
    let replies = Replies::default();
    let reconstructed = affine_answers(
        &running,
        &replies,
        &rows,
        1e-3,
        Duration::from_secs(60),
        "with both replicas frozen",
    );
    assert_eq!(
        reconstructed, n as i64,
        "no replica answered: all reconstructed"
    );
    let service = running
        .parity_services()
        .into_iter()
        .next()
        .expect("parity node")
        .1;
    let jobs = service.encoder().stats().parity_jobs;
    assert_eq!(
        jobs.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["m.parity", "m.parity1"]
    );
    assert!(jobs.iter().all(|(_, j)| j.answered >= 1), "{jobs:?}");
    // Thaw: the late real predictions are dropped, each request stays answered once.
    for e in &executors {
        signal(e.pid(), "-CONT");
    }
    let thawed = Instant::now() + Duration::from_secs(20);
    while service.stats().late_real < 1 && Instant::now() < thawed {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(service.stats().late_real >= 1, "{:?}", service.stats());
    let stats = service.stats();
    assert_eq!(stats.reconstructed as i64, reconstructed, "{stats:?}");
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    assert_eq!(replies.counts().len() as u64, n);
    running.shutdown();
}

#[test]
fn the_parity_model_node_runs_on_its_own_remote_replica() {
    // The deployed node: a local replica and a frozen remote one; the parity model node: a
    // replica of its own on another executor, which serves it under `m.parity`.
    let slow = Executor::serving("slow", &loopback(), "affine.onnx");
    let parity_model = format!("m.parity={}", model("affine_parity_k2.onnx").display());
    let parity_host = Executor::serving_with(
        "ph",
        &loopback(),
        "affine.onnx",
        &["--model", &parity_model],
    );
    let dir = crate::common::temp_dir("parity-remote");
    let yaml = format!(
        "name: affine_remote_parity\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: slow, endpoint: \"{}\"}}\n  - {{name: ph, endpoint: \"{}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      replicas: [local, slow]\n      executor: {{timeout_ms: 60000}}\n      resilience: {{parity: {{k: 2, parity_model: {}, decode: {{after: 300}}, replicas: [ph]}}}}\noutputs:\n  - {{name: y, from: m.y}}\n  - {{name: reconstructed, from: m.reconstructed}}\n",
        slow.endpoint(),
        parity_host.endpoint(),
        model("affine.onnx").display(),
        model("affine_parity_k2.onnx").display()
    );
    let path = dir.0.join("graph.yaml");
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    assert!(
        graph.plan.describe().contains("replicas: ph"),
        "{}",
        graph.plan.describe()
    );
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    signal(slow.pid(), "-STOP");
    let n = 20u64;
    let rows = affine_rows(n, 9);
    let replies = Replies::default();
    let reconstructed = affine_answers(
        &running,
        &replies,
        &rows,
        1e-4,
        Duration::from_secs(60),
        "with the data replica frozen",
    );
    assert!(reconstructed >= 1, "the frozen replica's jobs were rebuilt");
    let service = running
        .parity_services()
        .into_iter()
        .next()
        .expect("parity node")
        .1;
    let jobs = service.encoder().stats().parity_jobs;
    assert_eq!(jobs.len(), 1);
    assert!(
        jobs[0].1.answered >= 1,
        "the remote parity replica answered: {jobs:?}"
    );
    signal(slow.pid(), "-CONT");
    running.shutdown();
    assert!(replies.counts().values().all(|&c| c == 1), "answered once");
    assert_eq!(replies.counts().len() as u64, n);
}

/// `n` rows of 16 values in [-0.4, 0.6), varied by `modulus` so each test sends its own.
fn affine_rows(n: u64, modulus: u64) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            (0..16)
                .map(|j| ((i * 16 + j) % modulus) as f32 / modulus as f32 - 0.4)
                .collect()
        })
        .collect()
}

/// Sends `rows` to `running` as requests 0, 1, …, waits (up to `within`) for every answer,
/// checks each equals the affine model's in ONNX Runtime within `tolerance`, and returns how many
/// were reconstructed. `situation` names the test's fault in the failure messages.
fn affine_answers(
    running: &weir::RunningGraph,
    replies: &Replies,
    rows: &[Vec<f32>],
    tolerance: f32,
    within: Duration,
    situation: &str,
) -> i64 {
    let (tx, rx) = channel();
    for (i, x) in rows.iter().enumerate() {
        let row = vec![named("x", Tensor::f32(vec![16], x.clone()))];
        replies.submit(running, i as u64, row, &tx);
    }
    let n = rows.len();
    let deadline = Instant::now() + within;
    let mut reconstructed = 0;
    for got in 0..n {
        let (tag, r) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("only {got} of {n} answered {situation}"));
        let reply = r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let y = reply
            .output("y")
            .and_then(Tensor::as_f32)
            .expect("y")
            .to_vec();
        let flag = reply
            .output("reconstructed")
            .and_then(Tensor::as_i64)
            .expect("flag")[0];
        reconstructed += flag;
        let want = direct_ort(&model("affine.onnx"), "x", &[1, 16], &rows[tag as usize]);
        assert_close(
            &y,
            &want,
            tolerance,
            &format!("request {tag} (reconstructed: {flag})"),
        );
    }
    reconstructed
}
