//! The comparison's report as Markdown: per run, each set-up's mean latency per phase with SERF's
//! ratio to the best fixed configuration and the conditions it ran in; then the ratios pooled
//! over runs with their intervals, and SERF's online re-profiling.

use weir_operators::model::ParallelismSnapshot;
use weir_serf::config::Config;

use super::pooled::{
    ratio_interval, ratio_over_all_runs, Compared, BOOTSTRAP_DRAWS, INTERVAL_SEED,
};
use super::runs::PhasesRun;
use super::{Setup, UNSTABLE_UTILISATION};
use crate::overhead::median;

fn phase_name(p: Option<usize>) -> &'static str {
    match p {
        Some(0) => "1 moderate",
        Some(1) => "2 low",
        Some(2) => "3 moderate",
        _ => "whole run",
    }
}

/// A share as a whole percentage, `–` when there is none (not Linux).
fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "–".to_string(), |v| format!("{:.0} %", v * 100.0))
}

/// Per set-up and phase, the mean ONNX Runtime call and the machine's busy share: whether a set-up
/// was slower in a phase because its calls were, or because of what it decided.
pub(super) fn phase_conditions_table(run: &PhasesRun) -> String {
    let mut s = format!(
        "\nPer phase, ms per ORT call / machine busy:\n\n| set-up | {} |\n|---|{}\n",
        (0..run.phases.len())
            .map(|p| phase_name(Some(p)))
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(run.phases.len())
    );
    for setup in &run.setups {
        s.push_str(&format!("| {} |", setup.setup));
        for p in 0..run.phases.len() {
            match setup.phase_conditions.get(p) {
                Some(c) => s.push_str(&format!(" {:.3} / {} |", c.ms_per_call(), percent(c.busy))),
                None => s.push_str(" – |"),
            }
        }
        s.push('\n');
    }
    s
}

/// The runs as Markdown: per run, mean latency per set-up and phase with SERF's ratio to the best
/// fixed configuration; then the medians of the per-run ratios, the ratios over all runs, and the
/// targets (within 5 % of the best fixed configuration per phase, below it over the run).
pub fn phases_table(runs: &[PhasesRun]) -> String {
    let mut s = String::new();
    let scopes = [Some(0), Some(1), Some(2), None];
    for (r, run) in runs.iter().enumerate() {
        s.push_str(&format!(
            "\n### run {} — profile\n\n{}",
            r + 1,
            weir::profile::describe(&run.profile).unwrap_or_default()
        ));
        s.push_str(&format!(
            "\n### run {} — phases: {}\n\n| set-up | {} | failed | ms per ORT call | rows per call | machine busy | steal |\n|---|---|---|---|---|---|---|---|---|---|\n",
            r + 1,
            run.phases
                .iter()
                .map(|(rate, a, b)| format!("{rate:.1}/s for {a:.0}–{b:.0} s"))
                .collect::<Vec<_>>()
                .join(", "),
            scopes
                .iter()
                .map(|p| format!("{} ms", phase_name(*p)))
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        for (i, setup) in run.setups.iter().enumerate() {
            s.push_str(&format!("| {} |", setup.setup));
            for p in scopes {
                s.push_str(&format!(" {:.2} |", run.mean(i, p, false)));
            }
            let c = &setup.conditions;
            s.push_str(&format!(
                " {} | {:.3} | {:.2} | {} | {} |\n",
                setup.failed.len(),
                c.ms_per_call(),
                c.rows_per_call(),
                percent(c.busy),
                percent(c.steal)
            ));
        }
        s.push_str("| **SERF / best fixed** |");
        for p in scopes {
            let (ratio, best) = run.ratio_to_best(p, false);
            s.push_str(&format!(" **{ratio:.3}** ({best}) |"));
        }
        s.push_str(" | | | | |\n| SERF / best fixed, settled |");
        for p in scopes.iter().take(3) {
            let (ratio, best) = run.ratio_to_best(*p, true);
            s.push_str(&format!(" {ratio:.3} ({best}) |"));
        }
        s.push_str(" | | | | | |\n");
        s.push_str(&phase_conditions_table(run));
        s.push_str(&format!(
            "\nOrder run: {}.\n",
            run.order
                .iter()
                .filter_map(|&i| run.setups.get(i))
                .map(|x| x.setup.to_string())
                .collect::<Vec<_>>()
                .join(", then ")
        ));
        for (c, utilisation) in &run.skipped {
            s.push_str(&format!(
                "\nNot run: fixed {c}, profiled utilisation {utilisation:.2} at moderate load (≥ {UNSTABLE_UTILISATION}: its queue only grows).\n"
            ));
        }
        if !run.left_out.is_empty() {
            s.push_str(&format!(
                "\nNot run: fixed {}, left out of the fixed set-ups asked for.\n",
                run.left_out
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(serf) = run.setups.first() {
            s.push_str(&format!(
                "\nSERF's configurations: {}\n",
                serf.config_timeline(at_seconds)
            ));
            if let Some(p) = &serf.serf {
                s.push_str(&online_summary(p));
            }
        }
        for other in run.setups.iter().filter(|x| x.setup.is_auto()).skip(1) {
            let whose = match other.setup {
                Setup::SerfThreads(_) => "The control's",
                _ => "Also",
            };
            s.push_str(&format!(
                "\n{whose} ({}) configurations: {}\n",
                other.setup,
                other.config_timeline(at_seconds)
            ));
        }
    }
    s.push_str(&format!(
        "\n### median over {} run(s): SERF's mean latency / the best fixed configuration's\n\nPer run: the median of each run's ratio to that run's best fixed set-up in the scope (a minimum of noisy draws, biased against any policy that commits before it sees the run). Over all runs: SERF's mean latency over every request of every run against the fixed configuration whose mean over all runs is lowest (each set-up's mean latency estimated from all runs), with a 95 % interval from {BOOTSTRAP_DRAWS} bootstrap resamples of the runs (a target is resolved only when the whole interval is on its side).\n\n| scope | per run, whole phase | per run, settled (after {} s) | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval | target |\n|---|---|---|---|---|---|---|---|\n",
        runs.len(),
        runs.first().map_or(0.0, |r| r.settle_seconds)
    ));
    for p in scopes {
        let over_all_runs = |settled: bool| pooled_cells(runs, Compared::Serf, p, settled);
        let whole = median(runs.iter().map(|r| r.ratio_to_best(p, false).0).collect());
        let settled = if p.is_some() {
            format!(
                "{:.3}",
                median(runs.iter().map(|r| r.ratio_to_best(p, true).0).collect())
            )
        } else {
            String::new()
        };
        let target = if p.is_some() {
            "≤ 1.05 (within 5 %)"
        } else {
            "< 1 (beats every fixed)"
        };
        s.push_str(&format!(
            "| {} | {whole:.3} | {settled} | {} | {} | {target} |\n",
            phase_name(p),
            over_all_runs(false),
            if p.is_some() {
                over_all_runs(true)
            } else {
                " | ".to_string()
            }
        ));
    }
    let control = find_setup(runs, |s| match s {
        Setup::SerfThreads(threads) => Some(threads),
        _ => None,
    });
    if let Some(threads) = control {
        s.push_str(&format!(
            "\n### the control: SERF auto with t={threads} only / the best fixed configuration with t={threads}\n\nWhat the `auto` machinery costs apart from SERF's choices: where the control ran the fixed configuration's own configuration throughout (its configurations per run above), a ratio above 1 is the machinery's cost plus the drift between the two set-ups. Pooled over all runs as above.\n\n| scope | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval |\n|---|---|---|---|---|\n"
        ));
        push_pooled_rows(&mut s, runs, Compared::Control(threads), &scopes);
    }
    let capped = find_setup(runs, |s| match s {
        Setup::SerfCapped(permille) => Some(permille),
        _ => None,
    });
    if let Some(permille) = capped {
        let cap = f64::from(permille) / 1000.0;
        s.push_str(&format!(
            "\n### SERF auto with utilisation cap {cap:.3} / the best fixed configuration\n\nThe same SERF under `parallelism: {{auto: {{max_utilisation: {cap}}}}}`, served in the same runs as the default cap's, so both meet the same minutes of the machine; set beside the first table's SERF row it says which cap served this host better. Pooled over all runs as above.\n\n| scope | over all runs, whole phase | 95 % interval | over all runs, settled | 95 % interval |\n|---|---|---|---|---|\n"
        ));
        push_pooled_rows(&mut s, runs, Compared::Capped(permille), &scopes);
    }
    s
}

/// What `pick` reads from the first set-up of any run it accepts.
fn find_setup<T>(runs: &[PhasesRun], pick: impl Fn(Setup) -> Option<T>) -> Option<T> {
    runs.iter()
        .flat_map(|r| r.setups.iter())
        .find_map(|x| pick(x.setup))
}

/// One row per scope of `compared`'s pooled table: whole-phase cells, and settled ones for the
/// phases (not the whole run).
fn push_pooled_rows(
    s: &mut String,
    runs: &[PhasesRun],
    compared: Compared,
    scopes: &[Option<usize>],
) {
    for &p in scopes {
        let settled = if p.is_some() {
            pooled_cells(runs, compared, p, true)
        } else {
            " | ".to_string()
        };
        s.push_str(&format!(
            "| {} | {} | {settled} |\n",
            phase_name(p),
            pooled_cells(runs, compared, p, false)
        ));
    }
}

/// `ratio (config) | interval` cells of [`ratio_over_all_runs`] and [`ratio_interval`].
fn pooled_cells(runs: &[PhasesRun], compared: Compared, p: Option<usize>, settled: bool) -> String {
    let ratio = ratio_over_all_runs(runs, compared, p, settled).map_or_else(
        || "–".to_string(),
        |(ratio, config)| format!("{ratio:.3} ({config})"),
    );
    let interval = ratio_interval(runs, compared, p, settled, INTERVAL_SEED)
        .map_or_else(|| "–".to_string(), |(lo, hi)| format!("{lo:.3}–{hi:.3}"));
    format!("{ratio} | {interval}")
}

/// SERF's online re-profiling at the end of its run: counters, and per tuple the offline and the
/// measured service time, overall and per load band (bands with at least `BAND_MIN_SAMPLES` samples).
pub(super) fn online_summary(p: &ParallelismSnapshot) -> String {
    let mut s = format!(
        "\nOnline re-profiling: {} re-evaluations, {} ranking changes, {} explorations, {} backlog switches, {} samples dropped, {} left out while a switch settled.\n\n| tuple (running × threads) | samples | offline ms | measured ms | measured ms by load (requests/s: ms, samples) |\n|---|---|---|---|---|\n",
        p.profile_updates, p.ranking_changes, p.explorations, p.backlog_switches, p.samples_dropped, p.samples_settling
    );
    for r in &p.service_rates {
        let by_load: Vec<String> = p
            .service_by_load
            .iter()
            .filter(|b| b.running == r.running && b.threads == r.threads)
            .filter(|b| b.samples >= BAND_MIN_SAMPLES)
            .map(|b| {
                format!(
                    "{:.0}–{:.0}: {:.3}, {}",
                    b.load.0,
                    b.load.1,
                    b.mean_s * 1e3,
                    b.samples
                )
            })
            .collect();
        s.push_str(&format!(
            "| {} × {} | {} | {:.3} | {} | {} |\n",
            r.running,
            r.threads,
            r.samples,
            1e3 / r.offline,
            r.measured
                .map_or_else(|| "–".to_string(), |m| format!("{:.3}", 1e3 / m)),
            if by_load.is_empty() {
                "–".to_string()
            } else {
                by_load.join("; ")
            }
        ));
    }
    s
}

/// A configuration and when it began, as the report's configuration lists write it.
fn at_seconds(t: f64, c: Config) -> String {
    format!("{c} at {t:.1} s")
}

/// Load bands with fewer samples than this are left out of the report (the scheduler's own threshold).
const BAND_MIN_SAMPLES: u64 = 20;
