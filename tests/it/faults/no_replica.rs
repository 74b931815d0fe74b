//! A node whose only replica is gone: `weir serve` answers its requests 503 with `Retry-After`
//! (nothing ran, a retry is safe) and is not ready meanwhile; a restarted executor makes it ready
//! and answering again.

use std::time::{Duration, Instant};

use crate::common::model;
use crate::distributed::{loopback, Executor};
use crate::serve::{http_full, mlp_request, Server, INFER};

/// Polls `ask` until it answers `want` (60 s at most), returning the last answer.
fn until(what: &str, want: u16, ask: impl Fn() -> (u16, String, String)) -> (u16, String, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = ask();
        if answer.0 == want {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: never {want}, last {answer:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_node_without_a_live_replica_is_503_with_retry_after_and_not_ready() {
    let endpoint = loopback();
    let mut executor = Executor::serving("only", &endpoint, "mlp_a.onnx");
    let graph = format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: only, endpoint: \"{endpoint}\"}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, replicas: [only]}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    );
    let server = Server::start(&[graph], &[]);
    let infer = || {
        http_full(
            &server.addr,
            "POST",
            INFER,
            &[],
            &mlp_request(64, "[64]", "FP32"),
        )
    };
    let ready = || http_full(&server.addr, "GET", "/v2/health/ready", &[], b"");
    let model_ready = || http_full(&server.addr, "GET", "/v2/models/mlp/ready", &[], b"");
    assert_eq!(infer().0, 200, "served while the executor lives");

    executor.sigkill();
    let (_, head, body) = until("a request with no live replica", 503, infer);
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "a 503 says when to retry: {head}"
    );
    assert!(body.contains("no replica is alive"), "{body}");
    let (_, _, why) = until("server readiness", 503, ready);
    assert!(
        why.contains("no live replica"),
        "readiness names the cause: {why}"
    );
    assert_eq!(model_ready().0, 503, "the model is not ready either");
    assert_eq!(
        http_full(&server.addr, "GET", "/v2/health/live", &[], b"").0,
        200,
        "alive all the same"
    );

    let _back = Executor::serving("only", &endpoint, "mlp_a.onnx");
    until("readiness after the restart", 200, ready);
    until("a request after the restart", 200, infer);
}
