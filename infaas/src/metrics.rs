//! Prometheus families for the metadata store and its decisions.
//!
//! - `weir_infaas_instances{state}`: instances by state; `inactive` counts the variants with no instance
//!   at all (the registry's idle variants) and the instances still loading;
//! - `weir_infaas_state_transitions_total{from,to}`: instance state changes the dataflow derived;
//! - `weir_infaas_decisions_total{kind}`: selections by outcome: `explicit` (a named variant), `active`
//!   (an Active instance of a chosen variant), `cold` (a variant to load), `no_match`;
//! - `weir_infaas_decision_seconds`: time one selection took.
//!
//! The serving side registers them into its `/metrics` registry with [`StoreMetrics::register`].

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::snapshot::Snapshot;
use crate::state::InstanceState;

/// What a selection decided, for the decisions counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionKind {
    /// A named variant (only the worker chosen).
    Explicit,
    /// An Active instance of the chosen variant.
    Active,
    /// A variant to load first.
    Cold,
    /// Nothing matched.
    NoMatch,
}

impl DecisionKind {
    fn label(self) -> &'static str {
        match self {
            DecisionKind::Explicit => "explicit",
            DecisionKind::Active => "active",
            DecisionKind::Cold => "cold",
            DecisionKind::NoMatch => "no_match",
        }
    }
}

fn state_label(state: InstanceState) -> &'static str {
    match state {
        InstanceState::Inactive => "inactive",
        InstanceState::Active => "active",
        InstanceState::Overloaded => "overloaded",
        InstanceState::Interfered => "interfered",
    }
}

const STATES: [InstanceState; 4] = [
    InstanceState::Inactive,
    InstanceState::Active,
    InstanceState::Overloaded,
    InstanceState::Interfered,
];

/// The store's metric families; clones share them.
#[derive(Debug, Clone)]
pub struct StoreMetrics {
    instances: Family<[(&'static str, &'static str); 1], Gauge>,
    transitions: Family<[(&'static str, &'static str); 2], Counter>,
    decisions: Family<[(&'static str, &'static str); 1], Counter>,
    decision_seconds: Histogram,
}

impl Default for StoreMetrics {
    fn default() -> Self {
        StoreMetrics {
            instances: Family::default(),
            transitions: Family::default(),
            decisions: Family::default(),
            // 1 µs to about 0.5 s.
            decision_seconds: Histogram::new(exponential_buckets(1e-6, 2.0, 20)),
        }
    }
}

impl StoreMetrics {
    /// Registers the families into `registry` (names prefixed `weir_infaas_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "weir_infaas_instances",
            "Instances by state (inactive: variants with no instance)",
            self.instances.clone(),
        );
        registry.register(
            "weir_infaas_state_transitions",
            "Instance state changes",
            self.transitions.clone(),
        );
        registry.register(
            "weir_infaas_decisions",
            "Variant selections by outcome",
            self.decisions.clone(),
        );
        registry.register(
            "weir_infaas_decision_seconds",
            "Time one variant selection took",
            self.decision_seconds.clone(),
        );
    }

    pub(crate) fn transition(&self, from: InstanceState, to: InstanceState) {
        self.transitions
            .get_or_create(&[("from", state_label(from)), ("to", state_label(to))])
            .inc();
    }

    pub(crate) fn set_states(&self, snapshot: &Snapshot) {
        let mut counts = [0i64; 4];
        for (id, _) in snapshot.registry().variants().iter().enumerate() {
            let instances = snapshot.instances_of(id as u32);
            if instances.is_empty() {
                counts[0] += 1;
            }
            for i in instances {
                counts[i.state as usize] += 1;
            }
        }
        for (state, n) in STATES.iter().zip(counts) {
            self.instances
                .get_or_create(&[("state", state_label(*state))])
                .set(n);
        }
    }

    pub(crate) fn decision(&self, kind: DecisionKind, seconds: f64) {
        self.decisions
            .get_or_create(&[("kind", kind.label())])
            .inc();
        self.decision_seconds.observe(seconds);
    }

    /// Decisions counted so far of `kind` (for tests and reports).
    pub fn decisions(&self, kind: DecisionKind) -> u64 {
        self.decisions
            .get_or_create(&[("kind", kind.label())])
            .get()
    }

    /// Transitions counted so far from `from` to `to`.
    pub fn transitions(&self, from: InstanceState, to: InstanceState) -> u64 {
        self.transitions
            .get_or_create(&[("from", state_label(from)), ("to", state_label(to))])
            .get()
    }
}
