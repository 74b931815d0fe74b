//! Hostile HTTP clients against a real `weir serve`: slow headers, stalled and malformed uploads,
//! connection floods, a byte budget, SIGTERM with a half-sent body, and bearer-token details.
//! Each test checks the hostile client is answered or cut off and that the server keeps serving.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rstest::rstest;

use crate::common::temp_dir;
use crate::hostile_requests::rss_kib;
use crate::serve::{http, mlp_graph, mlp_request, Server, INFER};

/// Generous bound for anything the server is expected to do "soon".
const SOON: Duration = Duration::from_secs(20);

/// A connection that sent `head` (and maybe part of a body) and then went quiet.
fn half_sent(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connects");
    s.write_all(bytes).expect("writes");
    s.set_read_timeout(Some(SOON)).expect("read timeout");
    s
}

/// Reads what the server sends until it closes; `None` when it stays open past the read timeout.
fn read_until_closed(s: &mut TcpStream) -> Option<String> {
    let mut raw = Vec::new();
    match s.read_to_end(&mut raw) {
        Ok(_) => Some(String::from_utf8_lossy(&raw).into_owned()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        // A reset is the server closing too.
        Err(_) => Some(String::from_utf8_lossy(&raw).into_owned()),
    }
}

fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

fn infer_head(content_length: usize) -> String {
    format!(
        "POST {INFER} HTTP/1.1\r\nHost: weir\r\nContent-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    )
}

/// Polls `path` until it answers `want`, panicking after [`SOON`].
fn wait_for(server: &Server, path: &str, want: u16) {
    poll(&format!("{path} never answered {want}"), want, || {
        server.get(path)
    });
}

/// Asks (`ask` gives a status and a body) until the status is `want`, panicking with `what` and
/// the last answer after [`SOON`].
fn poll(what: &str, want: u16, mut ask: impl FnMut() -> (u16, String)) {
    let deadline = Instant::now() + SOON;
    loop {
        let (status, body) = ask();
        if status == want {
            return;
        }
        assert!(Instant::now() < deadline, "{what} (last {status} {body})");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn slowloris_connections_are_closed_while_others_are_served() {
    let server = Server::start(&[mlp_graph()], &["--header-timeout-ms", "500"]);
    let mut slow: Vec<TcpStream> = (0..50)
        .map(|_| {
            half_sent(
                &server.addr,
                b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: w",
            )
        })
        .collect();
    let (status, body) = server.post_good(&[]);
    assert_eq!(status, 200, "a normal client is served meanwhile: {body}");
    for (i, s) in slow.iter_mut().enumerate() {
        assert!(
            read_until_closed(s).is_some(),
            "slow connection {i} still open after {SOON:?}"
        );
    }
    assert_eq!(server.get("/v2/health/ready").0, 200);
}

/// A request the server cannot finish reading, sent on its own connection, is answered with
/// `status` and a body naming the `cause` before the connection closes; a good request after it
/// is served.
#[rstest]
#[case::stalled_upload_gets_408_naming_the_body(
    &["--request-timeout-ms", "1000"],
    format!("{}0123456789", infer_head(1000)),
    408,
    "body: upload not finished"
)]
#[case::malformed_chunked_body_is_400(
    &[],
    format!("POST {INFER} HTTP/1.1\r\nHost: weir\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
    400,
    "chunked"
)]
fn an_unreadable_request_is_answered_and_the_server_goes_on(
    #[case] extra: &[&str],
    #[case] request: String,
    #[case] status: u16,
    #[case] cause: &str,
) {
    let server = Server::start(&[mlp_graph()], extra);
    let mut s = half_sent(&server.addr, request.as_bytes());
    let response = read_until_closed(&mut s).expect("answered");
    assert_eq!(status_of(&response), status, "{response}");
    assert!(response.contains(cause), "{response}");
    assert_eq!(server.post_good(&[]).0, 200);
}

#[test]
fn connections_over_the_limit_are_refused_and_health_checks_pass_after() {
    let server = Server::start(&[mlp_graph()], &["--max-connections", "4"]);
    // Four kept-alive connections, each answered once, so all four are accepted and held. A
    // connection's slot is released by the server after the client closes it, so the start-up
    // probes' slots may still be held for a moment: a refused try is retried.
    let deadline = Instant::now() + SOON;
    let mut held: Vec<TcpStream> = Vec::new();
    while held.len() < 4 {
        let mut s = half_sent(
            &server.addr,
            b"GET /v2/health/live HTTP/1.1\r\nHost: weir\r\n\r\n",
        );
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).expect("answered");
        match status_of(&String::from_utf8_lossy(&buf[..n])) {
            200 => held.push(s),
            503 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            other => panic!("a held connection got {other}"),
        }
    }
    let mut extra = half_sent(
        &server.addr,
        b"GET /v2/health/ready HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n",
    );
    let refused = read_until_closed(&mut extra).expect("the fifth connection is closed");
    // A refusal is a 503 with Retry-After, or at least a closed connection.
    if !refused.is_empty() {
        assert_eq!(status_of(&refused), 503, "{refused}");
        assert!(
            refused.to_ascii_lowercase().contains("retry-after: 1"),
            "{refused}"
        );
        assert!(refused.contains("connections"), "{refused}");
    }
    held.clear();
    wait_for(&server, "/v2/health/ready", 200);
    let (_, metrics) = server.get("/metrics");
    let refusals = metrics
        .lines()
        .find_map(|l| l.strip_prefix("weir_http_connections_refused_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(refusals.is_some_and(|n| n >= 1), "{metrics}");
}

#[test]
fn inflight_byte_budget_refuses_with_503_then_recovers() {
    let server = Server::start(
        &[mlp_graph()],
        &[
            "--max-inflight-bytes",
            "2000",
            "--max-body-bytes",
            "1500",
            "--request-timeout-ms",
            "60000",
        ],
    );
    let mut good = mlp_request(64, "[64]", "FP32");
    good.resize(1000, b' ');
    let len = [("Content-Type", "application/json".to_string())];
    let deadline = Instant::now() + SOON;
    let holder = loop {
        // 1500 bytes declared and held by a stalled upload; it may itself be refused if a
        // previous good request still held its bytes, so each try opens a fresh one.
        let holder = half_sent(&server.addr, format!("{}{{", infer_head(1500)).as_bytes());
        std::thread::sleep(Duration::from_millis(200));
        let (status, body) = http(&server.addr, "POST", INFER, &len, &good);
        if status == 503 {
            assert!(body.contains("budget of 2000 bytes"), "{body}");
            break holder;
        }
        assert!(Instant::now() < deadline, "never refused: {status} {body}");
    };
    drop(holder);
    poll("budget never released", 200, || {
        http(&server.addr, "POST", INFER, &len, &good)
    });
}

#[test]
fn sigterm_with_a_half_sent_body_exits_after_the_drain_timeout() {
    let mut server = Server::start(
        &[mlp_graph()],
        &[
            "--drain-timeout-ms",
            "500",
            "--request-timeout-ms",
            "600000",
        ],
    );
    let mut stalled = half_sent(
        &server.addr,
        format!("{}0123456789", infer_head(1000)).as_bytes(),
    );
    // Let the request reach its handler, so the drain has something in flight to wait for.
    std::thread::sleep(Duration::from_millis(300));
    server.sigterm();
    let deadline = Instant::now() + SOON;
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still running {SOON:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(read_until_closed(&mut stalled).is_some());
}

#[test]
fn bearer_scheme_is_case_insensitive_and_wrong_tokens_of_any_length_are_401() {
    let server = Server::start(&[mlp_graph()], &["--auth-token", "s3cret"]);
    let ready = |value: &str| {
        http(
            &server.addr,
            "GET",
            "/v2/health/ready",
            &[("Authorization", value.to_string())],
            b"",
        )
        .0
    };
    for ok in ["bearer s3cret", "BEARER s3cret", "Bearer s3cret"] {
        assert_eq!(ready(ok), 200, "{ok}");
    }
    let long = format!("Bearer {}", "s".repeat(4000));
    for wrong in [
        "Bearer s",
        "Bearer s3cre",
        "Bearer s3cret0",
        "Bearer S3CRET",
        "Basic s3cret",
        long.as_str(),
    ] {
        assert_eq!(ready(wrong), 401, "{wrong}");
    }
}

#[cfg(unix)]
#[test]
fn token_file_readable_by_others_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("token");
    for (mode, warned) in [(0o644, true), (0o600, false)] {
        let token = dir.0.join(format!("token{mode:o}"));
        std::fs::write(&token, "s3cret\n").expect("write token");
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let log = dir.0.join(format!("log{mode:o}"));
        let file = std::fs::File::create(&log).expect("log file");
        let server = Server::start_with_stderr(
            &[mlp_graph()],
            &["--auth-token-file", token.to_str().expect("utf-8 path")],
            Stdio::from(file),
        );
        let auth = [("Authorization", "Bearer s3cret".to_string())];
        assert_eq!(
            http(&server.addr, "GET", "/v2/health/ready", &auth, b"").0,
            200
        );
        let text = std::fs::read_to_string(&log).expect("log");
        assert_eq!(
            text.contains("readable by group or others"),
            warned,
            "mode {mode:o}: {text}"
        );
        assert!(!text.contains("s3cret"), "the log shows the token: {text}");
    }
}

#[test]
fn declared_but_unsent_bodies_reserve_budget_not_memory() {
    // 20 uploads declaring 50 MiB each fit the default 1 GiB budget; the 21st does not.
    let server = Server::start(&[mlp_graph()], &["--request-timeout-ms", "600000"]);
    let before = rss_kib(server.pid());
    let declared = 50 << 20;
    let holders: Vec<TcpStream> = (0..20)
        .map(|_| {
            half_sent(
                &server.addr,
                format!("{}{{", infer_head(declared)).as_bytes(),
            )
        })
        .collect();
    let deadline = Instant::now() + SOON;
    loop {
        let mut s = half_sent(
            &server.addr,
            format!("{}{{", infer_head(declared)).as_bytes(),
        );
        let mut buf = [0u8; 512];
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .expect("read timeout");
        if let Ok(n) = s.read(&mut buf) {
            let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
            if status_of(&answer) == 503 {
                assert!(
                    answer.to_ascii_lowercase().contains("retry-after"),
                    "{answer}"
                );
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the 21st upload was never refused"
        );
    }
    let grown_kib = rss_kib(server.pid()).saturating_sub(before);
    assert!(
        grown_kib < 64 << 10,
        "RSS grew {grown_kib} KiB for 1 GiB declared and nothing sent"
    );
    drop(holders);
    assert_eq!(server.post_good(&[]).0, 200);
}

#[test]
fn a_byte_budget_below_the_body_limit_is_refused_at_start() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["serve", "unused.yaml", "--max-inflight-bytes", "10"])
        .args(["--max-body-bytes", "100", "--http", "127.0.0.1:0"])
        .output()
        .expect("weir runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--max-inflight-bytes (10)"), "{err}");
}

/// A body of many empty BYTES strings parses into far more memory than its text (a vector per
/// element): the in-flight byte budget charges the parsed size, so such a request is refused
/// with 503 where the same bytes of numbers are served.
#[test]
fn bytes_tensors_are_charged_their_parsed_size() {
    let graph = format!(
        "name: text\ninputs:\n  - {{name: x, dtype: bytes, shape: [-1]}}\nnodes:\n  - model: {{id: m, path: {}, inputs: {{x: x}}}}\noutputs:\n  - {{name: y, from: m.y}}\n",
        crate::common::model("dtypes/string.onnx").display()
    );
    let server = Server::start(
        &[graph],
        &[
            "--max-inflight-bytes",
            "1000000",
            "--max-body-bytes",
            "500000",
        ],
    );
    let len = [("Content-Type", "application/json".to_string())];
    let n = 60_000;
    let body = format!(
        r#"{{"inputs":[{{"name":"x","shape":[1,{n}],"datatype":"BYTES","data":[{}]}}]}}"#,
        vec![r#""""#; n].join(",")
    );
    assert!(body.len() < 200_000, "the text is small: {}", body.len());
    let path = "/v2/models/text/infer";
    let (status, said) = http(&server.addr, "POST", path, &len, body.as_bytes());
    assert_eq!(status, 503, "{said}");
    assert!(said.contains("budget of 1000000 bytes"), "{said}");
    let small =
        r#"{"inputs":[{"name":"x","shape":[1,4],"datatype":"BYTES","data":["a","b","c","d"]}]}"#;
    let (status, said) = http(&server.addr, "POST", path, &len, small.as_bytes());
    assert_eq!(status, 200, "{said}");
}
