//! Hostile streams and files, through the real process: a JSON-lines stream goes on past lines
//! that are not UTF-8, not JSON or over the line cap (each answered once with an error naming its
//! line, memory bounded while a huge line streams in); an existing output is never truncated
//! unless the graph says so; `/dev/zero` as a model or parity model and paths outside
//! `--path-root` are refused with a diagnostic.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{model, repo, temp_dir, weir_home};
use crate::hostile_requests::rss_kib;

/// A child process SIGKILLed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn graph(node: &str, streams: &str) -> String {
    format!(
        "name: mlp\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model: {node}\noutputs:\n  - {{name: probs, from: m.probs}}\n{streams}"
    )
}

fn mlp_node() -> String {
    format!(
        "{{id: m, path: {}, inputs: {{x: x}}}}",
        model("mlp_a.onnx").display()
    )
}

fn request(id: &str) -> String {
    json!({"id": id, "inputs": [{"name": "x", "shape": [64], "datatype": "FP32", "data": vec![0.5; 64]}]})
        .to_string()
}

/// Runs `weir <args>` to its end, killing it after a generous timeout (a read of `/dev/zero`
/// would otherwise never end).
fn weir(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .current_dir(repo())
        .env_remove("WEIR_PATH_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir starts");
    let pid = child.id();
    let done = std::thread::spawn(move || child.wait_with_output().expect("weir ends"));
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done.is_finished() {
        if Instant::now() > deadline {
            crate::common::signal(pid, "-KILL");
            panic!("weir {args:?} still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done.join().expect("waiter")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts `out` is a failed run (`what` says what failing to fail means) and returns its stderr.
fn refused(out: &Output, what: &str) -> String {
    assert!(!out.status.success(), "{what}");
    stderr(out)
}

fn replies(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("output written")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each reply line is JSON"))
        .collect()
}

#[test]
fn a_jsonl_stream_answers_bad_lines_and_goes_on() {
    weir_home();
    let dir = temp_dir("hostile-jsonl");
    let mut input = Vec::new();
    input.extend_from_slice(request("first").as_bytes());
    input.extend_from_slice(b"\n{\"id\": \"\xff\xfe\", \"inputs\": []}\n");
    input.extend(std::iter::repeat_n(b' ', 3 << 20));
    input.extend_from_slice(request("too-long").as_bytes());
    input.extend_from_slice(b"\n{\"id\": \"cut\", \"inputs\": [\n\n");
    input.extend_from_slice(request("last").as_bytes());
    std::fs::write(dir.0.join("in.jsonl"), &input).expect("write input");
    let g = dir.0.join("g.yaml");
    let streams = "streams:\n  - jsonl: {input: in.jsonl, output: out.jsonl}\n";
    std::fs::write(&g, graph(&mlp_node(), streams)).expect("write graph");
    let out = weir(&[
        "serve",
        "--max-line-bytes",
        "65536",
        g.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("5 requests, 3 errors"),
        "{}",
        stderr(&out)
    );
    let got = replies(&dir.0.join("out.jsonl"));
    assert_eq!(got.len(), 5, "one reply per non-blank line: {got:?}");
    let by_id = |id: &str| -> &Value {
        let mut it = got.iter().filter(|r| r["id"] == id);
        let r = it
            .next()
            .unwrap_or_else(|| panic!("no reply for {id}: {got:?}"));
        assert!(it.next().is_none(), "{id} answered twice");
        r
    };
    for ok in ["first", "last"] {
        assert!(by_id(ok)["outputs"].is_array(), "{:?}", by_id(ok));
    }
    assert!(by_id("line-2")["error"].is_string(), "not UTF-8");
    assert_eq!(
        by_id("line-3")["error"],
        "line 3: over the limit of 65536 bytes"
    );
    assert!(by_id("line-4")["error"].is_string(), "cut JSON");
}

#[test]
fn a_huge_line_from_stdin_is_not_buffered() {
    weir_home();
    let dir = temp_dir("hostile-huge-line");
    let g = dir.0.join("g.yaml");
    let streams = "streams:\n  - jsonl: {input: \"-\", output: out.jsonl}\n";
    std::fs::write(&g, graph(&mlp_node(), streams)).expect("write graph");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "--max-line-bytes", "1048576"])
        .arg(&g)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("weir serve starts");
    let mut server = Killed(child);
    let pid = server.0.id();
    let mut stdin = server.0.stdin.take().expect("stdin");
    writeln!(stdin, "{}", request("warm")).expect("write");
    stdin.flush().expect("flush");
    let out = dir.0.join("out.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&out).map_or(true, |t| !t.contains("warm")) {
        assert!(Instant::now() < deadline, "no reply to the first line");
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = rss_kib(pid);
    let line_bytes: u64 = 256 << 20;
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..(line_bytes >> 20) {
        stdin.write_all(&chunk).expect("the server reads on");
    }
    stdin.flush().expect("flush");
    let during = rss_kib(pid);
    let grown = during.saturating_sub(before) * 1024;
    assert!(
        grown < line_bytes / 4,
        "RSS grew {grown} bytes while a {line_bytes}-byte line streamed in"
    );
    writeln!(stdin, "\n{}", request("after")).expect("write");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = server.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "weir did not end after stdin closed"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let got = replies(&out);
    let ids: Vec<&str> = got.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(ids.len(), 3, "{got:?}");
    for id in ["warm", "line-2", "after"] {
        assert_eq!(ids.iter().filter(|i| **i == id).count(), 1, "{ids:?}");
    }
}

#[test]
fn an_existing_output_is_kept_unless_the_graph_says_otherwise() {
    weir_home();
    let dir = temp_dir("hostile-output");
    std::fs::write(dir.0.join("in.jsonl"), request("r0") + "\n").expect("write input");
    let out_file = dir.0.join("out.jsonl");
    std::fs::write(&out_file, "keep\n").expect("write output");
    let g = dir.0.join("g.yaml");
    let streams = "streams:\n  - jsonl: {input: in.jsonl, output: out.jsonl}\n";
    std::fs::write(&g, graph(&mlp_node(), streams)).expect("write graph");
    for command in ["validate", "serve"] {
        let out = weir(&[command, g.to_str().expect("utf-8")]);
        let text = refused(&out, &format!("{command} accepted an existing output"));
        assert!(text.contains("out.jsonl already exists"), "{text}");
        assert!(text.contains("output_mode: overwrite"), "{text}");
        assert!(text.contains("streams[0].jsonl.output"), "{text}");
        assert_eq!(std::fs::read_to_string(&out_file).expect("read"), "keep\n");
    }
    let streams =
        "streams:\n  - jsonl: {input: in.jsonl, output: out.jsonl, output_mode: append}\n";
    std::fs::write(&g, graph(&mlp_node(), streams)).expect("write graph");
    let out = weir(&["serve", g.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&out_file).expect("read");
    assert!(text.starts_with("keep\n"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");

    // A symlink is refused even with `overwrite`, and its target is untouched.
    std::os::unix::fs::symlink(&out_file, dir.0.join("link.jsonl")).expect("symlink");
    let streams =
        "streams:\n  - jsonl: {input: in.jsonl, output: link.jsonl, output_mode: overwrite}\n";
    std::fs::write(&g, graph(&mlp_node(), streams)).expect("write graph");
    let out = weir(&["validate", g.to_str().expect("utf-8")]);
    let text = refused(&out, "a symbolic link output validated");
    assert!(text.contains("is a symbolic link"), "{text}");
    assert!(std::fs::read_to_string(&out_file)
        .expect("read")
        .starts_with("keep\n"));
}

#[test]
fn dev_zero_as_a_model_or_parity_model_is_refused() {
    weir_home();
    let dir = temp_dir("hostile-dev-zero");
    let g = dir.0.join("g.yaml");
    let parity = format!(
        "{{id: m, path: {}, inputs: {{x: x}}, resilience: {{parity: {{k: 2, parity_model: /dev/zero}}}}}}",
        model("mlp_a.onnx").display()
    );
    for (node, field) in [
        (
            "{id: m, path: /dev/zero, inputs: {x: x}}".to_string(),
            "nodes.m.path",
        ),
        (parity, "nodes.m.resilience.parity.parity_model"),
    ] {
        std::fs::write(&g, graph(&node, "")).expect("write graph");
        let out = weir(&["validate", g.to_str().expect("utf-8")]);
        let text = refused(&out, &format!("{node} validated"));
        assert!(text.contains("/dev/zero is not a regular file"), "{text}");
        assert!(text.contains(field), "{text}");
    }
}

#[test]
fn paths_outside_the_path_root_are_refused() {
    weir_home();
    let dir = temp_dir("hostile-root");
    let g = dir.0.join("g.yaml");
    std::fs::write(&g, graph(&mlp_node(), "")).expect("write graph");
    let g = g.to_str().expect("utf-8");
    let root = dir.0.to_str().expect("utf-8");
    let out = weir(&["validate", "--path-root", root, g]);
    let text = refused(&out, "a model outside the root validated");
    assert!(text.contains("is outside the path root"), "{text}");
    let models = model("mlp_a.onnx");
    let models = models.parent().expect("models folder");
    let out = weir(&[
        "validate",
        "--path-root",
        models.to_str().expect("utf-8"),
        g,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A stream output escaping the root with `..`, the root given by the environment.
    std::fs::create_dir_all(dir.0.join("inner")).expect("inner");
    std::fs::write(dir.0.join("inner/in.jsonl"), request("r0") + "\n").expect("write input");
    let inner = dir.0.join("inner/g.yaml");
    let node = "{id: m, path: mlp.onnx, inputs: {x: x}}";
    std::fs::copy(model("mlp_a.onnx"), dir.0.join("inner/mlp.onnx")).expect("copy model");
    let streams = "streams:\n  - jsonl: {input: in.jsonl, output: ../out.jsonl}\n";
    std::fs::write(&inner, graph(node, streams)).expect("write graph");
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["validate"])
        .arg(&inner)
        .env("WEIR_PATH_ROOT", dir.0.join("inner"))
        .output()
        .expect("weir validate runs");
    let text = refused(&out, "an output outside the root validated");
    assert!(text.contains("streams[0].jsonl.output"), "{text}");
    assert!(text.contains("is outside the path root"), "{text}");
    assert!(!dir.0.join("out.jsonl").exists());
}
