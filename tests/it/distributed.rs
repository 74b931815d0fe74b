//! Remote executors as real `weir executor` processes over zenoh on loopback (explicit
//! `tcp/127.0.0.1:<port>` endpoints, no multicast scouting): equal outputs, SIGKILL under load with
//! every request answered once, and a restarted executor taking load again.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use weir::workload::Workload;
use weir::{load_graph, start, RuntimeOptions, Tensor};

use crate::common::{
    channel, collect_outputs, model, repo, signal, spawn_executor, temp_dir, Replies,
};

/// A free TCP port on loopback (bound, read, released).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A zenoh TCP endpoint on a free loopback port.
pub(crate) fn loopback() -> String {
    format!("tcp/127.0.0.1:{}", free_port())
}

/// A `weir executor` process, SIGKILLed when dropped (so a failing test leaves nothing behind).
pub(crate) struct Executor {
    child: Child,
    name: String,
    endpoint: String,
}

impl Executor {
    fn start(name: &str, endpoint: &str) -> Executor {
        Executor::serving(name, endpoint, "mlp_a.onnx")
    }

    /// An executor serving the test model `file` as model `m`, listening on `endpoint`.
    pub(crate) fn serving(name: &str, endpoint: &str, file: &str) -> Executor {
        Executor::serving_with(name, endpoint, file, &[])
    }

    /// [`Executor::serving`] with more `weir executor` arguments.
    pub(crate) fn serving_with(name: &str, endpoint: &str, file: &str, extra: &[&str]) -> Executor {
        Executor::spawn(name, "--listen", endpoint, file, extra)
    }

    /// An executor that connects to `endpoint` (a graph listening there) instead of listening.
    fn connecting(name: &str, endpoint: &str) -> Executor {
        Executor::spawn(name, "--connect", endpoint, "mlp_a.onnx", &[])
    }

    fn spawn(name: &str, mode: &str, endpoint: &str, file: &str, extra: &[&str]) -> Executor {
        let base = Command::new(env!("CARGO_BIN_EXE_weir"));
        Executor::spawn_from(base, name, mode, endpoint, file, extra)
    }

    /// An executor serving `file` as model `m`, listening on `endpoint`, started by `base` (the
    /// `weir` binary, or a command that runs it elsewhere: in a network namespace, say).
    pub(crate) fn listening_from(
        base: Command,
        name: &str,
        endpoint: &str,
        file: &str,
    ) -> Executor {
        Executor::spawn_from(base, name, "--listen", endpoint, file, &[])
    }

    fn spawn_from(
        mut base: Command,
        name: &str,
        mode: &str,
        endpoint: &str,
        file: &str,
        extra: &[&str],
    ) -> Executor {
        let model_arg = format!("m={}", model(file).display());
        // Eight rows a call unless the caller sets its own.
        let max_batch: &[&str] = if extra.contains(&"--max-batch") {
            &[]
        } else {
            &["--max-batch", "8"]
        };
        let child = spawn_executor(
            base.args(["executor", "--name", name, mode, endpoint])
                .args(["--model", &model_arg])
                .args(max_batch)
                .args(extra),
            name,
        );
        Executor {
            child,
            name: name.to_string(),
            endpoint: endpoint.to_string(),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(crate) fn sigkill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.sigkill();
    }
}

pub(crate) struct TempGraph(pub(crate) PathBuf);

impl Drop for TempGraph {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Writes the MLP graph with its model node on `replicas` (executor names or `local`).
pub(crate) fn mlp_graph(tag: &str, executors: &[&Executor], replicas: &[&str]) -> TempGraph {
    let at: Vec<(&str, &str)> = executors
        .iter()
        .map(|e| (e.name.as_str(), e.endpoint.as_str()))
        .collect();
    mlp_graph_at(tag, &at, replicas)
}

/// [`mlp_graph`] with each executor reached at an endpoint of the test's choosing (a fault
/// proxy in front of it, say): `(name, endpoint)`.
pub(crate) fn mlp_graph_at(tag: &str, executors: &[(&str, &str)], replicas: &[&str]) -> TempGraph {
    let mut yaml =
        "name: mlp\ninputs:\n  - {name: x, dtype: f32, shape: [64]}\nexecutors:\n".to_string();
    for (name, endpoint) in executors {
        yaml.push_str(&format!(
            "  - {{name: {name}, endpoint: \"{endpoint}\", labels: {{instance_type: cpu-small, cost_per_hour: 0.1}}}}\n",
        ));
    }
    if executors.is_empty() {
        yaml = yaml.replace("executors:\n", "");
    }
    yaml.push_str(&format!(
        "nodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      batching: {{max_size: 8}}\n      executor: {{timeout_ms: 2000}}\n      replicas: [{}]\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display(),
        replicas.join(", ")
    ));
    let path = std::env::temp_dir().join(format!(
        "weir-it-dist-{tag}-{}-{:?}.yaml",
        std::process::id(),
        Instant::now()
    ));
    std::fs::write(&path, yaml).expect("write graph");
    TempGraph(path)
}

fn three_executors() -> Vec<Executor> {
    (0..3)
        .map(|i| Executor::start(&format!("e{i}"), &loopback()))
        .collect()
}

/// Runs `n` workload items through the graph at `path`; returns outputs by item index, after
/// checking each was answered exactly once.
pub(crate) fn run_items(path: &Path, n: usize) -> HashMap<u64, Vec<f32>> {
    let graph = load_graph(path).expect("valid graph");
    let workload = Workload::random(&graph.plan, 16, 11);
    let running = start(graph.plan, RuntimeOptions::default()).expect("starts");
    let (out, replies) = collect_outputs(&running, &workload, n, "probs");
    running.shutdown();
    assert!(replies.counts().values().all(|&c| c == 1));
    assert_eq!(out.len(), n);
    out
}

#[test]
fn three_remote_executors_give_the_in_process_outputs() {
    let executors = three_executors();
    let refs: Vec<&Executor> = executors.iter().collect();
    let remote = mlp_graph("remote", &refs, &["e0", "e1", "e2"]);
    let local = mlp_graph("local", &[], &["local"]);
    let n = 90;
    let got = run_items(&remote.0, n);
    let want = run_items(&local.0, n);
    for i in 0..n as u64 {
        let (g, w) = (&got[&i], &want[&i]);
        assert_eq!(g.len(), w.len());
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-5, "request {i}: {a} vs {b}");
        }
    }
}

#[test]
fn sigkill_of_an_executor_under_load_loses_nothing_and_a_restart_takes_load_again() {
    let mut executors = three_executors();
    let refs: Vec<&Executor> = executors.iter().collect();
    let graph = mlp_graph("kill", &refs, &["e0", "e1", "e2"]);
    let loaded = load_graph(&graph.0).expect("valid graph");
    let workload = Workload::random(&loaded.plan, 16, 5);
    let running = start(loaded.plan, RuntimeOptions::default()).expect("starts");
    let pool = running
        .replica_pools()
        .into_iter()
        .next()
        .expect("the node has a replica pool")
        .1;
    let replies = Replies::default();
    let (tx, rx) = channel();
    let total = 600u64;
    let submit = |i: u64| {
        replies.submit(&running, i, workload.item(i as usize).inputs, &tx);
    };
    // The kill must provably land on calls in flight. Killing whichever replica shows a call
    // outstanding is not enough (its answer may already be on the wire, and the pool then sends
    // the dead one nothing more), nor is waiting for answers to be counted here (the graph can
    // finish all of them first). So: a sixth of the requests in, freeze one executor (SIGSTOP: it
    // can no longer answer), send the rest, and SIGKILL it once the pool has sent it a call after
    // the freeze, or a call from before the freeze has timed out.
    for i in 0..total / 6 {
        submit(i);
    }
    let states = pool.replica_states();
    let victim = states.iter().position(|s| s.2 > 0).unwrap_or(0);
    signal(executors[victim].pid(), "-STOP");
    let mut kill = Kill::Frozen {
        victim,
        dispatched: states[victim].3,
        redispatched: pool.stats().redispatched,
    };
    for i in total / 6..total {
        submit(i);
    }
    let mut answered = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered < total {
        assert!(
            Instant::now() < deadline,
            "only {answered} of {total} answered"
        );
        if let Ok((tag, r)) = rx.recv_timeout(Duration::from_millis(20)) {
            if let Err(e) = r {
                panic!("request {tag} failed while replicas were alive: {e}");
            }
            answered += 1;
        }
        if let Kill::Frozen {
            victim,
            dispatched,
            redispatched,
        } = kill
        {
            if pool.replica_states()[victim].3 > dispatched
                || pool.stats().redispatched > redispatched
            {
                executors[victim].sigkill();
                kill = Kill::Done(victim);
            }
        }
    }
    let Kill::Done(victim) = kill else {
        panic!("all {total} answered before the frozen executor held a call ({kill:?})")
    };
    let counts = replies.counts();
    assert_eq!(counts.len() as u64, total, "every request answered");
    assert!(
        counts.values().all(|&c| c == 1),
        "no request answered twice"
    );
    let stats = pool.stats();
    assert!(
        stats.redispatched >= 1,
        "the killed executor's queries were re-dispatched: {stats:?}"
    );
    assert_eq!(stats.failed, 0);

    // Restart it on the same endpoint: the graph reconnects and gives it work again.
    let name = format!("e{victim}");
    let endpoint = executors[victim].endpoint.clone();
    executors[victim] = Executor::start(&name, &endpoint);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pool.replica_states()[victim].1 {
        assert!(Instant::now() < deadline, "{name} never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Waves of requests until it is given some: requests that arrive together may be batched
    // into fewer jobs than there are replicas, so one wave need not reach it.
    let before = pool.replica_states()[victim].3;
    let mut next = total;
    while pool.replica_states()[victim].3 == before {
        assert!(
            Instant::now() < deadline + Duration::from_secs(30),
            "restarted {name} took no work ({} requests since it came back)",
            next - total
        );
        let (tx, rx) = channel();
        for _ in 0..12 {
            let item = workload.item((next % 16) as usize).inputs;
            replies.submit(&running, next, item, &tx);
            next += 1;
        }
        drop(tx);
        for (tag, r) in rx.iter() {
            r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        }
    }
    let counts = replies.counts();
    assert_eq!(counts.len() as u64, next, "every request answered");
    assert!(
        counts.values().all(|&c| c == 1),
        "no request answered twice"
    );
    running.shutdown();
}

/// Where the SIGKILL test is in killing its victim executor.
#[derive(Debug)]
enum Kill {
    /// SIGSTOPped, with its pool counters at that moment.
    Frozen {
        victim: usize,
        dispatched: u64,
        redispatched: u64,
    },
    Done(usize),
}

/// A `weir serve` process of a timely cluster, SIGKILLed when dropped.
pub(crate) struct ClusterMember {
    child: Child,
    pub(crate) addr: String,
}

/// Two `weir serve --processes 2` processes over `graph` (with `extra` flags), their host file in
/// `dir`, both serving once this returns.
pub(crate) fn start_cluster(dir: &Path, graph: &Path, extra: &[&str]) -> Vec<ClusterMember> {
    let hosts = dir.join("hosts.txt");
    std::fs::write(
        &hosts,
        format!("127.0.0.1:{}\n127.0.0.1:{}\n", free_port(), free_port()),
    )
    .expect("host file");
    // Both processes must be started before either can finish joining the cluster.
    let mut children: Vec<Child> = (0..2)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_weir"))
                .arg("serve")
                .arg(graph)
                .args(["--http", "127.0.0.1:0", "--processes", "2"])
                .args(["--process", &i.to_string()])
                .arg("--hostfile")
                .arg(&hosts)
                .args(extra)
                .current_dir(repo())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("weir serve starts")
        })
        .collect();
    children
        .drain(..)
        .map(|mut child| {
            // timely prints its connection progress on stdout before weir's address line.
            let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
            let addr = loop {
                let mut line = String::new();
                let n = reader.read_line(&mut line).expect("reads stdout");
                assert!(n > 0, "weir serve exited before serving");
                if let Some(a) = line.trim().strip_prefix("weir serving http://") {
                    break a.to_string();
                }
            };
            ClusterMember { child, addr }
        })
        .collect()
}

impl Drop for ClusterMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[test]
fn two_process_timely_cluster_answers_requests_entering_at_both() {
    use crate::serve::http;
    let dir = temp_dir("cluster");
    let graph = mlp_graph("cluster", &[], &["local"]);
    let members = start_cluster(&dir.0, &graph.0, &[]);
    let body = |i: usize| {
        let x: Vec<String> = (0..64)
            .map(|j| format!("{}", ((i + j) % 9) as f32 / 9.0))
            .collect();
        format!(
            r#"{{"id":"q{i}","inputs":[{{"name":"x","shape":[64],"datatype":"FP32","data":[{}]}}]}}"#,
            x.join(",")
        )
    };
    // Request `i` entering at `member`, answered with 200: the reply's body.
    let infer_at = |member: &ClusterMember, i: usize| {
        let (status, reply) = http(
            &member.addr,
            "POST",
            "/v2/models/mlp/infer",
            &[],
            body(i).as_bytes(),
        );
        assert_eq!(status, 200, "{reply}");
        reply
    };
    // Requests enter at process 0 only: rows spread over both processes' workers.
    for i in 0..40 {
        let reply = infer_at(&members[0], i);
        assert!(reply.contains(&format!("\"id\":\"q{i}\"")), "{reply}");
    }
    let rows_at = |m: &ClusterMember| {
        metric_sum(
            &http(&m.addr, "GET", "/metrics", &[], b"").1,
            "weir_executor_rows_total",
        )
    };
    assert!(rows_at(&members[0]) > 0.0);
    assert!(
        rows_at(&members[1]) > 0.0,
        "no row of process 0's requests ran on process 1"
    );
    // And requests entering at process 1 are answered there, correctly.
    for i in 40..60 {
        let reply = infer_at(&members[1], i);
        let v: serde_json::Value = serde_json::from_str(&reply).expect("JSON");
        assert_eq!(v["id"], format!("q{i}"));
        let got: Vec<f32> = v["outputs"][0]["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|d| d.as_f64().expect("number") as f32)
            .collect();
        let x: Vec<f32> = (0..64).map(|j| ((i + j) % 9) as f32 / 9.0).collect();
        let want = crate::common::direct_ort(&model("mlp_a.onnx"), "x", &[1, 64], &x);
        crate::common::assert_close(&got, &want, 1e-5, "cluster reply");
    }
    drop(members);
}

#[test]
fn an_executor_can_connect_to_a_listening_graph() {
    // The executor starts first and dials the graph's endpoint until the graph listens there.
    let endpoint = loopback();
    let _executor = Executor::connecting("dialer", &endpoint);
    let yaml = format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: dialer}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}, replicas: [dialer]}}\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    );
    let path = std::env::temp_dir().join(format!("weir-it-dial-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml).expect("write graph");
    let graph = load_graph(&path).expect("valid graph");
    let _ = std::fs::remove_file(&path);
    let workload = Workload::random(&graph.plan, 4, 1);
    let distributed = weir::DistributedOptions {
        listen: vec![endpoint],
        ..Default::default()
    };
    let running = weir::start_distributed(graph.plan, RuntimeOptions::default(), &distributed)
        .expect("the executor dials in and comes alive");
    for i in 0..20 {
        let reply = running
            .runtime()
            .infer(workload.item(i).inputs)
            .expect("answered by the dialing executor");
        assert_eq!(
            reply
                .output("probs")
                .and_then(Tensor::as_f32)
                .map(<[f32]>::len),
            Some(10)
        );
    }
    let states = running.replica_pools()[0].1.replica_states();
    assert_eq!(states[0].3, 20, "every job went to the dialing executor");
    running.shutdown();
}
