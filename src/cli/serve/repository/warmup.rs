//! Warm-up (Triton's `model_warmup`) as the model node's own warm-up
//! ([`weir_engine::warmup`]): each sample becomes a [`WarmupSample`] of the version's model node,
//! run `count` times with `batch_size` rows per call on every session before the version's
//! graph has started, so before it is swapped into the model table. As in Triton, where each
//! instance runs the samples before the model is ready; a call that fails fails the version's
//! load, naming the node and the sample.
//!
//! The samples were checked when the repository was read (`weir_triton::warmup`: names, types,
//! fixed dims, bytes counted and capped); a file's bytes are decoded by the binary extension's
//! decoder, so a file whose size is not the tensor's is refused here.

use anyhow::{anyhow, Result};
use weir_connectors::oip::{input_from_parts, InputContents};
use weir_engine::plan::{NodeKind, Plan};
use weir_engine::warmup::{WarmupInput as PlannedInput, WarmupInputs, WarmupSample, WarmupValues};
use weir_triton::warmup::{Warmup, WarmupData, WarmupInput};

use crate::{DType, TensorData};

/// Gives every model node of `plan` (a repository model's one-node graph) `warmups`.
///
/// # Errors
/// Naming the sample, when its data cannot be made.
pub(super) fn attach(plan: &mut Plan, warmups: &[Warmup]) -> Result<()> {
    if warmups.is_empty() {
        return Ok(());
    }
    let samples: Vec<WarmupSample> = warmups
        .iter()
        .map(|sample| {
            let inputs = sample
                .inputs
                .iter()
                .map(input)
                .collect::<Result<_>>()
                .map_err(|e| anyhow!("warm-up sample `{}`: {e:#}", sample.name))?;
            Ok(WarmupSample {
                name: sample.name.clone(),
                runs: sample.count.max(1),
                rows: sample.batch_size.max(1),
                inputs: WarmupInputs::Tensors(inputs),
            })
        })
        .collect::<Result<_>>()?;
    for node in &mut plan.nodes {
        if let NodeKind::Model(m) = &mut node.node.kind {
            m.warmup.clone_from(&samples);
        }
    }
    Ok(())
}

/// One warm-up input as the node's warm-up takes it.
fn input(input: &WarmupInput) -> Result<PlannedInput> {
    let values = match &input.data {
        WarmupData::Zeros => WarmupValues::Zeros,
        WarmupData::Random if input.dtype == DType::Bytes => WarmupValues::Zeros,
        WarmupData::Random => WarmupValues::Random { seed: 0 },
        WarmupData::File(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow!("input `{}`: {}: {e}", input.name, path.display()))?;
            WarmupValues::Given(decode(input, &bytes)?)
        }
    };
    Ok(PlannedInput {
        name: input.name.clone(),
        dtype: input.dtype,
        shape: input.dims.clone(),
        values,
    })
}

/// `bytes` as `input`'s elements, by the binary extension's rules.
fn decode(input: &WarmupInput, bytes: &[u8]) -> Result<TensorData> {
    let shape: Vec<i64> = input
        .dims
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect();
    let decoded = input_from_parts(
        &format!("input `{}`", input.name),
        &input.name,
        input.dtype.oip_name(),
        &shape,
        InputContents::Raw(bytes),
        bytes.len(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok(decoded.data)
}
