//! Recent requests' paths through a real `weir serve`: `/v2/weir/requests` lists the requests
//! kept, `/v2/weir/requests/{id}` gives one's hops with their times; one request in
//! `--ui-path-every` is kept (the first one always), behind the dashboard's token, and a hostile
//! id (too long, bad characters, not UTF-8, unknown) gets a 4xx naming it.

use serde_json::Value;

use crate::serve::{http, mlp_graph, Server, INFER};

/// A request to the mlp graph with the client id `id` (and `headers`).
pub(crate) fn infer_with_id(server: &Server, id: &str, headers: &[(&str, String)]) {
    let body = format!(
        "{{\"id\": {}, \"inputs\": [{{\"name\": \"x\", \"shape\": [64], \"datatype\": \"FP32\", \"data\": [{}]}}]}}",
        serde_json::to_string(id).unwrap(),
        vec!["0.5"; 64].join(",")
    );
    let (code, reply) = server.post(INFER, headers, body.as_bytes());
    assert_eq!(code, 200, "{reply}");
    let reply: Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["id"], Value::String(id.into()), "the id is echoed");
}

fn get_json(server: &Server, path: &str) -> (u16, Value) {
    let (code, body) = server.get(path);
    (code, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn a_kept_request_s_path_names_its_hops_with_times_and_hostile_ids_are_refused() {
    let server = Server::start(&[mlp_graph()], &["--ui-path-every", "1"]);
    infer_with_id(&server, "req-a", &[]);
    infer_with_id(&server, "req-b.2", &[]);
    infer_with_id(&server, "bad id", &[]);
    let (code, list) = get_json(&server, "/v2/weir/requests");
    assert_eq!(code, 200, "{list}");
    let ids: Vec<&str> = list["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!(&ids[1..], ["req-b.2", "req-a"], "newest first");
    assert!(
        ids[0].starts_with("weir-"),
        "an id the store refuses gives way to the engine's: {ids:?}"
    );
    assert_eq!(list["recorded"][0]["every"], 1);

    let (code, path) = get_json(&server, "/v2/weir/requests/req-a");
    assert_eq!(code, 200, "{path}");
    assert_eq!(path["graph"], "mlp");
    assert_eq!(path["rows"], 1);
    let hops = path["hops"].as_array().expect("hops");
    let nodes: Vec<&str> = hops.iter().map(|h| h["node"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["ingress", "m"]);
    let m = &hops[1];
    assert_eq!(m["parent"], 0);
    assert_eq!(m["measured"], true, "{m}");
    assert!(m["batch_size"].as_u64().is_some_and(|b| b >= 1), "{m}");
    assert!(m["run_ms"].as_f64().is_some(), "{m}");
    let total = path["duration_ms"].as_f64().expect("duration");
    for h in hops {
        let (start, len) = (
            h["start_ms"].as_f64().unwrap(),
            h["duration_ms"].as_f64().unwrap(),
        );
        assert!(start >= 0.0 && len >= 0.0 && start <= total, "{h}");
    }

    // Hostile ids: too long, characters outside the set, not UTF-8, unknown.
    let long = "a".repeat(129);
    let (code, body) = server.get(&format!("/v2/weir/requests/{long}"));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("id") && body.contains("129 bytes"), "{body}");
    let (code, body) = server.get("/v2/weir/requests/a%3Cscript%3E");
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("'<'") && !body.contains("<script>"), "{body}");
    let (code, _) = server.get("/v2/weir/requests/%FF%FE");
    assert_eq!(code, 400);
    let huge = "b".repeat(64 << 10);
    let (code, _) = server.get(&format!("/v2/weir/requests/{huge}"));
    assert!((400..500).contains(&code), "a huge id: {code}");
    let (code, body) = server.get("/v2/weir/requests/never-sent");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("never-sent"), "{body}");
}

#[test]
fn one_request_in_every_is_kept_behind_the_token_and_none_without_the_dashboard() {
    // The default keeps one in 16: the first request, not the second.
    let server = Server::start(&[mlp_graph()], &["--auth-token", "s3cret"]);
    let bearer = [("Authorization", "Bearer s3cret".to_string())];
    for id in ["first", "second"] {
        infer_with_id(&server, id, &bearer);
    }
    let get =
        |path: &str, headers: &[(&str, String)]| http(&server.addr, "GET", path, headers, b"");
    assert_eq!(get("/v2/weir/requests", &[]).0, 401);
    assert_eq!(get("/v2/weir/requests/first", &[]).0, 401);
    let basic = [("Authorization", "Basic dWk6czNjcmV0".to_string())]; // ui:s3cret
    assert_eq!(get("/v2/weir/requests/first", &basic).0, 200);
    assert_eq!(get("/v2/weir/requests/first", &bearer).0, 200);
    assert_eq!(get("/v2/weir/requests/second", &bearer).0, 404);
    let (_, status) = get("/v2/weir/status", &bearer);
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["graphs"][0]["paths"]["every"], 16);
    drop(server);

    let off = Server::start(&[mlp_graph()], &["--no-ui"]);
    assert_eq!(off.post_good(&[]).0, 200);
    assert_eq!(off.get("/v2/weir/requests").0, 404);
}
