//! Running the experiment on one model: profile it, serve every configuration the profile offers at
//! each load it can sustain, and read the node's counters and call log around every point.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::profile::in_graph::{one_node_graph, NODE};
use weir::profile::profile_node;
use weir::RunningGraph;
use weir_engine::onnx::{ElementType, TensorInfo};
use weir_operators::model::CallRecord;
use weir_serf::baseline::Predictor;
use weir_serf::config::Config;
use weir_serf::model::{predict, Estimate, Prediction};
use weir_serf::online::{OnlineOptions, OnlineProfile};
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::in_situ::{
    arrival_scv, calls_running_with, in_situ_latency, in_situ_latency_with_scvs, scv, window_cv,
    windowed_in_situ_latency, windowed_service, SPEED_WINDOW,
};
use super::{BestAtLoad, SecondProfile, SerfBenchConfig, SerfModelResult, SerfPoint, MAX_RHO};
use crate::overhead::first_input_output;

/// The first input, its element type and per-request shape (a dynamic dimension read as 1), and the
/// first output, of the model at `path`: what a one-node benchmark graph declares.
pub(crate) fn request_signature(
    path: &Path,
) -> Result<(TensorInfo, weir_engine::tensor::DType, Vec<i64>, TensorInfo)> {
    let (input, output) = first_input_output(path)?;
    let ElementType::Supported(dtype) = input.element else {
        return Err(anyhow!("{}: input is not f32 or i64", path.display()));
    };
    let shape: Vec<i64> = input
        .synthetic_shape(true)
        .iter()
        .map(|&n| n as i64)
        .collect();
    Ok((input, dtype, shape, output))
}

/// Requests for load level `k` of `loads` at rate `lambda` (module docs).
pub(super) fn requests_at(config: &SerfBenchConfig, level: usize, lambda: f64) -> usize {
    let scaled = config.requests * level / config.loads.max(1);
    let cap = (config.point_seconds * lambda) as usize;
    scaled.min(cap).max(config.min_requests)
}

/// Feeds a point's `calls` of a configuration `config` served at arrival rate `lambda` into
/// `online` as a live node would (each for the tuple of [`calls_running_with`], at most `c`, with
/// its session thread's idle gap before it), in the order they ended, timed from `origin`.
fn record_served_calls(
    online: &mut OnlineProfile,
    config: Config,
    lambda: f64,
    calls: &[CallRecord],
    origin: Instant,
) {
    let running = calls_running_with(calls);
    let mut ordered: Vec<(&CallRecord, usize)> = calls.iter().zip(running).collect();
    ordered.sort_by_key(|(c, _)| c.ended_at);
    for (call, i) in ordered {
        online.record(
            call.ended_at.saturating_duration_since(origin),
            config.tuple(i.min(config.concurrency)),
            call.duration.as_secs_f64(),
            Some(lambda),
            call.idle_before.map(|d| d.as_secs_f64()),
        );
    }
}

/// Profiles and measures one model.
pub(super) fn measure_model(
    name: &str,
    path: &Path,
    config: &SerfBenchConfig,
) -> Result<SerfModelResult> {
    let profile = profile_node(name, path, &config.profile)?;
    let candidates = Candidates::from_profile(&profile);
    let top = candidates
        .max_capacity()
        .ok_or_else(|| anyhow!("{name}: empty profile"))?
        .capacity();
    let lambdas: Vec<f64> = (1..=config.loads)
        .map(|k| k as f64 / config.loads as f64 * config.headroom * top)
        .collect();
    let started = Instant::now();
    let mut online = OnlineProfile::new(&candidates, OnlineOptions::default());
    // Measured over predicted mean service of the last point served.
    let mut service_level = 1.0;
    let mut points = Vec::new();
    let once = match config.second_profile {
        Some(kind @ (SecondProfile::Spread { .. } | SecondProfile::WithoutQueue)) => {
            Some(profile_node(name, path, &kind.options(&config.profile))?)
        }
        _ => None,
    };
    // Taken once, the second profile stands for every configuration, run or not.
    let mut second_profiles: Vec<(Config, Profile)> = once
        .iter()
        .flat_map(|p| candidates.as_slice().iter().map(|c| (c.config, p.clone())))
        .collect();
    for candidate in candidates.as_slice() {
        // `p` is the paper's model on the profile's rates; `estimate` adds the idle-gap terms.
        let runnable: Vec<(usize, f64, Prediction, Estimate)> = lambdas
            .iter()
            .enumerate()
            .filter_map(|(i, &l)| {
                let p = predict(l, &candidate.mu).ok().filter(|p| p.rho < MAX_RHO)?;
                let estimate = candidate.estimate(l, Predictor::Serf).ok()?;
                Some((i + 1, l, p, estimate))
            })
            .collect();
        if runnable.is_empty() {
            continue;
        }
        let second = match config.second_profile {
            Some(kind @ SecondProfile::BeforeEachConfiguration) => {
                let again = profile_node(name, path, &kind.options(&config.profile))?;
                second_profiles.push((candidate.config, again.clone()));
                Some(again)
            }
            Some(SecondProfile::Spread { .. } | SecondProfile::WithoutQueue) => once.clone(),
            None => None,
        };
        let second_candidate = second
            .as_ref()
            .map(Candidates::from_profile)
            .and_then(|c| c.get(candidate.config).cloned());
        let (graph, workload) = one_node_graph(path, candidate.config, config.profile.executor())?;
        run_load(
            graph.runtime(),
            &workload,
            &LoadSpec {
                requests: 20 * candidate.config.concurrency,
                warmup: 0,
                arrival: Arrival::Closed {
                    concurrency: candidate.config.concurrency,
                },
                seed: 0,
                label_output: None,
                progress: false,
            },
        );
        let node_counters = |g: &RunningGraph| {
            g.executor_stats()
                .into_iter()
                .next()
                .map(|(_, s)| s)
                .unwrap_or_default()
        };
        for (level, lambda, prediction, estimate) in runnable {
            let latency = estimate.latency;
            let online_predicted_ms = online
                .candidates_at(lambda, started.elapsed())
                .get(candidate.config)
                .and_then(|c| c.estimate(lambda, Predictor::Serf).ok())
                .map(|e| profile.predicted_latency(e.latency, lambda) * 1e3);
            let carried_predicted_ms = candidate
                .slowed(service_level)
                .estimate(lambda, Predictor::Serf)
                .ok()
                .map(|e| profile.predicted_latency(e.latency, lambda) * 1e3);
            let requests = requests_at(config, level, lambda);
            let before = node_counters(&graph);
            let calls = graph.executor_load(NODE);
            if let Some(calls) = calls {
                calls.record_calls();
            }
            let report = run_load(
                graph.runtime(),
                &workload,
                &LoadSpec {
                    requests,
                    warmup: 0,
                    arrival: Arrival::Poisson { rate: lambda },
                    seed: level as u64,
                    label_output: None,
                    progress: false,
                },
            );
            if report.error_count() > 0 || report.ok == 0 {
                graph.shutdown();
                return Err(anyhow!(
                    "{name} {}: errors {:?}",
                    candidate.config,
                    report.errors
                ));
            }
            let call_log = calls.map(|c| c.take_calls()).unwrap_or_default();
            record_served_calls(
                &mut online,
                candidate.config,
                lambda,
                &call_log.calls,
                started,
            );
            let call_times: Vec<Duration> = call_log.calls.iter().map(|c| c.duration).collect();
            let measured_scv = scv(&call_times);
            let node_arrival_scv = arrival_scv(&call_log.arrivals);
            let windows = windowed_service(&call_log.calls, SPEED_WINDOW);
            let after = node_counters(&graph);
            let mean_over = |total: Duration, before: Duration, n: u64| {
                (n > 0).then(|| total.saturating_sub(before).as_secs_f64() / n as f64)
            };
            let measured_service = mean_over(
                after.busy,
                before.busy,
                after.runs.saturating_sub(before.runs),
            );
            let measured_node = mean_over(
                after.sojourn,
                before.sojourn,
                after.jobs_answered.saturating_sub(before.jobs_answered),
            );
            let in_situ_with = |spreads: (f64, f64)| {
                measured_service.and_then(|s| {
                    in_situ_latency_with_scvs(lambda, &candidate.mu, prediction.service, s, spreads)
                })
            };
            if let Some(measured) = measured_service.filter(|_| estimate.service > 0.0) {
                service_level = measured / estimate.service;
            }
            let point = SerfPoint {
                config: candidate.config,
                level,
                lambda,
                rho: prediction.rho,
                predicted_ms: profile.predicted_latency(latency, lambda) * 1e3,
                second_predicted_ms: second.as_ref().zip(second_candidate.as_ref()).and_then(
                    |(second, c)| {
                        let estimate = c.estimate(lambda, Predictor::Serf).ok()?;
                        Some(second.predicted_latency(estimate.latency, lambda) * 1e3)
                    },
                ),
                online_predicted_ms,
                carried_predicted_ms,
                back_to_back_ms: (prediction.latency + profile.path_s.unwrap_or(0.0)) * 1e3,
                measured_ms: report.latency_us.mean() / 1e3,
                send_late_ms: report.mean_send_lateness.as_secs_f64() * 1e3,
                requests,
                predicted_service_ms: estimate.service * 1e3,
                measured_service_ms: measured_service.map(|s| s * 1e3),
                in_situ_ms: measured_service
                    .and_then(|s| in_situ_latency(lambda, &candidate.mu, prediction.service, s))
                    .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                measured_service_scv: measured_scv,
                in_situ_scv_ms: measured_scv
                    .and_then(|cs| in_situ_with((1.0, cs)))
                    .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                node_arrival_scv,
                in_situ_node_spread_ms: node_arrival_scv
                    .zip(measured_scv)
                    .and_then(in_situ_with)
                    .map(|l| l * 1e3),
                window_service_cv: window_cv(&windows),
                windowed_in_situ_ms: windowed_in_situ_latency(
                    lambda,
                    &candidate.mu,
                    prediction.service,
                    &windows,
                )
                .map(|l| profile.predicted_latency(l, lambda) * 1e3),
                predicted_node_ms: latency * 1e3,
                measured_node_ms: measured_node.map(|s| s * 1e3),
            };
            eprintln!(
                "{name} {} λ={lambda:.1}/s ({requests} requests): predicted {:.3} ms, measured {:.3} ms ({:+.1} %); service predicted {:.3} ms, measured {}",
                point.config,
                point.predicted_ms,
                point.measured_ms,
                point.error() * 100.0,
                point.predicted_service_ms,
                point.measured_service_ms.map_or_else(|| "–".to_string(), |m| format!("{m:.3} ms"))
            );
            points.push(point);
        }
        graph.shutdown();
    }
    let best = (1..=config.loads)
        .filter_map(|level| {
            let here: Vec<&SerfPoint> = points.iter().filter(|p| p.level == level).collect();
            let by = |f: fn(&SerfPoint) -> f64| {
                here.iter().copied().min_by(|a, b| f(a).total_cmp(&f(b)))
            };
            let predicted = by(|p| p.predicted_ms)?;
            let measured = by(|p| p.measured_ms)?;
            Some(BestAtLoad {
                level,
                lambda: predicted.lambda,
                predicted: predicted.config,
                measured: measured.config,
                ratio: predicted.measured_ms / measured.measured_ms,
            })
        })
        .collect();
    let load_seconds = started.elapsed().as_secs_f64();
    let profile_after = profile_node(name, path, &config.profile)?;
    Ok(SerfModelResult {
        model: name.to_string(),
        profile,
        points,
        best,
        load_seconds,
        profile_after,
        second_profiles: config.second_profile.map(|kind| (kind, second_profiles)),
    })
}
