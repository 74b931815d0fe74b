//! Fan-out and fan-in: every request is answered exactly once, with the right rows joined.

use std::path::Path;

use weir::lineage::CLIENT;
use weir::workload::Workload;
use weir::{plan_spec, start, DType, GraphSpec, ModelBuilder, RuntimeOptions, Tensor};

use crate::common::{assert_close, channel, direct_ort, model, two_workers, Replies};

fn fan_graph() -> GraphSpec {
    GraphSpec::builder("fan")
        .input("x", DType::F32, &[64])
        .model(
            ModelBuilder::new("a", model("mlp_a.onnx"))
                .input("x", "x")
                .batching(4, 300),
        )
        .model(ModelBuilder::new("b", model("mlp_b.onnx")).input("x", "x"))
        .concat("both", &["a.probs", "b.probs"], -1)
        .argmax("best", "both")
        .output("both", "both")
        .output("best", "best")
        .build()
}

#[test]
fn every_request_answered_once_with_its_own_join() {
    let graph = plan_spec(&fan_graph(), Path::new(".")).expect("valid");
    let workload = Workload::random(&graph.plan, 50, 11);
    let running = start(graph.plan, two_workers()).expect("starts");
    let replies = Replies::default();
    let (tx, rx) = channel();
    let n = 300u64;
    let mut inputs = Vec::new();
    for tag in 0..n {
        let item = workload.item(tag as usize);
        inputs.push(item.inputs[0].tensor.as_f32().expect("f32").to_vec());
        // Every third request carries parameters; they must come out of the join untouched.
        let parameters = (tag % 3 == 0).then(|| format!("{{\"tag\":{tag}}}").into());
        running
            .runtime()
            .submit_until(
                item.inputs,
                parameters,
                None,
                replies.responder(tag, tx.clone()),
            )
            .expect("admitted");
    }
    drop(tx);
    let mut got = 0;
    let mut request_ids = std::collections::HashSet::new();
    for (tag, r) in rx.iter().take(n as usize) {
        let reply = r.expect("answered with outputs");
        assert!(
            request_ids.insert(reply.request_id),
            "request id {} answered twice",
            reply.request_id
        );
        let want_parameters = (tag % 3 == 0).then(|| format!("{{\"tag\":{tag}}}"));
        assert_eq!(
            reply.parameters, want_parameters,
            "parameters of request {tag}"
        );
        let x = &inputs[tag as usize];
        let mut want = direct_ort(&model("mlp_a.onnx"), "x", &[1, 64], x);
        want.extend(direct_ort(&model("mlp_b.onnx"), "x", &[1, 64], x));
        let both = reply.output("both").and_then(Tensor::as_f32).expect("both");
        assert_close(both, &want, 1e-5, "joined scores");
        let best = reply.output("best").and_then(Tensor::as_i64).expect("best")[0];
        let argmax = want
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i as i64);
        assert_eq!(Some(best), argmax);
        // Lineage: the client, the ingress, both branches, the join and the argmax.
        assert_eq!(reply.lineage[0].pred_node, CLIENT);
        assert_eq!(reply.lineage[0].pred_seq, reply.request_id);
        let nodes: std::collections::BTreeSet<u32> = reply.lineage.iter().map(|e| e.node).collect();
        assert_eq!(nodes.len(), 5, "lineage {:?}", reply.lineage);
        got += 1;
    }
    assert_eq!(got, n);
    let counts = replies.counts();
    assert_eq!(counts.len(), n as usize);
    assert!(
        counts.values().all(|&c| c == 1),
        "some request answered more than once"
    );
    assert_eq!(running.runtime().duplicate_answers(), 0);
    running.shutdown();
}

#[test]
fn shutdown_answers_everything_admitted() {
    let graph = plan_spec(&fan_graph(), Path::new(".")).expect("valid");
    let workload = Workload::random(&graph.plan, 10, 5);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let replies = Replies::default();
    let (tx, rx) = channel();
    for tag in 0..200 {
        replies.submit(&running, tag, workload.item(tag as usize).inputs, &tx);
    }
    drop(tx);
    running.runtime().shutdown();
    assert_eq!(rx.iter().filter(|(_, r)| r.is_ok()).count(), 200);
    assert!(replies.counts().values().all(|&c| c == 1));
    let refused = running.runtime().infer(workload.item(0).inputs);
    assert!(
        matches!(refused, Err(weir::RequestError::ShuttingDown { .. })),
        "{refused:?}"
    );
}
