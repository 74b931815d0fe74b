//! The dataflow's input collections, and the gate every event passes on its way into them.
//!
//! Each input holds the *newest* fact per key (a worker's hardware, a worker's utilisation, an
//! instance's lifecycle phase, an instance's load report). A new fact for a key is fed to
//! differential dataflow as the retraction of the old one plus the insertion of the new one, so the
//! inputs keep a mirror of what they currently hold. Events come from workers and peers and are
//! treated as hostile: a non-finite or out-of-range number, an unknown variant, or a fact about a
//! worker that is not up is dropped with a warning and changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use differential_dataflow::input::InputSession;

use super::dataflow::{Facts, ReportRow};
use super::snapshot::{Registry, VariantId};
use crate::state::Event;

/// An instance's key: variant and worker.
pub(super) type InstanceKey = (VariantId, String);

/// The input sessions and their mirrors.
pub(super) struct Inputs {
    registry: Arc<Registry>,
    pub(super) variants: InputSession<u64, (VariantId, Facts), isize>,
    pub(super) workers: InputSession<u64, (String, String), isize>,
    pub(super) utilisation: InputSession<u64, (String, u64), isize>,
    pub(super) lifecycle: InputSession<u64, (InstanceKey, bool), isize>,
    pub(super) reports: InputSession<u64, (InstanceKey, ReportRow), isize>,
    held_workers: BTreeMap<String, String>,
    held_utilisation: BTreeMap<String, u64>,
    held_lifecycle: BTreeMap<InstanceKey, bool>,
    held_reports: BTreeMap<InstanceKey, ReportRow>,
}

/// Replaces `key`'s value in `held` and `input` by `value` (or removes it when `None`).
fn replace<K, V>(
    held: &mut BTreeMap<K, V>,
    input: &mut InputSession<u64, (K, V), isize>,
    key: K,
    value: Option<V>,
) where
    K: differential_dataflow::ExchangeData,
    V: differential_dataflow::ExchangeData,
{
    let old = match &value {
        Some(v) => held.insert(key.clone(), v.clone()),
        None => held.remove(&key),
    };
    if old.as_ref() == value.as_ref() {
        return;
    }
    if let Some(old) = old {
        input.remove((key.clone(), old));
    }
    if let Some(v) = value {
        input.insert((key, v));
    }
}

impl Inputs {
    /// Empty inputs, with the registry's variants inserted.
    pub(super) fn new(registry: Arc<Registry>) -> Self {
        let mut variants = InputSession::new();
        for (id, v) in registry.variants().iter().enumerate() {
            let profiled = v.profile.inference_ms(1).unwrap_or(0.0);
            variants.insert((
                id as VariantId,
                Facts {
                    hardware: v.config.hardware.clone(),
                    saturation_bits: finite_or_zero(v.profile.saturation_qps).to_bits(),
                    profiled_bits: finite_or_zero(profiled).to_bits(),
                },
            ));
        }
        Inputs {
            registry,
            variants,
            workers: InputSession::new(),
            utilisation: InputSession::new(),
            lifecycle: InputSession::new(),
            reports: InputSession::new(),
            held_workers: BTreeMap::new(),
            held_utilisation: BTreeMap::new(),
            held_lifecycle: BTreeMap::new(),
            held_reports: BTreeMap::new(),
        }
    }

    /// Advances every input to `time` and flushes it.
    pub(super) fn advance_to(&mut self, time: u64) {
        self.variants.advance_to(time);
        self.workers.advance_to(time);
        self.utilisation.advance_to(time);
        self.lifecycle.advance_to(time);
        self.reports.advance_to(time);
        self.variants.flush();
        self.workers.flush();
        self.utilisation.flush();
        self.lifecycle.flush();
        self.reports.flush();
    }

    fn instance_key(&self, variant: &str, worker: &str) -> Option<InstanceKey> {
        let Some(id) = self.registry.id(variant) else {
            tracing::warn!(%variant, %worker, "event for an unknown variant ignored");
            return None;
        };
        if !self.held_workers.contains_key(worker) {
            tracing::warn!(%variant, %worker, "event for a worker that is not up ignored");
            return None;
        }
        Some((id, worker.to_string()))
    }

    /// Feeds `event` into the inputs; `false` when it was dropped.
    pub(super) fn apply(&mut self, event: Event) -> bool {
        match event {
            Event::WorkerUp(w) => {
                replace(
                    &mut self.held_workers,
                    &mut self.workers,
                    w.id,
                    Some(w.hardware),
                );
            }
            Event::WorkerDown { worker } => {
                if !self.held_workers.contains_key(&worker) {
                    tracing::warn!(%worker, "down event for a worker that is not up ignored");
                    return false;
                }
                replace(
                    &mut self.held_workers,
                    &mut self.workers,
                    worker.clone(),
                    None,
                );
                replace(
                    &mut self.held_utilisation,
                    &mut self.utilisation,
                    worker.clone(),
                    None,
                );
                let gone: Vec<InstanceKey> = self
                    .held_lifecycle
                    .keys()
                    .filter(|(_, w)| *w == worker)
                    .cloned()
                    .collect();
                for key in gone {
                    replace(&mut self.held_reports, &mut self.reports, key.clone(), None);
                    replace(&mut self.held_lifecycle, &mut self.lifecycle, key, None);
                }
            }
            Event::WorkerLoad {
                worker,
                utilisation,
            } => {
                if !(0.0..=1.0).contains(&utilisation) {
                    tracing::warn!(%worker, utilisation, "utilisation outside 0–1 ignored");
                    return false;
                }
                if !self.held_workers.contains_key(&worker) {
                    tracing::warn!(%worker, "utilisation of a worker that is not up ignored");
                    return false;
                }
                replace(
                    &mut self.held_utilisation,
                    &mut self.utilisation,
                    worker,
                    Some(utilisation.to_bits()),
                );
            }
            Event::Loading { variant, worker } => {
                let Some(key) = self.instance_key(&variant, &worker) else {
                    return false;
                };
                if self.held_lifecycle.get(&key) == Some(&true) {
                    tracing::warn!(%variant, %worker, "loading event for a loaded instance ignored");
                    return false;
                }
                replace(
                    &mut self.held_lifecycle,
                    &mut self.lifecycle,
                    key,
                    Some(false),
                );
            }
            Event::Loaded { variant, worker } => {
                let Some(key) = self.instance_key(&variant, &worker) else {
                    return false;
                };
                replace(
                    &mut self.held_lifecycle,
                    &mut self.lifecycle,
                    key,
                    Some(true),
                );
            }
            Event::Unloaded { variant, worker } => {
                let Some(key) = self.instance_key(&variant, &worker) else {
                    return false;
                };
                replace(&mut self.held_reports, &mut self.reports, key.clone(), None);
                replace(&mut self.held_lifecycle, &mut self.lifecycle, key, None);
            }
            Event::InstanceLoad {
                variant,
                worker,
                qps,
                mean_latency_ms,
                outstanding,
            } => {
                let good = |x: f64| x.is_finite() && x >= 0.0;
                if !good(qps) || !good(mean_latency_ms) {
                    tracing::warn!(%variant, %worker, qps, mean_latency_ms, "load report with a bad number ignored");
                    return false;
                }
                let Some(key) = self.instance_key(&variant, &worker) else {
                    return false;
                };
                if self.held_lifecycle.get(&key) != Some(&true) {
                    tracing::warn!(%variant, %worker, "load report for an instance not loaded ignored");
                    return false;
                }
                let row = ReportRow {
                    qps_bits: qps.to_bits(),
                    latency_bits: mean_latency_ms.to_bits(),
                    outstanding,
                };
                replace(&mut self.held_reports, &mut self.reports, key, Some(row));
            }
        }
        true
    }
}

fn finite_or_zero(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}
