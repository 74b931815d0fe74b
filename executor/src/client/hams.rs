//! The zenoh transport of stateful nodes' batches (HAMS) on the graph side: each batch goes to its
//! primary's `run` key as one query, and its reply is taken only from the primary's session.
//!
//! The primary's session is the one that answered its latest role assignment: the manager records
//! it in [`MemberSessions`] and the transport requires it of every reply, so a rogue queryable on
//! the same key can neither take a batch nor answer it (the query reaches every queryable on the
//! key, and only the primary's reply counts). A reply must carry the node's outputs with one row
//! per row sent (a per-sequence node's reply also names the rows its primary refused, each
//! within the batch); a refusal for a stale epoch, or no answer within the node's `detect_ms`, makes
//! the batch lost (failover decides its fate); any other refusal is the rows' error.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tracing::{debug, warn};
use weir_connectors::echo::quote;
use weir_engine::batch::TensorColumn;
use weir_engine::wire::{decode_columns, encode_columns};
use weir_hams::protocol::{
    decode_frame, encode_frame, member_key, Refusal, RefusalReply, RunHeader, RunReply,
};
use weir_operators::stateful::{
    RunDone, RunFailure, RunOutput, StatefulNodeHandle, StatefulTransport,
};
use zenoh::query::{ConsolidationMode, QueryTarget, Reply};
use zenoh::session::ZenohId;
use zenoh::{Session, Wait};

use super::{columns_in_order, AnswerSlot, Completions};

/// The zenoh session of each stateful member (by executor key prefix), learnt from the reply to
/// its latest role assignment; a batch's reply is taken only from its primary's session. Shared
/// by the manager, which fills it, and the transport, which reads it.
#[derive(Debug, Clone, Default)]
pub struct MemberSessions(Arc<Mutex<HashMap<String, ZenohId>>>);

impl MemberSessions {
    /// Records that member `prefix` answers from session `zid`.
    pub fn set(&self, prefix: &str, zid: ZenohId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(prefix.to_string(), zid);
    }

    /// The session member `prefix` answers from, if known.
    pub fn get(&self, prefix: &str) -> Option<ZenohId> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(prefix)
            .copied()
    }
}

/// Runs stateful nodes' batches on their primaries over zenoh.
pub struct ZenohStatefulTransport {
    session: Session,
    completions: Completions,
    members: MemberSessions,
}

impl ZenohStatefulTransport {
    pub(crate) fn new(session: Session, completions: Completions, members: MemberSessions) -> Self {
        ZenohStatefulTransport {
            session,
            completions,
            members,
        }
    }
}

/// The take-once end of one batch's query.
struct RunEnd {
    slot: AnswerSlot<Result<RunOutput, RunFailure>>,
    outputs: Vec<String>,
    /// Rows sent: the reply must carry one per row.
    rows: usize,
    /// The primary's session (from its assignment reply); replies from any other are dropped.
    primary: Option<ZenohId>,
}

impl RunEnd {
    fn finish(&self, outcome: Result<RunOutput, RunFailure>) {
        self.slot.finish(outcome);
    }

    fn on_reply(&self, reply: Reply) {
        let replier = reply.replier_id().map(|id| id.zid());
        // zenoh's own end of the query (its timeout) names no replier: no answer, as below.
        if replier.is_some() && replier != self.primary {
            debug!(replier = ?replier, "A batch reply from a session that is not the primary's, dropped.");
            return;
        }
        let outcome = match reply.result() {
            Ok(sample) => self.decode(&sample.payload().to_bytes()),
            Err(err) => {
                let body = err.payload().to_bytes();
                match serde_json::from_slice::<RefusalReply>(&body) {
                    Ok(r) if r.refusal == Refusal::Fenced => {
                        Err(RunFailure::Lost(quote(&r.message).into_owned()))
                    }
                    Ok(r) => Err(RunFailure::Failed(quote(&r.message).into_owned())),
                    Err(_) => Err(RunFailure::Lost(
                        quote(&String::from_utf8_lossy(&body)).into_owned(),
                    )),
                }
            }
        };
        self.finish(outcome);
    }

    fn decode(&self, bytes: &[u8]) -> Result<RunOutput, RunFailure> {
        let bad = |m: String| RunFailure::Failed(format!("the primary replied {m}"));
        let (reply, body): (RunReply, &[u8]) =
            decode_frame(bytes).map_err(|e| bad(e.to_string()))?;
        if let Some(r) = reply.refused.iter().find(|r| r.row as usize >= self.rows) {
            return Err(bad(format!(
                "a refusal of row {} of the {} sent",
                r.row, self.rows
            )));
        }
        let columns = decode_columns(body).map_err(|e| bad(e.to_string()))?;
        let columns = columns_in_order(columns, &self.outputs)
            .map_err(|name| bad(format!("without output `{name}`")))?;
        match columns.iter().find(|c| c.len() != self.rows) {
            Some(c) => Err(bad(format!("{} rows for the {} sent", c.len(), self.rows))),
            None => Ok(RunOutput {
                columns,
                refused: reply.refused,
            }),
        }
    }
}

impl Drop for RunEnd {
    fn drop(&mut self) {
        self.finish(Err(RunFailure::Lost("no answer from the primary".into())));
    }
}

impl StatefulTransport for ZenohStatefulTransport {
    fn run(
        &self,
        node: &StatefulNodeHandle,
        primary: &str,
        header: RunHeader,
        inputs: Vec<TensorColumn>,
        done: RunDone,
    ) {
        let columns =
            match encode_columns(node.inputs.iter().map(String::as_str).zip(inputs.iter())) {
                Ok(c) => c,
                Err(e) => {
                    done(Err(RunFailure::Failed(format!("encoding the inputs: {e}"))));
                    return;
                }
            };
        let body = encode_frame(&header, &columns);
        let end = Arc::new(RunEnd {
            slot: AnswerSlot::new(done, self.completions.clone()),
            outputs: node.outputs.clone(),
            rows: inputs.first().map_or(0, TensorColumn::len),
            primary: self.members.get(primary),
        });
        let on_reply = Arc::clone(&end);
        let sent = self
            .session
            .get(member_key(primary, &node.node, "run"))
            .payload(body)
            .target(QueryTarget::All)
            .consolidation(ConsolidationMode::None)
            .timeout(node.spec.detect)
            .callback(move |reply| on_reply.on_reply(reply))
            .wait();
        drop(end);
        if let Err(e) = sent {
            warn!(node = %node.node, error = %e, "Batch not sent.");
        }
    }
}
