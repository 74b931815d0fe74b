//! Kairos routing over real `weir executor` processes of three emulated instance types
//! (`--slowdown 1, 2, 3`: real ONNX Runtime inference, then a sleep), priced by the graph's
//! labels: every request is answered once and the outputs equal an in-process run, with latencies
//! learned online and with a given profile, and with `round_robin`. No wall-clock assertions.

use std::collections::HashMap;

use weir::workload::Workload;
use weir::{load_graph, start, RuntimeOptions};

use crate::common::{collect_outputs, model, repo, temp_dir};
use crate::distributed::{loopback, Executor};

/// A `weir executor --slowdown F` process (SIGKILLed when dropped) and its instance type.
struct Emulated {
    executor: Executor,
    instance_type: &'static str,
    cost_per_hour: f64,
}

impl Emulated {
    fn start(name: &str, slowdown: f64, instance_type: &'static str, cost_per_hour: f64) -> Self {
        let slowdown = slowdown.to_string();
        Emulated {
            executor: Executor::serving_with(
                name,
                &loopback(),
                "mlp_a.onnx",
                &["--slowdown", &slowdown],
            ),
            instance_type,
            cost_per_hour,
        }
    }
}

/// The MLP graph on `executors` (all replicas) with `routing` (a YAML flow value), or in-process.
fn graph_yaml(executors: &[Emulated], routing: Option<&str>) -> String {
    let mut yaml = "name: mlp\ninputs:\n  - {name: x, dtype: f32, shape: [64]}\n".to_string();
    if !executors.is_empty() {
        yaml.push_str("executors:\n");
        for e in executors {
            yaml.push_str(&format!(
                "  - {{name: {}, endpoint: \"{}\", labels: {{instance_type: {}, cost_per_hour: \"{}\"}}}}\n",
                e.executor.name(), e.executor.endpoint(), e.instance_type, e.cost_per_hour
            ));
        }
    }
    let replicas = if executors.is_empty() {
        "local".to_string()
    } else {
        executors
            .iter()
            .map(|e| e.executor.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 8}}\n      executor: {{timeout_ms: 5000}}\n      replicas: [{replicas}]\n",
        model("mlp_a.onnx").display()
    ));
    if let Some(r) = routing {
        yaml.push_str(&format!("      routing: {r}\n"));
    }
    yaml.push_str("outputs:\n  - {name: probs, from: m.probs}\n");
    yaml
}

/// Serves the graph in `yaml` over `n` items; checks each request was answered exactly once,
/// without error, and that no job failed in the pool. Returns outputs by item index.
fn serve(yaml: &str, n: usize) -> HashMap<u64, Vec<f32>> {
    let dir = temp_dir("kairos");
    let path = dir.0.join("graph.yaml");
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    let workload = Workload::random(&graph.plan, 16, 23);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let (out, replies) = collect_outputs(&running, &workload, n, "probs");
    let pools = running.replica_pools();
    running.shutdown();
    let counts = replies.counts();
    assert_eq!(counts.len(), n, "every request answered");
    assert!(counts.values().all(|&c| c == 1), "none answered twice");
    for (_, pool) in pools {
        assert_eq!(pool.stats().failed, 0, "{:?}", pool.replica_states());
    }
    out
}

fn assert_same(got: &HashMap<u64, Vec<f32>>, want: &HashMap<u64, Vec<f32>>, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, w) in want {
        let g = &got[i];
        assert_eq!(g.len(), w.len(), "{what}: request {i}");
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-5, "{what}: request {i}: {a} vs {b}");
        }
    }
}

#[test]
fn kairos_over_emulated_executor_types_answers_once_with_in_process_outputs() {
    let executors = vec![
        Emulated::start("fast", 1.0, "emu.fast", 1.0),
        Emulated::start("mid", 2.0, "emu.mid", 0.45),
        Emulated::start("slow", 3.0, "emu.slow", 0.3),
    ];
    let n = 150;
    let want = serve(&graph_yaml(&[], None), n);
    let learned = serve(&graph_yaml(&executors, Some("{kairos: {qos_ms: 50}}")), n);
    assert_same(&learned, &want, "kairos, latency learned online");
    let profile = repo().join("tests/kairos/emulated_profile.yaml");
    let profiled = serve(
        &graph_yaml(
            &executors,
            Some(&format!(
                "{{kairos: {{qos_ms: 50, profiles: \"{}\"}}}}",
                profile.display()
            )),
        ),
        n,
    );
    assert_same(&profiled, &want, "kairos, profiled latency");
    let round_robin = serve(&graph_yaml(&executors, Some("round_robin")), n);
    assert_same(&round_robin, &want, "round robin");
}
