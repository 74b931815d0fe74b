//! Per-sequence state on the wire: a stateful node may keep one state per client sequence instead
//! of one per node (Triton's sequence batcher with implicit state). The node's state is then a
//! table of sequences, and a batch's rows each name the sequence they step; the table is still one
//! state version per batch, so everything HAMS does with a node's versions (ship, apply, retain,
//! roll back) applies to it unchanged.
//!
//! What the graph decides and what the state holder decides are split so that a version depends
//! only on the previous version and the batch: the graph parses each row's request parameters into
//! a [`RowControl`] and stamps the batch with its clock ([`SequenceControls::now_ms`]); the member
//! holding the table decides, from the table and those controls alone, which rows it refuses
//! ([`RowRefusal`]: an unknown sequence, or no free slot) and which sequences time out.

use serde::{Deserialize, Serialize};

/// The longest sequence id, in bytes.
pub const MAX_SEQUENCE_ID_BYTES: usize = 256;

/// The most bytes of state a per-sequence node holds: every sequence's state tensors, at
/// `max_sequences` sequences.
pub const MAX_SEQUENCE_STATE_BYTES: usize = 1 << 30;

/// How a per-sequence node keeps its sequences, sent with every role assignment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequenceLayout {
    /// The axis of every state tensor along which the model stacks the sequences of one call;
    /// the state tensors' shapes (in the assignment) are one sequence's, with 1 on this axis.
    pub batch_axis: usize,
    /// One sequence's initial state: per state tensor, its values (row-major); empty for zeros.
    pub initial: Vec<Vec<f32>>,
    /// A sequence not stepped for this long is dropped when the next batch comes.
    pub idle_timeout_ms: u64,
    /// The most sequences held at once; a start past it is refused.
    pub max_sequences: usize,
}

/// The sequence part of one batch: the graph's clock when it sent the batch and one control per
/// row, in row order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceControls {
    /// Milliseconds on the graph's clock (idle timeouts are measured on it).
    pub now_ms: u64,
    /// Per row of the batch.
    pub rows: Vec<RowControl>,
}

impl SequenceControls {
    /// Checks controls received for a batch of `rows` rows: one per row, each id of 1 to
    /// [`MAX_SEQUENCE_ID_BYTES`] bytes.
    ///
    /// # Errors
    /// What is wrong, for the refusal.
    pub fn check(&self, rows: usize) -> Result<(), String> {
        if self.rows.len() != rows {
            return Err(format!(
                "{} sequence controls for {rows} rows",
                self.rows.len()
            ));
        }
        match self
            .rows
            .iter()
            .position(|r| r.id.is_empty() || r.id.len() > MAX_SEQUENCE_ID_BYTES)
        {
            Some(i) => Err(format!(
                "row {i}: a sequence id must hold 1 to {MAX_SEQUENCE_ID_BYTES} bytes"
            )),
            None => Ok(()),
        }
    }
}

/// Which sequence one row steps, as its request's parameters say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowControl {
    /// The sequence (`parameters.sequence_id`, a number written in decimal or a string).
    pub id: String,
    /// `parameters.sequence_start`: the row starts the sequence from its initial state.
    #[serde(default)]
    pub start: bool,
    /// `parameters.sequence_end`: the sequence is dropped after this row.
    #[serde(default)]
    pub end: bool,
}

/// A row the state holder did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowRefusal {
    /// The row, in the batch.
    pub row: u32,
    /// Why.
    pub reason: SequenceRefusal,
}

/// Why a row of a per-sequence node was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SequenceRefusal {
    /// The row names a sequence the node does not hold (never started, ended, or timed out) and
    /// does not start it.
    Unknown,
    /// The row starts a new sequence while `limit` sequences are held.
    Full {
        /// The node's `max_sequences`.
        limit: usize,
    },
}
