//! The path-recording experiment: what keeping request paths for the dashboard's "request path"
//! panel costs serving. Three graphs of the same model run in one process, each behind its own
//! in-process HTTP server, and differ only in how many requests they keep the path of
//! (`weir serve --ui-path-every`: 0 keeps none, 16 is the default, 1 keeps every request's). The
//! same keep-alive clients post the same binary-tensor request to each through the same closed
//! loop. Each repeat measures all three back to back, the order rotated from one repeat to the
//! next so each setting goes first once in three; the table gives medians over repeats, the
//! spread (min–max), and each setting's throughput and p99 over those of keeping none in the
//! same repeat (median of the per-repeat ratios).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use weir::RuntimeOptions;
use weir_connectors::http::{HttpConfig, HttpServer};

use crate::client::{closed_loop, connect, prepare, Measured, Prepared, Until};
use crate::http::{layout_for, LocalServer};
use crate::overhead::{first_input, model_input, row_shape, spread, weir_graph_with};

/// Settings of the path-recording experiment.
#[derive(Debug, Clone)]
pub struct UiPathsConfig {
    /// The model (display name, file).
    pub model: (String, PathBuf),
    /// Client connections posting at once.
    pub clients: usize,
    /// Requests per measurement.
    pub requests: usize,
    /// Repetitions.
    pub repeats: usize,
    /// The settings compared, the reference (the first: keep none) first.
    pub every: Vec<u32>,
}

/// One repeat: a measurement per setting, in the order of [`UiPathsConfig::every`].
pub type UiPathsRepeat = Vec<Measured>;

/// One graph of the experiment: its server, its prepared request, and the graph.
struct Served {
    graph: weir::RunningGraph,
    server: LocalServer,
    request: Prepared,
}

impl Served {
    /// The graph keeping one path in `every`, behind a server of its own.
    fn start(config: &UiPathsConfig, every: u32) -> Result<Served> {
        let (_, path) = &config.model;
        let (input, output) =
            model_input(path).with_context(|| format!("reading {}", path.display()))?;
        let shape = row_shape(path)?;
        let options = RuntimeOptions {
            path_every: every,
            ..RuntimeOptions::default()
        };
        let layout = layout_for(config.clients);
        let (graph, workload) = weir_graph_with(path, &input, &output, &shape, layout, options)?;
        let server = HttpServer::new(
            vec![graph.runtime_handle()],
            HttpConfig::default(),
            Vec::new(),
        );
        let server = LocalServer::spawn(move |listener, stopped| async move {
            let _ = server.serve(listener, stopped).await;
        })?;
        let request = prepare(
            &server.addr,
            "overhead",
            &shape,
            &first_input(&workload),
            true,
        );
        Ok(Served {
            graph,
            server,
            request,
        })
    }

    /// `requests` over `clients` connections, opened before the clock starts.
    fn measure(&self, clients: usize, requests: usize) -> Result<Measured> {
        let per_client = Until::Requests(requests.div_ceil(clients.max(1)));
        closed_loop(
            connect(&self.server.addr, clients)?,
            std::slice::from_ref(&self.request),
            per_client,
        )
    }
}

/// Runs the path-recording experiment.
///
/// # Errors
/// When the model, a server or a measurement fails (a request not answered 200).
pub fn ui_paths(config: &UiPathsConfig) -> Result<Vec<UiPathsRepeat>> {
    if config.every.is_empty() {
        return Err(anyhow!("no --path-every setting to measure"));
    }
    let served: Vec<Served> = config
        .every
        .iter()
        .map(|&e| Served::start(config, e))
        .collect::<Result<_>>()?;
    // Warm every path (sessions, allocations, the path ring).
    for s in &served {
        s.measure(config.clients, 50.max(config.clients))?;
    }
    let n = served.len();
    let mut repeats = Vec::new();
    for r in 0..config.repeats {
        eprintln!("repeat {}/{}", r + 1, config.repeats);
        let mut row: Vec<Option<Measured>> = vec![None; n];
        for k in 0..n {
            let i = (r + k) % n;
            row[i] = Some(served[i].measure(config.clients, config.requests)?);
        }
        repeats.push(row.into_iter().flatten().collect());
    }
    for s in served {
        drop(s.server);
        s.graph.shutdown();
    }
    Ok(repeats)
}

/// The path-recording table as Markdown: one row per setting.
pub fn ui_paths_table(repeats: &[UiPathsRepeat], every: &[u32]) -> String {
    let mut s = String::from(
        "| paths kept | req/s | req/s / none kept | p50 ms | p99 ms | p99 / none kept |\n|---|---|---|---|---|---|\n",
    );
    let pick = |i: usize, f: fn(&Measured) -> f64| -> Vec<f64> {
        repeats.iter().filter_map(|r| r.get(i).map(f)).collect()
    };
    let ratio = |i: usize, f: fn(&Measured) -> f64| -> Vec<f64> {
        repeats
            .iter()
            .filter_map(|r| Some(f(r.get(i)?) / f(r.first()?).max(1e-9)))
            .collect()
    };
    for (i, &e) in every.iter().enumerate() {
        let kept = match e {
            0 => "none (0)".to_string(),
            1 => "every request (1)".to_string(),
            n => format!("one in {n}"),
        };
        s.push_str(&format!(
            "| {kept} | {} | {} | {} | {} | {} |\n",
            spread(&pick(i, |m| m.0), 1),
            spread(&ratio(i, |m| m.0), 3),
            spread(&pick(i, |m| m.1), 3),
            spread(&pick(i, |m| m.2), 3),
            spread(&ratio(i, |m| m.2), 3),
        ));
    }
    s
}

/// Throughput per repeat and setting, as a PNG.
///
/// # Errors
/// When the image cannot be drawn or written.
pub fn plot_ui_paths(repeats: &[UiPathsRepeat], every: &[u32], path: &Path) -> Result<()> {
    let series: Vec<(String, Vec<f64>)> = every
        .iter()
        .enumerate()
        .map(|(i, &e)| {
            let name = match e {
                0 => "no path kept".to_string(),
                1 => "every path kept".to_string(),
                n => format!("one path in {n} kept"),
            };
            (
                name,
                repeats.iter().filter_map(|m| Some(m.get(i)?.0)).collect(),
            )
        })
        .collect();
    crate::plot::plot_per_repeat(
        "Serving throughput by share of request paths kept",
        &series,
        path,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_against_keeping_none_in_the_same_repeat() {
        let repeats = vec![
            vec![(100.0, 1.0, 2.0), (90.0, 1.1, 2.2), (50.0, 2.0, 4.0)],
            vec![(200.0, 1.0, 2.0), (180.0, 1.1, 2.2), (100.0, 2.0, 4.0)],
        ];
        let t = ui_paths_table(&repeats, &[0, 16, 1]);
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert!(rows[0].starts_with("| none (0) |"), "{t}");
        assert!(rows[1].contains("| 0.900 [0.900–0.900] |"), "{t}");
        assert!(rows[2].starts_with("| every request (1) |"), "{t}");
        assert!(rows[2].contains("| 0.500 [0.500–0.500] |"), "{t}");
        assert!(rows[2].ends_with("| 2.000 [2.000–2.000] |"), "{t}");
    }
}
