//! The parity decoder of a parity-coded node (ParM, §4.1, §4.2, §7), as pure state: every job of
//! the node is a member of a coding group (by its [`super::tag::Tag`]); the decoder joins each
//! group's `k` predictions with the group's `r` parity outputs by group id and answers each job
//! exactly once — with its real prediction the moment it arrives, or by reconstruction once the
//! prediction counts as unavailable. The decoder operator ([`super::decode_operator`]) feeds it
//! and turns its [`Answer`]s into rows and errors; nothing here knows timely.
//!
//! A prediction is *unavailable* when its replica failed (the deployed model operator answered
//! an error: a model error, or no replica left to fail over to), or when it is *late*
//! ([`super::latency`]): later than the decode rule's deadline after its dispatch — a quantile
//! of the node's recent latencies (default p99, never below a floor) or a fixed time; under
//! `first_available` (the paper's first rule) as soon as the group can decode without it. A real
//! prediction that comes before its deadline always wins.
//!
//! A group decodes when `m ≤ r` of its predictions are unknown, at least one of them
//! unavailable, and `m` parity outputs are in: the unknowns are solved together
//! (`weir_parm::decode_erasures`), the unavailable ones answered, and kept as known outputs for a
//! later decode of the same group. A failed job's error is held, and answered only when its group
//! can never decode it (more members lost for good than parity outputs left), or, for a job whose
//! group never fills, after one deadline. An expired job is answered expired at once. A real
//! prediction that comes after its reconstruction is dropped and counted.
//!
//! State is bounded by the jobs in flight: a group is dropped once settled, and a member once it
//! is answered, its own prediction (or error) is back and its group is gone.
//!
//! The rules above are one state machine over the same group table, so they stay in one file
//! (longer than most) rather than being split across files that would share its private state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::debug;
use weir_engine::batch::TensorColumn;
use weir_engine::request::RequestError;
use weir_engine::spec::DecodeAfter;

use super::columns::decode_erasures;
use super::latency::{Lateness, WARMUP_DEADLINE};
use super::tag::Tag;
use super::timer::{Timer, Wake};

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

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Why a job was reconstructed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Its prediction was later than the deadline.
    Late,
    /// Its replica failed.
    Failed,
}

impl Reason {
    /// Its label in metrics and traces.
    pub fn label(self) -> &'static str {
        match self {
            Reason::Late => "late",
            Reason::Failed => "failed",
        }
    }
}

/// The decoder of one parity-coded node as every worker shares it: its rule, the node's recent
/// latencies and its counters. Each worker's decoder operator keeps its own [`Book`].
#[derive(Debug)]
pub struct ParityDecoder {
    /// Its name in metrics (`<node>.parity_decode`).
    id: String,
    k: usize,
    r: usize,
    lateness: Lateness,
    counters: Counters,
}

impl ParityDecoder {
    /// A decoder named `id` for groups of `k` with `r` parity models; a missing prediction
    /// counts as unavailable after `decode` (quantile deadlines never below `floor`) or when its
    /// replica fails.
    pub fn new(id: &str, k: usize, r: usize, (decode, floor): (DecodeAfter, Duration)) -> Self {
        ParityDecoder {
            id: id.to_string(),
            k: k.max(2),
            r: r.max(1),
            lateness: Lateness::new(decode, floor),
            counters: Counters::default(),
        }
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

    /// Coding-group size.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The decode rule.
    pub fn decode_rule(&self) -> DecodeAfter {
        self.lateness.rule()
    }

    /// How long after dispatch a prediction counts as late now (`None`: `first_available`).
    pub fn deadline(&self) -> Option<Duration> {
        self.lateness.deadline()
    }
}

/// What the decoder answers a job with.
#[derive(Debug)]
pub enum Answer {
    /// Member `member`'s reconstructed outputs (in the node's output order).
    Reconstructed {
        /// The member.
        member: u64,
        /// Its outputs.
        columns: Vec<TensorColumn>,
        /// Why it was unavailable.
        reason: Reason,
        /// Its group.
        group: u32,
        /// When it counted as unavailable.
        unavailable_at: Instant,
    },
    /// Member `member`'s error, for each of its rows.
    Error {
        /// The member.
        member: u64,
        /// The error.
        error: Arc<RequestError>,
    },
}

/// Where one job of a group stands.
enum Outcome {
    /// Dispatched, not back.
    Pending,
    /// Its real prediction (kept for decoding the others).
    Real(Vec<TensorColumn>),
    /// Decoded from its group (kept for decoding the others).
    Reconstructed(Vec<TensorColumn>),
    /// Its replica failed (the error came at the instant given): the error, held until the job
    /// is reconstructed or given up on.
    Failed(Arc<RequestError>, Instant),
    /// Answered with an error; its output is lost.
    Gone,
}

struct Member {
    group: u32,
    rows: usize,
    dispatched: Instant,
    /// When its prediction counts as late (`None`: `first_available`).
    late_at: Option<Instant>,
    outcome: Outcome,
    answered: bool,
    /// Its own prediction or error came back.
    back: bool,
}

/// A parity output as it comes: the parity model operator may cut a query into several jobs.
enum ParityOutcome {
    Pending,
    /// Pieces `(first row, columns)` so far.
    Pieces(Vec<(usize, Vec<TensorColumn>)>),
    Output(Vec<TensorColumn>),
    Failed,
}

struct Group {
    /// Member sequence numbers by position (`None`: not dispatched yet).
    members: Vec<Option<u64>>,
    /// Set by the member that fills the group: whether its parity queries went out.
    coded: Option<bool>,
    /// Parity model `t`'s outcome at index `t`.
    parity: Vec<ParityOutcome>,
}

/// Parity model `t`'s outcome in group `group`, while the group is open.
fn parity_slot(
    groups: &mut HashMap<u32, Group>,
    group: u32,
    t: usize,
) -> Option<&mut ParityOutcome> {
    groups.get_mut(&group).and_then(|g| g.parity.get_mut(t))
}

impl Group {
    fn full(&self) -> bool {
        self.coded.is_some()
    }
}

/// What a group's members and parity outputs allow now.
enum Decision {
    Wait,
    Settled,
    Reconstruct {
        unknown: Vec<usize>,
        answer: Vec<(usize, Reason)>,
        parities: Vec<usize>,
    },
    GiveUp,
}

/// One worker's decoding state.
pub struct Book {
    shared: Arc<ParityDecoder>,
    members: HashMap<u64, Member>,
    groups: HashMap<u32, Group>,
    timer: Timer,
    answers: Vec<Answer>,
}

impl Book {
    /// An empty book for `shared`.
    pub fn new(shared: Arc<ParityDecoder>) -> Self {
        Book {
            shared,
            members: HashMap::new(),
            groups: HashMap::new(),
            timer: Timer::default(),
            answers: Vec::new(),
        }
    }

    /// The answers decided since the last call.
    pub fn take_answers(&mut self) -> Vec<Answer> {
        std::mem::take(&mut self.answers)
    }

    /// When the book wants to look again (a deadline), if ever.
    pub fn next_wake(&self) -> Option<Instant> {
        self.timer.next()
    }

    /// Jobs held (answered or not) and groups open: what the operator's state is bounded by.
    pub fn held(&self) -> (usize, usize) {
        (self.members.len(), self.groups.len())
    }

    /// Job `seq` of `rows` rows, tagged `tag`, was dispatched at `now`.
    pub fn admit(&mut self, seq: u64, tag: Tag, rows: usize, now: Instant) {
        let (k, r) = (self.shared.k, self.shared.r);
        let late_at = self.shared.lateness.deadline().map(|d| now + d);
        self.members.insert(
            seq,
            Member {
                group: tag.group,
                rows,
                dispatched: now,
                late_at,
                outcome: Outcome::Pending,
                answered: false,
                back: false,
            },
        );
        let group = self.groups.entry(tag.group).or_insert_with(|| Group {
            members: vec![None; k],
            coded: None,
            parity: (0..r).map(|_| ParityOutcome::Pending).collect(),
        });
        if let Some(slot) = group.members.get_mut(tag.position) {
            *slot = Some(seq);
        }
        if tag.position + 1 >= k {
            group.coded = Some(tag.coded);
            if tag.coded {
                self.arm(tag.group, now);
            } else {
                debug!(decoder = %self.shared.id, "A coding group could not be encoded (non-f32 input).");
                self.abandon(tag.group);
            }
        }
    }

    /// Member `seq`'s real prediction `columns` came at `now`; true when it is the answer (false:
    /// its job was answered already, or is unknown, and the prediction is dropped).
    pub fn on_real(&mut self, seq: u64, columns: Vec<TensorColumn>, now: Instant) -> bool {
        let Some(m) = self.members.get_mut(&seq) else {
            bump(&self.shared.counters.late_real);
            return false;
        };
        self.shared
            .lateness
            .record(now.saturating_duration_since(m.dispatched));
        m.back = true;
        let group = m.group;
        let answered = !m.answered;
        if answered {
            m.outcome = Outcome::Real(columns);
            m.answered = true;
            bump(&self.shared.counters.real);
        } else {
            bump(&self.shared.counters.late_real);
        }
        self.try_decode(group, now);
        self.forget_if_done(seq);
        answered
    }

    /// Member `seq`'s job failed with `error` at `now`.
    pub fn on_error(&mut self, seq: u64, error: Arc<RequestError>, now: Instant) {
        let wait = self.shared.lateness.deadline().unwrap_or(WARMUP_DEADLINE);
        let Some(m) = self.members.get_mut(&seq) else {
            return;
        };
        m.back = true;
        let group = m.group;
        if m.answered {
            self.forget_if_done(seq);
            return;
        }
        if matches!(*error, RequestError::Expired { .. }) {
            m.outcome = Outcome::Gone;
            m.answered = true;
            self.answers.push(Answer::Error { member: seq, error });
        } else {
            debug!(decoder = %self.shared.id, error = %error, "A job failed; it is reconstructed if its group allows.");
            m.outcome = Outcome::Failed(error, now);
        }
        match self.groups.get(&group).map(Group::full) {
            Some(true) => self.try_decode(group, now),
            Some(false) => self.timer.at(now + wait, Wake::Open(seq)),
            None => self.release(seq),
        }
        self.forget_if_done(seq);
    }

    /// Rows from `first_row` of parity model `t`'s output for group `group` came at `now`.
    pub fn on_parity(
        &mut self,
        group: u32,
        t: usize,
        first_row: usize,
        columns: Vec<TensorColumn>,
        now: Instant,
    ) {
        let rows = self.parity_rows(group);
        let Some(slot) = parity_slot(&mut self.groups, group, t) else {
            return;
        };
        let mut pieces = match std::mem::replace(slot, ParityOutcome::Pending) {
            ParityOutcome::Pieces(p) => p,
            ParityOutcome::Pending => Vec::new(),
            done => {
                *slot = done;
                return;
            }
        };
        pieces.push((first_row, columns));
        let have: usize = pieces
            .iter()
            .map(|(_, c)| c.first().map_or(0, TensorColumn::len))
            .sum();
        *slot = if have < rows {
            ParityOutcome::Pieces(pieces)
        } else {
            join_pieces(pieces).map_or(ParityOutcome::Failed, ParityOutcome::Output)
        };
        self.try_decode(group, now);
    }

    /// Parity model `t`'s job for group `group` failed.
    pub fn on_parity_failed(&mut self, group: u32, t: usize, now: Instant) {
        let Some(slot) = parity_slot(&mut self.groups, group, t) else {
            return;
        };
        if matches!(slot, ParityOutcome::Output(_) | ParityOutcome::Failed) {
            return;
        }
        debug!(decoder = %self.shared.id, parity = t, "A parity job failed; its group has one parity output fewer.");
        *slot = ParityOutcome::Failed;
        self.try_decode(group, now);
    }

    /// Looks at what is due at `now`.
    pub fn on_time(&mut self, now: Instant) {
        for wake in self.timer.due(now) {
            match wake {
                Wake::Group(id) => self.try_decode(id, now),
                Wake::Open(seq) => {
                    let open = self
                        .members
                        .get(&seq)
                        .and_then(|m| self.groups.get(&m.group))
                        .is_some_and(|g| !g.full());
                    if open {
                        self.release(seq);
                        self.forget_if_done(seq);
                    }
                }
            }
        }
    }

    /// Rows of group `group`'s parity query: its longest member's.
    fn parity_rows(&self, group: u32) -> usize {
        self.groups.get(&group).map_or(0, |g| {
            g.members
                .iter()
                .flatten()
                .filter_map(|s| self.members.get(s))
                .map(|m| m.rows)
                .max()
                .unwrap_or(0)
        })
    }

    /// Group `id` is full and coded: its members' late timers, and a first look.
    fn arm(&mut self, id: u32, now: Instant) {
        let Some(group) = self.groups.get(&id) else {
            return;
        };
        let lates: Vec<Instant> = group
            .members
            .iter()
            .flatten()
            .filter_map(|s| self.members.get(s)?.late_at)
            .filter(|&at| at > now)
            .collect();
        for at in lates {
            self.timer.at(at, Wake::Group(id));
        }
        self.try_decode(id, now);
    }

    /// Drops group `id` unsettled: its members' held errors are answered.
    fn abandon(&mut self, id: u32) {
        let Some(group) = self.groups.remove(&id) else {
            return;
        };
        for seq in group.members.into_iter().flatten() {
            self.release(seq);
            self.forget_if_done(seq);
        }
    }

    /// Group `id` is settled: dropped, with the members that are done.
    fn settle(&mut self, id: u32) {
        if let Some(group) = self.groups.remove(&id) {
            for seq in group.members.into_iter().flatten() {
                self.forget_if_done(seq);
            }
        }
    }

    /// Forgets member `seq` once it is answered, back, and its group gone.
    fn forget_if_done(&mut self, seq: u64) {
        let done = self
            .members
            .get(&seq)
            .is_some_and(|m| m.answered && m.back && !self.groups.contains_key(&m.group));
        if done {
            self.members.remove(&seq);
        }
    }

    /// Answers member `seq`'s held error, if it has one.
    fn release(&mut self, seq: u64) {
        let Some(m) = self.members.get_mut(&seq) else {
            return;
        };
        if !matches!(m.outcome, Outcome::Failed(..)) {
            return;
        }
        let Outcome::Failed(error, _) = std::mem::replace(&mut m.outcome, Outcome::Gone) else {
            return;
        };
        if !m.answered {
            m.answered = true;
            bump(&self.shared.counters.unrecovered);
            self.answers.push(Answer::Error { member: seq, error });
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
            .map(|s| match s.and_then(|s| self.members.get(&s)) {
                None => State::Gone,
                Some(m) => match &m.outcome {
                    Outcome::Real(_) | Outcome::Reconstructed(_) => State::Known,
                    Outcome::Pending => State::Pending {
                        late: m.late_at.is_none_or(|t| now >= t),
                    },
                    Outcome::Failed(..) => State::Failed,
                    Outcome::Gone => State::Gone,
                },
            })
            .collect();
        if !states
            .iter()
            .any(|s| matches!(s, State::Pending { .. } | State::Failed))
        {
            return Decision::Settled;
        }
        let (mut outputs, mut coming) = (Vec::new(), 0);
        for (t, p) in group.parity.iter().enumerate() {
            match p {
                ParityOutcome::Output(_) => outputs.push(t),
                ParityOutcome::Pending | ParityOutcome::Pieces(_) => coming += 1,
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

    /// Settles full group `id` as far as it can at `now` (see [`Self::decide`]).
    fn try_decode(&mut self, id: u32, now: Instant) {
        loop {
            let Some(group) = self.groups.get(&id) else {
                return;
            };
            if !group.full() {
                return;
            }
            match self.decide(group, now) {
                Decision::Wait => return,
                Decision::Settled => return self.settle(id),
                Decision::GiveUp => return self.abandon(id),
                Decision::Reconstruct {
                    unknown,
                    answer,
                    parities,
                } => {
                    if !self.reconstruct(id, &unknown, &answer, &parities, now) {
                        return self.abandon(id);
                    }
                }
            }
        }
    }

    /// Solves the `unknown` positions of group `id` from `parities` and the known members, and
    /// answers `answer` by reconstruction. False when the outputs cannot be decoded (not f32).
    fn reconstruct(
        &mut self,
        id: u32,
        unknown: &[usize],
        answer: &[(usize, Reason)],
        parities: &[usize],
        now: Instant,
    ) -> bool {
        let Some(group) = self.groups.get(&id) else {
            return false;
        };
        let member = |i: usize| group.members.get(i).copied().flatten();
        let known: Vec<(usize, usize, Vec<TensorColumn>)> = (0..group.members.len())
            .filter_map(|i| {
                let m = self.members.get(&member(i)?)?;
                match &m.outcome {
                    Outcome::Real(c) | Outcome::Reconstructed(c) => Some((i, m.rows, c.clone())),
                    _ => None,
                }
            })
            .collect();
        let parity_outputs: Vec<(usize, Vec<TensorColumn>)> = parities
            .iter()
            .filter_map(|&t| match group.parity.get(t) {
                Some(ParityOutcome::Output(c)) => Some((t, c.clone())),
                _ => None,
            })
            .collect();
        let missing: Vec<(usize, usize)> = unknown
            .iter()
            .map(|&i| {
                let rows = member(i)
                    .and_then(|s| self.members.get(&s))
                    .map_or(0, |m| m.rows);
                (i, rows)
            })
            .collect();
        let Some(decoded) = decode_erasures(self.shared.k, &known, &parity_outputs, &missing)
        else {
            debug!(decoder = %self.shared.id, "Could not decode a group (non-f32 output).");
            return false;
        };
        let seqs: Vec<Option<u64>> = unknown.iter().map(|&i| member(i)).collect();
        for ((&i, columns), seq) in unknown.iter().zip(decoded).zip(seqs) {
            let Some(reason) = answer.iter().find(|(j, _)| *j == i).map(|(_, r)| *r) else {
                continue; // not unavailable (yet): its real prediction may still win
            };
            let Some((seq, m)) = seq.and_then(|s| Some((s, self.members.get_mut(&s)?))) else {
                continue;
            };
            let unavailable_at = match (&m.outcome, reason) {
                (Outcome::Failed(_, at), _) => *at,
                (_, Reason::Late) => m.late_at.unwrap_or(now).min(now),
                _ => now,
            };
            m.outcome = Outcome::Reconstructed(columns.clone());
            if !m.answered {
                m.answered = true;
                bump(match reason {
                    Reason::Late => &self.shared.counters.reconstructed_late,
                    Reason::Failed => &self.shared.counters.reconstructed_failed,
                });
                self.answers.push(Answer::Reconstructed {
                    member: seq,
                    columns,
                    reason,
                    group: id,
                    unavailable_at,
                });
            }
        }
        true
    }
}

/// A parity output's pieces joined in row order (`None`: they do not join).
fn join_pieces(mut pieces: Vec<(usize, Vec<TensorColumn>)>) -> Option<Vec<TensorColumn>> {
    if pieces.len() == 1 {
        return pieces.pop().map(|(_, c)| c);
    }
    pieces.sort_by_key(|(row, _)| *row);
    let width = pieces.first()?.1.len();
    (0..width)
        .map(|c| {
            let parts: Vec<&TensorColumn> = pieces
                .iter()
                .map(|(_, cols)| cols.get(c))
                .collect::<Option<_>>()?;
            TensorColumn::concat("parity", &parts).ok()
        })
        .collect()
}
