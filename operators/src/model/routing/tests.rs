//! Kairos and round-robin routing: the queue alone (explicit clocks, no sleeping) and inside a
//! [`ReplicaPool`] over scripted replicas (failover, answered once, back-pressure). No test
//! asserts a wall-clock time; pool-level tests use latencies of seconds so that the microseconds
//! a test takes between steps cannot change a decision.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_engine::batch::TensorColumn;
use weir_engine::routing::{KairosRouting, Routing};
use weir_engine::tensor::TensorData;
use weir_kairos::profile::{InstanceType, LatencyTable, ModelProfile, TypeProfile};

use super::*;
use crate::model::replicas::tests::{assert_answered_once, job, replicas, Answers, Scripted};
use crate::model::replicas::{InferenceService, ReplicaPool};

/// Two types, latencies in ms at batch 10 and 100 (every 1-row job is in the batch-10 bucket).
/// `slow` is 4× slower on small jobs but only 3× on the largest, so η_slow = 1/3 and a small job
/// costs 1000 on `fast` and 1333 on `slow`: fast is preferred when both are idle.
fn profile() -> ModelProfile {
    let ty = |name: &str, cost: f64, small: f64, large: f64| TypeProfile {
        instance: InstanceType {
            name: name.into(),
            cost_per_hour: cost,
        },
        latency: LatencyTable::new(vec![(10, small), (100, large)]).unwrap(),
    };
    ModelProfile::new(
        "m",
        10_000.0,
        100,
        vec![
            ty("fast", 1.0, 1_000.0, 2_000.0),
            ty("slow", 0.3, 4_000.0, 6_000.0),
        ],
        Some("fast"),
    )
    .unwrap()
}

fn kairos(qos_ms: f64, types: &[&str], with_profile: bool) -> Routing {
    Routing::Kairos(KairosRouting {
        qos_ms,
        replica_types: types.iter().map(|t| t.to_string()).collect(),
        replica_costs: vec![1.0; types.len()],
        profile: with_profile.then(profile),
        profile_path: None,
        batch_queued_jobs: true,
    })
}

fn pool(replicas: &[&Arc<Scripted>], routing: &Routing) -> ReplicaPool {
    batching_pool(replicas, routing, 1)
}

/// A pool whose jobs may hold up to `max_rows` rows, so Kairos may batch queued 1-row jobs.
fn batching_pool(scripted: &[&Arc<Scripted>], routing: &Routing, max_rows: usize) -> ReplicaPool {
    ReplicaPool::with_routing("m", replicas(scripted), max_rows, routing).unwrap()
}

/// Rows of each call replica `r` holds.
fn held_rows(r: &Scripted) -> Vec<usize> {
    r.held
        .lock()
        .unwrap()
        .iter()
        .map(|(cols, _)| cols[0].len())
        .collect()
}

fn held(r: &Scripted) -> usize {
    r.held.lock().unwrap().len()
}

fn holding(name: &str) -> Arc<Scripted> {
    Scripted::holding(name, 16)
}

/// A Kairos pool at `qos_ms` over a holding `fast` and a holding `slow` replica (in that order),
/// after jobs 0 and 1 were submitted.
fn fast_and_slow_with_two_jobs(
    qos_ms: f64,
) -> (Arc<Scripted>, Arc<Scripted>, ReplicaPool, Answers) {
    let (fast, slow) = (holding("fast"), holding("slow"));
    let p = pool(&[&fast, &slow], &kairos(qos_ms, &["fast", "slow"], true));
    let answers = Answers::default();
    p.try_submit(job(0, &answers)).unwrap();
    p.try_submit(job(1, &answers)).unwrap();
    (fast, slow, p, answers)
}

#[test]
fn kairos_prefers_the_fast_type_when_both_are_idle() {
    let (fast, slow) = (holding("fast"), holding("slow"));
    // Slow listed first, so a pool-order tie-break would pick it.
    let p = pool(&[&slow, &fast], &kairos(10_000.0, &["slow", "fast"], true));
    let answers = Answers::default();
    p.try_submit(job(0, &answers)).unwrap();
    assert_eq!((held(&fast), held(&slow)), (1, 0));
    fast.release_held();
    assert_answered_once(&answers, 1);
}

#[test]
fn kairos_uses_the_slow_type_only_when_it_still_meets_qos() {
    // QoS 3.5 s: slow takes 4 s (a violation) while fast, busy for ≤ 1 s more, finishes in ≤ 2 s.
    let (fast, slow, p, answers) = fast_and_slow_with_two_jobs(3_500.0);
    assert_eq!((held(&fast), held(&slow)), (1, 0), "job 1 waits for fast");
    fast.release_held();
    assert_eq!((held(&fast), held(&slow)), (1, 0), "job 1 went to fast");
    fast.release_held();
    assert_answered_once(&answers, 2);
    assert_eq!(p.replica_states()[1].3, 0, "slow never used");

    // QoS 10 s: slow meets it, so the second job goes to slow at once instead of waiting.
    let (fast, slow, _p, answers) = fast_and_slow_with_two_jobs(10_000.0);
    assert_eq!((held(&fast), held(&slow)), (1, 1));
    fast.release_held();
    slow.release_held();
    assert_answered_once(&answers, 2);
}

#[test]
fn kairos_gives_each_replica_one_job_at_a_time_and_pushes_back_when_full() {
    let (a, b) = (holding("a"), holding("b"));
    let p = pool(&[&a, &b], &kairos(10_000.0, &["fast", "fast"], true));
    let answers = Answers::default();
    let capacity = super::KAIROS_QUEUE_PER_REPLICA * 2;
    // Two in flight, `capacity` queued, then refused.
    for i in 0..(2 + capacity) as i64 {
        assert!(p.try_submit(job(i, &answers)).is_ok(), "job {i}");
    }
    assert_eq!((held(&a), held(&b)), (1, 1));
    let refused = p.try_submit(job(99, &answers)).unwrap_err();
    drop(refused);
    // Each release frees one replica, which takes the next queued job; drain them all.
    for _ in 0..(2 + capacity) {
        if held(&a) > 0 {
            a.release_held();
        } else {
            b.release_held();
        }
        assert!(held(&a) <= 1 && held(&b) <= 1);
    }
    assert_answered_once(&answers, (2 + capacity) as i64);
}

#[test]
fn kairos_redispatches_the_job_of_a_dead_replica() {
    let (fast, slow, p, answers) = fast_and_slow_with_two_jobs(10_000.0);
    assert_eq!((held(&fast), held(&slow)), (1, 1));
    // fast dies with job 0 in flight: it goes back to the head of the queue, then to slow
    // once slow is free (slow is the only one alive).
    fast.alive.store(false, Ordering::SeqCst);
    fast.fail_held();
    assert_eq!(held(&slow), 1);
    slow.release_held();
    assert_eq!(held(&slow), 1, "the re-dispatched job");
    slow.release_held();
    assert_answered_once(&answers, 2);
    assert!(answers.lock().unwrap().iter().all(|(id, r)| r == &Ok(*id)));
    assert_eq!(p.stats().redispatched, 1);
    // Everything dead: queued and new jobs fail with a clear error, once.
    slow.alive.store(false, Ordering::SeqCst);
    p.try_submit(job(2, &answers)).unwrap();
    assert_answered_once(&answers, 3);
    let got = answers.lock().unwrap();
    assert!(got[2]
        .1
        .as_ref()
        .unwrap_err()
        .contains("no replica is alive"));
}

#[test]
fn kairos_answers_every_job_once_under_random_releases_and_failures() {
    random_walk(1);
}

#[test]
fn kairos_answers_every_job_once_under_random_releases_and_failures_with_batching() {
    random_walk(4);
}

/// A seeded walk: submit, release, fail, kill and revive replicas at random; every job must be
/// answered exactly once with its own rows, and the pool never gives a replica two calls (with
/// `max_rows` > 1 a call may batch several jobs, never more rows than that).
fn random_walk(max_rows: usize) {
    let replicas: Vec<Arc<Scripted>> = ["f1", "f2", "s1"].iter().map(|n| holding(n)).collect();
    let refs: Vec<&Arc<Scripted>> = replicas.iter().collect();
    let p = batching_pool(
        &refs,
        &kairos(10_000.0, &["fast", "fast", "slow"], true),
        max_rows,
    );
    let answers = Answers::default();
    let mut pending: Vec<crate::model::Job> = Vec::new();
    let mut rng: u64 = 7;
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) as usize
    };
    let mut submitted = 0i64;
    for _ in 0..2_000 {
        let r = &replicas[next() % replicas.len()];
        match next() % 10 {
            0..=3 => {
                let j = pending.pop().unwrap_or_else(|| {
                    submitted += 1;
                    job(submitted - 1, &answers)
                });
                if let Err(j) = p.try_submit(j) {
                    pending.push(j);
                }
            }
            4..=6 => r.release_held(),
            7 => r.fail_held(),
            8 => {
                let alive = r.alive.load(Ordering::SeqCst);
                // Keep one replica alive so jobs are not failed for want of any.
                if !alive
                    || replicas
                        .iter()
                        .filter(|x| x.alive.load(Ordering::SeqCst))
                        .count()
                        > 1
                {
                    r.alive.store(!alive, Ordering::SeqCst);
                    if alive {
                        r.fail_held();
                    } else if let Some(revive) = r.revive.lock().unwrap().as_ref() {
                        revive();
                    }
                }
            }
            _ => {}
        }
        assert!(replicas.iter().all(|r| held(r) <= 1));
        assert!(replicas
            .iter()
            .all(|r| held_rows(r).iter().all(|&n| n <= max_rows)));
    }
    // Drain: everyone alive, release until all answered.
    for r in &replicas {
        r.alive.store(true, Ordering::SeqCst);
        if let Some(revive) = r.revive.lock().unwrap().as_ref() {
            revive();
        }
    }
    for j in pending.drain(..) {
        let mut j = j;
        loop {
            match p.try_submit(j) {
                Ok(()) => break,
                Err(back) => {
                    j = back;
                    replicas.iter().for_each(|r| r.release_held());
                }
            }
        }
    }
    for _ in 0..10_000 {
        if answers.lock().unwrap().len() as i64 == submitted {
            break;
        }
        replicas.iter().for_each(|r| r.release_held());
    }
    assert_answered_once(&answers, submitted);
    // Own rows back, or (a job failed 8 times in a row by the walk) the give-up error.
    assert!(answers.lock().unwrap().iter().all(|(id, r)| match r {
        Ok(v) => v == id,
        Err(e) => e.contains("gave up after"),
    }));
}

#[test]
fn kairos_batches_queued_jobs_for_an_idle_replica_and_splits_the_answer() {
    // Every batch of ≤ 10 rows takes 1 s on fast (one table bucket): queued jobs join for free.
    let fast = holding("fast");
    let p = batching_pool(&[&fast], &kairos(10_000.0, &["fast"], true), 4);
    let answers = Answers::default();
    p.try_submit(job(0, &answers)).unwrap();
    assert_eq!(held_rows(&fast), vec![1], "alone: nothing else was queued");
    for i in 1..=6 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_eq!(held_rows(&fast), vec![1], "one call at a time");
    fast.release_held();
    assert_eq!(
        held_rows(&fast),
        vec![4],
        "jobs 1-4 in one call of ≤ 4 rows"
    );
    fast.release_held();
    assert_eq!(held_rows(&fast), vec![2], "jobs 5 and 6");
    fast.release_held();
    assert_answered_once(&answers, 7);
    assert!(answers.lock().unwrap().iter().all(|(id, r)| r == &Ok(*id)));
    assert_eq!(p.stats().dispatched, 7, "jobs, not calls");
}

#[test]
fn kairos_without_batch_queued_jobs_sends_one_job_per_call() {
    let fast = holding("fast");
    let mut routing = kairos(10_000.0, &["fast"], true);
    if let Routing::Kairos(k) = &mut routing {
        k.batch_queued_jobs = false;
    }
    let p = batching_pool(&[&fast], &routing, 4);
    let answers = Answers::default();
    for i in 0..3 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    for _ in 0..3 {
        assert_eq!(held_rows(&fast), vec![1], "one queued job per call");
        fast.release_held();
    }
    assert_answered_once(&answers, 3);
}

#[test]
fn kairos_requeues_every_job_of_a_failed_batch_and_answers_each_once() {
    let (a, b) = (holding("a"), holding("b"));
    let p = batching_pool(&[&a, &b], &kairos(10_000.0, &["fast", "fast"], true), 8);
    let answers = Answers::default();
    for i in 0..8 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_eq!((held_rows(&a), held_rows(&b)), (vec![1], vec![1]));
    // a dies with job 0: it goes back to the head of the queue, and b, once free, takes it with
    // the six queued behind it in one call.
    a.alive.store(false, Ordering::SeqCst);
    a.fail_held();
    b.release_held();
    assert_eq!(held_rows(&b), vec![7]);
    // That call fails too (b stays alive): all seven are queued again and re-sent together.
    b.fail_held();
    assert_eq!(held_rows(&b), vec![7]);
    assert!(
        answers.lock().unwrap().len() == 1,
        "only job 1 answered so far"
    );
    b.release_held();
    assert_answered_once(&answers, 8);
    assert!(answers.lock().unwrap().iter().all(|(id, r)| r == &Ok(*id)));
    assert_eq!(p.stats().redispatched, 1 + 7);
}

#[test]
fn kairos_does_not_batch_past_the_qos_target() {
    // fast takes 1 s for ≤ 10 rows and 1.11 s for 11-20 (interpolated between the 10- and
    // 100-row points); with a 1.1 s target (1.078 s with γ) an 11th row would predict a miss, so
    // the rest wait for the next call.
    let fast = holding("fast");
    let p = batching_pool(&[&fast], &kairos(1_100.0, &["fast"], true), 16);
    let answers = Answers::default();
    for i in 0..14 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_eq!(held_rows(&fast), vec![1]);
    fast.release_held();
    assert_eq!(held_rows(&fast), vec![10]);
    fast.release_held();
    assert_eq!(held_rows(&fast), vec![3]);
    fast.release_held();
    assert_answered_once(&answers, 14);
}

#[test]
fn jobs_of_different_shapes_join_as_rows_of_their_own_shapes() {
    let a = TensorColumn::from_data("x", vec![2], 1, TensorData::F32(vec![1.0, 2.0])).unwrap();
    let b = TensorColumn::from_data("x", vec![2], 2, TensorData::F32(vec![3.0; 4])).unwrap();
    let c = TensorColumn::from_data("x", vec![3], 1, TensorData::F32(vec![0.0; 3])).unwrap();
    let joined = concat_jobs(&[std::slice::from_ref(&a), std::slice::from_ref(&b)]).unwrap();
    assert_eq!(joined[0].len(), 3);
    assert_eq!(
        joined[0].f32_values().unwrap(),
        &[1.0, 2.0, 3.0, 3.0, 3.0, 3.0]
    );
    let parts = split_rows(&joined, &[1, 2]).unwrap();
    assert_eq!(parts[1][0].f32_values().unwrap(), &[3.0; 4]);
    // Rows of other shapes join as a ragged column: the executor runs them one shape at a time.
    let mixed = concat_jobs(&[std::slice::from_ref(&a), std::slice::from_ref(&c)]).unwrap();
    assert_eq!(mixed[0].uniform_shape(), None);
    assert_eq!(mixed[0].row_shape(1), vec![3]);
    let i = TensorColumn::from_data("x", vec![2], 1, TensorData::I64(vec![1, 2])).unwrap();
    assert!(concat_jobs(&[std::slice::from_ref(&a), std::slice::from_ref(&i)]).is_err());
    assert!(split_rows(&joined, &[1, 1]).is_err());
}

#[test]
fn round_robin_takes_live_replicas_in_turn() {
    let (a, b, c) = (holding("a"), holding("b"), holding("c"));
    let p = pool(&[&a, &b, &c], &Routing::RoundRobin);
    let answers = Answers::default();
    for i in 0..6 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_eq!((held(&a), held(&b), held(&c)), (2, 2, 2));
    // A dead replica is skipped.
    b.alive.store(false, Ordering::SeqCst);
    for i in 6..10 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_eq!((held(&a), held(&b), held(&c)), (4, 2, 4));
    for r in [&a, &b, &c] {
        r.release_held();
    }
    assert_answered_once(&answers, 10);
}

/// The queue alone, with an explicit clock: latencies learned from completions, η from them.
#[test]
fn learned_latency_drives_eta_and_qos_decisions() {
    let routing = KairosRouting {
        qos_ms: 30.0,
        replica_types: vec!["fast".into(), "slow".into()],
        replica_costs: vec![1.0, 0.3],
        profile: None,
        profile_path: None,
        batch_queued_jobs: true,
    };
    let mut q: KairosQueue<u32> = KairosQueue::new(&routing, 2, 1).unwrap();
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let both = [true, true];
    // Nothing known: both types are tried, one job each.
    q.push(0, 1, at(0));
    q.push(1, 1, at(0));
    let mut got = q.round(at(0), &both);
    got.sort_by_key(|g| g.1);
    assert!(got.iter().all(|g| g.0.len() == 1));
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), vec![0, 1]);
    assert!(q.is_busy(0) && q.is_busy(1));
    q.finished(0, at(10), true);
    q.finished(1, at(40), true);
    assert_eq!(q.eta(), &[1.0, 0.25]);
    assert!((q.predicted_ms(1, 1) - 40.0).abs() < 1e-9);
    // Learned: slow takes 40 ms > 0.98 × 30, so a job waits for busy fast rather than go to slow.
    q.push(2, 1, at(50));
    assert_eq!(q.round(at(50), &both), vec![(vec![2], 0)]);
    q.push(3, 1, at(51));
    assert!(q.round(at(51), &both).is_empty());
    assert_eq!(q.len(), 1);
    q.finished(0, at(60), true);
    assert_eq!(q.round(at(60), &both), vec![(vec![3], 0)]);
    // A replica that is not usable (dead, set aside) is left out of the matching: with only slow
    // usable, the job goes there even though it will miss QoS (served late, never dropped).
    q.finished(0, at(70), true);
    q.push(4, 1, at(70));
    assert_eq!(q.round(at(70), &[false, true]), vec![(vec![4], 1)]);
}

#[test]
fn a_routing_that_does_not_match_the_pool_is_refused() {
    let r = kairos(100.0, &["fast"], true);
    let Routing::Kairos(k) = &r else {
        unreachable!()
    };
    assert!(matches!(
        KairosQueue::<u32>::new(k, 2, 1),
        Err(RoutingError::ReplicaCount { .. })
    ));
    let r = kairos(100.0, &["fast", "gpu"], true);
    let Routing::Kairos(k) = &r else {
        unreachable!()
    };
    assert!(matches!(
        KairosQueue::<u32>::new(k, 2, 1),
        Err(RoutingError::UnknownType(t)) if t == "gpu"
    ));
}
