//! Parity coding of a model node, after "Parity Models: Erasure-Coded Resilience for Prediction
//! Serving Systems" (ParM, §3): the coding group size, the parity model that answers a group's
//! parity query, and the encoder that makes that query. The parity operator (`weir-operators`)
//! runs it.

use std::path::{Path, PathBuf};

use std::time::Duration;

use crate::spec::{DecodeAfter, ModelSpec, ParityEncoder};

/// ParM parity coding of a model node, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityPlan {
    /// Coding-group size.
    pub k: usize,
    /// The parity model, resolved against the graph's folder.
    pub path: PathBuf,
    /// How a group's queries become the parity query.
    pub encoder: ParityEncoder,
    /// When a missing prediction counts as unavailable.
    pub decode: DecodeAfter,
    /// The shortest deadline a quantile rule sets.
    pub floor: Duration,
}

/// Model node `m`'s parity coding, if it has any.
pub(super) fn parity_plan(m: &ModelSpec, base_dir: &Path) -> Option<ParityPlan> {
    let p = m.resilience.as_ref()?.parity.as_ref()?;
    Some(ParityPlan {
        k: p.k.value,
        path: base_dir.join(&p.parity_model.value),
        encoder: p.encoder.value,
        decode: p.decode.value.after.value,
        floor: Duration::from_millis(p.decode.value.floor_ms),
    })
}
