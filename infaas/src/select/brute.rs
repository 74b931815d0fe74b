//! The brute-force reference for [`super::PaperPolicy`]: the same decision, found by scanning
//! every variant of the registry, every instance and every worker instead of reading the
//! snapshot's indexes. The decision-time benchmark measures the policy against it, and the
//! property tests check both agree.

use super::{decide, matches, Lookup, VariantPolicy};
use crate::query::{Choice, NoMatch, Query, Requirements};
use crate::snapshot::{InstanceView, Snapshot, VariantId};
use crate::variant::Variant;

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

/// Everything scanned.
struct Scan<'s>(&'s Snapshot);

impl<'s> Lookup<'s> for Scan<'s> {
    fn candidates(
        &self,
        task: &str,
        req: &Requirements,
        batch: u32,
    ) -> impl Iterator<Item = (VariantId, &'s Variant)> {
        let (task, req) = (task.to_string(), *req);
        self.0
            .registry()
            .variants()
            .iter()
            .enumerate()
            .filter(move |(_, v)| v.task == task && matches(v, &req, batch))
            .map(|(id, v)| (id as VariantId, v))
    }

    fn usable(&self, id: VariantId) -> Option<&'s InstanceView> {
        usable(self.0, id)
    }

    fn cold(&self, id: VariantId) -> Option<&'s str> {
        cold(self.0, id)
    }
}

impl VariantPolicy for BruteForce {
    fn select(&self, snapshot: &Snapshot, query: &Query) -> Result<Choice, NoMatch> {
        decide(snapshot, query, &Scan(snapshot))
    }
}
