//! The worker autoscaler's half of the controller ("INFaaS", §4.2.3): every worker interval,
//! the executors of the types this autoscaler may start, with how long each has been idle, go
//! through the paper's rules (`crate::scaling::workers`); an executor is also started for a type
//! whose question the model-autoscaler passed up, or that has fewer than its minimum. Only the
//! executors this autoscaler started are retired. A start is pending until the executor joins
//! the store, dies, or the launch timeout passes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::metrics::ActionKind;
use super::Controller;
use crate::scaling::workers::{decide, ExecutorView, WorkerAction};
use crate::snapshot::Snapshot;

impl Controller {
    /// The worker autoscaler's tick.
    pub(super) fn workers(&mut self, snapshot: &Snapshot, now_s: f64) {
        let rules = self.config.workers.clone();
        // Joined executors are no longer launching; ones that never joined are given up on.
        let mut launching: BTreeMap<String, u32> = BTreeMap::new();
        {
            let mut pending = self.launching.lock().unwrap_or_else(|p| p.into_inner());
            let timeout = self.config.launch_timeout_s;
            let metrics = self.metrics.clone();
            let actuator = Arc::clone(&self.actuator);
            pending.retain(|(hw, id, since)| {
                if snapshot.worker(id).is_some() {
                    return false;
                }
                if now_s - since > timeout || actuator.launch_died(id) {
                    metrics.failed(ActionKind::AddExecutor);
                    tracing::warn!(hardware = %hw, worker = %id, "Started executor died or never joined.");
                    return false;
                }
                true
            });
            for (hw, _, _) in pending.iter() {
                *launching.entry(hw.clone()).or_default() += 1;
            }
        }
        let launchable: BTreeSet<&str> =
            self.config.launchable.iter().map(String::as_str).collect();
        let mut views = Vec::new();
        for w in snapshot.workers() {
            if !launchable.contains(w.hardware.as_str()) {
                continue;
            }
            let idle = w.instances == 0 && w.utilisation < rules.idle_utilisation;
            let idle_for_s = if idle {
                now_s - *self.idle_since.entry(w.id.clone()).or_insert(now_s)
            } else {
                self.idle_since.remove(&w.id);
                0.0
            };
            views.push(ExecutorView {
                id: w.id.clone(),
                hardware: w.hardware.clone(),
                utilisation: w.utilisation,
                instances: w.instances,
                overloaded: u32::from(w.overloaded),
                interfered: w.interfered,
                idle_for_s,
            });
        }
        let mut adds: BTreeMap<String, String> = BTreeMap::new();
        let launched = self
            .launched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for action in decide(&rules, &views, &launching) {
            match action {
                WorkerAction::Add { hardware, reason } => {
                    adds.insert(hardware, reason);
                }
                WorkerAction::Remove { id, reason } if launched.contains(&id) => {
                    self.retire(&id, &reason);
                }
                WorkerAction::Remove { .. } => {}
            }
        }
        let passed = std::mem::take(&mut self.passed_up);
        for hw in &self.config.launchable {
            let count = views.iter().filter(|v| &v.hardware == hw).count() as u32;
            let pending = launching.get(hw).copied().unwrap_or(0);
            if pending > 0 || count >= rules.max_per_type || adds.contains_key(hw) {
                continue;
            }
            if let Some(reason) = passed.get(hw) {
                adds.insert(
                    hw.clone(),
                    format!("a model autoscaler passed up: {reason}"),
                );
            } else if count < rules.min_per_type {
                adds.insert(
                    hw.clone(),
                    format!(
                        "{count} executors, below the minimum {}",
                        rules.min_per_type
                    ),
                );
            }
        }
        for (hardware, reason) in adds {
            self.launch(&hardware, &reason, now_s);
        }
    }

    fn launch(&mut self, hardware: &str, reason: &str, now_s: f64) {
        let actuator = Arc::clone(&self.actuator);
        let (launching, launched) = (Arc::clone(&self.launching), Arc::clone(&self.launched));
        let hw = hardware.to_string();
        let (keys, what) = (
            vec![format!("launch:{hw}")],
            format!("start an executor of {hw}"),
        );
        if self.start(ActionKind::AddExecutor, keys, what, move || {
            let id = actuator.launch(&hw)?;
            launched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id.clone());
            launching
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((hw, id, now_s));
            Ok(())
        }) {
            tracing::info!(%hardware, %reason, "Autoscaling: starting an executor.");
        }
    }

    fn retire(&mut self, worker: &str, reason: &str) {
        let actuator = Arc::clone(&self.actuator);
        let launched = Arc::clone(&self.launched);
        let w = worker.to_string();
        let (keys, what) = (vec![format!("retire:{w}")], format!("retire {w}"));
        if self.start(ActionKind::RemoveExecutor, keys, what, move || {
            actuator.retire(&w)?;
            launched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&w);
            Ok(())
        }) {
            self.idle_since.remove(worker);
            tracing::info!(%worker, %reason, "Autoscaling: retiring an executor.");
        }
    }
}
