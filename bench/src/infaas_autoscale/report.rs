//! The figures of a run and their tables: SLO violations per 4 s window, served throughput,
//! cost, and the ratios against INFaaS measured in the same invocation.

use std::fmt::Write as _;

use super::{Run, System};

/// Width of a violation window, s (the paper's 4 s).
pub const VIOLATION_WINDOW_S: f64 = 4.0;
/// Width of a throughput window, s (the paper's 2 s).
pub const THROUGHPUT_WINDOW_S: f64 = 2.0;

/// One run's figures.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The system.
    pub system: System,
    /// Requests sent.
    pub requests: usize,
    /// Offered rate, q/s.
    pub offered_qps: f64,
    /// Answered 200, per second of the run.
    pub served_qps: f64,
    /// Requests that violated the SLO (late or not answered 200), fraction.
    pub violations: f64,
    /// Median of the per-window violation ratios.
    pub window_median: f64,
    /// Worst window.
    pub window_max: f64,
    /// p99 latency, ms.
    pub p99_ms: f64,
    /// Cost over the run.
    pub cost: f64,
    /// Mean instances loaded (from the per-second samples).
    pub mean_instances: f64,
    /// Share of answers per executor type, as "type share" text.
    pub served_on: String,
}

/// Per window of `width` s over `seconds`, (violations, requests) by scheduled time.
pub fn windows(run: &Run, slo_ms: f64, width: f64) -> Vec<(usize, usize)> {
    let n = (run.pattern.seconds() / width).ceil().max(1.0) as usize;
    let mut out = vec![(0, 0); n];
    for o in &run.recorded.outcomes {
        let i = ((o.at_s / width) as usize).min(n - 1);
        out[i].1 += 1;
        if !o.ok || o.latency_ms > slo_ms {
            out[i].0 += 1;
        }
    }
    out
}

/// The `q` quantile of `v` (nearest rank); NaN when empty.
pub(crate) fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The figures of `run` against an SLO of `slo_ms`.
pub fn summarise(run: &Run, slo_ms: f64) -> Summary {
    let outcomes = &run.recorded.outcomes;
    let seconds = run.pattern.seconds();
    let late = |o: &&super::Outcome| !o.ok || o.latency_ms > slo_ms;
    let ratios: Vec<f64> = windows(run, slo_ms, VIOLATION_WINDOW_S)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(v, n)| v as f64 / n as f64)
        .collect();
    let mut on: std::collections::BTreeMap<&str, usize> = Default::default();
    for o in outcomes {
        if let Some(h) = &o.hardware {
            *on.entry(h.as_str()).or_default() += 1;
        }
    }
    let answered: usize = on.values().sum();
    let served_on = on
        .iter()
        .map(|(h, n)| format!("{h} {:.0}%", 100.0 * *n as f64 / answered.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ");
    let samples = &run.recorded.samples;
    Summary {
        system: run.system,
        requests: outcomes.len(),
        offered_qps: outcomes.len() as f64 / seconds,
        served_qps: answered as f64 / seconds,
        violations: outcomes.iter().filter(late).count() as f64 / outcomes.len().max(1) as f64,
        window_median: quantile(ratios.clone(), 0.5),
        window_max: ratios.iter().copied().fold(0.0, f64::max),
        p99_ms: quantile(outcomes.iter().map(|o| o.latency_ms).collect(), 0.99),
        cost: run.cost,
        mean_instances: match run.system.fixed_instances() {
            0 => samples.iter().map(|s| s.instances).sum::<f64>() / samples.len().max(1) as f64,
            n => n as f64,
        },
        served_on,
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}×", a / b)
    } else {
        "–".into()
    }
}

/// One pattern's table: every system, with its violations and cost against INFaaS's.
pub fn pattern_table(pattern: &str, rows: &[Summary]) -> String {
    let reference = rows.iter().find(|r| r.system == System::Infaas);
    let mut out = format!(
        "### {pattern}\n\n| system | offered q/s | served q/s | SLO violations | median / worst 4-s window | p99 ms | mean instances | cost | cost ÷ INFaaS's | violations ÷ INFaaS's | served on |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        let (cost_x, viol_x) = match reference {
            Some(i) if i.violations > 0.0 => {
                (ratio(r.cost, i.cost), ratio(r.violations, i.violations))
            }
            // INFaaS violated nothing: a ratio would be infinite.
            Some(i) if r.violations > 0.0 => (ratio(r.cost, i.cost), "∞".into()),
            Some(i) => (ratio(r.cost, i.cost), "–".into()),
            None => ("–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.2} % | {:.1} % / {:.1} % | {:.0} | {:.1} | {:.0} | {cost_x} | {viol_x} | {} |",
            r.system.name(),
            r.offered_qps,
            r.served_qps,
            100.0 * r.violations,
            100.0 * r.window_median,
            100.0 * r.window_max,
            r.p99_ms,
            r.mean_instances,
            r.cost,
            r.served_on
        );
    }
    out
}

/// A sweep's table: INFaaS under one knob's values.
pub fn sweep_table(knob: &str, rows: &[(f64, Summary)]) -> String {
    let mut out = format!(
        "| {knob} | SLO violations | worst 4-s window | p99 ms | mean instances | cost |\n|---|---|---|---|---|---|\n"
    );
    for (value, r) in rows {
        let _ = writeln!(
            out,
            "| {value} | {:.2} % | {:.1} % | {:.0} | {:.1} | {:.0} |",
            100.0 * r.violations,
            100.0 * r.window_max,
            r.p99_ms,
            r.mean_instances,
            r.cost
        );
    }
    out
}
