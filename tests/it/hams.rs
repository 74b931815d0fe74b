//! HAMS with real processes: stateful nodes whose primary and backup are `weir executor`
//! processes on loopback, killed with SIGKILL or paused with SIGSTOP, checked by request id and by
//! the consistency journal every role writes (`weir::hams::journal::check`: exactly once; no two
//! released or durably consumed outputs of one version differ; a backup applies a state only
//! after the states it depends on are durable; the release rule). The rules are those of "HAMS:
//! High Availability for Distributed Machine Learning Service Graphs" (§IV-C–§IV-E).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weir::hams::journal::{check, read_dir, Divergence, Report};
use weir::{load_graph, start, RunningGraph, RuntimeOptions, Tensor};

use crate::common::{
    assert_close, channel, model, named, repo, signal, temp_dir, try_spawn_executor, Replies,
    TempDir,
};
use crate::distributed::loopback;

/// A `weir executor` serving stateful models, SIGKILLed when dropped.
pub(crate) struct Member {
    child: Child,
    pub(crate) name: String,
    pub(crate) endpoint: String,
}

impl Member {
    /// Starts executor `name` listening on a free port, connecting to `peers`, serving
    /// `models` (node → file) as stateful models, journaling into `journal`.
    pub(crate) fn start(
        name: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Member {
        // A free port can be taken between its choice and the executor's bind (tests run in
        // parallel): then another port.
        let mut why = String::new();
        for _ in 0..3 {
            let endpoint = loopback();
            match Member::try_start_on(name, &endpoint, peers, models, extra, journal) {
                Ok(m) => return m,
                Err(e) => why = e,
            }
        }
        panic!("{why}");
    }

    pub(crate) fn start_on(
        name: &str,
        endpoint: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Member {
        Member::try_start_on(name, endpoint, peers, models, extra, journal)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Member::start_on`] started by `base` (the `weir` binary, or a command that runs it
    /// elsewhere: in a network namespace, say).
    pub(crate) fn start_from(
        base: Command,
        name: &str,
        endpoint: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        journal: &Path,
    ) -> Member {
        Member::try_start_from(base, name, endpoint, peers, models, &[], journal)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start_on(
        name: &str,
        endpoint: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Result<Member, String> {
        let base = Command::new(env!("CARGO_BIN_EXE_weir"));
        Member::try_start_from(base, name, endpoint, peers, models, extra, journal)
    }

    fn try_start_from(
        mut cmd: Command,
        name: &str,
        endpoint: &str,
        peers: &[&str],
        models: &[(&str, &str)],
        extra: &[&str],
        journal: &Path,
    ) -> Result<Member, String> {
        cmd.args(["executor", "--name", name, "--listen", endpoint]);
        for p in peers {
            cmd.args(["--connect", p]);
        }
        for (node, file) in models {
            cmd.args(["--stateful", &format!("{node}={}", model(file).display())]);
        }
        let child = try_spawn_executor(cmd.args(extra).env("WEIR_HAMS_JOURNAL", journal), name)?;
        Ok(Member {
            child,
            name: name.to_string(),
            endpoint: endpoint.to_string(),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // A SIGSTOPped child must be resumed to die cleanly.
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        self.sigkill();
    }
}

/// One stateful node of a test graph.
pub(crate) struct NodeSpec<'a> {
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
pub(crate) fn chain_graph(
    dir: &Path,
    name: &str,
    features: usize,
    members: &[&Member],
    nodes: &[NodeSpec<'_>],
) -> PathBuf {
    let mut yaml =
        format!("name: {name}\ninputs:\n  - {{name: x, dtype: f32, shape: [{features}]}}\n");
    yaml.push_str(&executors_section(members));
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

/// A graph's `executors:` section declaring `members` (empty without members).
pub(crate) fn executors_section(members: &[&Member]) -> String {
    let mut yaml = String::new();
    if !members.is_empty() {
        yaml.push_str("executors:\n");
        for m in members {
            yaml.push_str(&format!(
                "  - {{name: {}, endpoint: \"{}\"}}\n",
                m.name, m.endpoint
            ));
        }
    }
    yaml
}

pub(crate) fn start_graph(path: &Path) -> RunningGraph {
    let graph = load_graph(path).expect("graph loads");
    start(graph.plan, RuntimeOptions::default()).expect("graph starts")
}

fn input(i: usize, features: usize) -> Vec<f32> {
    (0..features)
        .map(|k| ((i * features + k) as f32 * 0.173).sin())
        .collect()
}

/// Sends `n` requests one after another (a deterministic order at the stateful nodes) and
/// returns their outputs.
pub(crate) fn sequential(graph: &RunningGraph, n: usize, features: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            let x = Tensor::f32(vec![features], input(i, features));
            let r = graph
                .runtime()
                .infer(vec![named("x", x)])
                .expect("answered");
            r.output("y").and_then(|t| t.as_f32()).expect("y").to_vec()
        })
        .collect()
}

/// Sends `n` requests, `concurrency` at a time, calling `during(i)` after submitting request `i`;
/// returns every reply by request index, with how many times each was answered.
pub(crate) fn load(
    graph: &RunningGraph,
    n: usize,
    features: usize,
    concurrency: usize,
    mut during: impl FnMut(usize),
) -> LoadResult {
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
            replies.submit(graph, sent as u64, vec![named("x", x)], &tx);
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

pub(crate) fn journal(dir: &TempDir) -> Report {
    let events = read_dir(&dir.0).expect("journal readable");
    check(&events)
}

pub(crate) fn gru<'a>(
    id: &'a str,
    input: &'a str,
    replicas: &'a [&'a str],
    mode: &'a str,
) -> NodeSpec<'a> {
    NodeSpec {
        id,
        file: "gru_stream.onnx",
        input,
        state: ("h_in", "h_out"),
        replicas,
        mode,
    }
}

/// A replicated `track` GRU on members `hams-<tag>-a` (primary, started with `primary_args`)
/// and `hams-<tag>-b` (backup), and its graph, journaling into `dir`.
pub(crate) fn tracker(
    dir: &TempDir,
    tag: &str,
    primary_args: &[&str],
    backup_args: &[&str],
) -> (Member, Member, RunningGraph) {
    tracker_in_mode(dir, tag, "nspb", primary_args, backup_args)
}

/// [`tracker`] under replication `mode` (the text after `mode: `, which may add more fields of
/// the `replication:` mapping, e.g. `checkpoint, checkpoint_every: 10`).
pub(crate) fn tracker_in_mode(
    dir: &TempDir,
    tag: &str,
    mode: &str,
    primary_args: &[&str],
    backup_args: &[&str],
) -> (Member, Member, RunningGraph) {
    let (a, b) = pair(&dir.0, tag, &TRACK, primary_args, backup_args);
    let path = track_graph(&dir.0, &format!("track-{tag}"), &[&a, &b], mode);
    let graph = start_graph(&path);
    graph.hams().expect("a HAMS manager").journal_to(&dir.0);
    (a, b, graph)
}

/// The `track` node's model.
pub(crate) const TRACK: [(&str, &str); 1] = [("track", "gru_stream.onnx")];

/// Members `hams-<tag>-a` (started with `primary_args`) and `hams-<tag>-b` (connecting to it,
/// started with `backup_args`), both serving `models` and journaling into `journal`.
pub(crate) fn pair(
    journal: &Path,
    tag: &str,
    models: &[(&str, &str)],
    primary_args: &[&str],
    backup_args: &[&str],
) -> (Member, Member) {
    let a = Member::start(&format!("hams-{tag}-a"), &[], models, primary_args, journal);
    let b = Member::start(
        &format!("hams-{tag}-b"),
        &[&a.endpoint],
        models,
        backup_args,
        journal,
    );
    (a, b)
}

/// Writes graph `name`: one `track` GRU reading `x` of 8 values, replicated on `members`
/// (primary, backup) under `mode`, or unreplicated and in-process when `members` is empty.
pub(crate) fn track_graph(dir: &Path, name: &str, members: &[&Member], mode: &str) -> PathBuf {
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    let mode = if members.is_empty() { "none" } else { mode };
    chain_graph(dir, name, 8, members, &[gru("track", "x", &names, mode)])
}

/// `n` requests one at a time on `graph` are answered like those on an unreplicated in-process
/// `track` node (graph `local`, written into `dir`).
pub(crate) fn assert_answers_like_unreplicated(
    dir: &Path,
    graph: &RunningGraph,
    local: &str,
    n: usize,
) {
    let got = sequential(graph, n, 8);
    let reference = sequential(&start_graph(&track_graph(dir, local, &[], "")), n, 8);
    for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
        assert_close(g, r, 1e-5, &format!("request {i}"));
    }
}

/// The chain a → b, each node replicated on two members (`a1` primary of a, started with
/// `a1_args`; `b1` primary of b), and its graph, journaling into `dir`.
pub(crate) fn chain_pairs(
    dir: &TempDir,
    tag: &str,
    a1_args: &[&str],
    others: &[&str],
) -> ([Member; 4], RunningGraph) {
    let (ma, mb) = ([("a", "gru_stream.onnx")], [("b", "gru_chain.onnx")]);
    let a1 = Member::start(&format!("hams-{tag}-a1"), &[], &ma, a1_args, &dir.0);
    let a2 = Member::start(
        &format!("hams-{tag}-a2"),
        &[&a1.endpoint],
        &ma,
        others,
        &dir.0,
    );
    let b1 = Member::start(
        &format!("hams-{tag}-b1"),
        &[&a1.endpoint, &a2.endpoint],
        &mb,
        others,
        &dir.0,
    );
    let b2 = Member::start(
        &format!("hams-{tag}-b2"),
        &[&a1.endpoint, &a2.endpoint, &b1.endpoint],
        &mb,
        others,
        &dir.0,
    );
    let (na, nb) = (
        [a1.name.as_str(), a2.name.as_str()],
        [b1.name.as_str(), b2.name.as_str()],
    );
    let nodes = chain(&na, &nb);
    let path = chain_graph(&dir.0, tag, 8, &[&a1, &a2, &b1, &b2], &nodes);
    let graph = start_graph(&path);
    graph.hams().expect("a HAMS manager").journal_to(&dir.0);
    ([a1, a2, b1, b2], graph)
}

pub(crate) type LoadResult = (HashMap<u64, Vec<f32>>, HashMap<u64, usize>, usize);

/// Every request answered once, none failed, and the journal consistent with `n` releases.
pub(crate) fn assert_once_and_consistent(dir: &TempDir, n: usize, run: &LoadResult) {
    let (outputs, counts, errors) = run;
    assert_eq!(*errors, 0, "no request failed");
    assert_eq!(outputs.len(), n, "every request answered");
    assert!(counts.values().all(|&c| c == 1), "answered once each");
    let report = journal(dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.released, n);
    // Under non-determinism no released row was ever run again, so none can be contradicted (HAMS,
    // §II-C).
    assert_eq!(report.divergence, Divergence::default(), "{report:?}");
}

#[test]
fn an_nspb_node_answers_like_an_unreplicated_one_and_its_journal_is_consistent() {
    let dir = temp_dir("hams-equal");
    let (_a, _b, graph) = tracker(&dir, "eq", &[], &[]);
    assert_answers_like_unreplicated(&dir.0, &graph, "track-local", 30);
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert_eq!(report.released, 30, "every reply released through the gate");
    assert!(
        report.applied >= 30,
        "the backup applied every version: {report:?}"
    );
    assert!(
        report.states_compared >= 30,
        "each applied state was compared with the one its primary made (HAMS, §IV-B): {report:?}"
    );
    operator_check_agrees(&dir);
}

/// `weir hams check` on a clean journal succeeds; with one released reply journaled twice (a
/// tampered copy) it fails naming that contradiction.
fn operator_check_agrees(dir: &TempDir) {
    let folder = dir.0.to_string_lossy().into_owned();
    let clean = crate::cli::weir_ok(&["hams", "check", &folder]);
    assert!(clean.contains("consistent: no contradiction"), "{clean}");
    let events = read_dir(&dir.0).expect("journal readable");
    let released = events
        .iter()
        .find(|e| matches!(e, weir::hams::journal::Event::Released { .. }))
        .expect("a released reply");
    let tampered = dir.0.join("tampered.jsonl");
    let line = serde_json::to_string(released).expect("an event serializes");
    std::fs::write(&tampered, format!("{line}\n")).expect("write");
    let stderr = crate::cli::weir_fails(&["hams", "check", &folder]);
    assert!(
        stderr.contains("the first: exactly once: request") && stderr.contains("released 2 times"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&tampered);
    let missing = crate::cli::weir_fails(&["hams", "check", &format!("{folder}/none.jsonl")]);
    assert!(missing.contains("none.jsonl"), "{missing}");
}

#[test]
fn sigkill_of_a_primary_under_load_answers_every_request_once_without_conflicts() {
    // Exactly once, no conflicting outputs, duplicates suppressed: with perturbed rows, every
    // protocol message sent twice and state tuples reordered (a duplicating, reordering network),
    // the primary's SIGKILL loses nothing, answers nothing twice, applies nothing twice.
    let dir = temp_dir("hams-kill");
    let chaos = ["--perturb", "--duplicate-messages", "--reorder-messages"];
    let (mut a, _b, graph) = tracker(&dir, "k", &chaos, &chaos);
    let pid = a.pid();
    let run = load(&graph, 300, 8, 16, |i| {
        if i == 120 {
            signal(pid, "-KILL");
        }
    });
    a.sigkill();
    let recoveries = graph.hams().expect("manager").recoveries();
    assert_eq!(recoveries.len(), 1, "one failover: {recoveries:?}");
    graph.shutdown();
    assert_once_and_consistent(&dir, 300, &run);
}

fn chain<'a>(replicas_a: &'a [&'a str], replicas_b: &'a [&'a str]) -> [NodeSpec<'a>; 2] {
    [
        gru("a", "x", replicas_a, "nspb"),
        NodeSpec {
            id: "b",
            file: "gru_chain.onnx",
            input: "a.y",
            state: ("h_in", "h_out"),
            replicas: replicas_b,
            mode: "nspb",
        },
    ]
}

#[test]
fn a_reply_waits_while_its_state_is_not_durable() {
    // A reply leaves only once the states on its lineage are durable (HAMS, §IV-D): the backup's
    // state link is 3 s slow, so nothing is durable for 3 s; the reply is held by the release gate
    // (not lost, not released early), then released once.
    let dir = temp_dir("hams-hold");
    let (_a, _b, graph) = tracker(&dir, "h", &["--state-delay-ms", "3000"], &[]);
    let (tx, rx) = channel();
    let replies = Replies::default();
    replies.submit(
        &graph,
        0,
        vec![named("x", Tensor::f32(vec![8], input(0, 8)))],
        &tx,
    );
    let held_seen = wait_for(Duration::from_secs(2), || {
        graph.runtime().replies().held() == 1
    });
    assert!(held_seen, "the computed reply waits in the release gate");
    assert!(
        rx.try_recv().is_err(),
        "not released before its state is durable"
    );
    let (_, reply) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("released later");
    assert!(reply.is_ok());
    assert_eq!(graph.runtime().replies().held(), 0);
    assert_eq!(replies.counts().get(&0), Some(&1));
    graph.shutdown();
    // The primary answered before its state reached the backup: no stop-and-buffer (HAMS, §IV-C).
    let report = journal(&dir);
    assert!(report.timed >= 1, "{report:?}");
    assert_eq!(
        report.replied_before_backup_received, report.timed,
        "{report:?}"
    );
}

#[test]
fn remus_answers_only_after_the_backup_has_the_state() {
    // The stop-and-buffer baseline, for contrast with NSPB's early release (HAMS, §IV-C): with a
    // 100 ms state link, every batch is answered after its state reached the backup.
    let dir = temp_dir("hams-remus");
    let (_a, _b, graph) = tracker_in_mode(&dir, "rm", "remus", &["--state-delay-ms", "100"], &[]);
    assert_eq!(sequential(&graph, 5, 8).len(), 5);
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(report.timed >= 5, "{report:?}");
    assert_eq!(report.replied_before_backup_received, 0, "{report:?}");
}

#[test]
fn the_papers_service_graphs_in_graphs_hams_validate() {
    for name in ["autopilot", "fatigue", "online_learning"] {
        let path = repo().join(format!("graphs/hams/{name}.yaml"));
        let graph = load_graph(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(graph.warnings.items.len(), 0, "{name}: {}", graph.warnings);
        let stateful = graph
            .plan
            .nodes
            .iter()
            .filter(|n| matches!(&n.node.kind, weir_engine::plan::NodeKind::Model(m) if m.state.as_ref().is_some_and(|s| s.replicated())))
            .count();
        assert!(stateful >= 1, "{name} has replicated stateful nodes");
    }
}

#[test]
fn an_online_learning_node_learns_from_training_rows_across_a_failover() {
    // The stateful online-learning node: training rows update the weights (its state), inference
    // rows read them. Train on the digits rows, kill the primary halfway, keep training: the
    // promoted backup carries the learnt weights on, every reply leaves once, and the journal
    // shows no conflicting outputs under the perturbed (non-deterministic) gradient sums.
    let dir = temp_dir("hams-online");
    let model_file = [("learner", "online_logreg.onnx")];
    let (mut a, b) = pair(&dir.0, "o", &model_file, &["--perturb"], &["--perturb"]);
    let yaml = format!(
        "name: online\ninputs:\n  - {{name: pixels, dtype: f32, shape: [64]}}\n  - {{name: label, dtype: f32, shape: [10]}}\n  - {{name: train, dtype: f32, shape: [1]}}\nexecutors:\n  - {{name: {}, endpoint: \"{}\"}}\n  - {{name: {}, endpoint: \"{}\"}}\nnodes:\n  - normalize: {{id: scaled, input: pixels, mean: [0.0], std: [16.0]}}\n  - model:\n      id: learner\n      path: {}\n      inputs: {{x: scaled.output, label: label, train: train}}\n      batching: {{max_size: 8}}\n      state: {{inputs: [w_in], outputs: [w_out]}}\n      replicas: [{}, {}]\n      replication: {{mode: nspb, detect_ms: 300}}\n  - argmax: {{id: class, input: learner.probs}}\noutputs:\n  - {{name: class, from: class.index}}\n",
        a.name, a.endpoint, b.name, b.endpoint, model("online_logreg.onnx").display(), a.name, b.name
    );
    let path = dir.0.join("online.yaml");
    std::fs::write(&path, yaml).expect("graph written");
    let graph = start_graph(&path);
    graph.hams().expect("manager").journal_to(&dir.0);
    let rows = digits_rows();
    let (train_rows, test_rows) = rows.split_at(rows.len() * 3 / 4);
    let accuracy = |graph: &RunningGraph| -> f64 {
        let correct = test_rows
            .iter()
            .filter(|(x, label)| {
                let r = graph
                    .runtime()
                    .infer(digit_request(x, *label, false))
                    .expect("answered");
                r.output("class").and_then(|t| t.as_i64()).map(|c| c[0]) == Some(*label as i64)
            })
            .count();
        correct as f64 / test_rows.len() as f64
    };
    let before = accuracy(&graph);
    let replies = Replies::default();
    let (tx, rx) = channel();
    for (i, (x, label)) in train_rows.iter().enumerate() {
        replies.submit(&graph, i as u64, digit_request(x, *label, true), &tx);
        if i == train_rows.len() / 2 {
            a.sigkill();
        }
    }
    let mut answered = 0;
    while answered < train_rows.len() {
        let (_, r) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("every training row answered");
        assert!(r.is_ok());
        answered += 1;
    }
    let after = accuracy(&graph);
    assert!(replies.counts().values().all(|&c| c == 1));
    assert_eq!(graph.hams().expect("manager").recoveries().len(), 1);
    assert!(
        after > before + 0.3,
        "learnt across the failover: {before:.2} → {after:.2}"
    );
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

/// The digits rows `scripts/make_models.py` held out: 64 pixels and a label each.
fn digits_rows() -> Vec<(Vec<f32>, usize)> {
    let path = crate::common::weir_home().join("models/digits_test.csv");
    weir::workload::read_labelled_rows(&path, "pixels", 64)
        .expect("digits_test.csv")
        .into_iter()
        .map(|(x, label)| (x, label as usize))
        .collect()
}

fn digit_request(x: &[f32], label: usize, train: bool) -> Vec<weir::NamedTensor> {
    let mut onehot = vec![0.0; 10];
    onehot[label] = 1.0;
    vec![
        named("pixels", Tensor::f32(vec![64], x.to_vec())),
        named("label", Tensor::f32(vec![10], onehot)),
        named(
            "train",
            Tensor::f32(vec![1], vec![if train { 1.0 } else { 0.0 }]),
        ),
    ]
}

pub(crate) fn model_path(file: &str) -> String {
    model(file).display().to_string()
}

/// Polls `cond` every 5 ms until it holds or `limit` passes.
pub(crate) fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}
