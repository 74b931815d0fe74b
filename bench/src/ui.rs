//! The dashboard experiment: what open dashboards cost `weir serve`'s throughput. One graph, one
//! in-process HTTP server over it with the status feed on (the same [`StatusFeed`] and
//! [`weir::StatusBoard`] `weir serve` builds), and keep-alive clients posting binary-tensor
//! requests through a closed loop, measured with no dashboard open and with N event-stream
//! subscribers reading the feed (what N open pages of `/ui` cost the server: one serialisation
//! per tick, shared, and N sockets written), in the same run. Each repeat measures both, back to
//! back, alternating which goes first; the table gives medians over repeats, the spread (min–max),
//! and with / without as the median of the per-repeat ratios.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use weir_connectors::http::{HttpConfig, HttpServer, StatusFeed, StatusOptions};

use crate::client::{closed_loop, connect, prepare, Measured, Prepared, Until};
use crate::http::{layout_for, LocalServer};
use crate::overhead::{first_input, model_input, row_shape, spread, weir_graph};

/// Settings of the dashboard experiment.
#[derive(Debug, Clone)]
pub struct UiBenchConfig {
    /// The model (display name, file).
    pub model: (String, PathBuf),
    /// Client connections posting at once.
    pub clients: usize,
    /// Requests per measurement.
    pub requests: usize,
    /// Repetitions.
    pub repeats: usize,
    /// Event-stream subscribers in the measurement with dashboards.
    pub dashboards: usize,
}

/// One repeat: throughput and latency without and with the dashboards open, and the events each
/// subscriber received per second while measured (the proof they were live).
#[derive(Debug, Clone)]
pub struct UiRepeat {
    /// No dashboard open.
    pub without: Measured,
    /// The dashboards open.
    pub with: Measured,
    /// Events per subscriber per second during the measurement with them.
    pub events_per_s: f64,
}

/// An event-stream subscriber on its own thread, counting the documents it reads.
struct Subscriber {
    stream: TcpStream,
    thread: std::thread::JoinHandle<Result<u64>>,
}

impl Subscriber {
    /// Connects, asks for the stream, and returns once the first document arrived.
    fn open(addr: &str, stop: &Arc<AtomicBool>) -> Result<Subscriber> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_millis(200)))?;
        write!(
            stream,
            "GET /v2/weir/status/stream HTTP/1.1\r\nHost: {addr}\r\n\r\n"
        )?;
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let reader = stream.try_clone()?;
        let stop = Arc::clone(stop);
        let thread = std::thread::spawn(move || -> Result<u64> {
            let mut r = BufReader::new(reader);
            let mut events = 0u64;
            let mut line = String::new();
            loop {
                // A read that times out keeps what it read of the line for the next one.
                match r.read_line(&mut line) {
                    Ok(0) => bail!("the status stream ended"),
                    Ok(_) => {
                        if line.starts_with("data: ") {
                            events += 1;
                            if events == 1 {
                                let _ = first_tx.send(());
                            }
                        }
                        line.clear();
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e.into()),
                }
                if stop.load(Ordering::Relaxed) {
                    return Ok(events);
                }
            }
        });
        first_rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("no status document within 10 s"))?;
        Ok(Subscriber { stream, thread })
    }

    /// Closes the stream; the documents read.
    fn close(self) -> Result<u64> {
        let events = self
            .thread
            .join()
            .map_err(|_| anyhow!("subscriber thread panicked"))?;
        let _ = self.stream.shutdown(Shutdown::Both);
        events
    }
}

/// Measures `requests` over `clients` connections with `dashboards` subscribers open; returns the
/// measurement and the events per subscriber per second.
fn measure(
    addr: &str,
    prepared: &Prepared,
    config: &UiBenchConfig,
    dashboards: usize,
) -> Result<(Measured, f64)> {
    let stop = Arc::new(AtomicBool::new(false));
    let subscribers: Vec<Subscriber> = (0..dashboards)
        .map(|_| Subscriber::open(addr, &stop))
        .collect::<Result<_>>()?;
    let clients = connect(addr, config.clients)?;
    let started = Instant::now();
    let per_client = Until::Requests(config.requests.div_ceil(config.clients));
    let measured = closed_loop(clients, std::slice::from_ref(prepared), per_client)?;
    let seconds = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut events = 0u64;
    for s in subscribers {
        events += s.close()?;
    }
    let per_subscriber = if dashboards == 0 {
        0.0
    } else {
        events as f64 / dashboards as f64 / seconds
    };
    Ok((measured, per_subscriber))
}

/// Runs the dashboard experiment.
///
/// # Errors
/// When the model, the server or a measurement fails (a request not answered 200, a subscriber
/// that gets no document).
pub fn ui(config: &UiBenchConfig) -> Result<Vec<UiRepeat>> {
    let (_, path) = &config.model;
    let (input, output) =
        model_input(path).with_context(|| format!("reading {}", path.display()))?;
    let shape = row_shape(path)?;
    let (graph, workload) = weir_graph(path, &input, &output, &shape, layout_for(config.clients))?;
    let data = first_input(&workload);
    let mut board = weir::StatusBoard::new(vec![graph.status_probe()]);
    let feed = StatusFeed::new(
        Box::new(move || board.sample()),
        StatusOptions {
            max_subscribers: config.dashboards.max(1),
            ..StatusOptions::default()
        },
    );
    let server = HttpServer::new(
        vec![graph.runtime_handle()],
        HttpConfig::default(),
        Vec::new(),
    )
    .with_status(feed);
    let local = LocalServer::spawn(move |listener, stopped| async move {
        let _ = server.serve(listener, stopped).await;
    })?;
    let prepared = prepare(&local.addr, "overhead", &shape, &data, true);
    // Warm the path (sessions, allocations).
    measure(
        &local.addr,
        &prepared,
        &UiBenchConfig {
            requests: 50,
            ..config.clone()
        },
        0,
    )?;
    let mut repeats = Vec::new();
    for r in 0..config.repeats {
        eprintln!("repeat {}/{}", r + 1, config.repeats);
        let (without, with) = if r % 2 == 0 {
            let w = measure(&local.addr, &prepared, config, 0)?;
            (
                w,
                measure(&local.addr, &prepared, config, config.dashboards)?,
            )
        } else {
            let d = measure(&local.addr, &prepared, config, config.dashboards)?;
            (measure(&local.addr, &prepared, config, 0)?, d)
        };
        repeats.push(UiRepeat {
            without: without.0,
            with: with.0,
            events_per_s: with.1,
        });
    }
    drop(local);
    graph.shutdown();
    Ok(repeats)
}

/// The dashboard table as Markdown.
pub fn ui_table(repeats: &[UiRepeat], dashboards: usize) -> String {
    let pick = |f: fn(&UiRepeat) -> f64| repeats.iter().map(f).collect::<Vec<_>>();
    let ratio = pick(|r| r.with.0 / r.without.0.max(1e-9));
    let mut s = String::from(
        "| dashboards | req/s | with / without req/s | p50 ms | p99 ms | events per dashboard per s |\n|---|---|---|---|---|---|\n",
    );
    s.push_str(&format!(
        "| 0 | {} | 1 | {} | {} | – |\n",
        spread(&pick(|r| r.without.0), 1),
        spread(&pick(|r| r.without.1), 2),
        spread(&pick(|r| r.without.2), 2),
    ));
    s.push_str(&format!(
        "| {dashboards} | {} | {} | {} | {} | {} |\n",
        spread(&pick(|r| r.with.0), 1),
        spread(&ratio, 3),
        spread(&pick(|r| r.with.1), 2),
        spread(&pick(|r| r.with.2), 2),
        spread(&pick(|r| r.events_per_s), 2),
    ));
    s
}

/// Throughput per repeat, without and with the dashboards, as a PNG.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_ui(repeats: &[UiRepeat], dashboards: usize, path: &Path) -> Result<()> {
    let series = [
        (
            "no dashboard".to_string(),
            repeats.iter().map(|r| r.without.0).collect(),
        ),
        (
            format!("{dashboards} dashboards"),
            repeats.iter().map(|r| r.with.0).collect(),
        ),
    ];
    crate::plot::plot_per_repeat("Serving throughput with open dashboards", &series, path)
}
