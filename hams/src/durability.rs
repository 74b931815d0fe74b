//! Durability: what every stateful node has made durable (applied on its backup), and the backup's
//! apply rule (HAMS, Algorithm 2, read as below).
//!
//! - [`DurableView`] keeps, per node, the highest announced durable version and the newest epoch
//!   heard from. Announcements only ever raise it (`max`, since the network may reorder them), and
//!   one from an older epoch than already heard is stale and ignored (a deposed member). Version
//!   `0`, the initial state every member starts from, is durable by definition.
//! - [`ApplyQueue`] holds the state tuples a backup received and hands them out in version order,
//!   each only when every dependency is durable: Algorithm 2 line 8 read the right way round (wait
//!   *while* `durable[m] < seq`). A whole-state transfer applies at once.

use std::collections::{BTreeMap, HashMap};

use crate::protocol::{Dep, Durable, StateHeader};
use crate::{Epoch, NodeId, Seq};

/// The durable version of every stateful node, as announced.
#[derive(Debug, Clone, Default)]
pub struct DurableView {
    nodes: HashMap<NodeId, (Epoch, Seq)>,
}

impl DurableView {
    /// Takes an announcement; returns whether it raised the node's durable version.
    pub fn announce(&mut self, d: Durable) -> bool {
        let entry = self.nodes.entry(d.node).or_insert((d.epoch, 0));
        if d.epoch < entry.0 {
            return false;
        }
        entry.0 = d.epoch;
        if d.seq > entry.1 {
            entry.1 = d.seq;
            return true;
        }
        false
    }

    /// The highest durable version of `node` (0 when nothing was announced).
    pub fn durable(&self, node: NodeId) -> Seq {
        self.nodes.get(&node).map_or(0, |e| e.1)
    }

    /// Whether version `seq` of `node` is durable.
    pub fn is_durable(&self, node: NodeId, seq: Seq) -> bool {
        seq == 0 || self.durable(node) >= seq
    }

    /// Whether every dependency is durable.
    pub fn all_durable(&self, deps: &[Dep]) -> bool {
        deps.iter().all(|&(n, s)| self.is_durable(n, s))
    }

    /// The dependencies not yet durable.
    pub fn missing(&self, deps: &[Dep]) -> Vec<Dep> {
        deps.iter()
            .copied()
            .filter(|&(n, s)| !self.is_durable(n, s))
            .collect()
    }

    /// Every node's (epoch, durable version).
    pub fn snapshot(&self) -> Vec<(NodeId, Epoch, Seq)> {
        let mut v: Vec<_> = self.nodes.iter().map(|(&n, &(e, s))| (n, e, s)).collect();
        v.sort_unstable();
        v
    }
}

/// What happened to an offered state tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Kept until it can be applied.
    Queued,
    /// From an older epoch than the backup's: dropped (fencing).
    Stale,
    /// At or below the applied version: dropped (a resend).
    Duplicate,
}

/// A backup's received, not yet applied state tuples.
#[derive(Debug)]
pub struct ApplyQueue<T> {
    epoch: Epoch,
    applied: Seq,
    /// The last whole-state transfer applied: a second copy of it is a duplicate (a version
    /// applies at most once), and applying it after later versions would take the state back.
    last_full: Option<(Epoch, Seq)>,
    /// Whether `applied` was reached by applying a tuple of this epoch (not set by a reset): a
    /// whole state of that same version, re-shipped because its acknowledgement was lost, is
    /// then a duplicate, while after a reset it is the state to take.
    applied_here: bool,
    pending: BTreeMap<Seq, (StateHeader, T)>,
}

impl<T> ApplyQueue<T> {
    /// A queue for a backup at `epoch` whose state is version `applied`.
    pub fn new(epoch: Epoch, applied: Seq) -> Self {
        ApplyQueue {
            epoch,
            applied,
            last_full: None,
            applied_here: false,
            pending: BTreeMap::new(),
        }
    }

    /// The applied version.
    pub fn applied(&self) -> Seq {
        self.applied
    }

    /// The epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// Tuples waiting.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Offers a received tuple.
    pub fn offer(&mut self, header: StateHeader, payload: T) -> Offer {
        if header.epoch < self.epoch {
            return Offer::Stale;
        }
        if header.epoch > self.epoch {
            // A newer primary: what an older one sent is void.
            self.epoch = header.epoch;
            self.applied_here = false;
            self.pending.clear();
        }
        let repeated_full = header.full
            && (self.last_full == Some((header.epoch, header.seq))
                || header.seq < self.applied
                || (header.seq == self.applied && self.applied_here));
        if repeated_full || (header.seq <= self.applied && !header.full) {
            return Offer::Duplicate;
        }
        self.pending.insert(header.seq, (header, payload));
        Offer::Queued
    }

    /// The next tuple to apply, if its turn has come and its dependencies are durable: a
    /// whole-state transfer first (it supersedes everything older), otherwise version
    /// `applied + 1`. Marks it applied.
    pub fn next_ready(&mut self, view: &DurableView) -> Option<(StateHeader, T)> {
        let full = self
            .pending
            .iter()
            .rev()
            .find(|(_, (h, _))| h.full)
            .map(|(&s, _)| s);
        if let Some(seq) = full {
            if !self
                .pending
                .get(&seq)
                .is_some_and(|(h, _)| view.all_durable(&h.deps))
            {
                return None;
            }
            let (h, t) = self.pending.remove(&seq)?;
            self.pending.retain(|&s, _| s > seq);
            self.applied = seq;
            self.applied_here = true;
            self.last_full = Some((h.epoch, seq));
            return Some((h, t));
        }
        let next = self.applied + 1;
        let ready = self
            .pending
            .get(&next)
            .is_some_and(|(h, _)| view.all_durable(&h.deps));
        if !ready {
            return None;
        }
        let (h, t) = self.pending.remove(&next)?;
        self.applied = next;
        self.applied_here = true;
        Some((h, t))
    }

    /// What the head of the queue waits for: its version and its dependencies not yet durable.
    pub fn blocked_on(&self, view: &DurableView) -> Option<(Seq, Vec<Dep>)> {
        let (h, _) = self.pending.get(&(self.applied + 1))?;
        Some((h.seq, view.missing(&h.deps)))
    }

    /// Starts over at `epoch` with version `applied` (promotion, demotion): pending tuples are
    /// dropped, since none was announced durable and so no released reply depends on them.
    pub fn reset(&mut self, epoch: Epoch, applied: Seq) {
        self.epoch = epoch;
        self.applied = applied;
        self.applied_here = false;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn durable(node: NodeId, epoch: Epoch, seq: Seq) -> Durable {
        Durable { node, epoch, seq }
    }

    /// A full-state transfer at `(epoch, seq)`.
    fn full_transfer(epoch: Epoch, seq: Seq) -> StateHeader {
        StateHeader {
            full: true,
            ..tuple(epoch, seq, vec![])
        }
    }

    fn tuple(epoch: Epoch, seq: Seq, deps: Vec<Dep>) -> StateHeader {
        StateHeader {
            epoch,
            seq,
            deps,
            request_ids: vec![],
            row_hashes: vec![],
            full: false,
            state_bytes: 0,
        }
    }

    #[test]
    fn durability_is_monotone_and_fences_old_epochs() {
        let mut v = DurableView::default();
        assert!(v.is_durable(1, 0));
        assert!(v.announce(durable(1, 1, 5)));
        assert!(!v.announce(durable(1, 1, 3)), "reordered: no step back");
        assert!(v.is_durable(1, 5) && !v.is_durable(1, 6));
        assert!(v.announce(durable(1, 2, 7)));
        assert!(!v.announce(durable(1, 1, 9)), "stale epoch ignored");
        assert_eq!(v.durable(1), 7);
        assert_eq!(v.missing(&[(1, 8), (2, 0), (3, 1)]), vec![(1, 8), (3, 1)]);
    }

    #[test]
    fn a_backup_applies_in_order_and_only_after_its_dependencies() {
        let mut q = ApplyQueue::new(1, 0);
        let mut v = DurableView::default();
        assert_eq!(q.offer(tuple(1, 2, vec![]), "s2"), Offer::Queued);
        assert!(q.next_ready(&v).is_none(), "version 1 has not arrived");
        assert_eq!(q.offer(tuple(1, 1, vec![(9, 4)]), "s1"), Offer::Queued);
        assert!(q.next_ready(&v).is_none(), "waits while durable[9] < 4");
        assert_eq!(q.blocked_on(&v), Some((1, vec![(9, 4)])));
        v.announce(durable(9, 1, 4));
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("s1"));
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("s2"));
        assert_eq!(q.applied(), 2);
        assert_eq!(q.offer(tuple(1, 2, vec![]), "again"), Offer::Duplicate);
        assert_eq!(q.offer(tuple(0, 3, vec![]), "old"), Offer::Stale);
    }

    #[test]
    fn a_full_transfer_applies_at_once_and_supersedes_older_tuples() {
        let mut q = ApplyQueue::new(1, 0);
        let v = DurableView::default();
        q.offer(tuple(1, 3, vec![(9, 100)]), "s3");
        let full = full_transfer(2, 5);
        assert_eq!(q.offer(full, "whole"), Offer::Queued);
        assert_eq!(q.epoch(), 2, "a newer primary voids the older one's tuples");
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("whole"));
        assert_eq!(q.applied(), 5);
        assert!(q.is_empty());
        let again = full_transfer(2, 5);
        assert_eq!(
            q.offer(again, "copy"),
            Offer::Duplicate,
            "a repeated transfer is dropped"
        );
        q.offer(tuple(2, 6, vec![]), "s6");
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("s6"));
        let late = full_transfer(2, 5);
        assert_eq!(
            q.offer(late, "late"),
            Offer::Duplicate,
            "an older transfer never takes the state back"
        );
    }

    #[test]
    fn a_whole_state_of_the_version_applied_here_is_a_duplicate_but_not_after_a_reset() {
        let v = DurableView::default();
        let mut q = ApplyQueue::new(1, 0);
        q.offer(tuple(1, 1, vec![]), "s1");
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("s1"));
        // Its acknowledgement was lost and the primary re-shipped version 1 whole.
        assert_eq!(
            q.offer(full_transfer(1, 1), "whole"),
            Offer::Duplicate,
            "version 1 applies once"
        );
        // A demoted member starts over at version 0: its state is not its new primary's.
        q.reset(2, 0);
        assert_eq!(q.offer(full_transfer(2, 0), "whole0"), Offer::Queued);
        assert_eq!(q.next_ready(&v).map(|x| x.1), Some("whole0"));
    }
}
