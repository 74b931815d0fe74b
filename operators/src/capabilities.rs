//! Held capabilities for the operators with two outputs: rows (port 0) and row errors (port 1).
//!
//! A timely capability is valid for one output port only: sending on another trips timely's
//! debug assertion, and in a release build sends data that the errors port's progress tracking
//! never accounted for. A part of a batch that waits for an executor may end up on either output
//! (its rows, or an error for each of them), so it holds a capability for each.

use timely::dataflow::operators::{Capability, InputCapability};

/// Capabilities at one time for the rows output and the errors output.
#[derive(Debug, Clone)]
pub struct RowsAndErrors {
    /// For the rows output (port 0).
    pub rows: Capability<u64>,
    /// For the errors output (port 1).
    pub errors: Capability<u64>,
}

impl RowsAndErrors {
    /// Retains both from an input capability, at its least time (none for an empty stamp).
    pub fn retain(cap: &InputCapability<u64>) -> Option<Self> {
        Some(RowsAndErrors {
            rows: cap.retain_least(0)?,
            errors: cap.retain_least(1)?,
        })
    }
}
