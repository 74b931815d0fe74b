//! The HAMS tables as Markdown.

use super::load::median;
use super::measure::{OverheadRow, Trial};
use super::HamsBenchConfig;

/// The tables, as Markdown.
pub fn tables(
    rows: &[OverheadRow],
    failovers: &[(&'static str, Vec<Trial>)],
    config: &HamsBenchConfig,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "normal case: closed loop, concurrency {}, {} requests, batches ≤ {} rows at stateful nodes, {} ms emulated compute per stateful batch, checkpoints every {} batches, median of {} runs; ratios against `none` (no backup) of the same graph", config.concurrency, config.requests, config.batch, config.compute_ms, config.checkpoint_every, config.repeats);
    let _ = writeln!(s, "\n| service graph | mode | throughput (req/s) | ratio | p50 (ms) | p50 overhead | p99 (ms) | p99 overhead |\n|---|---|---|---|---|---|---|---|");
    for r in rows {
        let base = rows
            .iter()
            .find(|b| b.service == r.service && b.mode == "none");
        let (t, p50, p99) = base.map_or((f64::NAN, f64::NAN, f64::NAN), |b| {
            (b.throughput, b.p50_ms, b.p99_ms)
        });
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.2} | {:.2} | {:+.1}% | {:.2} | {:+.1}% |",
            r.service,
            r.mode,
            r.throughput,
            r.throughput / t,
            r.p50_ms,
            (r.p50_ms / p50 - 1.0) * 100.0,
            r.p99_ms,
            (r.p99_ms / p99 - 1.0) * 100.0
        );
    }
    let _ = writeln!(s, "\nfailover: the tracker's primary fails under closed-loop load (detect_ms 200), {} trials per row, medians (min–max of total)", config.trials);
    let _ = writeln!(s, "\n| mode, fault | detection (ms) | protocol (ms) | handover (ms) | total (ms) | total range (ms) | retried requests | replayed batches | answered once, none failed |\n|---|---|---|---|---|---|---|---|---|");
    for (mode, trials) in failovers {
        let col = |f: fn(&Trial) -> f64| median(trials.iter().map(f).collect());
        let totals: Vec<f64> = trials.iter().map(|t| t.total_ms).collect();
        let lo = totals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = totals.iter().copied().fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "| {mode} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1}–{:.1} | {:.0} | {:.0} | {}/{} |",
            col(|t| t.detection_ms),
            col(|t| t.protocol_ms),
            col(|t| t.handover_ms),
            col(|t| t.total_ms),
            lo,
            hi,
            col(|t| t.retried as f64),
            col(|t| t.replayed as f64),
            trials.iter().filter(|t| t.exactly_once).count(),
            trials.len()
        );
    }
    s
}

/// The batch sweep as a Markdown table.
pub fn sweep_table(rows: &[(usize, &'static str, f64)], config: &HamsBenchConfig) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "batch sweep: online learner, 1 MiB state, {} ms emulated compute per batch, clients = 2 × batch, p50 overhead over no backup, median of {} runs\n", config.compute_ms, config.repeats);
    let _ = writeln!(
        s,
        "| rows per batch | nspb | remus | checkpoint |\n|---|---|---|---|"
    );
    let mut batches: Vec<usize> = rows.iter().map(|r| r.0).collect();
    batches.dedup();
    for b in batches {
        let cell = |m: &str| {
            rows.iter()
                .find(|r| r.0 == b && r.1 == m)
                .map_or("—".to_string(), |r| format!("{:+.1} %", r.2))
        };
        let _ = writeln!(
            s,
            "| {b} | {} | {} | {} |",
            cell("nspb"),
            cell("remus"),
            cell("checkpoint")
        );
    }
    s
}
