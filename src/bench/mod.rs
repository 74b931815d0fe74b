//! Benchmark experiments that run inside the `weir` binary (`weir bench ...`), so they measure the
//! same code and the same ONNX Runtime library as `weir run` and `weir serve`, with their reference
//! measured in the same process and the same run.
//!
//! - [`overhead`]: the in-process path against bare ONNX Runtime.
//! - [`http`]: `weir serve` over HTTP (JSON and binary bodies) against the in-process path and bare
//!   ONNX Runtime, across client concurrency.
//! - [`remote`]: a model node on a `weir executor` process over zenoh against in-process, and
//!   the time from an executor's SIGKILL to its work moving.
//! - [`kairos_live`]: Kairos routing against round robin, least outstanding and the best
//!   homogeneous pool at one budget, on executors of emulated instance types.
//! - [`hams`]: HAMS's normal-case cost (NSPB, Remus-like, none) and stateful failover time.
//! - [`hams_divergence`]: released outputs a checkpoint replay contradicts under
//!   non-determinism, per checkpoint interval, against NSPB (X7).
//! - [`parm`]: tail latency with a hiccuping replica, with and without ParM parity coding.
//! - [`serf`]: SERF's M/D_interf/c predictions against measured mean latency on ONNX Runtime,
//!   per fixed configuration and load.
//! - [`serf_phases`]: SERF's live parallelism switch against every fixed configuration under
//!   moderate → low → moderate load.
//! - [`conditions`]: what the machine and the executors did while a benchmark measured.

pub mod conditions;
pub mod hams;
pub mod hams_divergence;
pub mod http;
pub mod kairos_live;
pub mod overhead;
pub mod parm;
pub mod plot;
pub mod remote;
pub mod serf;
pub mod serf_phases;

/// Where `scripts/setup.sh` put its files: `$WEIR_HOME`, else `.weir` under the working directory.
pub fn weir_home() -> std::path::PathBuf {
    std::env::var_os("WEIR_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(".weir"))
}
