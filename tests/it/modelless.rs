//! Model-less serving against real processes: into a repository made by `weir model register`, a
//! `weir executor --repository` process loads a variant of its own repository on a command signed with the control key, serves it, and
//! unloads it, answering every job queued before the unload; unsigned, wrongly signed, replayed, oversized commands and a variant whose file
//! does not match its record are refused while the executor keeps serving. The metadata store,
//! fed by the executor's liveliness and load reports, sees the loaded variant Active there and
//! loses it when the executor is SIGKILLed.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use std::sync::Arc;
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::wire::{decode_columns, encode_columns};
use weir_executor::client::variants::{send_command, CommandError};
use weir_executor::protocol::{ErrorKind, ErrorReply, LoadReport};
use weir_executor::variants::{control_key, Action, VariantCommand};

use weir_executor::client::workers::{WatchedExecutor, WorkerWatch};
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::query::{Query, Requirements, Target};
use weir_infaas::repository::Repository;
use weir_infaas::state::InstanceState;
use weir_infaas::store::MetadataStore;
use zenoh::Wait;

use crate::common::{model, spawn_executor, temp_dir};
use crate::distributed::loopback;
use crate::hostile_zenoh::peer;

const KEY: &[u8] = b"a-control-key-for-model-less-tests";

/// A child process SIGKILLed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const GOOD: &str = "digits_mlp.fp32-all-t1-bdyn-local";
const TAMPERED: &str = "digits_mlp.fp32-all-t1-b8-local";

/// Registers `digits_mlp` into a repository at `dir` with the real `weir model register` (fp32,
/// one thread, level `all`, dynamic and batch-8 builds), then overwrites the batch-8 build's file
/// with other bytes: its record no longer matches it.
fn repository(dir: &Path) {
    let out = crate::model_repository::register_grid(
        "digits_mlp",
        dir,
        &[
            "--no-int8",
            "--threads",
            "1",
            "--levels",
            "all",
            "--batches",
            "8",
            "--runs",
            "1",
        ],
    );
    assert!(
        out.status.success(),
        "register: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let repository = Repository::open(dir).expect("repository");
    assert!(repository.variant(GOOD).is_some(), "{GOOD} registered");
    let tampered = repository.variant(TAMPERED).expect("the batch-8 variant");
    let file = repository.file_path(tampered).expect("its file");
    std::fs::copy(model("digits_tiny.onnx"), file).expect("overwritten");
}

/// Sends `body` to `key`; `Ok(reply)` or `Err(error reply)`, retrying while no reply comes (the
/// link may still be opening).
fn ask(session: &zenoh::Session, key: &str, body: Vec<u8>) -> Result<Vec<u8>, ErrorReply> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let replies = session
            .get(key)
            .payload(body.clone())
            .timeout(Duration::from_secs(20))
            .wait()
            .expect("query sent");
        if let Ok(reply) = replies.recv() {
            return match reply.result() {
                Ok(sample) => Ok(sample.payload().to_bytes().to_vec()),
                Err(e) => Err(ErrorReply::parse(&e.payload().to_bytes())
                    .unwrap_or_else(|| panic!("a reply error from the executor on {key}"))),
            };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no reply on {key}");
}

/// Waits (bounded) until `store` says whether `variant` is Active on `worker`, as `active`.
fn await_active(store: &MetadataStore, variant: &str, worker: &str, active: bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        store.sync().expect("store running");
        let is = store.states().iter().any(|(v, w, state)| {
            v == variant && w.as_deref() == Some(worker) && *state == InstanceState::Active
        });
        if is == active {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{variant} on {worker} never became {}: {:?}",
            if active { "Active" } else { "inactive" },
            store.states()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `body` to `key` once; the first reply, if any comes.
fn ask_once(session: &zenoh::Session, key: &str, body: Vec<u8>) -> Option<zenoh::query::Reply> {
    let replies = session
        .get(key)
        .payload(body)
        .timeout(Duration::from_secs(2))
        .wait()
        .expect("query sent");
    replies.recv().ok()
}

/// The models the executor's next load report lists.
fn reported_models(session: &zenoh::Session, prefix: &str) -> Vec<String> {
    let subscriber = session
        .declare_subscriber(format!("{prefix}/load"))
        .wait()
        .expect("subscriber");
    let sample = subscriber
        .recv_timeout(Duration::from_secs(10))
        .expect("recv")
        .expect("a load report");
    let report: LoadReport = serde_json::from_slice(&sample.payload().to_bytes()).expect("report");
    report.models.into_keys().collect()
}

#[test]
fn executors_load_and_unload_variants_only_on_signed_fresh_commands() {
    let dir = temp_dir("ml-exec");
    let repo = dir.0.join("repository");
    repository(&repo);
    let key_file = dir.0.join("control.key");
    std::fs::write(&key_file, KEY).expect("key");
    let endpoint = loopback();
    let mut executor = Killed(spawn_executor(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(["executor", "--name", "ml-exec", "--listen", &endpoint])
            .arg("--repository")
            .arg(&repo)
            .arg("--control-key-file")
            .arg(&key_file),
        "ml-exec",
    ));
    let session = peer(&endpoint, None);
    let prefix = "weir/executor/ml-exec";
    let target = control_key(prefix);
    let variants = Repository::open(&repo)
        .expect("repository")
        .variants()
        .cloned()
        .collect();
    let store = Arc::new(MetadataStore::start(variants).expect("store"));
    let _watch = WorkerWatch::start(
        &session,
        &[WatchedExecutor {
            prefix: prefix.into(),
            hardware: "local".into(),
        }],
        Arc::clone(&store) as Arc<dyn Dispatcher>,
    )
    .expect("watching the executor");
    let model_key = format!("{prefix}/model/{GOOD}");

    let refused = |body: Vec<u8>, what: &str| {
        let e = ask(&session, &target, body).expect_err(what);
        assert_eq!(e.kind, ErrorKind::Refused, "{what}: {e:?}");
        e.message
    };
    let load = || VariantCommand::new(Action::Load, GOOD);
    refused(load().to_bytes(), "unsigned");
    refused(
        load()
            .signed(b"not-the-executors-key-0123456789", &target)
            .to_bytes(),
        "wrong key",
    );
    refused(
        load()
            .signed(KEY, "weir/executor/other/control/variants")
            .to_bytes(),
        "signed for another executor",
    );
    refused(vec![b' '; 5000], "oversized");
    assert!(reported_models(&session, prefix).is_empty());

    let command = |action, variant: &str| {
        send_command(
            &session,
            Some(KEY),
            prefix,
            action,
            variant,
            Duration::from_secs(30),
        )
    };
    let reply = command(Action::Load, GOOD).expect("loaded");
    assert_eq!((reply.action, reply.variant.as_str()), (Action::Load, GOOD));
    // A signed command is taken once: the same bytes again are a replay.
    let signed = load().signed(KEY, &target);
    assert!(
        ask(&session, &target, signed.to_bytes()).is_ok(),
        "a fresh signed load"
    );
    assert!(refused(signed.to_bytes(), "replayed").contains("replay"));
    assert_eq!(reported_models(&session, prefix), vec![GOOD.to_string()]);
    // Served: the model's queryable answers (here, that the query carries no payload).
    let e = ask(&session, &model_key, Vec::new()).expect_err("no payload");
    assert_eq!(e.kind, ErrorKind::Invalid, "{e:?}");

    let failed = |variant: &str| match command(Action::Load, variant) {
        Err(CommandError::Executor { reply, .. }) => {
            assert_eq!(reply.kind, ErrorKind::LoadFailed, "{reply:?}");
            reply.message
        }
        other => panic!("loading {variant}: {other:?}"),
    };
    assert!(failed(TAMPERED).contains("sha256"));
    assert!(failed("absent").contains("absent"));

    // Unloading stops new jobs and answers the queued ones: jobs sent before the command all
    // get their outputs.
    let x = TensorColumn::from_data("x", vec![64], 1, TensorData::F32(vec![0.5; 64])).expect("x");
    let payload = encode_columns([("x", &x)]).expect("payload");
    let queued: Vec<_> = (0..32)
        .map(|_| {
            session
                .get(&model_key)
                .payload(payload.clone())
                .timeout(Duration::from_secs(30))
                .wait()
                .expect("query sent")
        })
        .collect();
    command(Action::Unload, GOOD).expect("unloaded");
    for replies in queued {
        let reply = replies.recv().expect("every queued job is answered");
        let sample = reply.result().expect("with its outputs");
        let outputs = decode_columns(&sample.payload().to_bytes()).expect("outputs");
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].1.len(), 1);
    }
    assert!(
        ask_once(&session, &model_key, payload).is_none(),
        "an unloaded variant is not served"
    );
    assert!(reported_models(&session, prefix).is_empty());
    assert!(
        executor.0.try_wait().expect("wait").is_none(),
        "the executor is up"
    );

    // The control plane follows: loaded is Active on the executor, and an explicit query is served
    // there warm (INFaaS's explicit mode); a SIGKILLed executor's instances are gone from the
    // store.
    command(Action::Load, GOOD).expect("loaded again");
    await_active(&store, GOOD, prefix, true);
    let explicit = Query {
        target: Target::Variant(GOOD.into()),
        requirements: Requirements::default(),
        batch: 1,
    };
    let choice = store.select(&explicit).expect("a choice");
    assert_eq!((choice.worker.as_str(), choice.cold), (prefix, false));
    executor.0.kill().expect("SIGKILL");
    let _ = executor.0.wait();
    await_active(&store, GOOD, prefix, false);
    session.close().wait().expect("closed");
}
