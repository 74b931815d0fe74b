//! Reading a model node's warm-up file after planning: the JSON form of one Open Inference
//! Protocol infer request, parsed by the same parser as a client's request body (every size
//! checked before anything is allocated), then matched to the model: each of its inputs given
//! once, with the model's datatype and a per-request shape that fits
//! ([`weir_engine::warmup::request_shape`]). Errors name the node's `warmup.file` field at its
//! YAML position and, inside the file, the request field at fault.

use weir_connectors::oip::parse_infer_request;
use weir_engine::diagnostic::{Diagnostic, Diagnostics, Location};
use weir_engine::onnx::ElementType;
use weir_engine::paths::{read_capped, FileRules};
use weir_engine::plan::{NodeKind, Plan};
use weir_engine::spec::{GraphSpec, NodeSpec};
use weir_engine::warmup::{
    request_shape, WarmupInput, WarmupInputs, WarmupValues, MAX_WARMUP_BYTES,
};

/// Most bytes a warm-up file may hold: its JSON text spells each element out, so it may be a
/// few times the tensors' own size.
pub const MAX_WARMUP_FILE_BYTES: u64 = 4 * MAX_WARMUP_BYTES;

/// Replaces every warm-up file sample in `plan` with its tensors.
///
/// # Errors
/// Every file that cannot be read or does not fit its model, one diagnostic each.
pub(crate) fn read_warmup_files(
    plan: &mut Plan,
    spec: &GraphSpec,
    files: &FileRules,
) -> Result<(), Diagnostics> {
    let mut errors = Vec::new();
    for node in &mut plan.nodes {
        let id = node.node.id.clone();
        let NodeKind::Model(m) = &mut node.node.kind else {
            continue;
        };
        let batch_dim = m.call.has_batch_dim();
        for sample in &mut m.warmup {
            let WarmupInputs::File(path) = &sample.inputs else {
                continue;
            };
            match tensors(path, files, &m.metadata, batch_dim, sample.rows) {
                Ok(inputs) => sample.inputs = WarmupInputs::Tensors(inputs),
                Err(why) => errors.push(Diagnostic::error(
                    format!("nodes.{id}.warmup.file"),
                    file_location(spec, &id),
                    format!("node `{id}`: warm-up file {}: {why}", path.display()),
                )),
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Diagnostics {
            items: errors,
            source: None,
        })
    }
}

/// The model inputs the request in `path` gives, in the model's order.
fn tensors(
    path: &std::path::Path,
    files: &FileRules,
    meta: &weir_engine::onnx::ModelMetadata,
    batch_dim: bool,
    rows: u32,
) -> Result<Vec<WarmupInput>, String> {
    let bytes = read_capped(path, MAX_WARMUP_FILE_BYTES, files).map_err(|e| e.to_string())?;
    let request = parse_infer_request(&bytes, None).map_err(|e| e.to_string())?;
    let mut given = request.inputs;
    if let Some(extra) = given
        .iter()
        .position(|t| !meta.inputs.iter().any(|i| i.name == t.name))
    {
        let known: Vec<&str> = meta.inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(format!(
            "inputs[{extra}] ({:?}) names no input of the model (its inputs: {})",
            given[extra].name,
            known.join(", ")
        ));
    }
    let mut out = Vec::with_capacity(meta.inputs.len());
    for info in &meta.inputs {
        let ElementType::Supported(dtype) = info.element else {
            return Err(format!("model input `{}` has no datatype", info.name));
        };
        let at = given
            .iter()
            .position(|t| t.name == info.name)
            .ok_or_else(|| format!("`inputs` lacks model input `{}`", info.name))?;
        let tensor = given.swap_remove(at);
        if given.iter().any(|t| t.name == info.name) {
            return Err(format!("`inputs` gives `{}` twice", info.name));
        }
        if tensor.data.dtype() != dtype {
            return Err(format!(
                "input `{}` is {}; the model takes {}",
                info.name,
                tensor.data.dtype().oip_name(),
                dtype.oip_name()
            ));
        }
        let written: Vec<i64> = tensor
            .shape
            .iter()
            .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
            .collect();
        let shape = request_shape(info, batch_dim, &written, rows)
            .map_err(|e| format!("input `{}`: shape {:?} {e}", info.name, tensor.shape))?;
        out.push(WarmupInput {
            name: info.name.clone(),
            dtype,
            shape,
            values: WarmupValues::Given(tensor.data),
        });
    }
    Ok(out)
}

/// Where node `id`'s `warmup.file` is written, if the spec says.
fn file_location(spec: &GraphSpec, id: &str) -> Location {
    spec.nodes
        .iter()
        .find_map(|n| match &n.value {
            NodeSpec::Model(m) if m.id.value == id => m
                .warmup
                .as_ref()
                .and_then(|w| w.file.as_ref().map(|f| f.location)),
            _ => None,
        })
        .unwrap_or(Location::UNKNOWN)
}
