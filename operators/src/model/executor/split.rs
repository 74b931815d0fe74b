//! A job's rows cut apart across calls, and their answers joined back into the job's one answer.
//!
//! Each part is answered by its own call, and the job's `done` is called once, when the last part
//! is in: with every row's outputs in the job's row order, or with the first error. Two cuts use
//! it. The model operator hands a padded node jobs of several rows (the requests of one input
//! batch), and those rows may be of very different lengths: when the node's cost model cuts a
//! batch by length (`call_cost.rs`), a job whose rows fall into different calls becomes one
//! single-row part per row ([`into_rows`]). And a job that stands for one answer (a remote
//! executor's query) is spread over free sessions as near-equal parts ([`Job::split`],
//! `spread.rs`).

use std::sync::{Arc, Mutex};

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

use super::{Job, JobDone};
use crate::model::ExecError;

/// What the parts of one job have answered so far.
struct Parts {
    /// Per part, its outputs once it is answered.
    parts: Vec<Option<Vec<TensorColumn>>>,
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

impl Job {
    /// This job as up to `parts` jobs of near-equal rows, in row order, whose answers join into
    /// this job's one answer (outputs named `names`, errors for `node`): `done` is called once,
    /// when the last part is answered, with the parts' outputs in row order or the first failure
    /// among them (a part answered with an error still waits for the others). One part, or a job
    /// of one row, is the job itself.
    pub fn split(self, parts: usize, names: Arc<[String]>, node: &str) -> Vec<Job> {
        let rows = self.rows();
        if parts.min(rows) < 2 {
            return vec![self];
        }
        into_parts(self, rows.div_ceil(parts), names, node)
    }
}

/// `job` as one single-row part per row (see [`into_parts`]).
pub(super) fn into_rows(job: Job, names: Arc<[String]>, node: &str) -> Vec<Job> {
    into_parts(job, 1, names, node)
}

/// `job` as parts of `per_part` rows (the last may hold fewer), in row order, each with the job's
/// times and trace; their answers join into `job`'s one answer (outputs named `names`, errors
/// for `node`).
fn into_parts(job: Job, per_part: usize, names: Arc<[String]>, node: &str) -> Vec<Job> {
    let rows = job.rows();
    let per_part = per_part.max(1);
    let count = rows.div_ceil(per_part);
    let parts = Arc::new(Mutex::new(Parts {
        parts: vec![None; count],
        left: count,
        error: None,
        done: Some(job.done),
        names,
        node: node.to_string(),
    }));
    (0..count)
        .map(|part| {
            let offset = part * per_part;
            let len = per_part.min(rows - offset);
            let parts = Arc::clone(&parts);
            Job {
                inputs: job.inputs.iter().map(|c| c.slice(offset, len)).collect(),
                enqueued_at: job.enqueued_at,
                deadline: job.deadline,
                trace: job.trace.clone(),
                done: Box::new(move |outcome| answer_part(&parts, part, outcome)),
            }
        })
        .collect()
}

/// Keeps part `part`'s outcome; the last part in answers the job.
fn answer_part(parts: &Mutex<Parts>, part: usize, outcome: Result<Vec<TensorColumn>, ExecError>) {
    let mut p = parts.lock().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(columns) => p.parts[part] = Some(columns),
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
        None => join(&p.parts, &p.names).map_err(|message| ExecError::Inference {
            node: p.node.clone(),
            message,
        }),
    };
    drop(p);
    done(answer);
}

/// The parts' outputs as one column per output, rows in order (each row keeping its own shape).
fn join(
    parts: &[Option<Vec<TensorColumn>>],
    names: &[String],
) -> Result<Vec<TensorColumn>, String> {
    let mut columns = Vec::with_capacity(names.len());
    for (k, name) in names.iter().enumerate() {
        let mut shapes = Vec::new();
        let mut data: Option<TensorData> = None;
        for part in parts {
            let column = part
                .as_ref()
                .and_then(|p| p.get(k))
                .ok_or("a part answered without its outputs")?;
            shapes.extend((0..column.len()).map(|r| column.row_shape(r)));
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use super::*;

    fn names() -> Arc<[String]> {
        vec!["y".to_string()].into()
    }

    /// A job of `rows` rows of two f32 each (row i holds i and −i), answered on the channel.
    fn job(rows: usize) -> (Job, mpsc::Receiver<Result<Vec<TensorColumn>, ExecError>>) {
        let (tx, rx) = mpsc::channel();
        let data = (0..rows).flat_map(|i| [i as f32, -(i as f32)]).collect();
        let column = TensorColumn::from_data("x", vec![2], rows, TensorData::F32(data)).unwrap();
        let job = Job {
            inputs: vec![column],
            enqueued_at: Instant::now(),
            deadline: None,
            trace: None,
            done: Box::new(move |outcome| {
                let _ = tx.send(outcome);
            }),
        };
        (job, rx)
    }

    #[test]
    fn a_split_jobs_parts_join_into_its_one_answer_in_row_order() {
        let (whole, rx) = job(5);
        let parts = whole.split(2, names(), "m");
        assert_eq!(parts.iter().map(Job::rows).collect::<Vec<_>>(), vec![3, 2]);
        // Each part answers with its own inputs, the last part first; nothing is answered
        // before every part is.
        let n = parts.len();
        for (k, part) in parts.into_iter().rev().enumerate() {
            let echo = part.inputs.clone();
            (part.done)(Ok(echo));
            if k + 1 < n {
                assert!(rx.try_recv().is_err(), "answered before part {k}");
            }
        }
        let answer = rx.try_recv().expect("answered").expect("ok");
        let (again, _) = job(5);
        assert_eq!(answer[0].f32_values(), again.inputs[0].f32_values());
        assert!(rx.try_recv().is_err(), "answered once");
    }

    #[test]
    fn a_failed_part_fails_the_job_once_after_every_part_is_answered() {
        let (whole, rx) = job(4);
        let mut parts = whole.split(3, names(), "m").into_iter();
        let first = parts.next().unwrap();
        (first.done)(Err(ExecError::Inference {
            node: "m".into(),
            message: "boom".into(),
        }));
        assert!(rx.try_recv().is_err(), "not before the other parts");
        for part in parts {
            let echo = part.inputs.clone();
            (part.done)(Ok(echo));
        }
        match rx.try_recv().expect("answered") {
            Err(ExecError::Inference { message, .. }) => assert_eq!(message, "boom"),
            other => panic!("expected the part's failure, got {other:?}"),
        }
        assert!(rx.try_recv().is_err(), "answered once");
    }

    #[test]
    fn one_part_or_one_row_is_the_job_itself() {
        assert_eq!(job(4).0.split(1, names(), "m").len(), 1);
        assert_eq!(job(1).0.split(3, names(), "m").len(), 1);
        // More parts than rows: one row each.
        assert_eq!(job(2).0.split(5, names(), "m").len(), 2);
    }
}
