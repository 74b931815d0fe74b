//! Stateful model nodes on the graph side: the proxy of each stateful node (what "HAMS: High
//! Availability for Distributed Machine Learning Service Graphs" calls its proxy's request
//! manager, §III-A), the timely operator that feeds it, and the transport it runs batches over.
//!
//! A stateful node's batches form one sequence of state versions: batch `n` turns version `n - 1`
//! into version `n`, run by the node's current primary. The [`proxy::StatefulNodeHandle`] numbers
//! batches, records each row's output until its reply leaves the graph (so a retried request that
//! already passed the node is answered from the record, never run twice), keeps the dependencies
//! of every batch not yet durable (for the rollback set), and is paused, rolled back and resumed
//! by the manager (`weir-hams-manager`) during a failover. The [`operator`] drops stale rows (superseded attempts),
//! replays recorded outputs, cuts the rest into batches and pipelines them to the primary.
//! [`local::LocalStatefulTransport`] runs an unreplicated stateful node in this process; the
//! zenoh transport to executor processes is `weir-executor`'s. A node may keep one state per
//! client sequence instead of one ([`sequences`]; the operator's side is [`sequence_rows`]); its
//! holder keeps either kind as a [`state::NodeState`]. [`step`] runs one call of a stateful model,
//! state in and state out, and [`sequence_step`] one call over rows of many sequences.

pub mod local;
pub mod metrics;
pub mod operator;
pub mod proxy;
pub mod sequence_rows;
pub(crate) mod sequence_step;
pub mod sequences;
pub mod state;
pub mod step;

pub use local::LocalStatefulTransport;
pub use operator::StatefulOperator;
pub use proxy::{Begin, ManagerLinks, ProxyStatus, StatefulNodeHandle, Suspicion, SuspicionSink};

use weir_engine::batch::TensorColumn;
use weir_hams::protocol::RunHeader;
use weir_hams::sequences::RowRefusal;

/// Why a batch got no outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunFailure {
    /// No answer from the primary (timeout, dead link) or the primary refused the epoch: the
    /// batch's fate is decided by failover.
    Lost(String),
    /// The model failed on the rows: they are answered with this error.
    Failed(String),
}

/// A batch's answer: its row outputs (in the node's output order, one row per row sent) and,
/// for a per-sequence node, the rows the state holder refused (their outputs are zeros).
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Row outputs.
    pub columns: Vec<TensorColumn>,
    /// Rows not run, and why.
    pub refused: Vec<RowRefusal>,
}

/// Called once with a batch's answer or its failure.
pub type RunDone = Box<dyn FnOnce(Result<RunOutput, RunFailure>) + Send>;

/// Runs a stateful node's batches on its primary.
pub trait StatefulTransport: Send + Sync {
    /// Sends batch `header.seq` (inputs in the node's input order) to `primary` (its executor key
    /// prefix, or `local`); `done` is called once, off any transport callback thread.
    fn run(
        &self,
        node: &StatefulNodeHandle,
        primary: &str,
        header: RunHeader,
        inputs: Vec<TensorColumn>,
        done: RunDone,
    );
}
