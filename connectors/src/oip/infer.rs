//! One Open Inference Protocol request run through a graph: a leading batch dimension split into
//! rows, every row awaited within a deadline, the reply stacked and written. Shared by every
//! transport that speaks the protocol (HTTP, JSON lines, zenoh), so they answer alike.
//!
//! The row count is checked before anything is sized by it: a request of more rows than the
//! graph's in-flight limit could never be admitted whole (each row is one graph request), and a
//! batch of zero rows, or of rows of zero elements, asks for nothing; all three are refused naming
//! the input's shape. Request parameters are shared by every row (one `Arc<str>`), and the
//! parameter text a request makes the graph carry (its length times the rows) is held to the
//! larger of the request's own size and one [`PARAMETERS_MAX_BYTES`].

use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tracing::debug;
use weir_engine::request::RequestError;
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::{element_count, NamedTensor, Tensor};

use super::error::{perr, OipError};
use super::paths::PathRecording;
use super::{encode_infer_reply, InferRequest, ReplyTensor, PARAMETERS_MAX_BYTES};
use crate::echo::quote;

fn malformed(field: String, message: String) -> OipError {
    OipError::Malformed(perr(field, message))
}

/// Checks a request's row count and per-row sizes: returns whether its inputs carry a batch
/// dimension and how many rows it has. Afterwards every input's data is exactly `rows` rows of
/// a non-zero element count each.
/// Whether the request's parameters (JSON object text) name a sequence.
fn names_a_sequence(parameters: Option<&str>) -> bool {
    parameters
        .and_then(|p| serde_json::from_str::<serde_json::Map<String, Value>>(p).ok())
        .is_some_and(|m| m.contains_key("sequence_id"))
}

fn check_rows(runtime: &GraphRuntime, request: &InferRequest) -> Result<(bool, usize), OipError> {
    let plan = runtime.plan();
    let mut batch: Option<(bool, usize)> = None;
    for (i, input) in request.inputs.iter().enumerate() {
        let name = quote(&input.name);
        let shape_field = || format!("inputs[{i}] ({name}).shape");
        let Some(g) = plan.inputs.iter().find(|g| g.client() == input.name) else {
            let known: Vec<&str> = plan.inputs.iter().map(|g| g.client()).collect();
            return Err(malformed(
                format!("inputs[{i}] ({name})"),
                format!(
                    "model `{}` has no input `{name}` (its inputs: {})",
                    plan.name,
                    known.join(", ")
                ),
            ));
        };
        // Parsed requests hold this already; it is what makes the row slicing below safe.
        let count = element_count(&input.shape);
        if count != Some(input.data.len()) {
            return Err(malformed(
                format!("inputs[{i}] ({name}).data"),
                format!("{} elements do not fill the shape", input.data.len()),
            ));
        }
        let this = if input.shape.len() == g.ty.shape.len() + 1 {
            let rows = input.shape[0];
            let limit = runtime.max_in_flight();
            if rows == 0 {
                return Err(malformed(shape_field(), "a batch of 0 rows".into()));
            }
            if input.shape[1..].contains(&0) {
                return Err(malformed(
                    shape_field(),
                    format!("rows of {:?} hold no elements", &input.shape[1..]),
                ));
            }
            if rows > limit {
                return Err(malformed(
                    shape_field(),
                    format!(
                        "a batch of {rows} rows passes the graph's limit of {limit} requests in \
                         flight (each row is one request)"
                    ),
                ));
            }
            (true, rows)
        } else if input.shape.len() == g.ty.shape.len() {
            (false, 1)
        } else {
            return Err(malformed(
                shape_field(),
                format!(
                    "{} has rank {}; `{}` takes {} or, with a batch dimension first, rank {}",
                    quote(&format!("{:?}", input.shape)),
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
                    shape_field(),
                    "every input must have the same batch size".into(),
                ))
            }
            _ => {}
        }
    }
    let (batched, rows) = batch.unwrap_or((false, 1));
    if rows > 1 && names_a_sequence(request.parameters.as_deref()) {
        // Sequence parameters apply to every row, so rows 2.. would restart or continue the same
        // sequence out of order; Triton refuses sequence requests of more than one row too.
        return Err(malformed(
            "parameters.sequence_id".into(),
            format!("a request of a sequence carries one row, not {rows}"),
        ));
    }
    if let Some(p) = &request.parameters {
        let allowed = request.body_bytes.max(PARAMETERS_MAX_BYTES);
        let carried = rows.checked_mul(p.len());
        if carried.is_none_or(|c| c > allowed) {
            return Err(malformed(
                "parameters".into(),
                format!(
                    "{} bytes travel with each of {rows} rows, more than the {allowed} bytes one \
                     request may make the graph carry",
                    p.len()
                ),
            ));
        }
    }
    Ok((batched, rows))
}

/// Runs `request` through `runtime` as [`infer_outputs`] does and writes the reply as JSON with
/// the binary extension: its body and, when any output is binary, the JSON header's length.
///
/// # Errors
/// An [`OipError`] naming what was wrong with the request, or the graph's own error.
pub async fn run_infer(
    runtime: &GraphRuntime,
    request: InferRequest,
    timeout: Duration,
) -> Result<(Vec<u8>, Option<usize>), OipError> {
    Ok(infer_outputs(runtime, request, timeout).await?.encode()?)
}

/// A request's answer before any transport writes it: JSON with the binary extension
/// ([`run_infer`]) or protobuf (the gRPC transport).
#[derive(Debug)]
pub struct InferOutputs {
    /// The model (graph) that answered.
    pub model: String,
    /// The request's id, echoed.
    pub id: Option<String>,
    /// The parameters as they came out of the graph.
    pub parameters: Map<String, Value>,
    /// The outputs asked for, in the order asked, each stacked over the request's rows.
    pub outputs: Vec<ReplyTensor>,
}

impl InferOutputs {
    /// The reply as JSON with the binary extension: its body and, when any output is binary, the
    /// JSON header's length.
    ///
    /// # Errors
    /// When an output cannot be written (see [`super::ReplyError`]).
    pub fn encode(self) -> Result<(Vec<u8>, Option<usize>), super::ReplyError> {
        encode_infer_reply(
            &self.model,
            self.id.as_deref(),
            self.parameters,
            &self.outputs,
        )
    }
}

/// Splits `request` into per-row submissions to `runtime` (a leading batch dimension is
/// optional), awaits every row within `timeout`, and stacks the rows' outputs. A row still
/// waiting for a model node when `timeout` has passed is not run.
///
/// # Errors
/// An [`OipError`] naming what was wrong with the request, or the graph's own error.
pub async fn infer_outputs(
    runtime: &GraphRuntime,
    mut request: InferRequest,
    timeout: Duration,
) -> Result<InferOutputs, OipError> {
    super::shared_memory::refuse_unserved(&request).map_err(OipError::Malformed)?;
    let tracing = request.trace.take();
    let path = PathRecording::begin(runtime, tracing.as_ref());
    let trace_id = tracing
        .as_ref()
        .and_then(|t| t.sampled_trace_id())
        .or_else(|| path.as_ref().map(PathRecording::trace_id));
    let plan = runtime.plan();
    let (batched, rows) = check_rows(runtime, &request).inspect_err(|e| {
        debug!(graph = %plan.name, error = %e, "Rejected an infer request.");
    })?;
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
            return Err(OipError::UnknownOutput {
                graph: plan.name.clone(),
                output: quote(o).into_owned(),
            });
        }
    }
    // `rows` is at most the in-flight limit (check_rows).
    let mut receivers = Vec::with_capacity(rows);
    // Request parameters travel through the graph with every row (later stages read them); the
    // rows share one copy. So does the deadline: a model node does not run a row nobody waits
    // for any more.
    let parameters = request.parameters.clone();
    let deadline = std::time::Instant::now().checked_add(timeout);
    let submit = |inputs: Vec<NamedTensor>| -> Result<oneshot::Receiver<_>, OipError> {
        let (tx, rx) = oneshot::channel();
        runtime.submit_traced(
            inputs,
            parameters.clone(),
            deadline,
            trace_id,
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
                    // Within the element count check_rows matched to the data.
                    let n: usize = shape.iter().product();
                    NamedTensor {
                        name: i.name.clone(),
                        tensor: Tensor {
                            shape,
                            data: i.data.slice(row * n..(row + 1) * n),
                        },
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
    .await;
    if let Some(t) = &tracing {
        t.finish(runtime, answers.as_deref().ok());
    }
    if let (Some(p), Ok(answers)) = (&path, &answers) {
        p.finish(runtime, request.id.as_deref(), answers);
    }
    let answers = answers.map_err(|_| OipError::Deadline {
        ms: timeout.as_millis() as u64,
    })?;
    // A row a model node did not run because this deadline passed is answered as the deadline.
    let mut responses =
        answers
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| match e {
                RequestError::Expired { .. } => OipError::Deadline {
                    ms: timeout.as_millis() as u64,
                },
                e => OipError::Request(e),
            })?;
    // Echo the parameters as they came out of the graph, not as they went in.
    let echoed = responses
        .first()
        .and_then(|r| r.parameters.as_deref())
        .and_then(|p| serde_json::from_str::<Map<String, Value>>(p).ok())
        .unwrap_or_default();
    let mut reply = Vec::with_capacity(outputs.len());
    for (name, binary) in outputs {
        // Output names are distinct (the parser refuses a name asked twice): move, not copy.
        let parts = responses.iter_mut().filter_map(|r| {
            let at = r.outputs.iter().position(|o| o.name == name)?;
            Some(r.outputs.swap_remove(at).tensor)
        });
        let Some(mut tensor) = stack(parts, &name)? else {
            continue;
        };
        if batched {
            tensor.shape.insert(0, rows);
        }
        reply.push(ReplyTensor {
            name,
            tensor,
            binary,
            region: None,
        });
    }
    Ok(InferOutputs {
        model: plan.name.clone(),
        id: request.id,
        parameters: echoed,
        outputs: reply,
    })
}

/// The rows' tensors of one output, stacked in order into the first; `None` when there are none.
///
/// # Errors
/// [`OipError::RowsDisagree`] when two rows' tensors differ in shape or element type (a model
/// whose output shape depends on its input's values): they do not stack into one tensor.
fn stack(mut parts: impl Iterator<Item = Tensor>, name: &str) -> Result<Option<Tensor>, OipError> {
    let Some(mut stacked) = parts.next() else {
        return Ok(None);
    };
    for (row, part) in parts.enumerate() {
        let disagree = |detail: String| OipError::RowsDisagree {
            output: quote(name).into_owned(),
            detail,
        };
        if part.shape != stacked.shape {
            return Err(disagree(format!(
                "row 0 gave shape {:?}, row {} shape {:?}",
                stacked.shape,
                row + 1,
                part.shape
            )));
        }
        stacked
            .data
            .extend(part.data)
            .map_err(|e| disagree(format!("row {}: {e}", row + 1)))?;
    }
    Ok(Some(stacked))
}
