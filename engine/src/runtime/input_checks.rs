//! Admission's check of a request's tensors against the graph inputs: every name is a graph input,
//! each input is given once, with its dtype, a shape its declared one accepts (any size where it
//! declares `-1`; one size per symbolic name across all inputs of the request), and as many
//! elements as that shape holds. A wrong request is refused here, naming the field that is wrong,
//! so nothing malformed reaches the dataflow.

use crate::plan::Plan;
use crate::request::RequestError;
use crate::tensor::{Dim, NamedTensor, ShapeDisplay, Tensor};

/// Checks `inputs` against `plan`'s graph inputs and returns them in the graph's order.
///
/// # Errors
/// [`RequestError::Invalid`] naming the first wrong field.
pub(super) fn check_inputs(
    plan: &Plan,
    mut inputs: Vec<NamedTensor>,
) -> Result<Vec<Tensor>, RequestError> {
    let invalid = |field: String, message: String| RequestError::Invalid { field, message };
    for t in &inputs {
        if !plan.inputs.iter().any(|g| g.name == t.name) {
            let known: Vec<&str> = plan.inputs.iter().map(|g| g.name.as_str()).collect();
            return Err(invalid(
                format!("inputs.{}", t.name),
                format!(
                    "graph `{}` has no input `{}` (its inputs: {})",
                    plan.name,
                    t.name,
                    known.join(", ")
                ),
            ));
        }
    }
    let mut ordered = Vec::with_capacity(plan.inputs.len());
    // Symbolic dimension name -> (size in this request, the input that fixed it).
    let mut symbols: Vec<(&str, usize, &str)> = Vec::new();
    for g in &plan.inputs {
        let pos = inputs
            .iter()
            .position(|t| t.name == g.name)
            .ok_or_else(|| {
                invalid(
                    format!("inputs.{}", g.name),
                    format!("missing input `{}` ({})", g.name, g.ty),
                )
            })?;
        let t = inputs.swap_remove(pos);
        if inputs.iter().any(|o| o.name == g.name) {
            return Err(invalid(
                format!("inputs.{}", g.name),
                "given more than once".into(),
            ));
        }
        let tensor = t.tensor;
        if tensor.dtype() != g.ty.dtype {
            return Err(invalid(
                format!("inputs.{}.datatype", g.name),
                format!("expected {}, got {}", g.ty.dtype, tensor.dtype()),
            ));
        }
        let shape_ok = tensor.shape.len() == g.ty.shape.len()
            && tensor
                .shape
                .iter()
                .zip(&g.ty.shape)
                .all(|(&a, b)| Dim::Fixed(a).compatible(*b));
        if !shape_ok {
            return Err(invalid(
                format!("inputs.{}.shape", g.name),
                format!(
                    "expected {}, got {:?}",
                    ShapeDisplay(&g.ty.shape),
                    tensor.shape
                ),
            ));
        }
        let expected: usize = tensor.shape.iter().product();
        if tensor.data.len() != expected {
            return Err(invalid(
                format!("inputs.{}.data", g.name),
                format!(
                    "shape {:?} needs {expected} elements, got {}",
                    tensor.shape,
                    tensor.data.len()
                ),
            ));
        }
        for (symbol, &size) in g.symbols.iter().zip(&tensor.shape) {
            let Some(symbol) = symbol.as_deref() else {
                continue;
            };
            match symbols.iter().find(|(s, _, _)| *s == symbol) {
                Some(&(_, agreed, first)) if agreed != size => {
                    return Err(invalid(
                        format!("inputs.{}.shape", g.name),
                        format!(
                            "dimension `{symbol}` is {size} here but {agreed} in `{first}`; inputs sharing `{symbol}` must agree"
                        ),
                    ));
                }
                Some(_) => {}
                None => symbols.push((symbol, size, g.name.as_str())),
            }
        }
        ordered.push(tensor);
    }
    Ok(ordered)
}
