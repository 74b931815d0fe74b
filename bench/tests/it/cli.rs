//! The `weir-bench` binary: the SERF experiment's flags, its machine line and its second profiles;
//! the gRPC experiment's `--only`.

use std::process::Command;

use crate::common::{model, repo};

fn bench() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir-bench"));
    c.current_dir(repo());
    c
}

/// Runs `weir-bench args...`, asserts it succeeded, returns its stdout.
fn bench_ok(args: &[&str]) -> String {
    let out = bench().args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "weir-bench {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `weir-bench serf --cores 1` plans the node for one core whatever the machine has: the profile
/// and the load runs cover `(1, 1)` alone, and the report's machine line says so. `--cores 0` is
/// refused with the flag named.
#[test]
fn bench_serf_plans_the_node_for_the_cores_given() {
    // Left behind when the test fails, for a look at the table.
    let dir = std::env::temp_dir().join(format!("weir-bench-it-serf-cores-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let table = dir.join("serf.md");
    let table_arg = table.to_string_lossy().to_string();
    let plot_arg = dir.join("serf.png").to_string_lossy().to_string();
    let model = model("mlp_a.onnx");
    let model_arg = model.to_string_lossy().to_string();
    // With a CPU to spare, the node's one core is reserved for it: pinned from the second CPU,
    // the rest of the process kept on the others.
    let spare = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let pinned: &[&str] = if spare {
        &["--pin-cores-from", "1"]
    } else {
        &[]
    };
    let stdout = bench_ok(
        &[
            &["serf", "--model", &model_arg, "--cores", "1"][..],
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
    let _ = std::fs::remove_dir_all(&dir);

    let out = bench()
        .args(["serf", "--cores", "0"])
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
        let out = bench().args(["serf"]).args(flags).output().expect("runs");
        assert!(!out.status.success(), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(names), "{flags:?}: {stderr}");
    }
}

/// `weir-bench grpc --only grpc` runs the gRPC path alone over the benchmark's own client (every
/// call checked for `grpc-status` 0 and outputs, two clients on connections of their own): its
/// columns hold figures, the other paths' read "–", and no plot is written.
#[test]
fn bench_grpc_only_measures_the_path_named() {
    let model = model("mlp_a.onnx");
    let model_arg = format!("mlp={}", model.to_string_lossy());
    let dir = std::env::temp_dir().join(format!("weir-bench-it-grpc-only-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let plot = dir.join("grpc.png");
    let plot_arg = plot.to_string_lossy().to_string();
    let stdout = bench_ok(&[
        "grpc",
        "--model",
        &model_arg,
        "--concurrency",
        "1,2",
        "--requests",
        "2",
        "--repeats",
        "1",
        "--only",
        "grpc",
        "--plot",
        &plot_arg,
    ]);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| mlp |"))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    for cells in rows {
        // | model | clients | layout | bare req/s | HTTP req/s | gRPC req/s | ...
        assert_eq!((cells[4], cells[5]), ("–", "–"), "{stdout}");
        let grpc: f64 = cells[6].parse().expect("gRPC req/s is a number");
        assert!(grpc > 0.0, "{stdout}");
    }
    assert!(!plot.exists(), "a plot was written for one path");
    let _ = std::fs::remove_dir_all(&dir);
}
