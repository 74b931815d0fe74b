//! Each stateful node's roles (which member is primary, which is backup, at which epoch), where
//! the manager keeps them, and the assignments that tell the members.
//!
//! An assignment is a zenoh query to the member's `assign` key, signed when a control key is
//! installed. The member's reply carries its applied version (a promoted backup's cut, a rolled
//! back primary's version) and names its zenoh session, which the manager records for the
//! transport: a batch's reply is taken only from its primary's session.
//!
//! Every change of roles goes through [`RoleStore::set`], and is made before the recovery step
//! that depends on it, so a store that writes through a replicated log would let a new manager
//! resume from the last committed roles: the paper replicates its manager by state machine
//! replication (HAMS §III-A). [`InMemoryRoles`] is the single-process store used here; with one
//! manager, the manager's own failure is outside what it tolerates.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::{info, warn};
use weir_engine::spec::ReplicationMode;
use weir_engine::validate::ReplicaTarget;
use weir_hams::protocol::{member_key, Assign, AssignReply, Mode, Role};
use weir_hams::{Epoch, NodeId, Seq};
use weir_operators::stateful::StatefulNodeHandle;
use zenoh::query::QueryTarget;
use zenoh::Wait;

use crate::{ManagerError, State};

/// How long a role assignment may take.
const ASSIGN_TIMEOUT: Duration = Duration::from_secs(3);

/// One stateful node's roles: what every replica of a replicated manager must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roles {
    /// The epoch of the current primary.
    pub epoch: Epoch,
    /// The primary's key prefix.
    pub primary: Option<String>,
    /// The backup's key prefix (none: the primary runs solo).
    pub backup: Option<String>,
    /// Every executor that may serve the node, in the graph's order.
    pub members: Vec<String>,
}

/// Where the manager keeps each node's [`Roles`] (see the module docs).
pub trait RoleStore: Send + Sync {
    /// The roles of `node`.
    fn get(&self, node: NodeId) -> Option<Roles>;
    /// Records the roles of `node`.
    fn set(&self, node: NodeId, roles: Roles);
}

/// The single-process [`RoleStore`].
#[derive(Debug, Default)]
pub struct InMemoryRoles(Mutex<HashMap<NodeId, Roles>>);

impl RoleStore for InMemoryRoles {
    fn get(&self, node: NodeId) -> Option<Roles> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node)
            .cloned()
    }

    fn set(&self, node: NodeId, roles: Roles) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, roles);
    }
}

fn mode_of(h: &StatefulNodeHandle) -> Mode {
    match h.spec.mode {
        ReplicationMode::None => Mode::None,
        ReplicationMode::Nspb => Mode::Nspb,
        ReplicationMode::Remus => Mode::Remus,
        ReplicationMode::Checkpoint => Mode::Checkpoint,
    }
}

impl State {
    pub(crate) fn roles_of(&self, node: NodeId) -> Option<Roles> {
        self.roles.get(node)
    }

    pub(crate) fn set_roles(&self, node: NodeId, roles: Roles) {
        self.roles.set(node, roles);
    }

    pub(crate) fn assign(
        &self,
        h: &StatefulNodeHandle,
        prefix: &str,
        epoch: Epoch,
        role: Role,
    ) -> Result<AssignReply, String> {
        self.send_assignment(h, prefix, epoch, role, None)
    }

    /// Sends member `prefix` of node `h` its role at `epoch` (with `rollback_to`, a primary's
    /// rollback to its retained state) and waits for its answer.
    pub(crate) fn send_assignment(
        &self,
        h: &StatefulNodeHandle,
        prefix: &str,
        epoch: Epoch,
        role: Role,
        rollback_to: Option<Seq>,
    ) -> Result<AssignReply, String> {
        let mut a = Assign {
            graph: self.graph.clone(),
            node_id: h.node_id,
            epoch,
            role,
            mode: mode_of(h),
            state: h.spec.state.clone(),
            inputs: h.inputs.clone(),
            outputs: h.outputs.clone(),
            checkpoint_every: h.spec.checkpoint_every,
            rollback_to,
            sequences: h.spec.sequences.clone(),
            constants: h.spec.constants.clone(),
            signature: None,
        };
        let key = member_key(prefix, &h.node, "assign");
        if let Some(secret) = weir_hams::control_auth::key() {
            a.signature = Some(weir_hams::control_auth::sign(secret, &key, &a));
        }
        let body = serde_json::to_vec(&a).map_err(|e| e.to_string())?;
        let replies = self
            .session
            .get(key)
            .payload(body)
            .target(QueryTarget::BestMatching)
            .timeout(ASSIGN_TIMEOUT)
            .wait()
            .map_err(|e| e.to_string())?;
        match replies.recv() {
            Ok(reply) => match reply.result() {
                Ok(sample) => {
                    let taken = serde_json::from_slice::<AssignReply>(&sample.payload().to_bytes())
                        .map_err(|e| format!("bad assignment reply: {e}"))?;
                    if let Some(id) = reply.replier_id() {
                        self.members.set(prefix, id.zid());
                    }
                    Ok(taken)
                }
                Err(err) => Err(String::from_utf8_lossy(&err.payload().to_bytes()).into_owned()),
            },
            Err(_) => Err(format!("`{prefix}` did not answer its role assignment")),
        }
    }

    /// Waits up to `wait_alive` for node `h`'s members, makes the first its primary and the
    /// second (when the node has a backup and it is alive) its backup, at epoch 1.
    pub(crate) fn initial_roles(
        &self,
        h: &Arc<StatefulNodeHandle>,
        wait_alive: Duration,
    ) -> Result<(), ManagerError> {
        let members: Vec<String> = h
            .members
            .iter()
            .filter_map(|m| match m {
                ReplicaTarget::Remote(e) => Some(e.key_prefix.clone()),
                ReplicaTarget::Local => None,
            })
            .collect();
        let Some(primary) = members.first().cloned() else {
            return Err(ManagerError(format!("node `{}` has no executor", h.node)));
        };
        let deadline = Instant::now() + wait_alive;
        while !members.iter().all(|m| self.is_alive(m)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !self.is_alive(&primary) {
            return Err(ManagerError(format!(
                "node `{}`: executor `{primary}` is not alive",
                h.node
            )));
        }
        let epoch = 1;
        let backup = members
            .get(1)
            .filter(|b| h.spec.has_backup() && self.is_alive(b))
            .cloned();
        if let Some(b) = &backup {
            self.assign(
                h,
                b,
                epoch,
                Role::Backup {
                    primary: primary.clone(),
                },
            )
            .map_err(|e| ManagerError(format!("node `{}`: backup `{b}`: {e}", h.node)))?;
        } else if h.spec.has_backup() {
            warn!(node = %h.node, "The backup is not alive: the primary starts solo.");
        }
        self.assign(
            h,
            &primary,
            epoch,
            Role::Primary {
                backup: backup.clone(),
            },
        )
        .map_err(|e| ManagerError(format!("node `{}`: primary `{primary}`: {e}", h.node)))?;
        self.set_roles(
            h.node_id,
            Roles {
                epoch,
                primary: Some(primary.clone()),
                backup,
                members,
            },
        );
        h.assign_primary(epoch, primary);
        Ok(())
    }

    /// Makes `backup` the backup of `primary` (the primary sends it its whole state). Returns
    /// whether both took their roles.
    pub(crate) fn protect(
        &self,
        h: &StatefulNodeHandle,
        r: &Roles,
        primary: &str,
        backup: &str,
    ) -> bool {
        let role = Role::Backup {
            primary: primary.to_string(),
        };
        if let Err(e) = self.assign(h, backup, r.epoch, role) {
            warn!(node = %h.node, %backup, error = %e, "Re-protection: the new backup refused.");
            return false;
        }
        self.install_backup(h, r, primary, backup)
    }

    /// Tells `primary`, whose `backup` took its role at `r.epoch` already, to ship its whole
    /// state to it, and records the backup. Returns whether the primary took the role.
    pub(crate) fn install_backup(
        &self,
        h: &StatefulNodeHandle,
        r: &Roles,
        primary: &str,
        backup: &str,
    ) -> bool {
        let role = Role::Primary {
            backup: Some(backup.to_string()),
        };
        match self.assign(h, primary, r.epoch, role) {
            Ok(_) => {
                info!(node = %h.node, %primary, %backup, epoch = r.epoch, "Re-protected: a new backup took the whole state.");
                self.set_roles(
                    h.node_id,
                    Roles {
                        backup: Some(backup.to_string()),
                        ..r.clone()
                    },
                );
                true
            }
            Err(e) => {
                warn!(node = %h.node, error = %e, "Re-protection: the primary refused.");
                false
            }
        }
    }
}
