//! A stateful model node's state layout and replication, after "HAMS: High Availability for
//! Distributed Machine Learning Service Graphs" (HAMS, §IV).
//!
//! Each `state:` pair becomes one state tensor with the fixed shape the model gives it (the whole
//! state, not a per-row tensor); under `per_sequence` the shape is one sequence's, the model's
//! with 1 on the batch axis, and the initial values are laid out per state tensor. Its replicas, in list order, are the primary and the backup. Under
//! `remus` at most one batch is in flight, since the primary answers a batch only once its backup
//! applied the state that batch made; under the other modes `pipeline` batches may be.

use std::time::Duration;

use crate::onnx::ModelMetadata;
use crate::spec::{InitialState, ModelSpec, ReplicationMode};
use crate::stateful::{
    one_sequence_shape, ConstantInput, SequenceLayout, StateTensor, StatefulNode,
};
use crate::validate::fixed_shape;

/// Model node `m`'s state and its replication, or `None` for a stateless node. Validation proved
/// every state pair names tensors of `meta` with one fixed shape (under `per_sequence`, fixed
/// but for the batch axis).
pub(super) fn stateful_node(m: &ModelSpec, meta: &ModelMetadata) -> Option<StatefulNode> {
    let state = m.state.as_ref()?;
    let axis = state.per_sequence.as_ref().map(|p| p.batch_axis.value);
    let tensors: Vec<StateTensor> = state
        .inputs
        .iter()
        .zip(&state.outputs)
        .filter_map(|(i, o)| {
            let input = meta.inputs.iter().find(|t| t.name == i.value)?;
            let shape = match axis {
                None => fixed_shape(&input.dims)?,
                Some(axis) => one_sequence_shape(&input.dims, axis)?,
            };
            Some(StateTensor {
                input: i.value.clone(),
                output: o.value.clone(),
                shape,
            })
        })
        .collect();
    let sequences = state.per_sequence.as_ref().map(|p| SequenceLayout {
        batch_axis: p.batch_axis.value,
        initial: match &p.initial.value {
            InitialState::Zeros => Vec::new(),
            InitialState::Values(values) => tensors
                .iter()
                .map(|t| {
                    values
                        .get(&t.input)
                        .cloned()
                        .unwrap_or_else(|| vec![0.0; t.len()])
                })
                .collect(),
        },
        idle_timeout_ms: p.idle_timeout_ms.value,
        max_sequences: p.max_sequences.value,
    });
    let settings = m.replication_settings();
    let mode = settings.mode.value;
    let constants = m
        .constants
        .iter()
        .map(|(name, v)| ConstantInput {
            name: name.clone(),
            value: v.value,
        })
        .collect();
    Some(StatefulNode {
        state: tensors,
        sequences,
        constants,
        mode,
        detect: Duration::from_millis(settings.detect_ms),
        pipeline: if mode == ReplicationMode::Remus {
            1
        } else {
            settings.pipeline
        },
        checkpoint_every: settings.checkpoint_every,
    })
}
