//! A profile as text: its rates and SCVs per configuration, what profiling cost against the
//! exhaustive plan, and the configuration it picks per load.

use weir_serf::config::Config;
use weir_serf::profile::{profiling_cost, MeasuredIn, Profile};
use weir_serf::table::{Candidates, ConfigTable, TableOptions};

use super::{SerfError, EXHAUSTIVE_PLAN};

/// A text report of `profile`: `μ_1..μ_c` and SCVs per configuration, the profiling cost against
/// the exhaustive plan ([`EXHAUSTIVE_PLAN`]), and the best configuration per load level.
///
/// # Errors
/// [`SerfError::Table`] when the profile has no configuration.
pub fn describe(profile: &Profile) -> Result<String, SerfError> {
    let mut s = format!(
        "{} on {} cores\n",
        profile.label.as_deref().unwrap_or("profile"),
        profile.cores
    );
    match (profile.measured_in, profile.path_s) {
        (Some(MeasuredIn::Graph), Some(p)) => s.push_str(&format!(
            "measured in a running one-node graph; the path outside the call takes {:.3} ms a request (added to every predicted latency)\n",
            p * 1e3
        )),
        (Some(MeasuredIn::Sessions), _) => {
            s.push_str("measured on bare sessions back to back (the paper's way)\n")
        }
        _ => {}
    }
    s.push_str("| config | μ_1..μ_c (requests/s) | mean service ms (i = 1..c) | SCV (i = 1..c) |\n|---|---|---|---|\n");
    let join = |v: Vec<String>| v.join(", ");
    for (config, mu) in profile.candidates() {
        let scv = profile
            .series
            .iter()
            .find(|x| x.inter_node == config.inter_node && x.threads == config.threads)
            .map(|x| {
                x.tuples[..config.concurrency]
                    .iter()
                    .map(|t| format!("{:.3}", t.scv))
                    .collect()
            })
            .unwrap_or_default();
        s.push_str(&format!(
            "| {config} | {} | {} | {} |\n",
            join(mu.iter().map(|m| format!("{m:.1}")).collect()),
            join(mu.iter().map(|m| format!("{:.3}", 1e3 / m)).collect()),
            join(scv)
        ));
    }
    for a in &profile.after_idle {
        let alone = profile
            .mu(Config::new(1, a.threads))
            .and_then(|mu| mu.first().map(|m| format!("{:.3}", 1e3 / m)))
            .unwrap_or_else(|| "–".into());
        let after: Vec<String> = a
            .points
            .iter()
            .map(|p| {
                format!(
                    "{:.3} after {:.0} ms{}",
                    p.mean_service_s * 1e3,
                    p.gap_s * 1e3,
                    p.mean_path_s
                        .map_or_else(String::new, |x| format!(" (path {:.3})", x * 1e3))
                )
            })
            .collect();
        s.push_str(&format!(
            "t={} alone after an idle gap (ms): {alone} at no gap; {}\n",
            a.threads,
            after.join(", ")
        ));
    }
    if profile.path_s.is_some() {
        s.push_str(&format!(
            "path outside the call for Poisson arrivals (ms): {}\n",
            [10.0, 100.0, 1000.0]
                .iter()
                .map(|l| format!("{:.3} at {l:.0}/s", profile.path_after(*l) * 1e3))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let flagged = profile.non_homogeneous();
    if !flagged.is_empty() {
        let list: Vec<String> = flagged.iter().map(ToString::to_string).collect();
        s.push_str(&format!(
            "non-homogeneous (SCV > 0.1): {}\n",
            list.join("; ")
        ));
    }
    let (levels, per) = EXHAUSTIVE_PLAN;
    let cost = profiling_cost(profile, levels, per);
    s.push_str(&format!(
        "profiling cost: {} experiments, {} requests, {:.3} s of service — exhaustive: {} experiments × {per} requests, {:.1} s — {:.0}× cheaper{}\n",
        cost.serf_experiments,
        cost.serf_requests,
        cost.serf_seconds,
        cost.exhaustive_experiments,
        cost.exhaustive_seconds,
        cost.ratio,
        cost.serf_wall_s.map_or(String::new(), |w| format!(
            "; against the measured wall time ({w:.2} s, warm-up and session creation included): {:.0}×",
            cost.exhaustive_seconds / w.max(1e-9)
        )),
    ));
    let table = ConfigTable::build(&Candidates::from_profile(profile), TableOptions::default())?;
    s.push_str(&format!(
        "best configuration per load (largest capacity {:.1}/s with {}):\n| λ (requests/s) | best | predicted mean latency ms |\n|---|---|---|\n",
        table.capacity, table.max_capacity
    ));
    for row in &table.rows {
        s.push_str(&format!(
            "| {:.1} | {} | {:.3} |\n",
            row.lambda,
            row.best,
            profile.predicted_latency(row.latency_s, row.lambda) * 1e3
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_lists_every_configuration_and_the_table() {
        // Squeezenet-like rates on 2 cores.
        let mut p = Profile::from_rates(2, &[(1, vec![315.0, 300.0]), (2, vec![580.0])]).unwrap();
        p.label = Some("squeezenet".into());
        p.measured_in = Some(MeasuredIn::Graph);
        p.path_s = Some(0.0005);
        let text = describe(&p).unwrap();
        assert!(
            text.contains("the path outside the call takes 0.500 ms a request"),
            "{text}"
        );
        assert!(text.contains("| c=1 t=1 | 315.0 |"), "{text}");
        assert!(text.contains("| c=2 t=1 | 315.0, 300.0 |"), "{text}");
        assert!(text.contains("| c=1 t=2 | 580.0 | 1.724 |"), "{text}");
        // 3 experiments of 10 requests; exhaustive 3 × 10 levels.
        assert!(text.contains("3 experiments, 30 requests"), "{text}");
        assert!(text.contains("30 experiments × 5000 requests"), "{text}");
        // Ten table rows; the lowest load picks (1, 2).
        assert!(text.matches("| c=1 t=2 | ").count() >= 2, "{text}");
        assert!(
            text.contains("largest capacity 600.0/s with c=2 t=1"),
            "{text}"
        );
    }
}
