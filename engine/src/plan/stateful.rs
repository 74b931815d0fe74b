//! A stateful model node's state layout and replication, after "HAMS: High Availability for
//! Distributed Machine Learning Service Graphs" (HAMS, §IV).
//!
//! Each `state:` pair becomes one state tensor with the fixed shape the model gives it (the whole
//! state, not a per-row tensor). Its replicas, in list order, are the primary and the backup. Under
//! `remus` at most one batch is in flight, since the primary answers a batch only once its backup
//! applied the state that batch made; under the other modes `pipeline` batches may be.

use std::time::Duration;

use crate::onnx::ModelMetadata;
use crate::spec::{ModelSpec, ReplicationMode};
use crate::stateful::{StateTensor, StatefulNode};
use crate::validate::fixed_shape;

/// Model node `m`'s state and its replication, or `None` for a stateless node. Validation proved
/// every state pair names tensors of `meta` with one fixed shape.
pub(super) fn stateful_node(m: &ModelSpec, meta: &ModelMetadata) -> Option<StatefulNode> {
    let state = m.state.as_ref()?;
    let tensors = state
        .inputs
        .iter()
        .zip(&state.outputs)
        .filter_map(|(i, o)| {
            let input = meta.inputs.iter().find(|t| t.name == i.value)?;
            Some(StateTensor {
                input: i.value.clone(),
                output: o.value.clone(),
                shape: fixed_shape(&input.dims)?,
            })
        })
        .collect();
    let settings = m.replication_settings();
    let mode = settings.mode.value;
    Some(StatefulNode {
        state: tensors,
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
