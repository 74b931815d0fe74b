//! What a client reads before it infers, over HTTP: server and model metadata, configurations,
//! statistics, readiness and `/metrics`.
//!
//! A name is looked up in the model table first, then among the names served model-less
//! ([`crate::models::modelless`]), so a task answers these reads as a model does.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::error::ServeError;
use super::state::{authorize, json_ok, models_readiness, readiness, ServerState};
use crate::models::modelless::{find, statistics, Found};

pub(super) async fn server_metadata(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    Ok(json_ok(
        json!({"name": "weir", "version": env!("CARGO_PKG_VERSION"),
            "extensions": crate::models::extensions(s.shared_memory.enabled())}),
    ))
}

pub(super) async fn server_ready(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    if !s.config.health_unauthenticated {
        authorize(&s, &headers)?;
    }
    models_readiness(&s, None)
}

/// What `name` at `version` finds, in the table or served model-less, and its versions.
fn lookup(
    s: &ServerState,
    name: &str,
    version: Option<&str>,
) -> Result<(Found, Vec<u64>), ServeError> {
    Ok(find(
        &s.models.snapshot(),
        s.modelless.as_deref(),
        name,
        version,
    )?)
}

pub(super) async fn model_metadata(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    metadata_of(&s, &name, None, &headers)
}

pub(super) async fn model_metadata_versioned(
    State(s): State<Arc<ServerState>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    metadata_of(&s, &name, Some(&version), &headers)
}

fn metadata_of(
    s: &ServerState,
    name: &str,
    version: Option<&str>,
    headers: &HeaderMap,
) -> Result<Response, ServeError> {
    authorize(s, headers)?;
    let (found, versions) = lookup(s, name, version)?;
    Ok(json_ok(found.signature(name).metadata(&versions)))
}

pub(super) async fn model_config(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    Ok(json_ok(lookup(&s, &name, None)?.0.config()))
}

pub(super) async fn model_config_versioned(
    State(s): State<Arc<ServerState>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    Ok(json_ok(lookup(&s, &name, Some(&version))?.0.config()))
}

/// Triton's statistics document for every model, one, or one version of one.
fn stats_of(
    s: &ServerState,
    name: Option<&str>,
    version: Option<&str>,
) -> Result<Response, ServeError> {
    let models = s.models.snapshot();
    Ok(json_ok(statistics(
        &models,
        s.modelless.as_deref(),
        name,
        version,
    )?))
}

pub(super) async fn all_stats(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    stats_of(&s, None, None)
}

pub(super) async fn model_stats(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    stats_of(&s, Some(&name), None)
}

pub(super) async fn model_stats_versioned(
    State(s): State<Arc<ServerState>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    stats_of(&s, Some(&name), Some(&version))
}

pub(super) async fn model_ready(
    State(s): State<Arc<ServerState>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    ready_of(&s, &name, None, &headers)
}

pub(super) async fn model_ready_versioned(
    State(s): State<Arc<ServerState>>,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<StatusCode, ServeError> {
    ready_of(&s, &name, Some(&version), &headers)
}

/// Readiness of `name` at `version`, found as requests find it: a table model is ready while
/// it can answer; a name served model-less (a task, or one of its variants) while the server
/// is, as over gRPC, since a request for it loads what it needs.
fn ready_of(
    s: &ServerState,
    name: &str,
    version: Option<&str>,
    headers: &HeaderMap,
) -> Result<StatusCode, ServeError> {
    authorize(s, headers)?;
    match lookup(s, name, version)?.0 {
        Found::Table(_) => models_readiness(s, Some(name)),
        Found::ModelLess(_) => readiness(s),
    }
}

pub(super) async fn metrics(
    State(s): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Response, ServeError> {
    authorize(&s, &headers)?;
    let out = s.metrics.render();
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out,
    )
        .into_response())
}
