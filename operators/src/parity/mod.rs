//! ParM: parity-coded resilience around a model node, as in "Parity Models: Erasure-Coded
//! Resilience for Prediction Serving Systems" (SOSP '19); the codec itself is the pure `weir-parm`
//! crate, shared with training.
//!
//! [`ParityService`] wraps the node's inference service (one executor or a replica pool). Every job
//! is dispatched at once, unchanged (encoding never delays dispatch), and joins the open *coding
//! group*: the `k` jobs dispatched consecutively. When a group is full its parity job — the
//! members' rows coded position by position (row i of the parity job codes row i of every member
//! that has one) — goes to the parity model's service.
//!
//! Answers: a real prediction is returned the moment it arrives. When the parity output and `k − 1`
//! of the group's predictions are in and one is missing, the missing one is reconstructed at once as
//! `F_P(P) − Σ_{others} F(X_i)` (per row, over the members that have that row) and returned with
//! its `reconstructed` column set to 1; its real prediction, if it comes later, is dropped (counted
//! in [`ParityStats::late_real`]). With two or more missing, nothing is reconstructed: those jobs
//! wait for their real predictions. Each job's answer sits behind a take-once slot, so it is
//! answered exactly once whichever path is first.
//!
//! Where weir departs from the paper: the paper codes k *batches* together; weir's unit of
//! dispatch is the operator's job (up to `batching.max_size` rows), so a group is k jobs, and jobs
//! of different sizes are coded position by position (a shorter job simply contributes nothing to
//! the later parity rows), which keeps the decoder a plain subtraction.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

pub use weir_parm::Encoder;

use crate::model::executor::{AnswerOnce, Job};
use crate::model::{ExecError, InferenceService};

/// Counters of a parity-coded node; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityStats {
    /// Coding groups filled (parity jobs formed).
    pub groups: u64,
    /// Parity jobs the parity service took.
    pub parity_dispatched: u64,
    /// Jobs answered by reconstruction.
    pub reconstructed: u64,
    /// Real predictions that came after their job was reconstructed (dropped).
    pub late_real: u64,
}

/// One job of a coding group.
struct Member {
    inputs: Vec<TensorColumn>,
    /// The job's answer, taken once.
    done: AnswerOnce,
    /// Its real prediction once in (kept for decoding the others).
    outputs: Mutex<Option<Vec<TensorColumn>>>,
    /// Its coding group, once the group is full.
    group: Mutex<Option<u64>>,
}

impl Member {
    fn rows(&self) -> usize {
        self.inputs.first().map(TensorColumn::len).unwrap_or(0)
    }
}

/// A full coding group waiting on its outputs.
struct Group {
    members: Vec<Arc<Member>>,
    parity_output: Mutex<Option<Vec<TensorColumn>>>,
    decided: Mutex<bool>,
}

struct Inner {
    node: String,
    k: usize,
    encoder: Encoder,
    deployed: Arc<dyn InferenceService>,
    parity: Arc<dyn InferenceService>,
    /// Jobs dispatched since the last full group.
    open: Mutex<Vec<Arc<Member>>>,
    /// Full groups whose outcome is not settled, by group id.
    groups: Mutex<HashMap<u64, Arc<Group>>>,
    next_group: AtomicU64,
    stats: [AtomicU64; 4],
}

/// A model node's service with ParM parity coding around it.
#[derive(Clone)]
pub struct ParityService {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ParityService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParityService")
            .field("node", &self.inner.node)
            .field("k", &self.inner.k)
            .finish()
    }
}

/// A 0/1 column saying which rows were reconstructed.
fn flag_column(rows: usize, reconstructed: bool) -> Result<TensorColumn, ExecError> {
    TensorColumn::from_data(
        weir_engine::validate::RECONSTRUCTED_OUTPUT,
        vec![1],
        rows,
        TensorData::I64(vec![i64::from(reconstructed); rows]),
    )
    .map_err(|e| ExecError::Inference {
        node: "parity".into(),
        message: e.to_string(),
    })
}

/// Row-major f32 elements of `col` (parity coding is defined on f32 tensors).
fn f32s(col: &TensorColumn) -> Option<&[f32]> {
    col.f32_values()
}

impl ParityService {
    /// Wraps `deployed` with coding groups of `k` coded by `encoder`, parity jobs going to
    /// `parity`.
    pub fn new(
        node: &str,
        k: usize,
        encoder: Encoder,
        deployed: Arc<dyn InferenceService>,
        parity: Arc<dyn InferenceService>,
    ) -> Self {
        ParityService {
            inner: Arc::new(Inner {
                node: node.to_string(),
                k: k.max(2),
                encoder,
                deployed,
                parity,
                open: Mutex::new(Vec::new()),
                groups: Mutex::new(HashMap::new()),
                next_group: AtomicU64::new(0),
                stats: Default::default(),
            }),
        }
    }

    /// The counters now.
    pub fn stats(&self) -> ParityStats {
        let s = &self.inner.stats;
        ParityStats {
            groups: s[0].load(Ordering::Relaxed),
            parity_dispatched: s[1].load(Ordering::Relaxed),
            reconstructed: s[2].load(Ordering::Relaxed),
            late_real: s[3].load(Ordering::Relaxed),
        }
    }
}

const GROUPS: usize = 0;
const PARITY_DISPATCHED: usize = 1;
const RECONSTRUCTED: usize = 2;
const LATE_REAL: usize = 3;

impl InferenceService for ParityService {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        let inner = &self.inner;
        let member = Arc::new(Member {
            inputs: job.inputs.clone(),
            done: AnswerOnce::new(job.done),
            outputs: Mutex::new(None),
            group: Mutex::new(None),
        });
        let (me, m) = (Arc::clone(inner), Arc::clone(&member));
        let data_job = Job {
            inputs: job.inputs,
            enqueued_at: job.enqueued_at,
            deadline: job.deadline,
            done: Box::new(move |outcome| me.on_data(&m, outcome)),
        };
        if let Err(refused) = inner.deployed.try_submit(data_job) {
            // Give the caller its own job back, to offer again later.
            return match member.done.take() {
                Some(done) => Err(Job {
                    inputs: refused.inputs,
                    enqueued_at: refused.enqueued_at,
                    deadline: refused.deadline,
                    done,
                }),
                None => Ok(()),
            };
        }
        // Dispatched: now the job joins the open coding group.
        let full = {
            let mut open = inner.open.lock().unwrap_or_else(|p| p.into_inner());
            open.push(Arc::clone(&member));
            if open.len() >= inner.k {
                Some(std::mem::take(&mut *open))
            } else {
                None
            }
        };
        if let Some(members) = full {
            Inner::close_group(inner, members);
        }
        Ok(())
    }

    fn rows_per_job(&self) -> usize {
        self.inner.deployed.rows_per_job()
    }
}

impl Inner {
    /// Encodes a full group and dispatches its parity job.
    fn close_group(inner: &Arc<Inner>, members: Vec<Arc<Member>>) {
        let id = inner.next_group.fetch_add(1, Ordering::Relaxed);
        inner.stats[GROUPS].fetch_add(1, Ordering::Relaxed);
        let group = Arc::new(Group {
            members,
            parity_output: Mutex::new(None),
            decided: Mutex::new(false),
        });
        inner
            .groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::clone(&group));
        for m in &group.members {
            *m.group.lock().unwrap_or_else(|p| p.into_inner()) = Some(id);
        }
        let inputs: Vec<&[TensorColumn]> = group.members.iter().map(|m| &m.inputs[..]).collect();
        let Some(parity_inputs) = encode_group(inner.encoder, &inputs) else {
            debug!(node = %inner.node, "A coding group could not be encoded (non-f32 input).");
            inner.forget(id);
            return;
        };
        let me = Arc::clone(inner);
        // The parity job has no deadline of its own: a member it would reconstruct is answered
        // expired by its own job, and a late reconstruction finds it answered.
        let parity_job = Job {
            inputs: parity_inputs,
            enqueued_at: Instant::now(),
            deadline: None,
            done: Box::new(move |outcome| me.on_parity(id, outcome)),
        };
        match inner.parity.try_submit(parity_job) {
            Ok(()) => {
                inner.stats[PARITY_DISPATCHED].fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                // The parity queue is full: this group goes without protection; dispatch of the
                // data jobs was never held up.
                inner.forget(id);
            }
        }
        // Outputs that arrived before the group closed are already recorded in the members.
        inner.try_decode(id);
    }

    /// Drops a settled (or unprotected) group.
    fn forget(&self, id: u64) {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    fn on_data(&self, member: &Arc<Member>, outcome: Result<Vec<TensorColumn>, ExecError>) {
        match outcome {
            Ok(columns) => {
                let rows = member.rows();
                *member.outputs.lock().unwrap_or_else(|p| p.into_inner()) = Some(columns.clone());
                let answered = match flag_column(rows, false) {
                    Ok(flag) => {
                        let mut with_flag = columns;
                        with_flag.push(flag);
                        member.done.answer(Ok(with_flag))
                    }
                    Err(e) => member.done.answer(Err(e)),
                };
                if !answered {
                    self.stats[LATE_REAL].fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => {
                member.done.answer(Err(e));
            }
        }
        let group = *member.group.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(id) = group {
            self.try_decode(id);
        }
    }

    /// Coding group `id`, while it is open.
    fn group(&self, id: u64) -> Option<Arc<Group>> {
        self.groups
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    fn on_parity(&self, id: u64, outcome: Result<Vec<TensorColumn>, ExecError>) {
        let Some(group) = self.group(id) else { return };
        match outcome {
            Ok(columns) => {
                *group
                    .parity_output
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(columns);
                self.try_decode(id);
            }
            Err(e) => {
                debug!(node = %self.node, error = %e, "A parity job failed; its group is unprotected.");
                self.forget(id);
            }
        }
    }

    /// Settles group `id` when it can: every member answered for real (nothing to do), or the parity
    /// output and all but one prediction are in (reconstruct the missing one).
    fn try_decode(&self, id: u64) {
        let Some(group) = self.group(id) else { return };
        let mut decided = group.decided.lock().unwrap_or_else(|p| p.into_inner());
        if *decided {
            return;
        }
        let outputs: Vec<Option<Vec<TensorColumn>>> = group
            .members
            .iter()
            .map(|m| m.outputs.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect();
        let missing: Vec<usize> = (0..outputs.len())
            .filter(|&i| outputs[i].is_none())
            .collect();
        if missing.is_empty() {
            *decided = true;
            drop(decided);
            self.forget(id);
            return;
        }
        let parity = group
            .parity_output
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (Some(parity), [j]) = (parity, missing.as_slice()) else {
            return; // Waiting: for the parity output, or (≥ 2 missing) for real predictions.
        };
        *decided = true;
        drop(decided);
        let target = &group.members[*j];
        let others: Vec<&[TensorColumn]> = outputs
            .iter()
            .enumerate()
            .filter(|(i, _)| i != j)
            .filter_map(|(_, o)| o.as_deref())
            .collect();
        match decode_subtract(&parity, &others, target.rows()) {
            Some(mut columns) => match flag_column(target.rows(), true) {
                Ok(flag) => {
                    columns.push(flag);
                    if target.done.answer(Ok(columns)) {
                        self.stats[RECONSTRUCTED].fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) => debug!(error = %e, "Could not mark a reconstruction."),
            },
            None => debug!(node = %self.node, "Could not decode a group (non-f32 output)."),
        }
        // The missing member's real prediction may still come; it will find its answer taken.
        self.forget(id);
    }
}

/// The parity job's inputs from the k members' input columns: per column and row position i, the
/// members' rows i coded by `encoder` (a member without row i counts as zeros, so members may
/// differ in rows; `weir_parm::encode_rows`). `None` when a column is not f32 or its rows differ in shape.
pub fn encode_group(encoder: Encoder, members: &[&[TensorColumn]]) -> Option<Vec<TensorColumn>> {
    let rows = members
        .iter()
        .map(|m| m.first().map_or(0, TensorColumn::len))
        .max()?;
    let first = members.first()?;
    let mut out = Vec::with_capacity(first.len());
    for (c, col) in first.iter().enumerate() {
        let values: Vec<&[f32]> = members
            .iter()
            .map(|m| f32s(m.get(c)?))
            .collect::<Option<_>>()?;
        let shape = col.uniform_shape()?.to_vec();
        let parity = weir_parm::encode_rows(encoder, &values, rows, col.row_len()?);
        out.push(TensorColumn::from_data("parity", shape, rows, TensorData::F32(parity)).ok()?);
    }
    Some(out)
}

/// The subtraction decoder on columns: the missing member's first `rows` output rows as the parity
/// output minus every other member's outputs, position by position (`weir_parm::decode_subtract`).
/// `None` when a column is not f32 or its rows differ in shape.
pub fn decode_subtract(
    parity: &[TensorColumn],
    others: &[&[TensorColumn]],
    rows: usize,
) -> Option<Vec<TensorColumn>> {
    let mut out = Vec::with_capacity(parity.len());
    for (c, p) in parity.iter().enumerate() {
        let others: Vec<&[f32]> = others
            .iter()
            .map(|o| f32s(o.get(c)?))
            .collect::<Option<_>>()?;
        let values = weir_parm::decode_subtract(f32s(p)?, &others, rows * p.row_len()?)?;
        out.push(
            TensorColumn::from_data(
                "decoded",
                p.uniform_shape()?.to_vec(),
                rows,
                TensorData::F32(values),
            )
            .ok()?,
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests;
