//! The sending side of variant commands ([`crate::variants`]): what a model-less server calls to
//! load a variant on a remote executor for a cold start, or to unload one.
//!
//! Each command is signed with this process's control key for the executor it goes to and sent
//! as one zenoh query that waits for the executor's answer, which comes when the load is done;
//! a caller that must not wait (a query path) runs it on a thread of its own. The answer is
//! hostile until parsed: a reply must come from the executor's own zenoh session (its
//! `<prefix>/zid/<zid>` token), or it counts as no answer.

use std::time::Duration;

use zenoh::session::ZenohId;
use zenoh::{Session, Wait};

use super::token_zid;
use crate::protocol::ErrorReply;
use crate::variants::{control_key, Action, VariantCommand, VariantReply};

/// Why a command did not succeed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    /// This process has no control key to sign with.
    #[error("no control key to sign variant commands with (--control-key-file)")]
    NoKey,
    /// The executor answered with an error (refused, or the load failed).
    #[error("executor {executor}: {}", .reply.message)]
    Executor {
        /// Its key prefix.
        executor: String,
        /// What it answered.
        reply: ErrorReply,
    },
    /// No answer from the executor in time (it is gone, its link dropped, or it is slow).
    #[error("executor {0}: no answer")]
    NoAnswer(String),
}

/// Sends `action` on `variant` to the executor under `prefix`, signed with `key`, and waits up
/// to `timeout` for its answer.
///
/// # Errors
/// [`CommandError`]: refused, failed, or unanswered.
pub fn send_command(
    session: &Session,
    key: Option<&[u8]>,
    prefix: &str,
    action: Action,
    variant: &str,
    timeout: Duration,
) -> Result<VariantReply, CommandError> {
    let key = key.ok_or(CommandError::NoKey)?;
    let prefix = prefix.trim_end_matches('/');
    let target = control_key(prefix);
    let command = VariantCommand::new(action, variant).signed(key, &target);
    let no_answer = || CommandError::NoAnswer(prefix.to_string());
    let own = executor_session(session, prefix, timeout).ok_or_else(no_answer)?;
    let replies = session
        .get(&target)
        .payload(command.to_bytes())
        .timeout(timeout)
        .wait()
        .map_err(|_| no_answer())?;
    while let Ok(reply) = replies.recv() {
        if reply.replier_id().map(|id| id.zid()) != Some(own) {
            continue;
        }
        return match reply.result() {
            Ok(sample) => {
                serde_json::from_slice(&sample.payload().to_bytes()).map_err(|_| no_answer())
            }
            Err(e) => Err(ErrorReply::parse(&e.payload().to_bytes()).map_or_else(
                no_answer,
                |reply| CommandError::Executor {
                    executor: prefix.to_string(),
                    reply,
                },
            )),
        };
    }
    Err(no_answer())
}

/// The zenoh session id the executor under `prefix` declares (`<prefix>/zid/<zid>`).
fn executor_session(session: &Session, prefix: &str, timeout: Duration) -> Option<ZenohId> {
    let tokens = session
        .liveliness()
        .get(format!("{prefix}/zid/*"))
        .timeout(timeout)
        .wait()
        .ok()?;
    while let Ok(reply) = tokens.recv() {
        if let Ok(sample) = reply.result() {
            if let Some(zid) = token_zid(sample.key_expr().as_str()) {
                return Some(zid);
            }
        }
    }
    None
}
