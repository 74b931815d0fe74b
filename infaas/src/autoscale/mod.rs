//! The live autoscaler ("INFaaS: Automated Model-less Inference Serving", §4.2): every tick it
//! reads the metadata store's snapshot, asks the model-autoscaler's question of each architecture
//! with instances, over its variants of every executor type ([`plan`]), and every worker interval the worker
//! autoscaler's ([`crate::scaling::workers`]); the answers become actions on an [`Actuator`] —
//! load or unload a variant on an executor, start or retire an executor.
//!
//! - **Scale up** (headroom below the threshold): the cheaper of replicating the running variant
//!   onto more of the type's executors and upgrading it to a faster variant of the same
//!   architecture (the cost of §4.2.1). A replica goes to the least-utilised executor that does
//!   not hold the variant; when there are too few, or no plan fits, the question is *passed up*:
//!   the worker autoscaler starts an executor of the type.
//! - **Upgrade / downgrade** load the new variant where the old one runs (or, for a variant of
//!   another type, on that type's executors) and unload the old one only once the new one
//!   answered its load, so capacity never dips.
//! - **Scale down** (remove one instance, or downgrade) only after it was the choice for T_v
//!   ticks in a row (the shrunk variant's load time over the tick), reset by any other tick; an
//!   architecture keeps its last instance.
//! - **Interference** (§4.1): an Interfered instance is loaded on the least-utilised other
//!   executor of its type, then unloaded where it was.
//! - **Workers** (§4.2.3): an executor is added by the three rules, or for a question passed up,
//!   or when a type launched by this autoscaler has none; an idle executor this autoscaler
//!   started is retired after its grace period (the executors named at start stay).
//!
//! Actions take seconds (a load, a process start), so each runs on a thread of its own (at most
//! `max_actions` at once, `actions.rs`) and the tick never waits; an action in flight on an instance blocks
//! another on it, and a failed one is logged and counted, and the next tick decides afresh (an
//! executor SIGKILLed under a scale-up leaves the store, and the question is asked again without
//! it). Every action is logged with its reason and counted in [`metrics`]; the price of the
//! instances held is accumulated as they come and go.

mod actions;
pub mod demand;
mod executors;
pub mod metrics;
mod plan;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::billing::Billing;
use crate::scaling::greedy::{Action, Decision, ModelAutoscaler, Step};
use crate::scaling::workers::WorkerRules;
use crate::snapshot::Snapshot;
use crate::state::InstanceState;
use crate::store::MetadataStore;
use actions::Actions;
use demand::Demand;
use metrics::{ActionKind, ScalingMetrics};
use plan::Group;

/// The autoscaler's settings, with the paper's defaults where it gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoscaleConfig {
    /// Seconds between model-autoscaler ticks (1 s).
    pub tick_s: f64,
    /// Headroom below which a type's architecture scales up, and above which it may scale down
    /// (1.05).
    pub threshold: f64,
    /// λ of the action cost, per second: how much a variant's load time counts against it (the
    /// paper leaves it tunable; 1).
    pub lambda_per_s: f64,
    /// Capacity held beyond the load, requests per second (0).
    pub slack_qps: f64,
    /// How long a query's requirements count (10 s).
    pub demand_window_s: f64,
    /// Cores of one executor, for the resource constraint (2).
    pub executor_cores: f64,
    /// Memory of one executor in bytes, for the resource constraint (8 GiB).
    pub executor_memory_bytes: f64,
    /// Actions in flight at once (8).
    pub max_actions: usize,
    /// Seconds a started executor may take to join before its start counts as failed (60).
    pub launch_timeout_s: f64,
    /// Executor types this autoscaler may start and retire executors of (none: it only loads
    /// and unloads).
    pub launchable: Vec<String>,
    /// The worker autoscaler's rules.
    pub workers: WorkerRules,
}

impl Default for AutoscaleConfig {
    fn default() -> Self {
        AutoscaleConfig {
            tick_s: 1.0,
            threshold: 1.05,
            lambda_per_s: 1.0,
            slack_qps: 0.0,
            demand_window_s: 10.0,
            executor_cores: 2.0,
            executor_memory_bytes: 8.0 * f64::from(1u32 << 30),
            max_actions: 8,
            launch_timeout_s: 60.0,
            launchable: Vec::new(),
            workers: WorkerRules::default(),
        }
    }
}

/// What the autoscaler acts through: the serving side, which owns the instances and executors.
/// Calls may block for seconds; they run on the autoscaler's action threads.
pub trait Actuator: Send + Sync {
    /// Loads `variant` on `worker`; returns once it serves.
    ///
    /// # Errors
    /// Why it did not load.
    fn load(&self, variant: &str, worker: &str) -> Result<(), String>;
    /// Unloads `variant` on `worker`, its requests answered first.
    ///
    /// # Errors
    /// Why it could not be unloaded (it is out of service either way).
    fn unload(&self, variant: &str, worker: &str) -> Result<(), String>;
    /// Starts an executor of `hardware`; returns its worker id (it joins by itself).
    ///
    /// # Errors
    /// Why it could not be started.
    fn launch(&self, hardware: &str) -> Result<String, String>;
    /// Drains and stops the executor `worker`.
    ///
    /// # Errors
    /// Why it could not be stopped.
    fn retire(&self, worker: &str) -> Result<(), String>;
    /// Whether the executor `worker`, started and not joined yet, is known to have died (so
    /// another may be started without waiting for the launch timeout).
    fn launch_died(&self, _worker: &str) -> bool {
        false
    }
}

/// `variant`'s executor type.
fn hardware_of(snapshot: &Snapshot, variant: &str) -> String {
    let registry = snapshot.registry();
    registry
        .id(variant)
        .and_then(|id| registry.get(id))
        .map(|v| v.config.hardware.clone())
        .unwrap_or_default()
}

/// The type of the running variant of `g` giving the most capacity.
fn main_hardware(snapshot: &Snapshot, g: &Group) -> Option<String> {
    g.problem
        .candidates
        .iter()
        .filter(|c| c.running > 0)
        .max_by(|a, b| {
            (a.saturation_qps * f64::from(a.running))
                .total_cmp(&(b.saturation_qps * f64::from(b.running)))
        })
        .map(|c| hardware_of(snapshot, &c.name))
}

/// The workers holding an instance of `variant` (loaded or loading).
fn holders(snapshot: &Snapshot, variant: &str) -> Vec<String> {
    snapshot
        .registry()
        .id(variant)
        .map(|id| {
            snapshot
                .instances_of(id)
                .iter()
                .map(|i| i.worker.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn instance_key(variant: &str, worker: &str) -> String {
    format!("{variant}@{worker}")
}

/// Executors started and not joined yet: (hardware, worker id, started at).
type Launching = Arc<Mutex<Vec<(String, String, f64)>>>;

/// The autoscaler's state between ticks.
pub struct Controller {
    config: AutoscaleConfig,
    store: Arc<MetadataStore>,
    actuator: Arc<dyn Actuator>,
    demand: Arc<Demand>,
    metrics: ScalingMetrics,
    scalers: HashMap<String, ModelAutoscaler>,
    actions: Actions,
    launching: Launching,
    /// Executors this autoscaler started (only these are retired).
    launched: Arc<Mutex<BTreeSet<String>>>,
    idle_since: HashMap<String, f64>,
    /// Types a question was passed up for since the last worker tick.
    passed_up: BTreeMap<String, String>,
    /// Types whose question was passed up at the last model tick (logged and counted once per
    /// run of ticks).
    passing: BTreeSet<String>,
    passing_now: BTreeSet<String>,
    last_worker_tick: Option<f64>,
    billing: Billing,
    billed: BTreeSet<(String, String)>,
    billed_to: f64,
}

impl Controller {
    /// An autoscaler over `store`, acting through `actuator`, reading requirements from
    /// `demand`.
    pub fn new(
        config: AutoscaleConfig,
        store: Arc<MetadataStore>,
        actuator: Arc<dyn Actuator>,
        demand: Arc<Demand>,
    ) -> Self {
        Controller {
            config,
            store,
            actuator,
            demand,
            metrics: ScalingMetrics::default(),
            scalers: HashMap::new(),
            actions: Actions::default(),
            launching: Arc::default(),
            launched: Arc::default(),
            idle_since: HashMap::new(),
            passed_up: BTreeMap::new(),
            passing: BTreeSet::new(),
            passing_now: BTreeSet::new(),
            last_worker_tick: None,
            billing: Billing::new(),
            billed: BTreeSet::new(),
            billed_to: 0.0,
        }
    }

    /// Its metric families (shared with clones).
    pub fn metrics(&self) -> ScalingMetrics {
        self.metrics.clone()
    }

    /// Waits for the actions in flight (tests, and shutdown).
    pub fn settle(&mut self) {
        self.actions.settle();
    }

    /// One tick at `now_s` seconds (any fixed origin): model questions, interference, and the
    /// workers when their interval has passed.
    pub fn tick(&mut self, now_s: f64) {
        let snapshot = self.store.snapshot();
        self.bill(&snapshot, now_s);
        let groups = plan::groups(&snapshot, &self.demand, &self.config);
        let keys: BTreeSet<String> = groups.iter().map(|g| g.architecture.clone()).collect();
        self.scalers.retain(|k, _| keys.contains(k));
        for g in &groups {
            let (threshold, tick_s) = (self.config.threshold, self.config.tick_s);
            let decision = self
                .scalers
                .entry(g.architecture.clone())
                .or_insert_with(|| ModelAutoscaler::new(threshold, tick_s))
                .tick(&g.problem);
            match decision {
                Decision::Up(step) | Decision::Down(step) => self.act(&snapshot, g, &step),
                Decision::PassUp(reason) => {
                    // No plan fits the executors there are: more of the type of the running
                    // variant giving the most capacity.
                    if let Some(hw) = main_hardware(&snapshot, g) {
                        self.pass_up(&hw, &g.architecture, reason);
                    }
                }
                Decision::Hold | Decision::DownPending { .. } => {}
            }
        }
        self.migrate(&snapshot);
        self.passing = std::mem::take(&mut self.passing_now);
        let due = self
            .last_worker_tick
            .is_none_or(|t| now_s - t >= self.config.workers.interval_s);
        if due {
            self.last_worker_tick = Some(now_s);
            self.workers(&snapshot, now_s);
        }
    }

    /// Bills the instances loaded now from when they were first seen.
    fn bill(&mut self, snapshot: &Snapshot, now_s: f64) {
        let registry = snapshot.registry();
        let now: BTreeSet<(String, String)> = snapshot
            .instances()
            .iter()
            .filter(|i| !i.loading)
            .filter_map(|i| {
                registry
                    .get(i.variant)
                    .map(|v| (v.name.clone(), i.worker.clone()))
            })
            .collect();
        for (v, w) in now.difference(&self.billed) {
            let price = registry
                .id(v)
                .and_then(|id| registry.get(id))
                .map_or(0.0, |x| x.price_per_s);
            self.billing.start(v, w, price, now_s);
        }
        for (v, w) in self.billed.difference(&now) {
            self.billing.stop(v, w, now_s);
        }
        self.billed = now;
        let total = self.billing.total(now_s);
        self.metrics
            .cost(self.billing.rate(), (total - self.billed_to).max(0.0));
        self.billed_to = total;
    }

    fn pass_up(&mut self, hardware: &str, architecture: &str, reason: String) {
        self.passing_now.insert(hardware.to_string());
        if !self.passing.contains(hardware) && !self.passed_up.contains_key(hardware) {
            self.metrics.decided(ActionKind::PassUp);
            tracing::info!(%hardware, %architecture, %reason, "Autoscaling: no plan fits the executors; passed up.");
        }
        self.passed_up.insert(hardware.to_string(), reason);
    }

    /// Carries out a model-autoscaler step on group `g`.
    fn act(&mut self, snapshot: &Snapshot, g: &Group, step: &Step) {
        let name = |i: usize| g.problem.candidates.get(i).map(|c| c.name.clone());
        let holders = |variant: &str| holders(snapshot, variant);
        let reason = format!(
            "headroom {:.2} at {:.1} req/s (threshold {:.2}), cost {:.3}",
            g.problem.headroom(),
            g.problem.load_qps,
            self.config.threshold,
            step.cost
        );
        // Up to `count` executors of `variant`'s type without it, least utilised first; a
        // shortfall is passed up for that type.
        let places = |me: &mut Self, variant: &str, count: u32| -> Vec<String> {
            let held = holders(variant);
            let hw = hardware_of(snapshot, variant);
            let free: Vec<String> = snapshot
                .workers_of(&hw)
                .iter()
                .filter(|w| !held.contains(&w.id))
                .map(|w| w.id.clone())
                .take(count as usize)
                .collect();
            if free.len() < count as usize {
                let short = format!(
                    "{reason}; {} of {count} instances have an executor",
                    free.len()
                );
                me.pass_up(&hw, &g.architecture, short);
            }
            free
        };
        match step.action {
            Action::Replicate { variant, count } => {
                let Some(v) = name(variant) else { return };
                for w in places(self, &v, count) {
                    self.load(ActionKind::Replicate, &v, &w, &reason);
                }
            }
            Action::Upgrade { from, to, count } | Action::Downgrade { from, to, count } => {
                let kind = match step.action {
                    Action::Upgrade { .. } => ActionKind::Upgrade,
                    _ => ActionKind::Downgrade,
                };
                let (Some(old), Some(new)) = (name(from), name(to)) else {
                    return;
                };
                if hardware_of(snapshot, &old) == hardware_of(snapshot, &new) {
                    // In place, executor by executor.
                    let mut held = holders(&old);
                    held.truncate(count as usize);
                    for w in held {
                        self.replace(kind, &old, &new, &w, &reason);
                    }
                } else {
                    // Onto the other type first; the old instances go once all the new serve.
                    let to = places(self, &new, count);
                    if !to.is_empty() {
                        self.move_across(kind, (&old, holders(&old)), (&new, to), &reason);
                    }
                }
            }
            Action::RemoveOne { variant } => {
                // An architecture keeps its last instance: a query that finds none waits for a
                // cold start, and an idle executor's retirement frees it anyway.
                let instances: u32 = g.problem.candidates.iter().map(|c| c.running).sum();
                let Some(v) = name(variant).filter(|_| instances > 1) else {
                    return;
                };
                let least = snapshot.registry().id(&v).and_then(|id| {
                    snapshot
                        .instances_of(id)
                        .iter()
                        .min_by(|a, b| a.qps.total_cmp(&b.qps))
                        .map(|i| i.worker.clone())
                });
                if let Some(w) = least {
                    self.unload(ActionKind::Remove, &v, &w, &reason);
                }
            }
        }
    }

    /// Starts `work` as an action touching `keys` and counts it as a `kind` decision; whether it
    /// started.
    fn start(
        &mut self,
        kind: ActionKind,
        keys: Vec<String>,
        what: String,
        work: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> bool {
        let started = self.actions.run(
            keys,
            self.config.max_actions,
            (kind, what, self.metrics.clone()),
            work,
        );
        if started {
            self.metrics.decided(kind);
        }
        started
    }

    fn load(&mut self, kind: ActionKind, variant: &str, worker: &str, reason: &str) {
        self.on_instance(kind, true, variant, worker, reason);
    }

    fn unload(&mut self, kind: ActionKind, variant: &str, worker: &str, reason: &str) {
        self.on_instance(kind, false, variant, worker, reason);
    }

    /// Loads (or unloads) `variant` on `worker` on an action thread.
    fn on_instance(
        &mut self,
        kind: ActionKind,
        load: bool,
        variant: &str,
        worker: &str,
        reason: &str,
    ) {
        let actuator = Arc::clone(&self.actuator);
        let (v, w) = (variant.to_string(), worker.to_string());
        let verb = if load { "load" } else { "unload" };
        let what = format!("{verb} {v} on {w}");
        let keys = vec![instance_key(&v, &w)];
        let started = self.start(kind, keys, what, move || match load {
            true => actuator.load(&v, &w),
            false => actuator.unload(&v, &w),
        });
        if started {
            tracing::info!(kind = kind.label(), %variant, %worker, %reason, action = verb, "Autoscaling action started.");
        }
    }

    /// Loads `new` on `to`, then unloads `old` on `from` once `new` serves.
    fn replace_on(&mut self, kind: ActionKind, old: (&str, &str), new: (&str, &str), reason: &str) {
        let actuator = Arc::clone(&self.actuator);
        let (ov, ow, nv, nw) = (
            old.0.to_string(),
            old.1.to_string(),
            new.0.to_string(),
            new.1.to_string(),
        );
        let what = format!("{ov} on {ow} → {nv} on {nw}");
        let keys = vec![instance_key(&ov, &ow), instance_key(&nv, &nw)];
        if self.start(kind, keys, what.clone(), move || {
            actuator.load(&nv, &nw)?;
            actuator.unload(&ov, &ow)
        }) {
            tracing::info!(kind = kind.label(), change = %what, %reason, "Autoscaling: replacing.");
        }
    }

    /// Loads `new` on each of its workers, then unloads `old` on each of its own, once every new
    /// instance serves (a failed load leaves the old ones serving).
    fn move_across(
        &mut self,
        kind: ActionKind,
        old: (&str, Vec<String>),
        new: (&str, Vec<String>),
        reason: &str,
    ) {
        let actuator = Arc::clone(&self.actuator);
        let (ov, ows, nv, nws) = (old.0.to_string(), old.1, new.0.to_string(), new.1);
        let what = format!("{ov} on {} → {nv} on {}", ows.join(" "), nws.join(" "));
        let keys = ows
            .iter()
            .map(|w| instance_key(&ov, w))
            .chain(nws.iter().map(|w| instance_key(&nv, w)))
            .collect();
        if self.start(kind, keys, what.clone(), move || {
            for w in &nws {
                actuator.load(&nv, w)?;
            }
            for w in &ows {
                actuator.unload(&ov, w)?;
            }
            Ok(())
        }) {
            tracing::info!(kind = kind.label(), change = %what, %reason, "Autoscaling: moving across executor types.");
        }
    }

    fn replace(&mut self, kind: ActionKind, old: &str, new: &str, worker: &str, reason: &str) {
        self.replace_on(kind, (old, worker), (new, worker), reason);
    }

    /// Interference mitigation (§4.1): each Interfered instance moves to the least-utilised other
    /// executor of its type.
    fn migrate(&mut self, snapshot: &Snapshot) {
        let registry = snapshot.registry();
        let interfered: Vec<(String, String, String)> = snapshot
            .instances()
            .iter()
            .filter(|i| i.state == InstanceState::Interfered && !i.loading)
            .filter_map(|i| {
                registry
                    .get(i.variant)
                    .map(|v| (v.name.clone(), v.config.hardware.clone(), i.worker.clone()))
            })
            .collect();
        for (variant, hardware, from) in interfered {
            let held = holders(snapshot, &variant);
            let target = snapshot
                .workers_of(&hardware)
                .iter()
                .find(|w| !held.contains(&w.id))
                .map(|w| w.id.clone());
            match target {
                Some(to) => self.replace_on(
                    ActionKind::Migrate,
                    (&variant, &from),
                    (&variant, &to),
                    "the instance runs slower than its profile under load (Interfered)",
                ),
                None => {
                    self.passed_up.entry(hardware).or_insert_with(|| {
                        format!(
                            "{variant} is Interfered on {from} and no other executor can take it"
                        )
                    });
                }
            }
        }
    }

    /// Ticks on a thread of its own every `tick_s` until the handle is dropped.
    pub fn spawn(mut self) -> std::io::Result<RunningAutoscaler> {
        let stop = Arc::new(AtomicBool::new(false));
        let metrics = self.metrics();
        let tick = Duration::from_secs_f64(self.config.tick_s.max(0.01));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("weir-autoscale".into())
            .spawn(move || {
                let start = Instant::now();
                while !stopping.load(Ordering::Acquire) {
                    std::thread::sleep(tick);
                    self.tick(start.elapsed().as_secs_f64());
                }
                self.settle();
            })?;
        Ok(RunningAutoscaler {
            stop,
            thread: Some(thread),
            metrics,
        })
    }
}

/// An autoscaler ticking on its thread; dropping it stops the ticks and waits for the actions in
/// flight.
pub struct RunningAutoscaler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    metrics: ScalingMetrics,
}

impl RunningAutoscaler {
    /// Its metric families.
    pub fn metrics(&self) -> &ScalingMetrics {
        &self.metrics
    }
}

impl Drop for RunningAutoscaler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
