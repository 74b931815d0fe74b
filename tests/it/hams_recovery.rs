//! HAMS failure recovery with real processes: primaries SIGKILLed or paused under load, alone, in
//! pairs, with their backups, beside a stateless executor, and members restarted — every request
//! answered once and the consistency journal clean after each. The harness (members, graphs, load,
//! journal) is `hams.rs`'s. The rules are those of "HAMS: High Availability for Distributed Machine
//! Learning Service Graphs" (§IV-D–§IV-E).

use std::time::Duration;

use weir::RunningGraph;

use crate::common::{signal, temp_dir};
use crate::distributed::loopback;
use crate::hams::{
    assert_once_and_consistent, chain_pairs, journal, load, model_path, pair, start_graph, tracker,
    tracker_in_mode, wait_for, LoadResult, Member, TRACK,
};

/// 200 requests, 8 at a time; `victims` are SIGKILLed together after the 100th is sent.
fn load_killing_at_100(graph: &RunningGraph, victims: &mut [&mut Member]) -> LoadResult {
    let pids: Vec<u32> = victims.iter().map(|m| m.pid()).collect();
    let run = load(graph, 200, 8, 8, |i| {
        if i == 100 {
            for &pid in &pids {
                signal(pid, "-KILL");
            }
        }
    });
    for m in victims.iter_mut() {
        m.sigkill();
    }
    run
}

/// The nodes rolled back by the graph's one and only recovery so far.
fn rolled_back_by_the_only_recovery(graph: &RunningGraph) -> Vec<String> {
    let recoveries = graph.hams().expect("manager").recoveries();
    assert_eq!(recoveries.len(), 1, "{recoveries:?}");
    recoveries[0]
        .rolled_back
        .iter()
        .map(|(n, _)| n.clone())
        .collect()
}

#[test]
fn a_failed_upstream_primary_rolls_back_a_downstream_node_that_consumed_its_speculation() {
    // A node that consumed a rolled-back version is rolled back too, by promoting its backup (HAMS,
    // §IV-E): a's state link is slow, so b runs on a's speculative outputs; killing a's primary
    // rolls a back to its backup's version and must roll b back too.
    let dir = temp_dir("hams-chain");
    let slow = ["--state-delay-ms", "150", "--perturb"];
    let ([mut a1, _a2, b1, b2], graph) = chain_pairs(&dir, "c", &slow, &["--perturb"]);
    let run = load_killing_at_100(&graph, &mut [&mut a1]);
    let manager = graph.hams().expect("manager");
    assert_eq!(
        rolled_back_by_the_only_recovery(&graph),
        ["a", "b"],
        "b consumed a's speculative versions and was rolled back"
    );
    let (promoted, demoted) = (
        format!("weir/executor/{}", b2.name),
        format!("weir/executor/{}", b1.name),
    );
    let swapped = wait_for(Duration::from_secs(5), || {
        manager.roles().iter().any(|r| {
            r.0 == "b"
                && r.2.as_deref() == Some(promoted.as_str())
                && r.3.as_deref() == Some(demoted.as_str())
        })
    });
    assert!(
        swapped,
        "b's backup was promoted and its old primary became the backup: {:?}",
        manager.roles()
    );
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}

#[test]
fn the_downstream_primary_rolls_back_to_its_retained_state_when_its_backup_died_too() {
    // The correlated failure of HAMS's Fig. 6 (§IV-C): a's state link is slow, so b runs on a's
    // speculative outputs; a's primary and b's *backup* die at once. b has no backup to promote, so
    // b's primary goes back to the state it retained at its durable version (the primary buffer
    // rule) and runs on solo; nothing released contradicts what runs after.
    let dir = temp_dir("hams-fig6");
    let slow = ["--state-delay-ms", "150", "--perturb"];
    let ([mut a1, _a2, b1, mut b2], graph) = chain_pairs(&dir, "f", &slow, &["--perturb"]);
    let run = load_killing_at_100(&graph, &mut [&mut a1, &mut b2]);
    let manager = graph.hams().expect("manager");
    assert_eq!(
        rolled_back_by_the_only_recovery(&graph),
        ["a", "b"],
        "b consumed a's speculation"
    );
    let roles = manager.roles();
    let b = roles.iter().find(|r| r.0 == "b").expect("node b");
    assert_eq!(
        (b.2.as_deref(), b.3.as_deref()),
        (Some(format!("weir/executor/{}", b1.name).as_str()), None),
        "b's primary stayed, rolled back and solo: {roles:?}"
    );
    assert!(b.1 >= 2, "b's primary moved to a new epoch: {roles:?}");
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}

#[test]
fn a_primary_whose_backup_dies_goes_on_solo_and_its_replies_are_still_released() {
    // Solo mode when the backup dies: it dies under load while versions wait for its
    // acknowledgement (a 50 ms state link). The primary goes solo; the versions it had shipped to
    // the dead backup become durable by the solo rule, so every held reply is released, once.
    let dir = temp_dir("hams-solo");
    let (_a, mut b, graph) = tracker(&dir, "s", &["--state-delay-ms", "50"], &[]);
    let run = load_killing_at_100(&graph, &mut [&mut b]);
    let roles = graph.hams().expect("manager").roles();
    assert_eq!(roles[0].3, None, "the primary runs solo: {roles:?}");
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}

#[test]
fn a_paused_primary_is_replaced_and_fenced_when_it_resumes() {
    // Stale-epoch fencing: SIGSTOP the primary past the detection timeout; its backup is promoted;
    // SIGCONT the old primary: whatever it still sends carries a stale epoch and is dropped.
    let dir = temp_dir("hams-stop");
    let (a, _b, graph) = tracker(&dir, "s", &["--perturb"], &["--perturb"]);
    let pid = a.pid();
    let run = load(&graph, 200, 8, 8, |i| {
        if i == 80 {
            signal(pid, "-STOP");
        }
        if i == 150 {
            signal(pid, "-CONT");
        }
    });
    let recoveries = graph.hams().expect("manager").recoveries();
    assert!(
        !recoveries.is_empty() && recoveries[0].reason.starts_with("suspected"),
        "{recoveries:?}"
    );
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}

#[test]
fn a_restarted_member_becomes_the_backup_and_a_second_failure_is_survived() {
    // Re-protection: after a failover the node runs solo; the killed executor restarts and is made
    // the new primary's backup by whole-state overwrite (HAMS, §IV-E); killing the new primary is
    // then survived too.
    let dir = temp_dir("hams-reprotect");
    let (mut a, mut b, graph) = tracker(&dir, "r", &[], &[]);
    let manager = graph.hams().expect("manager");
    let (a_name, a_endpoint, b_endpoint) = (a.name.clone(), a.endpoint.clone(), b.endpoint.clone());
    let (first, _, errors) = load(&graph, 60, 8, 4, |i| {
        if i == 30 {
            a.sigkill();
        }
    });
    assert_eq!((first.len(), errors), (60, 0));
    a = Member::start_on(
        &a_name,
        &a_endpoint,
        &[&b_endpoint],
        &[("track", "gru_stream.onnx")],
        &[],
        &dir.0,
    );
    let protected = wait_for(Duration::from_secs(10), || {
        manager
            .roles()
            .iter()
            .any(|r| r.3.as_deref() == Some(format!("weir/executor/{a_name}").as_str()))
    });
    assert!(
        protected,
        "the restarted member became the backup: {:?}",
        manager.roles()
    );
    let (second, counts, errors) = load(&graph, 60, 8, 4, |i| {
        if i == 30 {
            b.sigkill();
        }
    });
    assert_eq!(
        (second.len(), errors),
        (60, 0),
        "the second failure was survived"
    );
    assert!(counts.values().all(|&c| c == 1));
    assert_eq!(manager.recoveries().len(), 2);
    let status = graph.stateful_nodes()[0].status();
    assert_eq!(
        status.recorded, 0,
        "every saved output freed once its reply left (HAMS, §IV-D)"
    );
    assert_eq!(graph.runtime().replies().held(), 0);
    drop(a);
    graph.shutdown();
    let report = journal(&dir);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn two_adjacent_stateful_primaries_killed_together_are_both_replaced() {
    // Correlated failures (HAMS, §IV-E): the primaries of a and of b (its consumer) die at once;
    // both backups take over, every request is answered once and the journal shows no conflict.
    let dir = temp_dir("hams-correlated");
    let ([mut a1, a2, mut b1, b2], graph) = chain_pairs(&dir, "x", &[], &[]);
    let run = load_killing_at_100(&graph, &mut [&mut a1, &mut b1]);
    let roles = graph.hams().expect("manager").roles();
    for (node, backup) in [("a", &a2.name), ("b", &b2.name)] {
        let r = roles.iter().find(|r| r.0 == node).expect("node");
        assert_eq!(
            r.2.as_deref(),
            Some(format!("weir/executor/{backup}").as_str()),
            "{node}: {roles:?}"
        );
    }
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}

#[test]
fn a_checkpointed_node_replays_from_its_last_checkpoint_after_a_failover() {
    // The checkpoint-and-replay baseline: replies leave at once, the backup holds the state of
    // every 10th batch, and after the primary's SIGKILL the promoted backup replays every batch
    // since that checkpoint; every request is still answered once. Under the non-determinism option
    // the replay recomputes versions whose outputs were already released differently (HAMS, §II-C):
    // the journal shows re-executed versions with other outputs, which NSPB never releases.
    let dir = temp_dir("hams-checkpoint");
    let perturb = ["--perturb"];
    let (mut a, _b, graph) = tracker_in_mode(
        &dir,
        "cp",
        "checkpoint, checkpoint_every: 10",
        &perturb,
        &perturb,
    );
    let (outputs, counts, errors) = load_killing_at_100(&graph, &mut [&mut a]);
    assert_eq!((outputs.len(), errors), (200, 0));
    assert!(counts.values().all(|&c| c == 1));
    let recoveries = graph.hams().expect("manager").recoveries();
    assert_eq!(recoveries.len(), 1, "{recoveries:?}");
    let (_, cut) = recoveries[0].rolled_back[0];
    assert!(
        cut > 0 && cut % 10 == 0,
        "the backup held a checkpoint: {cut}"
    );
    assert_eq!(
        recoveries[0].retried, 0,
        "nothing runs again from the ingress: the proxy replays"
    );
    assert_eq!(
        graph.runtime().replies().held(),
        0,
        "no reply waits for durability"
    );
    let replayed = recoveries[0].replayed;
    graph.shutdown();
    let report = journal(&dir);
    // (A kill right at a checkpoint leaves nothing to replay: rare, and then nothing diverges.)
    if replayed > 0 {
        assert!(
            report.reexecuted > 0 && report.diverged > 0,
            "the replay recomputed released versions with other outputs: {report:?}"
        );
        // Replies already released are contradicted by the replayed state's outputs.
        let d = report.divergence;
        assert!(d.rows > 0, "released rows were run again: {report:?}");
        assert!(d.differ > 0 && d.differ <= d.rows, "{report:?}");
    }
}

#[test]
fn a_stateless_executor_and_the_adjacent_stateful_primary_killed_together_lose_nothing() {
    // A stateless node's failure and the adjacent stateful primary's, together (HAMS, §IV-E): the
    // stateless perception node runs on two executors (the replica pool is its hot standby) in
    // front of a replicated stateful tracker; one perception executor and the tracker's primary are
    // SIGKILLed at the same moment.
    let dir = temp_dir("hams-stateless");
    let p1_endpoint = loopback();
    let p2_endpoint = loopback();
    let p1 = crate::distributed::Executor::serving("hams-p1", &p1_endpoint, "affine.onnx");
    let p2 = crate::distributed::Executor::serving("hams-p2", &p2_endpoint, "affine.onnx");
    let (mut a, b) = pair(&dir.0, "sl", &TRACK, &["--perturb"], &["--perturb"]);
    let yaml = format!(
        "name: stateless-and-stateful\ninputs:\n  - {{name: x, dtype: f32, shape: [16]}}\nexecutors:\n  - {{name: hams-p1, endpoint: \"{}\"}}\n  - {{name: hams-p2, endpoint: \"{}\"}}\n  - {{name: {}, endpoint: \"{}\"}}\n  - {{name: {}, endpoint: \"{}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 4}}\n      executor: {{timeout_ms: 2000}}\n      replicas: [hams-p1, hams-p2]\n  - model:\n      id: track\n      path: {}\n      inputs: {{x: m.y}}\n      batching: {{max_size: 4}}\n      state: {{inputs: [h_in], outputs: [h_out]}}\n      replicas: [{}, {}]\n      replication: {{mode: nspb, detect_ms: 300}}\noutputs:\n  - {{name: y, from: track.y}}\n",
        p1_endpoint,
        p2_endpoint,
        a.name,
        a.endpoint,
        b.name,
        b.endpoint,
        model_path("affine.onnx"),
        model_path("gru_stream.onnx"),
        a.name,
        b.name
    );
    let path = dir.0.join("stateless.yaml");
    std::fs::write(&path, yaml).expect("graph written");
    let graph = start_graph(&path);
    graph.hams().expect("manager").journal_to(&dir.0);
    let (pa, pp) = (a.pid(), p1.pid());
    let run = load(&graph, 200, 16, 8, |i| {
        if i == 100 {
            signal(pa, "-KILL");
            signal(pp, "-KILL");
        }
    });
    a.sigkill();
    drop(p1);
    drop(p2);
    assert_eq!(graph.hams().expect("manager").recoveries().len(), 1);
    graph.shutdown();
    assert_once_and_consistent(&dir, 200, &run);
}
