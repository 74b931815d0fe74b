//! The `weir` binary: validation errors on stderr with locations, a run's summary, and `weir bench`
//! handing over to `weir-bench`.

use std::process::Command;

use rstest::rstest;

use crate::common::{repo, weir_home};

pub(crate) fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.current_dir(repo());
    c
}

/// Runs `weir args...`, asserts it succeeded, returns its stdout.
pub(crate) fn weir_ok(args: &[&str]) -> String {
    weir_home();
    let out = weir().args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "weir {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Runs `weir args...`, asserts it failed, returns its stderr.
pub(crate) fn weir_fails(args: &[&str]) -> String {
    weir_home();
    let out = weir().args(args).output().expect("runs");
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn validate_reports_errors_with_location_and_fails() {
    let stderr = weir_fails(&["validate", "tests/invalid/unknown_node.yaml"]);
    assert!(
        stderr.contains("tests/invalid/unknown_node.yaml:"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean"), "{stderr}");
}

/// `weir run` answers every request of the digits graph and its summary says so: closed loop
/// from the test set (with the accuracy), and open loop at a rate.
#[rstest]
#[case::prints_a_summary_with_accuracy(
    &[
        "run",
        "graphs/digits.yaml",
        "--dataset",
        ".weir/models/digits_test.csv",
        "--requests",
        "200",
        "--no-progress",
        "--concurrency",
        "4",
    ],
    &["200 requests, 200 ok, 0 errors", "latency ms: p50", "accuracy: 0.9"],
)]
#[case::open_loop_answers_every_request(
    &[
        "run",
        "graphs/digits.yaml",
        "--rate",
        "400",
        "--requests",
        "100",
        "--no-progress",
        "--workers",
        "2",
    ],
    &["100 requests, 100 ok, 0 errors"],
)]
fn run_summary(#[case] args: &[&str], #[case] lines: &[&str]) {
    let stdout = weir_ok(args);
    for line in lines {
        assert!(stdout.contains(line), "{stdout}");
    }
}

/// `weir profile --round-gap` takes a number of seconds that is not negative, and names the flag
/// when it is.
#[test]
fn profile_refuses_a_negative_round_gap() {
    let stderr = weir_fails(&["profile", "graphs/quickstart.yaml", "--round-gap=-2"]);
    assert!(
        stderr.contains("--round-gap") && stderr.contains("not negative"),
        "{stderr}"
    );
}

/// `weir bench` hands its arguments to the `weir-bench` binary beside `weir`, which answers as
/// itself (here refusing `--cores 0` with the flag named, as `weir-bench serf --cores 0` does);
/// where no `weir-bench` was built beside it, `weir bench` says how to build it.
#[test]
fn weir_bench_runs_the_weir_bench_binary_beside_it() {
    let out = weir()
        .args(["bench", "serf", "--cores", "0"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_weir")).with_file_name("weir-bench");
    if bench.is_file() {
        assert!(stderr.contains("--cores"), "{stderr}");
        assert_eq!(out.status.code(), Some(2), "clap's usage error, forwarded");
        let direct = Command::new(&bench)
            .args(["serf", "--cores", "0"])
            .output()
            .expect("runs");
        assert_eq!(direct.status.code(), out.status.code());
        assert_eq!(String::from_utf8_lossy(&direct.stderr), stderr);
    } else {
        assert!(
            stderr.contains("cargo build --release -p weir-bench"),
            "{stderr}"
        );
    }
}

/// A stateful node on executors is replicated by one HAMS manager; a timely cluster of several
/// processes would start one per process, so `weir serve --processes 2` refuses the graph before
/// anything starts, naming the node and why.
#[test]
fn serve_refuses_a_hams_node_in_a_timely_cluster_naming_it() {
    let dir = crate::common::temp_dir("hams-cluster");
    let graph = dir.0.join("tracked.yaml");
    let yaml = format!(
        "name: tracked\ninputs:\n  - {{name: x, dtype: f32, shape: [8]}}\nexecutors:\n  - {{name: m1, endpoint: \"tcp/127.0.0.1:9\"}}\n  - {{name: m2, endpoint: \"tcp/127.0.0.1:9\"}}\nnodes:\n  - model:\n      id: track\n      path: {}\n      inputs: {{x: x}}\n      state: {{inputs: [h_in], outputs: [h_out]}}\n      replicas: [m1, m2]\n      replication: {{mode: nspb}}\noutputs:\n  - {{name: y, from: track.y}}\n",
        crate::common::model("gru_stream.onnx").display()
    );
    std::fs::write(&graph, yaml).expect("graph written");
    let path = graph.to_string_lossy().into_owned();
    let stderr = weir_fails(&[
        "serve",
        &path,
        "--processes",
        "2",
        "--process",
        "0",
        "--http",
        "127.0.0.1:0",
    ]);
    assert!(
        stderr.contains("node `track` is a stateful node on executors")
            && stderr.contains("timely cluster of 2 processes"),
        "{stderr}"
    );
}
