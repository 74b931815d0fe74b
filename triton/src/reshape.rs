//! The reshapes a configuration asks for between a client's tensors and the model's.
//!
//! Triton's `reshape` says the model takes (or gives) a tensor of `reshape.shape` where clients
//! send (or receive) one of `dims`, the elements untouched; both leave out the batch dimension.
//! A scalar in the file that the configuration writes as `dims: [1]` without a reshape (what
//! auto-complete writes for a model that does not batch) is read the same way: the request's one
//! element is the model's scalar. Each such tensor becomes a `reshape` op node of the served graph:
//! before the model for an input (to the model's shape), after it for an output (to `dims`).
//!
//! The op takes at most one size from a request's element count, so a target with two
//! variable-size dimensions is refused naming the field.

use crate::error::GraphError;
use crate::load::ServedVersion;

/// One tensor the engine reshapes on its way into or out of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorReshape {
    /// The model's tensor name.
    pub tensor: String,
    /// The configuration field that asks for it (`input[0].reshape`).
    pub field: String,
    /// The shape it is given: the model's for an input, the configuration's `dims` for an output.
    pub to: Vec<i64>,
}

/// The reshapes around the model of `served` (a version of `model`): its inputs', then its
/// outputs'.
///
/// # Errors
/// [`GraphError::Unsupported`] for a target with more than one variable-size dimension.
pub fn reshapes(
    model: &str,
    served: &ServedVersion,
) -> Result<(Vec<TensorReshape>, Vec<TensorReshape>), GraphError> {
    let config = &served.config;
    let file_scalar = |name: &str, outputs: bool| {
        served.signature.as_ref().is_some_and(|s| {
            let list = if outputs { &s.outputs } else { &s.inputs };
            list.iter().any(|f| f.name == name && f.dims.is_empty())
        })
    };
    // The model's side of a tensor, where it differs from the client's `dims`.
    let model_side = |name: &str, dims: &[i64], reshape: Option<&Vec<i64>>, outputs: bool| {
        let model = match reshape {
            Some(shape) => shape.clone(),
            None if file_scalar(name, outputs) && dims == [1] => Vec::new(),
            None => return None,
        };
        (model != dims).then_some(model)
    };
    let checked = |field: String, tensor: &str, to: Vec<i64>| {
        if to.iter().filter(|&&d| d < 0).count() > 1 {
            return Err(GraphError::Unsupported {
                model: model.to_string(),
                field,
                reason: format!(
                    "reshaping to {to:?} would leave more than one size to infer from a request's element count"
                ),
            });
        }
        Ok(TensorReshape {
            tensor: tensor.to_string(),
            field,
            to,
        })
    };
    let mut inputs = Vec::new();
    for (i, t) in config.input.iter().enumerate() {
        let reshape = t.reshape.as_ref().map(|r| &r.shape);
        if let Some(to) = model_side(&t.name, &t.dims, reshape, false) {
            inputs.push(checked(format!("input[{i}].reshape"), &t.name, to)?);
        }
    }
    let mut outputs = Vec::new();
    for (i, t) in config.output.iter().enumerate() {
        let reshape = t.reshape.as_ref().map(|r| &r.shape);
        if model_side(&t.name, &t.dims, reshape, true).is_some() {
            outputs.push(checked(
                format!("output[{i}].reshape"),
                &t.name,
                t.dims.clone(),
            )?);
        }
    }
    Ok((inputs, outputs))
}
