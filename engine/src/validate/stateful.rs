//! A stateful model node's `state:` and `replication:`, after "HAMS: High Availability for
//! Distributed Machine Learning Service Graphs" (HAMS, §IV).
//!
//! Rules:
//! - `state.inputs` and `state.outputs` have the same length (≥ 1); entry `i` of each names a model
//!   input and a model output of the same element type and the same fixed shape (the whole state,
//!   not a per-row tensor: a state has no batch dimension of its own), f32; under
//!   `state.per_sequence` the state has a batch axis instead (`sequences.rs`);
//! - a state input is not bound under `inputs:` (the previous call feeds it);
//! - `replication` needs `state`; its `detect_ms`, `pipeline` and `checkpoint_every` are ≥ 1;
//!   `nspb`, `remus` and `checkpoint` need exactly two replicas, both declared executors
//!   (`[primary, backup]`: the backup must live in another process to survive its primary);
//!   `none` runs on one replica, `local` or an executor;
//! - parity coding, routing policies and SERF parallelism do not apply to a stateful node (its
//!   batches are one totally ordered sequence of state versions, run by one primary).

use super::node_path;
use super::placement::Replica;
use super::types::fixed_shape;
use super::Validator;
use crate::diagnostic::Diagnostic;
use crate::onnx::{ElementType, ModelMetadata, TensorInfo};
use crate::spec::{ModelSpec, ReplicationMode, Spanned};
use crate::tensor::DType;

impl Validator<'_, '_> {
    /// Checks `state:` and `replication:` of node `id` against its model's signature `meta` and its
    /// resolved replicas.
    pub(super) fn check_state(&mut self, id: &str, m: &ModelSpec, meta: &ModelMetadata) {
        let replicas = self.replicas.of(id);
        let diags = &mut self.diags;
        super::constants::check_constants(id, m, meta, diags);
        let Some(state) = &m.state else {
            if let Some(r) = &m.replication {
                diags.push(
                    Diagnostic::error(
                        node_path(id, "replication"),
                        r.location,
                        format!("node `{id}`: `replication` protects a model's state, but the node has no `state:`"),
                    )
                    .with_help("name the state tensors with `state: {inputs: [...], outputs: [...]}`, or remove `replication`"),
                );
            }
            return;
        };
        let err = |diags: &mut Vec<Diagnostic>, field: &str, loc, msg: String| {
            diags.push(Diagnostic::error(node_path(id, field), loc, msg));
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
            return;
        }
        let mut pairs = Vec::new();
        for (i, o) in state.inputs.iter().zip(&state.outputs) {
            let Some(input) = state_tensor(id, &meta.inputs, i, "input", diags) else {
                continue;
            };
            let Some(output) = state_tensor(id, &meta.outputs, o, "output", diags) else {
                continue;
            };
            if m.inputs.contains_key(&i.value) {
                err(diags, "inputs", i.location, format!("node `{id}`: `{}` is a state input, fed by the previous call's `{}`; it cannot also be bound under `inputs`", i.value, o.value));
            }
            if state.per_sequence.is_some() {
                pairs.push((input, output));
                continue;
            }
            let (Some(in_shape), Some(out_shape)) =
                (fixed_shape(&input.dims), fixed_shape(&output.dims))
            else {
                err(diags, "state", i.location, format!("node `{id}`: state tensors `{}` and `{}` need fully fixed shapes (a state is one tensor, not one per row)", i.value, o.value));
                continue;
            };
            match (input.element, output.element) {
                (ElementType::Supported(a), ElementType::Supported(b))
                    if a == b && a != DType::F32 =>
                {
                    err(diags, "state", i.location, format!("node `{id}`: state tensors `{}` and `{}` are {a}; weir carries f32 state", i.value, o.value));
                }
                (ElementType::Supported(a), ElementType::Supported(b))
                    if a == b && in_shape == out_shape => {}
                _ => err(diags, "state.outputs", o.location, format!("node `{id}`: state output `{}` must have the type and shape of state input `{}` ({:?} {:?} vs {:?} {:?})", o.value, i.value, output.element, out_shape, input.element, in_shape)),
            }
        }
        if let Some(per) = &state.per_sequence {
            super::sequences::check_per_sequence(id, m, per, &pairs, meta, diags);
        }
        let settings = m.replication_settings();
        let mode = settings.mode.value;
        let where_ = m
            .replication
            .as_ref()
            .map_or(state.location, |r| r.location);
        if settings.detect_ms == 0 || settings.pipeline == 0 || settings.checkpoint_every == 0 {
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
                .filter(|t| matches!(t, Replica::Executor(_)))
                .count();
            match mode {
                ReplicationMode::None if targets.len() != 1 => err(diags, "replicas", where_, format!("node `{id}`: a stateful node without replication runs on exactly one replica, got {}", targets.len())),
                ReplicationMode::Nspb | ReplicationMode::Remus | ReplicationMode::Checkpoint
                    if targets.len() != 2 || remote != 2 =>
                {
                    diags.push(
                        Diagnostic::error(
                            node_path(id, "replicas"),
                            where_,
                            format!("node `{id}`: `{}` replication needs exactly two replicas, both executors declared under `executors:` ([primary, backup]); got {}", mode.name(), targets.iter().map(|t| t.name().to_string()).collect::<Vec<_>>().join(", ")),
                        )
                        .with_help("start two `weir executor` processes serving this node's model and list them under `replicas:`"),
                    );
                }
                _ => {}
            }
        }
    }
}

/// The model tensor `name` names among `tensors` (the model's inputs or outputs, as `what` says),
/// or an error at `state.<what>s`.
fn state_tensor<'t>(
    id: &str,
    tensors: &'t [TensorInfo],
    name: &Spanned<String>,
    what: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<&'t TensorInfo> {
    let found = tensors.iter().find(|t| t.name == name.value);
    if found.is_none() {
        let names: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
        diags.push(Diagnostic::error(
            node_path(id, &format!("state.{what}s")),
            name.location,
            format!(
                "node `{id}`: the model has no {what} `{}` (its {what}s are: {})",
                name.value,
                names.join(", ")
            ),
        ));
    }
    found
}
