//! A graph's trace book: which pending requests are sampled, and the records of the batches that
//! carried them.
//!
//! The front end registers a sampled request at admission ([`TraceBook::begin`]) and the reply
//! table forgets it when it is answered ([`TraceBook::end`]). An operator that runs a batch asks
//! [`TraceBook::is_active`] first (one relaxed load: no sampled request pending means nothing
//! to look up), then which of its rows are sampled, and records the batch's times only when one
//! is, under the `(node, seq)` its lineage entry names. At the reply the request's lineage
//! entries find those records ([`super::request_spans`]).
//!
//! A graph with replicated stateful nodes (HAMS) holds a reply until the state versions it passed
//! are durable on their backups: the reply table notes when a sampled request's reply was held
//! ([`TraceBook::hold`]) and let go ([`TraceBook::released`]), and its spans read the wait back
//! ([`TraceBook::release_wait`]).
//!
//! Memory is bounded either way: at most [`MAX_TRACED`] sampled requests pending (a request over
//! that is served unsampled), the newest [`MAX_HOPS`] batch records (older ones are dropped;
//! a span whose record is gone is still exported, timed from its neighbours) and the newest
//! [`MAX_TRACED`] release waits.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::Reconstruction;
use crate::request::original_id;

/// Sampled requests pending at once, at most.
pub const MAX_TRACED: usize = 4096;

/// Batch records kept, at most (the newest).
pub const MAX_HOPS: usize = 16384;

/// What one node did with one job of a batch holding sampled rows.
#[derive(Debug, Clone, PartialEq)]
pub struct HopRecord {
    /// The sampled requests (original ids) among the job's rows.
    pub requests: Vec<u64>,
    /// When the job reached the node.
    pub start: SystemTime,
    /// When the node handed its output on.
    pub end: SystemTime,
    /// Time the job waited for a session thread (batch formation and queueing), when known.
    pub queue_wait: Option<Duration>,
    /// Time of the ONNX Runtime call, when it ran in this process.
    pub run: Option<Duration>,
    /// Rows of the call (the batch size), when it ran in this process.
    pub batch_size: Option<usize>,
    /// Rows of the job as the node cut it.
    pub job_rows: usize,
    /// The replica the job was last sent to, for a node with a pool of them.
    pub replica: Option<String>,
    /// How the job's answer was decoded, when ParM reconstructed it instead of its replica.
    pub reconstruction: Option<Reconstruction>,
}

/// How long a sampled request's reply waited at the release gate (HAMS) for the state versions
/// it passed to be durable on their backups.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseWait {
    /// When the reply was ready and held.
    pub start: SystemTime,
    /// When the gate let it go (`None` while it waits).
    pub end: Option<SystemTime>,
    /// The versions it waited for: `(lineage id of a replicated node, version)`.
    pub deps: Vec<(u32, u64)>,
}

#[derive(Debug, Default)]
struct Waits {
    by_request: HashMap<u64, ReleaseWait>,
    order: VecDeque<u64>,
}

#[derive(Debug, Default)]
struct Hops {
    by_key: HashMap<(u32, u64), Vec<HopRecord>>,
    order: VecDeque<(u32, u64)>,
    count: usize,
}

/// Sampled requests and the batch records of their hops (see the module docs).
#[derive(Debug, Default)]
pub struct TraceBook {
    active: AtomicUsize,
    requests: Mutex<HashMap<u64, [u8; 16]>>,
    hops: Mutex<Hops>,
    waits: Mutex<Waits>,
    refused: AtomicU64,
}

impl TraceBook {
    /// Whether any sampled request is pending (the only check on an unsampled path).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed) > 0
    }

    fn requests(&self) -> std::sync::MutexGuard<'_, HashMap<u64, [u8; 16]>> {
        self.requests.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hops(&self) -> std::sync::MutexGuard<'_, Hops> {
        self.hops.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers request `id` as sampled in trace `trace_id`; false (and nothing kept) when
    /// [`MAX_TRACED`] are pending already.
    pub fn begin(&self, id: u64, trace_id: [u8; 16]) -> bool {
        let mut requests = self.requests();
        if requests.len() >= MAX_TRACED {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if requests.insert(original_id(id), trace_id).is_none() {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Forgets request `id` (answered).
    pub fn end(&self, id: u64) {
        if !self.is_active() {
            return;
        }
        if self.requests().remove(&original_id(id)).is_some() {
            self.active.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The sampled ones among `ids` (original ids) and the trace of the first, if any.
    pub fn sampled(&self, ids: &[u64]) -> Option<([u8; 16], Vec<u64>)> {
        if !self.is_active() {
            return None;
        }
        let requests = self.requests();
        let mut first = None;
        let mut sampled = Vec::new();
        for &id in ids {
            let id = original_id(id);
            if let Some(t) = requests.get(&id) {
                first.get_or_insert(*t);
                sampled.push(id);
            }
        }
        first.map(|t| (t, sampled))
    }

    /// Keeps what node `node` did in its batch `seq` for one job, dropping the oldest batch's
    /// records past [`MAX_HOPS`].
    pub fn record(&self, node: u32, seq: u64, record: HopRecord) {
        let mut guard = self.hops();
        let hops = &mut *guard;
        let key = (node, seq);
        let records = hops.by_key.entry(key).or_default();
        if records.is_empty() {
            hops.order.push_back(key);
        }
        records.push(record);
        hops.count += 1;
        while hops.count > MAX_HOPS {
            let Some(old) = hops.order.pop_front() else {
                break;
            };
            let gone = hops.by_key.remove(&old).map_or(0, |r| r.len());
            hops.count -= gone;
        }
    }

    /// The record of what node `node` did in batch `seq` for request `request`, if kept.
    pub fn hop(&self, node: u32, seq: u64, request: u64) -> Option<HopRecord> {
        let request = original_id(request);
        self.hops()
            .by_key
            .get(&(node, seq))?
            .iter()
            .find(|r| r.requests.contains(&request))
            .cloned()
    }

    fn waits(&self) -> std::sync::MutexGuard<'_, Waits> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that request `id`'s reply, ready now, is held until the versions `deps` are
    /// durable, if the request is sampled (a later attempt's hold replaces an earlier one's).
    pub fn hold(&self, id: u64, deps: &[(u32, u64)]) {
        if !self.is_active() {
            return;
        }
        let id = original_id(id);
        if !self.requests().contains_key(&id) {
            return;
        }
        let wait = ReleaseWait {
            start: SystemTime::now(),
            end: None,
            deps: deps.to_vec(),
        };
        let mut waits = self.waits();
        if waits.by_request.insert(id, wait).is_none() {
            waits.order.push_back(id);
        }
        while waits.order.len() > MAX_TRACED {
            if let Some(old) = waits.order.pop_front() {
                waits.by_request.remove(&old);
            }
        }
    }

    /// Notes that request `id`'s held reply was let go now (nothing, if it was not held).
    pub fn released(&self, id: u64) {
        if !self.is_active() {
            return;
        }
        if let Some(w) = self.waits().by_request.get_mut(&original_id(id)) {
            w.end.get_or_insert_with(SystemTime::now);
        }
    }

    /// The release wait of request `id`, if its reply was held and it is still kept.
    pub fn release_wait(&self, id: u64) -> Option<ReleaseWait> {
        self.waits().by_request.get(&original_id(id)).cloned()
    }

    /// Requests served unsampled because [`MAX_TRACED`] were pending.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(requests: Vec<u64>) -> HopRecord {
        HopRecord {
            requests,
            start: SystemTime::UNIX_EPOCH,
            end: SystemTime::UNIX_EPOCH,
            queue_wait: None,
            run: None,
            batch_size: Some(2),
            job_rows: 2,
            replica: None,
            reconstruction: None,
        }
    }

    #[test]
    fn only_sampled_requests_are_found_and_answered_ones_are_forgotten() {
        let book = TraceBook::default();
        assert!(!book.is_active());
        assert_eq!(book.sampled(&[1, 2]), None);
        assert!(book.begin(2, [9; 16]));
        assert!(book.is_active());
        assert_eq!(book.sampled(&[1, 2, 3]), Some(([9; 16], vec![2])));
        book.end(2);
        assert!(!book.is_active());
        assert_eq!(book.sampled(&[2]), None);
    }

    #[test]
    fn records_are_found_by_node_batch_and_request_and_bounded() {
        let book = TraceBook::default();
        book.record(3, 7, record(vec![1]));
        book.record(3, 7, record(vec![2]));
        assert_eq!(book.hop(3, 7, 2).unwrap().requests, vec![2]);
        assert_eq!(book.hop(3, 8, 2), None);
        for seq in 0..(MAX_HOPS as u64 + 10) {
            book.record(4, seq, record(vec![5]));
        }
        assert_eq!(book.hop(3, 7, 1), None, "the oldest batch went first");
        assert!(book.hop(4, MAX_HOPS as u64 + 9, 5).is_some());
        assert!(book.hops().count <= MAX_HOPS);
    }

    #[test]
    fn a_sampled_request_s_release_wait_is_kept_and_others_are_not() {
        let book = TraceBook::default();
        book.hold(1, &[(2, 5)]);
        assert_eq!(book.release_wait(1), None, "nothing sampled");
        assert!(book.begin(1, [3; 16]));
        book.hold(1, &[(2, 5)]);
        book.hold(8, &[(2, 5)]);
        assert_eq!(book.release_wait(8), None, "not sampled");
        let held = book.release_wait(1).unwrap();
        assert_eq!((held.end, held.deps), (None, vec![(2, 5)]));
        book.released(1);
        book.end(1);
        let wait = book.release_wait(1).unwrap();
        assert!(
            wait.end.is_some_and(|e| e >= wait.start),
            "kept past the answer"
        );
        for id in 100..(100 + MAX_TRACED as u64) {
            assert!(book.begin(id, [3; 16]));
            book.hold(id, &[]);
            book.end(id);
        }
        assert_eq!(book.release_wait(1), None, "the oldest went first");
        assert!(book.waits().order.len() <= MAX_TRACED);
    }

    #[test]
    fn pending_sampled_requests_are_bounded() {
        let book = TraceBook::default();
        for id in 0..MAX_TRACED as u64 {
            assert!(book.begin(id, [1; 16]));
        }
        assert!(!book.begin(u64::MAX >> 30, [1; 16]));
        assert_eq!(book.refused(), 1);
    }
}
