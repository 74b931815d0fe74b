//! Live switching on real ONNX Runtime (`constant_batch1.onnx`: y = 2x + 1, one row per call),
//! from `scripts/setup.sh`'s `.weir/`.

use std::collections::HashMap;
use std::sync::Mutex;

use weir_engine::tensor::TensorData;

use super::sessions::idle_gap;
use super::*;

fn model() -> std::path::PathBuf {
    crate::model::test_model("constant_batch1.onnx")
}

fn config(queue_capacity: usize) -> ExecutorConfig {
    ExecutorConfig {
        node: "double".into(),
        path: model(),
        call: weir_engine::validate::CallShape::PerRequest,
        max_batch: 1,
        max_delay: Duration::ZERO,
        wait: weir_engine::spec::BatchWait::WhenBusy,
        grow: weir_engine::spec::BatchGrow::WhileCheaper,
        instances: 1,
        intra_op_threads: 1,
        queue_capacity,
        spinning: false,
        pin_cores_from: None,
        inputs: vec!["x".into()],
        outputs: vec![("y".into(), DType::F32)],
        pad: None,
        timeout: None,
        device: weir_engine::spec::Device::Cpu,
        graph_level: weir_engine::spec::GraphLevel::All,
        warmup: Vec::new(),
    }
}

/// A switchable executor over [`configs`] with a queue of `queue_capacity`, starting at `initial`.
fn switchable(queue_capacity: usize, initial: Config) -> ModelExecutor {
    let runtime = OrtRuntime::get().unwrap();
    ModelExecutor::start_switchable(&runtime, config(queue_capacity), &configs(), initial).unwrap()
}

fn configs() -> Vec<Config> {
    vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)]
}

type Answers = Arc<Mutex<HashMap<u64, Vec<Result<Vec<f32>, String>>>>>;

fn job(id: u64, answers: &Answers) -> Job {
    let x = [id as f32, 1.0, -2.0, 0.5];
    let col = TensorColumn::from_data("x", vec![4], 1, TensorData::F32(x.to_vec())).unwrap();
    let answers = Arc::clone(answers);
    Job {
        inputs: vec![col],
        enqueued_at: Instant::now(),
        deadline: None,
        trace: None,
        done: Box::new(move |r| {
            let r = r
                .map(|c| c[0].f32_values().unwrap().to_vec())
                .map_err(|e| e.to_string());
            answers.lock().unwrap().entry(id).or_default().push(r);
        }),
    }
}

/// Submits `job` until the queue takes it (the test's back-pressure).
fn submit(executor: &ModelExecutor, mut job: Job) {
    loop {
        match executor.try_submit(job) {
            Ok(()) => return,
            Err(j) => {
                job = j;
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }
}

fn wait_for(answers: &Answers, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while answers.lock().unwrap().len() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn assert_each_answered_once_right(answers: &Answers, n: u64) {
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len() as u64, n, "jobs answered");
    for id in 0..n {
        let got = answers
            .get(&id)
            .unwrap_or_else(|| panic!("job {id} unanswered"));
        assert_eq!(got.len(), 1, "job {id} answered {} times", got.len());
        let y = got[0].as_ref().unwrap_or_else(|e| panic!("job {id}: {e}"));
        assert_eq!(y, &[2.0 * id as f32 + 1.0, 3.0, -3.0, 2.0], "job {id}");
    }
}

#[test]
fn switching_while_submitting_answers_every_job_once() {
    let executor = Arc::new(switchable(16, Config::new(1, 2)));
    let answers: Answers = Arc::default();
    let (producers, per_producer) = (4u64, 150u64);
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let (executor, answers) = (Arc::clone(&executor), Arc::clone(&answers));
            std::thread::spawn(move || {
                for k in 0..per_producer {
                    submit(&executor, job(p * per_producer + k, &answers));
                    if k % 4 == 0 {
                        std::thread::sleep(Duration::from_micros(300));
                    }
                }
            })
        })
        .collect();
    // Switch through every configuration, repeatedly, until the producers are done (and at
    // least 40 times).
    let cycle = [
        Config::new(2, 1),
        Config::new(1, 1),
        Config::new(1, 2),
        Config::new(2, 1),
        Config::new(1, 2),
    ];
    let mut switches = 0;
    let mut k = 0;
    while k < 40 || handles.iter().any(|h| !h.is_finished()) {
        let c = cycle[k % cycle.len()];
        if executor.set_parallelism(c.concurrency, c.threads).unwrap() {
            switches += 1;
        }
        k += 1;
        std::thread::sleep(Duration::from_micros(500));
    }
    for h in handles {
        h.join().unwrap();
    }
    wait_for(&answers, (producers * per_producer) as usize);
    assert_each_answered_once_right(&answers, producers * per_producer);
    let p = executor.parallelism().unwrap();
    assert_eq!(p.switches, switches);
    assert_eq!(executor.stats().rows, producers * per_producer);
    assert!(matches!(
        executor.set_parallelism(2, 2),
        Err(ParallelismError::Unknown { .. })
    ));
    // Nothing more arrives after the executor is dropped, and nothing is answered twice.
    drop(executor);
    assert_each_answered_once_right(&answers, producers * per_producer);
}

#[test]
fn shrinking_concurrency_strands_no_queued_job() {
    let executor = switchable(256, Config::new(2, 1));
    let answers: Answers = Arc::default();
    let n = 200;
    // Fill the queue, then drop to one request at once while it drains: thread 1 parks, thread
    // 0 takes everything that was queued.
    for id in 0..n {
        submit(&executor, job(id, &answers));
    }
    assert!(executor.set_parallelism(1, 1).unwrap());
    wait_for(&answers, n as usize);
    assert_each_answered_once_right(&answers, n);
    // Up again and down to the 2-thread session: still answered, with the right outputs.
    assert!(executor.set_parallelism(2, 1).unwrap());
    assert!(executor.set_parallelism(1, 2).unwrap());
    for id in n..2 * n {
        submit(&executor, job(id, &answers));
    }
    wait_for(&answers, 2 * n as usize);
    assert_each_answered_once_right(&answers, 2 * n);
    // Dropping with jobs queued answers them all before the threads stop.
    for id in 2 * n..3 * n {
        submit(&executor, job(id, &answers));
    }
    drop(executor);
    assert_each_answered_once_right(&answers, 3 * n);
}

#[test]
fn switchable_sessions_are_warmed_at_start_without_counting_as_served_calls() {
    let executor = switchable(4, Config::new(1, 1));
    // The warm-up calls ran on the sessions directly: the load counters (and SERF's service
    // samples) only ever see jobs.
    let stats = executor.stats();
    assert_eq!((stats.runs, stats.rows, stats.busy), (0, 0, Duration::ZERO));
    assert_eq!(executor.parallelism().map(|p| p.switches), Some(0));
    let answers: Answers = Arc::default();
    submit(&executor, job(0, &answers));
    wait_for(&answers, 1);
    assert_each_answered_once_right(&answers, 1);
    assert_eq!(executor.stats().runs, 1);
}

#[test]
fn the_time_at_the_node_counts_from_queued_to_answered() {
    let executor = switchable(4, Config::new(1, 1));
    let answers: Answers = Arc::default();
    // Three jobs that were queued 50 ms before they reached the executor (as if they had waited).
    let waited = Duration::from_millis(50);
    for id in 0..3 {
        let queued_earlier = Job {
            enqueued_at: Instant::now() - waited,
            ..job(id, &answers)
        };
        submit(&executor, queued_earlier);
    }
    wait_for(&answers, 3);
    assert_each_answered_once_right(&answers, 3);
    let stats = executor.stats();
    assert_eq!(stats.jobs_answered, 3);
    assert!(stats.sojourn >= 3 * waited, "{:?}", stats.sojourn);
    // The calls are part of each job's time at the node.
    assert!(stats.sojourn >= 3 * waited + stats.busy, "{stats:?}");
}

/// The CPUs session thread `name` of this process may run on (`Cpus_allowed_list`).
#[cfg(target_os = "linux")]
fn allowed_cpus_of_thread(name: &str) -> Option<String> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|task| {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        (comm.trim() == name).then_some(())?;
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
    })
}

#[cfg(target_os = "linux")]
#[test]
fn pinned_session_threads_run_on_their_cores_and_answer_every_job_once() {
    use crate::model::pinning::CorePins;
    let runtime = OrtRuntime::get().unwrap();
    let pins = CorePins::from_first(0).unwrap();
    let pinned = |node: &str| ExecutorConfig {
        node: node.into(),
        pin_cores_from: Some(0),
        ..config(64)
    };
    // Fixed (2, 1): thread i on the process's i-th CPU.
    let fixed = ModelExecutor::start(
        &runtime,
        ExecutorConfig {
            instances: 2,
            ..pinned("pinfix")
        },
    )
    .unwrap();
    let answers: Answers = Arc::default();
    for id in 0..50 {
        submit(&fixed, job(id, &answers));
    }
    wait_for(&answers, 50);
    assert_each_answered_once_right(&answers, 50);
    for i in 0..2 {
        assert_eq!(
            allowed_cpus_of_thread(&format!("ort-pinfix-{i}")),
            Some(pins.caller(i, 1).to_string()),
            "thread {i}"
        );
    }
    drop(fixed);
    // Switchable: thread 0 stays on its core whatever t is; jobs across switches all answered.
    let switchable =
        ModelExecutor::start_switchable(&runtime, pinned("pinsw"), &configs(), Config::new(1, 2))
            .unwrap();
    let answers: Answers = Arc::default();
    for id in 0..300 {
        submit(&switchable, job(id, &answers));
        if id % 50 == 49 {
            let c = configs()[(id as usize / 50) % 3];
            switchable
                .set_parallelism(c.concurrency, c.threads)
                .unwrap();
        }
    }
    wait_for(&answers, 300);
    assert_each_answered_once_right(&answers, 300);
    assert_eq!(
        allowed_cpus_of_thread("ort-pinsw-0"),
        Some(pins.caller(0, 2).to_string())
    );
}

#[test]
fn a_first_core_beyond_the_process_cpus_fails_at_start_saying_so() {
    let runtime = OrtRuntime::get().unwrap();
    let err = ModelExecutor::start(
        &runtime,
        ExecutorConfig {
            pin_cores_from: Some(100_000),
            ..config(4)
        },
    )
    .map(drop)
    .unwrap_err();
    assert!(err.to_string().contains("pin_cores_from 100000"), "{err}");
}

#[test]
fn only_a_one_row_call_after_an_earlier_one_has_an_idle_gap() {
    let before = Instant::now();
    assert!(idle_gap(Some(before), 1).is_some());
    assert_eq!(idle_gap(None, 1), None, "the thread's first call");
    assert_eq!(
        idle_gap(Some(before), 2),
        None,
        "of rows run one after the other only the first started after the gap"
    );
}

#[test]
fn call_durations_are_kept_only_between_record_and_take() {
    let runtime = OrtRuntime::get().unwrap();
    let executor = ModelExecutor::start(&runtime, config(16)).unwrap();
    let answers: Answers = Arc::default();
    submit(&executor, job(0, &answers));
    wait_for(&answers, 1);
    executor.load_stats().record_calls();
    for id in 1..11 {
        submit(&executor, job(id, &answers));
    }
    wait_for(&answers, 11);
    let RecordedCalls { calls, arrivals } = executor.load_stats().take_calls();
    assert_eq!(calls.len(), 10, "one record per call while recording");
    assert_eq!(arrivals.len(), 10, "one arrival per job answered");
    assert!(arrivals.windows(2).all(|w| w[0] <= w[1]), "{arrivals:?}");
    assert!(
        calls.iter().all(|c| c.duration > Duration::ZERO),
        "{calls:?}"
    );
    assert!(
        calls.windows(2).all(|w| w[0].ended_at <= w[1].ended_at),
        "kept in the order the calls ended: {calls:?}"
    );
    assert!(
        calls.iter().all(|c| c.idle_before.is_some()),
        "the one session thread had served before each call, so each knows its idle gap: {calls:?}"
    );
    let runs = executor.stats().runs;
    for id in 11..14 {
        submit(&executor, job(id, &answers));
    }
    wait_for(&answers, 14);
    assert_eq!(executor.stats().runs, runs + 3);
    assert_eq!(
        executor.load_stats().take_calls(),
        RecordedCalls::default(),
        "not recording any more"
    );
    assert_each_answered_once_right(&answers, 14);
}

#[test]
fn fixed_executor_refuses_to_switch() {
    let runtime = OrtRuntime::get().unwrap();
    let executor = ModelExecutor::start(&runtime, config(4)).unwrap();
    assert!(executor.parallelism().is_none());
    assert!(matches!(
        executor.set_parallelism(1, 1),
        Err(ParallelismError::Fixed { .. })
    ));
}

#[test]
fn a_queued_job_past_its_deadline_is_answered_expired_not_run() {
    let runtime = OrtRuntime::get().unwrap();
    let executor = ModelExecutor::start(&runtime, config(16)).unwrap();
    let answers: Answers = Arc::default();
    let past = Instant::now() - Duration::from_millis(5);
    let future = Instant::now() + Duration::from_secs(600);
    for (id, deadline) in [
        (0, Some(past)),
        (1, Some(future)),
        (2, None),
        (3, Some(past)),
    ] {
        submit(
            &executor,
            Job {
                deadline,
                trace: None,
                ..job(id, &answers)
            },
        );
    }
    wait_for(&answers, 4);
    let answers = answers.lock().unwrap();
    for id in [0, 3] {
        let got = &answers[&id];
        assert_eq!(got.len(), 1, "job {id} answered once");
        let e = got[0].as_ref().expect_err("expired");
        assert!(e.contains("deadline passed"), "{e}");
    }
    for id in [1, 2] {
        assert_eq!(answers[&id].len(), 1, "job {id} answered once");
        assert!(answers[&id][0].is_ok(), "job {id}: {:?}", answers[&id]);
    }
    // Only the two jobs still awaited were run.
    assert_eq!(executor.stats().rows, 2);
}

/// A batched executor's settings for the batching rule: up to `max_batch` rows, waiting a delay
/// far longer than any test (a job held for company would hang the test, not slow it).
fn batching_config(max_batch: usize, wait: weir_engine::spec::BatchWait) -> ExecutorConfig {
    ExecutorConfig {
        call: weir_engine::validate::CallShape::Batched,
        max_batch,
        max_delay: Duration::from_secs(600),
        wait,
        ..config(16)
    }
}

/// Runs [`batching::gather_batch`] on its own thread for the next queued job; its batch's job ids
/// come back on the returned channel.
fn gather_next(
    config: &ExecutorConfig,
    stats: &Arc<LoadStats>,
    rx: &crossbeam_channel::Receiver<Job>,
) -> crossbeam_channel::Receiver<Vec<f32>> {
    let (config, stats, rx) = (config.clone(), Arc::clone(stats), rx.clone());
    let (out, batch) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let first = rx.recv().unwrap();
        let mut carried = None;
        let sessions = config.instances;
        let (jobs, _) = batching::gather_batch(first, &config, &stats, &rx, &mut carried, sessions);
        assert!(carried.is_none(), "no job left over");
        let ids = jobs
            .iter()
            .map(|j| j.inputs[0].f32_values().unwrap()[0])
            .collect();
        let _ = out.send(ids);
    });
    batch
}

/// Long enough for any gather on this machine; a failure here means a job waited for company.
const GATHER_BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_lone_job_on_an_idle_executor_runs_at_once() {
    let answers: Answers = Arc::default();
    let stats = Arc::new(LoadStats::default());
    let (tx, rx) = crossbeam_channel::unbounded();
    let config = batching_config(4, weir_engine::spec::BatchWait::WhenBusy);
    tx.send(job(7, &answers)).unwrap();
    // The queue stays open (more could come), yet nothing runs, so nothing is waited for.
    let batch = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(batch.unwrap(), vec![7.0]);
}

#[test]
fn jobs_queued_while_a_call_ran_join_the_next_batch_up_to_max_size() {
    let answers: Answers = Arc::default();
    let stats = Arc::new(LoadStats::default());
    let (tx, rx) = crossbeam_channel::unbounded();
    let config = batching_config(3, weir_engine::spec::BatchWait::WhenBusy);
    for id in 0..5 {
        tx.send(job(id, &answers)).unwrap();
    }
    let first = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(
        first.unwrap(),
        vec![0.0, 1.0, 2.0],
        "max_size caps the batch"
    );
    let second = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(second.unwrap(), vec![3.0, 4.0], "the rest runs at once");
}

#[test]
fn a_batch_waits_for_company_only_while_every_session_runs_a_call_or_when_told_always() {
    use weir_engine::spec::BatchWait::{Always, WhenBusy};
    // (wait, sessions, calls running): one session whose call is running (its session held by a
    // call the dataflow worker started), two sessions both running, and the fixed timer idle.
    for (wait, sessions, busy) in [(WhenBusy, 1, 1), (WhenBusy, 2, 2), (Always, 2, 0)] {
        let answers: Answers = Arc::default();
        let stats = Arc::new(LoadStats::default());
        let running: Vec<_> = (0..busy).map(|_| stats.call_running()).collect();
        let (tx, rx) = crossbeam_channel::unbounded();
        let config = ExecutorConfig {
            instances: sessions,
            ..batching_config(2, wait)
        };
        tx.send(job(0, &answers)).unwrap();
        let batch = gather_next(&config, &stats, &rx);
        // Held for company: nothing comes back until a second job arrives.
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            batch.try_recv().is_err(),
            "{wait:?}, {sessions} sessions: ran without waiting"
        );
        tx.send(job(1, &answers)).unwrap();
        assert_eq!(batch.recv_timeout(GATHER_BOUND).unwrap(), vec![0.0, 1.0]);
        drop(running);
        assert_eq!(stats.calls_running(), 0);
    }
}

#[test]
fn a_free_session_runs_at_once_while_another_session_runs_a_call() {
    let answers: Answers = Arc::default();
    let stats = Arc::new(LoadStats::default());
    let running = stats.call_running();
    let (tx, rx) = crossbeam_channel::unbounded();
    let config = ExecutorConfig {
        instances: 2,
        ..batching_config(4, weir_engine::spec::BatchWait::WhenBusy)
    };
    tx.send(job(0, &answers)).unwrap();
    // The queue stays open and the other session is busy: waiting would only idle this one.
    let batch = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(batch.unwrap(), vec![0.0]);
    drop(running);
}

#[test]
fn sessions_share_the_queue_instead_of_one_taking_it_all() {
    use weir_engine::spec::BatchWait::{Always, WhenBusy};
    // (wait, sessions, queued, the first session's batch, the rest's).
    let cases: [(_, _, u64, &[f32], &[f32]); 4] = [
        (WhenBusy, 2, 2, &[0.0], &[1.0]),
        (WhenBusy, 2, 5, &[0.0, 1.0, 2.0], &[3.0, 4.0]),
        (WhenBusy, 3, 4, &[0.0, 1.0], &[2.0, 3.0]),
        // One session has nobody to leave work to; the fixed timer takes what it can.
        (WhenBusy, 1, 3, &[0.0, 1.0, 2.0], &[]),
    ];
    let always = (Always, 2, 2, &[0.0, 1.0][..], &[][..]);
    for (wait, sessions, queued, first, rest) in cases.into_iter().chain([always]) {
        let answers: Answers = Arc::default();
        let stats = Arc::new(LoadStats::default());
        let (tx, rx) = crossbeam_channel::unbounded();
        let config = ExecutorConfig {
            instances: sessions,
            max_delay: Duration::ZERO,
            ..batching_config(8, wait)
        };
        for id in 0..queued {
            tx.send(job(id, &answers)).unwrap();
        }
        let got = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
        assert_eq!(
            got.unwrap(),
            first,
            "{wait:?}, {sessions} sessions, {queued} queued"
        );
        let left: Vec<f32> = rx
            .try_iter()
            .map(|j| j.inputs[0].f32_values().unwrap()[0])
            .collect();
        assert_eq!(
            left, rest,
            "{wait:?}, {sessions} sessions, {queued} queued: left"
        );
    }
}

#[test]
fn a_gather_stops_at_the_batch_size_measured_cheapest_per_row() {
    use weir_engine::spec::BatchWait::WhenBusy;
    let answers: Answers = Arc::default();
    // Calls of 1–2 rows have cost 1 ms a row, calls of 3–8 rows 2 ms a row.
    let stats = Arc::new(LoadStats::measuring_row_cost());
    for _ in 0..row_cost::MIN_CALLS {
        for rows in [1u32, 2, 4, 8] {
            let per_row = if rows <= 2 { 1 } else { 2 };
            stats.record_row_cost(
                rows as usize,
                Duration::from_millis(u64::from(per_row * rows)),
            );
        }
    }
    assert_eq!(stats.rows_now(8), 2);
    let (tx, rx) = crossbeam_channel::unbounded();
    let config = ExecutorConfig {
        max_delay: Duration::ZERO,
        ..batching_config(8, WhenBusy)
    };
    for id in 0..6 {
        tx.send(job(id, &answers)).unwrap();
    }
    let got = gather_next(&config, &stats, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(got.unwrap(), vec![0.0, 1.0]);
    // Without the measure (`grow: to_max_size`, or a session it does not see) the batch grows to
    // max_size.
    let plain = Arc::new(LoadStats::default());
    let got = gather_next(&config, &plain, &rx).recv_timeout(GATHER_BOUND);
    assert_eq!(got.unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
}

#[test]
fn only_alike_rows_on_one_cpu_thread_are_measured() {
    use weir_engine::spec::{BatchGrow, Device};
    let batched = batching_config(8, weir_engine::spec::BatchWait::WhenBusy);
    assert!(batched.measures_row_cost());
    for other in [
        ExecutorConfig {
            grow: BatchGrow::ToMaxSize,
            ..batched.clone()
        },
        ExecutorConfig {
            intra_op_threads: 2,
            ..batched.clone()
        },
        ExecutorConfig {
            device: Device::Cuda,
            ..batched.clone()
        },
        ExecutorConfig {
            max_batch: 1,
            ..batched.clone()
        },
        config(16),
    ] {
        assert!(!other.measures_row_cost(), "{other:?}");
    }
}

#[test]
fn an_idle_executor_runs_a_lone_job_on_the_calling_thread_and_a_busy_one_hands_it_back() {
    let runtime = OrtRuntime::get().unwrap();
    let executor = ModelExecutor::start(&runtime, config(16)).unwrap();
    let answers: Answers = Arc::default();
    let threads: Arc<Mutex<Vec<std::thread::ThreadId>>> = Arc::default();
    let traced = |id: u64| {
        let mut j = job(id, &answers);
        let (done, threads) = (j.done, Arc::clone(&threads));
        j.done = Box::new(move |r| {
            threads.lock().unwrap().push(std::thread::current().id());
            done(r);
        });
        j
    };
    // Idle: answered before `try_run_here` returns, on this thread.
    assert!(executor.try_run_here(traced(0)).is_ok());
    assert_eq!(
        answers.lock().unwrap().len(),
        1,
        "answered before returning"
    );
    assert_eq!(threads.lock().unwrap()[0], std::thread::current().id());
    // Another call running: handed back whole, then served by the queue.
    let running = executor.load_stats().call_running();
    let Err(back) = executor.try_run_here(traced(1)) else {
        panic!("ran while another call was running");
    };
    drop(running);
    submit(&executor, back);
    wait_for(&answers, 2);
    assert_each_answered_once_right(&answers, 2);
    assert_ne!(threads.lock().unwrap()[1], std::thread::current().id());
    let stats = executor.stats();
    assert_eq!((stats.enqueued, stats.dequeued, stats.runs), (2, 2, 2));
}
