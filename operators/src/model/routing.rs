//! Kairos routing for a replica pool (Kairos, HPDC '23, §5.1): the
//! node's queue and one distribution round, with no threads, timely or transport in it.
//!
//! [`KairosQueue`] keeps the jobs waiting for a replica in FIFO order and, per replica, whether it
//! is busy and when its job is predicted to finish. A round ([`KairosQueue::round`]) hands the
//! first `2N` queued jobs and every usable replica (busy ones included, with their predicted
//! remaining time) to [`weir_kairos::distribution::Distributor`]: min-cost assignment with cost
//! `η_type × (remaining + predicted latency)`, pairs that would miss the QoS target penalised, and
//! only pairs whose replica is idle are dispatched. A job matched to a busy replica stays queued
//! until the next round: that is Kairos waiting for a fast instance rather than giving a job to a
//! slow one that would miss QoS. The pool ([`super::replicas`]) runs a round on every arrival,
//! every completion, every refused offer (the operator retries a refused job every 200 µs, which
//! doubles as a fine-grained tick) and every replica revival; it keeps failover and
//! answered-once.
//!
//! Batching in the queue (unless `batch_queued_jobs: false`, which gives the paper's one query per
//! call): when the node's jobs may hold more rows than the queued ones do, a job
//! dispatched to an idle replica takes later queued jobs along in one call
//! ([`weir_kairos::batching`]: oldest first, within the rows per job, every member still within
//! `γ·T_QoS` by the predicted latency of the whole batch, and only a job whose extra weighted time
//! there is no more than serving it alone on another replica would cost). The pool concatenates
//! the batch's rows, splits the answer back per job, and re-queues every job of a batch whose
//! replica failed. Each replica still holds one call at a time; its predicted finish and the
//! learned latency are those of the batch's rows.
//!
//! Latency (where the paper leaves room): with `profiles:` in the YAML the profile's tables are used as
//! given and η comes from them (the artifact's behaviour: deterministic, profiled beforehand).
//! Without, each instance type's batch → latency is learned from the node's own completed jobs
//! ([`weir_kairos::predictor::OnlineLatency`]: per-bucket mean, a least-squares line in between),
//! measured from dispatch to answer, so the network hop and the executor's own queue count, and η
//! is recomputed from the learned latencies at the largest job after every completion. A type
//! nobody has served yet is predicted at 0 ms with η = 1, so each type is tried once early.
//! Arrival times are the jobs' `enqueued_at`, so time spent held back in the dataflow before the
//! pool had room counts toward the wait `w_i`.

use std::collections::VecDeque;
use std::time::Instant;

use weir_engine::batch::TensorColumn;

use weir_engine::routing::KairosRouting;
use weir_kairos::distribution::{
    eta_from, Distributor, DistributorConfig, InstanceState, LatencyModel, QueuedQuery,
};
use weir_kairos::predictor::OnlineLatency;
use weir_kairos::profile::ModelProfile;

/// Queued jobs per replica the Kairos queue holds before it refuses more (back-pressure), or twice
/// the rows per job if that is more (room to form batches); the round matches the first two per
/// replica (the artifact's window) and fills batches from the whole queue.
pub const KAIROS_QUEUE_PER_REPLICA: usize = 4;

/// Queued jobs per usable replica a round considers, oldest first (the artifact's `2N` window).
const KAIROS_WINDOW_PER_REPLICA: usize = 2;

/// Where predicted latencies come from.
enum Latency {
    /// The profile's tables (YAML `profiles:`).
    Tables(ModelProfile),
    /// Learned from completions.
    Learned(OnlineLatency),
}

impl Latency {
    fn model(&self) -> &dyn LatencyModel {
        match self {
            Latency::Tables(p) => p,
            Latency::Learned(o) => o,
        }
    }
}

/// A replica's job in flight, as the router sees it.
#[derive(Debug, Clone, Copy)]
struct Busy {
    since: Instant,
    predicted_until_ms: f64,
    batch: u32,
}

/// A job waiting in the queue.
struct Waiting<J> {
    job: J,
    query: QueuedQuery,
}

/// Why a Kairos queue cannot be built (validation rules these out; kept for the builder API).
#[derive(Debug, Clone, thiserror::Error)]
pub enum RoutingError {
    /// The routing lists a different number of replicas than the pool has.
    #[error("kairos routing describes {described} replicas, the pool has {actual}")]
    ReplicaCount {
        /// Replicas with an instance type in the routing.
        described: usize,
        /// Replicas in the pool.
        actual: usize,
    },
    /// A replica's instance type is not in the latency profile.
    #[error("instance type `{0}` is not in the kairos latency profile")]
    UnknownType(String),
}

/// The Kairos router of one pool: queue, replica states, latency model and distributor.
pub struct KairosQueue<J> {
    distributor: Distributor,
    latency: Latency,
    /// Instance-type index of each replica.
    type_of: Vec<usize>,
    busy: Vec<Option<Busy>>,
    queue: VecDeque<Waiting<J>>,
    capacity: usize,
    /// The largest job's rows, where η is measured when it is learned.
    max_batch: u32,
    /// Whether an idle replica may take several queued jobs in one call.
    batch_jobs: bool,
    epoch: Instant,
}

impl<J> std::fmt::Debug for KairosQueue<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KairosQueue")
            .field("queued", &self.queue.len())
            .field("busy", &self.busy)
            .field("eta", &self.distributor.eta())
            .finish()
    }
}

fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX).max(1)
}

impl<J> KairosQueue<J> {
    /// A router for `n_replicas` replicas described by `routing`, whose jobs hold at most
    /// `max_rows` rows.
    ///
    /// # Errors
    /// When `routing` does not describe `n_replicas` replicas, or names a type its profile lacks.
    pub fn new(
        routing: &KairosRouting,
        n_replicas: usize,
        max_rows: usize,
    ) -> Result<Self, RoutingError> {
        if routing.replica_types.len() != n_replicas {
            return Err(RoutingError::ReplicaCount {
                described: routing.replica_types.len(),
                actual: n_replicas,
            });
        }
        let config = DistributorConfig::default();
        let (distributor, latency, type_of) = match &routing.profile {
            Some(profile) => {
                let profile = profile.clone().with_qos_ms(routing.qos_ms);
                let type_of = routing
                    .replica_types
                    .iter()
                    .map(|t| {
                        profile
                            .type_index(t)
                            .ok_or_else(|| RoutingError::UnknownType(t.clone()))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (
                    Distributor::with_config(&profile, config),
                    Latency::Tables(profile),
                    type_of,
                )
            }
            None => {
                let mut names: Vec<&str> = Vec::new();
                let type_of = routing
                    .replica_types
                    .iter()
                    .map(|t| match names.iter().position(|n| n == t) {
                        Some(i) => i,
                        None => {
                            names.push(t);
                            names.len() - 1
                        }
                    })
                    .collect();
                (
                    Distributor::learned(routing.qos_ms, names.len(), config),
                    // Buckets of ~1/100 of the largest job (1 row up to 100-row jobs), so the
                    // rows of a batch show in its prediction.
                    Latency::Learned(
                        OnlineLatency::new(names.len(), None)
                            .with_bucket_width(clamp_u32(max_rows.div_ceil(100))),
                    ),
                    type_of,
                )
            }
        };
        Ok(KairosQueue {
            distributor,
            latency,
            type_of,
            busy: vec![None; n_replicas],
            queue: VecDeque::new(),
            capacity: KAIROS_QUEUE_PER_REPLICA.max(2 * max_rows) * n_replicas.max(1),
            max_batch: clamp_u32(max_rows),
            batch_jobs: routing.batch_queued_jobs,
            epoch: Instant::now(),
        })
    }

    fn ms(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.epoch).as_secs_f64() * 1e3
    }

    /// Whether another job fits in the queue.
    pub fn has_room(&self) -> bool {
        self.queue.len() < self.capacity
    }

    /// Jobs waiting.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no job waits.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether replica `r` has a job in flight.
    pub fn is_busy(&self, r: usize) -> bool {
        self.busy.get(r).is_some_and(Option::is_some)
    }

    /// η per instance type now (from the profile, or learned).
    pub fn eta(&self) -> &[f64] {
        self.distributor.eta()
    }

    /// Predicted latency (ms) of a job of `rows` rows on replica `r`'s type.
    pub fn predicted_ms(&self, r: usize, rows: usize) -> f64 {
        self.type_of.get(r).map_or(0.0, |&t| {
            self.latency.model().latency_ms(t, clamp_u32(rows))
        })
    }

    /// Queues a new job of `rows` rows that arrived at `arrived` (the caller checked
    /// [`Self::has_room`]; a job is never dropped here).
    pub fn push(&mut self, job: J, rows: usize, arrived: Instant) {
        let query = QueuedQuery {
            batch: clamp_u32(rows),
            arrival_ms: self.ms(arrived),
        };
        self.queue.push_back(Waiting { job, query });
    }

    /// Puts a job back at the head (a re-dispatch after its replica failed); it keeps its arrival
    /// time, and may take the queue past its capacity.
    pub fn push_front(&mut self, job: J, rows: usize, arrived: Instant) {
        let query = QueuedQuery {
            batch: clamp_u32(rows),
            arrival_ms: self.ms(arrived),
        };
        self.queue.push_front(Waiting { job, query });
    }

    /// Takes every queued job (when no replica is alive to serve them).
    pub fn drain(&mut self) -> Vec<J> {
        self.queue.drain(..).map(|w| w.job).collect()
    }

    /// One distribution round at `now` over the replicas marked `usable` (alive and not set
    /// aside). Returns, per replica given work, the batch of jobs to dispatch to it now (FIFO
    /// order within the batch, at most the pool's rows per job in all; see
    /// [`weir_kairos::batching`]), in the order of each batch's first job; each returned replica
    /// was idle and is now marked busy until [`Self::finished`].
    pub fn round(&mut self, now: Instant, usable: &[bool]) -> Vec<(Vec<J>, usize)> {
        let now_ms = self.ms(now);
        let mut replica_of = Vec::with_capacity(self.busy.len());
        let mut states = Vec::with_capacity(self.busy.len());
        for (r, busy) in self.busy.iter().enumerate() {
            if !usable.get(r).copied().unwrap_or(false) {
                continue;
            }
            replica_of.push(r);
            states.push(InstanceState {
                type_idx: self.type_of[r],
                busy_until_ms: match busy {
                    // Predicted to have finished but not answered yet: still busy, a hair left.
                    Some(b) => b.predicted_until_ms.max(now_ms + 1e-6),
                    None => now_ms,
                },
            });
        }
        if self.queue.is_empty() || !states.iter().any(|s| s.is_idle(now_ms)) {
            return Vec::new();
        }
        let queued: Vec<QueuedQuery> = self.queue.iter().map(|w| w.query).collect();
        let window = &queued[..queued.len().min(KAIROS_WINDOW_PER_REPLICA * states.len())];
        let model = self.latency.model();
        let matching = self
            .distributor
            .matching_with(model, window, &states, now_ms);
        // Matched queries are spoken for, whether dispatched now or kept for a busy replica.
        let mut taken = vec![false; queued.len()];
        for &(i, _, _) in &matching {
            taken[i] = true;
        }
        let mut batches: Vec<(Vec<usize>, usize)> = Vec::new();
        for &(i, s, now_too) in &matching {
            if !now_too {
                continue;
            }
            let joined = if self.batch_jobs && self.max_batch > queued[i].batch {
                self.distributor.fill_batch(
                    model,
                    &queued,
                    i,
                    &taken,
                    &states,
                    s,
                    now_ms,
                    self.max_batch,
                )
            } else {
                Vec::new()
            };
            let mut members = vec![i];
            members.extend(joined);
            let rows = members
                .iter()
                .map(|&k| queued[k].batch)
                .fold(0u32, u32::saturating_add);
            for &k in &members {
                taken[k] = true;
            }
            let predicted = model.latency_ms(states[s].type_idx, rows);
            states[s].busy_until_ms = now_ms + predicted;
            self.busy[replica_of[s]] = Some(Busy {
                since: now,
                predicted_until_ms: now_ms + predicted,
                batch: rows,
            });
            batches.push((members, replica_of[s]));
        }
        // Take the dispatched jobs out; the others keep their order.
        let mut slots: Vec<Option<Waiting<J>>> = self.queue.drain(..).map(Some).collect();
        let out = batches
            .into_iter()
            .map(|(members, r)| {
                let jobs = members
                    .iter()
                    .filter_map(|&k| slots.get_mut(k).and_then(Option::take))
                    .map(|w| w.job)
                    .collect();
                (jobs, r)
            })
            .collect();
        self.queue.extend(slots.into_iter().flatten());
        out
    }

    /// Replica `r` answered its job at `now`; `served` says it produced outputs (its latency is
    /// then a sample for a learned model). Frees the replica.
    pub fn finished(&mut self, r: usize, now: Instant, served: bool) {
        let Some(b) = self.busy.get_mut(r).and_then(Option::take) else {
            return;
        };
        if let (true, Latency::Learned(model)) = (served, &mut self.latency) {
            let t = self.type_of[r];
            let ms = now.saturating_duration_since(b.since).as_secs_f64() * 1e3;
            model.observe(t, b.batch, ms);
            let known: Vec<bool> = (0..self.distributor.eta().len())
                .map(|t| model.predict_ms(t, self.max_batch).is_some())
                .collect();
            let eta = eta_from(model, &known, self.max_batch);
            self.distributor.set_eta(eta);
        }
    }
}

/// The rows of several jobs as one call's inputs: each input column of every job, one after
/// another, in job order. `Err` names the column whose jobs disagree on type or row shape (a node's
/// jobs never do).
pub(crate) fn concat_jobs(jobs: &[&[TensorColumn]]) -> Result<Vec<TensorColumn>, String> {
    let Some(first) = jobs.first() else {
        return Ok(Vec::new());
    };
    (0..first.len())
        .map(|c| {
            let cols: Vec<&TensorColumn> = jobs.iter().filter_map(|j| j.get(c)).collect();
            if cols.len() != jobs.len() {
                return Err(format!("input {c} differs between the batched jobs"));
            }
            TensorColumn::concat("batched input", &cols)
                .map_err(|e| format!("input {c} differs between the batched jobs: {e}"))
        })
        .collect()
}

/// One call's output columns cut back into the jobs it served, `rows[k]` rows for job `k` in
/// order (no copy). `Err` when an output column does not hold every row.
pub(crate) fn split_rows(
    columns: &[TensorColumn],
    rows: &[usize],
) -> Result<Vec<Vec<TensorColumn>>, String> {
    let total: usize = rows.iter().sum();
    if let Some(c) = columns.iter().find(|c| c.len() != total) {
        return Err(format!(
            "an output has {} rows for a batch of {total} rows",
            c.len()
        ));
    }
    let mut offset = 0;
    Ok(rows
        .iter()
        .map(|&n| {
            let part = columns.iter().map(|c| c.slice(offset, n)).collect();
            offset += n;
            part
        })
        .collect())
}

#[cfg(test)]
mod tests;
