//! Model-vs-simulator benchmark: SERF's predicted mean latency against a
//! discrete-event simulation of M/D_interf/c, over synthetic service-rate profiles × all configurations ×
//! 10 load levels, with the paper's Fig. 9 baselines and best-configuration identification (Fig. 12).
//!
//! Run: `cargo run -p weir-serf --release --example model_vs_sim`. Writes
//! `benchmarks/serf/model_vs_sim.md` and `benchmarks/serf/model_vs_sim.png`.

use plotters::prelude::*;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use weir_serf::baseline::{Predictor, RateChoice};
use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::simulator::{simulate, LatencyStats, Semantics, SimConfig};
use weir_serf::table::{Candidates, TableOptions};

/// Highest utilisation simulated: above it a 1M-request run's mean is too noisy to judge a model by.
const MAX_RHO: f64 = 0.95;
/// Load levels per profile (the paper: 10).
const LEVELS: usize = 10;
/// Requests measured per case below ρ = 0.7 (four times as many above).
const REQUESTS: usize = 250_000;
/// A pick is a tie when its simulated latency is within this of the simulated best.
const TIE: f64 = 0.02;

struct Case {
    profile: usize,
    level: usize,
    lambda: f64,
    config: Config,
    mu: Vec<f64>,
    rho: f64,
    /// Simulated with the "dyn" semantics (the main reference).
    sim: Option<LatencyStats>,
    /// Simulated with the "start" semantics (what the model's PASTA step assumes).
    sim_start: Option<LatencyStats>,
    /// Simulated with "dyn" semantics and non-deterministic work (SCV 0.1, the profile's homogeneity limit).
    sim_scv: Option<LatencyStats>,
}

/// An 8-core machine: 100 ms per request alone on one thread, near-linear intra-op speed-up to 3 threads
/// then memory-bound, and three interference shapes: none, mild (3 % slower per extra request) and
/// severe (50 % slower per request beyond two).
fn synthetic(interference: fn(usize) -> f64) -> Result<Profile, Box<dyn Error>> {
    let speedup = |t: usize| {
        if t <= 3 {
            t as f64
        } else {
            3.0 + 0.4 * (t as f64 - 3.0)
        }
    };
    let rates: Vec<(usize, Vec<f64>)> = (1..=8)
        .map(|t| {
            (
                t,
                (1..=8 / t)
                    .map(|i| speedup(t) / (0.100 * interference(i)))
                    .collect(),
            )
        })
        .collect();
    Ok(Profile::from_rates(8, &rates)?)
}

fn profiles() -> Result<Vec<(&'static str, Profile)>, Box<dyn Error>> {
    Ok(vec![
        // Shaped like ONNX Runtime measurements on a 2-core machine: squeezenet 315/s per
        // request alone at 1 thread, 630/s total at 2×1, 1.7 ms at 2 threads; resnet50 30/s alone, 59/s
        // total at 2×1, 52/s at 2 threads.
        (
            "squeezenet-2c",
            Profile::from_rates(2, &[(1, vec![315.0, 315.0]), (2, vec![1.0 / 0.0017])])?,
        ),
        (
            "resnet50-2c",
            Profile::from_rates(2, &[(1, vec![30.0, 29.5]), (2, vec![52.0])])?,
        ),
        ("none-8c", synthetic(|_| 1.0)?),
        ("mild-8c", synthetic(|i| 1.0 + 0.03 * (i as f64 - 1.0))?),
        (
            "severe-8c",
            synthetic(|i| 1.0 + 0.5 * (i as f64 - 2.0).max(0.0))?,
        ),
    ])
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// (mean, p90, p95, max) of absolute relative errors.
fn error_summary(mut errs: Vec<f64>) -> (f64, f64, f64, f64) {
    errs.sort_by(|a, b| a.total_cmp(b));
    let mean = errs.iter().sum::<f64>() / errs.len().max(1) as f64;
    (
        mean,
        percentile(&errs, 0.90),
        percentile(&errs, 0.95),
        errs.last().copied().unwrap_or(f64::NAN),
    )
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// The mean, p90, p95 and max of `errs` as four cells of a Markdown row.
fn error_cells(errs: Vec<f64>) -> String {
    let (mean, p90, p95, max) = error_summary(errs);
    format!("{} | {} | {} | {}", pct(mean), pct(p90), pct(p95), pct(max))
}

/// Which of a case's simulations an error is taken against.
type Simulated = fn(&Case) -> Option<&LatencyStats>;

/// |relative error| of `predictor` against the simulation `sim` reads, for every case that has
/// both.
fn abs_errors<'a>(
    cases: impl IntoIterator<Item = &'a Case>,
    predictor: Predictor,
    sim: Simulated,
) -> Vec<f64> {
    cases
        .into_iter()
        .filter_map(|c| rel_err_to(predictor, c, sim(c)))
        .map(f64::abs)
        .collect()
}

fn rel_err_to(predictor: Predictor, case: &Case, sim: Option<&LatencyStats>) -> Option<f64> {
    let sim = sim?;
    let pred = predictor.estimate(case.lambda, &case.mu).ok()?;
    Some((pred.latency - sim.mean_latency) / sim.mean_latency)
}

fn main() -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let profiles = profiles()?;
    let mut cases = Vec::new();
    for (p, (_, profile)) in profiles.iter().enumerate() {
        let cands = Candidates::from_profile(profile);
        let cap = cands.max_capacity().map_or(0.0, |c| c.capacity());
        let opts = TableOptions::default();
        for level in 1..=LEVELS {
            let lambda = level as f64 / LEVELS as f64 * opts.headroom * cap;
            for c in cands.as_slice() {
                let rho = lambda / c.capacity();
                cases.push(Case {
                    profile: p,
                    level,
                    lambda,
                    config: c.config,
                    mu: c.mu.clone(),
                    rho,
                    sim: None,
                    sim_start: None,
                    sim_scv: None,
                });
            }
        }
    }
    // Simulate on every core, one contiguous share of the cases each.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk_len = cases.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (k, chunk) in cases.chunks_mut(chunk_len).enumerate() {
            s.spawn(move || {
                for (j, case) in chunk.iter_mut().enumerate() {
                    if case.rho > MAX_RHO {
                        continue;
                    }
                    let n = if case.rho < 0.7 {
                        REQUESTS
                    } else {
                        4 * REQUESTS
                    };
                    let mut cfg = SimConfig::new(case.lambda, &case.mu, n);
                    cfg.warmup = 20_000;
                    cfg.semantics = Semantics::Dynamic;
                    cfg.seed = 1_000_003 * k as u64 + j as u64;
                    case.sim = simulate(&cfg).ok();
                    cfg.semantics = Semantics::FrozenAtStart;
                    case.sim_start = simulate(&cfg).ok();
                    cfg.semantics = Semantics::Dynamic;
                    cfg.work_scv = 0.1;
                    case.sim_scv = simulate(&cfg).ok();
                }
            });
        }
    });
    let sim_s = started.elapsed().as_secs_f64();

    let mut md = String::new();
    writeln!(md, "# SERF model vs discrete-event simulation\n")?;
    writeln!(
        md,
        "`cargo run -p weir-serf --release --example model_vs_sim` ({} cases simulated in {sim_s:.0} s on \
         {threads} threads). Error = (predicted − simulated)/simulated mean latency. Simulator: FCFS, Poisson \
         arrivals, deterministic work, interference semantics \"dyn\" (work progresses at μ_k for the current \
         number in service k), {}k requests ({}k at ρ ≥ 0.7) after 20k warm-up, one seed per case. Loads: \
         λ_k = k/10 · 0.95 · (largest c·μ_c) for k = 1..10; configurations above ρ = {MAX_RHO} at a load are \
         not simulated (too noisy) and not counted.\n",
        cases.iter().filter(|c| c.sim.is_some()).count(),
        REQUESTS / 1000,
        4 * REQUESTS / 1000
    )?;
    writeln!(
        md,
        "## SERF prediction error and best-configuration identification\n"
    )?;
    writeln!(md, "| profile | configs | cases | mean \\|err\\| | p90 | p95 | max | best config: exact / tie (≤2%) / wrong |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|")?;
    let mut all_errs = Vec::new();
    let mut picks_total = (0, 0, 0);
    let mut pick_rows = String::new();
    for (p, (name, profile)) in profiles.iter().enumerate() {
        let mine: Vec<&Case> = cases.iter().filter(|c| c.profile == p).collect();
        let errs = abs_errors(mine.iter().copied(), Predictor::Serf, |c| c.sim.as_ref());
        all_errs.extend(errs.iter().copied());
        let mut picks = (0, 0, 0);
        for level in 1..=LEVELS {
            let at: Vec<&Case> = mine
                .iter()
                .copied()
                .filter(|c| c.level == level && c.sim.is_some())
                .collect();
            let sim_of = |c: &Case| c.sim.as_ref().map_or(f64::INFINITY, |s| s.mean_latency);
            let pred_of = |c: &Case| {
                Predictor::Serf
                    .estimate(c.lambda, &c.mu)
                    .map_or(f64::INFINITY, |e| e.latency)
            };
            let (Some(sim_best), Some(model_pick)) = (
                at.iter()
                    .copied()
                    .min_by(|a, b| sim_of(a).total_cmp(&sim_of(b))),
                at.iter()
                    .copied()
                    .min_by(|a, b| pred_of(a).total_cmp(&pred_of(b))),
            ) else {
                continue;
            };
            let verdict = if sim_best.config == model_pick.config {
                picks.0 += 1;
                "exact"
            } else if sim_of(model_pick) <= sim_of(sim_best) * (1.0 + TIE) {
                picks.1 += 1;
                "tie"
            } else {
                picks.2 += 1;
                "WRONG"
            };
            writeln!(
                pick_rows,
                "| {name} | {level} | {:.2} | {} | {} | {:.2} / {:.2} | {verdict} |",
                sim_best.lambda,
                model_pick.config,
                sim_best.config,
                1e3 * sim_of(model_pick),
                1e3 * sim_of(sim_best)
            )?;
        }
        picks_total = (
            picks_total.0 + picks.0,
            picks_total.1 + picks.1,
            picks_total.2 + picks.2,
        );
        writeln!(
            md,
            "| {name} | {} | {} | {} | {} / {} / {} |",
            profile.candidates().len(),
            errs.len(),
            error_cells(errs),
            picks.0,
            picks.1,
            picks.2
        )?;
    }
    let (mean, p90, p95, max) = error_summary(all_errs.clone());
    writeln!(
        md,
        "| **all** | | {} | **{}** | **{}** | **{}** | {} | {} / {} / {} |",
        all_errs.len(),
        pct(mean),
        pct(p90),
        pct(p95),
        pct(max),
        picks_total.0,
        picks_total.1,
        picks_total.2
    )?;
    let variants: [(&str, Simulated); 2] = [
        ("all, vs \"start\" semantics", |c| c.sim_start.as_ref()),
        ("all, vs \"dyn\" with work SCV 0.1", |c| c.sim_scv.as_ref()),
    ];
    for (label, pick) in variants {
        let errs = abs_errors(&cases, Predictor::Serf, pick);
        writeln!(
            md,
            "| {label} | | {} | {} | |",
            errs.len(),
            error_cells(errs)
        )?;
    }
    writeln!(
        md,
        "| paper (Fig. 11, testbed) | | | ≤ 4% | < 10% | < 12% | | always |\n"
    )?;

    writeln!(md, "## Naive predictors on the same cases (paper Fig. 9)\n")?;
    writeln!(md, "| predictor | mean \\|err\\| | p90 | p95 | max |")?;
    writeln!(md, "|---|---|---|---|---|")?;
    for (label, predictor) in [
        ("SERF M/D_interf/c", Predictor::Serf),
        ("M/M_interf/c", Predictor::MMInterf),
        (
            "M/D/c with μ_1",
            Predictor::MDc {
                rate: RateChoice::Alone,
            },
        ),
        (
            "M/M/c with μ_1",
            Predictor::MMc {
                rate: RateChoice::Alone,
            },
        ),
    ] {
        let errs = abs_errors(&cases, predictor, |c| c.sim.as_ref());
        writeln!(md, "| {label} | {} |", error_cells(errs))?;
    }
    writeln!(md)?;

    writeln!(md, "## Per-load detail, ONNX-Runtime-shaped profiles\n")?;
    writeln!(md, "| profile | k | λ (1/s) | config | ρ | predicted (ms) | simulated (ms) | sim p95 (ms) | error |")?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|")?;
    for case in cases.iter().filter(|c| c.profile < 2) {
        let (Some(sim), Ok(pred)) = (&case.sim, Predictor::Serf.estimate(case.lambda, &case.mu))
        else {
            continue;
        };
        writeln!(
            md,
            "| {} | {} | {:.1} | {} | {:.2} | {:.3} | {:.3} | {:.3} | {} |",
            profiles[case.profile].0,
            case.level,
            case.lambda,
            case.config,
            case.rho,
            1e3 * pred.latency,
            1e3 * sim.mean_latency,
            1e3 * sim.p95,
            pct((pred.latency - sim.mean_latency) / sim.mean_latency)
        )?;
    }
    writeln!(
        md,
        "\n## Best configuration per load: model's pick vs simulator's best\n"
    )?;
    writeln!(md, "| profile | k | λ (1/s) | model pick | simulated best | simulated ms (pick / best) | verdict |")?;
    writeln!(md, "|---|---|---|---|---|---|---|")?;
    md.push_str(&pick_rows);

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/serf");
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join("model_vs_sim.md"), &md)?;
    if let Err(e) = plot(&cases, &profiles, &root.join("model_vs_sim.png")) {
        eprintln!("plot not written: {e}");
    }
    print!("{md}");
    eprintln!("total {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Predicted (lines) and simulated (dots) mean latency against load, one panel per selected profile.
fn plot(cases: &[Case], profiles: &[(&str, Profile)], path: &Path) -> Result<(), Box<dyn Error>> {
    let panels: [(usize, Vec<Config>); 3] = [
        (
            0,
            vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)],
        ),
        (
            1,
            vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)],
        ),
        (
            4,
            vec![
                Config::new(1, 8),
                Config::new(2, 4),
                Config::new(4, 2),
                Config::new(8, 1),
            ],
        ),
    ];
    let colors = [BLUE, RED, GREEN, MAGENTA];
    let root = BitMapBackend::new(path, (1500, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    for ((p, configs), area) in panels.iter().zip(root.split_evenly((1, 3)).iter()) {
        let mine: Vec<&Case> = cases
            .iter()
            .filter(|c| c.profile == *p && configs.contains(&c.config))
            .collect();
        let max_lambda = mine.iter().map(|c| c.lambda).fold(0.0, f64::max) * 1.05;
        let top = mine
            .iter()
            .filter_map(|c| c.sim.as_ref())
            .map(|s| 1e3 * s.mean_latency)
            .fold(0.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: model (lines) vs simulation (dots)", profiles[*p].0),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..max_lambda, 0.0..top.max(1e-3))?;
        chart
            .configure_mesh()
            .x_desc("arrival rate (1/s)")
            .y_desc("latency (ms)")
            .light_line_style(WHITE)
            .draw()?;
        for (cfg, color) in configs.iter().zip(colors) {
            let cands = Candidates::from_profile(&profiles[*p].1);
            let Some(cand) = cands.get(*cfg) else {
                continue;
            };
            let cap = cand.capacity() * MAX_RHO;
            let line: Vec<(f64, f64)> = (1..=200)
                .map(|k| k as f64 / 200.0 * cap.min(max_lambda))
                .filter_map(|l| {
                    Predictor::Serf
                        .estimate(l, &cand.mu)
                        .ok()
                        .map(|e| (l, 1e3 * e.latency))
                })
                .filter(|(_, y)| *y <= top)
                .collect();
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))?
                .label(format!("{cfg} model"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            let dots: Vec<(f64, f64)> = mine
                .iter()
                .filter(|c| c.config == *cfg)
                .filter_map(|c| c.sim.as_ref().map(|s| (c.lambda, 1e3 * s.mean_latency)))
                .collect();
            chart.draw_series(
                dots.into_iter()
                    .map(|pt| Circle::new(pt, 4, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
