//! `weir profile`'s measuring on real ONNX Runtime: one experiment per parallelism tuple, each
//! giving a service rate and its variability ("SERF: Efficient Scheduling for Fast Deep Neural
//! Network Serving via Judicious Parallelism", §IV-B). The small MLP is profiled with a few samples
//! per tuple, in a running graph (the default, with the path time) and on bare sessions, the saved
//! profile reads back equal and covers every configuration with positive finite rates; a profile's
//! prediction at a low load agrees loosely with the mean latency weir measures; a graph with
//! `parallelism: auto` serves every request while its scheduler switches, and `/metrics` shows the
//! parallelism gauges.

use std::path::{Path, PathBuf};

use weir::loadgen::{run_load, Arrival, LoadSpec};
use weir::profile::{profile_node, profile_path, select_nodes, ProfileOptions};
use weir::workload::Workload;
use weir::{load_graph, plan_spec, start, DType, GraphSpec, ModelBuilder, RuntimeOptions};
use weir_engine::tensor::Dim;
use weir_serf::config::Config;
use weir_serf::model::predict;
use weir_serf::profile::{plan, MeasuredIn, Profile};

use crate::common::{model, temp_dir};

/// Writes graph `name` into `dir`: the small MLP as node `m` (with the node fields `fields`, each
/// line indented six spaces) reading `x`, answering `probs`.
fn mlp_graph(dir: &Path, name: &str, fields: &str) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model:\n      id: m\n      path: {}\n      inputs: {{x: x}}\n{fields}outputs:\n  - {{name: probs, from: m.probs}}\n",
            model("mlp_a.onnx").display()
        ),
    )
    .expect("graph written");
    path
}

#[test]
fn profile_mlp_saves_every_configuration() {
    let dir = temp_dir("serf");
    let graph_path = mlp_graph(&dir.0, "mlp", "");
    let graph = load_graph(&graph_path).unwrap();
    let nodes = select_nodes(&graph.plan, Some("m")).unwrap();
    assert_eq!(nodes.len(), 1);
    assert!(!nodes[0].spinning, "the node's executor does not spin");
    assert!(select_nodes(&graph.plan, Some("nope")).is_err());

    // Two cores whatever the machine has: (1,1), (1,2), (2,1).
    let options = ProfileOptions {
        cores: 2,
        samples: 4,
        retry_samples: 8,
        progress: false,
        spinning: nodes[0].spinning,
        ..ProfileOptions::default()
    };
    let profile = profile_node("m", &nodes[0].path, &options).unwrap();
    let out = profile_path(&graph_path, "m");
    assert_eq!(out, dir.0.join("m.serf.json"));
    profile.save(&out).unwrap();
    assert_eq!(Profile::load(&out).unwrap(), profile);
    assert_eq!(profile.label.as_deref(), Some("m"));
    assert!(profile.wall_s.is_some_and(|w| w > 0.0));
    assert_eq!(
        profile.spinning,
        Some(false),
        "the profile records how it was measured"
    );
    assert_eq!(profile.measured_in, Some(MeasuredIn::Graph), "the default");
    assert!(
        profile.path_s.is_some_and(|p| p.is_finite() && p >= 0.0),
        "the serving path's own time is measured: {:?}",
        profile.path_s
    );

    let candidates = profile.candidates();
    let configs: Vec<Config> = candidates.iter().map(|(c, _)| *c).collect();
    assert_eq!(configs, plan(2, &[1]));
    for (config, mu) in &candidates {
        assert_eq!(mu.len(), config.concurrency);
        assert!(
            mu.iter().all(|m| m.is_finite() && *m > 0.0),
            "{config}: {mu:?}"
        );
    }
    // 4 samples in the default 3 rounds: 2 a round; each tuple keeps one round, the effort
    // counts them all.
    for s in &profile.series {
        assert!(s.tuples.iter().all(|t| t.samples >= 2));
    }
    let effort = profile.effort.expect("the measuring effort is recorded");
    assert!(effort.experiments >= 3 * configs.len(), "{effort:?}");
    assert!(effort.requests >= 6 * configs.len(), "{effort:?}");
    // Service after idle gaps: every thread count at every pause, counted in the effort, used by
    // the candidates and shown by `describe`.
    assert_after_idle_measured(&profile);
    let pauses = weir::profile::IDLE_PAUSES.len();
    assert!(
        effort.experiments >= 3 * configs.len() + 2 * pauses,
        "{effort:?}"
    );
    let text = weir::profile::describe(&profile).unwrap();
    assert!(text.contains("t=2 alone after an idle gap"), "{text}");
    assert!(
        text.contains("path outside the call for Poisson arrivals (ms)"),
        "{text}"
    );

    // The paper's way, bare sessions back to back, gives the same shape of profile without a path time.
    let bare = profile_node(
        "m",
        &nodes[0].path,
        &ProfileOptions {
            measure_in: MeasuredIn::Sessions,
            ..options
        },
    )
    .unwrap();
    assert_eq!(bare.measured_in, Some(MeasuredIn::Sessions));
    assert_eq!(bare.path_s, None);
    let bare_configs: Vec<Config> = bare.candidates().iter().map(|(c, _)| *c).collect();
    assert_eq!(bare_configs, configs);
    assert_after_idle_measured(&bare);

    // With as many clients as slots (none waiting) the profile has the same shape and samples.
    let unqueued = profile_node(
        "m",
        &nodes[0].path,
        &ProfileOptions {
            without_queue: true,
            ..options
        },
    )
    .unwrap();
    let unqueued_configs: Vec<Config> = unqueued.candidates().iter().map(|(c, _)| *c).collect();
    assert_eq!(unqueued_configs, configs);
    assert!(unqueued
        .series
        .iter()
        .flat_map(|s| &s.tuples)
        .all(|t| t.samples >= options.samples.div_ceil(options.rounds.max(1))));
    assert_after_idle_measured(&unqueued);
}

/// The profile holds service after every idle pause for both thread counts, with positive times
/// and the samples asked for, and every candidate carries the curve of its thread count.
fn assert_after_idle_measured(profile: &Profile) {
    let threads: Vec<usize> = profile.after_idle.iter().map(|a| a.threads).collect();
    assert_eq!(threads, vec![1, 2], "{:?}", profile.after_idle);
    for a in &profile.after_idle {
        let gaps: Vec<f64> = a.points.iter().map(|p| p.gap_s).collect();
        let pauses: Vec<f64> = weir::profile::IDLE_PAUSES
            .iter()
            .map(|d| d.as_secs_f64())
            .collect();
        assert_eq!(gaps, pauses);
        assert!(a
            .points
            .iter()
            .all(|p| p.samples == 4 && p.mean_service_s > 0.0));
        // The path time after each pause is measured where the path runs: in the graph.
        let in_graph = profile.measured_in == Some(MeasuredIn::Graph);
        assert!(
            a.points
                .iter()
                .all(|p| p.mean_path_s.is_some_and(|x| x >= 0.0) == in_graph),
            "{a:?}"
        );
    }
    if profile.measured_in == Some(MeasuredIn::Graph) {
        let sparse = profile.path_after(1.0);
        assert!(sparse.is_finite() && sparse >= 0.0, "{sparse}");
    } else {
        assert_eq!(profile.path_after(1.0), 0.0, "no path without a graph");
    }
    let candidates = weir_serf::table::Candidates::from_profile(profile);
    assert!(candidates.as_slice().iter().all(|c| c.after_idle.is_some()));
}

/// End to end at low load with the test SqueezeNet on one core: profile, predict at ρ ≈ 0.2, and
/// run the same layout under that Poisson load (every request answered). How close prediction and
/// measurement are is the benchmark's question (`weir bench serf`), not a test's.
#[test]
fn profile_prediction_and_a_served_run_at_low_load() {
    let path = model("squeezenet_random.onnx");
    let options = ProfileOptions {
        cores: 1,
        samples: 4,
        retry_samples: 8,
        progress: false,
        ..ProfileOptions::default()
    };
    let profile = profile_node("squeezenet", &path, &options).unwrap();
    let mu = profile.mu(Config::new(1, 1)).unwrap();
    let lambda = 0.2 * mu[0];
    let predicted = predict(lambda, &mu).unwrap().latency;
    let spec = GraphSpec::builder("sq")
        .input("image", DType::F32, &[3, 224, 224])
        .model(ModelBuilder::new("squeezenet", &path).input("data_0", "image"))
        .output("probs", "squeezenet")
        .build();
    let graph = plan_spec(&spec, Path::new(".")).unwrap();
    let workload = Workload::random(&graph.plan, 1, 3);
    let running = start(graph.plan, RuntimeOptions::default()).unwrap();
    let report = run_load(
        running.runtime(),
        &workload,
        &LoadSpec {
            requests: 60,
            warmup: 5,
            arrival: Arrival::Poisson { rate: lambda },
            seed: 1,
            label_output: None,
            progress: false,
        },
    );
    running.shutdown();
    assert_eq!(report.ok, 60, "{:?}", report.errors);
    // Tests do not judge wall-clock times (the machine is shared and noisy; `weir bench serf`
    // measures prediction error): the prediction must be a sound latency for this profile — at
    // least the service time alone, finite at this stable load — and the run must have produced
    // latencies to compare it with.
    let measured = report.latency_us.mean() / 1e6;
    assert!(
        predicted.is_finite() && predicted >= 1.0 / mu[0] - 1e-12,
        "predicted {predicted} s"
    );
    assert!(measured > 0.0, "measured {measured} s");
    // The dispatcher's lateness is part of each latency, so never more than their mean.
    let late = report.mean_send_lateness.as_secs_f64();
    assert!(
        late <= measured + 1e-6,
        "late {late} s, measured {measured} s"
    );
}

/// `parallelism: auto` end to end: a profile fixture next to the graph (synthetic rates, so the
/// decision does not depend on the speed of the machine running the test) makes `(1, 2)` best at
/// low load with a capacity of 5 requests/s; 60 requests/s for a few seconds overloads it, and the
/// scheduler moves to `(2, 1)` while requests keep flowing. Every request is answered, and the
/// metrics show the gauges.
#[test]
fn parallelism_auto_serves_every_request_and_exports_its_gauges() {
    let dir = temp_dir("serf-auto");
    let graph_path = mlp_graph(&dir.0, "auto", "      parallelism: auto\n");
    // Without the profile: a validation error naming the file and `weir profile`.
    let Err(weir::LoadError::Invalid(d)) = load_graph(&graph_path) else {
        panic!("`parallelism: auto` without a profile validated");
    };
    let rendered = d.to_string();
    assert!(rendered.contains("m.serf.json"), "{rendered}");
    assert!(rendered.contains("weir profile"), "{rendered}");
    assert!(rendered.contains("auto.yaml:"), "{rendered}");

    // (1,1): 4/s; (1,2): 5/s alone; (2,1): 4/s alone, 3.5/s each with two running.
    let mut fixture = Profile::from_rates(2, &[(1, vec![4.0, 3.5]), (2, vec![5.0])]).unwrap();
    // A profile measured with spinning threads does not describe a node that does not spin.
    fixture.spinning = Some(true);
    fixture.save(&profile_path(&graph_path, "m")).unwrap();
    let warned = load_graph(&graph_path).unwrap().warnings.to_string();
    assert!(
        warned.contains("measured with intra-op spinning on")
            && warned.contains("`executor.spinning` off"),
        "{warned}"
    );
    fixture.spinning = Some(false);
    fixture.save(&profile_path(&graph_path, "m")).unwrap();
    let graph = load_graph(&graph_path).unwrap();
    assert!(
        !graph.warnings.to_string().contains("spinning"),
        "{}",
        graph.warnings
    );
    let text = graph.plan.describe();
    assert!(
        text.contains("parallelism auto over 3 configurations"),
        "{text}"
    );

    let workload = Workload::random(&graph.plan, 8, 5);
    let running = start(graph.plan, RuntimeOptions::default()).unwrap();
    let stats = running.parallelism_stats();
    assert_eq!(stats.len(), 1);
    // It starts with the most capacity (2 × 3.5/s), the load being unknown.
    assert_eq!((stats[0].1.concurrency, stats[0].1.threads), (2, 1));
    let report = run_load(
        running.runtime(),
        &workload,
        &LoadSpec {
            requests: 200,
            warmup: 0,
            arrival: Arrival::Poisson { rate: 60.0 },
            seed: 3,
            label_output: None,
            progress: false,
        },
    );
    let mut metrics = String::new();
    (running.executor_metrics())(&mut metrics);
    let after = running.parallelism_stats()[0].1.clone();
    running.shutdown();
    assert_eq!(report.ok, 200, "{:?}", report.errors);
    for name in [
        "weir_parallelism_concurrency{graph=\"auto\",node=\"m\"}",
        "weir_parallelism_threads{graph=\"auto\",node=\"m\"}",
        "weir_parallelism_switches_total{graph=\"auto\",node=\"m\"}",
        "weir_arrival_rate_estimate{graph=\"auto\",node=\"m\"}",
        "weir_serf_profile_updates_total{graph=\"auto\",node=\"m\"}",
        "weir_serf_ranking_changes_total{graph=\"auto\",node=\"m\"}",
        "weir_serf_explorations_total{graph=\"auto\",node=\"m\"}",
        "weir_serf_backlog_switches_total{graph=\"auto\",node=\"m\"}",
        "weir_serf_waiting{graph=\"auto\",node=\"m\"}",
        "weir_serf_service_samples_settling_total{graph=\"auto\",node=\"m\"}",
        "weir_serf_service_samples_total{graph=\"auto\",node=\"m\",running=\"1\",threads=\"2\"}",
        "weir_serf_predicted_utilisation{graph=\"auto\",node=\"m\",concurrency=\"2\",threads=\"1\"}",
        "weir_serf_utilisation_cap{graph=\"auto\",node=\"m\",concurrency=\"1\",threads=\"2\"}",
    ] {
        assert!(metrics.contains(name), "no {name} in:\n{metrics}");
    }
    // Why it runs what it runs: every configuration's standing at the planned load, each
    // prediction that is stable exported in seconds.
    assert_eq!(after.standings.len(), 3, "{after:?}");
    for s in &after.standings {
        assert!(s.utilisation > 0.0 && s.cap > 0.0, "{s:?}");
        if let Some(e) = s.estimate {
            let line = format!(
                "weir_serf_predicted_latency_seconds{{graph=\"auto\",node=\"m\",concurrency=\"{}\",threads=\"{}\"}} ",
                s.config.concurrency, s.config.threads
            );
            assert!(
                metrics.contains(&line) && e.latency > 0.0,
                "no {line} in:\n{metrics}"
            );
        }
    }
    // The scheduler estimated the load (60/s); what it chose from there depends on the model's
    // measured speed on the machine running the test (the switching rules are the scheduler's unit
    // tests), but it is one of the candidates.
    assert!(after.arrival_rate > 5.0, "{after:?}");
    // The graph's only model node reads its load where requests enter.
    assert!(after.reads_admission, "{after:?}");
    assert!(
        [(1, 1), (1, 2), (2, 1)].contains(&(after.concurrency, after.threads)),
        "{after:?}"
    );
    // Online re-profiling: the executor's calls reached the scheduler as service times.
    assert_eq!(after.service_rates.len(), 3, "{after:?}");
    assert!(
        after.service_rates.iter().map(|r| r.samples).sum::<u64>() > 0,
        "{after:?}"
    );

    // Beside a second model node, admission's count is not all this node's load: it reads its own.
    let pair_path = dir.0.join("pair.yaml");
    std::fs::write(
        &pair_path,
        format!(
            "name: pair\ninputs:\n  - {{name: x, dtype: f32, shape: [64]}}\nnodes:\n  - model:\n      id: m\n      path: {0}\n      inputs: {{x: x}}\n      parallelism: auto\n  - model:\n      id: other\n      path: {0}\n      inputs: {{x: x}}\noutputs:\n  - {{name: a, from: m.probs}}\n  - {{name: b, from: other.probs}}\n",
            model("mlp_a.onnx").display()
        ),
    )
    .unwrap();
    fixture.save(&profile_path(&pair_path, "m")).unwrap();
    let pair = start(
        load_graph(&pair_path).unwrap().plan,
        RuntimeOptions::default(),
    )
    .unwrap();
    let stats = pair.parallelism_stats();
    pair.shutdown();
    assert_eq!(stats.len(), 1);
    assert!(!stats[0].1.reads_admission, "{:?}", stats[0].1);
}

/// The benchmarks' cache-contending MLP (`scripts/make_models.py`, `mlp_l3`) keeps the property
/// it is named for: its weights fit one 32 MiB L3 but not two sessions' copies of them.
#[test]
fn the_cache_contending_mlp_fits_one_l3_copy_not_two() {
    let path = model("mlp_l3.onnx");
    let meta = weir_engine::onnx::read_metadata(&path).unwrap();
    assert_eq!(meta.inputs.len(), 1);
    assert_eq!(meta.inputs[0].dims, vec![Dim::Dynamic, Dim::Fixed(1024)]);
    assert_eq!(meta.outputs[0].dims, vec![Dim::Dynamic, Dim::Fixed(10)]);
    let mib = std::fs::metadata(&path).unwrap().len() as f64 / (1 << 20) as f64;
    assert!(mib > 16.0 && mib < 32.0, "{mib:.1} MiB of weights");
}
