//! `state.per_sequence`: a stateful node that keeps one state per client sequence, its sequences
//! stacked along one axis of the state tensors in each call (Triton's sequence batcher with
//! implicit state).
//!
//! Rules:
//! - every state input has the batch axis (`batch_axis` < its rank), dynamic or 1 there, every
//!   other dimension fixed; its state output has the same rank, each dimension the input's or
//!   dynamic (checked again on every call), and both are f32;
//! - the node has a batch dimension (not `batch: false`) and its row inputs (neither state nor
//!   constants) take it dynamic (rows of several sequences share a call);
//! - `idle_timeout_ms` and `max_sequences` are at least 1, and `max_sequences` sequences fit
//!   [`MAX_SEQUENCE_STATE_BYTES`] by checked arithmetic;
//! - `initial.values` names state inputs, each with one sequence's element count of finite values;
//! - the replication mode is `none`, `nspb` or `remus` (`checkpoint` replays batches from their
//!   inputs alone, without the rows' sequence controls).
//!
//! A graph input filled from the sequence parameters ([`sequence_input_problem`]) has shape
//! `[1]`; a flag (`start`, `end`, `ready`) is `bool` or a number type with its `false_true`
//! values, which must fit the type; an `id` is an integer type or `bytes`, without values.

use super::node_path;
use crate::diagnostic::{Diagnostic, Location};
use crate::onnx::{ElementType, ModelMetadata, TensorInfo};
use crate::spec::{
    DimSpec, InitialState, ModelSpec, PerSequenceSpec, ReplicationMode, SequenceControl,
    SequenceInputSpec, Spanned,
};
use crate::stateful::one_sequence_shape;
use crate::tensor::{element_count, DType, Dim};

pub use weir_hams::sequences::MAX_SEQUENCE_STATE_BYTES;

/// What is wrong with a graph input of `dtype` and `shape` filled from the sequence parameters
/// as `spec` says, if anything.
pub(super) fn sequence_input_problem(
    dtype: DType,
    shape: &[DimSpec],
    spec: &SequenceInputSpec,
) -> Option<String> {
    if shape != [DimSpec::Size(1)] {
        return Some("a sequence control input has shape [1]".into());
    }
    let integer = matches!(
        dtype,
        DType::U8
            | DType::U16
            | DType::U32
            | DType::U64
            | DType::I8
            | DType::I16
            | DType::I32
            | DType::I64
    );
    match (spec.control, spec.false_true) {
        (SequenceControl::Id, None) if integer || dtype == DType::Bytes => None,
        (SequenceControl::Id, None) => Some(format!(
            "an `id` input is an integer type or bytes, not {dtype}"
        )),
        (SequenceControl::Id, Some(_)) => Some("an `id` input takes no `false_true`".into()),
        (_, None) if dtype == DType::Bool => None,
        (_, None) => Some(format!("a flag of type {dtype} needs `false_true` values")),
        (_, Some(values)) => values
            .iter()
            .find_map(|&v| crate::stateful::constant_data(dtype, v).err())
            .map(|e| format!("`false_true`: {e}")),
    }
}

/// The checks of `per_sequence` on node `id` (its `state:` pairs found in `meta` as `pairs`).
pub(super) fn check_per_sequence(
    id: &str,
    m: &ModelSpec,
    per: &Spanned<PerSequenceSpec>,
    pairs: &[(&TensorInfo, &TensorInfo)],
    meta: &ModelMetadata,
    diags: &mut Vec<Diagnostic>,
) {
    let err = |diags: &mut Vec<Diagnostic>, field: &str, loc: Location, msg: String| {
        diags.push(Diagnostic::error(
            node_path(id, &format!("state.per_sequence.{field}")),
            loc,
            format!("node `{id}`: {msg}"),
        ));
    };
    let axis = per.batch_axis.value;
    let mut one_sequence: Vec<(String, usize)> = Vec::new();
    let mut shapes_ok = true;
    for (input, output) in pairs {
        match sequence_shape(input, output, axis) {
            Ok(shape) => match element_count(&shape) {
                Some(n) => one_sequence.push((input.name.clone(), n)),
                None => shapes_ok = false,
            },
            Err(msg) => {
                shapes_ok = false;
                err(diags, "batch_axis", per.batch_axis.location, msg);
            }
        }
    }
    let (state_inputs, _) = m.state_tensors();
    if !m.batch.value {
        diags.push(Diagnostic::error(
            node_path(id, "batch"),
            m.batch.location,
            format!("node `{id}`: per-sequence state stacks the rows of several sequences in one call; it needs the model's batch dimension (`batch: true`)"),
        ));
    }
    for t in &meta.inputs {
        if state_inputs.contains(&t.name.as_str()) || m.constants.contains_key(&t.name) {
            continue;
        }
        if t.dims.first() != Some(&Dim::Dynamic) {
            diags.push(
                Diagnostic::error(
                    node_path(id, "state.per_sequence"),
                    per.location,
                    format!("node `{id}`: per-sequence state stacks the rows of several sequences in one call, but model input `{}` has no dynamic batch dimension first", t.name),
                )
                .with_help("a model without a batch dimension keeps one state for the node: remove `per_sequence`"),
            );
        }
    }
    if per.idle_timeout_ms.value == 0 {
        err(
            diags,
            "idle_timeout_ms",
            per.idle_timeout_ms.location,
            "`idle_timeout_ms` must be at least 1".into(),
        );
    }
    let max = per.max_sequences.value;
    let per_sequence_bytes = one_sequence
        .iter()
        .try_fold(0usize, |total, (_, n)| total.checked_add(n.checked_mul(4)?));
    match per_sequence_bytes.and_then(|b| b.checked_mul(max)) {
        _ if max == 0 => err(
            diags,
            "max_sequences",
            per.max_sequences.location,
            "`max_sequences` must be at least 1".into(),
        ),
        Some(total) if total <= MAX_SEQUENCE_STATE_BYTES => {}
        _ if !shapes_ok => {}
        total => err(
            diags,
            "max_sequences",
            per.max_sequences.location,
            format!(
                "{max} sequences of {} bytes of state each take {}, more than the {MAX_SEQUENCE_STATE_BYTES} bytes a node may hold",
                per_sequence_bytes.unwrap_or(usize::MAX),
                total.map_or_else(|| "more bytes than fit a usize".to_string(), |t| format!("{t} bytes")),
            ),
        ),
    }
    if let InitialState::Values(values) = &per.initial.value {
        for (name, v) in values {
            let Some((_, n)) = one_sequence.iter().find(|(i, _)| i == name) else {
                if !state_inputs.contains(&name.as_str()) {
                    err(
                        diags,
                        "initial",
                        per.initial.location,
                        format!(
                            "`initial.values` names `{name}`, which is not a state input (they are: {})",
                            state_inputs.join(", ")
                        ),
                    );
                }
                continue;
            };
            if v.len() != *n {
                err(
                    diags,
                    "initial",
                    per.initial.location,
                    format!(
                        "`initial.values.{name}` holds {} values; one sequence's `{name}` has {n}",
                        v.len()
                    ),
                );
            } else if v.iter().any(|x| !x.is_finite()) {
                err(
                    diags,
                    "initial",
                    per.initial.location,
                    format!("`initial.values.{name}` holds a value that is not finite"),
                );
            }
        }
    }
    let settings = m.replication_settings();
    if settings.mode.value == ReplicationMode::Checkpoint {
        diags.push(Diagnostic::error(
            node_path(id, "replication.mode"),
            settings.mode.location,
            format!("node `{id}`: per-sequence state runs under `none`, `nspb` or `remus` replication, not `checkpoint` (its replay would not know which sequence each row steps)"),
        ));
    }
}

/// One sequence's shape of state input `input` (1 on `axis`), checked against its output, or
/// what is wrong.
fn sequence_shape(
    input: &TensorInfo,
    output: &TensorInfo,
    axis: usize,
) -> Result<Vec<usize>, String> {
    let (i, o) = (&input.name, &output.name);
    let rank = input.dims.len();
    if axis >= rank {
        return Err(format!(
            "`batch_axis` is {axis}, but state input `{i}` has rank {rank} (axes 0 to {})",
            rank.saturating_sub(1)
        ));
    }
    if let Dim::Fixed(n) = input.dims[axis] {
        if n != 1 {
            return Err(format!("state input `{i}` has axis {axis} fixed to {n}; the batch axis of per-sequence state must be dynamic (or 1)"));
        }
    }
    let Some(shape) = one_sequence_shape(&input.dims, axis) else {
        return Err(format!(
            "state input `{i}` needs every dimension but the batch axis ({axis}) fixed"
        ));
    };
    let f32_only = |t: &TensorInfo| t.element == ElementType::Supported(DType::F32);
    if !f32_only(input) || !f32_only(output) {
        return Err(format!(
            "state tensors `{i}` and `{o}` must be f32 (weir carries f32 state)"
        ));
    }
    if output.dims.len() != rank {
        return Err(format!(
            "state output `{o}` has rank {}, state input `{i}` rank {rank}",
            output.dims.len()
        ));
    }
    for (k, (d, want)) in output.dims.iter().zip(&shape).enumerate() {
        if let Dim::Fixed(n) = d {
            if n != want {
                return Err(format!(
                    "state output `{o}` has {n} on axis {k}, state input `{i}` {want}"
                ));
            }
        }
    }
    Ok(shape)
}
