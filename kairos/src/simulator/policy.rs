//! Query-distribution policies the simulator compares (paper §7), each as a
//! `Dispatcher`: it is told about arrivals and asked, at every event, which queued queries go to
//! which idle instances now.
//!
//! - [`Policy::Kairos`]: the min-cost matching of [`crate::distribution`], re-solved at every event.
//! - [`Policy::Fcfs`]: Ribbon's distribution: the head of one FIFO goes to the first idle instance
//!   in pool order (base instances first).
//! - [`Policy::Drs`]: DeepRecSys-like static threshold: batches above it wait for a base instance,
//!   the rest for an auxiliary one (FIFO each, first idle in pool order). With no auxiliary
//!   instance every query goes to the base. The simulator's caller sweeps the threshold.
//! - [`Policy::Clockwork`]: Clockwork-like controller: one FIFO per instance; on arrival a query
//!   joins the queue of the instance where it is predicted to finish earliest, preferring those
//!   that meet QoS (they all do if any can, since earliest finish is a minimum).

use std::collections::VecDeque;

use crate::distribution::LatencyModel;
use crate::distribution::{Distributor, DistributorConfig, InstanceState, QueuedQuery};
use crate::predictor::OnlineLatency;
use crate::profile::ModelProfile;

/// A query-distribution policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// Kairos's min-cost matching with these settings.
    Kairos(DistributorConfig),
    /// First come, first served, base instances first (Ribbon).
    Fcfs,
    /// Static batch threshold: larger batches to base instances, the rest to auxiliary ones.
    Drs {
        /// Batches strictly above this go to base instances.
        threshold: u32,
    },
    /// Per-instance queues filled by earliest predicted finish.
    Clockwork,
}

impl Policy {
    /// Kairos with the default settings.
    pub fn kairos() -> Self {
        Policy::Kairos(DistributorConfig::default())
    }

    /// Short name for tables.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Kairos(_) => "Kairos",
            Policy::Fcfs => "FCFS",
            Policy::Drs { .. } => "DRS",
            Policy::Clockwork => "CLKWRK",
        }
    }
}

/// The pool as dispatchers see it: instance types (base first) and predicted busy-until times.
pub(crate) struct PoolView<'a> {
    pub types: &'a [usize],
    pub busy_until: &'a [f64],
    pub is_base: &'a [bool],
}

/// One policy's queueing state during a run.
pub(crate) trait Dispatcher {
    /// Query `q` (batch `batch`) arrived at `now`.
    fn admit(&mut self, q: usize, batch: u32, now: f64, pool: &PoolView<'_>);
    /// `(query, instance)` pairs to start now; every instance returned is idle.
    fn dispatch(&mut self, now: f64, pool: &PoolView<'_>, out: &mut Vec<(usize, usize)>);
    /// Whether the state changes with time alone (Kairos holding work while an instance idles).
    fn wants_tick(&self, now: f64, pool: &PoolView<'_>) -> bool;
    /// Instance `j` of type `type_idx` finished a batch of `batch` in `service_ms`.
    fn completed(&mut self, _j: usize, _type_idx: usize, _batch: u32, _service_ms: f64) {}
}

/// Builds the dispatcher of a policy.
/// With `learn`, Kairos predicts latency with an [`OnlineLatency`] that starts empty and learns
/// from completions (paper §5.1) instead of reading the profile's tables.
pub(crate) fn dispatcher(
    policy: Policy,
    profile: &ModelProfile,
    n_instances: usize,
    learn: bool,
) -> Box<dyn Dispatcher> {
    match policy {
        Policy::Kairos(cfg) => Box::new(KairosQueue {
            distributor: Distributor::with_config(profile, cfg),
            tables: profile.clone(),
            learned: learn.then(|| OnlineLatency::new(profile.types.len(), None)),
            predicted_until: vec![0.0; n_instances],
            queue: VecDeque::new(),
            scratch: Vec::new(),
            states: Vec::new(),
        }),
        Policy::Fcfs => Box::new(SplitFifo {
            threshold: None,
            large: VecDeque::new(),
            small: VecDeque::new(),
        }),
        Policy::Drs { threshold } => Box::new(SplitFifo {
            threshold: Some(threshold),
            large: VecDeque::new(),
            small: VecDeque::new(),
        }),
        Policy::Clockwork => Box::new(PerInstance {
            profile: profile.clone(),
            queues: vec![VecDeque::new(); n_instances],
            drain: vec![0.0; n_instances],
        }),
    }
}

fn idle<'a>(pool: &PoolView<'a>, now: f64) -> impl Iterator<Item = usize> + 'a {
    let busy = pool.busy_until;
    (0..busy.len()).filter(move |&j| busy[j] <= now)
}

struct KairosQueue {
    distributor: Distributor,
    tables: ModelProfile,
    learned: Option<OnlineLatency>,
    /// Predicted finish of each instance's current batch: the router never sees the true one.
    predicted_until: Vec<f64>,
    queue: VecDeque<(usize, QueuedQuery)>,
    scratch: Vec<QueuedQuery>,
    states: Vec<InstanceState>,
}

impl Dispatcher for KairosQueue {
    fn admit(&mut self, q: usize, batch: u32, now: f64, _: &PoolView<'_>) {
        self.queue.push_back((
            q,
            QueuedQuery {
                batch,
                arrival_ms: now,
            },
        ));
    }

    fn dispatch(&mut self, now: f64, pool: &PoolView<'_>, out: &mut Vec<(usize, usize)>) {
        if self.queue.is_empty() || idle(pool, now).next().is_none() {
            return;
        }
        let window = self.queue.len().min(2 * pool.types.len());
        self.scratch.clear();
        self.scratch
            .extend(self.queue.iter().take(window).map(|e| e.1));
        // An instance that has really finished is idle; a busy one is predicted to finish at its
        // dispatch time plus the predicted latency (at least a hair from now while still busy).
        self.states.clear();
        self.states
            .extend(pool.types.iter().enumerate().map(|(j, &t)| InstanceState {
                type_idx: t,
                busy_until_ms: if pool.busy_until[j] <= now {
                    pool.busy_until[j]
                } else {
                    self.predicted_until[j].max(now + 1e-6)
                },
            }));
        let model: &dyn LatencyModel = match &self.learned {
            Some(l) => l,
            None => &self.tables,
        };
        let pairs = self
            .distributor
            .assign_with(model, &self.scratch, &self.states, now);
        for &(i, j) in &pairs {
            let (q, query) = self.queue[i];
            self.predicted_until[j] = now + model.latency_ms(pool.types[j], query.batch);
            out.push((q, j));
        }
        // Remove dispatched window entries, highest index first so the others keep their place.
        for &(i, _) in pairs.iter().rev() {
            self.queue.remove(i);
        }
    }

    fn completed(&mut self, _j: usize, type_idx: usize, batch: u32, service_ms: f64) {
        if let Some(l) = &mut self.learned {
            l.observe(type_idx, batch, service_ms);
        }
    }

    fn wants_tick(&self, now: f64, pool: &PoolView<'_>) -> bool {
        !self.queue.is_empty() && idle(pool, now).next().is_some()
    }
}

/// FCFS (no threshold) and DRS (threshold): FIFO queues served by instances in pool order.
struct SplitFifo {
    threshold: Option<u32>,
    large: VecDeque<usize>,
    small: VecDeque<usize>,
}

impl Dispatcher for SplitFifo {
    fn admit(&mut self, q: usize, batch: u32, _: f64, pool: &PoolView<'_>) {
        let has_aux = pool.is_base.iter().any(|b| !b);
        match self.threshold {
            Some(t) if has_aux && batch <= t => self.small.push_back(q),
            _ => self.large.push_back(q),
        }
    }

    fn dispatch(&mut self, now: f64, pool: &PoolView<'_>, out: &mut Vec<(usize, usize)>) {
        for j in idle(pool, now) {
            // FCFS keeps everything in `large` and any instance serves it.
            let queue = if self.threshold.is_none() || pool.is_base[j] {
                &mut self.large
            } else {
                &mut self.small
            };
            match queue.pop_front() {
                Some(q) => out.push((q, j)),
                None if self.large.is_empty() && self.small.is_empty() => return,
                None => {}
            }
        }
    }

    fn wants_tick(&self, _: f64, _: &PoolView<'_>) -> bool {
        false
    }
}

/// Clockwork-like: per-instance FIFO queues filled at arrival by earliest predicted finish.
struct PerInstance {
    profile: ModelProfile,
    queues: Vec<VecDeque<usize>>,
    drain: Vec<f64>,
}

impl Dispatcher for PerInstance {
    fn admit(&mut self, q: usize, batch: u32, now: f64, pool: &PoolView<'_>) {
        let finish = |j: usize| {
            // Its own predictions only: the controller never sees true finish times.
            self.drain[j].max(now) + self.profile.latency_ms(pool.types[j], batch)
        };
        let best = (0..pool.types.len()).min_by(|&a, &b| finish(a).total_cmp(&finish(b)));
        if let Some(j) = best {
            self.drain[j] = finish(j);
            self.queues[j].push_back(q);
        }
    }

    fn dispatch(&mut self, now: f64, pool: &PoolView<'_>, out: &mut Vec<(usize, usize)>) {
        for j in idle(pool, now) {
            if let Some(q) = self.queues[j].pop_front() {
                out.push((q, j));
            }
        }
    }

    fn wants_tick(&self, _: f64, _: &PoolView<'_>) -> bool {
        false
    }
}
