//! Recent requests' paths: `/v2/weir/requests` (the ids kept, newest first, over every served
//! graph) and `/v2/weir/requests/{id}` (one request's hops as a timeline), from each graph's
//! [`weir_engine::trace::PathStore`].
//!
//! Served beside the status feed and behind the same credentials. The id is checked
//! ([`check_id`]: length, then charset) before it is used or echoed: a bad one gets 400 naming
//! the field, one not held 404 naming it. Neither route reads a body or a query; the answers are
//! bounded by the stores' own bounds.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use weir_engine::trace::paths::{check_id, MAX_PATHS};
use weir_engine::trace::{PathHop, RequestPath};

use super::auth::AuthToken;
use crate::models::ModelTable;

/// What the routes read.
#[derive(Clone)]
pub(crate) struct RequestsState {
    pub(crate) models: Arc<ModelTable>,
    pub(crate) auth_token: Option<AuthToken>,
}

/// `/v2/weir/requests` and `/v2/weir/requests/{id}`.
pub(crate) fn routes(state: RequestsState) -> Router {
    Router::new()
        .route("/v2/weir/requests", get(list))
        .route("/v2/weir/requests/{id}", get(one))
        .with_state(state)
}

fn reply(code: StatusCode, body: &Value) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Every path kept, with its graph, newest first, at most [`MAX_PATHS`].
fn kept(models: &ModelTable) -> (Vec<(String, Arc<RequestPath>)>, Vec<Value>) {
    let snapshot = models.snapshot();
    let mut all = Vec::new();
    let mut every = Vec::new();
    for (name, version) in snapshot.all() {
        let store = version.runtime.paths();
        every.push(json!({"graph": name, "every": store.every()}));
        all.extend(store.recent().into_iter().map(|p| (name.to_string(), p)));
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.1.started));
    all.truncate(MAX_PATHS);
    (all, every)
}

async fn list(State(s): State<RequestsState>, headers: HeaderMap) -> Response {
    if let Some(refused) = crate::ui::refuse(s.auth_token.as_ref(), &headers) {
        return refused;
    }
    let (paths, every) = kept(&s.models);
    let now = SystemTime::now();
    let requests: Vec<Value> = paths
        .iter()
        .map(|(graph, p)| {
            json!({
                "id": p.id,
                "graph": graph,
                "ago_s": now.duration_since(p.started).unwrap_or_default().as_secs_f64(),
                "duration_ms": ms(p.duration),
                "hops": p.hops.len(),
            })
        })
        .collect();
    reply(
        StatusCode::OK,
        &json!({"requests": requests, "recorded": every}),
    )
}

async fn one(
    State(s): State<RequestsState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Some(refused) = crate::ui::refuse(s.auth_token.as_ref(), &headers) {
        return refused;
    }
    if let Err(e) = check_id(&id) {
        return reply(
            StatusCode::BAD_REQUEST,
            &json!({"error": format!("id: {e}")}),
        );
    }
    let snapshot = s.models.snapshot();
    let found = snapshot
        .all()
        .filter_map(|(name, v)| v.runtime.paths().get(&id).map(|p| (name, p)))
        .max_by_key(|(_, p)| p.started);
    match found {
        Some((graph, p)) => reply(StatusCode::OK, &timeline(graph, &p)),
        None => reply(
            StatusCode::NOT_FOUND,
            &json!({"error": format!(
                "request `{id}` is not held: only the newest {MAX_PATHS} recorded paths per graph \
                 are kept, of the requests each graph records"
            )}),
        ),
    }
}

/// A path as the page draws it: offsets and durations in milliseconds from the request's arrival.
fn timeline(graph: &str, p: &RequestPath) -> Value {
    json!({
        "id": p.id,
        "graph": graph,
        "started_unix_ms": p.started
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, ms),
        "duration_ms": ms(p.duration),
        "rows": p.rows,
        "truncated": p.truncated,
        "hops": p.hops.iter().map(hop).collect::<Vec<_>>(),
    })
}

fn hop(h: &PathHop) -> Value {
    json!({
        "node": h.node,
        "parent": h.parent,
        "seq": h.seq,
        "start_ms": ms(h.start),
        "duration_ms": ms(h.duration),
        "measured": h.measured,
        "batch_size": h.batch_size,
        "queue_wait_ms": h.queue_wait.map(ms),
        "run_ms": h.run.map(ms),
        "replica": h.replica,
        "remote": h.remote,
        "inputs": h.inputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeline_has_every_hop_in_milliseconds_from_arrival() {
        let p = RequestPath {
            id: "r1".into(),
            started: SystemTime::UNIX_EPOCH + Duration::from_secs(2),
            duration: Duration::from_millis(9),
            rows: 1,
            hops: vec![PathHop {
                node: "m".into(),
                parent: None,
                seq: 4,
                start: Duration::from_millis(1),
                duration: Duration::from_micros(2500),
                measured: true,
                batch_size: Some(3),
                queue_wait: None,
                run: Some(Duration::from_millis(2)),
                replica: Some("e0".into()),
                remote: false,
                inputs: 1,
            }],
            truncated: false,
        };
        let t = timeline("g", &p);
        assert_eq!(t["started_unix_ms"], json!(2000.0));
        assert_eq!(t["hops"][0]["duration_ms"], json!(2.5));
        assert_eq!(t["hops"][0]["batch_size"], json!(3));
        assert_eq!(t["hops"][0]["queue_wait_ms"], Value::Null);
        assert_eq!(t["hops"][0]["replica"], json!("e0"));
    }
}
