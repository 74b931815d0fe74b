//! One thread per parity-coded node that wakes a coding group when one of its predictions turns
//! late, or gives up on a failed job whose group never filled: a min-heap of instants behind a
//! condition variable.
//!
//! Entries are bounded by the jobs in flight (at most one per member and group). The thread holds
//! no strong reference to the service: it calls back through a `Weak`, and stops when the service
//! is dropped (it is never joined, since the last reference may be dropped on the thread itself).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// What to look at when an instant comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Coding group `id`: a member may have turned late.
    Group(u64),
    /// The job with this sequence number failed before its group filled.
    Open(u64),
}

#[derive(Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    wake: Wake,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wakeup: Condvar,
}

/// The timer; dropping it stops its thread.
pub struct Timer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer").finish_non_exhaustive()
    }
}

impl Timer {
    /// Starts the thread `name`, calling `fire` for each entry when its instant comes; `fire`
    /// returns false once there is nothing left to serve (the thread then ends).
    pub fn start(name: &str, fire: impl Fn(Wake) -> bool + Send + 'static) -> Self {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || run(&s, &fire));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "No parity timer thread: only arrivals will decode.");
        }
        Timer { shared }
    }

    /// Calls back with `wake` at `at`.
    pub fn at(&self, at: Instant, wake: Wake) {
        let mut s = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        s.seq += 1;
        let seq = s.seq;
        s.heap.push(Reverse(Entry { at, seq, wake }));
        drop(s);
        self.shared.wakeup.notify_one();
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stop = true;
        self.shared.wakeup.notify_one();
    }
}

fn run(shared: &Shared, fire: &dyn Fn(Wake) -> bool) {
    let mut s = shared.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if s.stop {
            return;
        }
        let now = Instant::now();
        match s.heap.peek().map(|Reverse(e)| e.at) {
            Some(at) if at <= now => {
                let Some(Reverse(entry)) = s.heap.pop() else {
                    continue;
                };
                drop(s);
                if !fire(entry.wake) {
                    return;
                }
                s = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            }
            Some(at) => {
                s = shared
                    .wakeup
                    .wait_timeout(s, at - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            None => {
                s = shared.wakeup.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        }
    }
}
