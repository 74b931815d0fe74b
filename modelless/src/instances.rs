//! The variants' instances this front end serves through: one per (variant, worker), each a
//! one-node graph — the variant's ONNX file on an executor in this process, or its only replica
//! on the remote executor that loaded it.
//!
//! An instance is loaded once. Its load runs as a task of its own, so a request that stops
//! waiting (its deadline passed) does not cancel it, and requests that chose the instance while
//! it loads wait for that one load, bounded by their own deadlines; instances of other variants
//! are not held. A failed load leaves the table (the next request that picks it tries again), and
//! so does an instance whose executor died.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use weir_runtime::RunningGraph;

/// A load's outcome: the instance's graph, or why it could not be started.
pub(super) type Loaded = Result<Arc<RunningGraph>, String>;

/// One variant's instance on one worker.
pub(super) struct Instance {
    /// `None` while loading.
    state: watch::Receiver<Option<Loaded>>,
    /// Requests answering through it now.
    pub(super) in_flight: AtomicU32,
}

impl Instance {
    /// Its graph, once loaded.
    pub(super) fn graph(&self) -> Option<Arc<RunningGraph>> {
        match &*self.state.borrow() {
            Some(Ok(graph)) => Some(Arc::clone(graph)),
            _ => None,
        }
    }

    /// Whether its load has finished (well or not).
    pub(super) fn settled(&self) -> bool {
        self.state.borrow().is_some()
    }

    /// Waits for its load until `deadline`; `None` when the deadline came first.
    pub(super) async fn ready(&self, deadline: tokio::time::Instant) -> Option<Loaded> {
        let mut state = self.state.clone();
        let waited = tokio::time::timeout_at(deadline, state.wait_for(Option::is_some)).await;
        match waited {
            Ok(Ok(done)) => done.clone(),
            // The loader's task ended without an answer (it panicked).
            Ok(Err(_)) => Some(Err("the load stopped without an answer".to_string())),
            Err(_) => None,
        }
    }
}

/// Which instance: (variant, worker).
pub(super) type InstanceKey = (String, String);

/// Every instance, loaded or loading.
#[derive(Default)]
pub(super) struct Instances {
    table: Mutex<HashMap<InstanceKey, Arc<Instance>>>,
}

impl Instances {
    /// The instance `key`; when there is none, one is made and `load` is spawned to fill it
    /// (a failed load removes it again).
    pub(super) fn get_or_load<F>(self: &Arc<Self>, key: &InstanceKey, load: F) -> Arc<Instance>
    where
        F: FnOnce() -> tokio::task::JoinHandle<Loaded>,
    {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = table.get(key) {
            return Arc::clone(found);
        }
        let (tx, rx) = watch::channel(None);
        let instance = Arc::new(Instance {
            state: rx,
            in_flight: AtomicU32::new(0),
        });
        table.insert(key.clone(), Arc::clone(&instance));
        drop(table);
        let (me, key, mine) = (Arc::clone(self), key.clone(), Arc::clone(&instance));
        let handle = load();
        tokio::spawn(async move {
            let outcome = handle
                .await
                .unwrap_or_else(|e| Err(format!("the load failed: {e}")));
            if outcome.is_err() {
                me.forget(&key, &mine);
            }
            tx.send_replace(Some(outcome));
        });
        instance
    }

    /// Removes `instance` from the table if it is still the one under `key`.
    pub(super) fn forget(&self, key: &InstanceKey, instance: &Arc<Instance>) {
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if table.get(key).is_some_and(|i| Arc::ptr_eq(i, instance)) {
            table.remove(key);
        }
    }

    /// Removes the instance under `key`, whichever it is.
    pub(super) fn remove(&self, key: &InstanceKey) {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// The variants with an instance (loaded or loading) on `worker`.
    pub(super) fn on(&self, worker: &str) -> Vec<String> {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .filter(|(_, w)| w == worker)
            .map(|(v, _)| v.clone())
            .collect()
    }

    /// The loaded instances now, with their keys.
    pub(super) fn loaded(&self) -> Vec<(InstanceKey, Arc<Instance>)> {
        self.table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, i)| i.graph().is_some())
            .map(|(k, i)| (k.clone(), Arc::clone(i)))
            .collect()
    }
}
