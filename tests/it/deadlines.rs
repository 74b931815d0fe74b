//! Deadline-aware dispatch through the real process: a burst far beyond what a slow remote
//! executor can serve within the request timeout gets every request answered once (200 in time,
//! 504 otherwise), the requests nobody waits for any more are not run (counted per node), and the
//! server goes on answering.

use std::time::Duration;

use crate::common::model;
use crate::distributed::{loopback, Executor};
use crate::serve::Server;

/// Requests in the burst.
const BURST: usize = 64;
/// The emulated executor's time per job: one session, so at most `TIMEOUT_MS / CALL_MS` jobs can
/// be answered within a request's timeout, whatever this machine's speed.
const CALL_MS: u64 = 40;
const TIMEOUT_MS: u64 = 300;

fn counter(metrics: &str, line_start: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[test]
fn requests_past_their_deadline_are_answered_504_once_and_not_run() {
    let endpoint = loopback();
    let latency = format!("{CALL_MS},0");
    let _executor = Executor::serving_with(
        "slow",
        &endpoint,
        "mlp_a.onnx",
        &["--emulate-latency", &latency],
    );
    let graph = format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: slow, endpoint: \"{endpoint}\"}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, replicas: [slow]}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    );
    let timeout = TIMEOUT_MS.to_string();
    let server = Server::start(&[graph], &["--request-timeout-ms", &timeout]);
    // One request first, so the burst meets a connected, warm replica.
    let (status, body) = server.post_good(&[]);
    assert_eq!(status, 200, "{body}");

    let statuses: Vec<(u16, String)> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..BURST)
            .map(|_| s.spawn(|| server.post_good(&[])))
            .collect();
        clients
            .into_iter()
            .map(|c| c.join().expect("client thread"))
            .collect()
    });
    let ok = statuses.iter().filter(|(s, _)| *s == 200).count();
    let late: Vec<&String> = statuses
        .iter()
        .filter(|(s, _)| *s == 504)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(
        ok + late.len(),
        BURST,
        "every request is answered 200 or 504: {statuses:?}"
    );
    for body in &late {
        assert!(
            body.contains(&format!("deadline of {TIMEOUT_MS} ms")),
            "{body}"
        );
    }

    // Give replies to jobs that ran past their deadline time to come back, then read the counts.
    std::thread::sleep(Duration::from_millis(4 * CALL_MS));
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    let expired = counter(
        &metrics,
        "weir_node_expired_total{graph=\"mlp\",node=\"m\"} ",
    );
    let answered_ok = counter(
        &metrics,
        "weir_requests_total{graph=\"mlp\",outcome=\"ok\"} ",
    );
    let answered_late = counter(
        &metrics,
        "weir_requests_total{graph=\"mlp\",outcome=\"deadline_exceeded\"} ",
    );
    // The executor runs one job per CALL_MS, so while the burst arrives and its clients wait
    // (TIMEOUT_MS) it can run a few of them: far from all, however slowly the clients connect
    // (a quarter of the burst is left even if they take 1.6 s).
    assert!(
        expired as usize >= BURST / 4,
        "expired {expired} of {BURST}; {ok} answered in time"
    );
    // Only a request that timed out may have been expired, each once.
    assert!(expired as usize <= late.len(), "{expired} > {}", late.len());
    assert_eq!(
        (answered_ok, answered_late),
        (ok as u64 + 1, late.len() as u64),
        "{metrics}"
    );

    // The server goes on answering.
    let (status, body) = server.post_good(&[]);
    assert_eq!(status, 200, "{body}");
}
