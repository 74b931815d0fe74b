//! The brute-force reference for [`super::PaperPolicy`]: the same decision, found by scanning
//! every variant of the registry, every instance and every worker instead of reading the
//! snapshot's indexes. The decision-time benchmark measures the policy against it, and the
//! property tests check both agree.

use super::{
    active_rank, choice, cold_rank, explicit, least, matches, task_no_match, VariantPolicy,
};
use crate::query::{Choice, NoMatch, Query, Target};
use crate::store::{InstanceView, Snapshot, VariantId};

/// Selection by exhaustive scan (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct BruteForce;

/// The least-loaded usable instance of `id`, by scanning every instance.
fn usable(snapshot: &Snapshot, id: VariantId) -> Option<&InstanceView> {
    snapshot
        .instances()
        .iter()
        .filter(|i| i.variant == id && i.usable())
        .min_by(|a, b| a.load_order(b))
}

/// Where to load `id`, by scanning every instance and worker.
fn cold(snapshot: &Snapshot, id: VariantId) -> Option<&str> {
    let v = snapshot.registry().get(id)?;
    let mine = || snapshot.instances().iter().filter(move |i| i.variant == id);
    if let Some(i) = mine().filter(|i| i.loading).min_by(|a, b| a.load_order(b)) {
        return Some(&i.worker);
    }
    snapshot
        .workers()
        .iter()
        .filter(|w| w.hardware == v.config.hardware && !mine().any(|i| i.worker == w.id))
        .min_by(|a, b| a.utilisation_order(b))
        .map(|w| w.id.as_str())
}

impl VariantPolicy for BruteForce {
    fn select(&self, snapshot: &Snapshot, query: &Query) -> Result<Choice, NoMatch> {
        let task = match &query.target {
            Target::Variant(name) => {
                return explicit(
                    snapshot,
                    name,
                    |id| usable(snapshot, id).map(|i| i.worker.clone()),
                    |id| cold(snapshot, id).map(str::to_string),
                )
            }
            Target::Task(task) => task,
        };
        let (req, batch) = (&query.requirements, query.batch);
        let candidates = || {
            snapshot
                .registry()
                .variants()
                .iter()
                .enumerate()
                .filter(|(_, v)| v.task == *task && matches(v, req, batch))
                .map(|(id, v)| (id as VariantId, v))
        };
        let active =
            least(candidates().filter_map(|(id, v)| {
                Some((usable(snapshot, id)?, v, active_rank(v, req, batch)))
            }));
        if let Some((instance, v, _)) = active {
            return Ok(choice(v, &instance.worker, false));
        }
        let cold = least(
            candidates().filter_map(|(id, v)| Some((cold(snapshot, id)?, v, cold_rank(v, batch)))),
        );
        if let Some((worker, v, _)) = cold {
            return Ok(choice(v, worker, true));
        }
        Err(task_no_match(
            snapshot,
            task,
            req,
            batch,
            candidates().next().is_some(),
        ))
    }
}
