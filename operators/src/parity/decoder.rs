//! The parity decoder of a parity-coded node (ParM, §4.1, §4.2, §7): it holds every dispatched
//! job of the node as a [`Member`], joins each coding group's `k` predictions with the group's
//! `r` parity outputs by group id, and answers each job exactly once — with its real prediction
//! the moment it arrives, or by reconstruction once the prediction counts as unavailable.
//!
//! A prediction is *unavailable* when its replica failed (the deployed service answered an error:
//! a model error, or no replica left to fail over to), or when it is *late* ([`super::latency`]):
//! later than the decode rule's deadline after its dispatch — a quantile of the node's recent
//! latencies (default p99, never below a floor) or a fixed time; under `first_available` (the
//! paper's first rule) as soon as the group can decode without it. A real prediction that comes
//! before its deadline always wins.
//!
//! A group decodes when `m ≤ r` of its predictions are unknown, at least one of them unavailable,
//! and `m` parity outputs are in: the unknowns are solved together (`weir_parm::decode_erasures`),
//! the unavailable ones answered, flagged in the `reconstructed` column, and kept as known
//! outputs for a later decode of the same group. A failed job's error is held, and answered only
//! when its group can never decode it (more members lost for good than parity outputs left), or,
//! for a job whose group never fills, after one deadline. A job whose client deadline passed is
//! answered expired at once. A real prediction that comes after its reconstruction is dropped and
//! counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::spec::DecodeAfter;
use weir_engine::tensor::TensorData;
use weir_engine::trace::JobTrace;

use super::columns::decode_erasures;
use super::latency::{Lateness, WARMUP_DEADLINE};
use super::timer::{Timer, Wake};
use crate::model::executor::{AnswerOnce, Job};
use crate::model::ExecError;

/// Counters of a parity decoder; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DecoderStats {
    /// Jobs answered by reconstruction because their prediction was late.
    pub reconstructed_late: u64,
    /// Jobs answered by reconstruction because their replica failed.
    pub reconstructed_failed: u64,
    /// Jobs answered with their real prediction.
    pub real: u64,
    /// Failed jobs that could not be reconstructed (answered with their error).
    pub unrecovered: u64,
    /// Real predictions that came after their job was reconstructed (dropped).
    pub late_real: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reconstructed_late: AtomicU64,
    reconstructed_failed: AtomicU64,
    real: AtomicU64,
    unrecovered: AtomicU64,
    late_real: AtomicU64,
}

/// Why a job was reconstructed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its prediction was later than the deadline.
    Late,
    /// Its replica failed.
    Failed,
}

/// Where one job of a group stands.
pub(super) enum Outcome {
    /// Dispatched, not back.
    Pending,
    /// Its real prediction (kept for decoding the others).
    Real(Vec<TensorColumn>),
    /// Decoded from its group (kept for decoding the others).
    Reconstructed(Vec<TensorColumn>),
    /// Its replica failed (the error came at the instant given): the error, held until the job
    /// is reconstructed or given up on.
    Failed(ExecError, Instant),
    /// Answered with an error; its output is lost.
    Gone,
}

/// One dispatched job of the node: what the encoder codes and the decoder answers.
pub(super) struct Member {
    pub(super) seq: u64,
    pub(super) inputs: Vec<TensorColumn>,
    dispatched: Instant,
    /// When its prediction counts as late (`None`: `first_available`).
    pub(super) late_at: Option<Instant>,
    /// The job's answer, taken once.
    pub(super) done: AnswerOnce,
    /// The job's trace, when it holds a sampled request's rows.
    pub(super) trace: Option<JobTrace>,
    pub(super) outcome: Mutex<Outcome>,
    /// Its coding group, once the group is full.
    group: Mutex<Option<u64>>,
}

impl Member {
    fn rows(&self) -> usize {
        self.inputs.first().map(TensorColumn::len).unwrap_or(0)
    }

    fn group(&self) -> Option<u64> {
        *lock(&self.group)
    }
}

/// A parity job's outcome.
enum ParityOutcome {
    Pending,
    Output(Vec<TensorColumn>),
    Failed,
}

/// A full coding group waiting on its outputs.
struct Group {
    members: Vec<Arc<Member>>,
    /// Parity model `t`'s outcome at index `t`.
    parity: Mutex<Vec<ParityOutcome>>,
    /// Held while deciding, so one decode at a time runs per group.
    deciding: Mutex<()>,
}

/// What a group's members and parity outputs allow now.
enum Decision {
    /// Keep waiting.
    Wait,
    /// Nothing left to do: every member is known or answered.
    Settled,
    /// Solve the `unknown` members from the parity outputs `parities` and answer `answer`.
    Reconstruct {
        unknown: Vec<usize>,
        answer: Vec<(usize, Reason)>,
        parities: Vec<usize>,
    },
    /// More members are lost for good than parity outputs can come: answer the held errors.
    GiveUp,
}

/// The decoder of one parity-coded node.
pub struct ParityDecoder {
    /// Its name in metrics (`<node>.parity_decode`).
    id: String,
    k: usize,
    r: usize,
    lateness: Lateness,
    /// Members not yet in a full group, by sequence number.
    ungrouped: Mutex<HashMap<u64, Arc<Member>>>,
    /// Full groups not settled, by group id.
    groups: Mutex<HashMap<u64, Arc<Group>>>,
    next_member: AtomicU64,
    counters: Counters,
    timer: Timer,
}

impl std::fmt::Debug for ParityDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParityDecoder")
            .field("id", &self.id)
            .field("k", &self.k)
            .field("r", &self.r)
            .field("decode", &self.lateness.rule())
            .finish()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

impl ParityDecoder {
    /// A decoder named `id` for groups of `k` with `r` parity models; a missing prediction
    /// counts as unavailable after `decode` (quantile deadlines never below `floor`) or when its
    /// replica fails.
    pub fn start(
        id: &str,
        k: usize,
        r: usize,
        (decode, floor): (DecodeAfter, Duration),
    ) -> Arc<Self> {
        Arc::new_cyclic(|weak: &Weak<ParityDecoder>| {
            let me = weak.clone();
            ParityDecoder {
                id: id.to_string(),
                k,
                r: r.max(1),
                lateness: Lateness::new(decode, floor),
                ungrouped: Mutex::new(HashMap::new()),
                groups: Mutex::new(HashMap::new()),
                next_member: AtomicU64::new(0),
                counters: Counters::default(),
                timer: Timer::start(id, move |wake| {
                    let Some(decoder) = me.upgrade() else {
                        return false;
                    };
                    decoder.on_wake(wake);
                    true
                }),
            }
        })
    }

    /// The counters now.
    pub fn stats(&self) -> DecoderStats {
        let c = &self.counters;
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DecoderStats {
            reconstructed_late: s(&c.reconstructed_late),
            reconstructed_failed: s(&c.reconstructed_failed),
            real: s(&c.real),
            unrecovered: s(&c.unrecovered),
            late_real: s(&c.late_real),
        }
    }

    /// Its name in metrics.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The decode rule.
    pub fn decode_rule(&self) -> DecodeAfter {
        self.lateness.rule()
    }

    /// How long after dispatch a prediction counts as late now (`None`: `first_available`).
    pub fn deadline(&self) -> Option<Duration> {
        self.lateness.deadline()
    }

    /// Takes `job` in: its member (answered through this decoder from now on) and the job to
    /// dispatch to the deployed service, whose outcome comes back here.
    pub(super) fn admit(self: &Arc<Self>, job: Job) -> (Arc<Member>, Job) {
        let dispatched = Instant::now();
        let member = Arc::new(Member {
            seq: self.next_member.fetch_add(1, Ordering::Relaxed),
            inputs: job.inputs.clone(),
            dispatched,
            late_at: self.lateness.deadline().map(|d| dispatched + d),
            done: AnswerOnce::new(job.done),
            trace: job.trace.clone(),
            outcome: Mutex::new(Outcome::Pending),
            group: Mutex::new(None),
        });
        lock(&self.ungrouped).insert(member.seq, Arc::clone(&member));
        let (me, m) = (Arc::clone(self), Arc::clone(&member));
        let data_job = Job {
            inputs: job.inputs,
            enqueued_at: job.enqueued_at,
            deadline: job.deadline,
            trace: job.trace,
            done: Box::new(move |outcome| me.on_data(&m, outcome)),
        };
        (member, data_job)
    }

    /// Forgets `member`, whose job the deployed service refused: the caller gets it back.
    pub(super) fn withdraw(&self, member: &Member) {
        lock(&self.ungrouped).remove(&member.seq);
    }

    /// Opens group `id` of `members`, whose `r` parity jobs the encoder dispatches next.
    pub(super) fn open_group(&self, id: u64, members: &[Arc<Member>]) {
        let group = Arc::new(Group {
            members: members.to_vec(),
            parity: Mutex::new((0..self.r).map(|_| ParityOutcome::Pending).collect()),
            deciding: Mutex::new(()),
        });
        lock(&self.groups).insert(id, group);
        let mut ungrouped = lock(&self.ungrouped);
        for m in members {
            *lock(&m.group) = Some(id);
            ungrouped.remove(&m.seq);
        }
    }

    /// Arms group `id` once its parity jobs are out: its members' late timers, and a first look
    /// (outputs that came before the group closed are already recorded).
    pub(super) fn arm(&self, id: u64) {
        let Some(group) = self.group(id) else { return };
        let now = Instant::now();
        for at in group.members.iter().filter_map(|m| m.late_at) {
            if at > now {
                self.timer.at(at, Wake::Group(id));
            }
        }
        self.try_decode(id);
    }

    /// Parity job `t` of group `id` finished (or could not run).
    pub(super) fn on_parity(
        &self,
        id: u64,
        t: usize,
        outcome: Result<Vec<TensorColumn>, ExecError>,
    ) {
        let Some(group) = self.group(id) else { return };
        if let Some(slot) = lock(&group.parity).get_mut(t) {
            *slot = match outcome {
                Ok(columns) => ParityOutcome::Output(columns),
                Err(e) => {
                    debug!(decoder = %self.id, parity = t, error = %e, "A parity job failed; its group has one parity output fewer.");
                    ParityOutcome::Failed
                }
            };
        }
        self.try_decode(id);
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
                let counter = if answered {
                    &self.counters.real
                } else {
                    &self.counters.late_real
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            Err(e @ ExecError::Expired { .. }) => {
                *lock(&member.outcome) = Outcome::Gone;
                member.done.answer(Err(e));
            }
            Err(e) => {
                debug!(decoder = %self.id, error = %e, "A job failed; it is reconstructed if its group allows.");
                *lock(&member.outcome) = Outcome::Failed(e, Instant::now());
            }
        }
        match member.group() {
            Some(id) => {
                self.try_decode(id);
                if self.group(id).is_none() {
                    // Settled or given up: a failure nothing will reconstruct is answered.
                    self.release(member);
                }
            }
            None => {
                if matches!(*lock(&member.outcome), Outcome::Failed(..)) {
                    // Its group is not full yet: wait one deadline for it to fill.
                    let wait = self.lateness.deadline().unwrap_or(WARMUP_DEADLINE);
                    self.timer.at(Instant::now() + wait, Wake::Open(member.seq));
                }
                if member.done.is_answered() {
                    lock(&self.ungrouped).remove(&member.seq);
                }
            }
        }
    }

    /// Coding group `id`, while it is open.
    fn group(&self, id: u64) -> Option<Arc<Group>> {
        lock(&self.groups).get(&id).cloned()
    }

    /// Drops group `id` unsettled (unprotected, or nothing more can be reconstructed): its
    /// members' held errors are answered.
    pub(super) fn abandon(&self, id: u64) {
        let Some(group) = lock(&self.groups).remove(&id) else {
            return;
        };
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
                self.counters.unrecovered.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_wake(&self, wake: Wake) {
        match wake {
            Wake::Group(id) => self.try_decode(id),
            Wake::Open(seq) => {
                let member = lock(&self.ungrouped).remove(&seq);
                if let Some(m) = member {
                    self.release(&m);
                }
                // Not ungrouped any more: its group decides.
            }
        }
    }

    /// What group `group` allows at `now`.
    fn decide(&self, group: &Group, now: Instant) -> Decision {
        #[derive(PartialEq)]
        enum State {
            Known,
            Pending { late: bool },
            Failed,
            Gone,
        }
        let states: Vec<State> = group
            .members
            .iter()
            .map(|m| match &*lock(&m.outcome) {
                Outcome::Real(_) | Outcome::Reconstructed(_) => State::Known,
                Outcome::Pending => State::Pending {
                    late: m.late_at.is_none_or(|t| now >= t),
                },
                Outcome::Failed(..) => State::Failed,
                Outcome::Gone => State::Gone,
            })
            .collect();
        if !states
            .iter()
            .any(|s| matches!(s, State::Pending { .. } | State::Failed))
        {
            return Decision::Settled;
        }
        let (mut outputs, mut coming) = (Vec::new(), 0);
        for (t, p) in lock(&group.parity).iter().enumerate() {
            match p {
                ParityOutcome::Output(_) => outputs.push(t),
                ParityOutcome::Pending => coming += 1,
                ParityOutcome::Failed => {}
            }
        }
        let unknown: Vec<usize> = (0..states.len())
            .filter(|&i| states[i] != State::Known)
            .collect();
        let answer: Vec<(usize, Reason)> = unknown
            .iter()
            .filter_map(|&i| match states[i] {
                State::Failed => Some((i, Reason::Failed)),
                State::Pending { late: true } => Some((i, Reason::Late)),
                _ => None,
            })
            .collect();
        if !answer.is_empty() && unknown.len() <= outputs.len() {
            outputs.truncate(unknown.len());
            return Decision::Reconstruct {
                unknown,
                answer,
                parities: outputs,
            };
        }
        let lost = states
            .iter()
            .filter(|s| matches!(s, State::Failed | State::Gone))
            .count();
        if lost > outputs.len() + coming {
            Decision::GiveUp
        } else {
            Decision::Wait
        }
    }

    /// Settles group `id` as far as it can now (see [`Self::decide`]).
    fn try_decode(&self, id: u64) {
        let Some(group) = self.group(id) else { return };
        let _deciding = lock(&group.deciding);
        loop {
            if self.group(id).is_none() {
                return;
            }
            match self.decide(&group, Instant::now()) {
                Decision::Wait => return,
                Decision::Settled => {
                    lock(&self.groups).remove(&id);
                    return;
                }
                Decision::GiveUp => {
                    self.abandon(id);
                    return;
                }
                Decision::Reconstruct {
                    unknown,
                    answer,
                    parities,
                } => {
                    if !self.reconstruct(id, &group, &unknown, &answer, &parities) {
                        self.abandon(id);
                        return;
                    }
                }
            }
        }
    }

    /// Solves the `unknown` members of group `id` from `parities` and the known members, and
    /// answers `answer` by reconstruction. False when the outputs cannot be decoded (not f32).
    fn reconstruct(
        &self,
        id: u64,
        group: &Group,
        unknown: &[usize],
        answer: &[(usize, Reason)],
        parities: &[usize],
    ) -> bool {
        let known: Vec<(usize, usize, Vec<TensorColumn>)> = group
            .members
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match &*lock(&m.outcome) {
                Outcome::Real(c) | Outcome::Reconstructed(c) => Some((i, m.rows(), c.clone())),
                _ => None,
            })
            .collect();
        let parity_outputs: Vec<(usize, Vec<TensorColumn>)> = {
            let outcomes = lock(&group.parity);
            parities
                .iter()
                .filter_map(|&t| match outcomes.get(t) {
                    Some(ParityOutcome::Output(c)) => Some((t, c.clone())),
                    _ => None,
                })
                .collect()
        };
        let missing: Vec<(usize, usize)> = unknown
            .iter()
            .map(|&i| (i, group.members[i].rows()))
            .collect();
        let Some(decoded) = decode_erasures(self.k, &known, &parity_outputs, &missing) else {
            debug!(decoder = %self.id, "Could not decode a group (non-f32 output).");
            return false;
        };
        for (&i, columns) in unknown.iter().zip(decoded) {
            let target = &group.members[i];
            let reason = answer.iter().find(|(j, _)| *j == i).map(|(_, r)| *r);
            let Some(reason) = reason else {
                continue; // not unavailable (yet): its real prediction may still win
            };
            match flag_column(target.rows(), true) {
                Ok(flag) => {
                    self.note_reconstruction(target, id, reason);
                    let mut flagged = columns.clone();
                    flagged.push(flag);
                    if target.done.answer(Ok(flagged)) {
                        let counter = match reason {
                            Reason::Late => &self.counters.reconstructed_late,
                            Reason::Failed => &self.counters.reconstructed_failed,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                    *lock(&target.outcome) = Outcome::Reconstructed(columns);
                }
                Err(e) => {
                    debug!(error = %e, "Could not mark a reconstruction.");
                    self.release(target);
                    // Not decoded again: a pending one waits for its real prediction.
                    *lock(&target.outcome) = Outcome::Gone;
                }
            }
        }
        true
    }

    /// Coding-group size.
    pub(super) fn k(&self) -> usize {
        self.k
    }
}
