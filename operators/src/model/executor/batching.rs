//! Dynamic batching and the call itself: a session thread takes one job and, for a model with a
//! dynamic batch dimension, the jobs already queued behind it up to `max_batch` rows.
//!
//! Under `BatchWait::WhenBusy` (the default) a session of an executor with several takes its
//! share of the queue, `⌈queued / sessions⌉` jobs, and leaves the rest to the others: a free
//! session takes them at once, a busy one as soon as its call ends. Taking the whole queue into
//! one call would leave the other sessions idle while that call runs, and on sessions with cores
//! of their own (CPU) rows cost no less in one call than in several (past a size, more:
//! `row_cost.rs`, which caps a gather at the size measured cheapest per row); under load the
//! queue, and with it each share, grows, so batches still form. It waits for more, until
//! `max_batch` rows or the first job's `max_delay`, only while every session of the executor is running a
//! call, i.e. while this one could not run anyway (its session held by a call the dataflow
//! worker started): waiting while a session is free would idle it. So an idle node runs a lone
//! job at once, and no job waits for company that is not coming. `BatchWait::Always`, the fixed
//! timer, takes the whole queue and always waits.
//!
//! The rows run as one call and the outputs go back per job. Jobs join a call when their rows
//! have one shape per input (inputs borrowed when one job covers them, concatenated otherwise,
//! and the outputs sliced back per job without a copy), or, under padded batching, when they
//! differ only along the padded axes (`padding.rs`). A model whose batch dimension is fixed to
//! 1, a job whose rows have shapes of their own, and a model without a batch dimension run one
//! call per row; the last with each row's tensors exactly as they are.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use ort::session::{Session, SessionInputValue};
use weir_engine::batch::TensorColumn;
use weir_engine::spec::BatchWait;
use weir_engine::tensor::TensorData;
use weir_engine::validate::CallShape;

use super::padding::Padding;
use super::split::into_rows;
use super::{ExecutorConfig, Job, LoadStats};
use crate::model::ort_values::{input_value, output_tensor, CallInput};
use crate::model::ExecError;

/// Counts `first` as dequeued and, for a batched model, takes the jobs queued behind it (this
/// session's share of them, one of `sessions` taking from `rx`) and (as [`waits_for_company`]
/// says) those arriving until the first job's batching delay, up to `max_batch` rows; a job that
/// does not fit is left in `carried`. Jobs past their deadline are answered expired on the way
/// and left out (none may be left).
pub(super) fn gather_batch(
    first: Job,
    config: &ExecutorConfig,
    stats: &LoadStats,
    rx: &Receiver<Job>,
    carried: &mut Option<Job>,
    sessions: usize,
) -> (Vec<Job>, usize) {
    let max_batch = if config.call.batched() {
        stats.rows_for_gather(config.max_batch.max(1))
    } else {
        1
    };
    stats.dequeued.fetch_add(1, Ordering::Relaxed);
    // A job nobody waits for any more is answered, not run (`crate::model::expiry`).
    let Some(first) = first.unless_expired(&config.node, Instant::now()) else {
        return (Vec::new(), 0);
    };
    let mut rows = first.rows();
    let gather_until = first.enqueued_at + config.max_delay;
    let key = call_key(config, &first);
    let batched = config.call.batched() && key.is_some();
    let share = queue_share(config, sessions, rx.len());
    let mut jobs = vec![first];
    while batched && rows < max_batch {
        let waits = waits_for_company(config, stats, sessions);
        if jobs.len() >= share && !waits {
            break;
        }
        let next = match rx.try_recv() {
            Ok(j) => Ok(j),
            Err(_) if waits => rx.recv_deadline(gather_until),
            Err(_) => Err(RecvTimeoutError::Timeout),
        };
        match next {
            Ok(j) => {
                stats.dequeued.fetch_add(1, Ordering::Relaxed);
                let Some(j) = j.unless_expired(&config.node, Instant::now()) else {
                    continue;
                };
                if rows + j.rows() > max_batch || call_key(config, &j) != key {
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

/// The most jobs one of `sessions` sessions takes (the first included) of the `queued` behind
/// its first job without waiting: under `BatchWait::WhenBusy` its share, `⌈(queued + 1) /
/// sessions⌉`; the whole queue when it is the only session or under `Always`.
fn queue_share(config: &ExecutorConfig, sessions: usize, queued: usize) -> usize {
    match config.wait {
        BatchWait::WhenBusy if sessions > 1 => (queued + 1).div_ceil(sessions),
        _ => usize::MAX,
    }
}

/// Whether a batch with nothing more queued waits (up to its delay) for jobs to arrive: under
/// `BatchWait::WhenBusy` only while each of the executor's `sessions` runs a call (so this one
/// could not run yet either), under `Always` always.
fn waits_for_company(config: &ExecutorConfig, stats: &LoadStats, sessions: usize) -> bool {
    !config.max_delay.is_zero()
        && match config.wait {
            BatchWait::WhenBusy => stats.calls_running() >= sessions.max(1) as u64,
            BatchWait::Always => true,
        }
}

/// What jobs must share to run in one call: per input, the rows' shape (with the padded axes left
/// out under padding). `None` for a job whose rows cannot share a call (it runs row by row).
fn call_key(config: &ExecutorConfig, job: &Job) -> Option<Vec<Vec<usize>>> {
    match &config.pad {
        Some(padding) => padding.call_key(job),
        None => job
            .inputs
            .iter()
            .map(|c| c.uniform_shape().map(<[usize]>::to_vec))
            .collect(),
    }
}

/// One call to make: its jobs, their rows, and for a padded node the length the call pads to
/// (its cost is then recorded for the node's cost model).
pub(super) struct Call {
    pub(super) jobs: Vec<Job>,
    pub(super) rows: usize,
    pub(super) padded_len: Option<usize>,
}

/// Cuts a batch gathered by [`gather_batch`] into the calls it runs as: one call, except on a
/// padded node whose batch holds rows of different lengths and whose `pad.when` is `cheaper`:
/// then its rows are cut as its cost model predicts cheapest (`call_cost.rs`), in ascending
/// length; a job whose rows fall into different calls is cut into rows (`split.rs`).
pub(super) fn form_calls(
    config: &ExecutorConfig,
    stats: &LoadStats,
    jobs: Vec<Job>,
    rows: usize,
) -> Vec<Call> {
    let padding = match (&config.pad, jobs.first()) {
        (Some(padding), Some(first))
            if config.call.batched() && call_key(config, first).is_some() =>
        {
            padding
        }
        _ => {
            return vec![Call {
                jobs,
                rows,
                padded_len: None,
            }]
        }
    };
    // Every row with its job and length; the choice is made per row.
    let units: Vec<(usize, usize)> = jobs
        .iter()
        .enumerate()
        .flat_map(|(j, job)| (0..job.rows()).map(move |r| (j, padding.row_length(job, r))))
        .map(|(j, len)| (j, len.unwrap_or(0)))
        .collect();
    let lengths: Vec<(usize, usize)> = units.iter().map(|&(_, len)| (1, len)).collect();
    let groups = stats.choose_calls(padding.when, &lengths);
    let mut group_of = vec![0usize; units.len()];
    for (g, group) in groups.iter().enumerate() {
        for &u in group {
            group_of[u] = g;
        }
    }
    let mut calls: Vec<Call> = groups
        .iter()
        .map(|group| Call {
            jobs: Vec::new(),
            rows: group.len(),
            padded_len: group.iter().map(|&u| units[u].1).max(),
        })
        .collect();
    let names: std::sync::Arc<[String]> = config.outputs.iter().map(|(n, _)| n.clone()).collect();
    let mut first_unit = 0;
    for job in jobs {
        let own = &group_of[first_unit..first_unit + job.rows()];
        first_unit += job.rows();
        match own.first() {
            Some(&g) if own.iter().all(|&x| x == g) => calls[g].jobs.push(job),
            _ => {
                let own = own.to_vec();
                for (part, g) in into_rows(job, std::sync::Arc::clone(&names), &config.node)
                    .into_iter()
                    .zip(own)
                {
                    calls[g].jobs.push(part);
                }
            }
        }
    }
    calls.retain(|c| !c.jobs.is_empty());
    calls
}

/// Runs `jobs` (`rows` rows in all, gathered by [`gather_batch`]) on `session`: as one call when
/// the model is batched and they share a call, padded when their shapes differ; row by row
/// otherwise. Returns each job's output columns, and how many calls were made.
pub(super) fn run(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
    rows: usize,
) -> (Result<Vec<Vec<TensorColumn>>, ExecError>, usize) {
    let Some(first) = jobs.first() else {
        return (Ok(Vec::new()), 0);
    };
    if !config.call.batched() || call_key(config, first).is_none() {
        return (run_per_row(session, config, jobs), rows);
    }
    let same_shapes = jobs.iter().all(|j| {
        j.inputs
            .iter()
            .zip(&first.inputs)
            .all(|(a, b)| a.uniform_shape().is_some() && a.uniform_shape() == b.uniform_shape())
    });
    let outputs = match &config.pad {
        Some(padding) if !same_shapes => run_padded(session, config, padding, jobs, rows),
        _ => run_batched(session, config, jobs, rows),
    };
    (outputs, 1)
}

/// Input `input` of `jobs` for one call: rows `rows` of the one job's column (borrowed), or every
/// job's column gathered.
fn gather(jobs: &[Job], input: usize, rows: Range<usize>) -> CallInput<'_> {
    match jobs {
        [only] => {
            let column = &only.inputs[input];
            let start = column.row_range(rows.start).start;
            let end = if rows.is_empty() {
                start
            } else {
                column.row_range(rows.end - 1).end
            };
            CallInput::Column(column, start..end)
        }
        _ => {
            let mut data = TensorData::empty(jobs[0].inputs[input].dtype());
            for j in jobs {
                // Same dtype by the node's input type; a mismatch would be a bug upstream.
                let _ = data.extend(j.inputs[input].data());
            }
            CallInput::Owned(data)
        }
    }
}

/// `input` followed by `zeros` zero elements of its type, owned.
fn pad_rows(input: CallInput<'_>, zeros: usize) -> CallInput<'_> {
    let mut data = match input {
        CallInput::Column(column, range) => column.data().slice(range),
        CallInput::Owned(data) => data,
    };
    // Same dtype by construction.
    let _ = data.extend(TensorData::zeros(data.dtype(), zeros));
    CallInput::Owned(data)
}

/// Runs one call whose inputs are `data` of per-row `shapes`: `Some(rows)` rows behind a batch
/// dimension, or (`None`) tensors as they are. Returns each output's per-row shape (its whole
/// shape without a batch dimension) and elements.
fn infer(
    session: &mut Session,
    config: &ExecutorConfig,
    data: &[CallInput<'_>],
    shapes: &[Vec<usize>],
    batch: Option<usize>,
) -> Result<Vec<(Vec<usize>, TensorData)>, ExecError> {
    let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::with_capacity(data.len());
    for ((name, d), shape) in config.inputs.iter().zip(data).zip(shapes) {
        let mut full = Vec::with_capacity(shape.len() + 1);
        full.extend(batch);
        full.extend_from_slice(shape);
        let value = input_value(d, full).map_err(|message| ExecError::Inference {
            node: config.node.clone(),
            message: format!("input `{name}`: {message}"),
        })?;
        inputs.push((name.as_str().into(), value));
    }
    let outputs = session.run(inputs).map_err(|e| ExecError::Inference {
        node: config.node.clone(),
        message: e.to_string(),
    })?;
    let mut result = Vec::with_capacity(config.outputs.len());
    for (name, dtype) in &config.outputs {
        let (shape, data) = output_tensor(&outputs, name, *dtype, &config.node)?;
        let skip = match batch {
            Some(rows) if shape.first().copied() != Some(rows as i64) => {
                return Err(ExecError::Inference {
                    node: config.node.clone(),
                    message: format!("output `{name}` has shape {shape:?} for a batch of {rows}"),
                });
            }
            Some(_) => 1,
            None => 0,
        };
        result.push((
            shape[skip..].iter().map(|&d| d.max(0) as usize).collect(),
            data,
        ));
    }
    Ok(result)
}

/// Jobs whose rows all have one shape per input: one call, outputs sliced back per job.
fn run_batched(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
    rows: usize,
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let shapes: Vec<Vec<usize>> = jobs[0]
        .inputs
        .iter()
        .map(|c| c.uniform_shape().unwrap_or_default().to_vec())
        .collect();
    let mut data: Vec<CallInput<'_>> = (0..config.inputs.len())
        .map(|i| gather(jobs, i, 0..jobs[0].rows()))
        .collect();
    // A batch-specialised build takes exactly its batch: zero rows fill the call, and their
    // outputs are never sliced to a job.
    let call_rows = match config.call {
        CallShape::Fixed(n) if n > rows => {
            for (input, shape) in data.iter_mut().zip(&shapes) {
                let whole =
                    std::mem::replace(input, CallInput::Owned(TensorData::Bool(Vec::new())));
                *input = pad_rows(whole, shape.iter().product::<usize>() * (n - rows));
            }
            n
        }
        _ => rows,
    };
    let outputs = infer(session, config, &data, &shapes, Some(call_rows))?;
    let columns = outputs
        .into_iter()
        .zip(&config.outputs)
        .map(|((shape, data), (name, _))| to_column(config, name, shape, call_rows, data))
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

/// Jobs whose rows differ only along the padded axes: one call on inputs padded to the longest
/// row, each output cut back to every row's own length.
fn run_padded(
    session: &mut Session,
    config: &ExecutorConfig,
    padding: &Padding,
    jobs: &[Job],
    rows: usize,
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let failed = |message: String| ExecError::Inference {
        node: config.node.clone(),
        message,
    };
    let call = padding.pad_inputs(jobs).map_err(&failed)?;
    let lengths = call.lengths;
    let (shapes, data): (Vec<Vec<usize>>, Vec<CallInput<'_>>) = call
        .inputs
        .into_iter()
        .map(|(shape, data)| (shape, CallInput::Owned(data)))
        .unzip();
    let outputs = infer(session, config, &data, &shapes, Some(rows))?;
    let mut per_job: Vec<Vec<TensorColumn>> = jobs.iter().map(|_| Vec::new()).collect();
    for (k, ((shape, data), (name, _))) in outputs.iter().zip(&config.outputs).enumerate() {
        let columns = padding
            .cut_output((name, k), (shape, data), jobs, &lengths)
            .map_err(&failed)?;
        for (job, column) in per_job.iter_mut().zip(columns) {
            job.push(column);
        }
    }
    Ok(per_job)
}

/// Runs each row of each job as its own call, with the row's own shapes (a model whose batch
/// dimension is fixed to 1 or absent, or a job whose rows have shapes of their own).
fn run_per_row(
    session: &mut Session,
    config: &ExecutorConfig,
    jobs: &[Job],
) -> Result<Vec<Vec<TensorColumn>>, ExecError> {
    let mut per_job = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut shapes: Vec<Vec<Vec<usize>>> = vec![Vec::new(); config.outputs.len()];
        let mut acc: Vec<TensorData> = config
            .outputs
            .iter()
            .map(|(_, dtype)| TensorData::empty(*dtype))
            .collect();
        for row in 0..job.rows() {
            let single = std::slice::from_ref(job);
            let row_shapes: Vec<Vec<usize>> = job.inputs.iter().map(|c| c.row_shape(row)).collect();
            let data: Vec<CallInput<'_>> = (0..config.inputs.len())
                .map(|i| gather(single, i, row..row + 1))
                .collect();
            let batch = config.call.has_batch_dim().then_some(1);
            let outputs = infer(session, config, &data, &row_shapes, batch)?;
            for (k, (shape, data)) in outputs.into_iter().enumerate() {
                acc[k].extend(data).map_err(|e| ExecError::Inference {
                    node: config.node.clone(),
                    message: format!("output `{}`: {e}", config.outputs[k].0),
                })?;
                shapes[k].push(shape);
            }
        }
        let columns = acc
            .into_iter()
            .zip(shapes)
            .zip(&config.outputs)
            .map(|((data, shapes), (name, _))| {
                TensorColumn::from_shapes(name, shapes, data).map_err(|e| ExecError::Inference {
                    node: config.node.clone(),
                    message: e.to_string(),
                })
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
