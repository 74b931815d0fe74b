//! What a link does to a stream that a namespace's link cannot show (`weir_faults::proxy`): the
//! graph reaches its executor through a fault proxy that adds latency, stalls the stream while it
//! stays open, and resets it, a local replica beside the executor (`replicas: [cpu-a, local]`).
//! No request fails or is answered twice; a stalled stream's jobs move once their `timeout_ms`
//! passes; after the reset zenoh dials the executor again through the proxy, and it takes load
//! again.

use std::sync::Arc;
use std::time::Duration;

use weir::{load_graph, start, RuntimeOptions};
use weir_faults::load::Load;
use weir_faults::proxy::{Fault, FaultProxy};

use super::partition::{replica, stop, wait_for_remote_load};
use super::{assert_clean, mlp_reference};
use crate::distributed::{free_port, mlp_graph_at, Executor};

#[test]
fn a_delayed_stalled_and_reset_executor_stream_loses_nothing_and_carries_again() {
    let reference = Arc::new(mlp_reference());
    let port = free_port();
    let _executor = Executor::serving("cpu-a", &format!("tcp/127.0.0.1:{port}"), "mlp_a.onnx");
    let proxy = FaultProxy::start(([127, 0, 0, 1], port).into()).expect("the proxy starts");
    let through = format!("tcp/{}", proxy.addr());
    let graph = mlp_graph_at("stream", &[("cpu-a", &through)], &["cpu-a", "local"]);
    let loaded = load_graph(&graph.0).expect("valid graph");
    let running = Arc::new(start(loaded.plan, RuntimeOptions::default()).expect("starts"));
    let load = Load::start(&running, &reference, 4);
    wait_for_remote_load(&running, 0, "before the faults");

    // 200 ms more each way: slower, still within the job's 2 s `timeout_ms`.
    proxy.set(Fault::Delay(Duration::from_millis(200)));
    let before = replica(&running, "cpu-a").0;
    wait_for_remote_load(&running, before, "through a delayed stream");

    // Stalled past the job's timeout and the heartbeat's silence: its jobs move to `local`.
    proxy.set(Fault::Stall);
    std::thread::sleep(Duration::from_secs(4));
    let answered = load.answered();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        load.answered() > answered,
        "the local replica answers while the stream is stalled"
    );
    let before = replica(&running, "cpu-a").0;
    proxy.set(Fault::Pass);
    wait_for_remote_load(&running, before, "after the stall");

    // Reset: the session's stream ends at once, and zenoh dials the proxy again.
    let accepted = proxy.accepted();
    proxy.reset();
    let before = replica(&running, "cpu-a").0;
    wait_for_remote_load(&running, before, "after the reset");
    let outcome = load.finish();
    let stats = running.replica_pools()[0].1.stats();
    eprintln!(
        "stream faults: {} sent, {} right, pool {stats:?}",
        outcome.sent, outcome.right
    );
    assert_clean(&outcome, "delay, stall and reset");
    assert!(
        proxy.accepted() > accepted,
        "the graph reconnected through the proxy after the reset"
    );
    assert_eq!(stats.failed, 0, "{stats:?}");
    stop(running);
}
