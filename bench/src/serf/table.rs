//! The experiment's report as Markdown: every point, the error summary against the paper's, the
//! machine's drift, and the best configuration per load.

use weir_serf::profile::{MeasuredIn, Profile};

use super::point::error_summary;
use super::{SerfModelResult, SerfPoint};

/// The back-to-back path time, in ms, and where the profile was measured.
fn path_cell(profile: &Profile) -> String {
    let place = match profile.measured_in {
        Some(MeasuredIn::Graph) => "graph",
        Some(MeasuredIn::Sessions) => "bare sessions",
        None => "unknown",
    };
    match profile.path_s {
        Some(p) => format!("{:.3} ({place})", p * 1e3),
        None => format!("– ({place})"),
    }
}

/// The results as Markdown: per-point table, error summary against the paper, best configuration
/// per load.
pub fn serf_table(results: &[SerfModelResult]) -> String {
    let mut s = String::from("| model | config | k | λ (1/s) | ρ | requests | predicted ms | measured ms | error | the paper's model (back to back): ms, error | service ms predicted / measured | in-situ predicted ms | in-situ error | at the node ms predicted / measured, error | outside the node ms predicted / measured | sender late µs | call SCV | in-situ with the call SCV: ms, error | window CV | arrival SCV at the node | in-situ at the node with both SCVs: ms, error | from the second profile: ms, error | from the calls served before (SERF online): ms, error | at the service level of the last point served: ms, error |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    push_rows(
        &mut s,
        results,
        |r| r.points.iter(),
        |p| {
            let dash = || "–".to_string();
            format!(
                "{} | {} | {:.1} | {:.2} | {} | {:.3} | {:.3} | {:+.1} % | {:.3}, {:+.1} % | {:.3} / {} | {} | {} | {:.3} / {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {}",
                p.config,
                p.level,
                p.lambda,
                p.rho,
                p.requests,
                p.predicted_ms,
                p.measured_ms,
                p.error() * 100.0,
                p.back_to_back_ms,
                p.back_to_back_error() * 100.0,
                p.predicted_service_ms,
                p.measured_service_ms
                    .map_or_else(dash, |m| format!("{m:.3}")),
                p.in_situ_ms
                    .map_or_else(|| "unstable".to_string(), |m| format!("{m:.3}")),
                p.in_situ_error()
                    .map_or_else(dash, |e| format!("{:+.1} %", e * 100.0)),
                p.predicted_node_ms,
                p.measured_node_ms
                    .zip(p.node_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.outside_the_node_ms()
                    .map_or_else(dash, |(pred, m)| format!("{pred:.3} / {m:.3}")),
                p.send_late_ms * 1e3,
                p.measured_service_scv
                    .map_or_else(dash, |v| format!("{v:.3}")),
                p.in_situ_scv_ms
                    .zip(p.in_situ_scv_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.window_service_cv
                    .map_or_else(dash, |v| format!("{v:.3}")),
                p.node_arrival_scv.map_or_else(dash, |v| format!("{v:.3}")),
                p.in_situ_node_spread_ms
                    .zip(p.node_in_situ_spread_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                p.second_predicted_ms
                    .zip(p.second_error())
                    .map_or_else(dash, |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0)),
                causal_cell(p.online_predicted_ms, p.online_error()),
                causal_cell(p.carried_predicted_ms, p.carried_error()),
            )
        },
    );
    s.push_str("\n| model | points | mean \\|error\\| | p90 | p95 | max | the paper's model: mean \\|error\\| / p90 | best config: same / within 5 % / wrong | load runs s | profiling wall s | back-to-back path ms (measured in) | in-situ mean \\|error\\| / p90 (points) | at the node mean \\|error\\| / p90 (points) | from send mean \\|error\\| / p90 | in-situ with the call SCV mean \\|error\\| / p90 (points) | in-situ per window mean \\|error\\| / p90 (points) | in-situ at the node mean \\|error\\| / p90 (points) | in-situ at the node with both SCVs mean \\|error\\| / p90 (points) | from the second profile: mean \\|error\\| / p90 / p95 (points) | from the calls served before (SERF online): mean \\|error\\| / p90 / p95 (points) | at the service level of the last point served: mean \\|error\\| / p90 / p95 (points) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let all: Vec<&SerfPoint> = results.iter().flat_map(|r| r.points.iter()).collect();
    for r in results {
        let (mean, p90, p95) = error_summary(r.points.iter().map(SerfPoint::error));
        let max = r.points.iter().map(|p| p.error().abs()).fold(0.0, f64::max);
        let (b2b_mean, b2b_p90, _) =
            error_summary(r.points.iter().map(SerfPoint::back_to_back_error));
        let same = r.best.iter().filter(|b| b.predicted == b.measured).count();
        let close = r.best.iter().filter(|b| b.acceptable()).count() - same;
        let errors = |of: fn(&SerfPoint) -> Option<f64>| -> Vec<f64> {
            r.points.iter().filter_map(of).collect()
        };
        let in_situ = errors(SerfPoint::in_situ_error);
        let (in_situ_mean, in_situ_p90, _) = error_summary(in_situ.iter().copied());
        let at_node = errors(SerfPoint::node_error);
        let (node_mean, node_p90, _) = error_summary(at_node.iter().copied());
        let (sent_mean, sent_p90, _) =
            error_summary(r.points.iter().map(SerfPoint::from_send_error));
        let with_scv = errors(SerfPoint::in_situ_scv_error);
        let (scv_mean, scv_p90, _) = error_summary(with_scv.iter().copied());
        let windowed = errors(SerfPoint::windowed_in_situ_error);
        let (windowed_mean, windowed_p90, _) = error_summary(windowed.iter().copied());
        let node_in_situ = errors(SerfPoint::node_in_situ_error);
        let (node_in_situ_mean, node_in_situ_p90, _) = error_summary(node_in_situ.iter().copied());
        let node_spread = errors(SerfPoint::node_in_situ_spread_error);
        let (node_spread_mean, node_spread_p90, _) = error_summary(node_spread.iter().copied());
        let second = errors(SerfPoint::second_error);
        let online = summary_cell(&errors(SerfPoint::online_error));
        let carried = summary_cell(&errors(SerfPoint::carried_error));
        s.push_str(&format!(
            "| {} | {} | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % / {:.1} % | {same} / {close} / {} | {:.0} | {:.2} | {} | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {:.1} % / {:.1} % ({}) | {} | {online} | {carried} |\n",
            r.model,
            r.points.len(),
            mean * 100.0,
            p90 * 100.0,
            p95 * 100.0,
            max * 100.0,
            b2b_mean * 100.0,
            b2b_p90 * 100.0,
            r.best.len() - same - close,
            r.load_seconds,
            r.profile.wall_s.unwrap_or(0.0),
            path_cell(&r.profile),
            in_situ_mean * 100.0,
            in_situ_p90 * 100.0,
            in_situ.len(),
            node_mean * 100.0,
            node_p90 * 100.0,
            at_node.len(),
            sent_mean * 100.0,
            sent_p90 * 100.0,
            scv_mean * 100.0,
            scv_p90 * 100.0,
            with_scv.len(),
            windowed_mean * 100.0,
            windowed_p90 * 100.0,
            windowed.len(),
            node_in_situ_mean * 100.0,
            node_in_situ_p90 * 100.0,
            node_in_situ.len(),
            node_spread_mean * 100.0,
            node_spread_p90 * 100.0,
            node_spread.len(),
            summary_cell(&second)
        ));
    }
    if results.len() > 1 {
        let (mean, p90, p95) = error_summary(all.iter().map(|p| p.error()));
        s.push_str(&format!(
            "| **all** | {} | **{:.1} %** | **{:.1} %** | **{:.1} %** | | | | | | | | | | | | | | | | |\n",
            all.len(),
            mean * 100.0,
            p90 * 100.0,
            p95 * 100.0
        ));
    }
    s.push_str("| paper (Fig. 11) | | ≤ 4 % | < 10 % | < 12 % | | | always | | | | | | | | | | | ≤ 4 % / < 10 % / < 12 % | ≤ 4 % / < 10 % / < 12 % | ≤ 4 % / < 10 % / < 12 % |\n");
    s.push_str("\nMachine drift: capacity c·μ_c in a second profile taken after the load runs, relative to the one the predictions use:\n\n| model | config | drift |\n|---|---|---|\n");
    push_rows(&mut s, results, SerfModelResult::drift, |(config, d)| {
        format!("{config} | {:+.1} %", d * 100.0)
    });
    if let Some((kind, _)) = results.iter().find_map(|r| r.second_profiles.as_ref()) {
        s.push_str(&format!(
            "\nThe same in the second profile ({}):\n\n| model | config | drift |\n|---|---|---|\n",
            kind.describe()
        ));
        push_rows(
            &mut s,
            results,
            SerfModelResult::second_profile_drift,
            |(config, d)| format!("{config} | {:+.1} %", d * 100.0),
        );
    }
    s.push_str("\n| model | k | λ (1/s) | predicted best | measured best | measured latency of predicted / best | ok |\n|---|---|---|---|---|---|---|\n");
    push_rows(
        &mut s,
        results,
        |r| r.best.iter(),
        |b| {
            format!(
                "{} | {:.1} | {} | {} | {:.3} | {}",
                b.level,
                b.lambda,
                b.predicted,
                b.measured,
                b.ratio,
                if b.predicted == b.measured {
                    "same"
                } else if b.acceptable() {
                    "within 5 %"
                } else {
                    "no"
                }
            )
        },
    );
    s
}

/// A causal prediction's cell: `ms, error`, or "unstable" where the rates could not keep up.
fn causal_cell(predicted_ms: Option<f64>, error: Option<f64>) -> String {
    predicted_ms.zip(error).map_or_else(
        || "unstable".to_string(),
        |(m, e)| format!("{m:.3}, {:+.1} %", e * 100.0),
    )
}

/// A summary cell of `errors`: `mean / p90 / p95 (points)` of their absolute values, "–" if none.
fn summary_cell(errors: &[f64]) -> String {
    if errors.is_empty() {
        return "–".to_string();
    }
    let (mean, p90, p95) = error_summary(errors.iter().copied());
    format!(
        "{:.1} % / {:.1} % / {:.1} % ({})",
        mean * 100.0,
        p90 * 100.0,
        p95 * 100.0,
        errors.len()
    )
}

/// Appends one Markdown table row per item `items` yields for each model's results: the model's
/// name, then `row`'s cells (already joined by ` | `).
fn push_rows<'a, T, I>(
    s: &mut String,
    results: &'a [SerfModelResult],
    items: impl Fn(&'a SerfModelResult) -> I,
    row: impl Fn(T) -> String,
) where
    I: IntoIterator<Item = T>,
{
    for r in results {
        for item in items(r) {
            s.push_str(&format!("| {} | {} |\n", r.model, row(item)));
        }
    }
}
