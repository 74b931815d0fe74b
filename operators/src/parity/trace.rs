//! What ParM tells a sampled request's trace: when the decoder answers a job by reconstruction, it
//! files the hop of the node's model under the row's new lineage entry with the group, `k` and
//! the reason, which the trace turns into a `reconstruct <node>` span under the model hop
//! (`weir_engine::trace::request_spans`).

use std::time::{Instant, SystemTime};

use weir_engine::trace::{wall_time, HopRecord, Reconstruction, TraceBook};

use super::decoder::Reason;

/// One reconstruction, as the trace records it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rebuilt {
    /// The coding group.
    pub group: u32,
    /// Jobs per group.
    pub k: usize,
    /// Why.
    pub reason: Reason,
    /// When the job was dispatched.
    pub dispatched: Instant,
    /// When its prediction counted as unavailable.
    pub unavailable_at: Instant,
}

/// Files the reconstruction of a job of `rows` rows of `request_ids` under hop `(node, seq)`,
/// if a request among them is sampled.
pub(super) fn record(
    book: &TraceBook,
    node: u32,
    seq: u64,
    request_ids: &[u64],
    rows: usize,
    r: Rebuilt,
) {
    let Some((_, requests)) = book.sampled(request_ids) else {
        return;
    };
    let now = Instant::now();
    book.record(
        node,
        seq,
        HopRecord {
            requests,
            start: wall_time(r.dispatched),
            end: SystemTime::now(),
            queue_wait: None,
            run: None,
            batch_size: None,
            job_rows: rows,
            replica: None,
            reconstruction: Some(Reconstruction {
                group: u64::from(r.group),
                k: r.k,
                reason: r.reason.label(),
                unavailable_at: wall_time(r.unavailable_at.min(now)),
                decoded_at: SystemTime::now(),
            }),
        },
    );
}
