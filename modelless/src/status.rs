//! The model-less front end as the status feed shows it: each task, its variants (hardware,
//! accuracy, profiled latency at batch 1, largest batch) and each variant's instances with the
//! state the metadata store holds for them (INFaaS §3.2: inactive, active, overloaded,
//! interfered), read from the store's newest snapshot; and the autoscaler's recent actions.

use serde_json::{json, Value};

use crate::ModelLessServer;

impl ModelLessServer {
    /// The tasks, variants and instances now, as a JSON document.
    pub fn status(&self) -> Value {
        let states = self.store.states();
        let tasks: Vec<Value> = self
            .tasks
            .iter()
            .map(|task| {
                let variants: Vec<Value> = self
                    .repository
                    .variants_of_task(task)
                    .filter(|v| self.served(v))
                    .map(|v| {
                        let instances: Vec<Value> = states
                            .iter()
                            .filter(|(name, worker, _)| *name == v.name && worker.is_some())
                            .map(|(_, worker, state)| json!({"worker": worker, "state": state}))
                            .collect();
                        json!({
                            "name": v.name,
                            "model": v.model,
                            "hardware": v.config.hardware,
                            "accuracy": v.accuracy,
                            "max_batch": v.max_batch,
                            "latency_ms_batch_1": v.profile.latency_ms.get(&1),
                            "instances": instances,
                        })
                    })
                    .collect();
                json!({"name": task, "variants": variants})
            })
            .collect();
        let now = std::time::SystemTime::now();
        let actions: Vec<Value> = self
            .autoscaler_actions()
            .into_iter()
            .map(|a| {
                let (ok, result) = match a.outcome {
                    Ok(made) => (true, made),
                    Err(e) => (false, Some(e)),
                };
                json!({
                    "action": a.kind,
                    "target": a.target,
                    "ok": ok,
                    "result": result,
                    "ago_s": now.duration_since(a.at).unwrap_or_default().as_secs_f64(),
                })
            })
            .collect();
        json!({
            "tasks": tasks,
            "hardware": self.hardware.iter().collect::<Vec<_>>(),
            "autoscaler": actions,
        })
    }
}
