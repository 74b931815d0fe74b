//! INFaaS's autoscaling experiment ("INFaaS: Automated Model-less Inference Serving", §6.2,
//! Figure 6, and sweeps of the autoscaler's settings): one task under three load shapes, served by
//! model-less INFaaS (variants chosen per query, replicated, upgraded and downgraded, executors
//! added and removed) against the paper's fixed-variant baselines, built inside weir as the
//! paper built them inside INFaaS:
//!
//! - **Clipper⁺** pre-loads a fixed variant on a fixed pool and never scales: `_cpu` two
//!   instances of the CPU batch-1 variant, `_gpu` one instance of the GPU batch-1 variant.
//! - **SM⁺** (SageMaker-like) names one variant and lets the autoscaler replicate it (queries
//!   that name a variant are only replicated or removed): `_cpu` the CPU batch-1 variant, `_gpu`
//!   the GPU batch-1 variant, the cheapest GPU one.
//!
//! Every system is a real `weir serve --repository` process with real `weir executor`
//! processes (this binary's hidden subcommands), spoken to over HTTP. The executor types are
//! emulated (`--emulate-latency`: the real ONNX Runtime call, then held to the type's latency),
//! because this machine has neither the accelerators nor the cores to make the load shapes
//! matter: the types are a CPU-like one (small fixed cost, large per-row cost, cheap), an
//! Inferentia-like one and a GPU-like one (large fixed cost, small per-row cost, dear), priced
//! in the paper's ratio (CPU : Inferentia : GPU ≈ 1 : 6 : 16 per GB·s, §6.2).
//!
//! Variants are the batch-1 builds (and the dynamic-batch one) of one architecture per type:
//! an emulated executor runs each job it receives as one call held for the type's latency at
//! the job's rows, so a batch-specialised build would only pad single queries.
//!
//! Per run: the pattern's Poisson arrivals of batch-1 queries with one latency SLO; the
//! SLO-violation ratio per 4 s window (a violation is a reply later than the SLO, or no 200
//! reply), served throughput per 2 s, and the cost the front end accumulated over the measured
//! window (Σ instance price × seconds loaded; for Clipper⁺'s fixed pool, which runs no
//! autoscaler to meter it, its instances × price × the window).

pub(crate) mod drive;
mod plot;
pub(crate) mod report;
mod setup;

use std::path::{Path, PathBuf};

use anyhow::Result;

pub use drive::{Outcome, Recorded, Sample};
pub use plot::{plot_pattern, plot_sweep};
pub use report::{pattern_table, summarise, sweep_table, Summary};
pub use setup::ExecutorType;

/// A load shape (§6.2's three), rates in queries per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// A flat low rate.
    FlatLow {
        /// The rate.
        qps: f64,
        /// Seconds.
        seconds: f64,
    },
    /// A rate rising slowly from `from` to `to` (the paper's 650 → 700).
    SteadyHigh {
        /// Rate at the start.
        from: f64,
        /// Rate at the end.
        to: f64,
        /// Seconds.
        seconds: f64,
    },
    /// A low rate with two spikes, each a sixth of the run long, at a quarter and at two thirds
    /// of it (the paper's 4 → 80 QPS, spikes at 60–90 s and 150–180 s of ~240 s).
    Fluctuating {
        /// The rate between spikes.
        low: f64,
        /// The rate during a spike.
        spike: f64,
        /// Seconds.
        seconds: f64,
    },
}

impl Pattern {
    /// Its short name.
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::FlatLow { .. } => "flat-low",
            Pattern::SteadyHigh { .. } => "steady-high",
            Pattern::Fluctuating { .. } => "fluctuating",
        }
    }

    /// Its length in seconds.
    pub fn seconds(&self) -> f64 {
        match *self {
            Pattern::FlatLow { seconds, .. }
            | Pattern::SteadyHigh { seconds, .. }
            | Pattern::Fluctuating { seconds, .. } => seconds,
        }
    }

    /// The spikes' [start, end) in seconds (none but in the fluctuating pattern).
    pub fn spikes(&self) -> Vec<(f64, f64)> {
        match *self {
            Pattern::Fluctuating { seconds, .. } => {
                let len = seconds / 6.0;
                vec![
                    (seconds / 4.0, seconds / 4.0 + len),
                    (seconds * 2.0 / 3.0, seconds * 2.0 / 3.0 + len),
                ]
            }
            _ => Vec::new(),
        }
    }

    /// The rate at its start (the warm-up's).
    pub fn first_rate(&self) -> f64 {
        drive::Rate::at(self, 0.0)
    }
}

impl drive::Rate for Pattern {
    fn at(&self, t: f64) -> f64 {
        match *self {
            Pattern::FlatLow { qps, .. } => qps,
            Pattern::SteadyHigh { from, to, seconds } => {
                from + (to - from) * (t / seconds).clamp(0.0, 1.0)
            }
            Pattern::Fluctuating { low, spike, .. } => {
                match self.spikes().iter().any(|(a, b)| (*a..*b).contains(&t)) {
                    true => spike,
                    false => low,
                }
            }
        }
    }
}

/// The rate `pattern` offers at `t` seconds.
pub fn rate_at(pattern: &Pattern, t: f64) -> f64 {
    drive::Rate::at(pattern, t)
}

/// A serving system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// Model-less: queries give a latency target; variants chosen and scaled by weir.
    Infaas,
    /// Two pre-loaded CPU batch-1 instances, no scaling.
    ClipperCpu,
    /// One pre-loaded GPU batch-1 instance, no scaling.
    ClipperGpu,
    /// The CPU batch-1 variant, replicated by the autoscaler.
    SmCpu,
    /// The GPU batch-1 variant, replicated by the autoscaler.
    SmGpu,
}

impl System {
    /// Every system, INFaaS first (the ratios' reference).
    pub const ALL: [System; 5] = [
        System::Infaas,
        System::ClipperCpu,
        System::ClipperGpu,
        System::SmCpu,
        System::SmGpu,
    ];

    /// Its name in the tables.
    pub fn name(self) -> &'static str {
        match self {
            System::Infaas => "INFaaS",
            System::ClipperCpu => "Clipper⁺_cpu",
            System::ClipperGpu => "Clipper⁺_gpu",
            System::SmCpu => "SM⁺_cpu",
            System::SmGpu => "SM⁺_gpu",
        }
    }

    /// The variant it names, as (executor type, fixed batch); `None` for INFaaS.
    pub fn variant(self) -> Option<(&'static str, u32)> {
        match self {
            System::Infaas => None,
            System::ClipperCpu | System::SmCpu => Some(("cpu", 1)),
            System::ClipperGpu => Some(("gpu", 1)),
            System::SmGpu => Some(("gpu", 1)),
        }
    }

    /// Pre-loaded instances on a fixed pool, or 0 when it autoscales.
    pub fn fixed_instances(self) -> usize {
        match self {
            System::ClipperCpu => 2,
            System::ClipperGpu => 1,
            _ => 0,
        }
    }
}

/// Autoscaler settings a run may change (the sweeps); `None` keeps the paper's default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Knobs {
    /// Headroom threshold (1.05).
    pub threshold: Option<f64>,
    /// Model-autoscaler interval, s (1).
    pub tick_s: Option<f64>,
    /// λ, per second (1).
    pub lambda_per_s: Option<f64>,
    /// Capacity held beyond the load, q/s (0).
    pub slack_qps: Option<f64>,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct AutoscaleBenchConfig {
    /// The architecture served: name and ONNX file.
    pub model: (String, PathBuf),
    /// Its validation set (registration scores it).
    pub validation: PathBuf,
    /// The executor types, with prices and emulated latencies.
    pub types: Vec<ExecutorType>,
    /// The queries' latency SLO, ms.
    pub slo_ms: f64,
    /// HTTP connections sending the load.
    pub clients: usize,
    /// Seconds of unmeasured load before each run (cold starts, executors joining).
    pub warmup_s: f64,
    /// Executors per type the autoscaler may hold at most.
    pub max_executors: u32,
}

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct Run {
    /// The system.
    pub system: System,
    /// The pattern.
    pub pattern: Pattern,
    /// What was recorded.
    pub recorded: Recorded,
    /// Cost over the measured window.
    pub cost: f64,
}

/// Registers the model with every executor type into `dir` (once per invocation).
///
/// # Errors
/// When registration fails.
pub fn prepare(config: &AutoscaleBenchConfig, dir: &Path) -> Result<setup::Prepared> {
    setup::prepare(config, dir)
}

/// Runs `system` under `pattern` with `knobs` on the prepared repository.
///
/// # Errors
/// When a process does not start, or a request is lost or answered twice.
pub fn run(
    config: &AutoscaleBenchConfig,
    prepared: &setup::Prepared,
    system: System,
    pattern: Pattern,
    knobs: Knobs,
    seed: u64,
) -> Result<Run> {
    let deployment = setup::Deployment::start(config, prepared, system, knobs, pattern.name())?;
    let body = deployment.body();
    let path = format!("/v2/models/{}/infer", setup::TASK);
    deployment.wait_served(&path, &body)?;
    // Warm-up at the pattern's first rate: cold starts and executors' joins are not measured.
    let warm = Pattern::FlatLow {
        qps: pattern.first_rate(),
        seconds: config.warmup_s,
    };
    drive::drive(
        &deployment.addr,
        &path,
        &body,
        &warm,
        config.warmup_s,
        config.clients,
        seed ^ 0x5eed,
        &format!("{} warm-up", system.name()),
    )?;
    let before = drive::sample(&deployment.addr, 0.0)?;
    let recorded = drive::drive(
        &deployment.addr,
        &path,
        &body,
        &pattern,
        pattern.seconds(),
        config.clients,
        seed,
        &format!("{} {}", system.name(), pattern.name()),
    )?;
    let after = drive::sample(&deployment.addr, pattern.seconds())?;
    let cost = match system.fixed_instances() {
        0 => after.cost_total - before.cost_total,
        n => n as f64 * deployment.fixed_price() * pattern.seconds(),
    };
    drop(body);
    deployment.stop();
    Ok(Run {
        system,
        pattern,
        recorded,
        cost,
    })
}
