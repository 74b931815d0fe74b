//! The control plane's dynamic facts (paper §3.5 (b), §4.2): what is loaded where, how loaded
//! each instance and worker is, and the state each instance is in.
//!
//! Workers (executors: this process's own, or `weir executor` processes) report load; instance
//! lifecycle (load started, loaded, unloaded, failed) comes from whoever loads variants. These are
//! the metadata store's inputs; the states are derived from them, never set directly.

use serde::{Deserialize, Serialize};

/// An instance's state (paper Figure 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Not loaded on this worker.
    Inactive,
    /// Loaded, serving below its saturation throughput, at its profiled latency.
    Active,
    /// Serving at its saturation throughput.
    Overloaded,
    /// Not overloaded, but slower than its profile (contention with co-located work).
    Interfered,
}

/// A worker (an executor) that can hold instances.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Worker {
    /// Its id (the executor's name).
    pub id: String,
    /// Its executor type (a variant's `config.hardware`).
    pub hardware: String,
}

/// What changes the control plane's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// A worker joined (its liveliness appeared).
    WorkerUp(Worker),
    /// A worker left or died.
    WorkerDown {
        /// Worker id.
        worker: String,
    },
    /// A worker's compute utilisation (0–1), sampled.
    WorkerLoad {
        /// Worker id.
        worker: String,
        /// Busy fraction of its cores.
        utilisation: f64,
    },
    /// A variant started loading on a worker.
    Loading {
        /// Variant name.
        variant: String,
        /// Worker id.
        worker: String,
    },
    /// A variant is loaded and serving on a worker.
    Loaded {
        /// Variant name.
        variant: String,
        /// Worker id.
        worker: String,
    },
    /// A variant was unloaded from a worker, or its load failed.
    Unloaded {
        /// Variant name.
        variant: String,
        /// Worker id.
        worker: String,
    },
    /// An instance's load over the last reporting interval.
    InstanceLoad {
        /// Variant name.
        variant: String,
        /// Worker id.
        worker: String,
        /// Requests per second served.
        qps: f64,
        /// Mean latency of a call, in milliseconds.
        mean_latency_ms: f64,
        /// Requests queued or running now.
        outstanding: u32,
    },
}
