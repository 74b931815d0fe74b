//! A stateful node's state version as its holder keeps and ships it: the whole state (one tensor
//! set for the node) or a table of sequences, and the update a batch sends a backup.
//!
//! A whole state ships whole after every batch (little-endian f32 of every state tensor in
//! `state:` order). A table ships whole only in a whole-state transfer (a new backup); after a
//! batch only its delta goes, since a batch steps a few of possibly many sequences. Decoding
//! reads network bytes and checks every length against the node's layout.

use std::sync::Arc;

use weir_hams::protocol::{f32_bytes, value_hash, StateTensor};
use weir_hams::sequences::SequenceLayout;

use super::sequences::codec::{decode_delta, decode_table, encode_delta, encode_table};
use super::sequences::{SequenceDelta, SequenceTable};

/// A whole state's version: one vector per state tensor, in `state:` order.
pub type StateVersion = Vec<Vec<f32>>;

/// One version of a node's state.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeState {
    /// One state for the node: per state tensor, its values.
    Whole(StateVersion),
    /// One state per sequence.
    Sequences(SequenceTable),
}

/// What a backup receives for one version.
#[derive(Debug, Clone, PartialEq)]
pub enum StateUpdate {
    /// The version itself.
    Replace(Arc<NodeState>),
    /// What the version's batch changed in a table of sequences.
    Delta(Arc<SequenceDelta>),
}

impl NodeState {
    /// The state before any batch: zeros, or no sequences.
    pub fn initial(tensors: &[StateTensor], sequences: Option<&SequenceLayout>) -> NodeState {
        match sequences {
            Some(_) => NodeState::Sequences(SequenceTable::default()),
            None => NodeState::Whole(tensors.iter().map(|s| vec![0.0; s.len()]).collect()),
        }
    }

    /// The version's bytes (canonical: equal states, equal bytes).
    pub fn encode(&self) -> Vec<u8> {
        match self {
            NodeState::Whole(tensors) => {
                let flat: Vec<f32> = tensors.iter().flatten().copied().collect();
                f32_bytes(&flat)
            }
            NodeState::Sequences(table) => encode_table(table),
        }
    }

    /// The version's identity in the journal: a hash of its bytes.
    pub fn hash(&self) -> u64 {
        value_hash(&self.encode())
    }
}

impl StateUpdate {
    /// The update's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            StateUpdate::Replace(state) => state.encode(),
            StateUpdate::Delta(delta) => encode_delta(delta),
        }
    }

    /// Reads an update of a node whose state tensors are `tensors` (per-sequence as `sequences`
    /// says); `full` marks a whole-state transfer, which a per-sequence node sends as a table and
    /// otherwise as a delta.
    ///
    /// # Errors
    /// When the bytes are not such an update.
    pub fn decode(
        bytes: &[u8],
        full: bool,
        tensors: &[StateTensor],
        sequences: Option<&SequenceLayout>,
    ) -> Result<StateUpdate, String> {
        let sizes: Vec<usize> = tensors.iter().map(StateTensor::len).collect();
        match sequences {
            Some(layout) if full => decode_table(bytes, &sizes, layout.max_sequences)
                .map(|t| StateUpdate::Replace(Arc::new(NodeState::Sequences(t))))
                .map_err(|e| e.to_string()),
            Some(layout) => decode_delta(bytes, &sizes, layout.max_sequences)
                .map(|d| StateUpdate::Delta(Arc::new(d)))
                .map_err(|e| e.to_string()),
            None => whole(bytes, &sizes).map(|s| StateUpdate::Replace(Arc::new(s))),
        }
    }

    /// The version this update makes from `current` (the version before it).
    pub fn apply(&self, current: &Arc<NodeState>) -> Arc<NodeState> {
        match (self, current.as_ref()) {
            (StateUpdate::Replace(state), _) => Arc::clone(state),
            (StateUpdate::Delta(delta), NodeState::Sequences(table)) => {
                Arc::new(NodeState::Sequences(table.with_delta(delta)))
            }
            // A delta only ever follows a table (decoded by the same layout).
            (StateUpdate::Delta(delta), NodeState::Whole(_)) => Arc::new(NodeState::Sequences(
                SequenceTable::default().with_delta(delta),
            )),
        }
    }
}

/// A whole state: little-endian f32, exactly the tensors' elements.
fn whole(bytes: &[u8], sizes: &[usize]) -> Result<NodeState, String> {
    let total = sizes
        .iter()
        .try_fold(0usize, |t, n| t.checked_add(n.checked_mul(4)?))
        .ok_or("the state's size overflows")?;
    if bytes.len() != total {
        return Err(format!(
            "a state of {} bytes for tensors of {total}",
            bytes.len()
        ));
    }
    let mut values = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    Ok(NodeState::Whole(
        sizes
            .iter()
            .map(|&n| values.by_ref().take(n).collect())
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stateful::sequences::Entry;

    fn tensors() -> Vec<StateTensor> {
        vec![
            StateTensor {
                input: "a".into(),
                output: "a_out".into(),
                shape: vec![2],
            },
            StateTensor {
                input: "b".into(),
                output: "b_out".into(),
                shape: vec![1, 3],
            },
        ]
    }

    #[test]
    fn a_whole_state_round_trips_and_a_wrong_length_is_refused() {
        let s = NodeState::Whole(vec![vec![1.0, 2.0], vec![3.0, 4.0, 5.0]]);
        let update = StateUpdate::Replace(Arc::new(s.clone()));
        let back = StateUpdate::decode(&update.encode(), false, &tensors(), None).unwrap();
        assert_eq!(back, update);
        let short = &update.encode()[4..];
        assert!(StateUpdate::decode(short, false, &tensors(), None).is_err());
    }

    #[test]
    fn a_delta_applies_onto_the_table_before_it() {
        let layout = SequenceLayout {
            batch_axis: 0,
            initial: Vec::new(),
            idle_timeout_ms: 10,
            max_sequences: 4,
        };
        let entry = Arc::new(Entry {
            state: vec![vec![1.0, 2.0], vec![3.0, 4.0, 5.0]],
            last_used_ms: 3,
        });
        let mut table = SequenceTable::default();
        table.insert("a".into(), Arc::clone(&entry));
        let before = Arc::new(NodeState::Sequences(table));
        let delta = StateUpdate::Delta(Arc::new(SequenceDelta {
            removed: vec!["a".into()],
            set: vec![("b".into(), entry)],
        }));
        let bytes = delta.encode();
        let back = StateUpdate::decode(&bytes, false, &tensors(), Some(&layout)).unwrap();
        let after = back.apply(&before);
        let NodeState::Sequences(t) = after.as_ref() else {
            panic!("a table");
        };
        assert!(t.get("a").is_none() && t.get("b").is_some());
        let full = StateUpdate::Replace(Arc::clone(&after));
        let whole_back = StateUpdate::decode(&full.encode(), true, &tensors(), Some(&layout));
        assert_eq!(whole_back, Ok(full));
        assert_eq!(after.hash(), NodeState::clone(&after).hash());
    }
}
