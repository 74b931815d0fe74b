//! The NSPB messages and their framing: a JSON header followed by raw payload bytes (Arrow IPC for
//! batch columns, little-endian tensor data for state), so headers stay readable in traces and
//! payloads are never re-encoded.
//!
//! Keys (zenoh): the graph runs batches on `<executor>/hams/<node>/run` (query), assigns roles on
//! `<executor>/hams/<node>/assign` (query); a primary ships state tuples to
//! `<backup>/hams/<node>/state` and its backup answers on `<primary>/hams/<node>/applied`; backups
//! (and solo primaries) announce durability on `weir/hams/<graph>/durable/<node>`.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use crate::sequences::{RowRefusal, SequenceControls, SequenceLayout};
use crate::{Epoch, NodeId, Seq};

/// Errors decoding a frame.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header length says.
    #[error("frame truncated: {0}")]
    Truncated(String),
    /// The header is not the expected JSON.
    #[error("frame header: {0}")]
    Header(#[from] serde_json::Error),
}

/// `[u32 LE header length][JSON header][payload]`.
pub fn encode_frame<H: Serialize>(header: &H, payload: &[u8]) -> Vec<u8> {
    let head = serde_json::to_vec(header).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + head.len() + payload.len());
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out
}

/// Splits a frame into its header and payload.
///
/// # Errors
/// When the frame is truncated or its header is not an `H`.
pub fn decode_frame<H: DeserializeOwned>(bytes: &[u8]) -> Result<(H, &[u8]), FrameError> {
    let Some(len) = bytes.get(..4) else {
        return Err(FrameError::Truncated(format!(
            "{} bytes, no header length",
            bytes.len()
        )));
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    let Some(head) = bytes.get(4..4 + len) else {
        return Err(FrameError::Truncated(format!(
            "header of {len} bytes, frame of {}",
            bytes.len()
        )));
    };
    Ok((serde_json::from_slice(head)?, &bytes[4 + len..]))
}

/// A dependency of a batch: every row of it has passed `node` at a state version ≤ `seq`.
pub type Dep = (NodeId, Seq);

/// Graph → primary: run batch `seq` (payload: the input columns, Arrow IPC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunHeader {
    /// The primary's epoch the graph believes current; another epoch is refused (fencing).
    pub epoch: Epoch,
    /// The batch's sequence number: it makes state version `seq` from version `seq - 1`.
    pub seq: Seq,
    /// Per upstream stateful node, the highest state version any row of the batch depends on.
    pub deps: Vec<Dep>,
    /// The rows' request ids (journal only).
    pub request_ids: Vec<u64>,
    /// A per-sequence node's batch: which sequence each row steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequences: Option<SequenceControls>,
}

/// Primary → graph: the batch's outputs (payload: output columns, Arrow IPC, one row per row
/// sent; a refused row's outputs are zeros).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReply {
    /// Epoch of the primary that ran it.
    pub epoch: Epoch,
    /// The batch.
    pub seq: Seq,
    /// A per-sequence node's rows that were not run, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RowRefusal>,
}

/// Why a member refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The call's epoch is not the member's, or the member is not primary.
    Fenced,
    /// The payload could not be decoded or did not fit the model.
    Invalid,
    /// The model failed.
    Inference,
    /// No such stateful model here.
    UnknownModel,
    /// A control message without a valid signature under the member's control key.
    Unauthenticated,
}

/// The body of a refused call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusalReply {
    /// Why.
    pub refusal: Refusal,
    /// For people.
    pub message: String,
}

/// Primary → backup: the state a batch made and the batch's reply (payload: the state,
/// `state_bytes` long, then the reply frame the graph got). A node's state is its state tensors,
/// little-endian f32 in the node's `state:` order; a per-sequence node's is its table of
/// sequences, whole when `full`, otherwise only what the batch changed (the executor's encoding). The backup keeps recent replies so that, once promoted, it answers a resent batch
/// it already holds instead of running it again (HAMS's saved outputs). `full` marks a
/// whole-state transfer to a new backup, applied once its dependencies are durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateHeader {
    /// Primary's epoch.
    pub epoch: Epoch,
    /// The state version.
    pub seq: Seq,
    /// What the batch depends on (Algorithm 2 waits for each to be durable).
    pub deps: Vec<Dep>,
    /// The rows' request ids (journal only).
    pub request_ids: Vec<u64>,
    /// Hash of each row's outputs, in `request_ids` order (journal only).
    pub row_hashes: Vec<u64>,
    /// A whole-state transfer (re-protection), not one batch's state.
    pub full: bool,
    /// Length of the state part of the payload.
    pub state_bytes: usize,
}

/// Backup → primary: state `seq` is applied (the primary may free older snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// Backup's epoch.
    pub epoch: Epoch,
    /// Applied state version.
    pub seq: Seq,
}

/// Backup (or solo primary) → everyone: `node`'s states up to `seq` are durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durable {
    /// The node.
    pub node: NodeId,
    /// Epoch of the announcing member.
    pub epoch: Epoch,
    /// Highest durable state version.
    pub seq: Seq,
}

/// A member's role for one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Runs batches; ships state to `backup` (solo when `None`).
    Primary {
        /// The backup's executor name.
        backup: Option<String>,
    },
    /// Applies the primary's states.
    Backup {
        /// The primary's executor name.
        primary: String,
    },
}

/// How the primary treats its backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// No backup and no durability announcements.
    None,
    /// Non-stop primary-backup.
    Nspb,
    /// Stop-and-buffer: a batch is answered after its state is applied on the backup.
    Remus,
    /// Checkpoints: the whole state goes to the backup every `checkpoint_every` batches; the
    /// graph replays what followed after a failover.
    Checkpoint,
}

/// One state tensor of a stateful model (f32): fed to `input`, read back from `output` after each
/// call. The graph's validated plan, the manager's assignments and the executors all use this one
/// description.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateTensor {
    /// Model input fed with it.
    pub input: String,
    /// Model output it is read back from.
    pub output: String,
    /// Full shape.
    pub shape: Vec<usize>,
}

impl StateTensor {
    /// Elements in the tensor.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A model input fed the same value on every call (`constants:` on the node), like a sample
/// rate; its element type and shape are the model's (one element).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstantInput {
    /// The model input.
    pub name: String,
    /// Its value, converted to the input's element type.
    pub value: f64,
}

/// Manager → member: take `role` at `epoch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assign {
    /// The graph (durability key).
    pub graph: String,
    /// The node's lineage id.
    pub node_id: NodeId,
    /// Epoch of the role.
    pub epoch: Epoch,
    /// The role.
    pub role: Role,
    /// Protocol.
    pub mode: Mode,
    /// The state tensors (f32), in `state:` order.
    pub state: Vec<StateTensor>,
    /// Model inputs the run payload carries, in the model's order (state inputs excluded).
    pub inputs: Vec<String>,
    /// Model outputs returned per batch, in order (state outputs excluded).
    pub outputs: Vec<String>,
    /// Under [`Mode::Checkpoint`]: batches between two state copies.
    #[serde(default)]
    pub checkpoint_every: u64,
    /// With a primary role for the member that already is primary: go back to the retained
    /// state at this version, or at the member's own durable version when that is later (the
    /// primary buffer rule, for a node whose speculative input is rolled back and whose backup is
    /// gone). Later versions, and the replies they made, are void.
    #[serde(default)]
    pub rollback_to: Option<Seq>,
    /// Model inputs fed the same value on every call (not in `inputs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<ConstantInput>,
    /// A per-sequence node: how it keeps its sequences (the state tensors' shapes are then one
    /// sequence's). `None`: one state for the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequences: Option<SequenceLayout>,
    /// HMAC-SHA256 (hex) of the other fields and the member's assign key, under the control key
    /// shared by the graph and its executors (see [`crate::control_auth`]); `None` unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Member → manager: the role is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignReply {
    /// The member's highest applied state version (a promoted backup's cut).
    pub applied: Seq,
    /// Its epoch now.
    pub epoch: Epoch,
}

/// The durability key of `node` in `graph`.
pub fn durable_key(graph: &str, node: NodeId) -> String {
    format!("weir/hams/{graph}/durable/{node}")
}

/// The key every durability announcement of `graph` matches.
pub fn durable_key_all(graph: &str) -> String {
    format!("weir/hams/{graph}/durable/*")
}

/// A member's key for `what` (`run`, `assign`, `state`, `applied`) of `node`.
pub fn member_key(executor_prefix: &str, node: &str, what: &str) -> String {
    format!("{executor_prefix}/hams/{node}/{what}")
}

/// f32 values as little-endian bytes.
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 4);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Little-endian bytes as f32 values (`None` when the length is not a multiple of 4).
pub fn f32_values(bytes: &[u8]) -> Option<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}

/// FNV-1a over bytes: the value hash the journal records (stable across processes and runs).
pub fn value_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_truncation() {
        let h = RunHeader {
            epoch: 3,
            seq: 7,
            deps: vec![(2, 5)],
            request_ids: vec![1, 2],
            sequences: None,
        };
        let bytes = encode_frame(&h, b"payload");
        let (back, payload): (RunHeader, &[u8]) = decode_frame(&bytes).unwrap();
        assert_eq!(back, h);
        assert_eq!(payload, b"payload");
        assert!(decode_frame::<RunHeader>(&bytes[..6]).is_err());
        assert!(decode_frame::<RunHeader>(&[1]).is_err());
    }

    #[test]
    fn state_bytes_round_trip() {
        let v = vec![1.5f32, -0.0, f32::MIN_POSITIVE];
        assert_eq!(f32_values(&f32_bytes(&v)).unwrap(), v);
        assert!(f32_values(&[0, 1, 2]).is_none());
        assert_ne!(value_hash(b"a"), value_hash(b"b"));
    }
}
