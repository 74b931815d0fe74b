//! The dataflow's input collections, the records they hold ([`Facts`] about a variant, an
//! instance's [`ReportRow`]), and the gate every event passes on its way into them.
//!
//! Each input holds the *newest* fact per key (a worker's hardware, a worker's utilisation, an
//! instance's lifecycle phase, an instance's load report). A new fact for a key is fed to
//! differential dataflow as the retraction of the old one plus the insertion of the new one, so the
//! inputs keep a mirror of what they currently hold. Events come from workers and peers and are
//! treated as hostile: a non-finite or out-of-range number, an unknown variant, or a fact about a
//! worker that is not up is dropped with a warning and changes nothing. Ids are bounded in length
//! and workers in number, so a flood of made-up workers cannot grow the store without bound.

use std::collections::BTreeMap;
use std::sync::Arc;

use differential_dataflow::input::InputSession;
use serde::{Deserialize, Serialize};

use super::rule::Report;
use crate::snapshot::{Registry, VariantId};
use crate::state::Event;

/// The most workers the store tracks at once.
pub(super) const MAX_WORKERS: usize = 4096;
/// The longest worker id or hardware name taken.
pub(super) const MAX_ID_BYTES: usize = 256;

/// An instance's key: variant and worker.
pub(super) type InstanceKey = (VariantId, String);

/// What the dataflow needs to know about a variant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(super) struct Facts {
    pub(super) hardware: String,
    pub(super) saturation_bits: u64,
    pub(super) profiled_bits: u64,
}

/// An instance's newest load report (floats as their bits: collections need `Ord`; the values
/// are finite and non-negative, whose bits order as the values do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(super) struct ReportRow {
    pub(super) qps_bits: u64,
    pub(super) latency_bits: u64,
    pub(super) outstanding: u32,
}

impl ReportRow {
    /// The report the state rule reads.
    pub(super) fn report(&self) -> Report {
        Report {
            qps: f64::from_bits(self.qps_bits),
            mean_latency_ms: f64::from_bits(self.latency_bits),
            outstanding: self.outstanding,
        }
    }
}

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
                if w.id.len() > MAX_ID_BYTES || w.hardware.len() > MAX_ID_BYTES {
                    tracing::warn!(
                        bytes = w.id.len().max(w.hardware.len()),
                        "worker with an over-long id or hardware name ignored"
                    );
                    return false;
                }
                if !self.held_workers.contains_key(&w.id) && self.held_workers.len() >= MAX_WORKERS
                {
                    tracing::warn!(worker = %w.id, "worker beyond the store's bound of {MAX_WORKERS} ignored");
                    return false;
                }
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
                // `+ 0.0` turns -0.0 into 0.0, so the bits order as the values do.
                replace(
                    &mut self.held_utilisation,
                    &mut self.utilisation,
                    worker,
                    Some((utilisation + 0.0).to_bits()),
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
                    // `+ 0.0` turns -0.0 into 0.0, so the bits order as the values do.
                    qps_bits: (qps + 0.0).to_bits(),
                    latency_bits: (mean_latency_ms + 0.0).to_bits(),
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
