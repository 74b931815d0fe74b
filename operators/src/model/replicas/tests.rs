//! Tests of the replica pool against scripted replicas (answer, be unavailable, or hold jobs);
//! the routing tests reuse the scripted replica and the job helpers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use weir_engine::tensor::TensorData;

use super::*;

/// A replica whose behaviour the test scripts: answer (echo), be unavailable, or hold jobs.
pub(crate) struct Scripted {
    pub(crate) name: String,
    pub(crate) alive: AtomicBool,
    pub(crate) fail: AtomicBool,
    pub(crate) hold: AtomicBool,
    pub(crate) held: Mutex<Vec<(Vec<TensorColumn>, ReplicaDone)>>,
    pub(crate) capacity: usize,
    pub(crate) revive: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
    /// The deadline of every dispatch, in order.
    pub(crate) deadlines: Mutex<Vec<Option<Instant>>>,
}

impl Scripted {
    pub(crate) fn new(name: &str, capacity: usize) -> Arc<Self> {
        Arc::new(Scripted {
            name: name.into(),
            alive: AtomicBool::new(true),
            fail: AtomicBool::new(false),
            hold: AtomicBool::new(false),
            held: Mutex::new(Vec::new()),
            capacity,
            revive: Mutex::new(None),
            deadlines: Mutex::new(Vec::new()),
        })
    }

    /// A replica that holds every job it is given until [`Scripted::release_held`].
    pub(crate) fn holding(name: &str, capacity: usize) -> Arc<Self> {
        let r = Scripted::new(name, capacity);
        r.hold.store(true, Ordering::SeqCst);
        r
    }

    pub(crate) fn release_held(&self) {
        let held: Vec<_> = self.held.lock().unwrap().drain(..).collect();
        for (inputs, done) in held {
            done(Ok(inputs));
        }
    }

    pub(crate) fn fail_held(&self) {
        let held: Vec<_> = self.held.lock().unwrap().drain(..).collect();
        for (_, done) in held {
            done(Err(ReplicaError::Unavailable("died".into())));
        }
    }
}

impl Replica for Scripted {
    fn name(&self) -> &str {
        &self.name
    }
    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn dispatch(&self, inputs: Vec<TensorColumn>, timing: super::JobTiming, done: ReplicaDone) {
        self.deadlines.lock().unwrap().push(timing.1);
        if self.fail.load(Ordering::SeqCst) {
            done(Err(ReplicaError::Unavailable("scripted failure".into())));
        } else if self.hold.load(Ordering::SeqCst) {
            self.held.lock().unwrap().push((inputs, done));
        } else {
            done(Ok(inputs));
        }
    }
    fn on_revival(&self, callback: Box<dyn Fn() + Send + Sync>) {
        *self.revive.lock().unwrap() = Some(callback);
    }
}

pub(crate) type Answers = Arc<Mutex<Vec<(i64, Result<i64, String>)>>>;

pub(crate) fn job(id: i64, answers: &Answers) -> Job {
    let col = TensorColumn::from_data("x", vec![1], 1, TensorData::I64(vec![id])).unwrap();
    let answers = Arc::clone(answers);
    Job {
        inputs: vec![col],
        enqueued_at: Instant::now(),
        deadline: None,
        trace: None,
        done: Box::new(move |r| {
            let r = r
                .map(|c| c[0].i64_values().unwrap()[0])
                .map_err(|e| e.to_string());
            answers.lock().unwrap().push((id, r));
        }),
    }
}

/// `scripted` as the replicas of a pool.
pub(crate) fn replicas(scripted: &[&Arc<Scripted>]) -> Vec<Arc<dyn Replica>> {
    scripted
        .iter()
        .map(|r| Arc::clone(r) as Arc<dyn Replica>)
        .collect()
}

fn pool(scripted: &[&Arc<Scripted>]) -> ReplicaPool {
    ReplicaPool::new("m", replicas(scripted), 1)
}

pub(crate) fn assert_answered_once(answers: &Answers, n: i64) {
    let mut ids: Vec<i64> = answers.lock().unwrap().iter().map(|a| a.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
}

/// A least-outstanding pool over holding replicas `a` and `b` (room for 10 each), after jobs
/// `0..n` were taken.
fn two_holding_with_jobs(n: i64) -> (Arc<Scripted>, Arc<Scripted>, ReplicaPool, Answers) {
    let (a, b) = (Scripted::holding("a", 10), Scripted::holding("b", 10));
    let p = pool(&[&a, &b]);
    let answers = Answers::default();
    for i in 0..n {
        assert!(p.try_submit(job(i, &answers)).is_ok(), "job {i}");
    }
    (a, b, p, answers)
}

/// A least-outstanding pool over answering replicas `a`, failing every job, and `b`, after jobs
/// `0..10` were submitted.
fn a_failing_beside_b_after_ten_jobs() -> (Arc<Scripted>, Arc<Scripted>, ReplicaPool, Answers) {
    let (a, b) = (Scripted::new("a", 10), Scripted::new("b", 10));
    a.fail.store(true, Ordering::SeqCst);
    let p = pool(&[&a, &b]);
    let answers = Answers::default();
    for i in 0..10 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    (a, b, p, answers)
}

#[test]
fn least_outstanding_spreads_held_jobs_evenly() {
    let (a, b, _p, answers) = two_holding_with_jobs(6);
    assert_eq!(a.held.lock().unwrap().len(), 3);
    assert_eq!(b.held.lock().unwrap().len(), 3);
    a.release_held();
    b.release_held();
    assert_answered_once(&answers, 6);
}

#[test]
fn full_replicas_push_back() {
    let a = Scripted::holding("a", 2);
    let p = pool(&[&a]);
    let answers = Answers::default();
    assert!(p.try_submit(job(0, &answers)).is_ok());
    assert!(p.try_submit(job(1, &answers)).is_ok());
    let refused = p.try_submit(job(2, &answers)).unwrap_err();
    a.release_held();
    assert!(p.try_submit(refused).is_ok());
    a.release_held();
    assert_answered_once(&answers, 3);
}

#[test]
fn jobs_of_a_dead_replica_are_redispatched_and_answered_once() {
    let (a, b, p, answers) = two_holding_with_jobs(8);
    // `a` dies with its jobs in flight: they move to `b`.
    a.alive.store(false, Ordering::SeqCst);
    a.fail_held();
    assert_eq!(b.held.lock().unwrap().len(), 8);
    b.release_held();
    assert_answered_once(&answers, 8);
    assert!(answers.lock().unwrap().iter().all(|(id, r)| r == &Ok(*id)));
    let stats = p.stats();
    assert_eq!(stats.redispatched, 4);
    assert_eq!(stats.failed, 0);
}

#[test]
fn no_live_replica_fails_with_a_clear_error() {
    let a = Scripted::new("a", 10);
    a.alive.store(false, Ordering::SeqCst);
    let p = pool(&[&a]);
    let answers = Answers::default();
    p.try_submit(job(0, &answers)).unwrap();
    let got = answers.lock().unwrap();
    let err = got[0].1.as_ref().unwrap_err();
    assert!(err.contains("no replica is alive"), "{err}");
}

#[test]
fn a_failing_replica_is_set_aside_then_revived() {
    let (a, _b, p, answers) = a_failing_beside_b_after_ten_jobs();
    assert_answered_once(&answers, 10);
    // After FAILURES_BEFORE_DOWN failures `a` is skipped: it saw few dispatches.
    let states = p.replica_states();
    assert!(
        states[0].3 <= u64::from(FAILURES_BEFORE_DOWN) + 1,
        "{states:?}"
    );
    // Revival clears the set-aside state; `a` takes work again.
    a.fail.store(false, Ordering::SeqCst);
    (a.revive.lock().unwrap().as_ref().unwrap())();
    let before = p.replica_states()[0].3;
    for i in 10..20 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert!(p.replica_states()[0].3 > before);
}

#[test]
fn a_replica_still_failing_after_its_cool_down_is_set_aside_again_at_once() {
    let (_a, _b, p, answers) = a_failing_beside_b_after_ten_jobs();
    std::thread::sleep(DOWN_COOLDOWN + Duration::from_millis(50));
    let before = p.replica_states()[0].3;
    for i in 10..40 {
        p.try_submit(job(i, &answers)).unwrap();
    }
    assert_answered_once(&answers, 40);
    let failed: Vec<_> = answers
        .lock()
        .unwrap()
        .iter()
        .filter(|a| a.1.is_err())
        .cloned()
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    // One more failure after the cool-down sets `a` aside again: it takes no more jobs.
    let after = p.replica_states()[0].3;
    assert_eq!(after - before, 1, "{:?}", p.replica_states());
}

#[test]
fn model_errors_are_answered_not_retried() {
    struct Broken;
    impl Replica for Broken {
        fn name(&self) -> &str {
            "broken"
        }
        fn is_alive(&self) -> bool {
            true
        }
        fn capacity(&self) -> usize {
            4
        }
        fn dispatch(&self, _: Vec<TensorColumn>, _: super::JobTiming, done: ReplicaDone) {
            done(Err(ReplicaError::Failed(ExecError::Inference {
                node: "m".into(),
                message: "bad rows".into(),
            })));
        }
    }
    let p = ReplicaPool::new("m", vec![Arc::new(Broken)], 1);
    let answers = Answers::default();
    p.try_submit(job(0, &answers)).unwrap();
    assert!(answers.lock().unwrap()[0]
        .1
        .as_ref()
        .unwrap_err()
        .contains("bad rows"));
    assert_eq!(p.stats().dispatched, 1);
}

#[test]
fn a_job_is_sent_with_its_deadline_and_not_sent_again_once_it_passed() {
    let (a, b) = (Scripted::holding("a", 10), Scripted::holding("b", 10));
    let p = pool(&[&a, &b]);
    let answers = Answers::default();
    let soon = Instant::now() + Duration::from_millis(20);
    let later = Instant::now() + Duration::from_secs(600);
    for (id, deadline) in [(0, Some(soon)), (1, Some(later))] {
        let j = Job {
            deadline,
            trace: None,
            ..job(id, &answers)
        };
        assert!(p.try_submit(j).is_ok());
    }
    assert_eq!(*a.deadlines.lock().unwrap(), vec![Some(soon)]);
    assert_eq!(*b.deadlines.lock().unwrap(), vec![Some(later)]);
    // `a` dies after job 0's deadline: it is answered expired, not sent to `b`.
    std::thread::sleep(Duration::from_millis(30));
    a.alive.store(false, Ordering::SeqCst);
    a.fail_held();
    assert_eq!(b.deadlines.lock().unwrap().len(), 1);
    b.release_held();
    assert_answered_once(&answers, 2);
    let got = answers.lock().unwrap();
    let expired = got.iter().find(|(id, _)| *id == 0).unwrap();
    assert!(
        expired
            .1
            .as_ref()
            .is_err_and(|e| e.contains("deadline passed")),
        "{expired:?}"
    );
    assert!(got.iter().any(|(id, r)| *id == 1 && r == &Ok(1)));
}
