//! The gRPC experiment: `weir serve`'s gRPC path (`inference.GRPCInferenceService`, raw tensor
//! contents) against HTTP with binary bodies and against bare ONNX Runtime, in one run, for an
//! image model and a small one, at client concurrency 1, 4 and 16.
//!
//! Both servers run in process over the same running graph, each on a runtime of its own as
//! `weir serve` runs them, and are spoken to on loopback: HTTP by the keep-alive HTTP/1.1 clients
//! of the HTTP experiment (`client.rs`), gRPC by clients generated from the same `.proto`, one
//! HTTP/2 connection per client (`grpc_client.rs`), each client a closed loop on a thread of its
//! own, so both protocols' clients do the same work around a request. Layouts and the bare-ORT
//! reference are the HTTP experiment's (`layout_for`, `bare_reference`): saturated throughput at
//! the layout, back-to-back latency at one client. The paths take turns within each repeat, so
//! all three see the same machine.

use std::path::PathBuf;

use anyhow::{Context, Result};
use weir_connectors::grpc::proto::model_infer_request::{
    InferInputTensor, InferRequestedOutputTensor,
};
use weir_connectors::grpc::proto::ModelInferRequest;
use weir_connectors::grpc::{GrpcConfig, GrpcServer};
use weir_operators::model::OrtRuntime;

use crate::client::{http_load, prepare, Client};
use crate::grpc_client::{calling, grpc_load};
use crate::http::{bare_reference, layout_for, posting, LocalServer};
use crate::in_turn::{in_turn, median_difference_ms};
use crate::overhead::quantile_ms;
use crate::overhead::{
    bare_chunk, first_input, median, model_input, row_shape, sessions, weir_graph, Layout,
};

/// Settings of the gRPC experiment.
#[derive(Debug, Clone)]
pub struct GrpcBenchConfig {
    /// Models: display name and file.
    pub models: Vec<(String, PathBuf)>,
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// Requests per measurement for an image model; models with inputs under 10,000 elements get
    /// ten times as many (each takes well under a millisecond).
    pub requests: usize,
    /// Repetitions; medians reported.
    pub repeats: usize,
    /// Measure this path alone (for profiling one path: the others' columns read "–").
    pub only: Option<RequestPath>,
}

/// One of the three paths a row compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RequestPath {
    /// Bare ONNX Runtime.
    Bare,
    /// HTTP with binary bodies.
    Http,
    /// gRPC with raw contents.
    Grpc,
}

/// One row: a model, a concurrency, and each path's requests/s, p50 ms and p99 ms.
#[derive(Debug, Clone)]
pub struct GrpcRow {
    /// Model.
    pub model: String,
    /// Client concurrency.
    pub concurrency: usize,
    /// Layout used.
    pub layout: Layout,
    /// Bare ORT (latencies only at one client).
    pub bare: (f64, f64, f64),
    /// HTTP with binary bodies.
    pub http_binary: (f64, f64, f64),
    /// gRPC with raw contents.
    pub grpc: (f64, f64, f64),
    /// At one client with both paths measured, HTTP binary and gRPC read call by call.
    pub in_turn: Option<InTurn>,
}

/// HTTP binary and gRPC requests in turn at one client, one connection each: every pair sees the
/// same machine, so the median of the paired differences carries no drift between phases.
#[derive(Debug, Clone, Default)]
pub struct InTurn {
    /// Pairs measured, all repeats.
    pub pairs: usize,
    /// p50 ms of the HTTP binary requests and of the gRPC calls (medians of the repeats).
    pub p50_ms: (f64, f64),
    /// Median over pairs of gRPC − HTTP binary, in ms (median of the repeats).
    pub grpc_minus_http_ms: f64,
}

/// `pairs` pairs (after 10 unrecorded ones) of the `binary` request to `http` and `request` to
/// `grpc`.
fn http_and_grpc_in_turn(
    (http, binary): (&str, &crate::client::Prepared),
    (grpc, request): (&str, &ModelInferRequest),
    pairs: usize,
) -> Result<InTurn> {
    let mut over_http = posting(Client::connect(http)?, binary);
    let mut over_grpc = calling(grpc, request)?;
    let [h, g] = in_turn(pairs, 10, [&mut over_http, &mut over_grpc])?;
    Ok(InTurn {
        pairs: h.len(),
        p50_ms: (quantile_ms(&h, 0.5)?, quantile_ms(&g, 0.5)?),
        grpc_minus_http_ms: median_difference_ms(&g, &[&h]),
    })
}

/// The gRPC request of one row of `shape` to input `x`, asking for output `y`.
fn grpc_request(shape: &[usize], data: &[f32]) -> ModelInferRequest {
    let mut raw = Vec::with_capacity(data.len() * 4);
    data.iter()
        .for_each(|x| raw.extend_from_slice(&x.to_le_bytes()));
    ModelInferRequest {
        model_name: "overhead".into(),
        inputs: vec![InferInputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: std::iter::once(1)
                .chain(shape.iter().map(|&d| d as i64))
                .collect(),
            ..Default::default()
        }],
        outputs: vec![InferRequestedOutputTensor {
            name: "y".into(),
            ..Default::default()
        }],
        raw_input_contents: vec![raw.into()],
        ..Default::default()
    }
}

/// Starts an in-process gRPC server over `graph`.
fn grpc_server(graph: &weir::RunningGraph) -> Result<LocalServer> {
    let server = GrpcServer::new(vec![graph.runtime_handle()], GrpcConfig::default());
    LocalServer::spawn(move |listener, stopped| async move {
        if let Err(e) = server.serve(listener, stopped).await {
            eprintln!("gRPC server stopped: {e}");
        }
    })
}

/// Runs the gRPC experiment.
///
/// # Errors
/// When a model, the runtime or a run fails.
pub fn grpc(config: &GrpcBenchConfig) -> Result<Vec<GrpcRow>> {
    let runtime = OrtRuntime::get()?;
    let mut rows = Vec::new();
    for (name, path) in &config.models {
        let (input, output) =
            model_input(path).with_context(|| format!("reading {}", path.display()))?;
        let shape = row_shape(path)?;
        let small = shape.iter().product::<usize>() < 10_000;
        let per_measurement = if small {
            config.requests * 10
        } else {
            config.requests
        };
        for &c in &config.concurrency {
            let layout = layout_for(c);
            let requests = per_measurement.max(c * 2);
            let (graph, workload) = weir_graph(path, &input, &output, &shape, layout)?;
            let data = first_input(&workload);
            let http = LocalServer::start(&graph)?;
            let grpc = grpc_server(&graph)?;
            let binary = prepare(&http.addr, "overhead", &shape, &data, true);
            let request = grpc_request(&shape, &data);
            let mut bare_sessions = sessions(&runtime, path, layout)?;
            let runs = |path: RequestPath| config.only.is_none_or(|only| only == path);
            // Warm every path once.
            if runs(RequestPath::Bare) {
                bare_chunk(&mut bare_sessions, &input, &shape, &data, 4)?;
            }
            if runs(RequestPath::Http) {
                http_load(&http.addr, &binary, 1, 4)?;
            }
            if runs(RequestPath::Grpc) {
                grpc_load(&grpc.addr, &request, 1, 4)?;
            }
            let skipped = (f64::NAN, f64::NAN, f64::NAN);
            let mut samples: [Vec<(f64, f64, f64)>; 3] = Default::default();
            let mut pairs = Vec::new();
            for r in 0..config.repeats {
                eprintln!("{name} c={c}: repeat {}/{}", r + 1, config.repeats);
                samples[0].push(if runs(RequestPath::Bare) {
                    bare_reference(&mut bare_sessions, &input, &shape, &data, c, requests)?
                } else {
                    skipped
                });
                samples[1].push(if runs(RequestPath::Http) {
                    http_load(&http.addr, &binary, c, requests)?
                } else {
                    skipped
                });
                samples[2].push(if runs(RequestPath::Grpc) {
                    grpc_load(&grpc.addr, &request, c, requests)?
                } else {
                    skipped
                });
                if c <= 1 && config.only.is_none() {
                    pairs.push(http_and_grpc_in_turn(
                        (&http.addr, &binary),
                        (&grpc.addr, &request),
                        requests,
                    )?);
                }
            }
            drop(grpc);
            drop(http);
            graph.shutdown();
            let med = |v: &[(f64, f64, f64)]| {
                (
                    median(v.iter().map(|x| x.0).collect()),
                    median(v.iter().map(|x| x.1).collect()),
                    median(v.iter().map(|x| x.2).collect()),
                )
            };
            rows.push(GrpcRow {
                model: name.clone(),
                concurrency: c,
                layout,
                bare: med(&samples[0]),
                http_binary: med(&samples[1]),
                grpc: med(&samples[2]),
                in_turn: (!pairs.is_empty()).then(|| {
                    let m = |f: fn(&InTurn) -> f64| median(pairs.iter().map(f).collect());
                    InTurn {
                        pairs: pairs.iter().map(|p| p.pairs).sum(),
                        p50_ms: (m(|p| p.p50_ms.0), m(|p| p.p50_ms.1)),
                        grpc_minus_http_ms: m(|p| p.grpc_minus_http_ms),
                    }
                }),
            });
        }
    }
    Ok(rows)
}

/// The gRPC table as Markdown.
pub fn grpc_table(rows: &[GrpcRow]) -> String {
    let mut s = String::from(
        "| model | clients | layout | bare ORT req/s | HTTP binary req/s | gRPC req/s | HTTP binary / bare | gRPC / bare | gRPC / HTTP binary | bare p50 ms | HTTP binary p50 ms | gRPC p50 ms | HTTP binary p99 ms | gRPC p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    // A path not measured (`--only`) reads "–".
    let num = |x: f64, digits: usize| {
        if x.is_nan() {
            "–".to_string()
        } else {
            format!("{x:.digits$}")
        }
    };
    let ratio = |a: f64, b: f64| {
        num(
            if b.is_nan() {
                f64::NAN
            } else {
                a / b.max(1e-9)
            },
            3,
        )
    };
    for r in rows {
        let bare_p50 = if r.concurrency <= 1 {
            num(r.bare.1, 3)
        } else {
            "–".into()
        };
        s.push_str(&format!(
            "| {} | {} | {}×{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.model,
            r.concurrency,
            r.layout.instances,
            r.layout.threads,
            num(r.bare.0, 1),
            num(r.http_binary.0, 1),
            num(r.grpc.0, 1),
            ratio(r.http_binary.0, r.bare.0),
            ratio(r.grpc.0, r.bare.0),
            ratio(r.grpc.0, r.http_binary.0),
            bare_p50,
            num(r.http_binary.1, 3),
            num(r.grpc.1, 3),
            num(r.http_binary.2, 3),
            num(r.grpc.2, 3),
        ));
    }
    s
}

/// Default model set: the zoo's squeezenet and the small MLP the tests use.
/// The one-client rows read call by call ([`InTurn`]) as Markdown; empty without any.
pub fn in_turn_table(rows: &[GrpcRow]) -> String {
    let read: Vec<(&GrpcRow, &InTurn)> = rows
        .iter()
        .filter_map(|r| r.in_turn.as_ref().map(|t| (r, t)))
        .collect();
    if read.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "| model | pairs | HTTP binary p50 ms | gRPC p50 ms | gRPC − HTTP binary, median of pairs µs |\n|---|---|---|---|---|\n",
    );
    for (r, t) in read {
        s.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:+.1} |\n",
            r.model,
            t.pairs,
            t.p50_ms.0,
            t.p50_ms.1,
            t.grpc_minus_http_ms * 1e3
        ));
    }
    s
}

pub fn default_models() -> Vec<(String, PathBuf)> {
    let home = crate::weir_home();
    vec![
        (
            "squeezenet".to_string(),
            home.join("zoo").join("squeezenet.onnx"),
        ),
        ("mlp".to_string(), home.join("models").join("mlp_a.onnx")),
    ]
}
