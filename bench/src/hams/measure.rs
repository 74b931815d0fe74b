//! The measurements: normal-case cost per service graph and replication mode, failover trials per
//! mode and fault, and the online learner's overhead per batch size.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};

use super::deployment::{graph_yaml, Deployment};
use super::load::{closed_loop, median, percentile, start_graph};
use super::{HamsBenchConfig, Service};

/// One (service, mode) overhead measurement, medians over repeats.
#[derive(Debug, Clone)]
pub struct OverheadRow {
    /// Service graph.
    pub service: &'static str,
    /// `none`, `nspb` or `remus`.
    pub mode: &'static str,
    /// Requests per second.
    pub throughput: f64,
    /// Latency percentiles, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// Part 1: normal-case latency and throughput per service graph and mode.
///
/// # Errors
/// When an executor or a graph cannot start, or a request fails.
pub fn overhead(config: &HamsBenchConfig) -> Result<Vec<OverheadRow>> {
    let mut rows = Vec::new();
    for &service in &config.services {
        for mode in ["none", "nspb", "remus", "checkpoint"] {
            let mut tputs = Vec::new();
            let mut p50s = Vec::new();
            let mut p99s = Vec::new();
            for r in 0..config.repeats {
                let tag = format!("o{r}-{mode}");
                let d = Deployment::start(config, service, mode, &tag)?;
                let graph = start_graph(&graph_yaml(config, service, mode, &d), &tag)?;
                let _warm = closed_loop(
                    &graph,
                    service,
                    config.concurrency * 8,
                    config.concurrency,
                    1,
                    |_| {},
                );
                let run = closed_loop(
                    &graph,
                    service,
                    config.requests,
                    config.concurrency,
                    2 + r as u64,
                    |_| {},
                );
                graph.shutdown();
                drop(d);
                let failed = run.done.iter().filter(|d| !d.2).count();
                if failed > 0 {
                    bail!("{}, {mode}: {failed} requests failed", service.name());
                }
                let mut lat: Vec<f64> = run
                    .done
                    .iter()
                    .map(|(s, e, _)| (*e - *s).as_secs_f64() * 1e3)
                    .collect();
                lat.sort_by(f64::total_cmp);
                tputs.push(run.done.len() as f64 / (run.ended - run.started).as_secs_f64());
                p50s.push(percentile(&lat, 0.5));
                p99s.push(percentile(&lat, 0.99));
            }
            rows.push(OverheadRow {
                service: service.name(),
                mode,
                throughput: median(tputs),
                p50_ms: median(p50s),
                p99_ms: median(p99s),
            });
        }
    }
    Ok(rows)
}

/// One failover trial.
#[derive(Debug, Clone)]
pub struct Trial {
    /// Kill → the manager learnt of it, ms.
    pub detection_ms: f64,
    /// Promotion, rollback and retries, ms.
    pub protocol_ms: f64,
    /// Resume → the first reply after it, ms.
    pub handover_ms: f64,
    /// Kill → the first reply after the resume, ms.
    pub total_ms: f64,
    /// Requests run again.
    pub retried: usize,
    /// Batches replayed from a checkpoint.
    pub replayed: u64,
    /// Every request answered exactly once, none failed.
    pub exactly_once: bool,
}

/// How the primary fails in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL: its zenoh link drops, its liveliness token goes.
    Kill,
    /// SIGSTOP: it stays connected and silent; only the `detect_ms` timeout finds it.
    Stop,
}

/// Part 2: `trials` failures of a stateful primary under load, per (mode, fault): SIGKILL under
/// NSPB and Remus, and SIGSTOP under NSPB (detection by the 200 ms timeout).
///
/// # Errors
/// When an executor or the graph cannot start, or the failover did not happen.
pub fn failover(config: &HamsBenchConfig) -> Result<Vec<(&'static str, Vec<Trial>)>> {
    let mut out = Vec::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    for (label, mode, fault) in [
        ("nspb, SIGKILL", "nspb", Fault::Kill),
        ("remus, SIGKILL", "remus", Fault::Kill),
        ("nspb, SIGSTOP", "nspb", Fault::Stop),
        ("checkpoint, SIGKILL", "checkpoint", Fault::Kill),
    ] {
        let mut trials = Vec::new();
        for t in 0..config.trials {
            let tag = format!("f{t}-{mode}");
            let mut d = Deployment::start(config, Service::Tracker, mode, &tag)?;
            let graph = start_graph(&graph_yaml(config, Service::Tracker, mode, &d), &tag)?;
            let _warm = closed_loop(&graph, Service::Tracker, 64, config.concurrency, 1, |_| {});
            // Under checkpoints, kill about half an interval after a checkpoint (the paper kills
            // LS at the 50th batch of 150): replay then costs half an interval on average.
            let (n, kill_at) = if mode == "checkpoint" {
                let at = config.checkpoint_every as usize * config.batch * 3 / 2;
                (at * 2, at)
            } else {
                let n = config.requests.max(400);
                (n, rng.random_range(n / 4..n / 2))
            };
            let mut killed_at = None;
            let run = {
                let primary = &mut d.members[0].2;
                closed_loop(
                    &graph,
                    Service::Tracker,
                    n,
                    config.concurrency,
                    3 + t as u64,
                    |i| {
                        if i == kill_at {
                            match fault {
                                Fault::Kill => primary.kill(),
                                Fault::Stop => primary.signal("-STOP"),
                            }
                            killed_at = Some(Instant::now());
                        }
                    },
                )
            };
            let recoveries = graph.hams().map(|h| h.recoveries()).unwrap_or_default();
            graph.shutdown();
            let (Some(killed), Some(rec)) = (killed_at, recoveries.first()) else {
                bail!("{mode} trial {t}: no failover happened");
            };
            let resumed = rec.detected_at + rec.protocol;
            let first_after = run
                .done
                .iter()
                .filter(|(_, e, ok)| *ok && *e > resumed)
                .map(|(_, e, _)| *e)
                .min()
                .unwrap_or(run.ended);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            trials.push(Trial {
                detection_ms: ms(rec.detected_at.saturating_duration_since(killed)),
                protocol_ms: ms(rec.protocol),
                handover_ms: ms(first_after.saturating_duration_since(resumed)),
                total_ms: ms(first_after.saturating_duration_since(killed)),
                retried: rec.retried,
                replayed: rec.replayed,
                exactly_once: run.answered_once(n),
            });
        }
        out.push((label, trials));
    }
    Ok(out)
}

/// The online learner's (fixed 1 MiB state) p50 overhead over no replication per batch size,
/// clients = 2 × batch so batches fill; returns (batch, mode, overhead %) and the rows measured.
///
/// # Errors
/// As [`overhead`].
pub fn batch_sweep(
    config: &HamsBenchConfig,
    batches: &[usize],
) -> Result<Vec<(usize, &'static str, f64)>> {
    let mut out = Vec::new();
    for &batch in batches {
        let c = HamsBenchConfig {
            batch,
            concurrency: batch * 2,
            services: vec![Service::Online],
            ..config.clone()
        };
        let rows = overhead(&c)?;
        let base = rows
            .iter()
            .find(|r| r.mode == "none")
            .map_or(f64::NAN, |r| r.p50_ms);
        for r in rows.iter().filter(|r| r.mode != "none") {
            out.push((batch, r.mode, (r.p50_ms / base - 1.0) * 100.0));
        }
    }
    Ok(out)
}
