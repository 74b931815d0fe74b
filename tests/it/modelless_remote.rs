//! Model-less serving on remote executors, through real processes: `weir serve --repository`
//! with two `weir executor --repository` processes of one executor type. A task's query
//! cold-starts its variant on one executor (a signed `load` command) and is answered there; then,
//! with requests streaming in, that executor is SIGKILLed: every request is still answered once,
//! and those caught on the dead executor move to the other (INFaaS §4.1; issue R: "a variant's
//! executor SIGKILLed, its queries move, none lost").

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{spawn_executor, temp_dir};
use crate::distributed::loopback;
use crate::serve::Server;

const KEY: &[u8] = b"a-control-key-for-remote-model-less-tests";
/// Every call on the executors takes at least this long, so requests are in flight when one dies.
const CALL_MS: &str = "150,0";

/// A child process SIGKILLed when dropped.
struct Killed(Child);

impl Killed {
    fn sigkill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        self.sigkill();
    }
}

fn executor(
    name: &str,
    endpoint: &str,
    repository: &std::path::Path,
    key: &std::path::Path,
) -> Killed {
    Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["executor", "--name", name, "--listen", endpoint])
            .arg("--repository")
            .arg(repository)
            .arg("--control-key-file")
            .arg(key)
            .args(["--emulate-latency", CALL_MS]),
        name,
    ))
}

fn infer(server: &Server, id: &str) -> (u16, Value) {
    crate::modelless_serve::query_as(&server.addr, "digits", id, json!({"min_accuracy": 0.9}))
}

fn worker(reply: &Value) -> String {
    reply["parameters"]["worker"]
        .as_str()
        .unwrap_or_else(|| panic!("worker in the reply: {reply}"))
        .to_string()
}

#[test]
fn a_task_runs_on_remote_executors_and_its_queries_move_when_one_is_killed() {
    let dir = temp_dir("ml-remote");
    let root = dir.0.join("repository");
    let hardware = dir.0.join("hardware.yaml");
    std::fs::write(&hardware, "types:\n  - {name: remote, price_per_s: 1.0}\n").expect("hardware");
    let out = crate::model_repository::register(
        "digits_mlp",
        &root,
        &["--no-int8", "--hardware", &hardware.display().to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = dir.0.join("control.key");
    std::fs::write(&key, KEY).expect("key");
    let (ep_a, ep_b) = (loopback(), loopback());
    let mut executors: BTreeMap<String, Killed> = BTreeMap::new();
    executors.insert(
        "weir/executor/ml-a".into(),
        executor("ml-a", &ep_a, &root, &key),
    );
    executors.insert(
        "weir/executor/ml-b".into(),
        executor("ml-b", &ep_b, &root, &key),
    );
    let root_arg = root.display().to_string();
    let key_arg = key.display().to_string();
    let server = Server::start(
        &[],
        &[
            "--repository",
            &root_arg,
            "--executor",
            "ml-a=remote",
            "--executor",
            "ml-b=remote",
            "--zenoh-connect",
            &ep_a,
            "--zenoh-connect",
            &ep_b,
            "--control-key-file",
            &key_arg,
        ],
    );

    // The executors join the store as their liveliness arrives; until then nothing can serve.
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        let (status, reply) = infer(&server, "first");
        if status == 200 {
            break reply;
        }
        assert!(Instant::now() < deadline, "never served: {status} {reply}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(first["parameters"]["cold_start"], json!(true), "{first}");
    assert_eq!(first["id"], json!("first"));
    let loaded_on = worker(&first);
    assert!(
        executors.contains_key(&loaded_on),
        "served by an executor: {loaded_on}"
    );
    let (status, warm) = infer(&server, "warm");
    assert_eq!(status, 200, "{warm}");
    assert_eq!(warm["parameters"]["cold_start"], json!(false), "{warm}");
    assert_eq!(worker(&warm), loaded_on, "the loaded instance serves again");

    // Requests stream in from several clients; the serving executor dies under them.
    let replies: Mutex<Vec<(String, u16, Value)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for client in 0..6 {
            let (server, replies) = (&server, &replies);
            s.spawn(move || {
                for n in 0..8 {
                    let id = format!("c{client}-{n}");
                    let (status, reply) = infer(server, &id);
                    replies.lock().expect("replies").push((id, status, reply));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(400));
        executors
            .get_mut(&loaded_on)
            .expect("the serving executor")
            .sigkill();
    });

    let replies = replies.into_inner().expect("replies");
    assert_eq!(replies.len(), 48, "every request answered");
    let mut ids: Vec<&str> = replies.iter().map(|(id, ..)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 48, "each request answered once");
    let survivor = executors
        .keys()
        .find(|k| **k != loaded_on)
        .expect("the other executor")
        .clone();
    for (id, status, reply) in &replies {
        assert_eq!(*status, 200, "{id}: {reply}");
        assert_eq!(reply["id"], json!(id), "{id}: the reply is its own");
        let w = worker(reply);
        assert!(w == loaded_on || w == survivor, "{id}: served by {w}");
    }
    let (_, metrics) = server.get("/metrics");
    let moved: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("weir_infaas_requests_moved_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("the moves counter in /metrics:\n{metrics}"));
    assert!(
        moved >= 1.0,
        "requests caught on the dead executor moved: {moved}"
    );
    let (status, after) = infer(&server, "after");
    assert_eq!(status, 200, "{after}");
    assert_eq!(worker(&after), survivor, "{after}");
}

/// Instances in a state, from `/metrics`.
fn instances(server: &Server, state: &str) -> f64 {
    let (_, metrics) = server.get("/metrics");
    let series = format!("weir_infaas_instances{{state=\"{state}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `--preload VARIANT=EXECUTOR` gives a fixed pool (Triton's `--load-model`; the Clipper⁺
/// baseline of INFaaS §6): serving starts with the variant loaded on each named executor — even
/// ones still starting, and with an emulated load time — and a query naming it is no cold start.
/// A preload of a variant the repository lacks stops the start, naming the flag.
#[test]
fn preloaded_variants_serve_from_the_start() {
    let dir = temp_dir("ml-preload");
    let root = dir.0.join("repository");
    let hardware = dir.0.join("hardware.yaml");
    std::fs::write(&hardware, "types:\n  - {name: remote, price_per_s: 1.0}\n").expect("hardware");
    crate::model_repository::register_tiny_on(&root, &hardware);
    let key = dir.0.join("control.key");
    std::fs::write(&key, KEY).expect("key");
    let (ep_a, ep_b) = (loopback(), loopback());
    let slow_load = |name: &str, endpoint: &str| {
        Killed(spawn_executor(
            Command::new(env!("CARGO_BIN_EXE_weir"))
                .args(["executor", "--name", name, "--listen", endpoint])
                .arg("--repository")
                .arg(&root)
                .arg("--control-key-file")
                .arg(&key)
                .args(["--emulate-load-ms", "300"]),
            name,
        ))
    };
    let _a = slow_load("pre-a", &ep_a);
    let _b = slow_load("pre-b", &ep_b);
    let variant = "digits_tiny.fp32-all-t1-b1-remote";
    let (root_arg, key_arg) = (root.display().to_string(), key.display().to_string());
    let common = [
        "--repository",
        &root_arg,
        "--executor",
        "pre-a=remote",
        "--executor",
        "pre-b=remote",
        "--zenoh-connect",
        &ep_a,
        "--zenoh-connect",
        &ep_b,
        "--control-key-file",
        &key_arg,
    ];
    let (preload_a, preload_b) = (format!("{variant}=pre-a"), format!("{variant}=pre-b"));
    let server = Server::start(
        &[],
        &[
            &common[..],
            &["--preload", &preload_a, "--preload", &preload_b],
        ]
        .concat(),
    );
    // Both loads were answered before serving began; the store's view of them follows.
    let deadline = Instant::now() + Duration::from_secs(10);
    while instances(&server, "active") < 2.0 {
        assert!(
            Instant::now() < deadline,
            "both loaded at start: {}",
            server.get("/metrics").1
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut workers = std::collections::BTreeSet::new();
    for n in 0..4 {
        let (status, reply) = crate::modelless_serve::query_as(
            &server.addr,
            "digits",
            &format!("q{n}"),
            json!({"variant": variant}),
        );
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["parameters"]["cold_start"], json!(false), "{reply}");
        workers.insert(worker(&reply));
    }
    assert!(
        workers
            .iter()
            .all(|w| w == "weir/executor/pre-a" || w == "weir/executor/pre-b"),
        "{workers:?}"
    );
    drop(server);

    let (mut cmd, _d) = crate::serve::serve_command("bad-preload", &[]);
    let out = cmd
        .args(["--http", "127.0.0.1:0"])
        .args(common)
        .args(["--preload", "no-such-variant=pre-a"])
        .output()
        .expect("weir serve runs");
    assert!(!out.status.success(), "a bad preload stops the start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--preload no-such-variant=pre-a")
            && stderr.contains("no servable variant"),
        "{stderr}"
    );
}
