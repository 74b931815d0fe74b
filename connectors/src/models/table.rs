//! The live model table both transports answer from: a [`Models`] snapshot behind a lock,
//! replaced whole when a model is loaded, reloaded or unloaded.
//!
//! A request takes the snapshot once and keeps the version it resolved (an `Arc`) until it is
//! answered, so a reload never changes the graph under a request in flight: the old version's
//! graph finishes what it admitted while new requests reach the new one. Writers copy the table
//! (names and `Arc`s only) and swap it in; readers never wait on a load.

use std::sync::{Arc, RwLock};

use super::{ModelVersion, Models};

/// The served models, shared by the HTTP and gRPC servers and the model-control API.
#[derive(Debug, Default)]
pub struct ModelTable {
    current: RwLock<Arc<Models>>,
}

impl ModelTable {
    /// A table serving `models`.
    pub fn new(models: Models) -> ModelTable {
        ModelTable {
            current: RwLock::new(Arc::new(models)),
        }
    }

    /// The models served now.
    pub fn snapshot(&self) -> Arc<Models> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Serves exactly `versions` under `name` from now on (an empty list stops serving it), and
    /// returns the versions it replaced.
    pub fn set(&self, name: &str, versions: Vec<ModelVersion>) -> Vec<Arc<ModelVersion>> {
        let mut guard = self.current.write().unwrap_or_else(|p| p.into_inner());
        let mut next = Models::clone(&guard);
        let old = next.remove(name);
        for v in versions {
            next.insert(name, v);
        }
        *guard = Arc::new(next);
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_taken_before_a_swap_keeps_what_it_saw() {
        let table = ModelTable::default();
        let before = table.snapshot();
        assert!(table.set("m", Vec::new()).is_empty());
        assert!(!before.contains("m"));
        assert!(!table.snapshot().contains("m"));
    }
}
