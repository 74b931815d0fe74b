//! The store's derived state from scripted events (registered variants start Inactive; the
//! paper's state machine, §4 and Figure 4; worker loss; hostile input), and the property that the
//! incrementally maintained state equals the state recomputed from scratch from the same events.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::testing::{arb_event, loaded, report, up, util, variant};

fn variants() -> Vec<Variant> {
    vec![
        variant("a", "cls", 0.7, 10.0, 100.0, 100.0, "cpu"),
        variant("b", "cls", 0.8, 20.0, 100.0, 40.0, "cpu"),
        variant("g", "cls", 0.8, 2.0, 100.0, 900.0, "gpu"),
    ]
}

fn started(events: Vec<Event>) -> MetadataStore {
    let s = MetadataStore::start(variants()).unwrap();
    for e in events {
        s.record(e);
    }
    s.sync().unwrap();
    s
}

fn state_of(s: &MetadataStore, v: &str, w: &str) -> Option<InstanceState> {
    s.states()
        .into_iter()
        .find(|r| r.0 == v && r.1.as_deref() == Some(w))
        .map(|r| r.2)
}

#[test]
fn a_registry_only_store_lists_every_variant_inactive() {
    let s = started(vec![]);
    let states = s.states();
    assert_eq!(states.len(), 3);
    assert!(states
        .iter()
        .all(|r| r.1.is_none() && r.2 == InstanceState::Inactive));
    let mut text = String::new();
    let mut registry = prometheus_client::registry::Registry::default();
    s.register(&mut registry);
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("weir_infaas_instances{state=\"inactive\"} 3"),
        "{text}"
    );
}

#[test]
fn states_follow_the_reports() {
    use InstanceState::*;
    let s = started(vec![up("w1", "cpu")]);
    let step = |e: Event| {
        s.record(e);
        s.sync().unwrap();
        state_of(&s, "a", "w1")
    };
    assert_eq!(
        step(Event::Loading {
            variant: "a".into(),
            worker: "w1".into()
        }),
        Some(Inactive)
    );
    assert!(!s.snapshot().instances_of(0)[0].usable());
    assert_eq!(step(loaded("a", "w1")), Some(Active));
    assert_eq!(step(report("a", "w1", 100.0, 10.0, 0)), Some(Overloaded));
    assert_eq!(step(report("a", "w1", 50.0, 10.0, 0)), Some(Active));
    assert_eq!(step(report("a", "w1", 50.0, 10.0, 51)), Some(Overloaded));
    assert_eq!(step(report("a", "w1", 60.0, 16.0, 0)), Some(Interfered));
    assert_eq!(step(report("a", "w1", 50.0, 14.0, 0)), Some(Active));
    assert_eq!(
        step(Event::Unloaded {
            variant: "a".into(),
            worker: "w1".into()
        }),
        None
    );
    let m = s.metrics();
    assert_eq!(m.transitions(Active, Overloaded), 2);
    assert_eq!(m.transitions(Overloaded, Interfered), 1);
    assert_eq!(m.transitions(Interfered, Active), 1);
    assert_eq!(m.transitions(Active, Inactive), 1);
}

#[test]
fn a_worker_going_down_takes_its_instances_and_aggregates_follow() {
    let s = started(vec![
        up("w1", "cpu"),
        up("w2", "cpu"),
        util("w1", 0.2),
        util("w2", 0.6),
        loaded("a", "w1"),
        loaded("b", "w1"),
        loaded("a", "w2"),
        report("a", "w2", 100.0, 10.0, 0),
    ]);
    let snap = s.snapshot();
    let hw = snap.hardware("cpu").unwrap();
    assert_eq!(hw.workers, 2);
    assert!((hw.min_utilisation - 0.2).abs() < 1e-12);
    assert!((hw.mean_utilisation - 0.4).abs() < 1e-12);
    assert_eq!(hw.overloaded_fraction, 0.5);
    assert!(!hw.all_interfered);
    assert_eq!(snap.worker("w1").unwrap().instances, 2);
    assert_eq!(snap.workers_of("cpu")[0].id, "w1");
    s.record(Event::WorkerDown {
        worker: "w1".into(),
    });
    s.record(report("a", "w2", 60.0, 100.0, 0));
    s.sync().unwrap();
    let snap = s.snapshot();
    assert!(snap.worker("w1").is_none());
    assert_eq!(state_of(&s, "b", "w1"), None);
    assert_eq!(state_of(&s, "a", "w2"), Some(InstanceState::Interfered));
    let hw = snap.hardware("cpu").unwrap();
    assert_eq!((hw.workers, hw.all_interfered), (1, true));
    // Back up, it holds nothing until told otherwise.
    s.record(up("w1", "cpu"));
    s.sync().unwrap();
    assert_eq!(s.snapshot().worker("w1").unwrap().instances, 0);
}

#[test]
fn hostile_events_are_ignored() {
    let s = started(vec![up("w1", "cpu"), loaded("a", "w1"), util("w1", 0.3)]);
    let before = s.states();
    for e in [
        report("a", "w1", f64::NAN, 1.0, 0),
        report("a", "w1", 1.0, f64::INFINITY, 0),
        report("a", "w1", -1.0, 1.0, 0),
        report("nope", "w1", 1.0, 1.0, 0),
        report("b", "w1", 1.0, 1.0, 0),
        loaded("a", "ghost"),
        loaded("nope", "w1"),
        util("w1", -0.5),
        util("w1", f64::NAN),
        util("ghost", 0.5),
        Event::WorkerDown {
            worker: "ghost".into(),
        },
        Event::Loading {
            variant: "a".into(),
            worker: "w1".into(),
        },
    ] {
        s.record(e);
    }
    s.sync().unwrap();
    assert_eq!(s.states(), before);
    assert_eq!(s.snapshot().worker("w1").unwrap().utilisation, 0.3);
    assert_eq!(s.snapshot().events(), 15);
}

/// The state recomputed from scratch: replay the events into plain maps, then apply the rule.
#[derive(Default)]
struct Replay {
    workers: BTreeMap<String, String>,
    utilisation: BTreeMap<String, f64>,
    instances: BTreeMap<(String, String), (bool, Option<rule::Report>)>,
}

impl Replay {
    fn apply(&mut self, e: &Event, names: &[&str]) {
        let known = |v: &str, w: &str, me: &Self| names.contains(&v) && me.workers.contains_key(w);
        match e {
            Event::WorkerUp(w) => {
                self.workers.insert(w.id.clone(), w.hardware.clone());
            }
            Event::WorkerDown { worker } => {
                self.workers.remove(worker);
                self.utilisation.remove(worker);
                self.instances.retain(|(_, w), _| w != worker);
            }
            Event::WorkerLoad {
                worker,
                utilisation,
            } if self.workers.contains_key(worker) && (0.0..=1.0).contains(utilisation) => {
                self.utilisation.insert(worker.clone(), *utilisation);
            }
            Event::Loading { variant, worker } if known(variant, worker, self) => {
                let key = (variant.clone(), worker.clone());
                if !matches!(self.instances.get(&key), Some((true, _))) {
                    self.instances.insert(key, (false, None));
                }
            }
            Event::Loaded { variant, worker } if known(variant, worker, self) => {
                let entry = self
                    .instances
                    .entry((variant.clone(), worker.clone()))
                    .or_insert((true, None));
                entry.0 = true;
            }
            Event::Unloaded { variant, worker } => {
                self.instances.remove(&(variant.clone(), worker.clone()));
            }
            Event::InstanceLoad {
                variant,
                worker,
                qps,
                mean_latency_ms,
                outstanding,
            } if *qps >= 0.0 && *mean_latency_ms >= 0.0 => {
                if let Some((true, r)) = self.instances.get_mut(&(variant.clone(), worker.clone()))
                {
                    *r = Some(rule::Report {
                        qps: *qps,
                        mean_latency_ms: *mean_latency_ms,
                        outstanding: *outstanding,
                    });
                }
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn incremental_state_equals_state_recomputed_from_scratch(
        batches in prop::collection::vec(prop::collection::vec(arb_event(&["a", "b", "g", "x"], &["w1", "w2", "w3"]), 0..8), 1..8),
    ) {
        let s = MetadataStore::start(variants()).unwrap();
        let mut replay = Replay::default();
        let rule = StateRule::default();
        let all = variants();
        let names: Vec<&str> = all.iter().map(|v| v.name.as_str()).collect();
        for batch in batches {
            for e in batch {
                replay.apply(&e, &names);
                s.record(e);
            }
            s.sync().unwrap();
            let snap = s.snapshot();
            let mut expected: Vec<(String, Option<String>, InstanceState)> = Vec::new();
            for v in &all {
                let mine: Vec<_> = replay.instances.iter().filter(|((n, _), _)| *n == v.name).collect();
                if mine.is_empty() {
                    expected.push((v.name.clone(), None, InstanceState::Inactive));
                }
                for ((_, w), (is_loaded, r)) in mine {
                    let state = if *is_loaded {
                        rule.state(v.profile.saturation_qps, v.profile.inference_ms(1).unwrap(), *r).0
                    } else {
                        InstanceState::Inactive
                    };
                    expected.push((v.name.clone(), Some(w.clone()), state));
                }
            }
            let mut got = snap.states();
            got.sort();
            expected.sort();
            prop_assert_eq!(got, expected);
            for (id, hw) in &replay.workers {
                let w = snap.worker(id).unwrap();
                prop_assert_eq!(&w.hardware, hw);
                prop_assert_eq!(w.utilisation, replay.utilisation.get(id).copied().unwrap_or(0.0));
                let n = replay.instances.keys().filter(|(_, wk)| wk == id).count();
                prop_assert_eq!(w.instances as usize, n);
            }
            prop_assert_eq!(snap.workers().len(), replay.workers.len());
            for (hw, view) in snap.hardware_kinds() {
                let n = replay.workers.values().filter(|h| *h == hw).count();
                prop_assert_eq!(view.workers as usize, n);
            }
        }
    }
}
