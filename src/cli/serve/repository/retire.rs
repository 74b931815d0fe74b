//! Old versions of a reloaded or unloaded model: their graphs stop once no request holds the
//! version any more (a request keeps the version it resolved until it is answered), or when the
//! drain timeout passes, on a thread of their own so the load or unload that retired them
//! returns at once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use weir_connectors::models::control::ModelState;
use weir_connectors::models::ModelVersion;

use super::Entry;
use crate::RunningGraph;

/// How often a retiring version looks whether requests still hold it.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// A model to mark unloaded once its graphs stop: the entries and its name.
pub(super) type Unloaded = (Arc<Mutex<BTreeMap<String, Entry>>>, String);

/// The threads retiring old versions.
#[derive(Default)]
pub(super) struct Retiring {
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Retiring {
    /// Stops `graphs` once no request holds any of `versions` (or after `drain`), then marks
    /// `unloaded` so, if given and still unloading.
    pub(super) fn retire(
        &self,
        versions: Vec<Arc<ModelVersion>>,
        graphs: Vec<RunningGraph>,
        drain: Duration,
        unloaded: Option<Unloaded>,
    ) {
        if versions.is_empty() && graphs.is_empty() && unloaded.is_none() {
            return;
        }
        let thread = std::thread::Builder::new()
            .name("weir-retire".into())
            .spawn(move || {
                let deadline = Instant::now() + drain;
                while versions.iter().any(|v| Arc::strong_count(v) > 1) && Instant::now() < deadline
                {
                    std::thread::sleep(LOOK_EVERY);
                }
                drop(versions);
                for g in graphs {
                    g.shutdown();
                }
                if let Some((entries, name)) = unloaded {
                    let mut entries = entries.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(e) = entries
                        .get_mut(&name)
                        .filter(|e| e.state == Some(ModelState::Unloading))
                    {
                        e.state = Some(ModelState::Unavailable);
                        e.reason = "unloaded".into();
                        for v in e.versions.values_mut() {
                            v.state = ModelState::Unavailable;
                            v.reason = "unloaded".into();
                        }
                    }
                }
            });
        match thread {
            Ok(t) => {
                let mut threads = self.threads.lock().unwrap_or_else(|p| p.into_inner());
                threads.retain(|t| !t.is_finished());
                threads.push(t);
            }
            Err(e) => {
                tracing::error!(error = %e, "Could not start a thread to retire old model versions.")
            }
        }
    }

    /// Waits for every retirement under way.
    pub(super) fn wait(&self) {
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|p| p.into_inner()));
        for t in threads {
            let _ = t.join();
        }
    }
}
