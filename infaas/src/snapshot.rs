//! The read side of the metadata store: an immutable, read-optimised snapshot of the registry and
//! of the state the dataflow derived, which selection reads without locks held for more than an
//! `Arc` clone.
//!
//! The paper keeps its metadata in Redis hash maps and sorted sets so that lookups are about O(1)
//! ("INFaaS: Automated Model-less Inference Serving", §3.5); these are the same shapes in memory:
//! per task its variants sorted by accuracy (so an accuracy bound is a prefix), per variant its
//! instances sorted usable-first by load (so the least-loaded usable instance is the first one), per
//! hardware its workers sorted by utilisation (so the least-utilised worker is the first one).
//! A snapshot is rebuilt from the dataflow's output tables each time the dataflow's frontier
//! passes a batch of events; readers keep the one they loaded for as long as they use it.
//!
//! It sits beside [`crate::store`] rather than inside it: the store builds and publishes
//! snapshots, while [`crate::select`], [`crate::metrics`] and [`crate::autoscale`] only read them,
//! so they depend on this module and not on the store.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use crate::state::InstanceState;
use crate::variant::Variant;

/// A variant's index in the registry.
pub type VariantId = u32;

/// The registry: every variant, and its indexes. Immutable for the store's life.
#[derive(Debug)]
pub struct Registry {
    variants: Vec<Variant>,
    by_name: HashMap<String, VariantId>,
    by_task: HashMap<String, Vec<VariantId>>,
}

impl Registry {
    /// Indexes `variants`; a later variant with an already seen name is dropped (and logged).
    pub fn new(variants: Vec<Variant>) -> Self {
        let mut kept: Vec<Variant> = Vec::with_capacity(variants.len());
        let mut by_name = HashMap::new();
        for v in variants {
            if by_name.contains_key(&v.name) || kept.len() >= VariantId::MAX as usize {
                tracing::warn!(variant = %v.name, "duplicate variant name in the registry, dropped");
                continue;
            }
            by_name.insert(v.name.clone(), kept.len() as VariantId);
            kept.push(v);
        }
        let mut by_task: HashMap<String, Vec<VariantId>> = HashMap::new();
        for (id, v) in kept.iter().enumerate() {
            by_task
                .entry(v.task.clone())
                .or_default()
                .push(id as VariantId);
        }
        for ids in by_task.values_mut() {
            ids.sort_by(|a, b| {
                let (va, vb) = (&kept[*a as usize], &kept[*b as usize]);
                vb.accuracy
                    .total_cmp(&va.accuracy)
                    .then_with(|| va.name.cmp(&vb.name))
            });
        }
        Registry {
            variants: kept,
            by_name,
            by_task,
        }
    }

    /// All variants; a [`VariantId`] indexes this slice.
    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    /// The variant with id `id`.
    pub fn get(&self, id: VariantId) -> Option<&Variant> {
        self.variants.get(id as usize)
    }

    /// The id of the variant named `name`.
    pub fn id(&self, name: &str) -> Option<VariantId> {
        self.by_name.get(name).copied()
    }

    /// The variants of `task`, most accurate first (ties by name).
    pub fn task(&self, task: &str) -> &[VariantId] {
        self.by_task.get(task).map_or(&[], Vec::as_slice)
    }
}

/// One instance (a variant loaded or loading on a worker) as the dataflow last derived it.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceView {
    /// The variant.
    pub variant: VariantId,
    /// The worker holding it.
    pub worker: String,
    /// Its state; a loading instance is [`InstanceState::Inactive`] with `loading` set.
    pub state: InstanceState,
    /// Still loading.
    pub loading: bool,
    /// Served requests per second (last report; 0 before one).
    pub qps: f64,
    /// Mean call latency in ms (last report; 0 before one).
    pub mean_latency_ms: f64,
    /// Requests queued or running (last report).
    pub outstanding: u32,
}

impl InstanceView {
    /// Usable for new queries: loaded and Active (paper §4.1: never Overloaded or Interfered).
    pub fn usable(&self) -> bool {
        self.state == InstanceState::Active && !self.loading
    }

    /// The order of a variant's instances: usable first, then loaded before loading, then least
    /// loaded (fewest outstanding, then lowest qps), then by worker id. The first instance of a
    /// variant is its least-loaded usable one when it has any.
    pub fn load_order(&self, other: &Self) -> Ordering {
        (!self.usable())
            .cmp(&!other.usable())
            .then(self.loading.cmp(&other.loading))
            .then(self.outstanding.cmp(&other.outstanding))
            .then(self.qps.total_cmp(&other.qps))
            .then_with(|| self.worker.cmp(&other.worker))
    }
}

/// One worker as the dataflow last derived it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    /// Worker id.
    pub id: String,
    /// Its hardware (executor type).
    pub hardware: String,
    /// Last reported utilisation (0 before a report).
    pub utilisation: f64,
    /// Instances it holds (loading ones included).
    pub instances: u32,
    /// Whether one of them is Overloaded.
    pub overloaded: bool,
    /// How many of them are Interfered.
    pub interfered: u32,
}

impl WorkerView {
    /// The order of a hardware's workers: least utilised first, then fewest instances, then id.
    pub fn utilisation_order(&self, other: &Self) -> Ordering {
        self.utilisation
            .total_cmp(&other.utilisation)
            .then(self.instances.cmp(&other.instances))
            .then_with(|| self.id.cmp(&other.id))
    }
}

/// Aggregates over one hardware type's workers: what a worker autoscaler reads (paper §4.2.3).
#[derive(Debug, Clone, PartialEq)]
pub struct HardwareView {
    /// Workers of this type that are up.
    pub workers: u32,
    /// Least utilisation among them.
    pub min_utilisation: f64,
    /// Mean utilisation.
    pub mean_utilisation: f64,
    /// Fraction of them holding an Overloaded instance.
    pub overloaded_fraction: f64,
    /// They hold at least one instance and every one is Interfered.
    pub all_interfered: bool,
}

/// The registry and the derived state at one point of the dataflow's progress.
#[derive(Debug)]
pub struct Snapshot {
    registry: Arc<Registry>,
    instances: Vec<InstanceView>,
    by_variant: Vec<Range<usize>>,
    workers: Vec<WorkerView>,
    by_hardware: HashMap<String, (Range<usize>, HardwareView)>,
    worker_index: HashMap<String, usize>,
    events: u64,
}

impl Snapshot {
    /// Builds the indexes over the derived rows. `events` is how many recorded events it reflects.
    pub(crate) fn build(
        registry: Arc<Registry>,
        mut instances: Vec<InstanceView>,
        mut workers: Vec<WorkerView>,
        hardware: Vec<(String, HardwareView)>,
        events: u64,
    ) -> Self {
        instances.sort_by(|a, b| a.variant.cmp(&b.variant).then_with(|| a.load_order(b)));
        let mut by_variant = vec![0..0; registry.variants().len()];
        let mut start = 0;
        while start < instances.len() {
            let v = instances[start].variant;
            let end = start + instances[start..].partition_point(|i| i.variant == v);
            if let Some(slot) = by_variant.get_mut(v as usize) {
                *slot = start..end;
            }
            start = end;
        }
        workers.sort_by(|a, b| {
            a.hardware
                .cmp(&b.hardware)
                .then_with(|| a.utilisation_order(b))
        });
        let worker_index = workers
            .iter()
            .enumerate()
            .map(|(i, w)| (w.id.clone(), i))
            .collect();
        let mut by_hardware = HashMap::new();
        for (hw, view) in hardware {
            let start = workers.partition_point(|w| w.hardware < hw);
            let end = workers.partition_point(|w| w.hardware <= hw);
            by_hardware.insert(hw, (start..end, view));
        }
        Snapshot {
            registry,
            instances,
            by_variant,
            workers,
            by_hardware,
            worker_index,
            events,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Every instance, grouped by variant, each group in [`InstanceView::load_order`].
    pub fn instances(&self) -> &[InstanceView] {
        &self.instances
    }

    /// The instances of `variant`, in [`InstanceView::load_order`].
    pub fn instances_of(&self, variant: VariantId) -> &[InstanceView] {
        self.by_variant
            .get(variant as usize)
            .and_then(|r| self.instances.get(r.clone()))
            .unwrap_or(&[])
    }

    /// Every worker that is up, grouped by hardware, each group least utilised first.
    pub fn workers(&self) -> &[WorkerView] {
        &self.workers
    }

    /// The workers of `hardware`, least utilised first ([`WorkerView::utilisation_order`]).
    pub fn workers_of(&self, hardware: &str) -> &[WorkerView] {
        self.by_hardware
            .get(hardware)
            .and_then(|(r, _)| self.workers.get(r.clone()))
            .unwrap_or(&[])
    }

    /// The worker `id`, if up.
    pub fn worker(&self, id: &str) -> Option<&WorkerView> {
        self.worker_index.get(id).and_then(|i| self.workers.get(*i))
    }

    /// The aggregates of `hardware`, if a worker of it is up.
    pub fn hardware(&self, hardware: &str) -> Option<&HardwareView> {
        self.by_hardware.get(hardware).map(|(_, v)| v)
    }

    /// Every hardware type with a worker up, and its aggregates.
    pub fn hardware_kinds(&self) -> impl Iterator<Item = (&str, &HardwareView)> {
        self.by_hardware.iter().map(|(k, (_, v))| (k.as_str(), v))
    }

    /// How many recorded events this snapshot reflects.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Every variant's instances' states; a variant with none is listed once, Inactive, with no
    /// worker (a store that holds only the registry lists every variant Inactive).
    pub fn states(&self) -> Vec<(String, Option<String>, InstanceState)> {
        let mut out = Vec::new();
        for (id, v) in self.registry.variants().iter().enumerate() {
            let instances = self.instances_of(id as VariantId);
            if instances.is_empty() {
                out.push((v.name.clone(), None, InstanceState::Inactive));
            }
            for i in instances {
                out.push((v.name.clone(), Some(i.worker.clone()), i.state));
            }
        }
        out
    }
}
