//! The metadata store ("INFaaS: Automated Model-less Inference Serving", §3.2, §4.1): the
//! registry's variants and the dynamic facts reported about workers and instances, with each
//! instance's state, each worker's load and each hardware type's aggregates derived from them.
//!
//! The paper keeps this in Redis and has its daemons write derived states into it. weir derives
//! them instead: the facts are input collections of a differential dataflow ([`dataflow`]) that
//! maintains the states incrementally, so a state is always the rule applied to the newest facts,
//! never a value someone forgot to clear. Selection must take microseconds, so it never touches the
//! dataflow: the dataflow's output changes are applied to read-optimised indexes published as an
//! immutable [`Snapshot`] behind an `RwLock<Arc<_>>`, and a [`VariantPolicy`] reads that.
//!
//! **When an event is visible.** [`MetadataStore::record`] queues the event and returns (the
//! queue is bounded at [`QUEUE_BOUND`] messages; a caller recording faster than the dataflow
//! drains waits). The
//! dataflow thread takes every queued message as one batch (one timestamp), steps until its
//! frontier passes that timestamp and publishes the snapshot; an event is visible to `select`
//! from then on, typically well under a millisecond later. [`MetadataStore::sync`] returns once
//! every event recorded before it is visible (tests use it; serving does not need to).

mod dataflow;
mod inputs;
pub mod rule;

use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

pub use rule::StateRule;

use crate::dispatch::Dispatcher;
use crate::metrics::{DecisionKind, StoreMetrics};
use crate::query::{Choice, NoMatch, Query, Target};
use crate::select::{PaperPolicy, VariantPolicy};
use crate::snapshot::{Registry, Snapshot};
use crate::state::{Event, InstanceState};
use crate::variant::Variant;
use dataflow::Message;

/// The most messages queued for the dataflow thread.
pub const QUEUE_BOUND: usize = 65_536;

/// The store could not be started or has stopped.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The dataflow thread could not be spawned.
    #[error("cannot start the metadata store's dataflow thread: {0}")]
    Spawn(#[from] std::io::Error),
    /// The dataflow thread is gone (it panicked or the store was dropped).
    #[error("the metadata store's dataflow has stopped")]
    Stopped,
}

/// What the dataflow thread and the readers share.
pub(crate) struct Shared {
    snapshot: RwLock<Arc<Snapshot>>,
    metrics: StoreMetrics,
}

/// The metadata store; implements [`Dispatcher`] with a [`VariantPolicy`].
pub struct MetadataStore {
    shared: Arc<Shared>,
    sender: Mutex<Option<SyncSender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    policy: Box<dyn VariantPolicy>,
}

impl MetadataStore {
    /// Starts a store over `variants` with the default state rule and the paper's policy.
    pub fn start(variants: Vec<Variant>) -> Result<Self, StoreError> {
        Self::with(variants, StateRule::default(), Box::new(PaperPolicy))
    }

    /// Starts a store with a state rule and a selection policy of the caller's.
    pub fn with(
        variants: Vec<Variant>,
        rule: StateRule,
        policy: Box<dyn VariantPolicy>,
    ) -> Result<Self, StoreError> {
        let registry = Arc::new(Registry::new(variants));
        let shared = Arc::new(Shared {
            snapshot: RwLock::new(Arc::new(Snapshot::build(
                registry.clone(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                0,
            ))),
            metrics: StoreMetrics::default(),
        });
        shared.metrics.set_states(&shared.snapshot());
        let (sender, receiver) = mpsc::sync_channel(QUEUE_BOUND);
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("infaas-store".into())
            .spawn(move || dataflow::run(registry, rule, receiver, for_thread))?;
        Ok(MetadataStore {
            shared,
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
            policy,
        })
    }

    fn send(&self, message: Message) -> Result<(), StoreError> {
        let guard = self.sender.lock().map_err(|_| StoreError::Stopped)?;
        let sender = guard.as_ref().ok_or(StoreError::Stopped)?;
        sender.send(message).map_err(|_| StoreError::Stopped)
    }

    /// Returns once every event recorded before this call is visible to `select`.
    pub fn sync(&self) -> Result<(), StoreError> {
        let (reply, done) = mpsc::channel();
        self.send(Message::Sync(reply))?;
        done.recv().map_err(|_| StoreError::Stopped)
    }

    /// The newest published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot()
    }

    /// The store's metric families.
    pub fn metrics(&self) -> &StoreMetrics {
        &self.shared.metrics
    }

    /// Registers the store's metric families into `registry`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        self.shared.metrics.register(registry);
    }

    /// Every variant's instances' states (see [`Snapshot::states`]).
    pub fn states(&self) -> Vec<(String, Option<String>, InstanceState)> {
        self.snapshot().states()
    }
}

impl Shared {
    fn snapshot(&self) -> Arc<Snapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Dispatcher for MetadataStore {
    fn select(&self, query: &Query) -> Result<Choice, NoMatch> {
        let started = Instant::now();
        let snapshot = self.shared.snapshot();
        let decision = self.policy.select(&snapshot, query);
        let kind = match (&decision, &query.target) {
            (Err(_), _) => DecisionKind::NoMatch,
            (Ok(_), Target::Variant(_)) => DecisionKind::Explicit,
            (Ok(c), Target::Task(_)) if c.cold => DecisionKind::Cold,
            (Ok(_), Target::Task(_)) => DecisionKind::Active,
        };
        self.shared
            .metrics
            .decision(kind, started.elapsed().as_secs_f64());
        decision
    }

    fn record(&self, event: Event) {
        if self.send(Message::Event(event)).is_err() {
            tracing::error!("event recorded after the metadata store stopped, dropped");
        }
    }

    fn variant(&self, name: &str) -> Option<Variant> {
        let snapshot = self.shared.snapshot();
        let id = snapshot.registry().id(name)?;
        snapshot.registry().get(id).cloned()
    }
}

impl Drop for MetadataStore {
    fn drop(&mut self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        let thread = match self.thread.lock() {
            Ok(mut t) => t.take(),
            Err(_) => None,
        };
        if let Some(t) = thread {
            if t.join().is_err() {
                tracing::error!("the metadata store's dataflow thread panicked");
            }
        }
    }
}

#[cfg(test)]
mod tests;
