//! Padded batching of a model node, resolved: the named dimension's axes in each input and output.
//!
//! `batching.pad.dim` names a dimension as the model does (an ONNX `dim_param`); each tensor may
//! have it at its own position, or not at all. The plan turns the name into positions once, per
//! input and per output, in a request's shape (after the batch dimension), so the executor pads
//! and slices by index and never looks at names.

use crate::onnx::{ElementType, ModelMetadata};
use crate::spec::{ModelSpec, PadWhen};
use crate::validate::CallShape;

/// Padding along one named dimension, as the executor applies it.
#[derive(Debug, Clone, PartialEq)]
pub struct PadPlan {
    /// The dimension's name, for plans and errors.
    pub dim: String,
    /// The value padded positions hold (cast to each input's element type).
    pub value: f64,
    /// Per model input (by name), its axes with that name in a request's shape; empty for an
    /// input without it (which must then be the same in every request of a call).
    pub inputs: Vec<(String, Vec<usize>)>,
    /// Per model output (by name), its axes with that name: they are sliced back to each
    /// request's own length. Outputs without it are returned whole.
    pub outputs: Vec<(String, Vec<usize>)>,
    /// When requests of different lengths share a padded call.
    pub when: PadWhen,
}

impl PadPlan {
    /// The axes of tensor `name` among `of` (empty when it has none or is not listed).
    pub fn axes<'a>(of: &'a [(String, Vec<usize>)], name: &str) -> &'a [usize] {
        of.iter()
            .find(|(n, _)| n == name)
            .map_or(&[][..], |(_, axes)| axes.as_slice())
    }
}

impl PadPlan {
    /// Padding along `dim` (an ONNX `dim_param` of `meta`) with `value`, for a model called with
    /// a batch dimension; `None` when no input of `meta` has a dimension of that name.
    pub fn for_model(dim: &str, value: f64, meta: &ModelMetadata) -> Option<PadPlan> {
        let axes = |infos: &[crate::onnx::TensorInfo]| -> Vec<(String, Vec<usize>)> {
            infos
                .iter()
                .filter(|t| matches!(t.element, ElementType::Supported(_)))
                .map(|t| (t.name.clone(), t.axes_named(dim, true)))
                .collect()
        };
        let inputs = axes(&meta.inputs);
        inputs.iter().any(|(_, a)| !a.is_empty()).then(|| PadPlan {
            dim: dim.to_string(),
            value,
            inputs,
            outputs: axes(&meta.outputs),
            when: PadWhen::default(),
        })
    }
}

/// Model node `m`'s padding over its model `meta`, if it pads (validation checked the name, and
/// that a padded node is called with a batch dimension).
pub(super) fn pad_plan(m: &ModelSpec, meta: &ModelMetadata, call: CallShape) -> Option<PadPlan> {
    let pad = m.batching.pad.as_ref()?;
    if !call.has_batch_dim() {
        return None;
    }
    let mut plan = PadPlan::for_model(pad.dim.value.as_str(), pad.value.value.value, meta)?;
    plan.when = pad.when;
    Some(plan)
}
