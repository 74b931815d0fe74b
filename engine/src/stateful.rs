//! Stateful model nodes, as planned, after "HAMS: High Availability for Distributed Machine
//! Learning Service Graphs" (HAMS, §IV): which tensors carry a node's state from one call to the
//! next and how that state is replicated. The rules `state:` and `replication:` must meet are
//! checked by [`crate::validate`]; the protocol is `weir-hams`'s, run by the operators and the
//! executors.

use std::time::Duration;

use crate::spec::ReplicationMode;

pub use weir_hams::protocol::StateTensor;
pub use weir_hams::sequences::SequenceLayout;

/// A stateful model node's state and its protection.
#[derive(Debug, Clone, PartialEq)]
pub struct StatefulNode {
    /// The state tensors, in `state:` order: the node's whole state, or under `per_sequence` one
    /// sequence's (1 on the batch axis).
    pub state: Vec<StateTensor>,
    /// `per_sequence`: one state per client sequence, kept as this says; `None`: one state for
    /// the node.
    pub sequences: Option<SequenceLayout>,
    /// Replication protocol.
    pub mode: ReplicationMode,
    /// A primary silent this long on a batch is declared failed.
    pub detect: Duration,
    /// Batches sent to the primary and not yet answered, at most (1 under `remus`).
    pub pipeline: usize,
    /// Under `checkpoint`: batches between two state copies to the backup.
    pub checkpoint_every: u64,
}

impl StatefulNode {
    /// Whether a model input is a state input (fed by the previous call, not by the graph).
    pub fn is_state_input(&self, name: &str) -> bool {
        self.state.iter().any(|p| p.input == name)
    }

    /// Whether a model output is a state output (kept by the executor, not sent downstream).
    pub fn is_state_output(&self, name: &str) -> bool {
        self.state.iter().any(|p| p.output == name)
    }

    /// Whether the node's replies wait for its states to be durable (NSPB and Remus; a
    /// checkpointed node answers at once and replays after a failure).
    pub fn replicated(&self) -> bool {
        matches!(self.mode, ReplicationMode::Nspb | ReplicationMode::Remus)
    }

    /// Whether the node has a backup to fail over to.
    pub fn has_backup(&self) -> bool {
        self.mode != ReplicationMode::None
    }
}
