//! ParM: parity-coded resilience around a model node, as in "Parity Models: Erasure-Coded
//! Resilience for Prediction Serving Systems" (SOSP '19); the codec itself is the pure `weir-parm`
//! crate, shared with training.
//!
//! The plan draws a parity-coded node as three stages (`weir_engine::plan::ParityPlan`), and each
//! runs here as its own part with its own counters:
//! - the [`encoder`] forms coding groups of the `k` jobs the node dispatches consecutively and
//!   codes one parity query per parity model (ParM, §4.1–4.2; r > 1, §7);
//! - each *parity model node* is a model service of its own — an executor or a replica pool with
//!   its own replicas, batching and instances, built by the factory like any model node's;
//! - the [`decoder`] joins each group's predictions with its parity outputs by group id and
//!   answers every job exactly once: its real prediction, or a reconstruction once the prediction
//!   is unavailable (late by the decode rule, or its replica failed).
//!
//! [`ParityService`] is the seam the node's model operator submits to: every job goes to the
//! deployed service at once, unchanged (encoding never delays dispatch), then joins the
//! encoder's open group; its outcome goes to the decoder, which answers the operator.
//!
//! Where weir departs from the paper: the paper codes k *batches* together; weir's unit of
//! dispatch is the operator's job (up to `batching.max_size` rows), so a group is k jobs, and jobs
//! of different sizes are coded position by position (a shorter job simply contributes nothing to
//! the later parity rows), which keeps the decoder a linear solve per row position. With r > 1
//! each parity model gets its own parity query, coded with its own coefficients (see
//! `weir_parm::code`).

mod columns;
pub mod decoder;
pub mod encoder;
pub mod latency;
pub mod metrics;
mod timer;
mod trace;

use std::sync::Arc;
use std::time::Duration;

use weir_engine::spec::DecodeAfter;

pub use columns::{decode_erasures, decode_subtract, encode_group, encode_group_for};
pub use decoder::{DecoderStats, ParityDecoder, Reason};
pub use encoder::{EncoderStats, ParityEncoder, ParityJobStats, ParityTarget};
pub use weir_parm::Encoder;

use crate::model::executor::Job;
use crate::model::InferenceService;

/// Counters of a parity-coded node, its encoder's and decoder's together; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityStats {
    /// Coding groups filled.
    pub groups: u64,
    /// Parity jobs the parity model nodes took (all of them).
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

/// A parity-coded model node's service: the deployed service, with the node's encoder and
/// decoder around it.
#[derive(Clone)]
pub struct ParityService {
    deployed: Arc<dyn InferenceService>,
    encoder: Arc<ParityEncoder>,
    decoder: Arc<ParityDecoder>,
}

impl std::fmt::Debug for ParityService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParityService")
            .field("encoder", &self.encoder)
            .field("decoder", &self.decoder)
            .finish()
    }
}

impl ParityService {
    /// Node `node` served by `deployed`, with coding groups of `k` coded by `encoder`, parity
    /// query `t` going to `parity[t]` (r = `parity.len()`); a missing prediction counts as
    /// unavailable after `decode` (quantile deadlines never below `floor`) or when its replica
    /// fails.
    pub fn new(
        node: &str,
        k: usize,
        encoder: Encoder,
        decode: (DecodeAfter, Duration),
        deployed: Arc<dyn InferenceService>,
        parity: Vec<ParityTarget>,
    ) -> Self {
        let r = parity.len();
        ParityService {
            deployed,
            encoder: Arc::new(ParityEncoder::new(
                &format!("{node}.parity_encode"),
                k,
                encoder,
                parity,
            )),
            decoder: ParityDecoder::start(&format!("{node}.parity_decode"), k.max(2), r, decode),
        }
    }

    /// The encoder.
    pub fn encoder(&self) -> &ParityEncoder {
        &self.encoder
    }

    /// The decoder.
    pub fn decoder(&self) -> &ParityDecoder {
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
    pub fn deadline(&self) -> Option<Duration> {
        self.decoder.deadline()
    }
}

impl InferenceService for ParityService {
    fn try_submit(&self, job: Job) -> Result<(), Job> {
        let (member, data_job) = self.decoder.admit(job);
        if let Err(refused) = self.deployed.try_submit(data_job) {
            self.decoder.withdraw(&member);
            // Give the caller its own job back, to offer again later.
            return match member.done.take() {
                Some(done) => Err(Job {
                    inputs: refused.inputs,
                    enqueued_at: refused.enqueued_at,
                    deadline: refused.deadline,
                    trace: refused.trace,
                    done,
                }),
                None => Ok(()),
            };
        }
        // Dispatched: now the job joins the open coding group.
        self.encoder.join(member, &self.decoder);
        Ok(())
    }

    fn rows_per_job(&self) -> usize {
        self.deployed.rows_per_job()
    }
}

#[cfg(test)]
mod tests;
