//! The HTTP experiment: `weir serve`'s path (an in-process server on loopback, spoken to by a
//! keep-alive HTTP/1.1 client) against the in-process path of the same graph and against bare ONNX
//! Runtime, for JSON and binary bodies, at client concurrency 1, 4 and 16.
//!
//! Layouts follow the load: at concurrency 1 everything (bare ORT, the graph) runs 1 session × 2
//! intra-op threads, the least-latency layout on 2 cores; above it, 2 sessions × 1 thread, the
//! most-throughput layout. Bare ORT's throughput reference is its saturated throughput at that
//! layout; its latency reference is back-to-back calls at concurrency 1. At one client the binary
//! path's added latency is also read call by call ([`Interleaved`]): a bare call, an HTTP request,
//! a loopback-floor request and the request with its tensors in shared memory in turn, so that
//! all four see the same machine.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use weir_connectors::http::{HttpConfig, HttpServer};
use weir_connectors::shared_memory::SharedMemory;
use weir_operators::model::OrtRuntime;

use crate::client::{http_load, prepare, Client, Prepared};
use crate::in_turn::{in_turn, median_difference_ms};
use crate::loopback::FloorServer;
use crate::overhead::{
    bare_call, bare_chunk, first_input, median, model_input, quantile_ms, sessions, weir_graph,
    Layout, IMAGE,
};
use crate::shm_client::ShmClient;
use weir::loadgen::{run_load, Arrival, LoadSpec};

/// Settings of the HTTP experiment.
#[derive(Debug, Clone)]
pub struct HttpBenchConfig {
    /// Models: display name and file.
    pub models: Vec<(String, PathBuf)>,
    /// Client concurrencies.
    pub concurrency: Vec<usize>,
    /// Requests per measurement (per model: scaled by `scale` below for slow models).
    pub requests: usize,
    /// Repetitions; medians reported.
    pub repeats: usize,
}

/// One row: a model, a concurrency, and every path's throughput and latency.
#[derive(Debug, Clone)]
pub struct HttpRow {
    /// Model.
    pub model: String,
    /// Client concurrency.
    pub concurrency: usize,
    /// Layout used.
    pub layout: Layout,
    /// Bare ORT: requests/s (saturated at this layout) and p50 ms (concurrency 1).
    pub bare: (f64, f64),
    /// In-process weir: requests/s, p50 ms, p99 ms.
    pub in_process: (f64, f64, f64),
    /// HTTP JSON: requests/s, p50 ms, p99 ms.
    pub json: (f64, f64, f64),
    /// HTTP binary: requests/s, p50 ms, p99 ms.
    pub binary: (f64, f64, f64),
    /// The loopback floor at one client (the binary request's bytes and a reply of its size, no
    /// HTTP server, graph or model: see `loopback`): requests/s, p50 ms, p99 ms.
    pub floor: Option<(f64, f64, f64)>,
    /// At one client, the binary path read call by call against bare ORT and the floor.
    pub interleaved: Option<Interleaved>,
}

/// A bare ONNX Runtime call, an HTTP binary request, a request to the loopback floor and the
/// request with its tensors in shared memory, in turn, at one client: each triple sees the same machine, so the differences within a triple carry no
/// drift between measurements taken one after another (which moves bare ORT's own p50 by more
/// than the HTTP path adds, on a shared VM).
#[derive(Debug, Clone, Default)]
pub struct Interleaved {
    /// Triples measured.
    pub calls: usize,
    /// p50 ms of the bare calls, the HTTP binary requests and the floor's requests.
    pub p50_ms: (f64, f64, f64),
    /// Median over the triples of binary − bare, in ms: what the HTTP path adds.
    pub added_ms: f64,
    /// Median over the triples of binary − bare − floor, in ms: what is left after moving the
    /// bytes (the HTTP server, the graph, their wake-ups).
    pub beyond_floor_ms: f64,
    /// p50 ms of the same request with its tensors in shared memory (a fourth call each round).
    pub shm_p50_ms: f64,
    /// Median over the rounds of shared memory − bare, in ms.
    pub shm_added_ms: f64,
}

/// Measures `calls` rounds (after 10 unrecorded ones, [`in_turn`]) of a bare call on `session`
/// (its input a fresh buffer, as a request's arrives), the `binary` request to `server`, the
/// same request to `floor`, and the request to `server` with its tensors in shared memory
/// (written and read back by the client each call), each over one keep-alive connection.
fn interleaved(
    session: &mut ort::session::Session,
    (input, data): (&str, &[f32]),
    binary: &Prepared,
    (server, floor): (&str, &str),
    calls: usize,
) -> Result<Interleaved> {
    let mut bare = || {
        let fresh = data.to_vec();
        bare_call(session, input, &IMAGE, &fresh)
    };
    let mut to_server = posting(Client::connect(server)?, binary);
    let mut to_floor = posting(Client::connect(floor)?, binary);
    let mut shm = ShmClient::register(server, "overhead", &IMAGE, data)?;
    let mut in_shm = || shm.call();
    let [bare, http, floors, shared] = in_turn(
        calls,
        10,
        [&mut bare, &mut to_server, &mut to_floor, &mut in_shm],
    )?;
    Ok(Interleaved {
        calls: bare.len(),
        p50_ms: (
            quantile_ms(&bare, 0.5)?,
            quantile_ms(&http, 0.5)?,
            quantile_ms(&floors, 0.5)?,
        ),
        added_ms: median_difference_ms(&http, &[&bare]),
        beyond_floor_ms: median_difference_ms(&http, &[&bare, &floors]),
        shm_p50_ms: quantile_ms(&shared, 0.5)?,
        shm_added_ms: median_difference_ms(&shared, &[&bare]),
    })
}

/// One timed exchange of `request` over `client` a call; a status other than 200 is an error.
pub(crate) fn posting(
    mut client: Client,
    request: &Prepared,
) -> impl FnMut() -> Result<Duration> + '_ {
    move || {
        let t = Instant::now();
        let (status, _) = client.exchange(&request.head, &request.body)?;
        if status != 200 {
            bail!("HTTP {status} to the binary request");
        }
        Ok(t.elapsed())
    }
}

/// When a [`LocalServer`]'s server is to stop.
pub(crate) type StopSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// An in-process HTTP server over a running graph, stopped on drop.
pub(crate) struct LocalServer {
    pub(crate) addr: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LocalServer {
    /// A server over `graph`, with system shared memory on (the benchmark's client is local).
    pub(crate) fn start(graph: &weir::RunningGraph) -> Result<LocalServer> {
        let server = HttpServer::new(
            vec![graph.runtime_handle()],
            HttpConfig::default(),
            Vec::new(),
        )
        .with_shared_memory(SharedMemory::system());
        LocalServer::spawn(move |listener, stopped| async move {
            let _ = server.serve(listener, stopped).await;
        })
    }

    /// Runs `serve` (a server on the listener it is handed, until the future it is handed
    /// completes) on a runtime of its own, as `weir serve` runs its servers.
    pub(crate) fn spawn<F, Fut>(serve: F) -> Result<LocalServer>
    where
        F: FnOnce(tokio::net::TcpListener, StopSignal) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()>,
    {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-server")
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?.to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let signal: StopSignal = Box::pin(async {
                let _ = stopped.await;
            });
            rt.block_on(serve(listener, signal));
        });
        Ok(LocalServer {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bare ONNX Runtime at `concurrency` clients: (requests/s, p50 ms, p99 ms). At one client, back
/// to back calls on the first session (latencies measured); above it, every session saturated
/// (throughput only, latencies 0).
pub(crate) fn bare_reference(
    sessions: &mut [ort::session::Session],
    input: &str,
    shape: &[usize],
    data: &[f32],
    concurrency: usize,
    requests: usize,
) -> Result<(f64, f64, f64)> {
    if concurrency <= 1 {
        let session = sessions.first_mut().ok_or_else(|| anyhow!("no session"))?;
        let lat = (0..requests)
            .map(|_| bare_call(session, input, shape, data))
            .collect::<Result<Vec<_>>>()?;
        let total: f64 = lat.iter().map(Duration::as_secs_f64).sum();
        Ok((
            lat.len() as f64 / total,
            quantile_ms(&lat, 0.5)?,
            quantile_ms(&lat, 0.99)?,
        ))
    } else {
        let n = sessions.len();
        let elapsed = bare_chunk(sessions, input, shape, data, requests)?;
        Ok((
            (requests.div_ceil(n) * n) as f64 / elapsed.as_secs_f64(),
            0.0,
            0.0,
        ))
    }
}

pub(crate) fn layout_for(concurrency: usize) -> Layout {
    if concurrency <= 1 {
        Layout {
            instances: 1,
            threads: 2,
        }
    } else {
        Layout {
            instances: 2,
            threads: 1,
        }
    }
}

/// Runs the HTTP experiment.
///
/// # Errors
/// When a model, the runtime or a run fails.
pub fn http(config: &HttpBenchConfig) -> Result<Vec<HttpRow>> {
    let runtime = OrtRuntime::get()?;
    let mut rows = Vec::new();
    for (name, path) in &config.models {
        let (input, output) =
            model_input(path).with_context(|| format!("reading {}", path.display()))?;
        // Heavier models get fewer requests per measurement, so each takes a few seconds.
        let scale = if name.contains("resnet") { 5 } else { 1 };
        for &c in &config.concurrency {
            let layout = layout_for(c);
            let requests = (config.requests / scale).max(c * 2);
            let (graph, workload) = weir_graph(path, &input, &output, &IMAGE, layout)?;
            let data = first_input(&workload);
            let server = LocalServer::start(&graph)?;
            let json = prepare(&server.addr, "overhead", &IMAGE, &data, false);
            let binary = prepare(&server.addr, "overhead", &IMAGE, &data, true);
            let mut bare_sessions = sessions(&runtime, path, layout)?;
            // Warm every path once.
            bare_chunk(&mut bare_sessions, &input, &IMAGE, &data, 4)?;
            http_load(&server.addr, &binary, 1, 4)?;
            http_load(&server.addr, &json, 1, 2)?;
            // The floor answers with a reply as long as the graph's binary one.
            let floor = if c <= 1 {
                let (status, reply) =
                    Client::connect(&server.addr)?.exchange(&binary.head, &binary.body)?;
                if status != 200 {
                    bail!("HTTP {status} to the binary request");
                }
                let floor = FloorServer::start(reply.len())?;
                http_load(&floor.addr, &binary, 1, 4)?;
                Some(floor)
            } else {
                None
            };
            let load = LoadSpec {
                requests,
                warmup: 0,
                arrival: Arrival::Closed { concurrency: c },
                seed: 1,
                label_output: None,
                progress: false,
            };
            run_load(
                graph.runtime(),
                &workload,
                &LoadSpec {
                    requests: 4,
                    ..load.clone()
                },
            );
            let mut samples: [Vec<(f64, f64, f64)>; 5] = Default::default();
            let mut triples = Vec::new();
            for r in 0..config.repeats {
                eprintln!("{name} c={c}: repeat {}/{}", r + 1, config.repeats);
                let bare = bare_reference(&mut bare_sessions, &input, &IMAGE, &data, c, requests)?;
                samples[0].push(bare);
                let report = run_load(graph.runtime(), &workload, &load);
                if report.error_count() > 0 {
                    bail!("in-process run had errors: {:?}", report.errors);
                }
                samples[1].push((
                    report.throughput(),
                    report.latency_ms(0.5),
                    report.latency_ms(0.99),
                ));
                samples[2].push(http_load(&server.addr, &json, c, requests)?);
                samples[3].push(http_load(&server.addr, &binary, c, requests)?);
                if let Some(floor) = &floor {
                    samples[4].push(http_load(&floor.addr, &binary, 1, requests)?);
                    let session = bare_sessions
                        .first_mut()
                        .ok_or_else(|| anyhow!("no session"))?;
                    triples.push(interleaved(
                        session,
                        (&input, &data),
                        &binary,
                        (&server.addr, &floor.addr),
                        requests,
                    )?);
                }
            }
            drop(floor);
            drop(server);
            graph.shutdown();
            let med = |v: &[(f64, f64, f64)]| {
                (
                    median(v.iter().map(|x| x.0).collect()),
                    median(v.iter().map(|x| x.1).collect()),
                    median(v.iter().map(|x| x.2).collect()),
                )
            };
            let bare = med(&samples[0]);
            rows.push(HttpRow {
                model: name.clone(),
                concurrency: c,
                layout,
                bare: (bare.0, bare.1),
                in_process: med(&samples[1]),
                json: med(&samples[2]),
                binary: med(&samples[3]),
                floor: (!samples[4].is_empty()).then(|| med(&samples[4])),
                interleaved: merged(&triples),
            });
        }
    }
    Ok(rows)
}

/// The HTTP table as Markdown. At one client it also reads the binary path's added p50 against
/// the loopback floor: what is left after moving the bytes is the HTTP server's and the graph's.
pub fn http_table(rows: &[HttpRow]) -> String {
    let mut s = String::from(
        "| model | clients | layout | bare ORT req/s | in-process req/s | HTTP JSON req/s | HTTP binary req/s | binary / bare | binary / in-process | bare p50 ms | in-process p50 ms | JSON p50 ms | binary p50 ms | binary p50 − bare p50 ms | loopback floor p50 ms | added − floor ms | binary p99 ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let dash = || "–".to_string();
    for r in rows {
        let one = r.concurrency <= 1;
        let added = r.binary.1 - r.bare.1;
        let bare_p50 = if one {
            format!("{:.3}", r.bare.1)
        } else {
            dash()
        };
        let delta = if one { format!("{added:+.3}") } else { dash() };
        let (floor, beyond) = match r.floor {
            Some(f) => (format!("{:.3}", f.1), format!("{:+.3}", added - f.1)),
            None => (dash(), dash()),
        };
        s.push_str(&format!(
            "| {} | {} | {}×{} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.3} |\n",
            r.model,
            r.concurrency,
            r.layout.instances,
            r.layout.threads,
            r.bare.0,
            r.in_process.0,
            r.json.0,
            r.binary.0,
            r.binary.0 / r.bare.0.max(1e-9),
            r.binary.0 / r.in_process.0.max(1e-9),
            bare_p50,
            r.in_process.1,
            r.json.1,
            r.binary.1,
            delta,
            floor,
            beyond,
            r.binary.2
        ));
    }
    s
}

/// The repeats' triples as one: medians of their figures, calls added up; `None` for none.
fn merged(repeats: &[Interleaved]) -> Option<Interleaved> {
    let m = |f: fn(&Interleaved) -> f64| median(repeats.iter().map(f).collect());
    (!repeats.is_empty()).then(|| Interleaved {
        calls: repeats.iter().map(|r| r.calls).sum(),
        p50_ms: (m(|r| r.p50_ms.0), m(|r| r.p50_ms.1), m(|r| r.p50_ms.2)),
        added_ms: m(|r| r.added_ms),
        beyond_floor_ms: m(|r| r.beyond_floor_ms),
        shm_p50_ms: m(|r| r.shm_p50_ms),
        shm_added_ms: m(|r| r.shm_added_ms),
    })
}

/// The one-client rows read call by call ([`Interleaved`]) as Markdown; empty without any.
pub fn interleaved_table(rows: &[HttpRow]) -> String {
    let read: Vec<(&HttpRow, &Interleaved)> = rows
        .iter()
        .filter_map(|r| r.interleaved.as_ref().map(|i| (r, i)))
        .collect();
    if read.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "| model | rounds | bare p50 ms | HTTP binary p50 ms | loopback floor p50 ms | binary − bare, median of pairs ms | binary − bare − floor, median ms | shared memory p50 ms | shared memory − bare, median ms |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for (r, i) in read {
        s.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {:.3} | {:+.3} | {:+.3} | {:.3} | {:+.3} |\n",
            r.model,
            i.calls,
            i.p50_ms.0,
            i.p50_ms.1,
            i.p50_ms.2,
            i.added_ms,
            i.beyond_floor_ms,
            i.shm_p50_ms,
            i.shm_added_ms
        ));
    }
    s
}

/// Default model set: the zoo's squeezenet and resnet50 under `$WEIR_HOME` or `.weir`.
pub fn default_models() -> Vec<(String, PathBuf)> {
    let zoo = crate::weir_home().join("zoo");
    vec![
        ("squeezenet".to_string(), zoo.join("squeezenet.onnx")),
        ("resnet50".to_string(), zoo.join("resnet50.onnx")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(interleaved: Option<Interleaved>) -> HttpRow {
        HttpRow {
            model: "m".into(),
            concurrency: 1,
            layout: layout_for(1),
            bare: (1.0, 1.0),
            in_process: (1.0, 1.0, 1.0),
            json: (1.0, 1.0, 1.0),
            binary: (1.0, 1.0, 1.0),
            floor: None,
            interleaved,
        }
    }

    #[test]
    fn repeats_merge_into_medians_and_the_table_shows_only_rows_read_call_by_call() {
        let repeat = |added_ms: f64| Interleaved {
            calls: 300,
            p50_ms: (4.0 + added_ms, 5.0, 0.2),
            added_ms,
            beyond_floor_ms: added_ms - 0.2,
            shm_p50_ms: 4.5,
            shm_added_ms: added_ms / 2.0,
        };
        let merged = merged(&[repeat(0.5), repeat(0.9), repeat(0.6)]).expect("three repeats");
        assert_eq!(merged.calls, 900);
        assert!((merged.added_ms - 0.6).abs() < 1e-9);
        assert!((merged.beyond_floor_ms - 0.4).abs() < 1e-9);
        assert!((merged.p50_ms.0 - 4.6).abs() < 1e-9);
        assert!(super::merged(&[]).is_none());
        let table = interleaved_table(&[row(Some(merged)), row(None)]);
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(
            table
                .contains("| m | 900 | 4.600 | 5.000 | 0.200 | +0.600 | +0.400 | 4.500 | +0.300 |"),
            "{table}"
        );
        assert!(interleaved_table(&[row(None)]).is_empty());
    }
}
