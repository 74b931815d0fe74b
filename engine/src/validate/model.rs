//! A model node's own fields: its ONNX file, its batching and executor sizes, and the order in which
//! the per-feature rules (routing, parallelism, state, parity) run on it.
//!
//! The file must exist, be ONNX, and move only tensors of Open Inference Protocol datatypes whose first dimension is the
//! batch dimension: fixed to 1 (one request per call) or dynamic (batched calls), the same for every
//! input. State tensors are exempt, since a state has no batch dimension ([`super::stateful`]
//! checks them). The node's outputs are the model's, minus its state outputs, plus `reconstructed`
//! under parity coding.

use super::{node_path, CheckedModel, NodeFacts, Validator};
use crate::onnx::{read_metadata_under, ElementType, ModelMetadata, OnnxError};
use crate::paths::FileError;
use crate::spec::ModelSpec;
use crate::tensor::{DType, Dim, TensorType};

impl<'a> Validator<'a, '_> {
    /// Every rule on model node `m`'s own fields; the facts hold its file's signature when it read.
    pub(super) fn check_model(&mut self, m: &'a ModelSpec) -> NodeFacts<'a> {
        let id = m.id.value.as_str();
        self.check_model_settings(id, m);
        let kairos_profile = self.check_routing(id, m);
        let serf_profile = self.check_parallelism(id, m);
        let Some((metadata, batched)) = self.read_model(id, m) else {
            return NodeFacts {
                model: None,
                outputs: None,
            };
        };
        self.check_state(id, m, &metadata);
        let (_, state_outputs) = m.state_tensors();
        let mut outputs: Vec<(String, TensorType)> = metadata
            .outputs
            .iter()
            .filter(|o| !state_outputs.contains(&o.name.as_str()))
            .filter_map(|o| match o.element {
                ElementType::Supported(dtype) => Some((
                    o.name.clone(),
                    TensorType {
                        dtype,
                        shape: o.dims.iter().skip(1).copied().collect(),
                    },
                )),
                _ => None,
            })
            .collect();
        if self.check_parity(id, m, &metadata) {
            outputs.push((
                super::RECONSTRUCTED_OUTPUT.to_string(),
                TensorType::fixed(DType::I64, &[1]),
            ));
        }
        NodeFacts {
            model: Some(CheckedModel {
                spec: m,
                metadata,
                batched,
                serf_profile,
                kairos_profile,
            }),
            outputs: Some(outputs),
        }
    }

    /// Batching and executor sizes are at least 1.
    fn check_model_settings(&mut self, id: &str, m: &ModelSpec) {
        let checks = [
            (m.batching.max_size, "batching.max_size"),
            (m.executor.instances, "executor.instances"),
            (m.executor.intra_op_threads, "executor.intra_op_threads"),
            (m.executor.queue_capacity, "executor.queue_capacity"),
        ];
        for (value, field) in checks {
            if value == 0 {
                self.error(
                    node_path(id, field),
                    m.id.location,
                    format!("node `{id}`: `{field}` must be at least 1"),
                );
            }
        }
    }

    /// Reads the model's signature and whether it takes batches.
    fn read_model(&mut self, id: &str, m: &ModelSpec) -> Option<(ModelMetadata, bool)> {
        let path = self.base_dir.join(&m.path.value);
        let meta = match read_metadata_under(&path, self.files) {
            Ok(meta) => meta,
            Err(OnnxError::Read(FileError::Missing { .. })) => {
                self.error(
                    node_path(id, "path"),
                    m.path.location,
                    format!("node `{id}`: model file {} does not exist", path.display()),
                )
                .help = Some(
                    "relative paths are relative to the graph file's folder; run scripts/setup.sh to fetch the zoo models"
                        .into(),
                );
                return None;
            }
            Err(e) => {
                self.error(
                    node_path(id, "path"),
                    m.path.location,
                    format!("node `{id}`: {e}"),
                );
                return None;
            }
        };
        let mut batched = None;
        let mut ok = true;
        let (state_inputs, state_outputs) = m.state_tensors();
        for t in meta.inputs.iter().chain(&meta.outputs) {
            if state_inputs.contains(&t.name.as_str()) || state_outputs.contains(&t.name.as_str()) {
                // A state tensor has no batch dimension; `check_state` checks it.
                continue;
            }
            let this = match (t.element, t.dims.first()) {
                (ElementType::NotATensor, _) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` is not a tensor; weir serves tensor models", t.name));
                    ok = false;
                    continue;
                }
                (ElementType::Unsupported(code), _) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` has ONNX element type {code} (complex, 8-bit or 4-bit floats), which the Open Inference Protocol has no datatype for", t.name));
                    ok = false;
                    continue;
                }
                (_, None) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` is a scalar; weir needs a batch dimension first", t.name));
                    ok = false;
                    continue;
                }
                (_, Some(Dim::Fixed(1))) => false,
                (_, Some(Dim::Dynamic)) => true,
                (_, Some(Dim::Fixed(n))) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` has its first dimension fixed to {n}; weir reads the first dimension as the batch dimension, which must be 1 or dynamic", t.name));
                    ok = false;
                    continue;
                }
            };
            if meta.inputs.iter().any(|i| i.name == t.name) {
                match batched {
                    None => batched = Some(this),
                    // A stateful node's `state:` check names the tensor that does not fit.
                    Some(b) if b != this && m.state.is_none() => {
                        self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: the model mixes inputs with a dynamic and a fixed batch dimension"))
                            .help = Some(format!("if `{}` carries state from one call to the next, name it under `state:`", t.name));
                        ok = false;
                    }
                    _ => {}
                }
            }
        }
        ok.then(|| (meta, batched.unwrap_or(false)))
    }
}
