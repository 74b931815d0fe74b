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
//! Answers: a real prediction is returned the moment it arrives. A missing prediction is
//! reconstructed as `F_P(P) − Σ_{others} F(X_i)` (per row, over the members that have that row),
//! returned with its `reconstructed` column set to 1, once the parity output and the group's other
//! `k − 1` predictions are in *and* the prediction counts as unavailable (ParM, §4.1):
//! - its replica *failed*: the deployed service answered an error (a model error, or no replica
//!   left to fail over to). The paper treats a failure as unavailability, so the error is held and
//!   answered only when the group cannot reconstruct the job (the parity job failed, or another
//!   member is missing for good), or, for a job whose group never fills, after one deadline.
//!   A job whose client deadline passed is answered expired at once: nobody waits for it;
//! - or it is *late* ([`latency`]): later than the decode rule's deadline after its dispatch — a
//!   quantile of the node's recent latencies (default p99, never below a floor) or a fixed time.
//!   A real prediction that comes before its deadline always wins, so without a straggler the node
//!   answers what the deployed model answers. Under `first_available` (the paper's first rule) a
//!   prediction is unavailable as soon as the group can decode without it.
//!
//! A replica pool's own failover comes first: a job on a replica that died is re-dispatched by the
//! pool, and is reconstructed here if that makes it late. With two or more missing nothing is
//! reconstructed (r = 1): those jobs wait for their real predictions. Each job's answer sits
//! behind a take-once slot, so it is answered exactly once whichever path is first; a real
//! prediction that comes after its reconstruction is dropped (counted in
//! [`ParityStats::late_real`]). A reconstructed job of a sampled request notes its group, `k`
//! and the reason in the job's trace, which makes its `reconstruct <node>` span.
//!
//! Where weir departs from the paper: the paper codes k *batches* together; weir's unit of
//! dispatch is the operator's job (up to `batching.max_size` rows), so a group is k jobs, and jobs
//! of different sizes are coded position by position (a shorter job simply contributes nothing to
//! the later parity rows), which keeps the decoder a plain subtraction.

mod columns;
pub mod latency;
pub mod metrics;
mod timer;
mod trace;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::spec::DecodeAfter;
use weir_engine::tensor::TensorData;
use weir_engine::trace::JobTrace;

pub use columns::{decode_subtract, encode_group};
pub use weir_parm::Encoder;

use crate::model::executor::{AnswerOnce, Job};
use crate::model::{ExecError, InferenceService};
use latency::{Lateness, WARMUP_DEADLINE};
use timer::{Timer, Wake};

/// Counters of a parity-coded node; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityStats {
    /// Coding groups filled (parity jobs formed).
    pub groups: u64,
    /// Parity jobs the parity service took.
    pub parity_dispatched: u64,
    /// Jobs answered by reconstruction (late + failed).
    pub reconstructed: u64,
    /// Jobs reconstructed because their prediction was late.
    pub reconstructed_late: u64,
    /// Jobs reconstructed because their replica failed.
    pub reconstructed_failed: u64,
    /// Jobs answered with their real prediction.
    pub real: u64,
    /// Failed jobs that could not be reconstructed (answered with their error).
    pub unrecovered: u64,
    /// Real predictions that came after their job was reconstructed (dropped).
    pub late_real: u64,
}

impl ParityStats {
    /// The fraction of answers (real and reconstructed) that were reconstructed; 0 before any.
    pub fn reconstructed_fraction(&self) -> f64 {
        let answers = self.real + self.reconstructed;
        if answers == 0 {
            0.0
        } else {
            self.reconstructed as f64 / answers as f64
        }
    }
}

const GROUPS: usize = 0;
const PARITY_DISPATCHED: usize = 1;
const RECONSTRUCTED_LATE: usize = 2;
const RECONSTRUCTED_FAILED: usize = 3;
const REAL: usize = 4;
const UNRECOVERED: usize = 5;
const LATE_REAL: usize = 6;

/// Why a job was reconstructed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its prediction was later than the deadline.
    Late,
    /// Its replica failed.
    Failed,
}

/// Where one job of a group stands.
enum Outcome {
    /// Dispatched, not back.
    Pending,
    /// Its real prediction (kept for decoding the others).
    Real(Vec<TensorColumn>),
    /// Its replica failed (the error came at the instant given): the error, held until the job
    /// is reconstructed or given up on.
    Failed(ExecError, Instant),
    /// Answered with an error; nothing to reconstruct.
    Gone,
}

/// One job of a coding group.
struct Member {
    seq: u64,
    inputs: Vec<TensorColumn>,
    dispatched: Instant,
    /// When its prediction counts as late (`None`: `first_available`).
    late_at: Option<Instant>,
    /// The job's answer, taken once.
    done: AnswerOnce,
    /// The job's trace, when it holds a sampled request's rows.
    trace: Option<JobTrace>,
    outcome: Mutex<Outcome>,
    /// Its coding group, once the group is full.
    group: Mutex<Option<u64>>,
}

impl Member {
    fn rows(&self) -> usize {
        self.inputs.first().map(TensorColumn::len).unwrap_or(0)
    }

    fn group(&self) -> Option<u64> {
        *self.group.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The parity job's outcome.
enum ParityOutcome {
    Pending,
    Output(Vec<TensorColumn>),
    Failed,
}

/// A full coding group waiting on its outputs.
struct Group {
    members: Vec<Arc<Member>>,
    parity: Mutex<ParityOutcome>,
    decided: Mutex<bool>,
}

/// What a group's members and parity output allow now.
enum Decision {
    /// Keep waiting.
    Wait,
    /// Nothing left to do (every member answered for real, or the one missing answered an error).
    Settled,
    /// Reconstruct member `j`.
    Reconstruct(usize, Reason),
    /// Reconstruction is impossible: answer the held errors.
    GiveUp,
}

struct Inner {
    node: String,
    k: usize,
    encoder: Encoder,
    lateness: Lateness,
    deployed: Arc<dyn InferenceService>,
    parity: Arc<dyn InferenceService>,
    /// Jobs dispatched since the last full group.
    open: Mutex<Vec<Arc<Member>>>,
    /// Full groups whose outcome is not settled, by group id.
    groups: Mutex<HashMap<u64, Arc<Group>>>,
    next_group: AtomicU64,
    next_member: AtomicU64,
    stats: [AtomicU64; 7],
    timer: Timer,
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
            .field("decode", &self.inner.lateness.rule())
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ParityService {
    /// Wraps `deployed` with coding groups of `k` coded by `encoder`, parity jobs going to
    /// `parity`; a missing prediction counts as unavailable after `decode` (quantile deadlines
    /// never below `floor`) or when its replica fails.
    pub fn new(
        node: &str,
        k: usize,
        encoder: Encoder,
        (decode, floor): (DecodeAfter, Duration),
        deployed: Arc<dyn InferenceService>,
        parity: Arc<dyn InferenceService>,
    ) -> Self {
        ParityService {
            inner: Arc::new_cyclic(|weak: &Weak<Inner>| {
                let me = weak.clone();
                Inner {
                    node: node.to_string(),
                    k: k.max(2),
                    encoder,
                    lateness: Lateness::new(decode, floor),
                    deployed,
                    parity,
                    open: Mutex::new(Vec::new()),
                    groups: Mutex::new(HashMap::new()),
                    next_group: AtomicU64::new(0),
                    next_member: AtomicU64::new(0),
                    stats: Default::default(),
                    timer: Timer::start(&format!("parity-{node}"), move |wake| {
                        let Some(inner) = me.upgrade() else {
                            return false;
                        };
                        inner.on_wake(wake);
                        true
                    }),
                }
            }),
        }
    }

    /// The counters now.
    pub fn stats(&self) -> ParityStats {
        let s = |i: usize| self.inner.stats[i].load(Ordering::Relaxed);
        ParityStats {
            groups: s(GROUPS),
            parity_dispatched: s(PARITY_DISPATCHED),
            reconstructed: s(RECONSTRUCTED_LATE) + s(RECONSTRUCTED_FAILED),
            reconstructed_late: s(RECONSTRUCTED_LATE),
            reconstructed_failed: s(RECONSTRUCTED_FAILED),
            real: s(REAL),
            unrecovered: s(UNRECOVERED),
            late_real: s(LATE_REAL),
        }
    }

    /// The decode rule.
    pub fn decode_rule(&self) -> DecodeAfter {
        self.inner.lateness.rule()
    }

    /// How long after dispatch a prediction counts as late now (`None`: `first_available`).
    pub fn deadline(&self) -> Option<Duration> {
        self.inner.lateness.deadline()
    }
}

impl InferenceService for ParityService {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        let inner = &self.inner;
        let dispatched = Instant::now();
        let member = Arc::new(Member {
            seq: inner.next_member.fetch_add(1, Ordering::Relaxed),
            inputs: job.inputs.clone(),
            dispatched,
            late_at: inner.lateness.deadline().map(|d| dispatched + d),
            done: AnswerOnce::new(job.done),
            trace: job.trace.clone(),
            outcome: Mutex::new(Outcome::Pending),
            group: Mutex::new(None),
        });
        let (me, m) = (Arc::clone(inner), Arc::clone(&member));
        let data_job = Job {
            inputs: job.inputs,
            enqueued_at: job.enqueued_at,
            deadline: job.deadline,
            trace: job.trace,
            done: Box::new(move |outcome| me.on_data(&m, outcome)),
        };
        if let Err(refused) = inner.deployed.try_submit(data_job) {
            // Give the caller its own job back, to offer again later.
            return match member.done.take() {
                Some(done) => Err(Job {
                    inputs: refused.inputs,
                    enqueued_at: refused.enqueued_at,
                    deadline: refused.deadline,
                    trace: refused.trace,
                    done,
                }),
                None => Ok(()),
            };
        }
        // Dispatched: now the job joins the open coding group.
        let full = {
            let mut open = lock(&inner.open);
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
    /// Encodes a full group, dispatches its parity job and sets its members' late timers.
    fn close_group(inner: &Arc<Inner>, members: Vec<Arc<Member>>) {
        let id = inner.next_group.fetch_add(1, Ordering::Relaxed);
        inner.stats[GROUPS].fetch_add(1, Ordering::Relaxed);
        let group = Arc::new(Group {
            members,
            parity: Mutex::new(ParityOutcome::Pending),
            decided: Mutex::new(false),
        });
        lock(&inner.groups).insert(id, Arc::clone(&group));
        for m in &group.members {
            *lock(&m.group) = Some(id);
        }
        let inputs: Vec<&[TensorColumn]> = group.members.iter().map(|m| &m.inputs[..]).collect();
        let Some(parity_inputs) = encode_group(inner.encoder, &inputs) else {
            debug!(node = %inner.node, "A coding group could not be encoded (non-f32 input).");
            inner.abandon(id, &group);
            return;
        };
        let me = Arc::clone(inner);
        // The parity job has no deadline of its own: a member it would reconstruct is answered
        // expired by its own job, and a late reconstruction finds it answered.
        let parity_job = Job {
            inputs: parity_inputs,
            enqueued_at: Instant::now(),
            deadline: None,
            trace: None,
            done: Box::new(move |outcome| me.on_parity(id, outcome)),
        };
        match inner.parity.try_submit(parity_job) {
            Ok(()) => {
                inner.stats[PARITY_DISPATCHED].fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                // The parity queue is full: this group goes without protection; dispatch of the
                // data jobs was never held up.
                inner.abandon(id, &group);
                return;
            }
        }
        let now = Instant::now();
        for at in group.members.iter().filter_map(|m| m.late_at) {
            if at > now {
                inner.timer.at(at, Wake::Group(id));
            }
        }
        // Outputs that arrived before the group closed are already recorded in the members.
        inner.try_decode(id);
    }

    /// Drops group `id` unsettled (unprotected, or nothing can be reconstructed): its members'
    /// held errors are answered.
    fn abandon(&self, id: u64, group: &Group) {
        lock(&self.groups).remove(&id);
        for m in &group.members {
            self.release(m);
        }
    }

    /// Answers `member`'s held error, if it has one.
    fn release(&self, member: &Member) {
        let held = {
            let mut outcome = lock(&member.outcome);
            match std::mem::replace(&mut *outcome, Outcome::Gone) {
                Outcome::Failed(e, _) => Some(e),
                other => {
                    *outcome = other;
                    None
                }
            }
        };
        if let Some(e) = held {
            if member.done.answer(Err(e)) {
                self.stats[UNRECOVERED].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_data(&self, member: &Arc<Member>, outcome: Result<Vec<TensorColumn>, ExecError>) {
        match outcome {
            Ok(columns) => {
                self.lateness.record(member.dispatched.elapsed());
                *lock(&member.outcome) = Outcome::Real(columns.clone());
                let answered = match flag_column(member.rows(), false) {
                    Ok(flag) => {
                        let mut with_flag = columns;
                        with_flag.push(flag);
                        member.done.answer(Ok(with_flag))
                    }
                    Err(e) => member.done.answer(Err(e)),
                };
                let counter = if answered { REAL } else { LATE_REAL };
                self.stats[counter].fetch_add(1, Ordering::Relaxed);
            }
            Err(e @ ExecError::Expired { .. }) => {
                *lock(&member.outcome) = Outcome::Gone;
                member.done.answer(Err(e));
            }
            Err(e) => {
                debug!(node = %self.node, error = %e, "A job failed; it is reconstructed if its group allows.");
                *lock(&member.outcome) = Outcome::Failed(e, Instant::now());
            }
        }
        match member.group() {
            Some(id) => {
                self.try_decode(id);
                if self.group(id).is_none() {
                    // Settled or unprotected: a failure nothing will reconstruct is answered.
                    self.release(member);
                }
            }
            None => {
                if matches!(*lock(&member.outcome), Outcome::Failed(..)) {
                    // Its group is not full yet: wait one deadline for it to fill.
                    let wait = self.lateness.deadline().unwrap_or(WARMUP_DEADLINE);
                    self.timer.at(Instant::now() + wait, Wake::Open(member.seq));
                }
            }
        }
    }

    /// Coding group `id`, while it is open.
    fn group(&self, id: u64) -> Option<Arc<Group>> {
        lock(&self.groups).get(&id).cloned()
    }

    fn on_parity(&self, id: u64, outcome: Result<Vec<TensorColumn>, ExecError>) {
        let Some(group) = self.group(id) else { return };
        *lock(&group.parity) = match outcome {
            Ok(columns) => ParityOutcome::Output(columns),
            Err(e) => {
                debug!(node = %self.node, error = %e, "A parity job failed; its group is unprotected.");
                ParityOutcome::Failed
            }
        };
        self.try_decode(id);
    }

    fn on_wake(&self, wake: Wake) {
        match wake {
            Wake::Group(id) => self.try_decode(id),
            Wake::Open(seq) => {
                let member = lock(&self.open).iter().find(|m| m.seq == seq).cloned();
                if let Some(m) = member {
                    self.release(&m);
                }
                // Not in the open group any more: its group decides.
            }
        }
    }

    /// What group `group` allows at `now`.
    fn decide(&self, group: &Group, now: Instant) -> Decision {
        #[derive(PartialEq)]
        enum State {
            Real,
            Pending { late: bool },
            Failed,
            Gone,
        }
        let states: Vec<State> = group
            .members
            .iter()
            .map(|m| match &*lock(&m.outcome) {
                Outcome::Real(_) => State::Real,
                Outcome::Pending => State::Pending {
                    late: m.late_at.is_none_or(|t| now >= t),
                },
                Outcome::Failed(..) => State::Failed,
                Outcome::Gone => State::Gone,
            })
            .collect();
        let missing: Vec<usize> = (0..states.len())
            .filter(|&i| states[i] != State::Real)
            .collect();
        let parity = match &*lock(&group.parity) {
            ParityOutcome::Pending => None,
            ParityOutcome::Output(_) => Some(true),
            ParityOutcome::Failed => Some(false),
        };
        match (missing.as_slice(), parity) {
            ([], _) => Decision::Settled,
            (_, Some(false)) => Decision::GiveUp,
            ([j], parity) => match states[*j] {
                State::Gone => Decision::Settled,
                State::Failed if parity.is_some() => Decision::Reconstruct(*j, Reason::Failed),
                State::Pending { late: true } if parity.is_some() => {
                    Decision::Reconstruct(*j, Reason::Late)
                }
                _ => Decision::Wait,
            },
            // Two or more missing: only their real predictions can help.
            (many, _) => {
                if many
                    .iter()
                    .any(|&i| matches!(states[i], State::Pending { .. }))
                {
                    Decision::Wait
                } else {
                    Decision::GiveUp
                }
            }
        }
    }

    /// Settles group `id` when it can (see [`Self::decide`]).
    fn try_decode(&self, id: u64) {
        let Some(group) = self.group(id) else { return };
        let mut decided = lock(&group.decided);
        if *decided {
            return;
        }
        let decision = self.decide(&group, Instant::now());
        let (j, reason) = match decision {
            Decision::Wait => return,
            Decision::Settled => {
                *decided = true;
                lock(&self.groups).remove(&id);
                return;
            }
            Decision::GiveUp => {
                *decided = true;
                drop(decided);
                self.abandon(id, &group);
                return;
            }
            Decision::Reconstruct(j, reason) => (j, reason),
        };
        *decided = true;
        drop(decided);
        // The missing member's real prediction may still come; it will find its answer taken.
        lock(&self.groups).remove(&id);
        let target = &group.members[j];
        let outputs: Vec<Vec<TensorColumn>> = group
            .members
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != j)
            .filter_map(|(_, m)| match &*lock(&m.outcome) {
                Outcome::Real(columns) => Some(columns.clone()),
                _ => None,
            })
            .collect();
        let others: Vec<&[TensorColumn]> = outputs.iter().map(Vec::as_slice).collect();
        let parity = match &*lock(&group.parity) {
            ParityOutcome::Output(columns) => Some(columns.clone()),
            _ => None,
        };
        let decoded = parity.and_then(|p| decode_subtract(&p, &others, target.rows()));
        let Some(mut columns) = decoded else {
            debug!(node = %self.node, "Could not decode a group (non-f32 output).");
            self.release(target);
            return;
        };
        match flag_column(target.rows(), true) {
            Ok(flag) => {
                columns.push(flag);
                self.note_reconstruction(target, id, reason);
                if target.done.answer(Ok(columns)) {
                    let counter = match reason {
                        Reason::Late => RECONSTRUCTED_LATE,
                        Reason::Failed => RECONSTRUCTED_FAILED,
                    };
                    self.stats[counter].fetch_add(1, Ordering::Relaxed);
                }
                *lock(&target.outcome) = Outcome::Gone;
            }
            Err(e) => {
                debug!(error = %e, "Could not mark a reconstruction.");
                self.release(target);
            }
        }
    }
}

#[cfg(test)]
mod tests;
