//! ParM end to end: an affine model (exactly decodable: its parity model adds the bias twice)
//! whose node runs on an in-process replica and a remote executor that is frozen with SIGSTOP
//! (a straggling host). The frozen host's requests are answered by reconstruction, marked as such,
//! equal to the model's real outputs; when the host thaws its late predictions are dropped, and
//! every request is answered exactly once.

use std::process::Command;
use std::time::{Duration, Instant};

use weir::{load_graph, start, RuntimeOptions, Tensor};

use crate::common::{assert_close, channel, direct_ort, model, Replies};
use crate::distributed::{free_port, Executor};

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[test]
fn a_frozen_replicas_requests_are_reconstructed_and_answered_once() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
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
    let (tx, rx) = channel();
    let n = 60u64;
    let rows: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            (0..16)
                .map(|j| ((i * 16 + j) % 11) as f32 / 11.0 - 0.4)
                .collect()
        })
        .collect();
    for (i, x) in rows.iter().enumerate() {
        running
            .runtime()
            .submit(
                vec![weir::NamedTensor {
                    name: "x".into(),
                    tensor: Tensor::f32(vec![16], x.clone()),
                }],
                replies.responder(i as u64, tx.clone()),
            )
            .expect("admitted");
    }
    let mut reconstructed = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = 0;
    while got < n {
        let (tag, r) = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("only {got} of {n} answered while a replica is frozen"));
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
            1e-4,
            &format!("request {tag} (reconstructed: {flag})"),
        );
        got += 1;
    }
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
