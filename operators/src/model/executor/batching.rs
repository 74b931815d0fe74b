//! Dynamic batching and the call itself: a session thread takes one job and, for a model with a
//! dynamic batch dimension, more until `max_batch` rows or the first job's `max_delay`; the rows
//! run as one call (inputs borrowed when one job covers them, concatenated otherwise) and the
//! outputs are sliced back per job without a copy. A model whose batch dimension is fixed to 1
//! runs one call per row.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::Ordering;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{DType, TensorData};

use super::{ExecutorConfig, Job, LoadStats};
use crate::model::ort_env::output_tensor;
use crate::model::ExecError;

/// Counts `first` as dequeued and, for a batched model, takes more jobs until `max_batch` rows or
/// the first job's deadline; a job that does not fit is left in `carried`.
pub(super) fn gather_batch(
    first: Job,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
    carried: &mut Option<Job>,
) -> (Vec<Job>, usize) {
    let max_batch = if config.batched {
        config.max_batch.max(1)
    } else {
        1
    };
    stats.dequeued.fetch_add(1, Ordering::Relaxed);
    let mut rows = first.rows();
    let deadline = first.enqueued_at + config.max_delay;
    let mut jobs = vec![first];
    while config.batched && rows < max_batch {
        let next = if config.max_delay.is_zero() {
            rx.try_recv().map_err(|_| RecvTimeoutError::Timeout)
        } else {
            rx.recv_deadline(deadline)
        };
        match next {
            Ok(j) => {
                stats.dequeued.fetch_add(1, Ordering::Relaxed);
                if rows + j.rows() > max_batch {
                    *carried = Some(j);
                    break;
                }
                rows += j.rows();
                jobs.push(j);
            }
            Err(_) => break,
        }
    }
    // A carried job was already counted as dequeued; balance it when it is taken again.
    if carried.is_some() {
        stats.dequeued.fetch_sub(1, Ordering::Relaxed);
    }
    (jobs, rows)
}

/// Input data for one call: borrowed when one job covers it, gathered otherwise.
enum Gathered<'a> {
    F32(Cow<'a, [f32]>),
    I64(Cow<'a, [i64]>),
}

/// Input `input` of `jobs` for one call: `rows` of the one job's column, or every job's column.
fn gather(jobs: &[Job], input: usize, rows: Range<usize>) -> Gathered<'_> {
    match jobs[0].inputs[input].dtype() {
        DType::F32 => Gathered::F32(gather_as(jobs, input, rows, TensorColumn::f32_values)),
        DType::I64 => Gathered::I64(gather_as(jobs, input, rows, TensorColumn::i64_values)),
    }
}

/// [`gather`] for one element type, read from each column by `values`: borrowed when one job
/// covers the call, concatenated otherwise.
fn gather_as<T: Copy>(
    jobs: &[Job],
    input: usize,
    rows: Range<usize>,
    values: fn(&TensorColumn) -> Option<&[T]>,
) -> Cow<'_, [T]> {
    match jobs {
        [only] => {
            let column = &only.inputs[input];
            let n = column.row_len();
            Cow::Borrowed(&values(column).unwrap_or(&[])[rows.start * n..rows.end * n])
        }
        _ => Cow::Owned(
            jobs.iter()
                .flat_map(|j| values(&j.inputs[input]).unwrap_or(&[]).iter().copied())
                .collect(),
        ),
    }
}

/// Runs one call over `rows` rows whose inputs are `data`; returns each output's per-row shape and
/// elements.
fn infer(
    session: &mut Session,
    config: &ExecutorConfig,
    data: &[Gathered<'_>],
    shapes: &[Vec<usize>],
    rows: usize,
) -> Result<Vec<(Vec<usize>, TensorData)>, ExecError> {
    let wrap = |e: ort::Error| ExecError::Inference {
        node: config.node.clone(),
        message: e.to_string(),
    };
    let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(data.len());
    for ((name, d), shape) in config.inputs.iter().zip(data).zip(shapes) {
        let mut full = Vec::with_capacity(shape.len() + 1);
        full.push(rows);
        full.extend_from_slice(shape);
        let value: SessionInputValue<'_> = match d {
            Gathered::F32(v) => TensorRef::from_array_view((full, v.as_ref()))
                .map_err(wrap)?
                .into(),
            Gathered::I64(v) => TensorRef::from_array_view((full, v.as_ref()))
                .map_err(wrap)?
                .into(),
        };
        inputs.push((name.as_str().into(), value));
    }
    let outputs = session.run(inputs).map_err(wrap)?;
    let mut result = Vec::with_capacity(config.outputs.len());
    for (name, dtype) in &config.outputs {
        let (shape, data) = output_tensor(&outputs, name, *dtype, &config.node)?;
        if shape.first().copied() != Some(rows as i64) {
            return Err(ExecError::Inference {
                node: config.node.clone(),
                message: format!("output `{name}` has shape {shape:?} for a batch of {rows}"),
            });
        }
        result.push((
            shape[1..].iter().map(|&d| d.max(0) as usize).collect(),
            data,
        ));
    }
    Ok(result)
}

pub(super) fn run_batched(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
    rows: usize,
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let shapes: Vec<Vec<usize>> = jobs[0].inputs.iter().map(|c| c.shape().to_vec()).collect();
    let data: Vec<Gathered<'_>> = (0..config.inputs.len())
        .map(|i| gather(jobs, i, 0..jobs[0].rows()))
        .collect();
    let outputs = infer(session, config, &data, &shapes, rows)?;
    let columns = outputs
        .into_iter()
        .zip(&config.outputs)
        .map(|((shape, data), (name, _))| to_column(config, name, shape, rows, data))
        .collect::<Result<Vec<_>, _>>()?;
    let mut per_job = Vec::with_capacity(jobs.len());
    let mut offset = 0;
    for job in jobs {
        let n = job.rows();
        per_job.push(columns.iter().map(|c| c.slice(offset, n)).collect());
        offset += n;
    }
    Ok(per_job)
}

pub(super) fn run_per_row(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let mut per_job = Vec::with_capacity(jobs.len());
    for job in jobs {
        let shapes: Vec<Vec<usize>> = job.inputs.iter().map(|c| c.shape().to_vec()).collect();
        let mut acc: Vec<Option<(Vec<usize>, TensorData)>> = vec![None; config.outputs.len()];
        for row in 0..job.rows() {
            let single = std::slice::from_ref(job);
            let data: Vec<Gathered<'_>> = (0..config.inputs.len())
                .map(|i| gather(single, i, row..row + 1))
                .collect();
            for (slot, (shape, data)) in acc
                .iter_mut()
                .zip(infer(session, config, &data, &shapes, 1)?)
            {
                match slot {
                    None => *slot = Some((shape, data)),
                    Some((_, TensorData::F32(all))) => {
                        if let TensorData::F32(v) = data {
                            all.extend(v);
                        }
                    }
                    Some((_, TensorData::I64(all))) => {
                        if let TensorData::I64(v) = data {
                            all.extend(v);
                        }
                    }
                }
            }
        }
        let columns = acc
            .into_iter()
            .zip(&config.outputs)
            .map(|(slot, (name, dtype))| {
                let (shape, data) = slot.unwrap_or((
                    Vec::new(),
                    match dtype {
                        DType::F32 => TensorData::F32(Vec::new()),
                        DType::I64 => TensorData::I64(Vec::new()),
                    },
                ));
                to_column(config, name, shape, job.rows(), data)
            })
            .collect::<Result<Vec<_>, _>>()?;
        per_job.push(columns);
    }
    Ok(per_job)
}

fn to_column(
    config: &ExecutorConfig,
    name: &str,
    shape: Vec<usize>,
    rows: usize,
    data: TensorData,
) -> Result<TensorColumn, ExecError> {
    TensorColumn::from_data(name, shape, rows, data).map_err(|e| ExecError::Inference {
        node: config.node.clone(),
        message: e.to_string(),
    })
}
