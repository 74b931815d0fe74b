//! The graph side of a per-sequence node's batches: each row's sequence controls read from its
//! request's parameters before the batch is numbered (a row without a usable sequence is
//! answered with a 400 naming the field, and never sent), and the state holder's refusals turned
//! into the rows' request errors.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use weir_engine::batch::Batch;
use weir_engine::request::{RequestError, RowError};
use weir_hams::sequence_params::row_control;
use weir_hams::sequences::{RowControl, SequenceControls, SequenceRefusal};

use crate::capabilities::RowsAndErrors;

/// A batch's parts, with the time each holds.
pub type Segments = Vec<(RowsAndErrors, Batch)>;

/// Row errors, each with the capabilities of its part.
pub type Refused = Vec<(RowsAndErrors, RowError)>;

/// Reads every row's controls: returns the parts without the rows that name no usable sequence,
/// their controls in row order, and an error for each row dropped.
pub fn controls_of(segments: Segments, now_ms: u64) -> (Segments, SequenceControls, Refused) {
    let mut kept = Vec::with_capacity(segments.len());
    let mut rows: Vec<RowControl> = Vec::new();
    let mut refused = Vec::new();
    for (cap, part) in segments {
        let mut keep: Vec<u32> = Vec::with_capacity(part.num_rows());
        for (r, &id) in part.request_ids().iter().enumerate() {
            match row_control(part.row_parameters(r)) {
                Ok(c) => {
                    keep.push(r as u32);
                    rows.push(c);
                }
                Err(e) => refused.push((
                    cap.clone(),
                    RowError {
                        request_id: id,
                        error: Arc::new(RequestError::Invalid {
                            field: e.field.to_string(),
                            message: e.message,
                        }),
                    },
                )),
            }
        }
        if keep.len() == part.num_rows() {
            kept.push((cap, part));
        } else if !keep.is_empty() {
            if let Ok(p) = part.take(&keep) {
                kept.push((cap, p));
            }
        }
    }
    (kept, SequenceControls { now_ms, rows }, refused)
}

/// The request error of a row the state holder of node `node` refused.
pub fn refusal_error(node: &str, reason: SequenceRefusal) -> RequestError {
    match reason {
        SequenceRefusal::Unknown => RequestError::Invalid {
            field: "parameters.sequence_id".into(),
            message: format!(
                "node `{node}` holds no such sequence (never started, ended, or idle past its timeout); start it with `sequence_start: true`"
            ),
        },
        SequenceRefusal::Full { limit } => RequestError::SequencesFull {
            node: node.to_string(),
            limit,
        },
    }
}

/// The graph's clock for idle timeouts, in milliseconds, never behind `last`.
pub fn clock_ms(last: u64) -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    now.max(last)
}
