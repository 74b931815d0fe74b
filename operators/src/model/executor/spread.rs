//! Spreading one batch over an idle executor's sessions. A batch's rows that reach a node whose
//! sessions all wait would otherwise run as one call on one session while the others idle: a
//! page's text lines through the recogniser, a client's batch of images. When the node's own
//! measured time per row says that the rows moved to the other sessions save more than handing
//! them over costs, the model operator cuts the batch into one job per free session, near-equal
//! in rows, and the queue's share rule (`batching.rs`) gives each free session one of them.
//!
//! Handing rows to another session thread and their answer back costs two thread wake-ups: tens
//! of microseconds on Linux, more where a virtual machine must wake an idle vCPU. A batch is
//! spread only when that saves at least [`SPREAD_PAYS_FROM`], ten times a generous 100 µs, so a
//! small model's rows (microseconds each) keep their one call. Rows cost about the same in one
//! call as in several on CPU sessions with threads of their own, so a spread adds no work; it is
//! never made while a job waits in the queue or every session but one is busy, when there is no
//! idle session to gain, nor on a GPU session (where rows do cost less together) or a
//! batch-specialised build (whose every call is padded to its whole batch).
//!
//! Where one job stands for one answer (a remote executor's query), [`Job::split`] cuts it into
//! parts whose outcomes join back into that one answer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_engine::batch::TensorColumn;

use super::{Job, JobDone};
use crate::model::ExecError;

/// The least time a spread must save, by the node's measured time per row, to be made.
pub const SPREAD_PAYS_FROM: Duration = Duration::from_millis(1);

/// How many jobs to cut `rows` rows into for `free` free sessions, when a row takes `per_row` in
/// a call (`None`: not measured yet, so no spread): one per free session (at most one per row)
/// when the rows moved off the first session take at least [`SPREAD_PAYS_FROM`], else 1.
pub(super) fn parts(rows: usize, free: usize, per_row: Option<Duration>) -> usize {
    let k = free.min(rows);
    let Some(per_row) = per_row else {
        return 1;
    };
    if k < 2 {
        return 1;
    }
    let moved = rows - rows.div_ceil(k);
    let saved = per_row.saturating_mul(u32::try_from(moved).unwrap_or(u32::MAX));
    if saved >= SPREAD_PAYS_FROM {
        k
    } else {
        1
    }
}

impl Job {
    /// This job as up to `parts` jobs of near-equal rows, in row order, whose outcomes join into
    /// this job's one answer: `done` is called once, when the last part is answered, with the
    /// parts' outputs joined in row order, or with the first failure among them (a part answered
    /// with an error still waits for the others, so nothing of the job runs after its answer
    /// counts). The first part carries the trace. One part, or a job of one row, is the job itself.
    pub fn split(self, parts: usize, node: &str) -> Vec<Job> {
        let rows = self.rows();
        if parts.min(rows) < 2 {
            return vec![self];
        }
        let per_part = rows.div_ceil(parts);
        let count = rows.div_ceil(per_part);
        let Job {
            inputs,
            enqueued_at,
            deadline,
            trace,
            done,
        } = self;
        let join = Arc::new(Join {
            node: node.to_string(),
            state: Mutex::new(JoinState {
                outputs: (0..count).map(|_| None).collect(),
                failure: None,
                left: count,
                done: Some(done),
            }),
        });
        (0..count)
            .map(|i| {
                let offset = i * per_part;
                let len = per_part.min(rows - offset);
                let join = Arc::clone(&join);
                Job {
                    inputs: inputs.iter().map(|c| c.slice(offset, len)).collect(),
                    enqueued_at,
                    deadline,
                    trace: if i == 0 { trace.clone() } else { None },
                    done: Box::new(move |outcome| join.finish(i, outcome)),
                }
            })
            .collect()
    }
}

/// The parts of one split job, until the last is answered.
struct Join {
    node: String,
    state: Mutex<JoinState>,
}

struct JoinState {
    /// Each part's outputs, by part.
    outputs: Vec<Option<Vec<TensorColumn>>>,
    /// The first part's failure.
    failure: Option<ExecError>,
    left: usize,
    done: Option<JobDone>,
}

impl Join {
    /// Part `part` answered with `outcome`; the last one answers the job.
    fn finish(&self, part: usize, outcome: Result<Vec<TensorColumn>, ExecError>) {
        let (done, outputs, failure) = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            match outcome {
                Ok(columns) => {
                    if let Some(slot) = state.outputs.get_mut(part) {
                        *slot = Some(columns);
                    }
                }
                Err(e) => {
                    state.failure.get_or_insert(e);
                }
            }
            state.left = state.left.saturating_sub(1);
            if state.left > 0 {
                return;
            }
            let Some(done) = state.done.take() else {
                return;
            };
            (
                done,
                std::mem::take(&mut state.outputs),
                state.failure.take(),
            )
        };
        done(match failure {
            Some(e) => Err(e),
            None => self.joined(outputs),
        });
    }

    /// Every part's outputs, output by output, rows in part order.
    fn joined(
        &self,
        outputs: Vec<Option<Vec<TensorColumn>>>,
    ) -> Result<Vec<TensorColumn>, ExecError> {
        let parts: Vec<Vec<TensorColumn>> = outputs.into_iter().flatten().collect();
        let failed = |message: String| ExecError::Inference {
            node: self.node.clone(),
            message,
        };
        let width = parts.first().map_or(0, Vec::len);
        if parts.iter().any(|p| p.len() != width) {
            return Err(failed(
                "the parts of a split job gave different outputs".into(),
            ));
        }
        (0..width)
            .map(|k| {
                let columns: Vec<&TensorColumn> = parts.iter().map(|p| &p[k]).collect();
                TensorColumn::concat("output", &columns).map_err(|e| failed(e.to_string()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Instant;

    use weir_engine::tensor::TensorData;

    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_slow_models_rows_spread_one_job_per_free_session() {
        // A recogniser's three lines at 19 ms each on two free sessions: 2 + 1.
        assert_eq!(parts(3, 2, Some(19 * MS)), 2);
        assert_eq!(parts(8, 4, Some(5 * MS)), 4);
        // Never more jobs than rows.
        assert_eq!(parts(2, 4, Some(5 * MS)), 2);
    }

    #[test]
    fn no_spread_without_a_measure_a_second_free_session_or_rows_to_move() {
        assert_eq!(parts(3, 2, None), 1);
        assert_eq!(parts(3, 1, Some(19 * MS)), 1);
        assert_eq!(parts(3, 0, Some(19 * MS)), 1);
        assert_eq!(parts(1, 2, Some(19 * MS)), 1);
        assert_eq!(parts(0, 2, Some(19 * MS)), 1);
    }

    #[test]
    fn a_small_models_rows_keep_their_one_call() {
        // An MLP's 20 µs rows: four rows moved save 80 µs, less than a spread must.
        assert_eq!(parts(8, 2, Some(Duration::from_micros(20))), 1);
        // The saving is counted on the rows moved: 2 rows of 0.5 ms moved out of 3 is 1 ms.
        assert_eq!(parts(3, 3, Some(Duration::from_micros(500))), 3);
        assert_eq!(parts(3, 2, Some(Duration::from_micros(500))), 1);
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
        let parts = whole.split(2, "m");
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
        let mut parts = whole.split(3, "m").into_iter();
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
        assert_eq!(job(4).0.split(1, "m").len(), 1);
        assert_eq!(job(1).0.split(3, "m").len(), 1);
        // More parts than rows: one row each.
        assert_eq!(job(2).0.split(5, "m").len(), 2);
    }
}
