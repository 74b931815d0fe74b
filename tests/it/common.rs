//! Shared test helpers: where the repository and the set-up folder are, direct ONNX Runtime runs,
//! and collecting replies by request id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{unbounded, Receiver};
use ort::value::TensorRef;
use weir::{NamedTensor, OrtRuntime, RequestError, Response, RunningGraph, RuntimeOptions, Tensor};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `.weir/` (or `$WEIR_HOME`), checked to hold what `scripts/setup.sh` makes.
pub fn weir_home() -> PathBuf {
    let home = std::env::var_os("WEIR_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".weir"));
    assert!(
        home.join("models").join("mlp_a.onnx").is_file(),
        "{} lacks the test models: run scripts/setup.sh first",
        home.display()
    );
    home
}

pub fn model(name: &str) -> PathBuf {
    weir_home().join("models").join(name)
}

/// Runs `path` directly in ONNX Runtime on one f32 input; returns the first output's elements.
pub fn direct_ort(path: &Path, input: &str, shape: &[usize], data: &[f32]) -> Vec<f32> {
    let rt = OrtRuntime::get().expect("ONNX Runtime loads");
    let mut session = rt.session("direct", path, 1, false).expect("session");
    let value = TensorRef::from_array_view((shape.to_vec(), data)).expect("tensor");
    let outputs = session.run(vec![(input, value)]).expect("run");
    let (_, out) = outputs[0].try_extract_tensor::<f32>().expect("f32 output");
    out.to_vec()
}

pub fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w} (tolerance {tol})"
        );
    }
}

/// Graph input or output `name` holding `tensor`.
pub fn named(name: &str, tensor: Tensor) -> NamedTensor {
    NamedTensor {
        name: name.into(),
        tensor,
    }
}

/// The default runtime options with two dataflow workers.
pub fn two_workers() -> RuntimeOptions {
    RuntimeOptions {
        workers: 2,
        ..RuntimeOptions::default()
    }
}

/// Replies gathered by request id; counts how many times each id was answered.
#[derive(Clone, Default)]
pub struct Replies {
    seen: Arc<Mutex<HashMap<u64, usize>>>,
}

pub type Reply = (u64, Result<Response, RequestError>);

impl Replies {
    /// A responder for request tag `tag` that records the answer and forwards it.
    pub fn responder(&self, tag: u64, tx: crossbeam_channel::Sender<Reply>) -> weir::Responder {
        let seen = Arc::clone(&self.seen);
        Box::new(move |r| {
            *seen.lock().expect("lock").entry(tag).or_default() += 1;
            let _ = tx.send((tag, r));
        })
    }

    /// Submits `inputs` to `graph` as request tag `tag`, its answer recorded and sent on `tx`.
    pub fn submit(
        &self,
        graph: &RunningGraph,
        tag: u64,
        inputs: Vec<NamedTensor>,
        tx: &crossbeam_channel::Sender<Reply>,
    ) {
        graph
            .runtime()
            .submit(inputs, self.responder(tag, tx.clone()))
            .expect("admitted");
    }

    pub fn counts(&self) -> HashMap<u64, usize> {
        self.seen.lock().expect("lock").clone()
    }
}

pub fn channel() -> (crossbeam_channel::Sender<Reply>, Receiver<Reply>) {
    unbounded()
}

/// A temporary folder removed when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // `WEIR_IT_KEEP=1` keeps the folders (journals, graphs) for a look after a failure.
        if std::env::var_os("WEIR_IT_KEEP").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh temporary folder named after `tag`, this process and the moment.
pub fn temp_dir(tag: &str) -> TempDir {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("weir-it-{tag}-{}-{n}", std::process::id()));
    // A directory left by an earlier process with the same id is stale.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    TempDir(dir)
}

/// Submits workload items `0..n` to `running` and returns each reply's f32 output `output` by
/// item index (panicking on a failed request), with the answer counts.
pub fn collect_outputs(
    running: &RunningGraph,
    workload: &weir::workload::Workload,
    n: usize,
    output: &str,
) -> (HashMap<u64, Vec<f32>>, Replies) {
    let replies = Replies::default();
    let (tx, rx) = channel();
    for i in 0..n {
        replies.submit(running, i as u64, workload.item(i).inputs, &tx);
    }
    drop(tx);
    let mut out = HashMap::new();
    for (tag, r) in rx.iter() {
        let reply = r.unwrap_or_else(|e| panic!("request {tag} failed: {e}"));
        let values = reply
            .output(output)
            .and_then(weir::Tensor::as_f32)
            .unwrap_or_else(|| panic!("output `{output}`"))
            .to_vec();
        out.insert(tag, values);
    }
    (out, replies)
}

/// Spawns a `weir executor` command (stdout piped) and waits for its ready line, which must
/// start with `weir executor <name> serving`.
pub fn spawn_executor(cmd: &mut std::process::Command, name: &str) -> std::process::Child {
    try_spawn_executor(cmd, name).unwrap_or_else(|e| panic!("{e}"))
}

/// [`spawn_executor`], returning why it did not start (the process is gone then).
pub fn try_spawn_executor(
    cmd: &mut std::process::Command,
    name: &str,
) -> Result<std::process::Child, String> {
    use std::io::BufRead;
    let mut child = cmd
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("weir executor starts");
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    }
    if !line.starts_with(&format!("weir executor {name} serving")) {
        // Never leave the process behind a failed start.
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!(
            "executor {name} did not start: first line `{line}`"
        ));
    }
    Ok(child)
}

/// Sends `sig` (`-STOP`, `-CONT`, `-TERM`, ...) to process `pid`, asserting it was delivered.
pub fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Runs the Python `script` with the set-up venv's interpreter and `args` (the files it writes),
/// panicking with `what` when it fails: how tests write the small ONNX models they need.
pub fn run_python_script(script: &str, args: &[&Path], what: &str) {
    let status = std::process::Command::new(weir_home().join("venv/bin/python"))
        .arg("-c")
        .arg(script)
        .args(args)
        .status()
        .expect("python runs");
    assert!(status.success(), "{what} failed");
}

/// Runs `cmd` (a `weir serve` expected to refuse to start, its stdout and stderr set here) until
/// it exits, a minute at most; asserts it failed and returns its stderr. `what` names the case
/// in the panic when it keeps running.
pub fn refused_start(cmd: &mut std::process::Command, what: &str) -> String {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir serve starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir serve kept running: {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    assert!(!status.success(), "{stderr}");
    stderr
}

/// Model node `node`'s executor counters in `running`.
pub fn node_stats(running: &RunningGraph, node: &str) -> weir::LoadSnapshot {
    running
        .executor_stats()
        .into_iter()
        .find(|(n, _)| n == node)
        .unwrap_or_else(|| panic!("no counters for model node `{node}`"))
        .1
}
