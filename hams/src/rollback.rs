//! The rollback set after a stateful primary fails (HAMS, §IV).
//!
//! The failed node's backup is promoted; its applied version is the *cut*: versions above it were
//! speculative and are gone. Every other stateful node that was sent a batch depending on a
//! version above a cut has consumed speculative output, so it is rolled back too, by promoting its
//! own backup (whose applied version becomes its cut) rather than by rolling its primary back.
//! That can make further nodes affected, so the set is a fixpoint. The paper's criterion
//! ("lineage shows a larger sequence from M_f") misses a node affected only through another
//! rolled-back node; the fixpoint does not.

use std::collections::BTreeMap;

use crate::protocol::Dep;
use crate::{NodeId, Seq};

/// Whether a batch with dependencies `deps` consumed a version above some cut.
pub fn depends_on_rolled_back(deps: &[Dep], cuts: &BTreeMap<NodeId, Seq>) -> bool {
    deps.iter()
        .any(|(n, s)| cuts.get(n).is_some_and(|&cut| *s > cut))
}

/// Computes the rollback set starting from `failed` with cut `failed_cut`.
///
/// `candidates` are the other stateful nodes; `sent(n)` the dependencies of every batch node `n`
/// was sent and has not had durable; `promote(n)` rolls node `n` back (promoting its backup) and
/// returns its cut. Returns every rolled-back node with its cut, `failed` included.
pub fn rollback_set(
    failed: NodeId,
    failed_cut: Seq,
    candidates: &[NodeId],
    mut sent: impl FnMut(NodeId) -> Vec<Vec<Dep>>,
    mut promote: impl FnMut(NodeId) -> Seq,
) -> BTreeMap<NodeId, Seq> {
    let mut cuts = BTreeMap::from([(failed, failed_cut)]);
    loop {
        let mut grew = false;
        for &n in candidates {
            if cuts.contains_key(&n) {
                continue;
            }
            if sent(n)
                .iter()
                .any(|deps| depends_on_rolled_back(deps, &cuts))
            {
                let cut = promote(n);
                cuts.insert(n, cut);
                grew = true;
            }
        }
        if !grew {
            return cuts;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollback_set_is_transitive() {
        // a(1) -> b(2) -> c(3); d(4) is on another branch. b consumed a's speculative version 6;
        // c consumed b's version 4 only (its a-dependency came through b, at version 5 <= cut):
        // the paper's criterion misses c, the fixpoint does not.
        let sent = |n: NodeId| -> Vec<Vec<Dep>> {
            match n {
                2 => vec![vec![(1, 6)]],
                3 => vec![vec![(1, 5), (2, 4)]],
                4 => vec![vec![(1, 2)]],
                _ => vec![],
            }
        };
        let cuts_of = |n: NodeId| -> Seq {
            match n {
                2 => 3,
                3 => 7,
                _ => 0,
            }
        };
        let set = rollback_set(1, 5, &[2, 3, 4], sent, cuts_of);
        assert_eq!(set, BTreeMap::from([(1, 5), (2, 3), (3, 7)]));
    }

    #[test]
    fn nothing_downstream_is_rolled_back_without_speculative_consumption() {
        let set = rollback_set(1, 5, &[2], |_| vec![vec![(1, 5)]], |_| unreachable!());
        assert_eq!(set, BTreeMap::from([(1, 5)]));
    }
}
