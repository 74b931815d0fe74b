//! What ParM tells a sampled request's trace: when it decodes a job's answer from the job's
//! coding group, the group, `k` and the reason go into the job's trace before the answer does,
//! and the model operator's hop record carries them to the request's `reconstruct <node>` span
//! (`weir_engine::trace::request_spans`).

use std::time::{Instant, SystemTime};

use weir_engine::trace::{wall_time, Reconstruction};

use super::decoder::{lock, Member, Outcome, ParityDecoder, Reason};

impl ParityDecoder {
    /// Notes in `member`'s trace (a sampled request's job) that group `group` decoded its
    /// answer, for `reason`; before the answer, so the model operator finds it when the answer
    /// comes. A member already answered is left alone.
    pub(super) fn note_reconstruction(&self, member: &Member, group: u64, reason: Reason) {
        let Some(trace) = &member.trace else { return };
        if member.done.is_answered() {
            return;
        }
        let unavailable = match (&*lock(&member.outcome), reason) {
            (Outcome::Failed(_, at), _) => Some(*at),
            (_, Reason::Late) => member.late_at,
            _ => None,
        };
        let now = Instant::now();
        trace.record_reconstruction(Reconstruction {
            group,
            k: self.k(),
            reason: match reason {
                Reason::Late => "late",
                Reason::Failed => "failed",
            },
            unavailable_at: wall_time(unavailable.unwrap_or(now).min(now)),
            decoded_at: SystemTime::now(),
        });
    }
}
