//! One Open Inference Protocol request run through a graph: a leading batch dimension split into
//! rows, every row awaited within a deadline, the reply stacked and written. Shared by every
//! connector that speaks the protocol (HTTP, JSON lines, zenoh), so they answer alike.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;
use weir_engine::request::RequestError;
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::{NamedTensor, Tensor, TensorData};

use crate::http::protocol::{encode_infer_reply, InferRequest, ReplyTensor};
use crate::http::ServeError;

/// Splits `request` into per-row submissions to `runtime` (a leading batch dimension is
/// optional), awaits every row within `timeout`, and writes the reply: its body and, when any
/// output is binary, the JSON header's length.
///
/// # Errors
/// A [`ServeError`] naming what was wrong with the request, or the graph's own error.
pub async fn run_infer(
    runtime: &GraphRuntime,
    request: InferRequest,
    timeout: Duration,
) -> Result<(Vec<u8>, Option<usize>), ServeError> {
    let plan = runtime.plan();
    let malformed = |field: String, message: String| {
        ServeError::Malformed(crate::http::protocol::ProtocolError { field, message })
    };
    let mut batch: Option<(bool, usize)> = None;
    for input in &request.inputs {
        let Some(g) = plan.inputs.iter().find(|g| g.name == input.name) else {
            let known: Vec<&str> = plan.inputs.iter().map(|g| g.name.as_str()).collect();
            return Err(malformed(
                format!("inputs ({})", input.name),
                format!(
                    "model `{}` has no input `{}` (its inputs: {})",
                    plan.name,
                    input.name,
                    known.join(", ")
                ),
            ));
        };
        let this = if input.shape.len() == g.ty.shape.len() + 1 {
            (true, input.shape[0])
        } else if input.shape.len() == g.ty.shape.len() {
            (false, 1)
        } else {
            return Err(malformed(
                format!("inputs ({}).shape", input.name),
                format!(
                    "{:?} has rank {}; `{}` takes {} or, with a batch dimension first, rank {}",
                    input.shape,
                    input.shape.len(),
                    g.name,
                    g.ty,
                    g.ty.shape.len() + 1
                ),
            ));
        };
        match batch {
            None => batch = Some(this),
            Some(b) if b != this => {
                return Err(malformed(
                    format!("inputs ({}).shape", input.name),
                    "every input must have the same batch size".into(),
                ))
            }
            _ => {}
        }
    }
    let (batched, rows) = batch.unwrap_or((false, 1));
    let outputs: Vec<(String, bool)> = match &request.outputs {
        Some(outs) => outs.iter().map(|o| (o.name.clone(), o.binary)).collect(),
        None => plan
            .outputs
            .iter()
            .map(|o| (o.name.clone(), request.binary_by_default))
            .collect(),
    };
    for (o, _) in &outputs {
        if !plan.outputs.iter().any(|p| &p.name == o) {
            return Err(ServeError::UnknownOutput {
                graph: plan.name.clone(),
                output: o.clone(),
            });
        }
    }
    let mut receivers = Vec::with_capacity(rows);
    // Request parameters travel through the graph with every row (later stages read them).
    let parameters = (!request.parameters.is_empty())
        .then(|| Value::Object(request.parameters.clone()).to_string());
    let submit = |inputs: Vec<NamedTensor>| -> Result<oneshot::Receiver<_>, ServeError> {
        let (tx, rx) = oneshot::channel();
        runtime.submit_with_parameters(
            inputs,
            parameters.clone(),
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        Ok(rx)
    };
    if rows == 1 {
        // One row: move the tensors, no copy (the common case for large images).
        let inputs = request
            .inputs
            .into_iter()
            .map(|i| {
                let shape = if batched {
                    i.shape[1..].to_vec()
                } else {
                    i.shape
                };
                NamedTensor {
                    name: i.name,
                    tensor: Tensor {
                        shape,
                        data: i.data,
                    },
                }
            })
            .collect();
        receivers.push(submit(inputs)?);
    } else {
        for row in 0..rows {
            let inputs = request
                .inputs
                .iter()
                .map(|i| {
                    let shape = i.shape[1..].to_vec();
                    let n: usize = shape.iter().product();
                    let data = match &i.data {
                        TensorData::F32(v) => TensorData::F32(v[row * n..(row + 1) * n].to_vec()),
                        TensorData::I64(v) => TensorData::I64(v[row * n..(row + 1) * n].to_vec()),
                    };
                    NamedTensor {
                        name: i.name.clone(),
                        tensor: Tensor { shape, data },
                    }
                })
                .collect();
            receivers.push(submit(inputs)?);
        }
    }
    let answers = tokio::time::timeout(timeout, async {
        let mut answers = Vec::with_capacity(receivers.len());
        for rx in receivers {
            answers.push(rx.await.unwrap_or_else(|_| {
                Err(RequestError::ShuttingDown {
                    graph: plan.name.clone(),
                })
            }));
        }
        answers
    })
    .await
    .map_err(|_| ServeError::Deadline {
        ms: timeout.as_millis() as u64,
    })?;
    let responses = answers.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut reply = Vec::with_capacity(outputs.len());
    for (name, binary) in outputs {
        let parts: Vec<&Tensor> = responses.iter().filter_map(|r| r.output(&name)).collect();
        let Some(first) = parts.first() else { continue };
        let mut shape = first.shape.clone();
        if batched {
            shape.insert(0, rows);
        }
        let data = match first.data {
            TensorData::F32(_) => TensorData::F32(
                parts
                    .iter()
                    .flat_map(|t| t.as_f32().unwrap_or(&[]).iter().copied())
                    .collect(),
            ),
            TensorData::I64(_) => TensorData::I64(
                parts
                    .iter()
                    .flat_map(|t| t.as_i64().unwrap_or(&[]).iter().copied())
                    .collect(),
            ),
        };
        reply.push(ReplyTensor {
            name,
            tensor: Tensor { shape, data },
            binary,
        });
    }
    // Echo the parameters as they came out of the graph, not as they went in.
    let echoed = responses
        .first()
        .and_then(|r| r.parameters.as_deref())
        .and_then(|p| serde_json::from_str::<serde_json::Map<String, Value>>(p).ok())
        .unwrap_or_default();
    Ok(encode_infer_reply(
        &plan.name,
        request.id.as_deref(),
        echoed,
        &reply,
    ))
}
