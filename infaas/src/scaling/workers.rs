//! The worker autoscaler's rules (INFaaS §4.2.3): when to add an executor of a hardware
//! type, and when to remove an idle one.
//!
//! Every tick (the paper's 2 s) it looks at each hardware type's executors and adds one of type
//! `h` when (1) every executor of `h` is above the utilisation threshold (80 %), (2) every instance
//! on `h` is Interfered, or (3) more than 80 % of `h`'s executors hold an Overloaded instance (the
//! paper's third rule does not say which type to add; the type whose executors are overloaded is
//! the one that lacks capacity). Nothing is added for a type while an executor it launched has not
//! joined yet (it would be counted as missing capacity twice), or at its maximum. An executor that
//! holds no instance and stays below the idle threshold for the grace period is removed, keeping a
//! type's minimum; the paper leaves removal unspecified, and this is the conservative reading of
//! its code's per-type shutdown limits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The worker autoscaler's thresholds, with the paper's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerRules {
    /// Seconds between ticks (2 s).
    pub interval_s: f64,
    /// Utilisation above which an executor counts as busy for rule 1 (0.8).
    pub busy_utilisation: f64,
    /// Fraction of a type's executors holding an Overloaded instance that triggers rule 3 (0.8).
    pub overloaded_fraction: f64,
    /// Utilisation below which an executor without instances counts as idle (0.05).
    pub idle_utilisation: f64,
    /// Seconds an executor must stay idle before it is removed (30 s).
    pub idle_grace_s: f64,
    /// Executors of each type kept however idle (1).
    pub min_per_type: u32,
    /// Most executors of one type (8).
    pub max_per_type: u32,
}

impl Default for WorkerRules {
    fn default() -> Self {
        WorkerRules {
            interval_s: 2.0,
            busy_utilisation: 0.8,
            overloaded_fraction: 0.8,
            idle_utilisation: 0.05,
            idle_grace_s: 30.0,
            min_per_type: 1,
            max_per_type: 8,
        }
    }
}

/// One executor as the worker autoscaler sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutorView {
    /// Its id.
    pub id: String,
    /// Its hardware type.
    pub hardware: String,
    /// Busy fraction of its cores (0–1).
    pub utilisation: f64,
    /// Instances it holds.
    pub instances: u32,
    /// Of those, Overloaded.
    pub overloaded: u32,
    /// Of those, Interfered.
    pub interfered: u32,
    /// Seconds it has been idle (no instance, utilisation below the idle threshold), 0 if not.
    pub idle_for_s: f64,
}

/// What one tick decided.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerAction {
    /// Start an executor of this type.
    Add {
        /// Hardware type.
        hardware: String,
        /// Which rule fired, in words.
        reason: String,
    },
    /// Drain and stop this executor.
    Remove {
        /// Executor id.
        id: String,
        /// Why.
        reason: String,
    },
}

/// One tick: the executors seen now, and how many launched executors of each type have not
/// joined yet.
pub fn decide(
    rules: &WorkerRules,
    executors: &[ExecutorView],
    launching: &BTreeMap<String, u32>,
) -> Vec<WorkerAction> {
    let mut by_type: BTreeMap<&str, Vec<&ExecutorView>> = BTreeMap::new();
    for e in executors {
        by_type.entry(e.hardware.as_str()).or_default().push(e);
    }
    let mut actions = Vec::new();
    for (hardware, group) in &by_type {
        let pending = launching.get(*hardware).copied().unwrap_or(0);
        let count = u32::try_from(group.len()).unwrap_or(u32::MAX);
        if pending == 0 && count < rules.max_per_type {
            if let Some(reason) = add_reason(rules, group) {
                actions.push(WorkerAction::Add {
                    hardware: (*hardware).to_string(),
                    reason,
                });
                continue;
            }
        }
        let mut keep = count;
        for e in group {
            if keep <= rules.min_per_type {
                break;
            }
            if e.instances == 0 && e.idle_for_s >= rules.idle_grace_s {
                keep -= 1;
                actions.push(WorkerAction::Remove {
                    id: e.id.clone(),
                    reason: format!(
                        "idle for {:.0} s (grace {:.0} s)",
                        e.idle_for_s, rules.idle_grace_s
                    ),
                });
            }
        }
    }
    actions
}

fn add_reason(rules: &WorkerRules, group: &[&ExecutorView]) -> Option<String> {
    if group.iter().all(|e| e.utilisation > rules.busy_utilisation) {
        return Some(format!(
            "every executor is above {:.0}% utilisation",
            rules.busy_utilisation * 100.0
        ));
    }
    let instances: u32 = group.iter().map(|e| e.instances).sum();
    if instances > 0 && group.iter().all(|e| e.interfered == e.instances) {
        return Some("every instance is interfered".to_string());
    }
    let overloaded = group.iter().filter(|e| e.overloaded > 0).count();
    if overloaded as f64 > rules.overloaded_fraction * group.len() as f64 {
        return Some(format!(
            "{overloaded} of {} executors hold an overloaded instance",
            group.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(id: &str, hw: &str, util: f64, inst: u32, over: u32, interf: u32) -> ExecutorView {
        ExecutorView {
            id: id.into(),
            hardware: hw.into(),
            utilisation: util,
            instances: inst,
            overloaded: over,
            interfered: interf,
            idle_for_s: 0.0,
        }
    }

    fn adds(actions: &[WorkerAction]) -> Vec<&str> {
        actions
            .iter()
            .filter_map(|a| match a {
                WorkerAction::Add { hardware, .. } => Some(hardware.as_str()),
                WorkerAction::Remove { .. } => None,
            })
            .collect()
    }

    #[test]
    fn each_rule_adds_an_executor_of_its_type() {
        let r = WorkerRules::default();
        let none = BTreeMap::new();
        // Rule 1: all cpu executors busy, the accelerator not.
        let e = [
            exec("c1", "cpu", 0.9, 1, 0, 0),
            exec("c2", "cpu", 0.85, 1, 0, 0),
            exec("g1", "gpu", 0.2, 1, 0, 0),
        ];
        assert_eq!(adds(&decide(&r, &e, &none)), vec!["cpu"]);
        // One cpu executor below the threshold: no rule 1.
        let e = [
            exec("c1", "cpu", 0.9, 1, 0, 0),
            exec("c2", "cpu", 0.5, 1, 0, 0),
        ];
        assert!(adds(&decide(&r, &e, &none)).is_empty());
        // Rule 2: every instance on gpu interfered.
        let e = [
            exec("g1", "gpu", 0.3, 2, 0, 2),
            exec("g2", "gpu", 0.3, 1, 0, 1),
        ];
        assert_eq!(adds(&decide(&r, &e, &none)), vec!["gpu"]);
        // Rule 3: more than 80% of executors hold an overloaded instance (5 of 6, not 4 of 5).
        let mut e: Vec<_> = (0..5)
            .map(|i| exec(&format!("c{i}"), "cpu", 0.5, 1, 1, 0))
            .collect();
        e.push(exec("c5", "cpu", 0.5, 1, 0, 0));
        assert_eq!(adds(&decide(&r, &e, &none)), vec!["cpu"]);
        e.remove(0);
        assert!(adds(&decide(&r, &e, &none)).is_empty());
    }

    #[test]
    fn nothing_is_added_while_a_launch_is_pending_or_at_the_maximum() {
        let r = WorkerRules {
            max_per_type: 2,
            ..WorkerRules::default()
        };
        let e = [exec("c1", "cpu", 0.9, 1, 0, 0)];
        let pending = BTreeMap::from([("cpu".to_string(), 1)]);
        assert!(adds(&decide(&r, &e, &pending)).is_empty());
        let e = [
            exec("c1", "cpu", 0.9, 1, 0, 0),
            exec("c2", "cpu", 0.9, 1, 0, 0),
        ];
        assert!(adds(&decide(&r, &e, &BTreeMap::new())).is_empty());
    }

    #[test]
    fn idle_executors_go_after_the_grace_keeping_the_minimum() {
        let r = WorkerRules::default();
        let mut idle = exec("c2", "cpu", 0.0, 0, 0, 0);
        idle.idle_for_s = 31.0;
        let mut idle2 = idle.clone();
        idle2.id = "c3".into();
        let mut young = idle.clone();
        young.id = "c4".into();
        young.idle_for_s = 5.0;
        let e = [idle, idle2, young];
        let removed: Vec<_> = decide(&r, &e, &BTreeMap::new())
            .into_iter()
            .filter_map(|a| match a {
                WorkerAction::Remove { id, .. } => Some(id),
                WorkerAction::Add { .. } => None,
            })
            .collect();
        assert_eq!(
            removed,
            vec!["c2", "c3"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        );
        let single = [exec("c1", "cpu", 0.0, 0, 0, 0)];
        let mut s = single.clone();
        s[0].idle_for_s = 100.0;
        assert!(
            decide(&r, &s, &BTreeMap::new()).is_empty(),
            "the last executor is kept"
        );
    }
}
