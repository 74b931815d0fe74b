//! Closed-loop load on a HAMS graph, every answer counted per request (a failover must answer each
//! exactly once), and the medians and percentiles the tables quote.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use rand::SeedableRng;
use weir::{load_graph, start, NamedTensor, RunningGraph, RuntimeOptions};

use super::deployment::request;
use super::Service;

/// One closed-loop run: per request (submitted at, answered at, ok), by index.
pub(crate) struct Run {
    pub(crate) started: Instant,
    pub(crate) ended: Instant,
    pub(crate) done: Vec<(Instant, Instant, bool)>,
    pub(crate) answers: HashMap<usize, usize>,
}

impl Run {
    /// Every request answered exactly once, none failed.
    pub(crate) fn answered_once(&self, n: usize) -> bool {
        self.done.iter().all(|d| d.2)
            && self.answers.len() == n
            && self.answers.values().all(|&c| c == 1)
    }
}

/// Runs `n` random requests of `service` `concurrency` at a time; `during(i)` after submitting
/// request `i`.
pub(crate) fn closed_loop(
    graph: &RunningGraph,
    service: Service,
    n: usize,
    concurrency: usize,
    seed: u64,
    during: impl FnMut(usize),
) -> Run {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    closed_loop_of(
        graph,
        n,
        concurrency,
        |_| request(service, &mut rng),
        during,
    )
}

/// Runs requests `make(0..n)` `concurrency` at a time; `during(i)` after submitting request `i`.
pub(crate) fn closed_loop_of(
    graph: &RunningGraph,
    n: usize,
    concurrency: usize,
    mut make: impl FnMut(usize) -> Vec<NamedTensor>,
    mut during: impl FnMut(usize),
) -> Run {
    let (tx, rx) = crossbeam_channel::unbounded::<(usize, Instant, bool)>();
    let mut submitted: Vec<Instant> = Vec::with_capacity(n);
    let mut done: Vec<Option<(Instant, bool)>> = vec![None; n];
    let mut answers: HashMap<usize, usize> = HashMap::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut received = 0;
    while received < n && Instant::now() < deadline {
        while submitted.len() < n && submitted.len() - received < concurrency {
            let i = submitted.len();
            let tx = tx.clone();
            submitted.push(Instant::now());
            let ok = graph.runtime().submit(
                make(i),
                Box::new(move |r| {
                    if let Err(e) = &r {
                        tracing::warn!(request = i, error = %e, "A benchmark request failed.");
                    }
                    let _ = tx.send((i, Instant::now(), r.is_ok()));
                }),
            );
            if ok.is_err() {
                done[i] = Some((Instant::now(), false));
                received += 1;
            }
            during(i);
        }
        if let Ok((i, at, ok)) = rx.recv_timeout(Duration::from_secs(1)) {
            *answers.entry(i).or_default() += 1;
            if done[i].is_none() {
                done[i] = Some((at, ok));
                received += 1;
            }
        }
    }
    let ended = Instant::now();
    std::thread::sleep(Duration::from_millis(100));
    while let Ok((i, _, _)) = rx.try_recv() {
        *answers.entry(i).or_default() += 1;
    }
    let done = submitted
        .iter()
        .zip(done)
        .map(|(&s, d)| match d {
            Some((at, ok)) => (s, at, ok),
            None => (s, ended, false),
        })
        .collect();
    Run {
        started,
        ended,
        done,
        answers,
    }
}

pub(crate) fn start_graph(yaml: &str, tag: &str) -> Result<RunningGraph> {
    let path =
        std::env::temp_dir().join(format!("weir-bench-hams-{tag}-{}.yaml", std::process::id()));
    std::fs::write(&path, yaml)?;
    let graph = load_graph(&path).map_err(|e| anyhow!("{e}"))?;
    let running = start(graph.plan, RuntimeOptions::default())?;
    let _ = std::fs::remove_file(&path);
    Ok(running)
}

pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}
