//! A variant: one servable build of a registered model, and its measured profile.
//!
//! INFaaS varies a model along architecture, framework, graph optimiser, batch and hardware
//! (paper §1, §3.3). weir's variants are ONNX Runtime builds of a registered ONNX file: a graph
//! optimisation level, a precision (fp32, or int8 by dynamic quantisation), an intra-op thread
//! count, an optional fixed batch dimension, and the executor type that runs it (each with a price
//! per second). A variant is immutable once profiled; what changes at run time lives in
//! [`crate::state`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Numeric precision of a variant's weights and arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// The registered model as is.
    Fp32,
    /// Weights quantised to int8 (ONNX Runtime's dynamic quantisation).
    Int8,
}

/// ONNX Runtime's graph-optimisation level for the variant's sessions: the graph node setting
/// (`executor: {graph_optimization}`) the variant is served with.
pub use weir_engine::spec::GraphLevel;

/// How a variant is built and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VariantConfig {
    /// Weights' precision.
    pub precision: Precision,
    /// Session graph-optimisation level.
    pub graph_level: GraphLevel,
    /// Intra-op threads per session.
    pub intra_threads: u32,
    /// A batch dimension fixed to this size in the ONNX file (batch-specialised build); `None`
    /// keeps it dynamic.
    pub fixed_batch: Option<u32>,
    /// Executor type that runs it (an `executors:` type of the serving graph: `local`, `cuda`, or
    /// a remote or emulated type's name).
    pub hardware: String,
}

/// What profiling measured about a variant (paper §3.3: load latency, latency for batch sizes
/// 1…64 in powers of two, peak memory; saturation throughput for the autoscaler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Time to load the variant and answer its first call, in milliseconds.
    pub load_ms: f64,
    /// Median latency of one call, in milliseconds, by batch size.
    pub latency_ms: BTreeMap<u32, f64>,
    /// Peak resident memory the loaded variant added, in bytes.
    pub peak_memory_bytes: u64,
    /// Requests per second one instance sustains at its best batch size.
    pub saturation_qps: f64,
}

impl Profile {
    /// Latency of one call of `batch` rows, in milliseconds: the profiled value, linear between
    /// profiled batch sizes, and extended from the last two beyond them. `None` when nothing was
    /// profiled.
    pub fn inference_ms(&self, batch: u32) -> Option<f64> {
        if let Some(ms) = self.latency_ms.get(&batch) {
            return Some(*ms);
        }
        let below = self.latency_ms.range(..batch).next_back();
        let above = self.latency_ms.range(batch..).next();
        let ((b0, l0), (b1, l1)) = match (below, above) {
            (Some(lo), Some(hi)) => (lo, hi),
            (Some(_), None) => {
                let mut top = self.latency_ms.iter().rev();
                let hi = top.next()?;
                match top.next() {
                    Some(lo) => (lo, hi),
                    None => return Some(*hi.1 * f64::from(batch) / f64::from(*hi.0)),
                }
            }
            (None, Some(hi)) => return Some(*hi.1),
            (None, None) => return None,
        };
        let t = (f64::from(batch) - f64::from(*b0)) / (f64::from(*b1) - f64::from(*b0));
        Some(l0 + t * (l1 - l0))
    }
}

/// One variant of a registered model, as the repository stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    /// Unique name: `<model>.<precision>-<level>-t<threads>-b<batch|dyn>-<hardware>`.
    pub name: String,
    /// The task (the paper's appID) it serves.
    pub task: String,
    /// The registered model (architecture) it was made from.
    pub model: String,
    /// How it is built and where it runs.
    pub config: VariantConfig,
    /// The ONNX file, relative to the repository root.
    pub file: String,
    /// SHA-256 of that file, hex: executors load only a file that matches.
    pub sha256: String,
    /// Fraction of the validation set it classifies correctly (0–1).
    pub accuracy: f64,
    /// Most rows one call may hold.
    pub max_batch: u32,
    /// Measured load time, latencies, memory and throughput.
    pub profile: Profile,
    /// Price of one instance per second (its executor type's price).
    pub price_per_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(points: &[(u32, f64)]) -> Profile {
        Profile {
            load_ms: 10.0,
            latency_ms: points.iter().copied().collect(),
            peak_memory_bytes: 0,
            saturation_qps: 0.0,
        }
    }

    #[test]
    fn inference_time_is_profiled_interpolated_or_extended() {
        let p = profile(&[(1, 1.0), (2, 1.5), (4, 2.5), (8, 4.5)]);
        assert_eq!(p.inference_ms(4), Some(2.5));
        assert_eq!(p.inference_ms(3), Some(2.0));
        assert_eq!(p.inference_ms(16), Some(8.5));
        assert_eq!(profile(&[(2, 3.0)]).inference_ms(1), Some(3.0));
        assert_eq!(profile(&[(2, 3.0)]).inference_ms(4), Some(6.0));
        assert_eq!(profile(&[]).inference_ms(1), None);
    }
}
