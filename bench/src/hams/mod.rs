//! HAMS's normal-case cost and failover time on real executor processes.
//!
//! **Overhead.** Three scaled-down service graphs, each stateful node on executor processes: the
//! auto-pilot chain (stateless perception → two adjacent stateful GRUs → argmax), a single stateful
//! GRU last in the graph (nothing downstream overlaps its state delivery, so the second of the
//! HAMS paper's two conditions for a small overhead, §VI-B, fails), and an online learner with a
//! 1 MiB state (512 × 512 weights). Each runs under `none` (one executor per stateful node, no
//! backup: the reference), `nspb` and `remus` (stop-and-buffer), closed loop, and reports
//! throughput and latency percentiles as medians over repeats with ratios to `none` measured in the
//! same run.
//!
//! **Failover.** One stateful GRU under NSPB (and under Remus) with closed-loop load; its primary
//! is SIGKILLed (or, under NSPB, SIGSTOPped, so that only the detection timeout finds it) at a
//! random moment; per trial: *detection* (fault → the manager learns of it), *protocol*
//! (promotion, rollback, retries, resume) and *handover* (resume → the first reply after it), and
//! whether every request was answered once. Medians over the trials.
//!
//! Both parts also run the checkpoint-and-replay baseline (`replication: {mode: checkpoint}`:
//! replies at once, the whole state to the backup every `--checkpoint-every` batches, replay of
//! the batches since then after a failover). [`crate::hams_divergence`] measures what that
//! replay does to released outputs.
//!
//! The modules: `deployment` the executors and the graphs over them, `load` the closed-loop
//! client, `measure` the measurements, `table` their tables, `lineage` the lineage's cost.

mod deployment;
mod lineage;
mod load;
mod measure;
mod table;

use std::path::PathBuf;

use anyhow::{bail, Result};

pub(crate) use deployment::{stateful_node, Deployment, MemberExtras};
pub use lineage::lineage_cost;
pub(crate) use load::{closed_loop_of, median, start_graph};
pub use measure::{batch_sweep, failover, overhead, OverheadRow, Trial};
pub use table::{sweep_table, tables};

/// What `weir-bench hams` runs.
#[derive(Debug, Clone)]
pub struct HamsBenchConfig {
    /// The models folder (`.weir/models`).
    pub models: PathBuf,
    /// Requests per measurement.
    pub requests: usize,
    /// Closed-loop concurrency.
    pub concurrency: usize,
    /// Measurements per (graph, mode); medians are reported.
    pub repeats: usize,
    /// Failover trials per mode.
    pub trials: usize,
    /// Rows per batch at the stateful nodes.
    pub batch: usize,
    /// Emulated extra compute per batch at stateful nodes, ms.
    pub compute_ms: f64,
    /// Service graphs of the overhead part.
    pub services: Vec<Service>,
    /// Batches between two checkpoints in `checkpoint` mode.
    pub checkpoint_every: u64,
}

/// The service graphs measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// perception → motion (stateful) → route (stateful) → argmax.
    Autopilot,
    /// One stateful GRU, last in the graph.
    Tracker,
    /// An online learner with a 1 MiB state.
    Online,
}

impl Service {
    /// `autopilot`, `tracker` or `online`.
    ///
    /// # Errors
    /// On any other name.
    pub fn parse(name: &str) -> Result<Service> {
        match name.trim() {
            "autopilot" => Ok(Service::Autopilot),
            "tracker" => Ok(Service::Tracker),
            "online" => Ok(Service::Online),
            other => bail!("unknown service graph `{other}` (autopilot, tracker, online)"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Service::Autopilot => "auto-pilot chain (2 stateful)",
            Service::Tracker => "tracker (stateful last)",
            Service::Online => "online learner (1 MiB state)",
        }
    }

    /// (node, model file) of each stateful node.
    fn stateful(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Service::Autopilot => vec![("motion", "gru_stream.onnx"), ("route", "gru_chain.onnx")],
            Service::Tracker => vec![("track", "gru_stream.onnx")],
            Service::Online => vec![("learner", "online_wide.onnx")],
        }
    }
}
