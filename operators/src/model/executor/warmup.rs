//! A model node's warm-up calls ([`weir_engine::warmup`]): each sample's tensors made once per
//! executor — zeros, seeded random values, or given elements, repeated for the sample's rows and
//! given the batch dimension the model takes — then run `runs` times on every session before the
//! session serves. A failed call fails the executor's start (the graph does not become ready),
//! naming the node and the sample; calls are counted apart from served ones
//! ([`LoadStats::record_warmup`]).

use std::borrow::Cow;

use ort::session::{Session, SessionInputValue};
use rand::rngs::StdRng;
use rand::SeedableRng;
use weir_engine::tensor::TensorData;
use weir_engine::validate::CallShape;
use weir_engine::warmup::{WarmupInputs, WarmupSample, WarmupValues};

use super::{ExecutorConfig, LoadStats};
use crate::model::ort_values::{input_value, CallInput};
use crate::model::synthetic::random_data;
use crate::model::ExecError;

/// One sample, ready to call: per model input its name, full call shape and elements.
struct PreparedSample {
    name: String,
    runs: u32,
    inputs: Vec<(String, Vec<usize>, CallInput<'static>)>,
}

/// Every warm-up sample of a node, made once and run on each of its sessions.
pub(crate) struct WarmupCalls {
    node: String,
    samples: Vec<PreparedSample>,
}

impl WarmupCalls {
    /// The node's samples as calls; `None` when it has none.
    ///
    /// # Errors
    /// [`ExecError::Warmup`] for a sample whose file was never read, or whose given elements do
    /// not fill its shape.
    pub(crate) fn prepare(config: &ExecutorConfig) -> Result<Option<WarmupCalls>, ExecError> {
        if config.warmup.is_empty() {
            return Ok(None);
        }
        let samples = config
            .warmup
            .iter()
            .map(|s| prepare_sample(s, config.call))
            .collect::<Result<_, String>>()
            .map_err(|message| ExecError::Warmup {
                node: config.node.clone(),
                message,
            })?;
        Ok(Some(WarmupCalls {
            node: config.node.clone(),
            samples,
        }))
    }

    /// Runs every sample's calls on `session` (one with `threads` intra-op threads), counting
    /// them in `stats`.
    ///
    /// # Errors
    /// [`ExecError::Warmup`] naming the sample, with ONNX Runtime's message.
    pub(crate) fn run_on(&self, session: &mut Session, stats: &LoadStats) -> Result<(), ExecError> {
        for sample in &self.samples {
            for _ in 0..sample.runs {
                let fail = |message: String| ExecError::Warmup {
                    node: self.node.clone(),
                    message: format!("sample `{}`: {message}", sample.name),
                };
                let mut values: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
                    Vec::with_capacity(sample.inputs.len());
                for (name, shape, data) in &sample.inputs {
                    let value = input_value(data, shape.clone())
                        .map_err(|e| fail(format!("input `{name}`: {e}")))?;
                    values.push((name.as_str().into(), value));
                }
                drop(session.run(values).map_err(|e| fail(e.to_string()))?);
                stats.record_warmup();
            }
        }
        Ok(())
    }
}

/// `sample`'s tensors for a model called as `call`.
fn prepare_sample(sample: &WarmupSample, call: CallShape) -> Result<PreparedSample, String> {
    let WarmupInputs::Tensors(inputs) = &sample.inputs else {
        return Err(format!(
            "sample `{}`: its file was not read (a graph loaded without its loader)",
            sample.name
        ));
    };
    let rows = match call {
        CallShape::Fixed(n) => n,
        CallShape::Unbatched => 1,
        CallShape::Batched | CallShape::PerRequest => sample.rows.max(1) as usize,
    };
    let prepared = inputs
        .iter()
        .map(|input| {
            let count: usize = input.shape.iter().product();
            let one = match &input.values {
                WarmupValues::Zeros => TensorData::zeros(input.dtype, count),
                WarmupValues::Random { seed } => {
                    random_data(input.dtype, count, &mut StdRng::seed_from_u64(*seed))
                }
                WarmupValues::Given(data) if data.len() == count && data.dtype() == input.dtype => {
                    data.clone()
                }
                WarmupValues::Given(data) => {
                    return Err(format!(
                    "sample `{}`: input `{}` holds {} {} elements; its shape {:?} takes {count} {}",
                    sample.name,
                    input.name,
                    data.len(),
                    data.dtype(),
                    input.shape,
                    input.dtype
                ))
                }
            };
            let mut shape = input.shape.clone();
            let mut data = one.clone();
            if call.has_batch_dim() {
                shape.insert(0, rows);
                for _ in 1..rows {
                    data.extend(one.clone()).map_err(|e| e.to_string())?;
                }
            }
            Ok((input.name.clone(), shape, CallInput::Owned(data)))
        })
        .collect::<Result<_, String>>()?;
    Ok(PreparedSample {
        name: sample.name.clone(),
        runs: sample.runs,
        inputs: prepared,
    })
}
