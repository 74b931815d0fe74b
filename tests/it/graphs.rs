//! Every graph in `graphs/` validates, plans and answers requests. A graph that decodes images is
//! sent a real one (a rendered text page of the set-up) in each `bytes` input, random letters being
//! no image.

use weir::workload::Workload;
use weir::{load_graph, start, DType, RuntimeOptions, Tensor};
use weir_engine::plan::NodeKind;
use weir_engine::validate::TensorOp;

use crate::common::{repo, weir_home};

#[test]
fn every_graph_file_validates_and_serves() {
    weir_home();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("graphs"))
        .expect("graphs/ exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let page = std::fs::read(weir_home().join("data/text_images/text_00.png"))
        .expect("a rendered page (scripts/setup.sh)");
    assert!(
        files.len() >= 3,
        "expected the quickstart, ensemble and digits graphs"
    );
    for path in files {
        let graph = load_graph(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            graph.warnings.items.len(),
            0,
            "{}: {}",
            path.display(),
            graph.warnings
        );
        let outputs = graph.plan.outputs.len();
        let decodes_images = graph
            .plan
            .nodes
            .iter()
            .any(|n| matches!(&n.node.kind, NodeKind::Op(TensorOp::DecodeImage { .. })));
        let workload = Workload::random(&graph.plan, 2, 1);
        let running = start(graph.plan, RuntimeOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for i in 0..2 {
            // Parameters name a sequence, as a per-sequence stateful node needs; others carry
            // them through.
            let mut inputs = workload.item(i).inputs;
            for input in inputs.iter_mut().filter(|_| decodes_images) {
                if input.tensor.dtype() == DType::Bytes {
                    let n = input.tensor.shape.iter().product();
                    input.tensor = Tensor::bytes(input.tensor.shape.clone(), vec![page.clone(); n]);
                }
            }
            let (tx, rx) = crossbeam_channel::bounded(1);
            let parameters = format!(r#"{{"sequence_id":{},"sequence_start":true}}"#, i + 1);
            running
                .runtime()
                .submit_until(
                    inputs,
                    Some(parameters.into()),
                    None,
                    Box::new(move |r| {
                        let _ = tx.send(r);
                    }),
                )
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let reply = rx
                .recv()
                .expect("answered")
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(reply.outputs.len(), outputs, "{}", path.display());
        }
        running.shutdown();
    }
}

#[test]
fn digits_graph_is_accurate_on_held_out_rows() {
    let graph = load_graph(&repo().join("graphs/digits.yaml")).expect("valid");
    let workload = Workload::labelled_csv(&graph.plan, &weir_home().join("models/digits_test.csv"))
        .expect("data set");
    let n = workload.len();
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let spec = weir::loadgen::LoadSpec {
        requests: n,
        warmup: 0,
        arrival: weir::loadgen::Arrival::Closed { concurrency: 8 },
        seed: 1,
        label_output: Some("class".into()),
        progress: false,
    };
    let report = weir::loadgen::run_load(running.runtime(), &workload, &spec);
    running.shutdown();
    assert_eq!(report.ok, n);
    assert!(
        report.mean_send_lateness.is_zero(),
        "closed loop has no schedule to be late for"
    );
    let (correct, total) = report.accuracy.expect("labelled");
    assert_eq!(total, n);
    assert!(
        correct as f64 / total as f64 > 0.95,
        "accuracy {correct}/{total}"
    );
}
