//! The switchboard alone: sessions per thread, switches and wake-ups, and the calls it meters.

use super::*;

#[test]
fn sessions_per_thread_cover_every_configuration() {
    let configs = [Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)];
    let (board, wakes) = Switchboard::new("n", &configs, Config::new(1, 2)).unwrap();
    assert_eq!(board.thread_count(), 2);
    assert_eq!(wakes.len(), 2);
    assert_eq!(board.thread_counts_of(0), vec![1, 2]);
    assert_eq!(board.thread_counts_of(1), vec![1]);
    assert!(matches!(
        board.set(2, 2),
        Err(ParallelismError::Unknown { .. })
    ));
    assert_eq!(board.set(2, 1), Ok(true));
    assert_eq!(board.set(2, 1), Ok(false));
    // Thread 1 was told to look again when it went active? No: wake-ups go to threads ≥ c.
    assert!(wakes[1].try_recv().is_err());
    assert_eq!(board.set(1, 1), Ok(true));
    assert!(wakes[1].try_recv().is_ok());
    let s = board.snapshot();
    assert_eq!((s.concurrency, s.threads, s.switches), (1, 1, 2));
    assert!(board.wait_active(0));
    board.stop();
    assert!(!board.wait_active(1));
    assert!(Switchboard::new("n", &configs, Config::new(3, 1)).is_err());
}

#[test]
fn calls_count_for_the_tuple_of_their_mean_concurrency() {
    let configs = [Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)];
    let (board, _wakes) = Switchboard::new("n", &configs, Config::new(2, 1)).unwrap();
    // Two calls overlapping for their whole length (the first ends last): the second counts
    // for two at once. No wall-clock assertion: only which tuple, not how long.
    let a = board.begin_call(1, None);
    let b = board.begin_call(1, None);
    std::thread::sleep(Duration::from_millis(2));
    board.end_call(b, 1, false);
    board.end_call(a, 1, false);
    // A lone call counts for one, with how long its thread had been idle.
    let c = board.begin_call(2, Some(Duration::from_millis(30)));
    board.end_call(c, 1, false);
    // A batch of two rows is no sample; two rows run one after the other are one (the executor
    // gives a call of several rows no gap: only its first row started after it).
    let d = board.begin_call(2, None);
    board.end_call(d, 2, false);
    let e = board.begin_call(2, None);
    board.end_call(e, 2, true);
    let samples = board.take_samples();
    let tuples: Vec<Config> = samples.iter().map(|s| s.tuple).collect();
    assert_eq!(tuples[0], Config::new(2, 1));
    assert_eq!(tuples[2], Config::new(1, 2));
    assert_eq!(tuples[3], Config::new(1, 2));
    assert_eq!(tuples.len(), 4);
    let gaps: Vec<Option<Duration>> = samples.iter().map(|s| s.idle_before).collect();
    assert_eq!(gaps, [None, None, Some(Duration::from_millis(30)), None]);
    assert!(board.take_samples().is_empty());
    assert_eq!(board.meter().running, 0);
}

#[test]
fn calls_know_how_long_after_a_switch_they_began() {
    let configs = [Config::new(1, 2), Config::new(2, 1)];
    let (board, _wakes) = Switchboard::new("n", &configs, Config::new(2, 1)).unwrap();
    // Before any switch: unknown, so never left out as settling.
    let first = board.begin_call(1, None);
    board.end_call(first, 1, false);
    // A call running when the switch comes ran across it.
    let across = board.begin_call(1, None);
    assert!(board.set(1, 2).unwrap());
    board.end_call(across, 1, false);
    // One taken after it knows how long after (at least the pause, whatever the machine).
    std::thread::sleep(Duration::from_millis(3));
    let after = board.begin_call(2, None);
    board.end_call(after, 1, false);
    // Setting the configuration in force is no switch.
    assert!(!board.set(1, 2).unwrap());
    let later = board.begin_call(2, None);
    board.end_call(later, 1, false);
    let since: Vec<Option<Duration>> = board
        .take_samples()
        .iter()
        .map(|s| s.since_switch)
        .collect();
    assert_eq!(since[..2], [None, Some(Duration::ZERO)]);
    assert!(since[2].is_some_and(|d| d >= Duration::from_millis(3)));
    assert!(since[3] >= since[2]);
}
