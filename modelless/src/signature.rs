//! A model-less name read as a model: the signature its task's variants share, in the form the
//! transports describe models in (metadata, Triton's configuration), so a client that reads a
//! model before it infers can use a task as it would a graph.

use weir_connectors::models::config::{Signature, Tensor};
use weir_engine::tensor::{Dim, TensorType};
use weir_infaas::repository::{Repository, TensorSignature};
use weir_infaas::variant::Variant;

/// `name` (a task, or a variant served here) as a model: its task's signature, each
/// tensor's per-request shape being the task's without its batch dimension, and the most
/// rows a request may carry — the variant's batch, or a task's largest.
pub(crate) fn of_name(
    repository: &Repository,
    served: impl Fn(&Variant) -> bool,
    name: &str,
) -> Option<Signature> {
    let (task, platform, max_batch) = match repository.variant(name) {
        Some(v) if served(v) => (v.task.as_str(), "onnxruntime_onnx", v.max_batch),
        Some(_) => return None,
        None => {
            let largest = repository
                .variants()
                .filter(|v| v.task == name && served(v))
                .map(|v| v.max_batch)
                .max()?;
            (name, "weir_modelless", largest)
        }
    };
    let sig = repository.task_signature(task)?;
    let side = |tensors: &[TensorSignature]| {
        tensors
            .iter()
            .map(|t| Tensor {
                name: t.name.clone(),
                ty: TensorType {
                    dtype: t.dtype,
                    shape: t
                        .dims
                        .iter()
                        .skip(1)
                        .map(|d| match d.map(usize::try_from) {
                            Some(Ok(n)) => Dim::Fixed(n),
                            _ => Dim::Dynamic,
                        })
                        .collect(),
                },
                optional: false,
            })
            .collect()
    };
    Some(Signature {
        name: name.to_string(),
        platform: platform.to_string(),
        max_batch: u64::from(max_batch.max(1)),
        inputs: side(&sig.inputs),
        outputs: side(&sig.outputs),
    })
}
