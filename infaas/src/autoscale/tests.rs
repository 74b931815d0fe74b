//! The autoscaler's rules on scripted load (the paper's interference mitigation, §4.1; its
//! model-autoscaler, §4.2.1–§4.2.2; its worker autoscaler, §4.2.3), against the real metadata
//! store and an actuator that records what it was asked and tells the store, as the serving side
//! does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::demand::Demand;
use super::metrics::ActionKind;
use super::{Actuator, AutoscaleConfig, Controller};
use crate::dispatch::Dispatcher;
use crate::query::Requirements;
use crate::state::{Event, Worker};
use crate::store::MetadataStore;
use crate::testing::{loaded, report, up, util, variant};
use crate::variant::Variant;

/// Records each call; loads and unloads reach the store as the serving side's would.
struct Recorder {
    store: Arc<MetadataStore>,
    calls: Mutex<Vec<String>>,
    fail_loads: bool,
    launched: Mutex<u32>,
}

impl Recorder {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Actuator for Recorder {
    fn load(&self, variant: &str, worker: &str) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("load {variant}@{worker}"));
        if self.fail_loads {
            return Err("the executor is gone".into());
        }
        self.store.record(loaded(variant, worker));
        self.store.sync().map_err(|e| e.to_string())
    }

    fn unload(&self, variant: &str, worker: &str) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("unload {variant}@{worker}"));
        self.store.record(Event::Unloaded {
            variant: variant.into(),
            worker: worker.into(),
        });
        self.store.sync().map_err(|e| e.to_string())
    }

    fn launch(&self, hardware: &str) -> Result<String, String> {
        let mut n = self.launched.lock().unwrap();
        *n += 1;
        let id = format!("auto-{hardware}-{n}");
        self.calls
            .lock()
            .unwrap()
            .push(format!("launch {hardware} as {id}"));
        Ok(id)
    }

    fn retire(&self, worker: &str) -> Result<(), String> {
        self.calls.lock().unwrap().push(format!("retire {worker}"));
        self.store.record(Event::WorkerDown {
            worker: worker.into(),
        });
        self.store.sync().map_err(|e| e.to_string())
    }
}

struct Rig {
    store: Arc<MetadataStore>,
    actuator: Arc<Recorder>,
    demand: Arc<Demand>,
    controller: Controller,
}

impl Rig {
    fn new(variants: Vec<Variant>, config: AutoscaleConfig, fail_loads: bool) -> Rig {
        let store = Arc::new(MetadataStore::start(variants).unwrap());
        let actuator = Arc::new(Recorder {
            store: Arc::clone(&store),
            calls: Mutex::new(Vec::new()),
            fail_loads,
            launched: Mutex::new(0),
        });
        let demand = Arc::new(Demand::new(Duration::from_secs(60)));
        let controller = Controller::new(
            config,
            Arc::clone(&store),
            Arc::clone(&actuator) as Arc<dyn Actuator>,
            Arc::clone(&demand),
        );
        Rig {
            store,
            actuator,
            demand,
            controller,
        }
    }

    fn events(&self, events: Vec<Event>) {
        for e in events {
            self.store.record(e);
        }
        self.store.sync().unwrap();
    }

    /// One tick at `now`, waiting for what it started.
    fn tick(&mut self, now: f64) -> Vec<String> {
        let before = self.actuator.calls().len();
        self.controller.tick(now);
        self.controller.settle();
        self.actuator.calls()[before..].to_vec()
    }
}

/// A rig over one variant, `m.a` on `hw` (10 ms, 100 req/s, price 1).
fn one_variant(hw: &str, config: AutoscaleConfig, fail_loads: bool) -> Rig {
    Rig::new(
        vec![v("m.a", 0.9, 10.0, 100.0, 100.0, 1.0, hw)],
        config,
        fail_loads,
    )
}

/// `name` = `<architecture>.<suffix>` on `hw`: batch-1 latency `ms`, saturation `qps`, price.
fn v(name: &str, accuracy: f64, ms: f64, load_ms: f64, qps: f64, price: f64, hw: &str) -> Variant {
    let mut v = variant(name, "cls", accuracy, ms, load_ms, qps, hw);
    v.price_per_s = price;
    v
}

#[test]
fn low_headroom_replicates_onto_a_free_executor() {
    let mut rig = one_variant("cpu", AutoscaleConfig::default(), false);
    rig.events(vec![up("w1", "cpu"), up("w2", "cpu"), loaded("m.a", "w1")]);
    // 100 req/s of capacity for 98: headroom 1.02.
    rig.events(vec![report("m.a", "w1", 98.0, 10.0, 1)]);
    assert_eq!(rig.tick(0.0), vec!["load m.a@w2"]);
    let metrics = rig.controller.metrics();
    assert_eq!(metrics.decisions(ActionKind::Replicate), 1);
    // Headroom 200/98 now: nothing more to do.
    rig.events(vec![report("m.a", "w2", 0.0, 0.0, 0)]);
    assert!(rig.tick(1.0).is_empty());
}

#[test]
fn an_upgrade_loads_the_faster_variant_before_unloading_the_old_one() {
    let mut rig = Rig::new(
        vec![
            v("m.slow", 0.9, 10.0, 100.0, 100.0, 1.0, "cpu"),
            v("m.fast", 0.9, 2.0, 100.0, 400.0, 1.0, "cpu"),
        ],
        AutoscaleConfig::default(),
        false,
    );
    rig.events(vec![up("w1", "cpu"), loaded("m.slow", "w1")]);
    // 150 req/s on 100 of capacity. Replicating costs 1·(1 + 0.1); upgrading 1·(1 + 0.1) − 1.
    rig.events(vec![report("m.slow", "w1", 150.0, 10.0, 4)]);
    assert_eq!(rig.tick(0.0), vec!["load m.fast@w1", "unload m.slow@w1"]);
    assert_eq!(rig.controller.metrics().decisions(ActionKind::Upgrade), 1);
}

#[test]
fn a_scale_down_waits_for_the_shrunk_variants_load_time_and_restarts_when_interrupted() {
    let mut rig = Rig::new(
        // Loading takes 3 s: T_v = 3 ticks of 1 s.
        vec![v("m.a", 0.9, 10.0, 3_000.0, 100.0, 1.0, "cpu")],
        AutoscaleConfig::default(),
        false,
    );
    rig.events(vec![
        up("w1", "cpu"),
        up("w2", "cpu"),
        loaded("m.a", "w1"),
        loaded("m.a", "w2"),
        report("m.a", "w1", 5.0, 10.0, 0),
        report("m.a", "w2", 5.0, 10.0, 0),
    ]);
    assert!(rig.tick(0.0).is_empty());
    assert!(rig.tick(1.0).is_empty());
    // Busy for one tick: no instance can go, the count starts again.
    rig.events(vec![
        report("m.a", "w1", 70.0, 10.0, 1),
        report("m.a", "w2", 70.0, 10.0, 1),
    ]);
    assert!(rig.tick(2.0).is_empty());
    rig.events(vec![
        report("m.a", "w1", 5.0, 10.0, 0),
        report("m.a", "w2", 5.0, 10.0, 0),
    ]);
    assert!(rig.tick(3.0).is_empty());
    assert!(rig.tick(4.0).is_empty());
    let removed = rig.tick(5.0);
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(removed[0].starts_with("unload m.a@"), "{removed:?}");
    assert_eq!(rig.controller.metrics().decisions(ActionKind::Remove), 1);
}

#[test]
fn no_downgrade_below_the_accuracy_queries_ask_for() {
    let variants = vec![
        v("m.good", 0.95, 10.0, 100.0, 100.0, 2.0, "cpu"),
        v("m.cheap", 0.80, 10.0, 100.0, 100.0, 1.0, "cpu"),
    ];
    let script = |rig: &mut Rig| -> Vec<String> {
        rig.events(vec![
            up("w1", "cpu"),
            loaded("m.good", "w1"),
            report("m.good", "w1", 10.0, 10.0, 0),
        ]);
        (0..5).flat_map(|t| rig.tick(f64::from(t))).collect()
    };
    // Nobody asked for accuracy: the cheaper variant takes over once T_v has passed.
    let mut free = Rig::new(variants.clone(), AutoscaleConfig::default(), false);
    assert_eq!(
        script(&mut free),
        vec!["load m.cheap@w1", "unload m.good@w1"]
    );
    // Queries asked for 0.9: it never does.
    let mut floor = Rig::new(variants, AutoscaleConfig::default(), false);
    let asked = Requirements {
        min_accuracy: Some(0.9),
        ..Requirements::default()
    };
    floor.demand.note("m.good", &asked, false);
    assert!(script(&mut floor).is_empty());
    assert_eq!(
        floor.controller.metrics().decisions(ActionKind::Downgrade),
        0
    );
}

#[test]
fn at_low_load_an_architecture_moves_to_a_cheaper_executor_type_and_back_under_load() {
    let mut rig = Rig::new(
        vec![
            v("m.accel", 0.9, 2.0, 100.0, 250.0, 4.0, "accel"),
            v("m.cpu", 0.9, 10.0, 100.0, 50.0, 1.0, "cpu"),
        ],
        AutoscaleConfig::default(),
        false,
    );
    rig.events(vec![
        up("a1", "accel"),
        up("c1", "cpu"),
        loaded("m.accel", "a1"),
        report("m.accel", "a1", 10.0, 2.0, 0),
    ]);
    let asked = Requirements {
        latency_ms: Some(50.0),
        ..Requirements::default()
    };
    rig.demand.note("m.accel", &asked, false);
    // 10 req/s: one cpu instance (50 req/s at a quarter of the price) suffices.
    let calls: Vec<String> = (0..3).flat_map(|t| rig.tick(f64::from(t))).collect();
    assert_eq!(calls, vec!["load m.cpu@c1", "unload m.accel@a1"]);
    assert_eq!(rig.controller.metrics().decisions(ActionKind::Downgrade), 1);
    // 200 req/s on it: the accelerator variant comes back (cheaper than four more cpu ones).
    rig.events(vec![report("m.cpu", "c1", 200.0, 10.0, 20)]);
    assert_eq!(rig.tick(10.0), vec!["load m.accel@a1", "unload m.cpu@c1"]);
    assert_eq!(rig.controller.metrics().decisions(ActionKind::Upgrade), 1);
}

#[test]
fn a_variant_queries_name_is_replicated_never_swapped() {
    let mut rig = Rig::new(
        vec![
            v("m.slow", 0.9, 10.0, 100.0, 100.0, 1.0, "cpu"),
            v("m.fast", 0.9, 2.0, 100.0, 400.0, 1.0, "cpu"),
        ],
        AutoscaleConfig::default(),
        false,
    );
    rig.demand.note("m.slow", &Requirements::default(), true);
    rig.events(vec![
        up("w1", "cpu"),
        up("w2", "cpu"),
        loaded("m.slow", "w1"),
        report("m.slow", "w1", 150.0, 10.0, 4),
    ]);
    assert_eq!(rig.tick(0.0), vec!["load m.slow@w2"]);
}

fn workers_config(launchable: &[&str]) -> AutoscaleConfig {
    let mut c = AutoscaleConfig {
        launchable: launchable.iter().map(|s| s.to_string()).collect(),
        ..AutoscaleConfig::default()
    };
    c.workers.idle_grace_s = 5.0;
    c
}

#[test]
fn busy_executors_add_one_and_a_pending_start_is_not_repeated() {
    let mut rig = one_variant("cpu", workers_config(&["cpu"]), false);
    rig.events(vec![up("w1", "cpu"), util("w1", 0.95)]);
    assert_eq!(rig.tick(0.0), vec!["launch cpu as auto-cpu-1"]);
    assert_eq!(
        rig.controller.metrics().decisions(ActionKind::AddExecutor),
        1
    );
    // Not joined yet: no second start at the next worker tick.
    assert!(rig.tick(2.0).is_empty());
    // Joined, idle: every executor is no longer busy.
    rig.events(vec![up("auto-cpu-1", "cpu"), util("auto-cpu-1", 0.0)]);
    assert!(rig.tick(4.0).is_empty());
}

#[test]
fn a_question_passed_up_starts_an_executor_of_its_type() {
    let mut rig = one_variant("accel", workers_config(&["accel"]), false);
    // One executor, already holding the variant, at 150 req/s on 100 of capacity.
    rig.events(vec![
        up("a1", "accel"),
        loaded("m.a", "a1"),
        report("m.a", "a1", 150.0, 10.0, 8),
    ]);
    let calls = rig.tick(0.0);
    assert_eq!(calls, vec!["launch accel as auto-accel-1"]);
    assert!(rig.controller.metrics().decisions(ActionKind::PassUp) >= 1);
    // Once it joined, the replica goes there.
    rig.events(vec![up("auto-accel-1", "accel")]);
    assert_eq!(rig.tick(1.0), vec!["load m.a@auto-accel-1"]);
}

#[test]
fn an_idle_executor_this_autoscaler_started_is_retired_after_its_grace() {
    let mut rig = one_variant("cpu", workers_config(&["cpu"]), false);
    rig.events(vec![up("w1", "cpu"), util("w1", 0.95)]);
    assert_eq!(rig.tick(0.0), vec!["launch cpu as auto-cpu-1"]);
    rig.events(vec![
        up("auto-cpu-1", "cpu"),
        util("w1", 0.0),
        util("auto-cpu-1", 0.0),
    ]);
    // Idle from t = 2; the grace is 5 s.
    assert!(rig.tick(2.0).is_empty());
    assert!(rig.tick(4.0).is_empty());
    assert_eq!(rig.tick(8.0), vec!["retire auto-cpu-1"]);
    assert_eq!(
        rig.controller
            .metrics()
            .decisions(ActionKind::RemoveExecutor),
        1
    );
    // The executor named at start stays, however idle (it is also the minimum of one).
    assert!(rig.tick(20.0).is_empty());
}

#[test]
fn a_launchable_type_without_executors_gets_its_minimum() {
    let mut rig = one_variant("accel", workers_config(&["accel"]), false);
    assert_eq!(rig.tick(0.0), vec!["launch accel as auto-accel-1"]);
}

#[test]
fn an_interfered_instance_moves_to_the_least_utilised_other_executor() {
    let mut rig = one_variant("cpu", AutoscaleConfig::default(), false);
    rig.events(vec![
        up("w1", "cpu"),
        up("w2", "cpu"),
        up("w3", "cpu"),
        util("w2", 0.7),
        util("w3", 0.1),
        loaded("m.a", "w1"),
        // Under real load (60 of 100 req/s) and five times slower than its profile.
        report("m.a", "w1", 60.0, 50.0, 2),
    ]);
    assert_eq!(rig.tick(0.0), vec!["load m.a@w3", "unload m.a@w1"]);
    assert_eq!(rig.controller.metrics().decisions(ActionKind::Migrate), 1);
}

#[test]
fn a_failing_load_is_counted_and_the_next_tick_decides_again() {
    let mut rig = one_variant("cpu", AutoscaleConfig::default(), true);
    rig.events(vec![
        up("w1", "cpu"),
        up("w2", "cpu"),
        loaded("m.a", "w1"),
        report("m.a", "w1", 98.0, 10.0, 1),
    ]);
    assert_eq!(rig.tick(0.0), vec!["load m.a@w2"]);
    assert_eq!(rig.tick(1.0), vec!["load m.a@w2"]);
    let metrics = rig.controller.metrics();
    assert_eq!(metrics.failures(ActionKind::Replicate), 2);
    assert_eq!(metrics.decisions(ActionKind::Replicate), 2);
}

#[test]
fn instances_are_billed_while_loaded_and_cost_is_exposed() {
    let mut rig = Rig::new(
        vec![v("m.a", 0.9, 10.0, 100.0, 100.0, 2.0, "cpu")],
        AutoscaleConfig::default(),
        false,
    );
    rig.events(vec![
        Event::WorkerUp(Worker {
            id: "w1".into(),
            hardware: "cpu".into(),
        }),
        loaded("m.a", "w1"),
        report("m.a", "w1", 50.0, 10.0, 0),
    ]);
    rig.tick(0.0);
    rig.tick(10.0);
    let metrics = rig.controller.metrics();
    assert!(
        (metrics.total_cost() - 20.0).abs() < 1e-9,
        "{}",
        metrics.total_cost()
    );
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for family in ["weir_infaas_cost_per_second 2", "weir_infaas_cost_total"] {
        assert!(text.contains(family), "{family} in\n{text}");
    }
}
