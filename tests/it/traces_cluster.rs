//! Traces across a timely cluster: two `weir serve --processes 2` processes exporting to the real
//! OTLP receiver of [`crate::traces`], sampled requests sent to each process's port while their
//! rows run on either process's workers. Each request's trace is the client's, complete (every
//! parent in it) and has one root, the server span, each span exported once, and its model
//! node's span has the call's figures whichever process ran it (the records come home with the
//! rows), and a remote executor's span is under the hop of the process that sent it the job.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::common::temp_dir;
use crate::distributed::{loopback, metric_sum, mlp_graph, start_cluster, Executor};
use crate::ops::wait_until;
use crate::serve::{http, http_full, mlp_request, INFER};
use crate::traces::{parts, traceparent, Collector, Span};

#[test]
fn a_sampled_request_s_trace_is_whole_whichever_process_runs_its_rows() {
    let collector = Collector::start();
    let dir = temp_dir("traces-cluster");
    let graph = mlp_graph("traces-cluster", &[], &["local"]);
    let members = start_cluster(
        &dir.0,
        &graph.0,
        &["--otlp-endpoint", collector.url.as_str()],
    );
    // Request `i` to process `i % 2`, each under a trace of its own.
    let mut sent: Vec<(String, String, String, usize)> = Vec::new();
    for i in 0..24usize {
        let trace = format!("{:032x}", 0x5eed_0000_u128 + i as u128 + 1);
        let client_span = format!("{:016x}", 0xc11e_0000_u64 + i as u64 + 1);
        let header = format!("00-{trace}-{client_span}-01");
        let member = &members[i % 2];
        let (status, head, body) = http_full(
            &member.addr,
            "POST",
            INFER,
            &[("traceparent", header)],
            &mlp_request(64, "[64]", "FP32"),
        );
        assert_eq!(status, 200, "{body}");
        let (answered_trace, server_span, sampled) = parts(&traceparent(&head));
        assert_eq!(answered_trace, trace, "the client's trace");
        assert!(sampled);
        sent.push((trace, client_span, server_span, i % 2));
    }
    // Rows of requests entering at either process ran on both.
    for m in &members {
        let rows = metric_sum(
            &http(&m.addr, "GET", "/metrics", &[], b"").1,
            "weir_executor_rows_total",
        );
        assert!(rows > 0.0, "a process ran none of the rows");
    }
    for (trace, ..) in &sent {
        wait_until("every trace's spans", || {
            let names: HashSet<String> = collector
                .of_trace(trace)
                .into_iter()
                .map(|s| s.name)
                .collect();
            ["http infer mlp", "ingress", "m"]
                .iter()
                .all(|n| names.contains(*n))
        });
    }
    // Let any late span (a duplicate, from the other process) arrive too.
    std::thread::sleep(Duration::from_millis(800));
    // Hops run at the entering process and elsewhere, both seen.
    let mut ran_at = [0usize; 2];
    for (trace, client_span, server_span, entered) in &sent {
        let spans = collector.of_trace(trace);
        let mut ids: HashMap<&str, &Span> = HashMap::new();
        for s in &spans {
            assert!(
                ids.insert(s.span_id.as_str(), s).is_none(),
                "span {} exported twice in {trace}",
                s.name
            );
        }
        let roots: Vec<&Span> = spans
            .iter()
            .filter(|s| !ids.contains_key(s.parent.as_str()))
            .collect();
        assert_eq!(roots.len(), 1, "one root in {trace}: {roots:?}");
        assert_eq!(&roots[0].span_id, server_span);
        assert_eq!(&roots[0].parent, client_span);
        let parent_of = |name: &str| {
            let s = spans.iter().find(|s| s.name == name).expect(name);
            ids.get(s.parent.as_str()).map(|p| p.name.as_str())
        };
        assert_eq!(parent_of("ingress"), Some("http infer mlp"));
        assert_eq!(parent_of("m"), Some("ingress"));
        // A batch's seq counts in steps of the peers from its worker's index (one worker per
        // process here), so it names the process that ran the hop; its call's record came home
        // with the row when that was the other process.
        let m = spans.iter().find(|s| s.name == "m").expect("m");
        let seq = m.int("weir.batch_seq").expect("the hop's batch seq");
        let ran = usize::try_from(seq % 2).expect("a worker index");
        ran_at[usize::from(ran != *entered)] += 1;
        assert!(
            m.int("weir.batch_size").is_some_and(|b| b >= 1)
                && m.int("weir.run_us").is_some()
                && m.int("weir.queue_wait_us").is_some(),
            "the model hop's call, wherever it ran: {m:?}"
        );
    }
    assert!(
        ran_at.iter().all(|&n| n > 0),
        "hops ran both where requests entered and elsewhere: {ran_at:?}"
    );
    drop(members);
}

#[test]
fn a_remote_executor_s_span_is_under_the_hop_whichever_process_sent_the_job() {
    let collector = Collector::start();
    let dir = temp_dir("traces-cluster-remote");
    let executor = Executor::serving_with(
        "tr-c",
        &loopback(),
        "mlp_a.onnx",
        &["--otlp-endpoint", collector.url.as_str()],
    );
    let graph = mlp_graph("traces-cluster-remote", &[&executor], &["tr-c"]);
    let members = start_cluster(
        &dir.0,
        &graph.0,
        &["--otlp-endpoint", collector.url.as_str()],
    );
    let mut traces = Vec::new();
    for i in 0..8usize {
        let trace = format!("{:032x}", 0xe8ec_0000_u128 + i as u128 + 1);
        let header = format!("00-{trace}-{:016x}-01", 0xc11e_0000_u64 + i as u64 + 1);
        let (status, _, body) = http_full(
            &members[i % 2].addr,
            "POST",
            INFER,
            &[("traceparent", header)],
            &mlp_request(64, "[64]", "FP32"),
        );
        assert_eq!(status, 200, "{body}");
        traces.push(trace);
    }
    let mut seqs = HashSet::new();
    for trace in &traces {
        // The executor and the graph's process export on their own schedules.
        wait_until("the hop's and the executor's spans", || {
            let spans = collector.of_trace(trace);
            ["m", "executor m"]
                .iter()
                .all(|n| spans.iter().any(|s| s.name == *n))
        });
        let spans = collector.of_trace(trace);
        let m = spans.iter().find(|s| s.name == "m").expect("the hop");
        let e = spans
            .iter()
            .find(|s| s.name == "executor m")
            .expect("executor");
        assert_eq!(e.parent, m.span_id, "the executor's span under the hop");
        seqs.insert(m.int("weir.batch_seq").unwrap_or(0) % 2);
    }
    assert_eq!(seqs.len(), 2, "jobs were sent from both processes");
    drop(members);
    drop(executor);
}
