//! weir's experiment harnesses: each benchmark runs weir's own code (the `weir` library, and
//! `weir executor` processes where the experiment needs other hosts) against a reference measured
//! in the same process and the same run, and writes a table and a plot.
//!
//! - [`overhead`]: the in-process path against bare ONNX Runtime.
//! - [`http`]: `weir serve` over HTTP (JSON and binary bodies) against the in-process path and bare
//!   ONNX Runtime, across client concurrency.
//! - [`grpc`]: `weir serve` over gRPC against HTTP binary and bare ONNX Runtime, across client
//!   concurrency.
//! - [`perf_analyzer`]: Triton's perf_analyzer against `weir serve --model-repository`, HTTP and
//!   gRPC, beside bare ONNX Runtime.
//! - [`tls`]: `weir serve`'s HTTP path with TLS against without (binary bodies, keep-alive).
//! - [`trace_cost`]: `weir serve`'s HTTP path with tracing off against OTLP export at sampling
//!   0, 1 % and 100 %, the spans counted by a collector in the benchmark.
//! - [`warmup`]: the first request after a repository model is ready, with and without its
//!   `model_warmup`.
//! - [`ui`]: `weir serve`'s throughput with open dashboards (status-stream subscribers) against none.
//! - [`ui_paths`]: `weir serve`'s throughput and latency by share of request paths kept for the
//!   dashboard, against keeping none.
//! - [`remote`]: a model node on a `weir executor` process over zenoh against in-process, and
//!   the time from an executor's SIGKILL to its work moving.
//! - [`parm`]: ParM against the paper's equal-resources baseline with a straggling replica:
//!   squeezenet's tail and the coding cost; the digits MLP per decode rule and r, with and
//!   without the straggler (tail gap, fraction reconstructed, accuracy of all answers).
//! - [`serf`]: SERF's M/D_interf/c predictions against measured mean latency on ONNX Runtime,
//!   per fixed configuration and load.
//! - [`serf_phases`]: SERF's live parallelism switch against every fixed configuration under
//!   moderate → low → moderate load.
//! - [`kairos_live`]: Kairos routing against round robin, least outstanding and the best
//!   homogeneous pool at one budget, on executors of emulated instance types.
//! - [`hams`]: HAMS's normal-case cost (NSPB, Remus-like, checkpoints, none) and stateful
//!   failover time.
//! - [`hams_divergence`]: released outputs a checkpoint replay contradicts under
//!   non-determinism, per checkpoint interval, against NSPB.
//! - [`variable_length`]: requests of drawn sequence lengths, padded batching against no
//!   batching and batching of one length only.
//! - [`batch_growth`]: a CPU node's batches growing only while larger calls measured cheaper
//!   per row, against always growing to `max_size`, beside bare ONNX Runtime at each size.
//! - [`pipeline`]: the OCR service graph through `weir serve` against the same pipeline in
//!   Python (Pillow, numpy, onnxruntime), across client concurrency.
//! - [`infaas_decision`]: INFaaS's variant and worker decision time against a brute-force scan.
//! - [`infaas_cold_start`]: a model-less variant's first query (a cold start) against its warm
//!   ones.
//! - [`infaas_profiles`]: model-less serving's digits variants: int8 against fp32 latency and
//!   accuracy per architecture, latency by batch per variant family.
//! - [`infaas_autoscale`]: model-less INFaaS against fixed-variant baselines under three load
//!   shapes (SLO violations, throughput, cost), and sweeps of its autoscaler's settings.
//! - [`infaas_offline`]: online queries and an offline job on one instance, alone and together.
//! - [`faults`]: network faults under steady load (a partitioned, one-way cut, flapping or
//!   throttled executor link beside a local replica; a HAMS primary partitioned and healed):
//!   what clients saw, and the time to recover.
//! - [`conditions`]: what the machine and the executors did while a benchmark measured.
//! - [`plot`]: the figures; [`process`]: the executor processes; [`client`]: the HTTP client
//!   and closed loop the HTTP experiments share; [`cli`]: the command line.
//!
//! Why a crate of its own: the harnesses are the lab, not the product. Apart from `weir`, the
//! server does not carry their code or their plotting dependency, and the library's public items
//! are all they use. The binary is `weir-bench <experiment> [flags]`; `weir bench <experiment>`
//! still works and runs it with the same arguments, so both spell the same experiment the same
//! way. The workspace lists this crate in `default-members` and the root package sets
//! `default-run = "weir"`: `cargo build --release` builds both binaries side by side (which
//! `weir bench` needs), and `cargo run --release -- ...` still runs `weir`. The experiments that
//! start executors run them from this binary (a hidden `executor` subcommand running `weir
//! executor`'s code), so `cargo run -p weir-bench` alone is enough for every experiment. The canonical command is `cargo run --release -p weir-bench -- <experiment>`.

pub mod batch_growth;
pub mod cli;
pub mod client;
pub mod conditions;
pub mod draft;
pub mod faults;
pub mod grpc;
mod grpc_client;
pub mod hams;
pub mod hams_divergence;
pub mod http;
mod in_turn;
pub mod infaas_autoscale;
pub mod infaas_cold_start;
pub mod infaas_decision;
pub mod infaas_offline;
pub mod infaas_profiles;
pub mod kairos_live;
mod loopback;
pub mod overhead;
pub mod parm;
pub mod perf_analyzer;
pub mod pipeline;
pub mod plot;
pub mod process;
pub mod remote;
pub mod serf;
pub mod serf_phases;
mod shm_client;
pub mod threads;
pub mod tls;
pub mod trace_cost;
pub mod ui;
pub mod ui_paths;
pub mod variable_length;
pub mod warmup;

/// Where `scripts/setup.sh` put its files: `$WEIR_HOME`, else `.weir` under the working directory.
pub fn weir_home() -> std::path::PathBuf {
    std::env::var_os("WEIR_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(".weir"))
}
