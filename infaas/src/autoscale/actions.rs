//! The autoscaler's actions in flight: each runs on a thread of its own (a load or a process
//! start takes seconds, and a tick must not wait), at most a configured number at once, and none
//! starts while another touches the same instance or executor. A failed action is logged and
//! counted; the next tick decides again.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::metrics::{ActionKind, ScalingMetrics};

/// Actions in flight, by the instances or executors they touch.
#[derive(Default)]
pub(super) struct Actions {
    busy: Arc<Mutex<BTreeSet<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Actions {
    fn busy(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `work` on a thread of its own unless one of `keys` is busy or `max` actions run;
    /// whether it started.
    pub(super) fn run(
        &mut self,
        keys: Vec<String>,
        max: usize,
        what: (ActionKind, String, ScalingMetrics),
        work: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> bool {
        self.threads.retain(|t| !t.is_finished());
        {
            let mut busy = self.busy();
            if self.threads.len() >= max || keys.iter().any(|k| busy.contains(k)) {
                return false;
            }
            busy.extend(keys.iter().cloned());
        }
        let busy = Arc::clone(&self.busy);
        let (kind, describe, metrics) = what;
        let spawned = std::thread::Builder::new()
            .name("weir-autoscale-action".into())
            .spawn(move || {
                if let Err(e) = work() {
                    metrics.failed(kind);
                    tracing::warn!(kind = kind.label(), action = %describe, error = %e, "Autoscaling action failed.");
                }
                let mut busy = busy.lock().unwrap_or_else(|p| p.into_inner());
                for k in &keys {
                    busy.remove(k);
                }
            });
        match spawned {
            Ok(t) => {
                self.threads.push(t);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "No thread for an autoscaling action.");
                false
            }
        }
    }

    /// Waits for every action in flight.
    pub(super) fn settle(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
