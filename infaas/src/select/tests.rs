//! Selection against a running store: the paper's rules (§4.1: an explicit variant only gets a
//! worker; an Active match first, else the least load + inference time; never an Overloaded or
//! Interfered instance; no match names the closest variant; the policy is replaceable), and the
//! property that the indexed policy and the brute-force scan always agree.

use proptest::prelude::*;

use super::*;
use crate::dispatch::Dispatcher;
use crate::query::Requirements;
use crate::state::{Event, InstanceState};
use crate::store::{MetadataStore, StateRule};
use crate::testing::{arb_event, loaded, report, up, util, variant};

fn variants() -> Vec<Variant> {
    vec![
        variant("fast", "cls", 0.70, 5.0, 1000.0, 200.0, "cpu"),
        variant("mid", "cls", 0.76, 20.0, 200.0, 50.0, "cpu"),
        variant("slow", "cls", 0.80, 80.0, 100.0, 12.0, "cpu"),
        variant("gpu", "cls", 0.76, 2.0, 3000.0, 800.0, "gpu"),
        variant("other", "translate", 0.9, 50.0, 100.0, 10.0, "cpu"),
    ]
}

fn store(events: Vec<Event>) -> MetadataStore {
    let store = MetadataStore::start(variants()).unwrap();
    for e in [up("w1", "cpu"), up("w2", "cpu")].into_iter().chain(events) {
        store.record(e);
    }
    store.sync().unwrap();
    store
}

fn task(latency_ms: Option<f64>, min_accuracy: Option<f64>) -> Query {
    Query {
        target: Target::Task("cls".into()),
        requirements: Requirements {
            latency_ms,
            min_accuracy,
            max_cost: None,
        },
        batch: 1,
    }
}

fn named(name: &str) -> Query {
    Query {
        target: Target::Variant(name.into()),
        requirements: Requirements::default(),
        batch: 1,
    }
}

fn chose(store: &MetadataStore, q: &Query) -> (String, String, bool) {
    let c = store.select(q).unwrap();
    let brute = BruteForce.select(&store.snapshot(), q).unwrap();
    assert_eq!(c, brute, "policy and brute force disagree");
    (c.variant, c.worker, c.cold)
}

fn ch(v: &str, w: &str, cold: bool) -> (String, String, bool) {
    (v.into(), w.into(), cold)
}

#[test]
fn an_explicit_variant_only_gets_a_worker() {
    let s = store(vec![
        loaded("mid", "w1"),
        loaded("mid", "w2"),
        report("mid", "w1", 10.0, 20.0, 3),
        report("mid", "w2", 10.0, 20.0, 1),
    ]);
    assert_eq!(chose(&s, &named("mid")), ch("mid", "w2", false));
    // Not loaded: the least-utilised worker of its hardware loads it.
    s.record(util("w1", 0.1));
    s.record(util("w2", 0.6));
    s.sync().unwrap();
    assert_eq!(chose(&s, &named("slow")), ch("slow", "w1", true));
    // The only instance overloaded: loaded again on the worker that does not hold it.
    s.record(loaded("slow", "w1"));
    s.record(report("slow", "w1", 12.0, 80.0, 0));
    s.sync().unwrap();
    assert_eq!(chose(&s, &named("slow")), ch("slow", "w2", true));
    let e = s.select(&named("nope")).unwrap_err();
    assert!(e.reason.contains("nope"), "{e:?}");
    // No worker of its hardware is up.
    let e = s.select(&named("gpu")).unwrap_err();
    assert_eq!(e.closest.as_deref(), Some("gpu"));
}

#[test]
fn an_active_match_beats_a_faster_one_to_load() {
    let s = store(vec![loaded("slow", "w1")]);
    assert_eq!(
        chose(&s, &task(Some(100.0), Some(0.7))),
        ch("slow", "w1", false)
    );
    // Two Active matches: the one closest below the SLO; without an SLO the fastest.
    s.record(loaded("mid", "w2"));
    s.sync().unwrap();
    assert_eq!(chose(&s, &task(Some(100.0), None)), ch("slow", "w1", false));
    assert_eq!(chose(&s, &task(Some(50.0), None)), ch("mid", "w2", false));
    assert_eq!(chose(&s, &task(None, None)), ch("mid", "w2", false));
    // The least-loaded instance of the chosen variant.
    s.record(loaded("slow", "w2"));
    s.record(report("slow", "w1", 5.0, 80.0, 4));
    s.record(report("slow", "w2", 5.0, 80.0, 2));
    s.sync().unwrap();
    assert_eq!(chose(&s, &task(Some(100.0), None)), ch("slow", "w2", false));
}

#[test]
fn without_an_active_match_least_load_plus_inference_goes_to_the_least_utilised_worker() {
    let s = store(vec![util("w1", 0.5), util("w2", 0.2)]);
    assert_eq!(chose(&s, &task(Some(100.0), None)), ch("slow", "w2", true));
    assert_eq!(chose(&s, &task(Some(30.0), None)), ch("mid", "w2", true));
    s.record(util("w2", 0.9));
    s.sync().unwrap();
    assert_eq!(chose(&s, &task(Some(30.0), None)), ch("mid", "w1", true));
    assert_eq!(s.metrics().decisions(crate::metrics::DecisionKind::Cold), 3);
}

#[test]
fn overloaded_and_interfered_instances_are_never_chosen() {
    let s = store(vec![
        loaded("slow", "w1"),
        report("slow", "w1", 12.0, 80.0, 0),
        loaded("mid", "w2"),
        report("mid", "w2", 30.0, 31.0, 0),
    ]);
    let snap = s.snapshot();
    let states: Vec<_> = s.states().into_iter().filter(|r| r.1.is_some()).collect();
    assert!(states.contains(&("slow".into(), Some("w1".into()), InstanceState::Overloaded)));
    assert!(states.contains(&("mid".into(), Some("w2".into()), InstanceState::Interfered)));
    drop(snap);
    // slow is the least load + inference match; w1 holds its overloaded instance.
    assert_eq!(chose(&s, &task(Some(100.0), None)), ch("slow", "w2", true));
    assert_eq!(chose(&s, &task(Some(30.0), None)), ch("mid", "w1", true));
}

#[test]
fn no_match_names_the_closest_variant() {
    let s = store(vec![]);
    let e = s.select(&task(None, Some(0.9))).unwrap_err();
    assert_eq!(e.closest.as_deref(), Some("slow"));
    assert!((e.distance.unwrap() - 0.1 / 0.9).abs() < 1e-9);
    // 1 ms: gpu (2 ms, distance 1) is closest, though its hardware is not up.
    let e = s.select(&task(Some(1.0), None)).unwrap_err();
    assert_eq!(e.closest.as_deref(), Some("gpu"));
    assert_eq!(e.distance, Some(1.0));
    // A match whose hardware has no worker: distance 0, the reason says so.
    let e = s.select(&task(Some(3.0), None)).unwrap_err();
    assert_eq!((e.closest.as_deref(), e.distance), (Some("gpu"), Some(0.0)));
    assert!(e.reason.contains("no worker"), "{}", e.reason);
    let e = s
        .select(&Query {
            target: Target::Task("nope".into()),
            ..task(None, None)
        })
        .unwrap_err();
    assert_eq!(e.closest, None);
}

/// A policy of the caller's (the paper's extensibility, §4.1): the Active match with the most
/// headroom left.
struct MostHeadroom;

impl VariantPolicy for MostHeadroom {
    fn select(&self, snapshot: &Snapshot, query: &Query) -> Result<Choice, NoMatch> {
        let Target::Task(task) = &query.target else {
            return PaperPolicy.select(snapshot, query);
        };
        let registry = snapshot.registry();
        let best = registry
            .task(task)
            .iter()
            .filter_map(|id| Some((*id, registry.get(*id)?)))
            .filter(|(_, v)| matches(v, &query.requirements, query.batch))
            .filter_map(|(id, v)| {
                let i = snapshot.instances_of(id).first().filter(|i| i.usable())?;
                Some((v, i, v.profile.saturation_qps - i.qps))
            })
            .max_by(|a, b| a.2.total_cmp(&b.2));
        match best {
            Some((v, i, _)) => Ok(choice(v, &i.worker, false)),
            None => PaperPolicy.select(snapshot, query),
        }
    }
}

#[test]
fn the_policy_is_replaceable() {
    let s = MetadataStore::with(variants(), StateRule::default(), Box::new(MostHeadroom)).unwrap();
    for e in [
        up("w1", "cpu"),
        loaded("slow", "w1"),
        loaded("fast", "w1"),
        report("fast", "w1", 10.0, 5.0, 0),
    ] {
        s.record(e);
    }
    s.sync().unwrap();
    let q = task(Some(100.0), None);
    assert_eq!(s.select(&q).unwrap().variant, "fast");
    assert_eq!(
        PaperPolicy.select(&s.snapshot(), &q).unwrap().variant,
        "slow"
    );
}

fn arb_query() -> impl Strategy<Value = Query> {
    let name = prop::sample::select(vec!["fast", "mid", "slow", "gpu", "other", "nope"]);
    prop_oneof![
        name.prop_map(named),
        (
            prop::option::of(1.0f64..120.0),
            prop::option::of(0.6f64..0.85),
            prop::option::of(0.5f64..2.0),
            1u32..12,
        )
            .prop_map(|(l, a, c, b)| Query {
                target: Target::Task("cls".into()),
                requirements: Requirements {
                    latency_ms: l,
                    min_accuracy: a,
                    max_cost: c,
                },
                batch: b,
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn the_policy_agrees_with_brute_force(
        events in prop::collection::vec(arb_event(&["fast", "mid", "slow", "gpu", "other"], &["w1", "w2", "w3", "g1"]), 0..40),
        queries in prop::collection::vec(arb_query(), 1..20),
    ) {
        let s = MetadataStore::start(variants()).unwrap();
        for e in events {
            s.record(e);
        }
        s.sync().unwrap();
        let snap = s.snapshot();
        for q in &queries {
            prop_assert_eq!(PaperPolicy.select(&snap, q), BruteForce.select(&snap, q), "{:?}", q);
        }
    }
}
