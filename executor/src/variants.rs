//! Variants loaded and unloaded on command (model-less serving, after "INFaaS: Automated
//! Model-less Inference Serving", §3.2 and §4.1: a cold start loads the chosen variant on the
//! chosen worker).
//!
//! An executor started with a repository (`weir executor --repository DIR`) answers commands on
//! `<prefix>/control/variants`: [`VariantCommand`]s that load or unload a variant by name. Loading
//! reads files, takes memory and cores, and puts a model on the network, so the commands are
//! control messages: each is signed with the process's control key (the same HMAC-SHA256 key and
//! scheme as HAMS role assignments, [`weir_hams::control_auth::sign_message`]) over its canonical
//! bytes and the key expression it is sent to, so a command for one executor does not verify at
//! another. Replays are refused: a command carries a `sequence` (the sender's clock in
//! microseconds, made strictly increasing per sending process), the executor takes only a
//! sequence above the last it took, and only within [`FRESHNESS`] of its own clock, so a
//! recorded command cannot be replayed to a restarted executor either. Without a control key an
//! executor takes no command at all. A command is at most [`MAX_COMMAND_BYTES`]; anything
//! refused is logged and answered with an error, and the executor keeps serving.
//!
//! A variant is resolved in the executor's own repository through a [`VariantSource`]: the
//! network names a variant, never a path, and the source verifies the file's SHA-256 against the
//! repository's record before it is loaded. The load runs on its own thread (other models keep
//! serving); the command's reply comes when the variant is served under `<prefix>/model/<name>`
//! and listed in the executor's load reports, or says why it could not be. Unloading stops taking
//! new jobs (the queryable goes first), answers the queued ones, then drops the sessions.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The most bytes a command may hold.
pub const MAX_COMMAND_BYTES: usize = 4096;

/// How far a command's sequence (a time) may be from the executor's clock.
pub const FRESHNESS: Duration = Duration::from_secs(60);

/// The longest variant name taken.
pub const MAX_VARIANT_NAME: usize = 256;

/// The key expression an executor under `prefix` takes commands on.
pub fn control_key(prefix: &str) -> String {
    format!("{}/control/variants", prefix.trim_end_matches('/'))
}

/// Load or unload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Load the variant and serve it.
    Load,
    /// Stop serving it, answer its queued jobs, drop its sessions.
    Unload,
}

/// A signed load or unload command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantCommand {
    /// What to do.
    pub action: Action,
    /// The variant's name in the executor's repository.
    pub variant: String,
    /// The sender's clock in microseconds since the Unix epoch, strictly increasing per sender.
    pub sequence: u64,
    /// HMAC-SHA256 (hex) of the other fields and the target key expression.
    pub signature: Option<String>,
}

/// The last sequence this process issued.
static LAST_ISSUED: AtomicU64 = AtomicU64::new(0);

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl VariantCommand {
    /// An unsigned command with a fresh sequence (the clock, or one more than the last issued).
    pub fn new(action: Action, variant: &str) -> Self {
        let now = now_us();
        let previous = LAST_ISSUED
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
                Some(now.max(last.saturating_add(1)))
            })
            .unwrap_or(now);
        VariantCommand {
            action,
            variant: variant.to_string(),
            sequence: now.max(previous.saturating_add(1)),
            signature: None,
        }
    }

    /// The bytes signed: the command's JSON without its signature (fields in declaration order,
    /// no maps: canonical).
    fn body(&self) -> Vec<u8> {
        let unsigned = VariantCommand {
            signature: None,
            ..self.clone()
        };
        serde_json::to_vec(&unsigned).unwrap_or_default()
    }

    /// This command signed with `key` for the executor whose control key expression is `target`.
    pub fn signed(mut self, key: &[u8], target: &str) -> Self {
        self.signature = None;
        self.signature = Some(weir_hams::control_auth::sign_message(
            key,
            target,
            &self.body(),
        ));
        self
    }

    /// Whether the signature verifies for `target` under `key`.
    pub fn verifies(&self, key: &[u8], target: &str) -> bool {
        self.signature
            .as_deref()
            .is_some_and(|s| weir_hams::control_auth::verify_message(key, target, &self.body(), s))
    }

    /// The JSON bytes sent.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What a command that succeeded answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantReply {
    /// What was done.
    pub action: Action,
    /// The variant.
    pub variant: String,
    /// For a load: how long it took, in milliseconds (0 when it was loaded already).
    pub load_ms: f64,
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Larger than [`MAX_COMMAND_BYTES`].
    #[error("the command is larger than {MAX_COMMAND_BYTES} bytes")]
    TooLarge,
    /// Not a command.
    #[error("undecodable command: {0}")]
    Malformed(String),
    /// This executor has no control key: it takes no command.
    #[error("this executor takes no load or unload command (start it with --control-key-file)")]
    NoKey,
    /// Unsigned, or signed with another key or for another executor.
    #[error("the command is not signed with this executor's control key")]
    Unauthenticated,
    /// A sequence already taken, or too far from the executor's clock.
    #[error("the command is a replay or stale (sequence {0})")]
    Replayed(u64),
}

/// Checks commands' signatures and sequences; remembers the last sequence taken.
#[derive(Debug)]
pub struct CommandGate {
    target: String,
    last: std::sync::Mutex<u64>,
}

impl CommandGate {
    /// A gate for commands sent to the key expression `target`.
    pub fn new(target: String) -> Self {
        CommandGate {
            target,
            last: std::sync::Mutex::new(0),
        }
    }

    /// The command in `bytes` when it is authentic under `key` and not a replay; takes its
    /// sequence.
    ///
    /// # Errors
    /// Why it is refused.
    pub fn admit(&self, key: Option<&[u8]>, bytes: &[u8]) -> Result<VariantCommand, Refused> {
        if bytes.len() > MAX_COMMAND_BYTES {
            return Err(Refused::TooLarge);
        }
        let command: VariantCommand =
            serde_json::from_slice(bytes).map_err(|e| Refused::Malformed(e.to_string()))?;
        if command.variant.is_empty() || command.variant.len() > MAX_VARIANT_NAME {
            return Err(Refused::Malformed(format!(
                "a variant name holds 1 to {MAX_VARIANT_NAME} bytes"
            )));
        }
        let key = key.ok_or(Refused::NoKey)?;
        if !command.verifies(key, &self.target) {
            return Err(Refused::Unauthenticated);
        }
        let now = now_us();
        let window = u64::try_from(FRESHNESS.as_micros()).unwrap_or(u64::MAX);
        if command.sequence.abs_diff(now) > window {
            return Err(Refused::Replayed(command.sequence));
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if command.sequence <= *last {
            return Err(Refused::Replayed(command.sequence));
        }
        *last = command.sequence;
        Ok(command)
    }
}

/// A model file and how to run it: a variant resolved in the executor's repository (its file
/// verified), or a model given at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedVariant {
    /// The ONNX file, its SHA-256 checked against the repository's record.
    pub path: PathBuf,
    /// Intra-op threads per session.
    pub intra_threads: usize,
    /// Most rows per call.
    pub max_batch: usize,
    /// The batch its first dimension is fixed to (a batch-specialised build), if any.
    pub fixed_batch: Option<usize>,
    /// ONNX Runtime's graph-optimisation level for its sessions.
    pub graph_level: weir_engine::spec::GraphLevel,
}

/// Where an executor finds the variants it is told to load: its own repository.
pub trait VariantSource: Send + Sync + std::fmt::Debug {
    /// The variant named `name`, its file verified.
    ///
    /// # Errors
    /// When there is no such variant or its file does not match the record, in words.
    fn resolve(&self, name: &str) -> Result<ResolvedVariant, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a-control-key-for-tests-0123456789";
    const TARGET: &str = "weir/executor/a/control/variants";

    #[test]
    fn signed_commands_are_admitted_once_and_forged_ones_never() {
        let gate = CommandGate::new(TARGET.into());
        let load = VariantCommand::new(Action::Load, "mlp.fp32").signed(KEY, TARGET);
        assert_eq!(gate.admit(Some(KEY), &load.to_bytes()), Ok(load.clone()));
        assert_eq!(
            gate.admit(Some(KEY), &load.to_bytes()),
            Err(Refused::Replayed(load.sequence))
        );
        let unsigned = VariantCommand::new(Action::Load, "mlp.fp32");
        assert_eq!(
            gate.admit(Some(KEY), &unsigned.to_bytes()),
            Err(Refused::Unauthenticated)
        );
        let wrong_key =
            VariantCommand::new(Action::Load, "x").signed(b"another-key-0123456789", TARGET);
        assert_eq!(
            gate.admit(Some(KEY), &wrong_key.to_bytes()),
            Err(Refused::Unauthenticated)
        );
        let elsewhere =
            VariantCommand::new(Action::Load, "x").signed(KEY, "weir/executor/b/control/variants");
        assert_eq!(
            gate.admit(Some(KEY), &elsewhere.to_bytes()),
            Err(Refused::Unauthenticated)
        );
        let mut tampered = VariantCommand::new(Action::Load, "x").signed(KEY, TARGET);
        tampered.action = Action::Unload;
        assert_eq!(
            gate.admit(Some(KEY), &tampered.to_bytes()),
            Err(Refused::Unauthenticated)
        );
        let mut stale = VariantCommand::new(Action::Load, "x");
        stale.sequence -= 2 * 60_000_000;
        let stale = stale.signed(KEY, TARGET);
        assert!(matches!(
            CommandGate::new(TARGET.into()).admit(Some(KEY), &stale.to_bytes()),
            Err(Refused::Replayed(_))
        ));
        let fresh = VariantCommand::new(Action::Unload, "mlp.fp32").signed(KEY, TARGET);
        assert!(gate.admit(None, &fresh.to_bytes()) == Err(Refused::NoKey));
        assert!(gate.admit(Some(KEY), &fresh.to_bytes()).is_ok());
    }

    #[test]
    fn oversized_or_malformed_commands_are_refused() {
        let gate = CommandGate::new(TARGET.into());
        let big = vec![b' '; MAX_COMMAND_BYTES + 1];
        assert_eq!(gate.admit(Some(KEY), &big), Err(Refused::TooLarge));
        assert!(matches!(
            gate.admit(Some(KEY), b"{\"action\":\"load\"}"),
            Err(Refused::Malformed(_))
        ));
        let long = VariantCommand::new(Action::Load, &"v".repeat(MAX_VARIANT_NAME + 1))
            .signed(KEY, TARGET);
        assert!(matches!(
            gate.admit(Some(KEY), &long.to_bytes()),
            Err(Refused::Malformed(_))
        ));
    }

    #[test]
    fn sequences_issued_in_one_process_increase() {
        let a = VariantCommand::new(Action::Load, "x").sequence;
        let b = VariantCommand::new(Action::Load, "x").sequence;
        assert!(b > a);
    }
}
