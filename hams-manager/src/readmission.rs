//! A replaced primary that never died, made a backup again (HAMS §IV-E: full states are
//! replicated, so an old primary is overwritten into a backup).
//!
//! A member killed and restarted comes back as a new process: its liveliness token appears and
//! `detection.rs` makes it the backup of a node running solo. A member cut off by the network
//! (or paused) for less than zenoh's lease is different: it is replaced on suspicion while it
//! still holds its token, and when its link heals no token appears, so nothing would ever bring
//! it back and the node would run without a backup for good.
//!
//! So the failover records each replaced primary that is still alive, with the time of its
//! replacement. A load report (the member's heartbeat) that arrives [`HEARD_AFTER`] or more after
//! that time shows its link carries again (one handled sooner may have been sent before the cut
//! and processed late on a loaded machine); the member is then given the backup role at the node's current epoch,
//! exactly as a restarted member is: the assignment fences it (it refuses anything of an older
//! epoch from then on, and its old epoch's outputs were never taken, since a batch's reply is
//! taken only from the current primary's session), it drops what it held, and the primary's
//! whole-state transfer brings it to the current state. An assignment that does not go through
//! (a link that carries one way only) is tried again only after a newer heartbeat.
//!
//! The backup assignment goes to a member whose link was dark a moment ago and may be dark again
//! (or carry one way only), so it is sent on a thread of its own, one at a time per member: it may
//! wait out its whole timeout, and the manager's thread meanwhile detects, fails over and
//! releases replies for every other member and node. What it brings back is completed on the
//! manager's thread, in the queue's order ([`State::on_readmitted`]): the primary (reachable, it
//! is serving) is told to ship the whole state, unless the node's roles moved on while the
//! assignment was out, in which case the member is tried again later.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use weir_hams::protocol::Role;
use weir_hams::Epoch;
use weir_operators::stateful::StatefulNodeHandle;

use crate::detection::{Event, Readmitted};
use crate::State;

/// How long after a replacement (or a failed re-admission) a heartbeat must arrive to count:
/// two load reports, so that no report sent before a cut counts as a sign of its heal.
const HEARD_AFTER: Duration = Duration::from_secs(1);

impl State {
    /// Records that `prefix` was replaced as a primary while it may still be running.
    pub(crate) fn mark_replaced(&self, prefix: &str) {
        self.replaced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(prefix.to_string(), Instant::now());
    }

    /// Forgets `prefix` as a replaced member (it restarted, or took a role).
    pub(crate) fn forget_replaced(&self, prefix: &str) {
        self.replaced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(prefix);
    }

    /// Whether a heartbeat of `prefix` arrived after `since`.
    fn heard_since(&self, prefix: &str, since: Instant) -> bool {
        self.heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prefix)
            .is_some_and(|&at| at > since)
    }

    /// Whether `prefix` is the primary or the backup of any node.
    fn has_role(&self, prefix: &str) -> bool {
        self.nodes.iter().any(|h| {
            self.roles_of(h.node_id).is_some_and(|r| {
                r.primary.as_deref() == Some(prefix) || r.backup.as_deref() == Some(prefix)
            })
        })
    }

    /// Starts the re-admission of every replaced member heard from since its replacement as the
    /// backup of each node it serves that runs solo (see the module docs): its backup
    /// assignments go out on a thread of their own, and [`State::on_readmitted`] completes them.
    pub(crate) fn readmit_healed(self: &Arc<Self>) {
        let replaced: Vec<(String, Instant)> = self
            .replaced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(m, t)| (m.clone(), *t))
            .collect();
        for (member, since) in replaced {
            if self.in_flight(&member) {
                continue;
            }
            if !self.is_alive(&member) || self.has_role(&member) {
                // Gone: its return is a new token (`detection.rs`). With a role: back already.
                self.forget_replaced(&member);
                continue;
            }
            if !self.heard_since(&member, since + HEARD_AFTER) {
                continue;
            }
            let mut solo = Vec::new();
            for h in &self.nodes {
                let Some(r) = self.roles_of(h.node_id) else {
                    continue;
                };
                let serves = r.members.contains(&member);
                if !serves || r.backup.is_some() || !h.spec.has_backup() {
                    continue;
                }
                if let Some(primary) = r.primary.clone() {
                    solo.push((Arc::clone(h), r.epoch, primary));
                }
            }
            if !solo.is_empty() {
                self.send_readmission(member, solo);
            }
        }
    }

    fn in_flight(&self, member: &str) -> bool {
        self.readmitting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(member)
    }

    /// Assigns `member` the backup role of each of `solo` (node, epoch, its primary) on a thread
    /// of its own, which reports to the manager's queue.
    fn send_readmission(
        self: &Arc<Self>,
        member: String,
        solo: Vec<(Arc<StatefulNodeHandle>, Epoch, String)>,
    ) {
        self.readmitting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(member.clone());
        let state = Arc::clone(self);
        let name = format!("hams-readmit-{}", self.graph);
        let who = member.clone();
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let mut taken = Vec::new();
            let mut refused = false;
            for (h, epoch, primary) in solo {
                info!(node = %h.node, member = %who, epoch, "A replaced primary is heard from again: re-admitted as the backup.");
                let role = Role::Backup {
                    primary: primary.clone(),
                };
                match state.assign(&h, &who, epoch, role) {
                    Ok(_) => taken.push((h.node_id, epoch, primary)),
                    Err(e) => {
                        warn!(node = %h.node, member = %who, error = %e, "Re-admission: the assignment did not go through.");
                        refused = true;
                    }
                }
            }
            let _ = state.events.send(Event::Readmitted(Readmitted {
                member: who,
                taken,
                refused,
            }));
        });
        if let Err(e) = spawned {
            warn!(%member, error = %e, "Re-admission: no thread to send it on.");
            self.readmitting
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&member);
        }
    }

    /// On the manager's thread: each node whose backup role `r.member` took is protected by it
    /// once its primary ships it the whole state, unless the node's roles moved on meanwhile (a
    /// new epoch, another backup): then the member is tried again after a later heartbeat.
    pub(crate) fn on_readmitted(&self, r: Readmitted) {
        let mut again = r.refused;
        for (node, epoch, primary) in r.taken {
            let (Some(h), Some(now)) = (self.handle(node).cloned(), self.roles_of(node)) else {
                continue;
            };
            let unchanged = now.epoch == epoch
                && now.primary.as_deref() == Some(primary.as_str())
                && now.backup.is_none();
            if !unchanged || !self.install_backup(&h, &now, &primary, &r.member) {
                again = true;
            }
        }
        self.readmitting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&r.member);
        if again && !self.has_role(&r.member) {
            // Tried again after its next heartbeat.
            self.mark_replaced(&r.member);
        } else if self.has_role(&r.member) {
            self.forget_replaced(&r.member);
        }
    }
}
