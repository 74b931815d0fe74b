//! Authentication of the manager's control messages: a role assignment decides who is primary
//! and where state is streamed, and its epoch fences every older one, so a peer that could send
//! one could take a node over for good (an assignment at the largest epoch fences the real
//! manager out). With a shared key (`--control-key-file` on the graph and every executor) the
//! manager signs each assignment with HMAC-SHA256 over a canonical encoding of every field and of
//! the member it is for (its assign key), and a member applies only assignments whose signature
//! verifies (compared in constant time). The key is one per process, installed once with
//! [`use_key`], like the zenoh configuration; reading it from its file (a regular file, a capped
//! read) is the caller's.

use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::protocol::Assign;

/// The largest key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;

/// The fewest key bytes accepted.
pub const MIN_KEY_BYTES: usize = 16;

static KEY: OnceLock<Vec<u8>> = OnceLock::new();

/// Errors installing a key.
#[derive(Debug, thiserror::Error)]
pub enum ControlKeyError {
    /// The key is too short or too long.
    #[error("a control key must hold {MIN_KEY_BYTES} to {MAX_KEY_FILE_BYTES} bytes")]
    Size,
    /// A key was installed already.
    #[error("a control key is already in use")]
    AlreadySet,
}

/// Makes `text` (a key file's contents, surrounding whitespace trimmed) this process's control
/// key.
///
/// # Errors
/// When the key is too short or the text too long, or a key is set already.
pub fn use_key(text: &[u8]) -> Result<(), ControlKeyError> {
    let key = text.trim_ascii();
    if key.len() < MIN_KEY_BYTES || text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(ControlKeyError::Size);
    }
    KEY.set(key.to_vec())
        .map_err(|_| ControlKeyError::AlreadySet)
}

/// This process's control key, if one is in use.
pub fn key() -> Option<&'static [u8]> {
    KEY.get().map(Vec::as_slice)
}

fn mac(key: &[u8], target: &str, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(&(target.len() as u64).to_le_bytes());
    mac.update(target.as_bytes());
    mac.update(body);
    mac
}

/// The canonical bytes of `a` without its signature: serde_json writes a struct's fields in
/// declaration order and `Assign` holds no maps, so the JSON of the fields is canonical.
fn assign_body(a: &Assign) -> Vec<u8> {
    let unsigned = Assign {
        signature: None,
        ..a.clone()
    };
    serde_json::to_vec(&unsigned).unwrap_or_default()
}

/// The signature (hex) of the control message `body` (its canonical bytes, signature left out)
/// sent to the key expression `target`. The target comes first, length-prefixed, so a message
/// signed for one receiver does not verify at another. Every control message (HAMS role
/// assignments, executors' variant load/unload commands) is signed this way.
pub fn sign_message(key: &[u8], target: &str, body: &[u8]) -> String {
    mac(key, target, body)
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `signature` (hex) signs `body` for `target` under `key` (constant-time comparison).
pub fn verify_message(key: &[u8], target: &str, body: &[u8], signature: &str) -> bool {
    let Some(signature) = unhex(signature) else {
        return false;
    };
    mac(key, target, body).verify_slice(&signature).is_ok()
}

/// The signature (hex) of `a` sent to the member whose assign key is `target`.
pub fn sign(key: &[u8], target: &str, a: &Assign) -> String {
    sign_message(key, target, &assign_body(a))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `a` carries a valid signature for `target` under `key` (constant-time comparison).
pub fn verify(key: &[u8], target: &str, a: &Assign) -> bool {
    a.signature
        .as_deref()
        .is_some_and(|signature| verify_message(key, target, &assign_body(a), signature))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Mode, Role};

    fn assign() -> Assign {
        Assign {
            graph: "g".into(),
            node_id: 3,
            epoch: 7,
            role: Role::Primary {
                backup: Some("weir/executor/b".into()),
            },
            mode: Mode::Nspb,
            state: Vec::new(),
            inputs: vec!["x".into()],
            outputs: vec!["y".into()],
            checkpoint_every: 0,
            rollback_to: None,
            sequences: None,
            constants: Vec::new(),
            signature: None,
        }
    }

    const KEY: &[u8] = b"0123456789abcdef0123";
    const TARGET: &str = "weir/executor/a/hams/n/assign";

    #[test]
    fn a_signed_assignment_verifies_and_any_change_breaks_it() {
        let mut a = assign();
        a.signature = Some(sign(KEY, TARGET, &a));
        assert!(verify(KEY, TARGET, &a));
        assert!(!verify(b"another key of enough bytes", TARGET, &a));
        assert!(!verify(KEY, "weir/executor/b/hams/n/assign", &a));
        let mut b = a.clone();
        b.epoch = u64::MAX;
        assert!(!verify(KEY, TARGET, &b));
        let mut b = a.clone();
        b.role = Role::Primary {
            backup: Some("weir/executor/rogue".into()),
        };
        assert!(!verify(KEY, TARGET, &b));
    }

    #[test]
    fn unsigned_or_malformed_signatures_fail() {
        let mut a = assign();
        assert!(!verify(KEY, TARGET, &a));
        for bad in ["", "zz", &"0".repeat(64), &"é".repeat(32)] {
            a.signature = Some(bad.to_string());
            assert!(!verify(KEY, TARGET, &a), "{bad}");
        }
    }
}
