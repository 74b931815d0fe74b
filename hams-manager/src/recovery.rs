//! The failover of a stateful node's primary (HAMS §IV-C and §IV-E), one at a time on the
//! manager's thread.
//!
//! **Recovery of a failed primary F:**
//! 1. pause F's proxy; promote F's backup at epoch + 1 (it drops the states it received and did
//!    not apply, and answers with its applied version, the *cut*);
//! 2. roll F's proxy back to the cut: every request whose rows F ran above it runs again from the
//!    ingress under its next attempt id, which makes every row of its old attempt stale (dropped
//!    wherever met, its held reply discarded);
//! 3. fixpoint ([`weir_hams::rollback::rollback_set`]): every other replicated node that sent a
//!    batch depending on a version above a cut is rolled back too. Its backup is promoted when it
//!    lives, which is faster than rolling the primary back (HAMS §IV-C); when that backup is gone
//!    too (the correlated failure of HAMS §IV-C, Fig. 6), its primary goes back to the state it
//!    retained at its durable version and runs solo at the next epoch;
//! 4. resume every paused proxy on its new primary: batches at or below a cut are resent and
//!    answered from the outputs the promoted backup kept;
//! 5. off the critical path: each rolled-back node's old primary (alive and well) becomes its new
//!    backup by a whole-state transfer (HAMS §IV-E: full states, not updates, are replicated, so
//!    an old primary can be overwritten). F runs solo until a member of F comes (back) alive,
//!    which is made its backup (`detection.rs`). F's old primary is not reused within the
//!    recovery (a stalled process, SIGSTOP, would only block it); if it still holds its
//!    liveliness, it is made the backup once its heartbeat is heard again (`readmission.rs`).
//!
//! Under checkpoints the promoted backup holds the last checkpoint and F's proxy replays every
//! batch since; replies already given stand.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tracing::{debug, error, info};
use weir_hams::protocol::Role;
use weir_hams::rollback::rollback_set;
use weir_hams::{Epoch, NodeId, Seq};
use weir_operators::stateful::StatefulNodeHandle;

use crate::roles::Roles;
use crate::State;

/// One completed failover, for logs, metrics and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    /// The node whose primary failed.
    pub node: String,
    /// What gave it away.
    pub reason: String,
    /// When the manager learnt of it.
    pub detected_at: Instant,
    /// Time from detection to every proxy resumed (promotion, rollback, retries).
    pub protocol: Duration,
    /// Every node rolled back, with its cut.
    pub rolled_back: Vec<(String, Seq)>,
    /// Requests run again.
    pub retried: usize,
    /// Under checkpoints: batches replayed from the checkpoint.
    pub replayed: u64,
}

impl State {
    /// Promotes node `h`'s backup at the next epoch (it runs solo). Returns the cut, the epoch,
    /// the new primary and the old primary, or `None` when no backup can take over.
    fn promote(&self, h: &StatefulNodeHandle) -> Option<(Seq, Epoch, String, Option<String>)> {
        let r = self.roles_of(h.node_id)?;
        let backup = r.backup.clone().filter(|b| self.is_alive(b))?;
        h.pause();
        let epoch = r.epoch + 1;
        let cut = match self.assign(h, &backup, epoch, Role::Primary { backup: None }) {
            Ok(reply) => reply.applied,
            Err(e) => {
                error!(node = %h.node, %backup, error = %e, "The backup refused promotion.");
                return None;
            }
        };
        let roles = Roles {
            epoch,
            primary: Some(backup.clone()),
            backup: None,
            members: r.members.clone(),
        };
        self.set_roles(h.node_id, roles);
        Some((cut, epoch, backup, r.primary.clone()))
    }

    /// Node `h` consumed speculative input that is being rolled back and has no live backup to
    /// promote (it failed with the upstream primary: HAMS §IV-C, Fig. 6). Its primary goes back
    /// to the state it retained at its durable version (a primary frees a state only once its
    /// backup applied the next one) and runs on solo at the next epoch. Returns the version it
    /// went back to, the epoch and the primary.
    fn roll_back_primary(&self, h: &StatefulNodeHandle) -> Option<(Seq, Epoch, String)> {
        let r = self.roles_of(h.node_id)?;
        let primary = r.primary.clone().filter(|p| self.is_alive(p))?;
        h.pause();
        let epoch = r.epoch + 1;
        let role = Role::Primary { backup: None };
        let to = h.status().durable;
        let cut = match self.send_assignment(h, &primary, epoch, role, Some(to)) {
            Ok(reply) => reply.applied,
            Err(e) => {
                error!(node = %h.node, %primary, error = %e, "The primary could not roll back.");
                return None;
            }
        };
        info!(node = %h.node, %primary, to = cut, epoch, "No backup to promote: the primary rolled back to its retained state.");
        self.set_roles(
            h.node_id,
            Roles {
                epoch,
                primary: Some(primary.clone()),
                backup: None,
                members: r.members,
            },
        );
        Some((cut, epoch, primary))
    }

    fn record(&self, recovery: Recovery) {
        info!(node = %recovery.node, reason = %recovery.reason, protocol_ms = recovery.protocol.as_secs_f64() * 1e3, rolled_back = ?recovery.rolled_back, retried = recovery.retried, "Failover done.");
        self.recoveries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(recovery);
    }

    /// Recovers node `failed` from the failure of its primary (the module docs' steps).
    pub(crate) fn failover(&self, failed: NodeId, reason: &str) {
        let Some(h) = self.handle(failed).cloned() else {
            return;
        };
        let detected_at = Instant::now();
        let roles = self.roles_of(failed);
        let no_backup = roles
            .as_ref()
            .is_none_or(|r| r.backup.as_ref().is_none_or(|b| !self.is_alive(b)));
        let primary_alive = roles
            .as_ref()
            .and_then(|r| r.primary.as_ref())
            .is_some_and(|p| self.is_alive(p));
        if no_backup && primary_alive {
            // Nothing to promote, and the primary is there: it is slow, not gone; its proxy
            // sends the lost batches again.
            debug!(node = %h.node, %reason, "Primary suspected without a backup to promote; batches are resent.");
            return;
        }
        let Some((cut, epoch, primary, failed_primary)) = self.promote(&h) else {
            error!(node = %h.node, %reason, "Primary lost and no live backup: the node's requests wait for an executor.");
            return;
        };
        if let Some(old) = failed_primary.filter(|p| self.is_alive(p)) {
            // Cut off or paused, not gone: re-admitted once heard from again (`readmission.rs`).
            self.mark_replaced(&old);
        }
        if !h.replicated() {
            // Checkpoints: the promoted backup holds the last checkpoint; the proxy replays every
            // batch since then (replies already given stand, whatever the replay computes).
            h.rollback_to_checkpoint(cut, epoch);
            h.assign_primary(epoch, primary);
            self.record(Recovery {
                node: h.node.clone(),
                reason: reason.to_string(),
                detected_at,
                protocol: detected_at.elapsed(),
                rolled_back: vec![(h.node.clone(), cut)],
                retried: 0,
                replayed: h.status().last_seq.saturating_sub(cut),
            });
            return;
        }
        let mut resumed: BTreeMap<NodeId, (Epoch, String)> = BTreeMap::new();
        resumed.insert(failed, (epoch, primary));
        let mut retried = 0usize;
        let mut retry = |ids: Vec<u64>| {
            for id in ids {
                if self.runtime.retry(id) {
                    retried += 1;
                }
            }
        };
        retry(h.rollback(cut, epoch));
        let candidates: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.replicated() && n.node_id != failed)
            .map(|n| n.node_id)
            .collect();
        let mut later: Vec<(NodeId, Seq, Epoch)> = Vec::new();
        // A rolled-back node's old primary is healthy: it becomes the new backup by a whole-state
        // transfer, once every proxy runs again (off the recovery's critical path).
        let mut demoted: Vec<(NodeId, String)> = Vec::new();
        let cuts = rollback_set(
            failed,
            cut,
            &candidates,
            |n| self.handle(n).map(|q| q.sent_deps()).unwrap_or_default(),
            |n| {
                let Some(q) = self.handle(n) else { return 0 };
                // The backup is promoted when it lives; otherwise the primary rolls back.
                if let Some((cut, epoch, primary, old)) = self.promote(q) {
                    later.push((n, cut, epoch));
                    resumed.insert(n, (epoch, primary));
                    if let Some(old) = old {
                        demoted.push((n, old));
                    }
                    return cut;
                }
                match self.roll_back_primary(q) {
                    Some((cut, epoch, primary)) => {
                        later.push((n, cut, epoch));
                        resumed.insert(n, (epoch, primary));
                        cut
                    }
                    None => {
                        error!(node = %q.node, "A downstream node consumed speculative output but has neither a backup nor a primary to roll back.");
                        Seq::MAX
                    }
                }
            },
        );
        for (n, cut, epoch) in later {
            if let Some(q) = self.handle(n) {
                retry(q.rollback(cut, epoch));
            }
        }
        for (n, (epoch, primary)) in &resumed {
            if let Some(q) = self.handle(*n) {
                q.assign_primary(*epoch, primary.clone());
            }
        }
        let recovery = Recovery {
            node: h.node.clone(),
            reason: reason.to_string(),
            detected_at,
            protocol: detected_at.elapsed(),
            rolled_back: cuts
                .iter()
                .filter_map(|(n, c)| self.handle(*n).map(|q| (q.node.clone(), *c)))
                .collect(),
            retried,
            replayed: 0,
        };
        self.record(recovery);
        for (n, old) in demoted {
            let (Some(q), Some(r)) = (self.handle(n).cloned(), self.roles_of(n)) else {
                continue;
            };
            if let (Some(primary), true) = (r.primary.clone(), self.is_alive(&old)) {
                self.protect(&q, &r, &primary, &old);
            }
        }
    }
}
