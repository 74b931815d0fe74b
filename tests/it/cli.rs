//! The `weir` binary: validation errors on stderr with locations, and a run's summary.

use std::process::Command;

use crate::common::{repo, weir_home};

fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.current_dir(repo());
    c
}

/// Runs `weir args...`, asserts it succeeded, returns its stdout.
fn weir_ok(args: &[&str]) -> String {
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

#[test]
fn validate_reports_errors_with_location_and_fails() {
    weir_home();
    let out = weir()
        .args(["validate", "tests/invalid/unknown_node.yaml"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("tests/invalid/unknown_node.yaml:"),
        "{stderr}"
    );
    assert!(stderr.contains("did you mean"), "{stderr}");
}

#[test]
fn run_prints_a_summary_with_accuracy() {
    let stdout = weir_ok(&[
        "run",
        "graphs/digits.yaml",
        "--dataset",
        ".weir/models/digits_test.csv",
        "--requests",
        "200",
        "--no-progress",
        "--concurrency",
        "4",
    ]);
    assert!(
        stdout.contains("200 requests, 200 ok, 0 errors"),
        "{stdout}"
    );
    assert!(stdout.contains("latency ms: p50"), "{stdout}");
    assert!(stdout.contains("accuracy: 0.9"), "{stdout}");
}

#[test]
fn run_open_loop_answers_every_request() {
    let stdout = weir_ok(&[
        "run",
        "graphs/digits.yaml",
        "--rate",
        "400",
        "--requests",
        "100",
        "--no-progress",
        "--workers",
        "2",
    ]);
    assert!(
        stdout.contains("100 requests, 100 ok, 0 errors"),
        "{stdout}"
    );
}

/// `weir bench serf --cores 1` plans the node for one core whatever the machine has: the profile
/// and the load runs cover `(1, 1)` alone, and the report's machine line says so. `--cores 0` is
/// refused with the flag named.
#[test]
fn bench_serf_plans_the_node_for_the_cores_given() {
    let dir = crate::common::temp_dir("serf-cores");
    let table = dir.0.join("serf.md");
    let table_arg = table.to_string_lossy().to_string();
    let plot_arg = dir.0.join("serf.png").to_string_lossy().to_string();
    let model = weir_home().join("models/mlp_a.onnx");
    let model_arg = model.to_string_lossy().to_string();
    // With a CPU to spare, the node's one core is reserved for it: pinned from the second CPU,
    // the rest of the process kept on the others.
    let spare = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let pinned: &[&str] = if spare {
        &["--pin-cores-from", "1"]
    } else {
        &[]
    };
    let stdout = weir_ok(
        &[
            &["bench", "serf", "--model", &model_arg, "--cores", "1"][..],
            pinned,
            &[
                "--loads",
                "1",
                "--requests",
                "30",
                "--min-requests",
                "30",
                "--samples",
                "2",
                "--rounds",
                "1",
                "--spread-profile",
                "1",
                "--table",
                &table_arg,
                "--plot",
                &plot_arg,
            ][..],
        ]
        .concat(),
    );
    let text = std::fs::read_to_string(&table).expect("the table is written");
    assert!(text.contains("the model node planned for 1 "), "{text}");
    assert_eq!(
        text.contains(
            "the node's cores reserved for it, the process's other threads kept off them"
        ),
        spare,
        "{text}"
    );
    assert!(
        text.contains("The second profile, a profile with its rounds spread over 1 s"),
        "{text}"
    );
    assert!(text.contains("| c=1 t=1 |"), "{text}");
    for other in ["| c=1 t=2 |", "| c=2 t=1 |"] {
        assert!(!text.contains(other), "{other} beyond one core:\n{text}");
    }
    assert!(stdout.contains(&table_arg), "{stdout}");

    let out = weir()
        .args(["bench", "serf", "--cores", "0"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--cores"), "{stderr}");

    for (flags, names) in [
        (
            &["--spread-profile=-1"][..],
            "seconds must be finite and not negative",
        ),
        (&["--spread-profile", "soon"][..], "not a number of seconds"),
        (&["--reprofile", "--spread-profile", "5"][..], "--reprofile"),
        (&["--share-node-cores"][..], "--cores"),
        (
            &["--profile-without-queue", "--spread-profile", "5"][..],
            "--profile-without-queue",
        ),
    ] {
        let out = weir()
            .args(["bench", "serf"])
            .args(flags)
            .output()
            .expect("runs");
        assert!(!out.status.success(), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(names), "{flags:?}: {stderr}");
    }
    let out = weir()
        .args(["profile", "graphs/quickstart.yaml", "--round-gap=-2"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--round-gap") && stderr.contains("not negative"),
        "{stderr}"
    );
}
