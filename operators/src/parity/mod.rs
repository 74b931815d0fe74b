//! ParM: parity-coded resilience around a model node, as in "Parity Models: Erasure-Coded
//! Resilience for Prediction Serving Systems" (SOSP '19); the codec itself is the pure `weir-parm`
//! crate, shared with training.
//!
//! The plan draws a parity-coded node as three stages (`weir_engine::plan::ParityPlan`), and the
//! compiler wires each as dataflow operators of its own (`weir_engine::compile`):
//! - the [`encoder`] operator on the node's input cuts its jobs, passes each to the deployed model
//!   operator at once (encoding never delays dispatch), tags it with its coding group and
//!   position ([`tag`]), and when `k` jobs are in codes one parity query per parity model and
//!   emits it on that model's stream (ParM, §4.1–4.2; r > 1, §7);
//! - each *parity model node* is a plain model operator on its parity queries, served by its own
//!   executor or replica pool (its own replicas, batching and instances);
//! - the [`decode_operator`] joins the tags, the deployed model operator's rows and errors and
//!   the parity outputs by group id and answers every job exactly once ([`decoder`]): its real
//!   prediction, or a reconstruction once the prediction is unavailable (late by the decode rule
//!   of [`latency`], or its replica failed).
//!
//! [`ParityNode`] is what every worker's operators of one node share: the encoder's and
//! decoder's settings, the node's recent latencies and the counters `/metrics` reads.
//!
//! Where weir departs from the paper: the paper codes k *batches* together; weir's unit of
//! dispatch is the job (up to `batching.max_size` rows), so a group is k jobs, and jobs of
//! different sizes are coded position by position (a shorter job simply contributes nothing to
//! the later parity rows), which keeps the decoder a linear solve per row position. With r > 1
//! each parity model gets its own parity query, coded with its own coefficients (see
//! `weir_parm::code`).

mod columns;
pub mod decode_operator;
pub mod decoder;
pub mod encoder;
pub mod latency;
pub mod metrics;
pub mod tag;
mod timer;
mod trace;

use std::sync::Arc;

pub use columns::{decode_erasures, decode_subtract, encode_group, encode_group_for};
pub use decode_operator::DecodeOperator;
pub use decoder::{DecoderStats, ParityDecoder, Reason};
pub use encoder::{EncoderStats, ParityEncoder, ParityJobStats};
use weir_engine::spec::DecodeAfter;
pub use weir_parm::Encoder;

/// Counters of a parity-coded node, its encoder's and decoder's together; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityStats {
    /// Coding groups filled.
    pub groups: u64,
    /// Parity queries sent to the parity model nodes (all of them).
    pub parity_dispatched: u64,
    /// Jobs answered by reconstruction (late + failed).
    pub reconstructed: u64,
    /// Jobs reconstructed because their prediction was late.
    pub reconstructed_late: u64,
    /// Jobs reconstructed because their replica failed.
    pub reconstructed_failed: u64,
    /// Jobs answered with their real prediction.
    pub real: u64,
    /// Failed jobs that could not be reconstructed (answered with their error).
    pub unrecovered: u64,
    /// Real predictions that came after their job was reconstructed (dropped).
    pub late_real: u64,
}

impl ParityStats {
    /// The fraction of answers (real and reconstructed) that were reconstructed; 0 before any.
    pub fn reconstructed_fraction(&self) -> f64 {
        let answers = self.real + self.reconstructed;
        if answers == 0 {
            0.0
        } else {
            self.reconstructed as f64 / answers as f64
        }
    }
}

/// One parity-coded node's encoder and decoder, shared by its operators on every worker.
#[derive(Debug, Clone)]
pub struct ParityNode {
    encoder: Arc<ParityEncoder>,
    decoder: Arc<ParityDecoder>,
}

impl ParityNode {
    /// Node `node`'s coding: groups of `k` coded by `encoder`, parity query `t` going to parity
    /// model node `parity[t]` (r = `parity.len()`); a missing prediction counts as unavailable
    /// after `decode` (quantile deadlines never below `floor`) or when its replica fails.
    pub fn new(
        node: &str,
        k: usize,
        encoder: Encoder,
        decode: (DecodeAfter, std::time::Duration),
        parity: Vec<String>,
    ) -> Self {
        let r = parity.len();
        ParityNode {
            encoder: Arc::new(ParityEncoder::new(
                &format!("{node}.parity_encode"),
                k,
                encoder,
                parity,
            )),
            decoder: Arc::new(ParityDecoder::new(
                &format!("{node}.parity_decode"),
                k,
                r,
                decode,
            )),
        }
    }

    /// The encoder.
    pub fn encoder(&self) -> &Arc<ParityEncoder> {
        &self.encoder
    }

    /// The decoder.
    pub fn decoder(&self) -> &Arc<ParityDecoder> {
        &self.decoder
    }

    /// The encoder's and decoder's counters together.
    pub fn stats(&self) -> ParityStats {
        let (e, d) = (self.encoder.stats(), self.decoder.stats());
        ParityStats {
            groups: e.groups,
            parity_dispatched: e.parity_jobs.iter().map(|(_, j)| j.dispatched).sum(),
            reconstructed: d.reconstructed_late + d.reconstructed_failed,
            reconstructed_late: d.reconstructed_late,
            reconstructed_failed: d.reconstructed_failed,
            real: d.real,
            unrecovered: d.unrecovered,
            late_real: d.late_real,
        }
    }

    /// The decode rule.
    pub fn decode_rule(&self) -> DecodeAfter {
        self.decoder.decode_rule()
    }

    /// How long after dispatch a prediction counts as late now (`None`: `first_available`).
    pub fn deadline(&self) -> Option<std::time::Duration> {
        self.decoder.deadline()
    }
}

#[cfg(test)]
mod tests;
