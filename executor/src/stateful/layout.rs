//! The check of a role assignment's layout against the model file, before anything is allocated.
//!
//! An assignment arrives over the network and names the state tensors (with their shapes), the
//! run inputs and the returned outputs. The member allocates its state from those shapes, so a
//! shape the model does not declare (or one whose element count overflows) must be refused here,
//! by reading the model's own metadata: a state tensor must be a model input and output of type
//! f32 whose dimensions are all fixed and equal to the assigned shape, and its size must fit
//! [`MAX_STATE_BYTES`] by checked arithmetic. Once a member has loaded its model, every later
//! assignment must name the same layout (the member's state is already shaped by it).

use weir_engine::onnx::{ElementType, ModelMetadata, TensorInfo};
use weir_engine::tensor::{element_count, DType, Dim};
use weir_hams::protocol::{Assign, StateTensor};

/// The most bytes of state one member holds per version (all of a node's state tensors).
pub const MAX_STATE_BYTES: usize = 1 << 30;

/// What an assignment names that shapes the member: compared between assignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    pub state: Vec<StateTensor>,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

impl Layout {
    pub(super) fn of(a: &Assign) -> Layout {
        Layout {
            state: a.state.clone(),
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
