//! Triton's own tools against `weir serve`: `perf_analyzer` (from the tritonclient wheel the
//! set-up unpacks) completes over HTTP and gRPC at concurrency 1 to 4 with server-side figures
//! read from weir's statistics; the configuration and statistics endpoints answer in Triton's
//! shapes, and a version that is not served is refused naming it; with `--shared-memory system`
//! it runs with its tensors in shared memory over both protocols.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common::weir_home;
use crate::grpc::Served;
use crate::serve::http;

fn mlp() -> String {
    crate::serve::mlp_graph()
}

fn perf_analyzer_dir() -> PathBuf {
    weir_home().join("perf_analyzer")
}

/// The figures perf_analyzer printed for one concurrency.
#[derive(Debug)]
struct Report {
    client_requests: u64,
    throughput: f64,
    server_successes: u64,
}

fn number_after(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(label))?;
    line.split(':')
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn run_perf_analyzer(protocol: &str, url: &str, concurrency: usize, extra: &[&str]) -> Report {
    let dir = perf_analyzer_dir();
    let bin = dir.join("bin/perf_analyzer");
    assert!(
        bin.is_file(),
        "{} is missing: run scripts/setup.sh (it unpacks perf_analyzer from the tritonclient wheel)",
        bin.display()
    );
    let out = Command::new(&bin)
        .env("LD_LIBRARY_PATH", dir.join("lib"))
        .args(["-m", "mlp", "-u", url, "-i", protocol])
        .args(["--concurrency-range", &concurrency.to_string()])
        // Count windows and no stability requirement: the run ends after a bounded number of
        // requests however noisy the machine is.
        .args(["--measurement-mode", "count_windows"])
        .args(["--measurement-request-count", "50"])
        .args(["--stability-percentage", "1000", "--max-trials", "3"])
        .args(extra)
        .output()
        .expect("perf_analyzer runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "perf_analyzer -i {protocol} -c {concurrency} {extra:?} failed:\n{text}\n{err}"
    );
    assert!(
        !text.contains("error"),
        "perf_analyzer reported an error:\n{text}"
    );
    let client = text.split("Server:").next().unwrap_or_default();
    let server = text
        .split("Server:")
        .nth(1)
        .unwrap_or_else(|| panic!("perf_analyzer printed no server-side figures:\n{text}"));
    Report {
        client_requests: number_after(client, "Request count").expect("client request count")
            as u64,
        throughput: number_after(client, "Throughput").expect("throughput"),
        server_successes: number_after(server, "Successful request count")
            .expect("server request count") as u64,
    }
}

fn stats(addr: &str) -> Value {
    let (code, body) = http(addr, "GET", "/v2/models/mlp/stats", &[], b"");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("statistics JSON")
}

fn successes(stats: &Value) -> u64 {
    stats["model_stats"][0]["inference_stats"]["success"]["count"]
        .as_u64()
        .expect("success count")
}

#[test]
fn perf_analyzer_completes_over_http_and_grpc_and_counts_what_weir_counts() {
    let served = Served::start(&[mlp()], &[]);
    for (protocol, url) in [("http", served.http.clone()), ("grpc", served.grpc.clone())] {
        for concurrency in [1, 4] {
            let before = successes(&stats(&served.http));
            let report = run_perf_analyzer(protocol, &url, concurrency, &[]);
            let after = stats(&served.http);
            assert!(
                report.throughput > 0.0,
                "{protocol} c{concurrency}: {report:?}"
            );
            // The server-side count is weir's statistics over the measured window: it differs
            // from the client's by the requests in flight at each of the window's two edges, and
            // by those the load threads finish while perf_analyzer reads the statistics at each
            // edge (its load never pauses for the reads). How many that is depends on how long a
            // read takes, which a busy machine stretches (a tenth of the window's requests at a
            // load average of 11), so the bound is a quarter: it still catches a count from
            // the wrong model or a statistic that does not move.
            let edges = 2 * concurrency as u64 + report.client_requests / 4;
            assert!(
                report.server_successes.abs_diff(report.client_requests) <= edges,
                "{protocol} c{concurrency}: {report:?}"
            );
            // Every request perf_analyzer sent (its warm-up and windows) was counted, none failed.
            assert!(
                successes(&after) - before >= report.client_requests,
                "{protocol} c{concurrency}: {report:?} against {after}"
            );
            assert_eq!(
                after["model_stats"][0]["inference_stats"]["fail"]["count"], 0,
                "{after}"
            );
        }
    }
}

/// `perf_analyzer --shared-memory system`: it clears both kinds of region, registers its own
/// for every input and output, and runs with the tensors in shared memory.
#[test]
fn perf_analyzer_runs_with_its_tensors_in_system_shared_memory() {
    let served = Served::start(&[mlp()], &["--shared-memory", "system"]);
    for (protocol, url) in [("http", served.http.clone()), ("grpc", served.grpc.clone())] {
        let before = successes(&stats(&served.http));
        let report = run_perf_analyzer(protocol, &url, 2, &["--shared-memory", "system"]);
        assert!(report.throughput > 0.0, "{protocol}: {report:?}");
        let after = stats(&served.http);
        assert!(
            successes(&after) - before >= report.client_requests,
            "{protocol}: {report:?} against {after}"
        );
        assert_eq!(
            after["model_stats"][0]["inference_stats"]["fail"]["count"], 0,
            "{protocol}: {after}"
        );
        // Its requests carry no tensor data (they succeeded, so the server read their inputs
        // from its regions), and it unregistered every region when it finished.
        let (code, regions) = http(
            &served.http,
            "GET",
            "/v2/systemsharedmemory/status",
            &[],
            b"",
        );
        assert_eq!((code, regions.as_str()), (200, "[]"), "{protocol}");
    }
}

#[test]
fn config_and_statistics_answer_in_tritons_shapes_and_unknown_versions_are_404s() {
    let served = Served::start(&[mlp()], &[]);
    let (code, body) = http(&served.http, "GET", "/v2/models/mlp/config", &[], b"");
    assert_eq!(code, 200, "{body}");
    let config: Value = serde_json::from_str(&body).expect("config JSON");
    assert_eq!(config["name"], "mlp");
    assert_eq!(config["input"][0]["name"], "x");
    assert_eq!(config["input"][0]["data_type"], "TYPE_FP32");
    assert_eq!(config["input"][0]["dims"], serde_json::json!([64]));
    assert!(
        config["max_batch_size"].as_u64().unwrap_or(0) > 0,
        "{config}"
    );
    for path in [
        "/v2/models/mlp/versions/1/config",
        "/v2/models/mlp/versions/1/stats",
    ] {
        assert_eq!(http(&served.http, "GET", path, &[], b"").0, 200, "{path}");
    }
    for path in [
        "/v2/models/mlp/versions/7/config",
        "/v2/models/mlp/versions/7",
        "/v2/models/mlp/versions/x/stats",
        "/v2/models/mlp/versions/7/ready",
    ] {
        let (code, body) = http(&served.http, "GET", path, &[], b"");
        assert_eq!(code, 404, "{path}: {body}");
        assert!(body.contains("version"), "{path}: {body}");
    }
    let body = br#"{"inputs":[{"name":"x","datatype":"FP32","shape":[2,64],"data":[0.5]}]}"#;
    let (code, reply) = http(
        &served.http,
        "POST",
        "/v2/models/mlp/versions/7/infer",
        &[],
        body,
    );
    assert_eq!(code, 404, "{reply}");
    let all = stats(&served.http);
    assert_eq!(all["model_stats"][0]["name"], "mlp");
    assert_eq!(all["model_stats"][0]["version"], "1");
    let (code, every) = http(&served.http, "GET", "/v2/models/stats", &[], b"");
    assert_eq!(code, 200, "{every}");
}
