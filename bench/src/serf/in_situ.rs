//! The in-situ readings of a point: the paper's model with its service level set to the calls
//! measured during the point, and the measured spreads (of the calls, of their arrivals at the
//! node, of the service level over time) that could make a queue longer than the model's.

use std::time::{Duration, Instant};

use weir_operators::model::CallRecord;
use weir_serf::model::{predict, Prediction};

/// The mean latency (seconds) the model predicts at `lambda` with the rates `mu` scaled so that its mean
/// service time is `measured_service_s` instead of `predicted_service_s` (module docs); `None` when the
/// inputs are not positive or the scaled configuration is unstable at `lambda`.
pub fn in_situ_latency(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
) -> Option<f64> {
    in_situ_prediction(lambda, mu, predicted_service_s, measured_service_s).map(|p| p.latency)
}

/// [`in_situ_latency`] with the waiting of arrivals and service times whose squared coefficients
/// of variation are `(arrival_scv, service_scv)`
/// ([`weir_serf::model::Prediction::waiting_with_scvs`]; arrival SCV 1 is Poisson).
pub fn in_situ_latency_with_scvs(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
    (arrival_scv, service_scv): (f64, f64),
) -> Option<f64> {
    in_situ_prediction(lambda, mu, predicted_service_s, measured_service_s)
        .map(|p| p.service + p.waiting_with_scvs(arrival_scv, service_scv))
}

/// Squared coefficient of variation of the gaps between consecutive `arrivals` (sorted; `None`:
/// fewer than three): 1 for a Poisson stream, above 1 when they come in clumps.
pub fn arrival_scv(arrivals: &[Instant]) -> Option<f64> {
    let gaps: Vec<Duration> = arrivals
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .collect();
    scv(&gaps)
}

/// The paper's prediction with the rates `mu` scaled to the measured mean service time.
fn in_situ_prediction(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    measured_service_s: f64,
) -> Option<Prediction> {
    if !(predicted_service_s > 0.0 && measured_service_s > 0.0) {
        return None;
    }
    let scale = predicted_service_s / measured_service_s;
    let scaled: Vec<f64> = mu.iter().map(|m| m * scale).collect();
    predict(lambda, &scaled).ok()
}

/// Squared coefficient of variation of `times` (`None`: fewer than two, or a zero mean).
pub fn scv(times: &[Duration]) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    let n = times.len() as f64;
    let secs = || times.iter().map(Duration::as_secs_f64);
    let mean = secs().sum::<f64>() / n;
    let variance = secs().map(|t| (t - mean).powi(2)).sum::<f64>() / n;
    (mean > 0.0).then(|| variance / (mean * mean))
}

/// For each of `calls`, how many calls ran with it on average over its span, itself included
/// (time-weighted, rounded, at least 1): the tuple `i` a live node's executor counts the call for
/// (`weir_operators::model::parallelism`), here from the call log after the fact.
pub fn calls_running_with(calls: &[CallRecord]) -> Vec<usize> {
    let spans: Vec<(Instant, Instant)> = calls
        .iter()
        .map(|c| {
            let start = c.ended_at.checked_sub(c.duration).unwrap_or(c.ended_at);
            (start, c.ended_at)
        })
        .collect();
    spans
        .iter()
        .map(|&(start, end)| {
            let own = end.saturating_duration_since(start).as_secs_f64();
            if own <= 0.0 {
                return 1;
            }
            let together: f64 = spans
                .iter()
                .map(|&(s, e)| {
                    e.min(end)
                        .saturating_duration_since(s.max(start))
                        .as_secs_f64()
                })
                .sum();
            ((together / own).round() as usize).max(1)
        })
        .collect()
}

/// Length of the windows [`windowed_service`] cuts a point's calls into: a host's speed states
/// last seconds (`benchmarks/serf/README.md`), a queue at `ρ ≤ 0.8` forgets its past
/// in tens of calls, and half a second holds at least fifteen calls at every load run.
pub const SPEED_WINDOW: Duration = Duration::from_millis(500);

/// A point's calls cut by their end times into consecutive windows of `window`: per window with
/// calls, how many and their mean duration (seconds), in time order.
pub fn windowed_service(calls: &[CallRecord], window: Duration) -> Vec<(usize, f64)> {
    let Some(first) = calls.iter().map(|c| c.ended_at).min() else {
        return Vec::new();
    };
    let mut windows: std::collections::BTreeMap<u64, (usize, f64)> = Default::default();
    let width = window.as_secs_f64().max(1e-6);
    for c in calls {
        let at = c.ended_at.saturating_duration_since(first).as_secs_f64();
        let slot = windows.entry((at / width) as u64).or_default();
        slot.0 += 1;
        slot.1 += c.duration.as_secs_f64();
    }
    windows
        .into_values()
        .map(|(n, total)| (n, total / n as f64))
        .collect()
}

/// Coefficient of variation of the windows' mean call time, each window weighted by its calls
/// (`None`: fewer than two windows): how much the service level itself moved during a point, apart
/// from the calls' spread within a window.
pub fn window_cv(windows: &[(usize, f64)]) -> Option<f64> {
    if windows.len() < 2 {
        return None;
    }
    let n: f64 = windows.iter().map(|w| w.0 as f64).sum();
    let mean = windows.iter().map(|&(k, m)| k as f64 * m).sum::<f64>() / n;
    let variance = windows
        .iter()
        .map(|&(k, m)| k as f64 * (m - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean > 0.0).then(|| variance.sqrt() / mean)
}

/// The mean latency (seconds) the model predicts at `lambda` for a host whose speed moves slowly
/// (a quasi-static reading of a service level that drifts): in each window the rates `mu` are
/// scaled to that window's mean call time as [`in_situ_latency`] does, and the windows'
/// predictions are averaged weighted by their calls. Because latency is convex in the service
/// time, slow stretches cost more than fast ones give back, which one mean service level cannot
/// show. `None` when there is no window, or a window's scaled rates cannot keep up with `lambda`
/// (the quasi-static reading does not hold there: the queue of such a stretch outlives it).
pub fn windowed_in_situ_latency(
    lambda: f64,
    mu: &[f64],
    predicted_service_s: f64,
    windows: &[(usize, f64)],
) -> Option<f64> {
    let mut weighted = 0.0;
    let mut calls = 0usize;
    for &(n, mean_s) in windows {
        weighted += n as f64 * in_situ_latency(lambda, mu, predicted_service_s, mean_s)?;
        calls += n;
    }
    (calls > 0).then(|| weighted / calls as f64)
}
