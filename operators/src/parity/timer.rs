//! The decoder's deadlines: a min-heap of instants at which it looks at a coding group again
//! (one of its predictions turns late) or gives up on a failed job whose group never filled.
//!
//! Pure and single-threaded: the decoder operator pops what is due when it runs and asks its
//! activator to run again at the earliest instant left ([`Timer::next`]), so no thread waits and
//! the worker is never blocked. Entries are bounded by the jobs in flight (at most one per member
//! and group).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Instant;

/// What to look at when an instant comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Coding group `id`: a member may have turned late.
    Group(u32),
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

/// The pending wake-ups, earliest first.
#[derive(Debug, Default)]
pub struct Timer {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl Timer {
    /// Wakes `wake` at `at`.
    pub fn at(&mut self, at: Instant, wake: Wake) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            at,
            seq: self.seq,
            wake,
        }));
    }

    /// The wake-ups due at `now`, earliest first, taken off the heap.
    pub fn due(&mut self, now: Instant) -> Vec<Wake> {
        let mut due = Vec::new();
        while self.heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
            if let Some(Reverse(e)) = self.heap.pop() {
                due.push(e.wake);
            }
        }
        due
    }

    /// The earliest instant left, if any.
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn due_wakes_come_earliest_first_and_later_ones_stay() {
        let t0 = Instant::now();
        let mut timer = Timer::default();
        timer.at(t0 + Duration::from_millis(5), Wake::Group(2));
        timer.at(t0 + Duration::from_millis(1), Wake::Open(7));
        timer.at(t0 + Duration::from_millis(9), Wake::Group(3));
        assert_eq!(
            timer.due(t0 + Duration::from_millis(5)),
            [Wake::Open(7), Wake::Group(2)]
        );
        assert_eq!(timer.next(), Some(t0 + Duration::from_millis(9)));
        assert!(timer.due(t0 + Duration::from_millis(8)).is_empty());
    }
}
