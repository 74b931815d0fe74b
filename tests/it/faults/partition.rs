//! A remote executor's link cut while both ends run, with a local replica beside it
//! (`replicas: [cpu-a, local]`): the jobs on the dark link are re-dispatched, no request fails,
//! and once the link is back the executor takes load again. Then the same link flapping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::{load_graph, start, RuntimeOptions};

use weir_faults::load::Load;
use weir_faults::netns::Netns;

use super::{assert_clean, mlp_reference};
use crate::distributed::{mlp_graph, Executor};

/// The zenoh port the executor listens on inside its namespace (a namespace of its own: free).
const PORT: u16 = 7447;

/// A namespace with `weir executor --name cpu-a` listening in it, and the graph (run in this
/// process) with the model node on `[cpu-a, local]`.
fn executor_beside_local(tag: &str) -> (Netns, Executor, Arc<weir::RunningGraph>) {
    let ns = Netns::create();
    let endpoint = format!("tcp/{}:{PORT}", ns.ip());
    let executor = Executor::listening_from(
        ns.command(env!("CARGO_BIN_EXE_weir")),
        "cpu-a",
        &endpoint,
        "mlp_a.onnx",
    );
    let graph = mlp_graph(tag, &[&executor], &["cpu-a", "local"]);
    let loaded = load_graph(&graph.0).expect("valid graph");
    let running = Arc::new(start(loaded.plan, RuntimeOptions::default()).expect("starts"));
    (ns, executor, running)
}

/// Jobs the pool has sent to `replica` so far, and whether it is alive now.
pub(super) fn replica(running: &weir::RunningGraph, replica: &str) -> (u64, bool) {
    let pools = running.replica_pools();
    let (_, pool) = pools.first().expect("the node has a replica pool");
    pool.replica_states()
        .into_iter()
        .find(|s| s.0 == replica)
        .map(|s| (s.3, s.1))
        .unwrap_or_else(|| panic!("no replica `{replica}`"))
}

/// Jobs `cpu-a` must take to count as taking load.
const TAKES_LOAD: u64 = 20;

/// Waits (under load) until `cpu-a` has been sent [`TAKES_LOAD`] jobs more than `before`.
pub(super) fn wait_for_remote_load(running: &weir::RunningGraph, before: u64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while replica(running, "cpu-a").0 < before + TAKES_LOAD {
        assert!(
            Instant::now() < deadline,
            "{what}: the remote executor took no load (alive: {})",
            replica(running, "cpu-a").1
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_executor_partitioned_and_healed_loses_nothing_and_takes_load_again() {
    let reference = Arc::new(mlp_reference());
    let (ns, _executor, running) = executor_beside_local("partition");
    let load = Load::start(&running, &reference, 6);
    wait_for_remote_load(&running, 0, "before the cut");
    ns.cut();
    // Long enough for in-flight jobs to time out and the heartbeat to fall silent, shorter
    // than zenoh's lease (the session survives: the link heals under it).
    std::thread::sleep(Duration::from_secs(5));
    let answered_in_cut = load.answered();
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        load.answered() > answered_in_cut,
        "the local replica answers while the link is down"
    );
    let at_heal = replica(&running, "cpu-a").0;
    ns.heal();
    wait_for_remote_load(&running, at_heal, "after the heal");
    let outcome = load.finish();
    let pools = running.replica_pools();
    let stats = pools[0].1.stats();
    eprintln!(
        "partition and heal: {outcome:?}, pool {stats:?}, cpu-a took {at_heal} jobs by the heal"
    );
    assert_clean(&outcome, "partition and heal");
    assert!(
        stats.redispatched >= 1,
        "the dark link's jobs were re-dispatched: {stats:?}"
    );
    assert_eq!(stats.failed, 0, "{stats:?}");
    stop(running);
}

/// Shuts the graph down (the clients have let go of it).
pub(super) fn stop(running: Arc<weir::RunningGraph>) {
    if let Ok(running) = Arc::try_unwrap(running) {
        running.shutdown();
    }
}

#[test]
fn a_flapping_link_answers_every_request_once() {
    let reference = Arc::new(mlp_reference());
    let (ns, _executor, running) = executor_beside_local("flap");
    let load = Load::start(&running, &reference, 4);
    wait_for_remote_load(&running, 0, "before flapping");
    // Down two seconds, up two seconds, for about thirty.
    for _ in 0..7 {
        ns.cut();
        std::thread::sleep(Duration::from_secs(2));
        ns.heal();
        std::thread::sleep(Duration::from_secs(2));
    }
    let at_end = replica(&running, "cpu-a").0;
    wait_for_remote_load(&running, at_end, "after flapping");
    let outcome = load.finish();
    let stats = running.replica_pools()[0].1.stats();
    eprintln!("flapping: {outcome:?}, pool {stats:?}");
    assert!(outcome.sent > 0, "no load");
    assert!(
        outcome.not_once.is_empty(),
        "answered other than once: {:?}",
        outcome.not_once
    );
    assert!(
        outcome.wrong.is_empty(),
        "wrong answers: {:?}",
        outcome.wrong
    );
    assert!(
        outcome.non_retryable().is_empty(),
        "failed with a status that forbids a retry: {:?}",
        outcome.non_retryable()
    );
    stop(running);
}
