//! A job's rows cut apart across calls, and their answers joined back into the job's one answer.
//!
//! The model operator hands a padded node jobs of several rows (the requests of one input batch),
//! and those rows may be of very different lengths. When the node's cost model cuts a batch by
//! length (`call_cost.rs`), a job whose rows fall into different calls becomes one single-row part
//! per row; each part is answered by its own call, and the job's `done` is called once, when the
//! last part is in: with every row's outputs in the job's row order, or with the first error.

use std::sync::{Arc, Mutex};

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

use super::{Job, JobDone};
use crate::model::ExecError;

/// What the parts of one job have answered so far.
struct Parts {
    /// Per row, its outputs once its part is answered.
    rows: Vec<Option<Vec<TensorColumn>>>,
    /// Parts not answered yet.
    left: usize,
    /// The first error a part got.
    error: Option<ExecError>,
    /// The job's answer, taken when the last part is in.
    done: Option<JobDone>,
    /// Output names, in order (to name the joined columns).
    names: Arc<[String]>,
    node: String,
}

/// `job` as one single-row part per row, each with the job's times and trace; their answers
/// join into `job`'s one answer (outputs named `names`, errors for `node`).
pub(super) fn into_rows(job: Job, names: Arc<[String]>, node: &str) -> Vec<Job> {
    let rows = job.rows();
    let parts = Arc::new(Mutex::new(Parts {
        rows: vec![None; rows],
        left: rows,
        error: None,
        done: Some(job.done),
        names,
        node: node.to_string(),
    }));
    (0..rows)
        .map(|row| {
            let parts = Arc::clone(&parts);
            Job {
                inputs: job.inputs.iter().map(|c| c.slice(row, 1)).collect(),
                enqueued_at: job.enqueued_at,
                deadline: job.deadline,
                trace: job.trace.clone(),
                done: Box::new(move |outcome| answer_part(&parts, row, outcome)),
            }
        })
        .collect()
}

/// Keeps row `row`'s outcome; the last part in answers the job.
fn answer_part(parts: &Mutex<Parts>, row: usize, outcome: Result<Vec<TensorColumn>, ExecError>) {
    let mut p = parts.lock().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(columns) => p.rows[row] = Some(columns),
        Err(e) => {
            p.error.get_or_insert(e);
        }
    }
    p.left = p.left.saturating_sub(1);
    if p.left > 0 {
        return;
    }
    let Some(done) = p.done.take() else {
        return;
    };
    let answer = match p.error.take() {
        Some(e) => Err(e),
        None => join(&p.rows, &p.names).map_err(|message| ExecError::Inference {
            node: p.node.clone(),
            message,
        }),
    };
    drop(p);
    done(answer);
}

/// The rows' single-row outputs as one column per output, rows in order.
fn join(rows: &[Option<Vec<TensorColumn>>], names: &[String]) -> Result<Vec<TensorColumn>, String> {
    let mut columns = Vec::with_capacity(names.len());
    for (k, name) in names.iter().enumerate() {
        let mut shapes = Vec::with_capacity(rows.len());
        let mut data: Option<TensorData> = None;
        for row in rows {
            let column = row
                .as_ref()
                .and_then(|r| r.get(k))
                .ok_or("a row answered without its outputs")?;
            shapes.push(column.row_shape(0));
            match &mut data {
                None => data = Some(column.data()),
                Some(d) => d.extend(column.data()).map_err(|e| e.to_string())?,
            }
        }
        let data = data.ok_or("a job without rows")?;
        columns.push(TensorColumn::from_shapes(name, shapes, data).map_err(|e| e.to_string())?);
    }
    Ok(columns)
}
