//! A model node's `constants:`: model inputs fed the same value on every call.
//!
//! Rules: each names a model input that is neither a state input nor bound under `inputs`, of
//! one element (a scalar or every dimension 1) and an OIP datatype its value fits
//! ([`crate::stateful::constant_data`]: integral and in range for an integer type, finite for a
//! float); the node is stateful (its executor feeds them; a stateless node takes a scalar graph
//! input instead).

use super::node_path;
use crate::diagnostic::Diagnostic;
use crate::onnx::ModelMetadata;
use crate::spec::ModelSpec;
use crate::stateful::{constant_tensors, ConstantInput};

/// The checks of `constants` on node `id` against its model's signature `meta`.
pub(super) fn check_constants(
    id: &str,
    m: &ModelSpec,
    meta: &ModelMetadata,
    diags: &mut Vec<Diagnostic>,
) {
    let (state_inputs, _) = m.state_tensors();
    for (name, value) in &m.constants {
        let path = node_path(id, &format!("constants.{name}"));
        let mut err = |msg: String| {
            diags.push(Diagnostic::error(
                path.clone(),
                value.location,
                format!("node `{id}`: {msg}"),
            ));
        };
        if m.state.is_none() {
            err(format!("`constants` are fed by a stateful node's executor; bind a scalar graph input to `{name}` instead"));
            continue;
        }
        if state_inputs.contains(&name.as_str()) {
            err(format!(
                "`{name}` is a state input; a constant cannot feed it"
            ));
            continue;
        }
        if m.inputs.contains_key(name) {
            err(format!(
                "`{name}` is bound under `inputs`; a constant input is not"
            ));
            continue;
        }
        if !meta.inputs.iter().any(|t| &t.name == name) {
            let inputs: Vec<&str> = meta.inputs.iter().map(|t| t.name.as_str()).collect();
            err(format!(
                "the model has no input `{name}` (its inputs are: {})",
                inputs.join(", ")
            ));
            continue;
        }
        let constant = ConstantInput {
            name: name.clone(),
            value: value.value,
        };
        if let Err(e) = constant_tensors(meta, std::slice::from_ref(&constant)) {
            err(e);
        }
    }
}
