//! Autoscaling the model-less front end ("INFaaS", §4.2): the front end is the autoscaler's
//! [`Actuator`] — it loads a variant on a worker as a cold start would, unloads one after its
//! requests are answered, starts executors through a [`Launcher`] and follows them, and retires
//! one by unloading what it holds before the launcher stops it (SIGTERM: it drains). Each
//! action it takes is kept, with its outcome, in a short log the status document shows.
//!
//! `weir serve --autoscale FILE` reads [`AutoscaleFile`]: the autoscaler's settings, and per
//! executor type the command that starts one (an argument template with `{name}` and
//! `{hardware}`; no shell). Types with a command are the ones the worker autoscaler adds and
//! removes executors of; started executors connect to the front end's `--zenoh-listen`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::Deserialize;
use weir_infaas::autoscale::{Actuator, AutoscaleConfig, Controller, RunningAutoscaler};
use weir_infaas::launcher::{Launcher, LocalProcesses};

use super::remote::ExecutorSlot;
use super::ModelLessServer;
use crate::ModelLessError;

/// Longest an autoscaler's load may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a retired executor may take to drain before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest autoscaling file read.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// The `--autoscale` file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoscaleFile {
    /// The autoscaler's settings (`launchable` is filled from `launch`).
    #[serde(default)]
    pub autoscale: AutoscaleConfig,
    /// Per executor type, the command that starts one.
    #[serde(default)]
    pub launch: BTreeMap<String, Vec<String>>,
}

impl AutoscaleFile {
    /// Reads and checks `path`.
    ///
    /// # Errors
    /// When it cannot be read, is too large, or does not parse.
    pub fn read(path: &Path) -> Result<AutoscaleFile, ModelLessError> {
        let invalid = |reason: String| ModelLessError::AutoscaleFile {
            path: path.display().to_string(),
            reason,
        };
        let text = weir_engine::paths::read_capped(path, MAX_FILE_BYTES, &Default::default())
            .map_err(|e| invalid(e.to_string()))?;
        let text = std::str::from_utf8(&text).map_err(|_| invalid("not UTF-8".into()))?;
        let mut file: AutoscaleFile =
            serde_saphyr::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let c = &file.autoscale;
        if !(c.tick_s >= 0.01 && c.threshold >= 1.0 && c.workers.interval_s > 0.0) {
            return Err(invalid(
                "tick_s must be at least 0.01, threshold at least 1, workers.interval_s above 0"
                    .into(),
            ));
        }
        if !((0.0..1e9).contains(&c.slack_qps) && (0.0..1e6).contains(&c.lambda_per_s)) {
            return Err(invalid(
                "slack_qps and lambda_per_s must be finite and at least 0".into(),
            ));
        }
        file.autoscale.launchable = file.launch.keys().cloned().collect();
        Ok(file)
    }
}

/// Actions the log keeps, at most (the newest).
pub const RECENT_ACTIONS: usize = 32;

/// One action the autoscaler took through the front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// `load`, `unload`, `launch` or `retire`.
    pub kind: &'static str,
    /// What it acted on: `variant on worker`, a hardware type, a worker.
    pub target: String,
    /// Its outcome: `Ok` with what it made (a launched worker), or the error.
    pub outcome: Result<Option<String>, String>,
    /// When it ended.
    pub at: std::time::SystemTime,
}

/// The autoscaler's recent actions: a bounded ring written as each action ends (a few a tick at
/// most, so one lock each is nothing), read by the status document.
#[derive(Debug, Default)]
pub(crate) struct ActionLog(std::sync::Mutex<std::collections::VecDeque<Action>>);

impl ActionLog {
    fn push(&self, kind: &'static str, target: String, outcome: Result<Option<String>, String>) {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        log.push_back(Action {
            kind,
            target,
            outcome,
            at: std::time::SystemTime::now(),
        });
        while log.len() > RECENT_ACTIONS {
            log.pop_front();
        }
    }

    /// The actions kept, newest first.
    pub(crate) fn recent(&self) -> Vec<Action> {
        let log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().rev().cloned().collect()
    }
}

impl ModelLessServer {
    /// The autoscaler's recent actions, newest first (at most [`RECENT_ACTIONS`]).
    pub fn autoscaler_actions(&self) -> Vec<Action> {
        self.actions.recent()
    }
}

/// The front end as the autoscaler's hands.
struct FrontActuator {
    front: Weak<ModelLessServer>,
    runtime: tokio::runtime::Handle,
    launcher: Option<LocalProcesses>,
    started: AtomicU32,
}

impl FrontActuator {
    fn log(&self, kind: &'static str, target: String, outcome: Result<Option<String>, String>) {
        if let Some(front) = self.front.upgrade() {
            front.actions.push(kind, target, outcome);
        }
    }

    fn front(&self) -> Result<Arc<ModelLessServer>, String> {
        self.front
            .upgrade()
            .ok_or_else(|| "the front end is stopping".to_string())
    }
}

impl FrontActuator {
    fn do_load(&self, variant: &str, worker: &str) -> Result<(), String> {
        let front = self.front()?;
        self.runtime
            .block_on(front.preload(variant, worker, LOAD_TIMEOUT))
    }

    fn do_unload(&self, variant: &str, worker: &str) -> Result<(), String> {
        self.front()?.unload(variant, worker)
    }

    fn do_launch(&self, hardware: &str) -> Result<String, String> {
        let launcher = self
            .launcher
            .as_ref()
            .ok_or_else(|| "no launch commands".to_string())?;
        let n = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let slot = ExecutorSlot {
            name: format!("auto-{hardware}-{}-{n}", std::process::id()),
            hardware: hardware.to_string(),
        };
        // Followed before it starts, so its first liveliness is seen.
        self.front()?
            .follow(slot.clone())
            .map_err(|e| e.to_string())?;
        launcher
            .start(&slot.name, hardware)
            .map_err(|e| e.to_string())?;
        Ok(slot.prefix())
    }

    fn do_retire(&self, worker: &str) -> Result<(), String> {
        let front = self.front()?;
        for variant in front.variants_on(worker) {
            front.unload(&variant, worker)?;
        }
        let name = worker.rsplit('/').next().unwrap_or(worker);
        self.launcher
            .as_ref()
            .ok_or_else(|| "no launch commands".to_string())?
            .stop(name)
            .map_err(|e| e.to_string())
    }
}

/// Each action is taken, then written to the front end's [`ActionLog`].
impl Actuator for FrontActuator {
    fn load(&self, variant: &str, worker: &str) -> Result<(), String> {
        let r = self.do_load(variant, worker);
        self.log(
            "load",
            format!("{variant} on {worker}"),
            r.clone().map(|()| None),
        );
        r
    }

    fn unload(&self, variant: &str, worker: &str) -> Result<(), String> {
        let r = self.do_unload(variant, worker);
        self.log(
            "unload",
            format!("{variant} on {worker}"),
            r.clone().map(|()| None),
        );
        r
    }

    fn launch(&self, hardware: &str) -> Result<String, String> {
        let r = self.do_launch(hardware);
        self.log("launch", hardware.to_string(), r.clone().map(Some));
        r
    }

    fn launch_died(&self, worker: &str) -> bool {
        let name = worker.rsplit('/').next().unwrap_or(worker);
        self.launcher
            .as_ref()
            .is_some_and(|l| !l.running().iter().any(|r| r == name))
    }

    fn retire(&self, worker: &str) -> Result<(), String> {
        let r = self.do_retire(worker);
        self.log("retire", worker.to_string(), r.clone().map(|()| None));
        r
    }
}

impl ModelLessServer {
    /// Starts the autoscaler over this front end, as `file` says; it runs until the handle is
    /// dropped. Loads run on `runtime`.
    ///
    /// # Errors
    /// When its thread cannot start.
    pub fn autoscale(
        self: &Arc<Self>,
        file: &AutoscaleFile,
        runtime: tokio::runtime::Handle,
    ) -> Result<RunningAutoscaler, ModelLessError> {
        let launcher = (!file.launch.is_empty())
            .then(|| LocalProcesses::new(file.launch.clone(), STOP_TIMEOUT));
        let actuator = FrontActuator {
            front: Arc::downgrade(self),
            runtime,
            launcher,
            started: AtomicU32::new(0),
        };
        let controller = Controller::new(
            file.autoscale.clone(),
            Arc::clone(&self.store),
            Arc::new(actuator),
            Arc::clone(&self.demand),
        );
        controller.spawn().map_err(ModelLessError::Autoscaler)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_log_keeps_the_newest_actions_newest_first() {
        let log = ActionLog::default();
        assert!(log.recent().is_empty());
        for i in 0..(RECENT_ACTIONS + 5) {
            log.push("load", format!("v{i} on w"), Ok(None));
        }
        log.push("launch", "accel".into(), Err("no launch commands".into()));
        let recent = log.recent();
        assert_eq!(recent.len(), RECENT_ACTIONS);
        assert_eq!(recent[0].kind, "launch");
        assert_eq!(recent[0].outcome, Err("no launch commands".to_string()));
        assert_eq!(recent[1].target, format!("v{} on w", RECENT_ACTIONS + 4));
        assert!(
            !recent.iter().any(|a| a.target == "v0 on w"),
            "the oldest went first"
        );
    }

    #[test]
    fn settings_out_of_range_are_refused_naming_them() {
        let dir = std::env::temp_dir().join(format!("weir-autoscale-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("autoscale.yaml");
        for (yaml, want) in [
            ("autoscale: {tick_s: 0}\n", "tick_s"),
            ("autoscale: {threshold: 0.5}\n", "threshold"),
            ("autoscale: {slack_qps: -1}\n", "slack_qps"),
            ("autoscale: {slack_qps: .nan}\n", "slack_qps"),
            ("autoscale: {lambda_per_s: .inf}\n", "lambda_per_s"),
            ("autoscale: {nope: 1}\n", "nope"),
        ] {
            std::fs::write(&path, yaml).unwrap();
            let e = format!("{:#}", AutoscaleFile::read(&path).unwrap_err());
            assert!(e.contains(want), "{yaml}: {e}");
        }
        std::fs::write(&path, "autoscale: {slack_qps: 40}\n").unwrap();
        assert_eq!(
            AutoscaleFile::read(&path).unwrap().autoscale.slack_qps,
            40.0
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
