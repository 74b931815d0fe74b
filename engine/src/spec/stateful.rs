//! Stateful model nodes (HAMS): `state:` names the ONNX tensors that carry state from one call to
//! the next, `replication:` how that state survives the loss of its host.
//!
//! ```yaml
//! - model:
//!     id: tracker
//!     path: gru_stream.onnx
//!     inputs: {x: input}           # state inputs are not bound: the previous call feeds them
//!     state:
//!       inputs: [h_in]             # fed by the previous call's ...
//!       outputs: [h_out]           # ... output at the same position (zeros before the first call)
//!     replicas: [gru-a, gru-b]     # primary, backup (two declared executors)
//!     replication:
//!       mode: nspb                 # nspb (default) | remus | checkpoint | none
//!       detect_ms: 200             # a primary silent this long on a batch is declared failed
//! ```
//!
//! Only the shape is read here; [`crate::validate`] checks the meaning.

use serde::Deserialize;

use super::Spanned;

/// The tensors that carry a model's state between calls, paired by position.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateSpec {
    /// Model inputs fed with the previous call's state (zeros before the first call).
    pub inputs: Vec<Spanned<String>>,
    /// Model outputs holding the state after a call, one per entry of `inputs`, same type.
    pub outputs: Vec<Spanned<String>>,
}

/// How a stateful node's state is protected.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationSpec {
    /// The protocol.
    #[serde(default)]
    pub mode: Spanned<ReplicationMode>,
    /// How long the primary may take on one batch before the manager declares it failed and
    /// promotes its backup, in milliseconds. A killed primary is noticed sooner, when its
    /// zenoh session drops.
    #[serde(default = "default_detect_ms")]
    pub detect_ms: u64,
    /// Batches sent to the primary and not yet answered, at most (NSPB pipelines them: the
    /// state of batch n ships to the backup while batch n+1 computes).
    #[serde(default = "default_pipeline")]
    pub pipeline: usize,
    /// `checkpoint` mode: the state is copied to the backup every this many batches.
    #[serde(default = "default_checkpoint_every")]
    pub checkpoint_every: u64,
}

impl ReplicationSpec {
    /// The settings of a stateful node written without `replication:`: no backup, default timings.
    pub fn unreplicated() -> Self {
        ReplicationSpec {
            mode: Spanned::unlocated(ReplicationMode::None),
            detect_ms: default_detect_ms(),
            pipeline: default_pipeline(),
            checkpoint_every: default_checkpoint_every(),
        }
    }
}

fn default_checkpoint_every() -> u64 {
    150
}

fn default_detect_ms() -> u64 {
    250
}

fn default_pipeline() -> usize {
    4
}

/// A replication protocol for stateful nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicationMode {
    /// No backup: the state dies with its host (the baseline without fault tolerance).
    None,
    /// HAMS's non-stop primary-backup: outputs go downstream at once, the state ships to the
    /// backup while the next batch computes, replies wait until every state they depend on is
    /// applied on a backup.
    #[default]
    Nspb,
    /// Remus-like stop-and-buffer: the primary answers a batch only after its backup applied the
    /// state the batch made, one batch at a time.
    Remus,
    /// Checkpoint and replay (the Lineage-Stash-like baseline): replies go at once, the state is
    /// copied to the backup every `checkpoint_every` batches, and a promoted backup replays every
    /// batch since its checkpoint from the graph's log, so recovery takes the replay and a
    /// non-deterministic model may answer replayed requests differently from what it released.
    Checkpoint,
}

impl ReplicationMode {
    /// The YAML name.
    pub fn name(self) -> &'static str {
        match self {
            ReplicationMode::None => "none",
            ReplicationMode::Nspb => "nspb",
            ReplicationMode::Remus => "remus",
            ReplicationMode::Checkpoint => "checkpoint",
        }
    }
}
