//! A model node's own fields: its ONNX file, its batching and executor sizes, and the order in which
//! the per-feature rules (routing, parallelism, state, parity) run on it.
//!
//! The file must exist, be ONNX, and move only tensors of Open Inference Protocol datatypes. How
//! the model is called ([`CallShape`]) comes from its first dimension, which is the batch
//! dimension: fixed to 1 (one request per call), dynamic (batched calls), or fixed to `n` where
//! the node states `batching: {fixed_size: n}` (a batch-specialised build: calls padded to `n`
//! rows), the same for every input. A scalar or another fixed first dimension cannot be a batch
//! dimension; the node must then say `batch: false` (Triton's `max_batch_size: 0`), and each request is one call
//! with its tensors as they are. The flag is never inferred: a model whose first dimension happens
//! to be 3 would otherwise change meaning silently. State tensors are exempt, since a state has
//! no batch dimension ([`super::stateful`] checks them). The node's outputs are the model's (per
//! request: without the batch dimension when it has one), minus its state outputs, plus
//! `reconstructed` under parity coding.

use super::{node_path, CheckedModel, NodeFacts, Validator};
use crate::onnx::{read_metadata_under, ElementType, ModelMetadata, OnnxError, TensorInfo};
use crate::paths::FileError;
use crate::spec::ModelSpec;
use crate::tensor::{DType, Dim, TensorType};

/// How a model node calls its model: read from the model's first dimension and the node's
/// `batch:` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallShape {
    /// A dynamic first dimension: calls of up to `batching.max_size` requests, one row each.
    Batched,
    /// A first dimension fixed to 1: one request per call, with a batch dimension of 1.
    PerRequest,
    /// A first dimension fixed to `n` above 1 (a batch-specialised build): calls of up to `n`
    /// rows (and `batching.max_size`), padded with zero rows to `n`; the padding's outputs are
    /// dropped.
    Fixed(usize),
    /// `batch: false`: one request per call, its tensors exactly as they are.
    Unbatched,
}

impl CallShape {
    /// Whether the model's tensors have a batch dimension first (a request's do not).
    pub fn has_batch_dim(self) -> bool {
        self != CallShape::Unbatched
    }

    /// Whether calls may hold several requests.
    pub fn batched(self) -> bool {
        matches!(self, CallShape::Batched | CallShape::Fixed(_))
    }

    /// Most rows one call holds, with `batching.max_size` set to `max_size`.
    pub fn call_rows(self, max_size: usize) -> usize {
        match self {
            CallShape::Batched => max_size.max(1),
            CallShape::Fixed(n) => max_size.clamp(1, n.max(1)),
            CallShape::PerRequest | CallShape::Unbatched => 1,
        }
    }
}

impl<'a> Validator<'a, '_> {
    /// Every rule on model node `m`'s own fields; the facts hold its file's signature when it read.
    pub(super) fn check_model(&mut self, m: &'a ModelSpec) -> NodeFacts<'a> {
        let id = m.id.value.as_str();
        self.check_model_settings(id, m);
        let kairos_profile = self.check_routing(id, m);
        let serf_profile = self.check_parallelism(id, m);
        self.check_unbatched(id, m);
        let Some((metadata, call)) = self.read_model(id, m) else {
            return NodeFacts {
                model: None,
                outputs: None,
            };
        };
        self.check_padding(id, m, &metadata, call);
        self.check_state(id, m, &metadata);
        let warmup = self.check_warmup(id, m, &metadata, call);
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
                        shape: o.request_dims(call.has_batch_dim()).to_vec(),
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
                call,
                serf_profile,
                kairos_profile,
                warmup,
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

    /// Reads the model's signature and how it is called.
    fn read_model(&mut self, id: &str, m: &ModelSpec) -> Option<(ModelMetadata, CallShape)> {
        if let Some(model) = &m.repository {
            self.error(
                node_path(id, "repository"),
                model.location,
                format!("node `{id}`: `repository: {}` is resolved against a Triton model repository, and none was given", model.value.name()),
            )
            .help = Some("serve the graph with `--model-repository DIR` (a folder of `<model>/<version>/model.onnx`)".into());
            return None;
        }
        match (&m.task, m.path.value.as_os_str().is_empty()) {
            (Some(task), _) => {
                self.error(
                    node_path(id, "task"),
                    task.location,
                    format!("node `{id}`: `task: {}` is resolved against a model repository, and none was given", task.value.name()),
                )
                .help = Some("serve the graph with `--repository DIR` (the folder `weir model register` wrote)".into());
                return None;
            }
            (None, true) => {
                self.error(
                    node_path(id, "path"),
                    m.id.location,
                    format!("node `{id}`: a model node needs `path:` (an ONNX file), `task:` (a registered task) or `repository:` (a Triton repository model)"),
                );
                return None;
            }
            (None, false) => {}
        }
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
            if !self.check_element(id, m, t) {
                ok = false;
                continue;
            }
            if state_inputs.contains(&t.name.as_str())
                || state_outputs.contains(&t.name.as_str())
                || m.constants.contains_key(&t.name)
            {
                // A state tensor or a constant input has no batch dimension; `check_state` and
                // `check_constants` check them.
                continue;
            }
            if !m.batch.value {
                // Tensors as they are: any first dimension, scalars too.
                continue;
            }
            let this = match t.dims.first() {
                None => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` is a scalar; weir reads the first dimension as the batch dimension", t.name))
                        .help = Some(UNBATCHED_HELP.into());
                    ok = false;
                    continue;
                }
                Some(Dim::Fixed(1)) => CallShape::PerRequest,
                Some(Dim::Dynamic) => CallShape::Batched,
                Some(Dim::Fixed(n)) => match &m.batching.fixed_size {
                    Some(f) if *n == f.value => CallShape::Fixed(f.value),
                    Some(f) => {
                        self.error(node_path(id, "batching.fixed_size"), f.location, format!("node `{id}`: `fixed_size` is {} but model tensor `{}` has its first dimension fixed to {n}", f.value, t.name));
                        ok = false;
                        continue;
                    }
                    None => {
                        self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` has its first dimension fixed to {n}; weir reads the first dimension as the batch dimension, which must be 1 or dynamic unless `batching: {{fixed_size: {n}}}` says the model was built for batches of {n}", t.name))
                            .help = Some(UNBATCHED_HELP.into());
                        ok = false;
                        continue;
                    }
                },
            };
            if meta.inputs.iter().any(|i| i.name == t.name) {
                match batched {
                    None => batched = Some(this),
                    // A stateful node's `state:` check names the tensor that does not fit.
                    Some(b) if b != this && m.state.is_none() => {
                        self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: the model's inputs disagree on the batch dimension (dynamic, or fixed to different sizes)"))
                            .help = Some(format!("if `{}` carries state from one call to the next, name it under `state:`", t.name));
                        ok = false;
                    }
                    _ => {}
                }
            }
        }
        let call = match (m.batch.value, batched) {
            (false, _) => CallShape::Unbatched,
            (true, Some(call)) => call,
            (true, None) => CallShape::PerRequest,
        };
        let fixed = match call {
            CallShape::Fixed(_) => true,
            CallShape::PerRequest => m.batching.fixed_size.as_ref().is_some_and(|f| f.value == 1),
            _ => false,
        };
        if let (Some(f), false) = (&m.batching.fixed_size, fixed) {
            self.error(node_path(id, "batching.fixed_size"), f.location, format!("node `{id}`: `fixed_size` is {} but the model's inputs have no batch dimension fixed to it", f.value));
            ok = false;
        }
        ok.then_some((meta, call))
    }

    /// Whether tensor `t` of node `id`'s model has an element type weir moves (else an error).
    fn check_element(&mut self, id: &str, m: &ModelSpec, t: &TensorInfo) -> bool {
        let problem = match t.element {
            ElementType::Supported(_) => return true,
            ElementType::NotATensor => format!(
                "model tensor `{}` is not a tensor; weir serves tensor models",
                t.name
            ),
            ElementType::Unsupported(code) => format!("model tensor `{}` has ONNX element type {code} (complex, 8-bit or 4-bit floats), which the Open Inference Protocol has no datatype for", t.name),
        };
        self.error(
            node_path(id, "path"),
            m.path.location,
            format!("node `{id}`: {problem}"),
        );
        false
    }

    /// `batching` under `batch: false`: a model without a batch dimension runs one request per
    /// call, so joining requests (`max_size` above 1, `pad`) cannot apply.
    fn check_unbatched(&mut self, id: &str, m: &ModelSpec) {
        if m.batch.value || (m.batching.max_size <= 1 && m.batching.pad.is_none()) {
            return;
        }
        self.error(
            node_path(id, "batching"),
            m.batch.location,
            format!("node `{id}`: `batch: false` runs each request as its own call, so `batching` (max_size {}{}) cannot join requests", m.batching.max_size, if m.batching.pad.is_some() { ", pad" } else { "" }),
        )
        .help = Some("remove `batching`, or `batch: false` if the model's first dimension is a batch dimension".into());
    }
}

/// The help line of a model refused for its first dimension.
const UNBATCHED_HELP: &str = "if the model takes one request's tensors as they are (it has no batch dimension), add `batch: false` to the node";
