//! What gives a failed member away, and the one queue every event goes through (HAMS §IV-E: a
//! proxy that gets no answer from a peer suspects it and reports it to the manager).
//!
//! A primary is suspected when one of its batches gets no answer within the node's `detect_ms`,
//! or is refused for a stale epoch, and declared dead at once when its liveliness token
//! disappears (a killed process's link drops). A dead backup turns its primary *solo*: the paper
//! does not say how a node without a backup goes on, and waiting for a dead backup would stall
//! every reply that depends on the node. A member that comes (back) alive is made the backup of a
//! primary running solo (re-protection), so a second failure of the node is tolerated again.
//! Suspicions of an epoch already replaced are ignored, so a failure that several batches report
//! is recovered once.
//!
//! A member's load reports (`<prefix>/load`, every half second) are its heartbeat: the manager
//! records when each last arrived, which tells a replaced primary that is reachable again from
//! one still cut off (`readmission.rs`).
//!
//! zenoh's callbacks only put events in the queue; one thread takes them in order, so recoveries
//! run one at a time and never on zenoh's threads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use tracing::{info, warn};
use weir_engine::validate::ReplicaTarget;
use weir_hams::protocol::{durable_key_all, Durable, Role};
use weir_hams::{Epoch, NodeId};
use weir_operators::stateful::Suspicion;
use zenoh::pubsub::Subscriber;
use zenoh::sample::SampleKind;
use zenoh::Wait;

use crate::roles::Roles;
use crate::{ManagerError, State};

/// How often the manager looks for replaced members that are reachable again.
const READMIT_EVERY: Duration = Duration::from_millis(250);

/// What the manager's thread takes from its queue.
pub(crate) enum Event {
    /// A proxy could not reach its primary.
    Suspect(Suspicion),
    /// A member's liveliness token appeared.
    Alive(String),
    /// A member's liveliness token disappeared.
    Gone(String),
    /// A node announced a durable version.
    Durable(Durable),
    /// A replaced member's re-admission assignments came back (`readmission.rs`).
    Readmitted(Readmitted),
    /// The manager is dropped.
    Stop,
}

/// Subscribes to the graph's durability announcements and to every member's liveliness,
/// feeding `events` (and the liveness map the recovery reads).
pub(crate) fn watch(
    state: &Arc<State>,
    events: &Sender<Event>,
) -> Result<Vec<Subscriber<()>>, ManagerError> {
    let mut subscribers = Vec::new();
    let zerr = |e: zenoh::Error| ManagerError(format!("zenoh: {e}"));
    let durable = events.clone();
    subscribers.push(
        state
            .session
            .declare_subscriber(durable_key_all(&state.graph))
            .callback(move |sample| {
                if let Ok(d) = serde_json::from_slice::<Durable>(&sample.payload().to_bytes()) {
                    let _ = durable.send(Event::Durable(d));
                }
            })
            .wait()
            .map_err(zerr)?,
    );
    let mut members: Vec<String> = Vec::new();
    for h in &state.nodes {
        for m in &h.members {
            if let ReplicaTarget::Remote(e) = m {
                if !members.contains(&e.key_prefix) {
                    members.push(e.key_prefix.clone());
                }
            }
        }
    }
    for prefix in members {
        let heard = Arc::clone(state);
        let member = prefix.clone();
        subscribers.push(
            state
                .session
                .declare_subscriber(format!("{prefix}/load"))
                .callback(move |_| {
                    heard
                        .heard
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(member.clone(), Instant::now());
                })
                .wait()
                .map_err(zerr)?,
        );
        let events = events.clone();
        let alive_map = Arc::clone(state);
        subscribers.push(
            state
                .session
                .liveliness()
                .declare_subscriber(format!("{prefix}/alive"))
                .history(true)
                .callback(move |sample| {
                    let up = sample.kind() == SampleKind::Put;
                    alive_map
                        .alive
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(prefix.clone(), up);
                    let _ = events.send(if up {
                        Event::Alive(prefix.clone())
                    } else {
                        Event::Gone(prefix.clone())
                    });
                })
                .wait()
                .map_err(zerr)?,
        );
    }
    Ok(subscribers)
}

impl State {
    /// Whether member `prefix` holds its liveliness token.
    pub(crate) fn is_alive(&self, prefix: &str) -> bool {
        self.alive
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prefix)
            .copied()
            .unwrap_or(false)
    }

    /// The manager's thread: takes events until [`Event::Stop`], and every
    /// [`READMIT_EVERY`] looks for replaced members heard from again.
    pub(crate) fn run(self: &Arc<Self>, rx: &Receiver<Event>) {
        let mut next_readmission = Instant::now() + READMIT_EVERY;
        loop {
            let wait = next_readmission.saturating_duration_since(Instant::now());
            let event = match rx.recv_timeout(wait) {
                Ok(event) => Some(event),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            if Instant::now() >= next_readmission {
                self.readmit_healed();
                next_readmission = Instant::now() + READMIT_EVERY;
            }
            let Some(event) = event else { continue };
            match event {
                Event::Stop => return,
                Event::Durable(d) => {
                    if let Some(h) = self.handle(d.node) {
                        h.on_durable(d.seq);
                    }
                    self.runtime.announce_durable(d);
                }
                Event::Suspect(s) => {
                    let current = self.roles_of(s.node).map(|r| r.epoch);
                    if current == Some(s.epoch) {
                        self.failover(s.node, &format!("suspected: {}", s.why));
                    }
                }
                Event::Readmitted(r) => self.on_readmitted(r),
                Event::Gone(prefix) => self.on_gone(&prefix),
                Event::Alive(prefix) => self.on_alive(&prefix),
            }
        }
    }

    fn on_gone(&self, prefix: &str) {
        for h in self.nodes.clone() {
            let Some(r) = self.roles_of(h.node_id) else {
                continue;
            };
            if r.primary.as_deref() == Some(prefix) {
                self.failover(h.node_id, &format!("`{prefix}` lost its liveliness"));
            } else if r.backup.as_deref() == Some(prefix) {
                // The primary goes on solo until a new backup is installed.
                let primary = r.primary.clone().unwrap_or_default();
                match self.assign(&h, &primary, r.epoch, Role::Primary { backup: None }) {
                    Ok(_) => {
                        info!(node = %h.node, backup = %prefix, "Backup lost: primary runs solo.");
                        self.set_roles(h.node_id, Roles { backup: None, ..r });
                    }
                    Err(e) => warn!(node = %h.node, error = %e, "Could not make the primary solo."),
                }
            }
        }
    }

    fn on_alive(&self, prefix: &str) {
        // A new process (or session): re-protection below, not re-admission.
        self.forget_replaced(prefix);
        for h in self.nodes.clone() {
            let Some(r) = self.roles_of(h.node_id) else {
                continue;
            };
            let is_member = r.members.iter().any(|m| m == prefix);
            let has_role =
                r.primary.as_deref() == Some(prefix) || r.backup.as_deref() == Some(prefix);
            if !is_member || has_role || r.backup.is_some() || !h.spec.has_backup() {
                continue;
            }
            let Some(primary) = r.primary.clone() else {
                continue;
            };
            self.protect(&h, &r, &primary, prefix);
        }
    }
}

/// What a re-admission sent off the manager's thread (`readmission.rs`) reports back.
pub(crate) struct Readmitted {
    /// The member re-admitted.
    pub(crate) member: String,
    /// Each node whose backup role it took: (node, epoch, that epoch's primary).
    pub(crate) taken: Vec<(NodeId, Epoch, String)>,
    /// Whether an assignment did not go through.
    pub(crate) refused: bool,
}
