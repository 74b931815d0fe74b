//! The experiment's report: the Markdown table with its comparisons, and every trial as text.

use super::results::{RunInfo, SetupResult, Trial};
use super::setup::Policy;
use super::{KairosLiveConfig, MAX_QUERY_ROWS, PROFILE_ROWS};
use crate::overhead::median;

fn spread(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        "–".into()
    } else {
        format!("{lo:.0}–{hi:.0}")
    }
}

/// The best homogeneous set-up (largest max rate, then goodput), whatever its policy.
fn best_homogeneous(results: &[SetupResult]) -> Option<&SetupResult> {
    results
        .iter()
        .filter(|r| r.setup.homogeneous())
        .max_by(|a, b| {
            (a.max_rate, a.median_goodput())
                .partial_cmp(&(b.max_rate, b.median_goodput()))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
}

/// The Markdown table (one row per pool × policy), the comparisons, and every point.
pub fn kairos_live_table(
    config: &KairosLiveConfig,
    info: &RunInfo,
    results: &[SetupResult],
) -> String {
    let best_homo = best_homogeneous(results);
    let (homo_rate, homo_goodput) =
        best_homo.map_or((0.0, 0.0), |r| (r.max_rate, r.median_goodput()));
    let types: Vec<String> = config
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let measured = info.measured_ms.get(i).map_or(String::new(), |m| {
                format!(
                    "; measured through weir {}",
                    PROFILE_ROWS
                        .iter()
                        .zip(m)
                        .map(|(n, ms)| format!("{ms:.1} ms at {n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
            format!(
                "{} ({} + {} × rows ms, ${}/h; {:.1} % of queries over the target alone{measured})",
                t.name,
                t.latency.base_ms,
                t.latency.per_row_ms,
                t.cost_per_hour,
                info.over_limit.get(i).copied().unwrap_or(0.0) * 100.0
            )
        })
        .collect();
    let rates = config.rates();
    let mut s = format!(
        "Types: {}. Budget ${}/h, p99 target {} ms, MLP 64→{}→{}→10 (real ONNX Runtime time per call: {}). \
         Queries of the production-trace sizes (10..{} rows), one job each; Kairos latencies: {}; heterogeneous pool: {}. \
         Sweep: {} rates from {} to {} queries/s (×{}), {} trials of max({} s, {} queries) each per rate, stopping after two misses; \
         goodput at {} queries/s offered, {} trials.\n\n",
        types.join(", "),
        config.budget_per_hour,
        config.qos_ms,
        config.hidden,
        config.hidden,
        info.real_call_ms
            .iter()
            .map(|(n, ms)| format!("{ms:.3} ms at {n} rows"))
            .collect::<Vec<_>>()
            .join(", "),
        MAX_QUERY_ROWS,
        config.kairos_latency.describe(),
        if info.planned { "weir plan's pick" } else { "given" },
        rates.len(),
        rates.first().copied().unwrap_or(0.0),
        rates.last().copied().unwrap_or(0.0),
        config.rate_step,
        config.trials,
        config.seconds_per_trial,
        config.min_queries,
        config.goodput_rate,
        config.trials,
    );
    s.push_str(&format!(
        "| pool | routing | $/h | max queries/s with median p99 ≤ {} ms | per-trial max (spread) | vs best homogeneous | goodput at {} q/s, median [range] | vs best homogeneous | jobs per type | calls per query | CPU cores at max rate |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
        config.qos_ms, config.goodput_rate
    ));
    for r in results {
        let share: Vec<String> = r
            .type_share
            .iter()
            .zip(&config.types)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, t)| format!("{} {:.0} %", t.name, x * 100.0))
            .collect();
        let goodputs: Vec<f64> = r.goodput.iter().map(|t| t.goodput).collect();
        let cpu_at_max = r
            .points
            .iter()
            .find(|p| p.rate == r.max_rate)
            .map_or(0.0, |p| {
                median(p.trials.iter().map(|t| t.cpu_cores).collect())
            });
        s.push_str(&format!(
            "| {} | {} | {:.2} | {:.1} | {} ({}) | {:.2} | {:.1} [{}] | {:.2} | {} | {:.2} | {:.2} |\n",
            r.setup.pool_label,
            r.setup.policy.name(),
            r.cost_per_hour,
            r.max_rate,
            r.max_rate_per_trial
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            spread(&r.max_rate_per_trial),
            r.max_rate / homo_rate.max(1e-9),
            r.median_goodput(),
            spread(&goodputs),
            r.median_goodput() / homo_goodput.max(1e-9),
            share.join(", "),
            r.jobs_per_query,
            cpu_at_max
        ));
    }
    let hetero: Vec<&SetupResult> = results
        .iter()
        .filter(|r| r.setup.pool == info.hetero)
        .collect();
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}×", a / b)
        } else if a > 0.0 {
            "∞ (the other met the target at no rate of the grid)".into()
        } else {
            "– (neither met the target)".into()
        }
    };
    // The paper's homogeneous baseline serves one query per call (FCFS); weir's Kairos may batch.
    let one_per_call = |r: &&SetupResult| r.setup.policy != Policy::Kairos;
    let homo_paper = best_homogeneous(
        &results
            .iter()
            .filter(one_per_call)
            .cloned()
            .collect::<Vec<_>>(),
    )
    .cloned();
    for k in hetero.iter().filter(|r| r.setup.policy.is_kairos()) {
        s.push('\n');
        let bases = [
            ("best homogeneous", best_homo),
            (
                "best homogeneous with one query per call",
                homo_paper.as_ref(),
            ),
        ];
        for (what, h) in bases {
            if let Some(h) = h {
                s.push_str(&format!(
                    "{} on {} vs the {what} ({}, {:.1} q/s): {} max rate, {} goodput.\n",
                    k.setup.policy.name(),
                    k.setup.pool_label,
                    h.setup.label(),
                    h.max_rate,
                    ratio(k.max_rate, h.max_rate),
                    ratio(k.median_goodput(), h.median_goodput()),
                ));
            }
        }
        for o in hetero.iter().filter(|r| !r.setup.policy.is_kairos()) {
            s.push_str(&format!(
                "{} vs {} on the same pool: {} max rate, {} goodput.\n",
                k.setup.policy.name(),
                o.setup.policy.name(),
                ratio(k.max_rate, o.max_rate),
                ratio(k.median_goodput(), o.median_goodput()),
            ));
        }
    }
    s
}

/// Every trial, one line each, for the record.
pub fn kairos_live_points(results: &[SetupResult]) -> String {
    let mut s = String::from("set-up\trate\ttrial\tp50_ms\tp99_ms\terrors\tgoodput\tcpu_cores\n");
    for r in results {
        for p in &r.points {
            for (k, t) in p.trials.iter().enumerate() {
                s.push_str(&trial_line(&r.setup.label(), &p.rate, k, t));
            }
        }
        for (k, t) in r.goodput.iter().enumerate() {
            s.push_str(&trial_line(&r.setup.label(), &"goodput", k, t));
        }
    }
    s
}

/// One line of [`kairos_live_points`]: the set-up, the rate (or what the run was), the trial's
/// number and its measurements.
fn trial_line(setup: &str, rate: &dyn std::fmt::Display, k: usize, t: &Trial) -> String {
    format!(
        "{setup}\t{rate}\t{k}\t{:.2}\t{:.2}\t{}\t{:.1}\t{:.3}\n",
        t.p50_ms, t.p99_ms, t.errors, t.goodput, t.cpu_cores
    )
}
