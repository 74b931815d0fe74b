//! Hostile zenoh peers against real `weir executor` processes on loopback: a HAMS assignment
//! whose state shape is not the model's is refused and the executor stays up; a rogue queryable
//! on an executor's model key never answers a graph's job; an executor that requires
//! user/password authentication refuses an anonymous peer while a `weir serve` graph holding
//! credentials is served; a graph and an executor talk over mutual TLS; and under a control key,
//! forged HAMS assignments (unsigned, wrongly signed, tampered, replayed from another member)
//! are refused while a signed one is taken.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir::hams::protocol::{Assign, Mode, RefusalReply, Role, StateTensor};
use zenoh::Wait;

use crate::common::{model, spawn_executor, temp_dir};
use crate::distributed::{free_port, loopback, mlp_graph, run_items, Executor};
use crate::hams::{assert_answers_like_unreplicated, pair, start_graph, track_graph, TRACK};
use crate::serve::Server;

/// A child process SIGKILLed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A test peer connecting to `connect` (and listening on loopback when `listen` is given).
pub(crate) fn peer(connect: &str, listen: Option<&str>) -> zenoh::Session {
    let mut config = zenoh::Config::default();
    let endpoints =
        |e: Option<&str>| format!("[{}]", e.map(|e| format!("\"{e}\"")).unwrap_or_default());
    for (key, value) in [
        ("mode", "\"peer\"".to_string()),
        ("scouting/multicast/enabled", "false".to_string()),
        ("connect/endpoints", endpoints(Some(connect))),
        ("listen/endpoints", endpoints(listen)),
    ] {
        config.insert_json5(key, &value).expect("config");
    }
    zenoh::open(config).wait().expect("a test peer")
}

fn gru_assign(shape: Vec<usize>) -> Assign {
    Assign {
        graph: "hostile".into(),
        node_id: 1,
        epoch: 1,
        role: Role::Primary { backup: None },
        mode: Mode::None,
        state: vec![StateTensor {
            input: "h_in".into(),
            output: "h_out".into(),
            shape,
        }],
        inputs: vec!["x".into()],
        outputs: vec!["y".into()],
        checkpoint_every: 0,
        rollback_to: None,
        sequences: None,
        constants: Vec::new(),
        signature: None,
    }
}

/// Sends `a` to the assign key and returns the reply: `Ok(body)` or `Err(refusal)`; retries
/// while no reply comes (the peer's link may still be opening).
fn assign(session: &zenoh::Session, key: &str, a: &Assign) -> Result<Vec<u8>, RefusalReply> {
    let body = serde_json::to_vec(a).expect("json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let replies = session
            .get(key)
            .payload(body.clone())
            .timeout(Duration::from_secs(3))
            .wait()
            .expect("query sent");
        if let Ok(reply) = replies.recv() {
            match reply.result() {
                Ok(sample) => return Ok(sample.payload().to_bytes().to_vec()),
                Err(e) => {
                    if let Ok(r) = serde_json::from_slice::<RefusalReply>(&e.payload().to_bytes()) {
                        return Err(r);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no answer on {key}");
}

#[test]
fn an_assignment_with_a_state_shape_not_the_models_is_refused_and_the_executor_stays_up() {
    let endpoint = loopback();
    let stateful = format!("track={}", model("gru_stream.onnx").display());
    let mut member = Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir")).args([
            "executor",
            "--name",
            "hz-shape",
            "--listen",
            &endpoint,
            "--stateful",
            &stateful,
        ]),
        "hz-shape",
    ));
    let session = peer(&endpoint, None);
    let key = "weir/executor/hz-shape/hams/track/assign";
    for shape in [vec![1usize << 40], vec![usize::MAX, 2], vec![1; 100_000]] {
        let refusal = assign(&session, key, &gru_assign(shape)).expect_err("refused");
        assert!(refusal.message.contains("h_in"), "{refusal:?}");
        assert!(
            refusal.message.len() < 300,
            "bounded: {}",
            refusal.message.len()
        );
        assert!(
            member.0.try_wait().expect("wait").is_none(),
            "the executor is up"
        );
    }
    // The model's own layout is still taken.
    assert!(assign(&session, key, &gru_assign(vec![1, 16])).is_ok());
    assert!(member.0.try_wait().expect("wait").is_none());
    session.close().wait().expect("closed");
}

/// A queryable on `key` that answers every query at once with garbage, and how often it was asked.
fn rogue_queryable(
    session: &zenoh::Session,
    key: &str,
) -> (zenoh::query::Queryable<()>, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let queryable = session
        .declare_queryable(key.to_string())
        .callback(move |query| {
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = query
                .reply(query.key_expr().clone(), b"rogue".to_vec())
                .wait();
        })
        .wait()
        .expect("rogue queryable");
    (queryable, asked)
}

#[test]
fn a_rogue_queryable_on_the_model_key_never_answers_a_graphs_job() {
    let executor = Executor::serving("hz-rogue", &loopback(), "mlp_a.onnx");
    let rogue = peer(executor.endpoint(), Some(&loopback()));
    let (_queryable, asked) = rogue_queryable(&rogue, "weir/executor/hz-rogue/model/m");
    let remote = mlp_graph("rogue", &[&executor], &["hz-rogue"]);
    let local = mlp_graph("rogue-local", &[], &["local"]);
    let n = 24;
    let want = run_items(&local.0, n);
    // The rogue's queryable reaches the graph's session when zenoh's routing has spread it,
    // which on a loaded machine may take a few rounds: every round's answers must be the
    // executor's, and the test needs the rogue to have been asked in one of them.
    for _ in 0..20 {
        let got = run_items(&remote.0, n);
        for i in 0..n as u64 {
            for (a, b) in got[&i].iter().zip(&want[&i]) {
                assert!((a - b).abs() <= 1e-5, "request {i}: {a} vs {b}");
            }
        }
        if asked.load(Ordering::Relaxed) > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert!(
        asked.load(Ordering::Relaxed) > 0,
        "the rogue was reachable (its queryable was asked)"
    );
}

/// A zenoh configuration file authenticating as `user` with `password`, checking peers against
/// `dictionary`.
fn usrpwd_config(dir: &Path, user: &str, password: &str, dictionary: &Path) -> String {
    let path = dir.join(format!("{user}.json5"));
    let text = format!(
        "{{ transport: {{ auth: {{ usrpwd: {{ user: \"{user}\", password: \"{password}\", dictionary_file: \"{}\" }} }} }} }}\n",
        dictionary.display()
    );
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

/// A one-node graph whose model runs on executor `name` at `endpoint`.
fn remote_mlp_graph(name: &str, endpoint: &str) -> String {
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nexecutors:\n  - {{name: {name}, endpoint: \"{endpoint}\"}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n      executor: {{timeout_ms: 5000}}\n      replicas: [{name}]\noutputs:\n  - {{name: probs, from: m.probs}}\n",
        model("mlp_a.onnx").display()
    )
}

/// Serves `graph` with `extra` arguments and checks that one request is answered with outputs.
fn assert_served(graph: String, extra: &[&str]) {
    let server = Server::start(&[graph], extra);
    let data = vec!["0.25"; 64].join(",");
    let body = format!(
        r#"{{"id":"r1","inputs":[{{"name":"x","shape":[64],"datatype":"FP32","data":[{data}]}}]}}"#
    );
    let (status, answer) = server.post("/v2/models/mlp/infer", &[], body.as_bytes());
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"probs\""), "{answer}");
}

#[test]
fn an_executor_requiring_a_password_refuses_an_anonymous_peer_and_serves_a_graph_with_one() {
    let dir = temp_dir("hz-auth");
    let dictionary = dir.0.join("users.txt");
    std::fs::write(&dictionary, "graph:graph-secret\nexec:exec-secret\n").expect("dictionary");
    let exec_config = usrpwd_config(&dir.0, "exec", "exec-secret", &dictionary);
    let graph_config = usrpwd_config(&dir.0, "graph", "graph-secret", &dictionary);
    let endpoint = loopback();
    let model_arg = format!("m={}", model("mlp_a.onnx").display());
    let executor = Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["executor", "--name", "hz-auth", "--listen", &endpoint])
            .args(["--model", &model_arg, "--zenoh-config", &exec_config]),
        "hz-auth",
    ));

    // Anonymous: neither the executor's liveliness nor its model answers.
    let anonymous = peer(&endpoint, None);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let tokens = anonymous
            .liveliness()
            .get("weir/executor/hz-auth/**")
            .timeout(Duration::from_millis(500))
            .wait()
            .expect("liveliness query");
        while let Ok(reply) = tokens.recv() {
            assert!(reply.result().is_err(), "an anonymous peer saw a token");
        }
        let replies = anonymous
            .get("weir/executor/hz-auth/model/m")
            .payload(b"garbage".to_vec())
            .timeout(Duration::from_millis(500))
            .wait()
            .expect("query");
        while let Ok(reply) = replies.recv() {
            assert!(
                reply.replier_id().is_none(),
                "the executor answered an anonymous peer"
            );
        }
    }
    anonymous.close().wait().expect("closed");

    // With credentials, through a real `weir serve`.
    assert_served(
        remote_mlp_graph("hz-auth", &endpoint),
        &["--zenoh-config", &graph_config],
    );
    drop(executor);
}

#[test]
fn forged_assignments_are_refused_under_a_control_key_and_a_signed_one_is_taken() {
    let dir = temp_dir("hz-key");
    let key_file = dir.0.join("control.key");
    let secret = b"a-control-key-for-tests-0123456789";
    std::fs::write(&key_file, secret).expect("key");
    let endpoint = loopback();
    let stateful = format!("track={}", model("gru_stream.onnx").display());
    let mut member = Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["executor", "--name", "hz-key", "--listen", &endpoint])
            .args(["--stateful", &stateful])
            .arg("--control-key-file")
            .arg(&key_file),
        "hz-key",
    ));
    let session = peer(&endpoint, None);
    let key = "weir/executor/hz-key/hams/track/assign";
    let sign = |k: &[u8], a: &Assign| {
        let mut a = a.clone();
        a.signature = Some(weir::hams::control_auth::sign(k, key, &a));
        a
    };
    let mut fenced = gru_assign(vec![1, 16]);
    fenced.epoch = u64::MAX;
    let forged = [
        gru_assign(vec![1, 16]),
        fenced.clone(),
        sign(b"not-the-executors-key-0123456789", &fenced),
        sign(secret, &gru_assign(vec![1, 16])).clone_with_epoch(u64::MAX),
        sign(secret, &gru_assign(vec![1, 16])).for_target("weir/executor/other/hams/track/assign"),
    ];
    for a in &forged {
        let refusal = assign(&session, key, a).expect_err("refused");
        assert!(refusal.message.contains("control key"), "{refusal:?}");
        assert!(
            member.0.try_wait().expect("wait").is_none(),
            "the executor is up"
        );
    }
    // The manager's assignment (signed with the shared key) is still taken at a low epoch.
    assert!(assign(&session, key, &sign(secret, &gru_assign(vec![1, 16]))).is_ok());
    session.close().wait().expect("closed");
}

/// Tampering helpers for forged assignments.
trait Tamper {
    fn clone_with_epoch(self, epoch: u64) -> Assign;
    fn for_target(self, target: &str) -> Assign;
}

impl Tamper for Assign {
    /// A signed assignment with its epoch changed afterwards.
    fn clone_with_epoch(mut self, epoch: u64) -> Assign {
        self.epoch = epoch;
        self
    }

    /// Re-signed with the right key for another member (replayed here).
    fn for_target(mut self, target: &str) -> Assign {
        self.signature = None;
        self.signature = Some(weir::hams::control_auth::sign(
            b"a-control-key-for-tests-0123456789",
            target,
            &self,
        ));
        self
    }
}

/// Runs `openssl` with `args` in `dir`, asserting success.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate for each of `names` (valid for 127.0.0.1), as README.md makes them.
fn certificates(dir: &Path, names: &[&str]) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=weir-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    for name in names {
        let (key, csr, pem, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(
            dir.join(&ext),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .expect("ext");
        let subject = format!("/CN={name}");
        openssl(
            dir,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", &subject, "-keyout", &key, "-out",
                &csr,
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &ext,
                "-out",
                &pem,
            ],
        );
    }
}

fn mtls_config(dir: &Path, name: &str) -> String {
    let path = dir.join(format!("{name}.json5"));
    let file = |f: String| dir.join(f).display().to_string();
    let text = format!(
        "{{ transport: {{ link: {{ tls: {{ root_ca_certificate: \"{}\", listen_certificate: \"{}\", listen_private_key: \"{}\", connect_certificate: \"{}\", connect_private_key: \"{}\", enable_mtls: true }} }} }} }}\n",
        file("ca.pem".into()),
        file(format!("{name}.pem")),
        file(format!("{name}.key")),
        file(format!("{name}.pem")),
        file(format!("{name}.key")),
    );
    std::fs::write(&path, text).expect("write config");
    path.display().to_string()
}

#[test]
fn a_graph_and_an_executor_answer_a_request_over_mutual_tls() {
    let dir = temp_dir("hz-mtls");
    certificates(&dir.0, &["e1", "graph"]);
    let endpoint = format!("tls/127.0.0.1:{}", free_port());
    let model_arg = format!("m={}", model("mlp_a.onnx").display());
    let _executor = Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["executor", "--name", "hz-mtls", "--listen", &endpoint])
            .args([
                "--model",
                &model_arg,
                "--zenoh-config",
                &mtls_config(&dir.0, "e1"),
            ]),
        "hz-mtls",
    ));
    assert_served(
        remote_mlp_graph("hz-mtls", &endpoint),
        &["--zenoh-config", &mtls_config(&dir.0, "graph")],
    );
}

#[test]
fn a_rogue_queryable_on_a_primarys_run_key_never_answers_a_batch() {
    let dir = temp_dir("hams-rogue");
    let (a, b) = pair(&dir.0, "rogue", &TRACK, &[], &[]);
    // A peer on the primary's link answering every batch at once with garbage: taken as the
    // answer, it would fail each request.
    let rogue = peer(&a.endpoint, Some(&loopback()));
    let (_queryable, asked) = rogue_queryable(&rogue, "weir/executor/hams-rogue-a/hams/track/run");
    let graph = start_graph(&track_graph(&dir.0, "track-rogue", &[&a, &b], "nspb"));
    assert_answers_like_unreplicated(&dir.0, &graph, "track-rogue-local", 20);
    assert!(
        graph
            .hams()
            .expect("a HAMS manager")
            .recoveries()
            .is_empty(),
        "no failover: the primary answered every batch"
    );
    graph.shutdown();
    assert!(
        asked.load(Ordering::Relaxed) > 0,
        "the rogue was reachable (its queryable was asked)"
    );
}
