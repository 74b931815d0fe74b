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
//! (a link that carries one way only) is tried again only after a newer heartbeat, so a member
//! still out of reach costs the manager one assignment timeout per heartbeat it manages to send.

use std::time::{Duration, Instant};

use tracing::info;

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

    /// Makes every replaced member heard from since its replacement the backup of each node it
    /// serves that runs solo (see the module docs).
    pub(crate) fn readmit_healed(&self) {
        let replaced: Vec<(String, Instant)> = self
            .replaced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(m, t)| (m.clone(), *t))
            .collect();
        for (member, since) in replaced {
            if !self.is_alive(&member) || self.has_role(&member) {
                // Gone: its return is a new token (`detection.rs`). With a role: back already.
                self.forget_replaced(&member);
                continue;
            }
            if !self.heard_since(&member, since + HEARD_AFTER) {
                continue;
            }
            let mut refused = false;
            for h in self.nodes.clone() {
                let Some(r) = self.roles_of(h.node_id) else {
                    continue;
                };
                let serves = r.members.contains(&member);
                if !serves || r.backup.is_some() || !h.spec.has_backup() {
                    continue;
                }
                let Some(primary) = r.primary.clone() else {
                    continue;
                };
                info!(node = %h.node, %member, epoch = r.epoch, "A replaced primary is heard from again: re-admitted as the backup.");
                refused |= !self.protect(&h, &r, &primary, &member);
            }
            if refused {
                // Tried again after its next heartbeat.
                self.mark_replaced(&member);
            } else if self.has_role(&member) {
                self.forget_replaced(&member);
            }
        }
    }
}
