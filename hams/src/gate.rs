//! The frontend's release rule (HAMS, §IV-D): a reply leaves the graph only when every
//! state version it depends on is durable, so a reply once released is never contradicted by a
//! failover. Replies that depend on nothing replicated pass straight through.
//!
//! The gate is generic over the reply (`R`) so it holds whatever the egress answers with. It checks
//! every replicated node on the reply's lineage, not only the nearest ones: durability of a farther
//! one is implied (Algorithm 2), so the extra checks never hold a reply longer.

use std::collections::HashMap;

use crate::durability::DurableView;
use crate::protocol::{Dep, Durable};

/// Replies waiting for durability.
#[derive(Debug)]
pub struct ReleaseGate<R> {
    view: DurableView,
    held: HashMap<u64, (Vec<Dep>, R)>,
}

impl<R> Default for ReleaseGate<R> {
    fn default() -> Self {
        ReleaseGate {
            view: DurableView::default(),
            held: HashMap::new(),
        }
    }
}

impl<R> ReleaseGate<R> {
    /// Offers request `id`'s reply depending on `deps`: handed back when it may go now, held
    /// otherwise (replacing a reply already held for `id`).
    pub fn offer(&mut self, id: u64, deps: Vec<Dep>, reply: R) -> Option<R> {
        if self.view.all_durable(&deps) {
            self.held.remove(&id);
            return Some(reply);
        }
        self.held.insert(id, (deps, reply));
        None
    }

    /// Takes a durability announcement; returns the replies it releases.
    pub fn announce(&mut self, d: Durable) -> Vec<(u64, R)> {
        if !self.view.announce(d) {
            return Vec::new();
        }
        let ready: Vec<u64> = self
            .held
            .iter()
            .filter(|(_, (deps, _))| self.view.all_durable(deps))
            .map(|(&id, _)| id)
            .collect();
        ready
            .into_iter()
            .filter_map(|id| self.held.remove(&id).map(|(_, r)| (id, r)))
            .collect()
    }

    /// Drops the reply held for `id` (its request is being retried), handing it back.
    pub fn remove(&mut self, id: u64) -> Option<R> {
        self.held.remove(&id).map(|(_, r)| r)
    }

    /// Replies held now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The durable versions heard of.
    pub fn view(&self) -> &DurableView {
        &self.view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_wait_for_every_dependency_and_leave_once() {
        let mut g = ReleaseGate::default();
        assert_eq!(g.offer(1, vec![], "free"), Some("free"));
        assert_eq!(g.offer(2, vec![(5, 1), (6, 2)], "two"), None);
        assert_eq!(g.offer(3, vec![(5, 2)], "three"), None);
        assert!(g
            .announce(Durable {
                node: 5,
                epoch: 1,
                seq: 1
            })
            .is_empty());
        assert_eq!(
            g.announce(Durable {
                node: 6,
                epoch: 1,
                seq: 2
            }),
            vec![(2, "two")]
        );
        assert_eq!(g.held(), 1);
        assert_eq!(g.remove(3), Some("three"));
        assert!(g
            .announce(Durable {
                node: 5,
                epoch: 1,
                seq: 9
            })
            .is_empty());
        assert_eq!(g.held(), 0);
    }
}
