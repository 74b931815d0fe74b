//! Optional graph inputs (`optional: true`, Triton's optional inputs): the tensor admission fills
//! in when a request leaves one out.
//!
//! ONNX Runtime runs a call without an input only when that input is an overridable initializer
//! (an initializer listed among the graph's inputs, IR 4 or later): it then uses the file's value.
//! weir fills that value into the request instead of leaving the input out of the call, so a
//! batched call never mixes rows with and without it and every row is what ONNX Runtime computes
//! for that request alone. Rules:
//! - every node reading the input is a model node, reading it as an overridable initializer
//!   whose value weir can read from the file (no graph output, tensor op or sequence control
//!   reads it);
//! - the per-request value is the file's value, without its leading dimension of 1 where the
//!   model has a batch dimension, and it fits the input's declared dtype and shape;
//! - models reading the same input hold the same value;
//! - the value holds at most [`MAX_DEFAULT_BYTES`]: each request that leaves the input out
//!   carries a copy, so a file cannot make one cost more than a client's request may.

use super::{CheckedKind, GraphInput, GraphOutput, Producer, TypedNode, Validator};
use crate::tensor::{Dim, ShapeDisplay, Tensor};

/// The most bytes an optional input's value may hold (the default cap on a request's body).
const MAX_DEFAULT_BYTES: usize = 64 << 20;

impl Validator<'_, '_> {
    /// `inputs` with each optional one's default filled, or an error naming why it has none.
    pub(super) fn fill_defaults(
        &mut self,
        mut inputs: Vec<GraphInput>,
        nodes: &[TypedNode<'_>],
        outputs: &[GraphOutput],
    ) -> Vec<GraphInput> {
        let spec = self.spec;
        for input in &mut inputs {
            let Some(declared) = spec
                .inputs
                .iter()
                .find(|i| i.name.value == input.name && i.optional)
            else {
                continue;
            };
            let loc = declared.name.location;
            let path = format!("inputs.{}.optional", input.name);
            match self.default_of(input, nodes, outputs) {
                Ok(default) => input.default = Some(default),
                Err(problem) => {
                    self.error(
                        path,
                        loc,
                        format!("graph input `{}` is optional, but {problem}", input.name),
                    )
                    .help = Some("an optional input must feed only model inputs that have a value in the model file: an ONNX initializer listed among the graph's inputs (IR 4 or later), which ONNX Runtime lets a call override".into());
                }
            }
        }
        inputs
    }

    /// The per-request default of optional `input`, or why it has none.
    fn default_of(
        &self,
        input: &GraphInput,
        nodes: &[TypedNode<'_>],
        outputs: &[GraphOutput],
    ) -> Result<Tensor, String> {
        if input.sequence.is_some() {
            return Err("weir fills it from the sequence parameters already".into());
        }
        if let Some(o) = outputs
            .iter()
            .find(|o| o.producer == Producer::Ingress && o.column == input.name)
        {
            return Err(format!("graph output `{}` reads it directly", o.name));
        }
        let mut found: Option<(Tensor, String)> = None;
        for node in nodes {
            for port in &node.inputs {
                if port.producer != Producer::Ingress || port.column != input.name {
                    continue;
                }
                let reader = format!("node `{}` (as `{}`)", node.id, port.name);
                let CheckedKind::Model(model) = &node.kind else {
                    return Err(format!("{reader} is not a model"));
                };
                let Some(o) = model.metadata.overridable(&port.name) else {
                    return Err(format!(
                        "{reader} reads it as an input the model cannot run without (it has no initializer in the file)"
                    ));
                };
                let value = o.default.as_ref().map_err(|why| {
                    format!(
                        "the value of `{}` in {reader}'s model cannot be read: {why}",
                        port.name
                    )
                })?;
                if value.data.heap_bytes() > MAX_DEFAULT_BYTES {
                    return Err(format!(
                        "the value of `{}` in {reader}'s model holds {} bytes, more than the {MAX_DEFAULT_BYTES} a request may carry",
                        port.name,
                        value.data.heap_bytes()
                    ));
                }
                let value = per_request(value, model.call.has_batch_dim()).ok_or_else(|| {
                    format!(
                        "{reader}'s model holds `{}` of shape {:?}, which is no batch of 1 (the node batches)",
                        port.name, value.shape
                    )
                })?;
                let fits = value.dtype() == input.ty.dtype
                    && value.shape.len() == input.ty.shape.len()
                    && value
                        .shape
                        .iter()
                        .zip(&input.ty.shape)
                        .all(|(&n, d)| Dim::Fixed(n).compatible(*d));
                if !fits {
                    return Err(format!(
                        "{reader}'s model holds a {} value of shape {:?}, which the input's type {} {} does not hold",
                        value.dtype(),
                        value.shape,
                        input.ty.dtype,
                        ShapeDisplay(&input.ty.shape)
                    ));
                }
                match &found {
                    Some((first, by)) if *first != value => {
                        return Err(format!(
                            "{reader}'s model holds another value for it than {by}'s"
                        ));
                    }
                    Some(_) => {}
                    None => found = Some((value, reader)),
                }
            }
        }
        found
            .map(|(value, _)| value)
            .ok_or_else(|| "no model node reads it".into())
    }
}

/// One request's value from the file's `value`: without its leading dimension, which must be 1,
/// when the model has a batch dimension; as it is otherwise.
fn per_request(value: &Tensor, batch_dim: bool) -> Option<Tensor> {
    if !batch_dim {
        return Some(value.clone());
    }
    match value.shape.split_first() {
        Some((1, rest)) => Some(Tensor::new(rest.to_vec(), value.data.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::per_request;
    use crate::tensor::Tensor;

    #[test]
    fn a_batched_models_value_loses_its_batch_of_one() {
        let v = Tensor::f32(vec![1, 2], vec![3.0, 4.0]);
        assert_eq!(
            per_request(&v, true),
            Some(Tensor::f32(vec![2], vec![3.0, 4.0]))
        );
        assert_eq!(per_request(&v, false), Some(v.clone()));
        assert_eq!(
            per_request(&Tensor::f32(vec![2], vec![3.0, 4.0]), true),
            None
        );
    }
}
