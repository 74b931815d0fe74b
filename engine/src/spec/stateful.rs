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
//! With `per_sequence:` the node keeps one state per client sequence instead of one for the node
//! (Triton's sequence batcher with implicit state): each request names its sequence in its
//! parameters (`{"sequence_id": 7, "sequence_start": true}`, `sequence_end` on its last request),
//! and the rows of several sequences in one call are stacked along the state's batch axis:
//!
//! ```yaml
//!     state:
//!       inputs: [state]
//!       outputs: [stateN]
//!       per_sequence:
//!         batch_axis: 1            # state [2, batch, 128]: sequences stack on axis 1
//!         initial: zeros           # or {values: {state: [...]}}, one sequence's values
//!         idle_timeout_ms: 60000   # a sequence not stepped this long is dropped
//!         max_sequences: 1024      # a start past this many live sequences is refused (429)
//! ```
//!
//! A graph input may be filled by weir from the same parameters instead of sent by the client
//! (Triton's sequence control tensors: `START`, `END`, `READY`, `CORRID`), so a model that reads
//! them runs as Triton's sequence batcher would call it:
//!
//! ```yaml
//! inputs:
//!   - {name: x, dtype: f32, shape: [4]}
//!   - {name: start, dtype: f32, shape: [1], sequence: {control: start, false_true: [0, 1]}}
//!   - {name: corrid, dtype: u64, shape: [1], sequence: {control: id}}
//! ```
//!
//! Only the shape is read here; [`crate::validate`] checks the meaning.

use std::collections::BTreeMap;

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
    /// Keep one state per client sequence (named by each request's `parameters.sequence_id`)
    /// instead of one for the node.
    #[serde(default)]
    pub per_sequence: Option<Spanned<PerSequenceSpec>>,
}

/// How a per-sequence node keeps its sequences. The rows of up to `batching.max_size` requests
/// (of different sequences, or later steps of one) make a batch; each sequence's requests run in
/// the order they reach the node, so a client sends a sequence's next request once the last is
/// answered (as Triton's clients do), and sends one row per request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerSequenceSpec {
    /// The axis of the state tensors along which the model stacks the rows of one call (the
    /// model's dimension there is dynamic or 1); one sequence's state has 1 there.
    pub batch_axis: Spanned<usize>,
    /// A sequence's state at `sequence_start`: `zeros` (default) or `{values: {<state input>:
    /// [...]}}`, one sequence's values per state input (row-major, the state's shape with 1 on
    /// the batch axis); state inputs left out start at zeros.
    #[serde(default)]
    pub initial: Spanned<InitialState>,
    /// A sequence not stepped for this long is dropped (checked when a batch comes), in
    /// milliseconds; a later request naming it without `sequence_start` is refused.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: Spanned<u64>,
    /// The most sequences held at once; a `sequence_start` of a new sequence past it is refused
    /// with 429 (Too Many Requests) until one ends or times out.
    #[serde(default = "default_max_sequences")]
    pub max_sequences: Spanned<usize>,
}

fn default_idle_timeout_ms() -> Spanned<u64> {
    Spanned::unlocated(60_000)
}

fn default_max_sequences() -> Spanned<usize> {
    Spanned::unlocated(1024)
}

/// A sequence's state when it starts.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InitialState {
    /// Every element zero.
    #[default]
    Zeros,
    /// Per state input, one sequence's values (row-major); state inputs left out are zeros.
    Values(BTreeMap<String, Vec<f32>>),
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

/// A graph input weir fills from each request's sequence parameters (`parameters.sequence_id`,
/// `sequence_start`, `sequence_end`) instead of taking it from the client.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequenceInputSpec {
    /// What the input holds.
    pub control: SequenceControl,
    /// A flag's value when false and when true, in the input's dtype (`bool` inputs may leave
    /// it out: false and true); not given for `id`.
    #[serde(default)]
    pub false_true: Option<[f64; 2]>,
}

/// What a sequence control input holds for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SequenceControl {
    /// True on the request that starts its sequence (`sequence_start: true`).
    Start,
    /// True on the request that ends its sequence (`sequence_end: true`).
    End,
    /// True on every request (each row weir runs is a real request).
    Ready,
    /// The sequence's id: an integer input takes a numeric id, a `bytes` input any id.
    Id,
}
