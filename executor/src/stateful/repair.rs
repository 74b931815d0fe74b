//! What repairs a lost protocol message.
//!
//! A member sends everything but its state tuples without waiting for room on a link (see
//! [`Delivery`](super::Delivery)), and zenoh drops a put to a peer this session has no route to:
//! after a partition heals, the backup's link to the graph may carry again (so the manager
//! re-admits it) while the primary's own session to it is still being re-established. A backup
//! applies versions strictly in order, so one lost tuple would leave every later version
//! undurable for good, and every reply that waits on them held with it; one lost announcement
//! of a node's last version before the load paused would hold its replies the same way.
//!
//! Two repairs, both run on the control thread's tick:
//! - **re-ship**: while versions the primary made wait for its backup's acknowledgement and none
//!   has come for a while, the primary ships its latest version *whole* again (what a new backup
//!   receives), which the backup applies over any gap. The wait starts at [`FIRST_WAIT`] and
//!   doubles after each re-ship nobody acknowledged, up to [`LAST_WAIT`], so a link that is still
//!   dark, or a backup that is merely slow (a tuple waiting for an upstream node's durability), is
//!   not flooded with whole states; any acknowledgement, a new epoch or another backup starts it
//!   over. The backup acknowledges and announces again a version it already applied
//!   (`control.rs`), so a lost acknowledgement is repaired by the next re-ship too;
//! - **re-announce**: every [`ANNOUNCE_EVERY`] a member announces again the version it knows
//!   durable (a backup: the one it applied; a primary: its durable floor), when it moved since
//!   its last repeat. Announcements only ever raise what a receiver knows, so a repeat is harmless.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::info;
use weir_hams::protocol::{member_key, Mode, StateHeader};
use weir_hams::{Epoch, Seq};
use weir_operators::stateful::state::StateUpdate;

use super::{announce, lock, put, tuple_frame, Context, Delivery, Inner, Ship};
use weir_hams::protocol::{Durable, Role};

/// The first wait for an acknowledgement before a re-ship. An acknowledgement is one apply and
/// one round trip behind its tuple (milliseconds on any network a graph spans), and the run
/// thread's update stage already re-checks its backup every 100 ms; twice that is past any
/// acknowledgement merely in transit.
pub(super) const FIRST_WAIT: Duration = Duration::from_millis(200);

/// The longest wait between re-ships to a backup that answers none.
pub(super) const LAST_WAIT: Duration = Duration::from_millis(3_200);

/// How often a member announces its durable version again. Announcements are lost only around a
/// fault, which detection (hundreds of milliseconds) and re-admission (a second) take longer to
/// handle; a repeat a second is a few bytes a second per member.
pub(super) const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);

/// The primary's latest version as a whole-state transfer to `backup` at `epoch`, applied once
/// every version it depends on is durable.
pub(super) fn whole_state(inner: &Inner, model: &str, backup: &str, epoch: Epoch) -> Option<Ship> {
    let (&seq, (_, state)) = inner.retained.last_key_value()?;
    Some(Ship {
        key: member_key(backup, model, "state"),
        header: StateHeader {
            epoch,
            seq,
            deps: super::control::undurable_deps(&inner.retained),
            request_ids: Vec::new(),
            row_hashes: Vec::new(),
            full: true,
            state_bytes: 0,
        },
        state: StateUpdate::Replace(Arc::clone(state)),
        reply: Vec::new(),
    })
}

/// The control thread's repairs.
#[derive(Debug)]
pub(super) struct Repair {
    reship: Reship,
    /// The (graph, announcement) last repeated, and when.
    announced: Option<(String, Durable)>,
    announced_at: Instant,
}

impl Repair {
    pub(super) fn new() -> Self {
        Repair {
            reship: Reship {
                seen: None,
                since: Instant::now(),
                wait: FIRST_WAIT,
            },
            announced: None,
            announced_at: Instant::now(),
        }
    }

    /// Called on the control thread after each message and at least every few tens of
    /// milliseconds.
    pub(super) fn tick(&mut self, ctx: &Context) {
        self.reship.tick(ctx);
        if self.announced_at.elapsed() < ANNOUNCE_EVERY {
            return;
        }
        self.announced_at = Instant::now();
        let now = own_durable(&lock(&ctx.shared));
        if now.is_some() && now != self.announced {
            if let Some((graph, d)) = &now {
                announce(ctx, graph, *d);
            }
            self.announced = now;
        }
    }
}

/// The graph and the version this member knows durable: a backup's applied version, a
/// primary's durable floor (none before a role, or at the initial version 0).
fn own_durable(inner: &Inner) -> Option<(String, Durable)> {
    let a = inner.assign.as_ref()?;
    let (epoch, seq) = match a.role {
        Role::Backup { .. } => (inner.apply.epoch(), inner.apply.applied()),
        Role::Primary { .. } => (a.epoch, inner.floor()),
    };
    (seq > 0 && a.mode != Mode::None).then(|| {
        (
            a.graph.clone(),
            Durable {
                node: a.node_id,
                epoch,
                seq,
            },
        )
    })
}

/// What the backup has shown of its progress, and when it last did.
#[derive(Debug)]
struct Reship {
    /// (epoch, backup, acknowledged version) when progress was last seen.
    seen: Option<(Epoch, String, Seq)>,
    since: Instant,
    wait: Duration,
}

impl Reship {
    /// Re-ships the latest version when the backup has been silent too long.
    fn tick(&mut self, ctx: &Context) {
        let ship = {
            let inner = lock(&ctx.shared);
            let Some(progress) = waiting_on_backup(&inner) else {
                self.seen = None;
                return;
            };
            if self.seen.as_ref() != Some(&progress) {
                self.seen = Some(progress);
                self.since = Instant::now();
                self.wait = FIRST_WAIT;
                return;
            }
            if self.since.elapsed() < self.wait {
                return;
            }
            let (epoch, backup, acked) = progress;
            let ship = whole_state(&inner, &ctx.model, &backup, epoch);
            if let Some(s) = &ship {
                info!(executor = %ctx.executor, model = %ctx.model, %backup, epoch, acked, seq = s.header.seq, waited_ms = self.wait.as_millis() as u64, "The backup acknowledged nothing: its latest version is shipped whole again.");
            }
            ship
        };
        if let Some(ship) = ship {
            put(
                ctx,
                ship.key,
                tuple_frame(ship.header, &ship.state, &ship.reply),
                Delivery::OrDrop,
            );
        }
        self.since = Instant::now();
        self.wait = (self.wait * 2).min(LAST_WAIT);
    }
}

/// (epoch, backup, acknowledged version) when this member is a primary whose backup has not
/// acknowledged its latest version; `None` otherwise. Only modes that ship every version wait
/// on acknowledgements (under checkpoints a backup hears only every n-th version).
fn waiting_on_backup(inner: &Inner) -> Option<(Epoch, String, Seq)> {
    let assign = inner.assign.as_ref()?;
    if !matches!(assign.mode, Mode::Nspb | Mode::Remus) {
        return None;
    }
    let backup = inner.backup_prefix()?;
    let (&latest, _) = inner.retained.last_key_value()?;
    (latest > inner.acked).then_some((assign.epoch, backup, inner.acked))
}
