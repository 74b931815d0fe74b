//! HAMS with real processes: stateful nodes whose primary and backup are `weir executor`
//! processes on loopback, killed with SIGKILL or paused with SIGSTOP, checked by request id and by
//! the consistency journal every role writes (`weir::hams::journal::check`: exactly once, no
//! conflicting outputs (R2), apply after dependencies (R3), the release rule).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weir::hams::journal::{check, read_dir, Report};
use weir::{load_graph, start, RunningGraph, RuntimeOptions, Tensor};

use crate::common::{channel, model, repo, signal, temp_dir, Replies, TempDir};
use crate::distributed::free_port;

/// A `weir executor` serving stateful models, SIGKILLed when dropped.
struct Member {
    child: Child,
    name: String,
    endpoint: String,
}

impl Member {
    /// Starts executor `name` listening on a free port, connecting to `peers`, serving
    /// `models` (node → file) as stateful models, journaling into `journal`.
    fn start(
        name: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Member {
        let endpoint = format!("tcp/127.0.0.1:{}", free_port());
        Member::start_on(name, &endpoint, peers, models, extra, journal)
    }

    fn start_on(
        name: &str,
        endpoint: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Member {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weir"));
        cmd.args(["executor", "--name", name, "--listen", endpoint]);
        for p in peers {
            cmd.args(["--connect", p]);
        }
        for (node, file) in models {
            cmd.args(["--stateful", &format!("{node}={}", model(file).display())]);
        }
        let mut child = cmd
            .args(extra)
            .env("WEIR_HAMS_JOURNAL", journal)
            .current_dir(repo())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("weir executor starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reads the ready line");
        assert!(
            line.starts_with(&format!("weir executor {name} serving")),
            "unexpected first line `{line}`"
        );
        Member {
            child,
            name: name.to_string(),
            endpoint: endpoint.to_string(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // A SIGSTOPped child must be resumed to die cleanly.
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        self.sigkill();
    }
}

/// One stateful node of a test graph.
struct NodeSpec<'a> {
    id: &'a str,
    file: &'a str,
    input: &'a str,
    state: (&'a str, &'a str),
    /// `[primary, backup]` executor names, or empty for an in-process unreplicated node.
    replicas: &'a [&'a str],
    mode: &'a str,
}

/// Writes a chain graph of `nodes` (each reading the previous one's `y`, the first reading the
/// graph input `x` of `features` values) and returns its path inside `dir`.
fn chain_graph(
    dir: &Path,
    name: &str,
    features: usize,
    members: &[&Member],
    nodes: &[NodeSpec<'_>],
) -> PathBuf {
    let mut yaml =
        format!("name: {name}\ninputs:\n  - {{name: x, dtype: f32, shape: [{features}]}}\n");
    if !members.is_empty() {
        yaml.push_str("executors:\n");
        for m in members {
            yaml.push_str(&format!(
                "  - {{name: {}, endpoint: \"{}\"}}\n",
                m.name, m.endpoint
            ));
        }
    }
    yaml.push_str("nodes:\n");
    for n in nodes {
        yaml.push_str(&format!(
            "  - model:\n      id: {}\n      path: {}\n      inputs: {{x: {}}}\n      batching: {{max_size: 4}}\n      state: {{inputs: [{}], outputs: [{}]}}\n",
            n.id,
            model(n.file).display(),
            n.input,
            n.state.0,
            n.state.1
        ));
        if !n.replicas.is_empty() {
            yaml.push_str(&format!(
                "      replicas: [{}]\n      replication: {{mode: {}, detect_ms: 300}}\n",
                n.replicas.join(", "),
                n.mode
            ));
        }
    }
    let last = nodes.last().map_or("x", |n| n.id);
    yaml.push_str(&format!("outputs:\n  - {{name: y, from: {last}.y}}\n"));
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).expect("graph written");
    path
}

fn start_graph(path: &Path) -> RunningGraph {
    let graph = load_graph(path).expect("graph loads");
    start(graph.plan, RuntimeOptions::default()).expect("graph starts")
}

fn named(tensor: Tensor) -> weir::NamedTensor {
    weir::NamedTensor {
        name: "x".into(),
        tensor,
    }
}

fn input(i: usize, features: usize) -> Vec<f32> {
    (0..features)
        .map(|k| ((i * features + k) as f32 * 0.173).sin())
        .collect()
}

/// Sends `n` requests one after another (a deterministic order at the stateful nodes) and
/// returns their outputs.
fn sequential(graph: &RunningGraph, n: usize, features: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            let x = Tensor::f32(vec![features], input(i, features));
            let r = graph.runtime().infer(vec![named(x)]).expect("answered");
            r.output("y").and_then(|t| t.as_f32()).expect("y").to_vec()
        })
        .collect()
}

/// Sends `n` requests, `concurrency` at a time, calling `during(i)` after submitting request `i`;
/// returns every reply by request index, with how many times each was answered.
fn load(
    graph: &RunningGraph,
    n: usize,
    features: usize,
    concurrency: usize,
    mut during: impl FnMut(usize),
) -> (HashMap<u64, Vec<f32>>, HashMap<u64, usize>, usize) {
    let replies = Replies::default();
    let (tx, rx) = channel();
    let mut outputs = HashMap::new();
    let mut errors = 0;
    let mut sent = 0;
    let mut received = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while received < n && Instant::now() < deadline {
        while sent < n && sent - received < concurrency {
            let x = Tensor::f32(vec![features], input(sent, features));
            graph
                .runtime()
                .submit(vec![named(x)], replies.responder(sent as u64, tx.clone()))
                .expect("admitted");
            during(sent);
            sent += 1;
        }
        if let Ok((tag, r)) = rx.recv_timeout(Duration::from_secs(1)) {
            received += 1;
            match r {
                Ok(r) => {
                    outputs.insert(
                        tag,
                        r.output("y").and_then(|t| t.as_f32()).expect("y").to_vec(),
                    );
                }
                Err(_) => errors += 1,
            }
        }
    }
    // Anything answered twice would arrive now.
    std::thread::sleep(Duration::from_millis(300));
    while rx.try_recv().is_ok() {}
    (outputs, replies.counts(), errors)
}

fn journal(dir: &TempDir) -> Report {
    let events = read_dir(&dir.0).expect("journal readable");
    check(&events)
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5, "{what}: {x} vs {y}");
    }
}

fn gru<'a>(id: &'a str, input: &'a str, replicas: &'a [&'a str], mode: &'a str) -> NodeSpec<'a> {
    NodeSpec {
        id,
        file: "gru_stream.onnx",
        input,
        state: ("h_in", "h_out"),
        replicas,
        mode,
    }
}

#[test]
fn an_nspb_node_answers_like_an_unreplicated_one_and_its_journal_is_consistent() {
    let dir = temp_dir("hams-equal");
    let a = Member::start(
        "hams-eq-a",
        &[],
        &[("track", "gru_stream.onnx")],
        &[],
        &dir.0,
    );
    let b = Member::start(
        "hams-eq-b",
        &[&a.endpoint],
        &[("track", "gru_stream.onnx")],
        &[],
        &dir.0,
    );
    let names = [a.name.as_str(), b.name.as_str()];
    let replicated = chain_graph(
        &dir.0,
        "track-nspb",
        8,
        &[&a, &b],
        &[gru("track", "x", &names, "nspb")],
    );
    let local = chain_graph(
        &dir.0,
        "track-local",
        8,
        &[],
        &[gru("track", "x", &[], "none")],
    );
    let graph = start_graph(&replicated);
    graph.hams().expect("a HAMS manager").journal_to(&dir.0);
    let got = sequential(&graph, 30, 8);
    let reference = sequential(&start_graph(&local), 30, 8);
    for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
        assert_close(g, r, &format!("request {i}"));
    }
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.released, 30, "every reply released through the gate");
    assert!(
        report.applied >= 30,
        "the backup applied every version: {report:?}"
    );
}

#[test]
fn sigkill_of_a_primary_under_load_answers_every_request_once_without_conflicts() {
    let dir = temp_dir("hams-kill");
    let mut a = Member::start(
        "hams-k-a",
        &[],
        &[("track", "gru_stream.onnx")],
        &["--perturb"],
        &dir.0,
    );
    let b = Member::start(
        "hams-k-b",
        &[&a.endpoint],
        &[("track", "gru_stream.onnx")],
        &["--perturb"],
        &dir.0,
    );
    let names = [a.name.as_str(), b.name.as_str()];
    let path = chain_graph(
        &dir.0,
        "track-kill",
        8,
        &[&a, &b],
        &[gru("track", "x", &names, "nspb")],
    );
    let graph = start_graph(&path);
    graph.hams().expect("manager").journal_to(&dir.0);
    let pid = a.pid();
    let (outputs, counts, errors) = load(&graph, 300, 8, 16, |i| {
        if i == 120 {
            signal(pid, "-KILL");
        }
    });
    a.sigkill();
    assert_eq!(errors, 0, "no request failed");
    assert_eq!(outputs.len(), 300, "every request answered");
    assert!(counts.values().all(|&c| c == 1), "answered once each");
    let recoveries = graph.hams().expect("manager").recoveries();
    assert_eq!(recoveries.len(), 1, "one failover: {recoveries:?}");
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.released, 300);
}
