//! Autoscaling through real processes (INFaaS §4.2.2–§4.2.3): `weir serve --repository
//! --autoscale` starts its own `weir executor` processes of an emulated accelerator type. With
//! none at start it launches the type's minimum; under a load that one executor cannot carry the
//! model-autoscaler replicates, passing the question up when no executor is free, and the worker
//! autoscaler starts another; an executor SIGKILLed while the front end scales loses no request;
//! once the load stops a replica is removed and an idle executor it started is retired. Every
//! request is answered once, and each decision is counted in `/metrics`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::distributed::loopback;
use crate::serve::Server;

const KEY: &[u8] = b"a-control-key-for-autoscaling-tests";
/// The accelerator's emulated latency per call: base and per-row milliseconds.
const EMULATED: &str = "1,20";

fn infer(server: &Server, id: &str) -> (u16, Value) {
    crate::modelless_serve::query_as(&server.addr, "digits", id, json!({"latency_ms": 2000}))
}

/// A counter's value in `/metrics` (0 when absent).
fn counter(server: &Server, series: &str) -> f64 {
    let (_, text) = server.get("/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

fn wait_for(server: &Server, series: &str, at_least: f64, within: Duration) {
    let deadline = Instant::now() + within;
    while counter(server, series) < at_least {
        assert!(
            Instant::now() < deadline,
            "{series} never reached {at_least}:\n{}",
            server.get("/metrics").1
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sets its flag when dropped, on a panic too.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Pids of this server's launched executors (their command lines name them `auto-accel-<server
/// pid>-<n>`), in launch order (`n`), so the last is the newest even if pids wrapped around.
fn launched_pids(server: &Server) -> Vec<u32> {
    let marker = format!("auto-accel-{}-", server.pid());
    let mut launched = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        // The arguments are NUL-separated; the name is one of them.
        let n = cmdline
            .split(|&b| b == 0)
            .filter_map(|arg| std::str::from_utf8(arg).ok()?.strip_prefix(&marker))
            .find_map(|n| n.parse::<u64>().ok());
        if let Some(n) = n {
            launched.push((n, pid));
        }
    }
    launched.sort_unstable();
    launched.into_iter().map(|(_, pid)| pid).collect()
}

#[test]
fn the_front_end_starts_replicates_survives_a_kill_and_retires_executors() {
    let dir = crate::common::temp_dir("autoscale");
    let root = dir.0.join("repository");
    // An emulated accelerator: 1 ms + 20 ms per row, so one executor carries about 50 req/s.
    let hardware = dir.0.join("hardware.yaml");
    std::fs::write(
        &hardware,
        format!("types:\n  - {{name: accel, price_per_s: 2.0, emulate_latency: \"{EMULATED}\", load_ms: 200}}\n"),
    )
    .expect("hardware");
    crate::model_repository::register_tiny_on(&root, &hardware);
    let key = dir.0.join("control.key");
    std::fs::write(&key, KEY).expect("key");
    let listen = loopback();
    let config = dir.0.join("autoscale.yaml");
    // The worker autoscaler's own rules are switched off (no utilisation above 100 %, no
    // fraction of executors above all of them): the machine's CPU is shared with the other tests,
    // so its utilisation says nothing about this executor, and a second executor started by
    // those rules would leave the model autoscaler a free executor and nothing to pass up. The
    // only way to a second executor is then the question passed up.
    let launch = json!([
        env!("CARGO_BIN_EXE_weir"),
        "executor",
        "--name",
        "{name}",
        "--connect",
        listen,
        "--repository",
        root,
        "--control-key-file",
        key,
        "--emulate-latency",
        EMULATED
    ]);
    std::fs::write(
        &config,
        format!(
            "autoscale:\n  tick_s: 0.5\n  workers: {{interval_s: 1.0, idle_grace_s: 3.0, min_per_type: 1, max_per_type: 3, busy_utilisation: 1.0, overloaded_fraction: 1.0}}\nlaunch:\n  accel: {launch}\n"
        ),
    )
    .expect("autoscale file");
    let server = Server::start(
        &[],
        &[
            "--repository",
            &root.display().to_string(),
            "--autoscale",
            &config.display().to_string(),
            "--zenoh-listen",
            &listen,
            "--control-key-file",
            &key.display().to_string(),
        ],
    );

    // No accelerator executor at start: the minimum is launched, and the task served there.
    wait_for(
        &server,
        "weir_infaas_scaling_decisions_total{kind=\"add_executor\"}",
        1.0,
        Duration::from_secs(30),
    );
    // The launch is among the autoscaler's recent actions in the status document.
    // (The document is sampled once a second: polled.)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, status) = server.get("/v2/weir/status");
        let status: Value = serde_json::from_str(&status).unwrap_or(Value::Null);
        let actions = &status["modelless"]["autoscaler"];
        let launched = actions.as_array().is_some_and(|a| {
            a.iter()
                .any(|a| a["action"] == "launch" && a["target"] == "accel" && a["ok"] == true)
        });
        if launched {
            break;
        }
        assert!(Instant::now() < deadline, "no launch shown: {actions}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, reply) = infer(&server, "first");
        if status == 200 {
            assert!(
                reply["parameters"]["worker"]
                    .as_str()
                    .unwrap_or("")
                    .contains("auto-accel-"),
                "{reply}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never served: {status} {reply}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // Sixteen clients, closed loop, more than one executor carries.
    let answers: Mutex<Vec<(String, u16, Value)>> = Mutex::new(Vec::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut killed = None;
    std::thread::scope(|s| {
        for client in 0..16 {
            let (server, answers, stop) = (&server, &answers, &stop);
            s.spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let id = format!("c{client}-{n}");
                    let (status, reply) = infer(server, &id);
                    answers.lock().expect("answers").push((id, status, reply));
                    n += 1;
                }
            });
        }
        // The clients stop however this closure ends: a failed wait below panics, and the
        // scope would otherwise wait for clients that never stop.
        let _stop_clients = StopOnDrop(&stop);
        // The replica needs an executor: the question is passed up and one is started.
        wait_for(
            &server,
            "weir_infaas_scaling_decisions_total{kind=\"add_executor\"}",
            2.0,
            Duration::from_secs(60),
        );
        // SIGKILL the newest executor while it starts and takes its replica. The decision is
        // counted before its process is spawned: wait for the second process, or the first,
        // the only one serving, would be killed.
        let deadline = Instant::now() + Duration::from_secs(30);
        let pids = loop {
            let pids = launched_pids(&server);
            if pids.len() >= 2 || Instant::now() >= deadline {
                break pids;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if let (2.., Some(&newest)) = (pids.len(), pids.last()) {
            crate::common::signal(newest, "-KILL");
            killed = Some(newest);
        }
        // The autoscaler goes on: a replica is loaded somewhere all the same.
        wait_for(
            &server,
            "weir_infaas_scaling_decisions_total{kind=\"replicate\"}",
            1.0,
            Duration::from_secs(60),
        );
        std::thread::sleep(Duration::from_secs(2));
    });
    assert!(killed.is_some(), "a launched executor was found and killed");
    let answers = answers.into_inner().expect("answers");
    assert!(answers.len() > 50, "{} requests", answers.len());
    let mut ids: Vec<&str> = answers.iter().map(|(id, ..)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), answers.len(), "each request answered once");
    for (id, status, reply) in &answers {
        assert_eq!(*status, 200, "{id}: {reply}");
        assert_eq!(reply["id"], json!(id));
    }
    assert!(
        counter(
            &server,
            "weir_infaas_scaling_decisions_total{kind=\"pass_up\"}"
        ) >= 1.0
    );

    // Idle: a replica goes, then an idle executor this front end started is retired.
    wait_for(
        &server,
        "weir_infaas_scaling_decisions_total{kind=\"remove_executor\"}",
        1.0,
        Duration::from_secs(60),
    );
    let (status, reply) = infer(&server, "after");
    assert_eq!(status, 200, "{reply}");
    assert!(counter(&server, "weir_infaas_cost_total") > 0.0);
}
