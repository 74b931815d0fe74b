//! The `weir-bench` command line: one subcommand per experiment, with the flags, defaults and
//! output paths `weir bench <experiment>` takes too (`weir bench` hands its arguments to this
//! binary). Each experiment's flags and the code that turns them into its configuration live
//! in a module of their own; what they share (the report's first lines, saving a plot, the
//! `--model NAME=PATH` lists) is here.

mod batch_growth;
mod draft;
mod faults;
mod grpc;
mod hams;
mod http;
mod infaas_autoscale;
mod infaas_cold_start;
mod infaas_decision;
mod infaas_offline;
mod infaas_profiles;
mod kairos_live;
mod overhead;
mod parm;
mod parm_decode;
mod perf_analyzer;
mod pipeline;
mod remote;
mod serf;
mod tls;
mod tracing;
mod ui;
mod variable_length;
mod warmup;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use clap::{Args, Parser, Subcommand};
use weir::OrtRuntime;

/// Run a benchmark experiment (see benchmarks/README.md).
#[derive(Debug, Parser)]
#[command(name = "weir-bench", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    experiment: Experiment,
}

// Parsed once per process: a variant's size costs nothing, boxing would cost clarity.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Experiment {
    /// weir's in-process path against bare ONNX Runtime: saturated throughput and latency at
    /// concurrency 1, same library, model and thread settings, in one process.
    Overhead(overhead::OverheadArgs),
    /// `weir serve` over HTTP (JSON and binary) against the in-process path and bare ONNX Runtime,
    /// at client concurrency 1, 4 and 16.
    Http(http::HttpArgs),
    /// `weir serve` over gRPC (raw tensor contents) against HTTP binary and bare ONNX Runtime, for
    /// squeezenet and a small model, at client concurrency 1, 4 and 16.
    Grpc(grpc::GrpcArgs),
    /// Triton's perf_analyzer against `weir serve --model-repository` over HTTP and gRPC, beside
    /// bare ONNX Runtime on the same model and sessions: throughput, p50 and p99, as ratios.
    #[command(name = "perf-analyzer")]
    PerfAnalyzer(perf_analyzer::PerfAnalyzerArgs),
    /// `weir serve`'s HTTP path with TLS against without, binary bodies on keep-alive
    /// connections, on squeezenet at 1 and 4 clients: throughput and latency, as a ratio.
    Tls(tls::TlsArgs),
    /// `weir serve`'s HTTP path with tracing off against OTLP export at sampling 0, 1 % and
    /// 100 % (spans counted by a collector in the process), on squeezenet at 1 and 4 clients:
    /// throughput and latency, as ratios.
    Tracing(tracing::TracingArgs),
    /// The first request's latency once a repository model is ready, with and without its
    /// `model_warmup`, each from a freshly started `weir serve`.
    Warmup(warmup::WarmupArgs),
    /// `weir serve`'s throughput with no dashboard open against N open (status-stream
    /// subscribers), in the same run, as a ratio.
    Ui(ui::UiArgs),
    /// `weir serve`'s throughput and latency keeping no request path, one in 16 and every
    /// request's (`--ui-path-every` 0, 16, 1), in the same run, as ratios against keeping none.
    #[command(name = "ui-paths")]
    UiPaths(ui::UiPathsArgs),
    /// A model node on a `weir executor` process over zenoh against in-process, and the time from
    /// an executor's SIGKILL to the re-dispatch of its work.
    Remote(remote::RemoteArgs),
    /// ParM: tail latency when one replica's host hiccups (SIGSTOP/SIGCONT), against no parity and
    /// against spending the parity instance on one more replica session.
    Parm(parm::ParmArgs),
    /// ParM on the digits MLP against equal resources, per decode rule (`first_available`, the
    /// `p99` deadline) and with r = 2, with and without a straggling replica: tail gap and its
    /// ratio, fraction reconstructed, accuracy of all answers.
    ParmDecode(parm_decode::DecodeArgs),
    /// SERF's predicted mean latency against measured, per configuration and load, on ONNX Runtime.
    Serf(serf::SerfBenchArgs),
    /// Kairos routing on executors of emulated instance types (`--emulate-latency`), queries of
    /// production-trace sizes: the planned heterogeneous pool and the homogeneous ones within the
    /// budget under every policy (Kairos, least outstanding, round robin); the largest Poisson
    /// rate whose median p99 over trials meets the target, and goodput at a fixed rate.
    #[command(name = "kairos-live")]
    KairosLive(kairos_live::KairosLiveArgs),
    /// HAMS: normal-case latency and throughput of NSPB and Remus-like replication against no
    /// backup on three service graphs, and stateful failover time (detection, protocol,
    /// handover) over repeated SIGKILLs of a primary.
    Hams(hams::HamsBenchArgs),
    /// Requests of drawn sequence lengths: padded batching against no batching and against
    /// batching only requests of one length, throughput and p99.
    #[command(name = "variable-length")]
    VariableLength(variable_length::VariableLengthArgs),
    /// A CPU node's batches growing only while larger calls measured cheaper per row, against
    /// always growing to max_size, on PP-OCRv4's recogniser beside bare ONNX Runtime at each
    /// batch size: lines/s, p50 and p99 by client count.
    #[command(name = "batch-growth")]
    BatchGrowth(batch_growth::BatchGrowthArgs),
    /// An image classifier graph on camera JPEGs, decoding each whole against at a reduced DCT
    /// scale (`decode_image`'s `draft`): latency, CPU per request, top class, input difference.
    Draft(draft::DraftArgs),
    /// The OCR service graph through `weir serve` (PNG bytes in, text lines out) against the same
    /// pipeline written in Python with Pillow, numpy and onnxruntime: images/s, p50 and p99.
    Pipeline(pipeline::PipelineArgs),
    /// INFaaS: the metadata store's variant and worker decision time against a brute-force scan,
    /// on 175 variants of the paper's Table 8 and 12 workers in random states (paper Table 7).
    #[command(name = "infaas-decision")]
    InfaasDecision(infaas_decision::InfaasDecisionArgs),
    /// Model-less serving's variants (as INFaaS's Variant-Profiler records them): both tasks'
    /// architectures registered, int8 against fp32 latency and accuracy, latency by batch per
    /// variant family.
    #[command(name = "infaas-profiles")]
    InfaasProfiles(infaas_profiles::InfaasProfilesArgs),
    /// Model-less serving's cold start (why INFaaS prefers a loaded variant): a variant's first
    /// query, which loads it, against its warm queries and its profiled load + inference time.
    #[command(name = "infaas-cold-start")]
    InfaasColdStart(infaas_cold_start::InfaasColdStartArgs),
    /// INFaaS autoscaling (the paper's §6.2): model-less INFaaS against fixed-variant Clipper⁺ and
    /// replicating SM⁺ under flat-low, steady-high and fluctuating load on emulated executor
    /// types: SLO violations per 4 s, throughput per 2 s, cost; or INFaaS under a sweep of one
    /// autoscaler setting.
    #[command(name = "infaas-autoscale")]
    InfaasAutoscale(infaas_autoscale::InfaasAutoscaleArgs),
    /// INFaaS online and offline co-location (the paper's §6.3.2): online queries with an SLO and
    /// an offline job on one instance, each alone and together; the job pauses while the machine is
    /// busy.
    #[command(name = "infaas-offline")]
    InfaasOffline(infaas_offline::InfaasOfflineArgs),
    /// Network faults under steady load with request ids: an executor beside a local replica
    /// partitioned and healed, cut one way, flapping, throttled; a HAMS primary partitioned and
    /// healed, cut off from the front end only, and healed at its backup's promotion. Needs root
    /// and network namespaces.
    Faults(faults::FaultsArgs),
    /// `weir executor`, run from this binary: the executors the experiments start.
    #[command(hide = true)]
    Executor(weir::cli::ExecutorArgs),
    /// `weir serve`, run from this binary: the front ends the experiments start.
    #[command(hide = true)]
    Serve(weir::cli::ServeArgs),
}

impl Cli {
    /// Runs the experiment asked for.
    ///
    /// # Errors
    /// When the experiment cannot run (a model missing, an executor that does not start), or its
    /// measurements break a property the experiment checks (a request lost or answered twice).
    pub fn run(self) -> Result<()> {
        match self.experiment {
            Experiment::Overhead(a) => overhead::run(a),
            Experiment::Http(a) => http::run(a),
            Experiment::Grpc(a) => grpc::run(a),
            Experiment::PerfAnalyzer(a) => perf_analyzer::run(a),
            Experiment::Tls(a) => tls::run(a),
            Experiment::Tracing(a) => tracing::run(a),
            Experiment::Warmup(a) => warmup::run(a),
            Experiment::Ui(a) => ui::run(a),
            Experiment::UiPaths(a) => ui::run_paths(a),
            Experiment::Remote(a) => remote::run(a),
            Experiment::Parm(a) => parm::run(a),
            Experiment::ParmDecode(a) => parm_decode::run(a),
            Experiment::Serf(a) => serf::run(a),
            Experiment::KairosLive(a) => kairos_live::run(a),
            Experiment::Hams(a) => hams::run(a),
            Experiment::VariableLength(a) => variable_length::run(a),
            Experiment::BatchGrowth(a) => batch_growth::run(a),
            Experiment::Draft(a) => draft::run(a),
            Experiment::Pipeline(a) => pipeline::run(a),
            Experiment::InfaasDecision(a) => infaas_decision::run(a),
            Experiment::InfaasProfiles(a) => infaas_profiles::run(a),
            Experiment::InfaasColdStart(a) => infaas_cold_start::run(a),
            Experiment::InfaasAutoscale(a) => infaas_autoscale::run_cli(a),
            Experiment::InfaasOffline(a) => infaas_offline::run_cli(a),
            Experiment::Faults(a) => faults::run(a),
            Experiment::Executor(a) => weir::cli::run_executor(a),
            Experiment::Serve(a) => weir::cli::run_serve(a),
        }
    }
}

/// Draws a benchmark's plot at `path` with `draw` and says where it went, or why not. A plot that
/// cannot be drawn never loses the measurements printed and saved before it: a host without the
/// font library makes plotters' font loading panic, which is caught here. A failed drawing leaves
/// no file behind: the bitmap backend writes its blank canvas when dropped during the panic, and a
/// white PNG beside a table reads as a plot of nothing.
fn write_plot(path: &Path, draw: impl FnOnce(&Path) -> Result<()>) {
    let why = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| draw(path))) {
        Ok(Ok(())) => {
            println!("plot: {}", path.display());
            return;
        }
        Ok(Err(e)) => format!("{e:#}"),
        Err(_) => "drawing panicked (is the font library, fontconfig, installed?)".to_string(),
    };
    // Nothing to remove is the usual case when drawing failed before the canvas existed.
    let _ = std::fs::remove_file(path);
    eprintln!("no plot written ({}): {why}", path.display());
}

/// The cores this process may run on, as the reports quote them (0 when unknown).
fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// The ONNX Runtime build and the core count, the first lines of every benchmark's output;
/// `setting` (how much was measured, and how), when given, follows the core count, and a blank
/// line follows it.
fn print_machine(setting: Option<String>) -> Result<()> {
    println!("ONNX Runtime: {}", OrtRuntime::get()?.build_info());
    match setting {
        Some(setting) => println!("machine: {} cores; {setting}\n", machine_cores()),
        None => println!("machine: {} cores", machine_cores()),
    }
    Ok(())
}

/// The 1-minute load average (Linux), to show how busy the shared machine was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// The model an experiment measures: `--model NAME=PATH` when given, else `default()`.
fn model_or(
    model: Option<&str>,
    default: impl FnOnce() -> (String, PathBuf),
) -> Result<(String, PathBuf)> {
    match model {
        Some(m) => name_path(m),
        None => Ok(default()),
    }
}

/// The zoo's squeezenet: what the single-model serving experiments measure by default.
fn squeezenet() -> (String, PathBuf) {
    (
        "squeezenet".to_string(),
        crate::weir_home().join("zoo").join("squeezenet.onnx"),
    )
}

/// `NAME=PATH` as a model's display name and file.
fn name_path(m: &str) -> Result<(String, PathBuf)> {
    m.split_once('=')
        .map(|(n, p)| (n.to_string(), PathBuf::from(p)))
        .ok_or_else(|| anyhow!("--model takes NAME=PATH, got `{m}`"))
}

/// The models an experiment that compares several measures: `--model NAME=PATH`, repeated.
#[derive(Debug, Args)]
struct ModelsArg {
    /// Models, as NAME=PATH (default: the zoo's squeezenet and resnet50 under .weir/zoo).
    #[arg(long = "model")]
    models: Vec<String>,
}

impl ModelsArg {
    /// The `--model NAME=PATH` list, or the zoo's squeezenet and resnet50 when none is given.
    fn parse(&self) -> Result<Vec<(String, PathBuf)>> {
        self.parse_or(crate::http::default_models)
    }

    /// The `--model NAME=PATH` list, or `default()` when none is given.
    fn parse_or(&self, default: fn() -> Vec<(String, PathBuf)>) -> Result<Vec<(String, PathBuf)>> {
        if self.models.is_empty() {
            return Ok(default());
        }
        self.models.iter().map(|m| name_path(m)).collect()
    }
}
