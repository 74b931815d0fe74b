//! Prometheus families for autoscaling:
//!
//! - `weir_infaas_scaling_decisions_total{kind}`: actions taken, by kind: `replicate`, `upgrade`,
//!   `remove`, `downgrade`, `migrate`, `pass_up` (no plan fits the type's executors),
//!   `add_executor`, `remove_executor`;
//! - `weir_infaas_scaling_failures_total{kind}`: actions that failed, by the same kinds;
//! - `weir_infaas_cost_per_second`: the price of the instances loaded now;
//! - `weir_infaas_cost`: price × seconds accumulated over the instances held so far.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// What an autoscaling action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ActionKind {
    /// More instances of a running variant.
    Replicate,
    /// A faster variant of the same architecture in place of one.
    Upgrade,
    /// One instance fewer.
    Remove,
    /// A cheaper variant of the same architecture in place of one.
    Downgrade,
    /// An Interfered instance moved to another executor.
    Migrate,
    /// No plan fits the type's executors: more executors are asked for.
    PassUp,
    /// An executor started.
    AddExecutor,
    /// An executor drained and stopped.
    RemoveExecutor,
}

impl ActionKind {
    /// Its label value.
    pub fn label(self) -> &'static str {
        match self {
            ActionKind::Replicate => "replicate",
            ActionKind::Upgrade => "upgrade",
            ActionKind::Remove => "remove",
            ActionKind::Downgrade => "downgrade",
            ActionKind::Migrate => "migrate",
            ActionKind::PassUp => "pass_up",
            ActionKind::AddExecutor => "add_executor",
            ActionKind::RemoveExecutor => "remove_executor",
        }
    }
}

type Kinds = Family<[(&'static str, &'static str); 1], Counter>;

/// The families; clones share them.
#[derive(Debug, Clone, Default)]
pub struct ScalingMetrics {
    decisions: Kinds,
    failures: Kinds,
    cost_per_second: Gauge<f64, AtomicU64>,
    cost: Counter<f64, AtomicU64>,
}

impl ScalingMetrics {
    /// Registers the families into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "weir_infaas_scaling_decisions",
            "Autoscaling actions taken, by kind",
            self.decisions.clone(),
        );
        registry.register(
            "weir_infaas_scaling_failures",
            "Autoscaling actions that failed, by kind",
            self.failures.clone(),
        );
        registry.register(
            "weir_infaas_cost_per_second",
            "Price per second of the instances loaded now",
            self.cost_per_second.clone(),
        );
        registry.register(
            "weir_infaas_cost",
            "Price times seconds over the instances held so far",
            self.cost.clone(),
        );
    }

    pub(super) fn decided(&self, kind: ActionKind) {
        self.decisions
            .get_or_create(&[("kind", kind.label())])
            .inc();
    }

    pub(super) fn failed(&self, kind: ActionKind) {
        self.failures.get_or_create(&[("kind", kind.label())]).inc();
    }

    pub(super) fn cost(&self, per_second: f64, added: f64) {
        self.cost_per_second.set(per_second);
        if added > 0.0 {
            self.cost.inc_by(added);
        }
    }

    /// Actions of `kind` taken so far.
    pub fn decisions(&self, kind: ActionKind) -> u64 {
        self.decisions
            .get_or_create(&[("kind", kind.label())])
            .get()
    }

    /// Actions of `kind` that failed so far.
    pub fn failures(&self, kind: ActionKind) -> u64 {
        self.failures.get_or_create(&[("kind", kind.label())]).get()
    }

    /// Price × seconds so far.
    pub fn total_cost(&self) -> f64 {
        self.cost.get()
    }
}
