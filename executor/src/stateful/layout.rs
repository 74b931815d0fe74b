//! The check of a role assignment's layout against the model file, before anything is allocated.
//!
//! An assignment arrives over the network and names the state tensors (with their shapes), the
//! run inputs and the returned outputs. The member allocates its state from those shapes, so a
//! shape the model does not declare (or one whose element count overflows) must be refused here,
//! by reading the model's own metadata: a state tensor must be a model input and output of type
//! f32 whose dimensions are all fixed and equal to the assigned shape, and its size must fit
//! [`MAX_STATE_BYTES`] by checked arithmetic. A per-sequence node's state tensors are one
//! sequence's: 1 on the batch axis, which the model leaves dynamic (or 1), the other dimensions
//! the model's; its state output may leave any dimension dynamic (each call checks the shape it
//! returns); `max_sequences` of them must fit [`MAX_SEQUENCE_STATE_BYTES`] and the initial values
//! one sequence's elements. Once a member has loaded its model, every later assignment must
//! name the same layout (the member's state is already shaped by it).

use weir_engine::onnx::{ElementType, ModelMetadata, TensorInfo};
use weir_engine::tensor::{element_count, DType, Dim};
use weir_hams::protocol::{Assign, StateTensor};
use weir_hams::sequences::{SequenceLayout, MAX_SEQUENCE_STATE_BYTES};

/// The most bytes of state one member holds per version (all of a node's state tensors).
pub const MAX_STATE_BYTES: usize = 1 << 30;

/// What an assignment names that shapes the member: compared between assignments.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Layout {
    pub state: Vec<StateTensor>,
    pub sequences: Option<SequenceLayout>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

impl Layout {
    pub(super) fn of(a: &Assign) -> Layout {
        Layout {
            state: a.state.clone(),
            sequences: a.sequences.clone(),
            inputs: a.inputs.clone(),
            outputs: a.outputs.clone(),
        }
    }
}

fn fixed_dims(info: &TensorInfo) -> Option<Vec<usize>> {
    info.dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Dynamic => None,
        })
        .collect()
}

fn state_side(
    tensors: &[TensorInfo],
    side: &str,
    name: &str,
    shape: &[usize],
) -> Result<(), String> {
    let info = tensors
        .iter()
        .find(|t| t.name == name)
        .ok_or_else(|| format!("state {side} `{name}` is not a model {side}"))?;
    if info.element != ElementType::Supported(DType::F32) {
        return Err(format!("state {side} `{name}` is not an f32 tensor"));
    }
    match fixed_dims(info) {
        Some(dims) if dims == shape => Ok(()),
        Some(dims) => Err(format!(
            "state {side} `{name}` has shape {dims:?} in the model, not the assigned {}",
            shape_text(shape)
        )),
        None => Err(format!(
            "state {side} `{name}` has no fixed shape in the model"
        )),
    }
}

/// A shape for an error message, bounded however long the assigned shape was.
fn shape_text(shape: &[usize]) -> String {
    const SHOWN: usize = 8;
    let head: Vec<String> = shape.iter().take(SHOWN).map(usize::to_string).collect();
    if shape.len() > SHOWN {
        format!("[{}, … ({} dims)]", head.join(", "), shape.len())
    } else {
        format!("[{}]", head.join(", "))
    }
}

/// Bytes of f32 state the tensors hold, or `None` when the count overflows.
pub(super) fn state_bytes(state: &[StateTensor]) -> Option<usize> {
    state.iter().try_fold(0usize, |total, s| {
        let elements = element_count(&s.shape)?;
        total.checked_add(elements.checked_mul(4)?)
    })
}

/// Checks `a`'s state tensors, run inputs and outputs against the model's metadata.
///
/// # Errors
/// The reason, for the refusal, when `a` names something the model does not declare.
pub(super) fn check_assign(meta: &ModelMetadata, a: &Assign) -> Result<(), String> {
    if let Some(layout) = &a.sequences {
        return check_sequences(meta, a, layout);
    }
    for s in &a.state {
        state_side(&meta.inputs, "input", &s.input, &s.shape)?;
        state_side(&meta.outputs, "output", &s.output, &s.shape)?;
    }
    match state_bytes(&a.state) {
        Some(n) if n <= MAX_STATE_BYTES => {}
        Some(n) => {
            return Err(format!(
                "the state would take {n} bytes, more than {MAX_STATE_BYTES}"
            ))
        }
        None => return Err("the state's size overflows".to_string()),
    }
    check_io(meta, a)
}

/// The run inputs and outputs `a` names are the model's, no run input is a state input or a
/// constant, and every constant fits its model input.
fn check_io(meta: &ModelMetadata, a: &Assign) -> Result<(), String> {
    weir_engine::stateful::constant_tensors(meta, &a.constants)?;
    if let Some(c) = a.constants.iter().find(|c| a.inputs.contains(&c.name)) {
        return Err(format!("run input `{}` is a constant", c.name));
    }
    for name in &a.inputs {
        if !meta.inputs.iter().any(|t| &t.name == name) {
            return Err(format!("run input `{name}` is not a model input"));
        }
        if a.state.iter().any(|s| &s.input == name) {
            return Err(format!("run input `{name}` is a state input"));
        }
    }
    for name in &a.outputs {
        if !meta.outputs.iter().any(|t| &t.name == name) {
            return Err(format!("output `{name}` is not a model output"));
        }
    }
    Ok(())
}

/// One dimension of a per-sequence state tensor: the model's `d` against the assigned `want`
/// (1 on the batch axis); `None` when they do not fit.
fn sequence_dim(d: &Dim, want: usize, on_axis: bool, output: bool) -> Option<()> {
    match d {
        Dim::Fixed(n) if *n == want => Some(()),
        Dim::Dynamic if on_axis || output => Some(()),
        _ => None,
    }
}

/// [`check_assign`] for a per-sequence node kept as `layout`.
fn check_sequences(
    meta: &ModelMetadata,
    a: &Assign,
    layout: &SequenceLayout,
) -> Result<(), String> {
    let axis = layout.batch_axis;
    for s in &a.state {
        if s.shape.get(axis) != Some(&1) {
            return Err(format!(
                "state `{}`: a sequence's shape {} has no 1 on batch axis {axis}",
                s.input,
                shape_text(&s.shape)
            ));
        }
        for (side, tensors, name, output) in [
            ("input", &meta.inputs, &s.input, false),
            ("output", &meta.outputs, &s.output, true),
        ] {
            let info = tensors
                .iter()
                .find(|t| &t.name == name)
                .ok_or_else(|| format!("state {side} `{name}` is not a model {side}"))?;
            if info.element != ElementType::Supported(DType::F32) {
                return Err(format!("state {side} `{name}` is not an f32 tensor"));
            }
            let fits = info.dims.len() == s.shape.len()
                && info
                    .dims
                    .iter()
                    .zip(&s.shape)
                    .enumerate()
                    .all(|(k, (d, &w))| sequence_dim(d, w, k == axis, output).is_some());
            if !fits {
                return Err(format!(
                    "state {side} `{name}` does not take one sequence's shape {} on batch axis {axis}",
                    shape_text(&s.shape)
                ));
            }
        }
    }
    let total = state_bytes(&a.state).and_then(|n| n.checked_mul(layout.max_sequences));
    match total {
        Some(n) if n <= MAX_SEQUENCE_STATE_BYTES => {}
        _ => {
            return Err(format!(
                "{} sequences of this state would take more than {MAX_SEQUENCE_STATE_BYTES} bytes",
                layout.max_sequences
            ))
        }
    }
    if !layout.initial.is_empty()
        && (layout.initial.len() != a.state.len()
            || layout
                .initial
                .iter()
                .zip(&a.state)
                .any(|(v, s)| v.len() != s.len()))
    {
        return Err("the initial values do not match the state tensors".to_string());
    }
    check_io(meta, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_hams::protocol::{Mode, Role};

    fn info(name: &str, element: DType, dims: Vec<Dim>) -> TensorInfo {
        TensorInfo {
            name: name.into(),
            element: ElementType::Supported(element),
            names: vec![None; dims.len()],
            dims,
        }
    }

    fn meta() -> ModelMetadata {
        ModelMetadata {
            inputs: vec![
                info("x", DType::F32, vec![Dim::Dynamic, Dim::Fixed(4)]),
                info("h_in", DType::F32, vec![Dim::Fixed(1), Dim::Fixed(16)]),
            ],
            outputs: vec![
                info("y", DType::F32, vec![Dim::Dynamic, Dim::Fixed(4)]),
                info("h_out", DType::F32, vec![Dim::Fixed(1), Dim::Fixed(16)]),
            ],
            overridable: Vec::new(),
        }
    }

    fn assign(shape: Vec<usize>) -> Assign {
        Assign {
            graph: "g".into(),
            node_id: 1,
            epoch: 1,
            role: Role::Primary { backup: None },
            mode: Mode::None,
            state: vec![StateTensor {
                input: "h_in".into(),
                output: "h_out".into(),
                shape,
            }],
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            checkpoint_every: 0,
            rollback_to: None,
            sequences: None,
            constants: Vec::new(),
            signature: None,
        }
    }

    #[test]
    fn the_models_own_layout_is_accepted() {
        assert_eq!(check_assign(&meta(), &assign(vec![1, 16])), Ok(()));
    }

    #[test]
    fn a_huge_or_foreign_shape_is_refused_naming_the_tensor() {
        let e = check_assign(&meta(), &assign(vec![1 << 40])).unwrap_err();
        assert!(e.contains("h_in") && e.contains("1099511627776"), "{e}");
        let e = check_assign(&meta(), &assign(vec![usize::MAX, usize::MAX])).unwrap_err();
        assert!(e.contains("h_in"), "{e}");
        let long = vec![1; 10_000];
        let e = check_assign(&meta(), &assign(long)).unwrap_err();
        assert!(e.len() < 200, "{e}");
    }

    #[test]
    fn unknown_or_misused_names_are_refused() {
        let mut a = assign(vec![1, 16]);
        a.state[0].input = "x".into();
        assert!(check_assign(&meta(), &a).unwrap_err().contains("`x`"));
        let mut a = assign(vec![1, 16]);
        a.inputs.push("h_in".into());
        assert!(check_assign(&meta(), &a)
            .unwrap_err()
            .contains("state input"));
        let mut a = assign(vec![1, 16]);
        a.outputs.push("nope".into());
        assert!(check_assign(&meta(), &a).unwrap_err().contains("`nope`"));
    }

    #[test]
    fn state_bytes_overflow_is_none() {
        let s = |shape: Vec<usize>| StateTensor {
            input: "a".into(),
            output: "b".into(),
            shape,
        };
        assert_eq!(state_bytes(&[s(vec![2, 3])]), Some(24));
        assert_eq!(state_bytes(&[s(vec![usize::MAX, 2])]), None);
        assert_eq!(state_bytes(&[s(vec![usize::MAX / 4]), s(vec![8])]), None);
    }
}
