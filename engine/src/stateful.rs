//! Stateful model nodes after validation (HAMS, `../shared/notes/hams.md`): which tensors carry the
//! state, how it is replicated, and the rules that check a node's `state:` and `replication:`.
//!
//! Rules:
//! - `state.inputs` and `state.outputs` have the same length (≥ 1); entry `i` of each names a model
//!   input and a model output of the same element type and the same fixed shape (the whole state,
//!   not a per-row tensor: a state has no batch dimension of its own), f32;
//! - a state input is not bound under `inputs:` (the previous call feeds it);
//! - `replication` needs `state`; `nspb`, `remus` and `checkpoint` need exactly two replicas, both declared
//!   executors (`[primary, backup]`: the backup must live in another process); `none` runs on one
//!   replica, `local` or an executor;
//! - parity coding, routing policies and SERF parallelism do not apply to a stateful node (its
//!   batches are one totally ordered sequence of state versions, run by one primary).

use std::time::Duration;

use crate::diagnostic::Diagnostic;
use crate::onnx::{ElementType, ModelMetadata};
use crate::placement::ReplicaTarget;
use crate::spec::{ModelSpec, ReplicationMode};
use crate::tensor::{DType, Dim};

pub use weir_hams::protocol::StateTensor;

/// A stateful model node's state and its protection.
#[derive(Debug, Clone, PartialEq)]
pub struct StatefulNode {
    /// The state tensors, in `state:` order.
    pub state: Vec<StateTensor>,
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

/// The state tensor names a model spec declares: (inputs, outputs). Empty when not stateful.
pub fn declared_state(m: &ModelSpec) -> (Vec<&str>, Vec<&str>) {
    match &m.state {
        Some(s) => (
            s.inputs.iter().map(|n| n.value.as_str()).collect(),
            s.outputs.iter().map(|n| n.value.as_str()).collect(),
        ),
        None => (Vec::new(), Vec::new()),
    }
}

fn node_field(id: &str, field: &str) -> String {
    format!("nodes.{id}.{field}")
}

/// Checks `state:` and `replication:` of node `id` against its model's signature `meta` and its
/// resolved `replicas` (`None` when the list had errors, reported already). Returns `Some(None)`
/// for a stateless node, `None` when an error was reported.
pub fn check_state(
    id: &str,
    m: &ModelSpec,
    meta: &ModelMetadata,
    replicas: Option<&[ReplicaTarget]>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Option<StatefulNode>> {
    let Some(state) = &m.state else {
        if let Some(r) = &m.replication {
            diags.push(
                Diagnostic::error(
                    node_field(id, "replication"),
                    r.location,
                    format!("node `{id}`: `replication` protects a model's state, but the node has no `state:`"),
                )
                .with_help("name the state tensors with `state: {inputs: [...], outputs: [...]}`, or remove `replication`"),
            );
            return None;
        }
        return Some(None);
    };
    let before = diags.len();
    let err = |diags: &mut Vec<Diagnostic>, field: &str, loc, msg: String| {
        diags.push(Diagnostic::error(node_field(id, field), loc, msg));
    };
    if state.inputs.is_empty() || state.inputs.len() != state.outputs.len() {
        err(
            diags,
            "state",
            state.location,
            format!(
                "node `{id}`: `state` needs as many `outputs` as `inputs` (at least one), got {} and {}",
                state.inputs.len(),
                state.outputs.len()
            ),
        );
        return None;
    }
    let mut pairs = Vec::with_capacity(state.inputs.len());
    for (i, o) in state.inputs.iter().zip(&state.outputs) {
        let Some(input) = meta.inputs.iter().find(|t| t.name == i.value) else {
            let names: Vec<&str> = meta.inputs.iter().map(|t| t.name.as_str()).collect();
            err(
                diags,
                "state.inputs",
                i.location,
                format!(
                    "node `{id}`: the model has no input `{}` (its inputs are: {})",
                    i.value,
                    names.join(", ")
                ),
            );
            continue;
        };
        let Some(output) = meta.outputs.iter().find(|t| t.name == o.value) else {
            let names: Vec<&str> = meta.outputs.iter().map(|t| t.name.as_str()).collect();
            err(
                diags,
                "state.outputs",
                o.location,
                format!(
                    "node `{id}`: the model has no output `{}` (its outputs are: {})",
                    o.value,
                    names.join(", ")
                ),
            );
            continue;
        };
        if m.inputs.contains_key(&i.value) {
            err(diags, "inputs", i.location, format!("node `{id}`: `{}` is a state input, fed by the previous call's `{}`; it cannot also be bound under `inputs`", i.value, o.value));
        }
        let fixed = |dims: &[Dim]| -> Option<Vec<usize>> {
            dims.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => Some(*n),
                    Dim::Dynamic => None,
                })
                .collect()
        };
        let (Some(in_shape), Some(out_shape)) = (fixed(&input.dims), fixed(&output.dims)) else {
            err(diags, "state", i.location, format!("node `{id}`: state tensors `{}` and `{}` need fully fixed shapes (a state is one tensor, not one per row)", i.value, o.value));
            continue;
        };
        match (input.element, output.element) {
            (ElementType::Supported(a), ElementType::Supported(b))
                if a == b && a != DType::F32 =>
            {
                err(diags, "state", i.location, format!("node `{id}`: state tensors `{}` and `{}` are {a}; weir carries f32 state", i.value, o.value));
            }
            (ElementType::Supported(a), ElementType::Supported(b)) if a == b && in_shape == out_shape => {
                pairs.push(StateTensor {
                    input: i.value.clone(),
                    output: o.value.clone(),
                    shape: in_shape,
                });
            }
            _ => err(diags, "state.outputs", o.location, format!("node `{id}`: state output `{}` must have the type and shape of state input `{}` ({:?} {:?} vs {:?} {:?})", o.value, i.value, output.element, out_shape, input.element, in_shape)),
        }
    }
    let mode = m
        .replication
        .as_ref()
        .map_or(ReplicationMode::None, |r| r.mode.value);
    let (detect_ms, pipeline, checkpoint_every) =
        m.replication.as_ref().map_or((250, 4, 150), |r| {
            (
                r.value.detect_ms,
                r.value.pipeline,
                r.value.checkpoint_every,
            )
        });
    let where_ = m
        .replication
        .as_ref()
        .map_or(state.location, |r| r.location);
    if detect_ms == 0 || pipeline == 0 || checkpoint_every == 0 {
        err(
            diags,
            "replication",
            where_,
            format!(
                "node `{id}`: `detect_ms`, `pipeline` and `checkpoint_every` must be at least 1"
            ),
        );
    }
    for (given, field) in [
        (m.resilience.is_some(), "resilience"),
        (m.routing.is_some(), "routing"),
        (m.parallelism.is_some(), "parallelism"),
    ] {
        if given {
            err(diags, field, state.location, format!("node `{id}`: `{field}` does not apply to a stateful node (its batches form one ordered sequence of state versions, run by one primary)"));
        }
    }
    if let Some(targets) = replicas {
        let remote = targets
            .iter()
            .filter(|t| matches!(t, ReplicaTarget::Remote(_)))
            .count();
        match mode {
            ReplicationMode::None if targets.len() != 1 => err(diags, "replicas", where_, format!("node `{id}`: a stateful node without replication runs on exactly one replica, got {}", targets.len())),
            ReplicationMode::Nspb | ReplicationMode::Remus | ReplicationMode::Checkpoint
                if targets.len() != 2 || remote != 2 =>
            {
                diags.push(
                    Diagnostic::error(
                        node_field(id, "replicas"),
                        where_,
                        format!("node `{id}`: `{}` replication needs exactly two replicas, both executors declared under `executors:` ([primary, backup]); got {}", mode.name(), targets.iter().map(|t| t.name().to_string()).collect::<Vec<_>>().join(", ")),
                    )
                    .with_help("start two `weir executor` processes serving this node's model and list them under `replicas:`"),
                );
            }
            _ => {}
        }
    }
    if diags.len() > before {
        return None;
    }
    Some(Some(StatefulNode {
        state: pairs,
        mode,
        detect: Duration::from_millis(detect_ms),
        pipeline: if mode == ReplicationMode::Remus {
            1
        } else {
            pipeline
        },
        checkpoint_every,
    }))
}
