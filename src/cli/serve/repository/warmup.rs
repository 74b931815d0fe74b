//! Warm-up (Triton's `model_warmup`): before a version of a repository model is swapped into the
//! model table, each of its samples runs through the version's own graph — `batch_size` requests
//! of one row, submitted as one group so they reach the model node together, `count` times — so
//! the first client request does not pay for ONNX Runtime's first-call allocations and the
//! graph's first batch. A sample that fails, or does not finish within [`WARMUP_TIMEOUT`], fails
//! the version's load, as in Triton.
//!
//! The samples were checked when the repository was read (`weir_triton::warmup`: names, types,
//! fixed dims, bytes counted and capped); a file's or random data's bytes are decoded by the
//! binary extension's decoder, so a file whose size is not the tensor's is refused here.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use crossbeam_channel::bounded;
use weir_connectors::oip::{input_from_parts, InputContents};
use weir_triton::warmup::{Warmup, WarmupData, WarmupInput};

use crate::{DType, GraphRuntime, NamedTensor, Responder, Tensor, TensorData};

/// Longest one warm-up sample (all its runs) may take.
const WARMUP_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs every sample of `warmups` through `runtime`.
///
/// # Errors
/// Naming the sample, when its data cannot be made or a request of it fails.
pub(super) fn run(runtime: &GraphRuntime, warmups: &[Warmup]) -> Result<()> {
    for sample in warmups {
        let inputs: Vec<NamedTensor> = sample
            .inputs
            .iter()
            .map(tensor)
            .collect::<Result<_>>()
            .map_err(|e| anyhow!("warm-up sample `{}`: {e:#}", sample.name))?;
        let deadline = Instant::now() + WARMUP_TIMEOUT;
        for _ in 0..sample.count.max(1) {
            run_once(runtime, sample, &inputs, deadline)
                .map_err(|e| anyhow!("warm-up sample `{}`: {e:#}", sample.name))?;
        }
        tracing::info!(graph = %runtime.plan().name, sample = %sample.name, runs = sample.count.max(1), "Warmed up.");
    }
    Ok(())
}

/// One run of `sample`: its `batch_size` requests as one group, each answered.
fn run_once(
    runtime: &GraphRuntime,
    sample: &Warmup,
    inputs: &[NamedTensor],
    deadline: Instant,
) -> Result<()> {
    let n = sample.batch_size as usize;
    let (tx, rx) = bounded(n);
    let rows = (0..n)
        .map(|_| {
            let tx = tx.clone();
            let responder: Responder = Box::new(move |r| {
                let _ = tx.send(r.map(|_| ()));
            });
            (inputs.to_vec(), responder)
        })
        .collect();
    drop(tx);
    runtime
        .submit_group(rows)
        .map_err(|e| anyhow!("refused: {e}"))?;
    for _ in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => bail!("failed: {e}"),
            Err(_) => bail!("not answered within {} s", WARMUP_TIMEOUT.as_secs()),
        }
    }
    Ok(())
}

/// The request tensor of one warm-up input.
fn tensor(input: &WarmupInput) -> Result<NamedTensor> {
    let count: usize = input.dims.iter().product();
    let data = match &input.data {
        WarmupData::Zeros => TensorData::zeros(input.dtype, count),
        WarmupData::Random if input.dtype == DType::Bytes => TensorData::zeros(input.dtype, count),
        WarmupData::Random => {
            let width = input.dtype.byte_width().unwrap_or(1);
            let bytes = random_bytes(
                count
                    .checked_mul(width)
                    .ok_or_else(|| anyhow!("too many bytes"))?,
            );
            decode(input, &bytes)?
        }
        WarmupData::File(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow!("input `{}`: {}: {e}", input.name, path.display()))?;
            decode(input, &bytes)?
        }
    };
    Ok(NamedTensor {
        name: input.name.clone(),
        tensor: Tensor {
            shape: input.dims.clone(),
            data,
        },
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

/// `n` pseudo-random bytes (xorshift; warm-up data need not be unpredictable, only not all zero).
fn random_bytes(n: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}
