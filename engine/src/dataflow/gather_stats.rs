//! What a gather node did so far, counted where it runs ([`super::fanout::gather_parts`]) and
//! read by the status board and the metrics endpoint: requests whose join opened, joined, failed
//! (their parts could not be stacked) or were dropped when their epoch closed without all their
//! parts (a part failed on another node, which answered the request), the parts taken, and the
//! summed time each joined request waited from its join opening (its parent or first part
//! arriving) to its last part.
//!
//! The joins still open are `opened - joined - failed - dropped`: counters only, no gauge a
//! reader could sample between two updates. The node's operator on every worker adds to the
//! same counters, a few relaxed atomic adds per batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counters of one gather node, shared by its operator on every worker.
#[derive(Debug, Default)]
pub struct GatherStats {
    opened: AtomicU64,
    parts: AtomicU64,
    joined: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    wait_ns: AtomicU64,
}

/// [`GatherStats`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GatherSnapshot {
    /// Requests whose join opened (a parent or a part arrived first).
    pub opened: u64,
    /// Parts taken (a part seen twice counts once).
    pub parts: u64,
    /// Requests joined into one row each.
    pub joined: u64,
    /// Requests whose parts could not be joined (answered with the error).
    pub failed: u64,
    /// Requests whose epoch closed before all their parts came (a part failed elsewhere).
    pub dropped: u64,
    /// Time joined requests waited for their last part, summed.
    pub wait: Duration,
}

impl GatherSnapshot {
    /// Joins open now: opened and not yet joined, failed or dropped.
    pub fn waiting(&self) -> u64 {
        self.opened
            .saturating_sub(self.joined + self.failed + self.dropped)
    }
}

impl GatherStats {
    /// The counters now.
    pub fn snapshot(&self) -> GatherSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        // Closed joins are read before opened ones, so a join closing between the two reads
        // never shows as a negative number waiting.
        let (joined, failed, dropped) =
            (load(&self.joined), load(&self.failed), load(&self.dropped));
        GatherSnapshot {
            opened: load(&self.opened),
            parts: load(&self.parts),
            joined,
            failed,
            dropped,
            wait: Duration::from_nanos(load(&self.wait_ns)),
        }
    }

    /// `opened` joins opened and `parts` parts taken, from one batch.
    pub(crate) fn took(&self, opened: u64, parts: u64) {
        self.opened.fetch_add(opened, Ordering::Relaxed);
        self.parts.fetch_add(parts, Ordering::Relaxed);
    }

    /// `joined` requests joined after waiting `wait` in all, and `failed` that could not be.
    pub(crate) fn closed(&self, joined: u64, wait: Duration, failed: u64) {
        self.joined.fetch_add(joined, Ordering::Relaxed);
        self.failed.fetch_add(failed, Ordering::Relaxed);
        let ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
        self.wait_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// `n` requests left incomplete when their epoch closed.
    pub(crate) fn dropped(&self, n: u64) {
        self.dropped.fetch_add(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_joins_are_those_not_yet_closed() {
        let s = GatherStats::default();
        s.took(5, 12);
        s.closed(2, Duration::from_millis(30), 1);
        s.dropped(1);
        let now = s.snapshot();
        assert_eq!(now.waiting(), 1);
        assert_eq!(now.parts, 12);
        assert_eq!(now.wait, Duration::from_millis(30));
        assert_eq!(
            (now.opened, now.joined, now.failed, now.dropped),
            (5, 2, 1, 1)
        );
    }
}
