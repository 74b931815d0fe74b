//! Per-query variant selection ("INFaaS: Automated Model-less Inference Serving", §4.1
//! `getVariant`), as a replaceable policy over the store's [`Snapshot`].
//!
//! [`VariantPolicy`] is the seam (a low-power or cheapest-first policy replaces the default without
//! touching the store); [`PaperPolicy`] is the paper's:
//!
//! 1. **Explicit variant**: only the worker is chosen: its least-loaded usable instance, else a
//!    worker to load it on ([`cold_worker`]).
//! 2. **Candidates**: the task's variants with accuracy ≥ `min_accuracy`, T_inf(batch) ≤
//!    `latency_ms`, max batch ≥ batch and price ≤ `max_cost` ([`matches()`]).
//! 3. **Active first**: among candidates with a usable (Active, loaded) instance, the one whose
//!    latency is closest below the SLO (least `latency_ms − T_inf`, as the paper's public code
//!    does; least T_inf when no SLO is given; ties by name), on its least-loaded usable instance.
//!    An Active candidate wins over a faster one that would need loading.
//! 4. **Else cold**: the candidate with least T_load + T_inf (ties by name) that has a worker to
//!    load on, with `cold` set.
//! 5. **Else no match**, naming the variant of the task at the least [`distance`].
//!
//! Overloaded and Interfered instances are never chosen: a variant whose instances are all such
//! counts as not loaded (the paper's Table 7 "state (a)").
//!
//! The policy reads the snapshot's indexes (the task's variants sorted by accuracy so the accuracy
//! bound is a prefix; each variant's instances usable-first by load; each hardware's workers by
//! utilisation). [`BruteForce`] decides the same by scanning every variant, instance and worker;
//! it is the benchmark's reference and the property tests' oracle.

mod brute;

pub use brute::BruteForce;

use crate::query::{Choice, NoMatch, Query, Requirements, Target};
use crate::snapshot::{InstanceView, Snapshot, VariantId};
use crate::variant::Variant;

/// Picks a variant and worker for a query from a snapshot of the store.
pub trait VariantPolicy: Send + Sync {
    /// The decision for `query`, or why nothing can serve it.
    fn select(&self, snapshot: &Snapshot, query: &Query) -> Result<Choice, NoMatch>;
}

/// The paper's `getVariant` (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct PaperPolicy;

/// Inference latency of one call of `batch` rows (at least 1).
pub fn inference_ms(v: &Variant, batch: u32) -> Option<f64> {
    v.profile.inference_ms(batch.max(1))
}

/// Whether `v` meets `req` for a call of `batch` rows.
pub fn matches(v: &Variant, req: &Requirements, batch: u32) -> bool {
    let accurate = req.min_accuracy.is_none_or(|a| v.accuracy >= a);
    let fast = req
        .latency_ms
        .is_none_or(|s| inference_ms(v, batch).is_some_and(|t| t <= s));
    let cheap = req.max_cost.is_none_or(|c| v.price_per_s <= c);
    accurate && fast && cheap && v.max_batch >= batch.max(1)
}

/// The rank of an Active candidate: least wins (slack below the SLO, or latency without one).
pub fn active_rank(v: &Variant, req: &Requirements, batch: u32) -> f64 {
    let t = inference_ms(v, batch).unwrap_or(f64::INFINITY);
    req.latency_ms.map_or(t, |s| s - t)
}

/// The rank of a candidate that must be loaded: T_load + T_inf, least wins.
pub fn cold_rank(v: &Variant, batch: u32) -> f64 {
    v.profile.load_ms + inference_ms(v, batch).unwrap_or(f64::INFINITY)
}

/// How far `v` is from meeting `req`: the sum of each unmet requirement's shortfall relative to
/// the requirement (accuracy `(A − acc)/A`, latency `(T_inf − S)/S`, cost `(price − C)/C`, batch
/// `(b − max_batch)/b`); 0 when `v` matches. An unprofiled variant is infinitely far from an SLO.
pub fn distance(v: &Variant, req: &Requirements, batch: u32) -> f64 {
    let short = |want: f64, have: f64| {
        if have > want {
            (have - want) / want.max(f64::MIN_POSITIVE)
        } else {
            0.0
        }
    };
    let b = batch.max(1);
    let mut d = 0.0;
    if let Some(a) = req.min_accuracy {
        if v.accuracy < a {
            d += (a - v.accuracy) / a;
        }
    }
    if let Some(s) = req.latency_ms {
        d += inference_ms(v, b).map_or(f64::INFINITY, |t| short(s, t));
    }
    if let Some(c) = req.max_cost {
        d += short(c, v.price_per_s);
    }
    if v.max_batch < b {
        d += f64::from(b - v.max_batch) / f64::from(b);
    }
    d
}

/// The least of `items` by `rank`, ties broken by variant name.
pub(crate) fn least<'a, T>(
    items: impl Iterator<Item = (T, &'a Variant, f64)>,
) -> Option<(T, &'a Variant, f64)> {
    items.min_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.1.name.cmp(&b.1.name)))
}

/// The no-match answer for a task query whose variants are `variants`.
pub(crate) fn no_match<'a>(
    reason: String,
    variants: impl Iterator<Item = &'a Variant>,
    req: &Requirements,
    batch: u32,
) -> NoMatch {
    let closest = least(variants.map(|v| ((), v, distance(v, req, batch))));
    NoMatch {
        reason,
        closest: closest.map(|(_, v, _)| v.name.clone()),
        distance: closest.map(|(_, _, d)| d),
    }
}

/// Where a variant not usable anywhere is loaded: a worker already loading it, else the
/// least-utilised worker of its hardware that does not hold it yet (one holding it holds an
/// Overloaded or Interfered instance).
pub fn cold_worker(snapshot: &Snapshot, id: VariantId) -> Option<&str> {
    let v = snapshot.registry().get(id)?;
    let instances = snapshot.instances_of(id);
    if let Some(i) = instances.iter().find(|i| i.loading) {
        return Some(&i.worker);
    }
    snapshot
        .workers_of(&v.config.hardware)
        .iter()
        .find(|w| !instances.iter().any(|i| i.worker == w.id))
        .map(|w| w.id.as_str())
}

pub(crate) fn choice(v: &Variant, worker: &str, cold: bool) -> Choice {
    Choice {
        variant: v.name.clone(),
        worker: worker.to_string(),
        cold,
    }
}

/// How a policy finds things in a snapshot: through its indexes ([`PaperPolicy`]) or by scanning
/// everything ([`BruteForce`]). [`decide`] applies the paper's rules over either.
pub(crate) trait Lookup<'s> {
    /// The variants of `task` that meet `req` for `batch` rows.
    fn candidates(
        &self,
        task: &str,
        req: &Requirements,
        batch: u32,
    ) -> impl Iterator<Item = (VariantId, &'s Variant)>;
    /// The least-loaded usable instance of `id`.
    fn usable(&self, id: VariantId) -> Option<&'s InstanceView>;
    /// Where to load `id` ([`cold_worker`]).
    fn cold(&self, id: VariantId) -> Option<&'s str>;
}

/// The paper's decision (see the module documentation), finding things through `lookup`.
pub(crate) fn decide<'s>(
    snapshot: &'s Snapshot,
    query: &Query,
    lookup: &impl Lookup<'s>,
) -> Result<Choice, NoMatch> {
    let registry = snapshot.registry();
    let (req, batch) = (&query.requirements, query.batch);
    let task = match &query.target {
        Target::Task(task) => task,
        Target::Variant(name) => {
            let unknown = || NoMatch {
                reason: format!("no variant named {name}"),
                closest: None,
                distance: None,
            };
            let id = registry.id(name).ok_or_else(unknown)?;
            let v = registry.get(id).ok_or_else(unknown)?;
            if let Some(i) = lookup.usable(id) {
                return Ok(choice(v, &i.worker, false));
            }
            if let Some(w) = lookup.cold(id) {
                return Ok(choice(v, w, true));
            }
            return Err(NoMatch {
                reason: format!(
                    "variant {name}: no worker of hardware {} can take it",
                    v.config.hardware
                ),
                closest: Some(v.name.clone()),
                distance: Some(0.0),
            });
        }
    };
    let active = least(
        lookup
            .candidates(task, req, batch)
            .filter_map(|(id, v)| Some((lookup.usable(id)?, v, active_rank(v, req, batch)))),
    );
    if let Some((instance, v, _)) = active {
        return Ok(choice(v, &instance.worker, false));
    }
    let cold = least(
        lookup
            .candidates(task, req, batch)
            .filter_map(|(id, v)| Some((lookup.cold(id)?, v, cold_rank(v, batch)))),
    );
    if let Some((worker, v, _)) = cold {
        return Ok(choice(v, worker, true));
    }
    let had_candidates = lookup.candidates(task, req, batch).next().is_some();
    let reason = if registry.task(task).is_empty() {
        format!("no variant serves task {task}")
    } else if had_candidates {
        format!("task {task}: the variants that meet the requirements have no worker to run on")
    } else {
        format!("task {task}: no variant meets the requirements")
    };
    let variants = registry
        .task(task)
        .iter()
        .filter_map(|id| registry.get(*id));
    Err(no_match(reason, variants, req, batch))
}

/// The snapshot's indexes.
struct Indexed<'s>(&'s Snapshot);

impl<'s> Lookup<'s> for Indexed<'s> {
    fn candidates(
        &self,
        task: &str,
        req: &Requirements,
        batch: u32,
    ) -> impl Iterator<Item = (VariantId, &'s Variant)> {
        let registry = self.0.registry();
        let ids = registry.task(task);
        // Sorted most accurate first: the accuracy bound is a prefix.
        let accurate = match req.min_accuracy {
            Some(a) => ids.partition_point(|id| registry.get(*id).is_some_and(|v| v.accuracy >= a)),
            None => ids.len(),
        };
        let req = *req;
        ids[..accurate]
            .iter()
            .filter_map(move |id| registry.get(*id).map(|v| (*id, v)))
            .filter(move |(_, v)| matches(v, &req, batch))
    }

    fn usable(&self, id: VariantId) -> Option<&'s InstanceView> {
        self.0.instances_of(id).first().filter(|i| i.usable())
    }

    fn cold(&self, id: VariantId) -> Option<&'s str> {
        cold_worker(self.0, id)
    }
}

impl VariantPolicy for PaperPolicy {
    fn select(&self, snapshot: &Snapshot, query: &Query) -> Result<Choice, NoMatch> {
        decide(snapshot, query, &Indexed(snapshot))
    }
}

#[cfg(test)]
mod tests;
