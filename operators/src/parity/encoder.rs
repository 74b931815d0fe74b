//! The parity encoder of a parity-coded node (ParM, §4.1, §4.2, §7): the node's jobs join the
//! open *coding group* as they are dispatched (encoding never delays dispatch); when `k` are in,
//! the group gets an id, the decoder opens it, and the encoder codes one parity query per parity
//! model — row position i of parity query `t` codes row i of every member that has one, weighted
//! by parity model `t`'s coefficients — and dispatches it to that parity model node's own service.
//! Each parity job's outcome goes to the decoder under the group id and the parity model's index.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tracing::debug;
use weir_engine::batch::TensorColumn;

use super::columns::encode_group_for;
use super::decoder::{lock, Member, ParityDecoder};
use super::Encoder;
use crate::model::executor::Job;
use crate::model::{ExecError, InferenceService};

/// One parity model node as the encoder sees it: its id and the service its jobs go to.
#[derive(Clone)]
pub struct ParityTarget {
    /// The parity model node's id (`<node>.parity`, `<node>.parity1`, ...).
    pub id: String,
    /// Its service: an executor or a replica pool of its own.
    pub service: Arc<dyn InferenceService>,
}

/// Counters of a parity encoder; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EncoderStats {
    /// Coding groups formed.
    pub groups: u64,
    /// Per parity model node (index order): its id and its jobs' counts.
    pub parity_jobs: Vec<(String, ParityJobStats)>,
}

/// One parity model node's jobs, as its encoder counts them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityJobStats {
    /// Parity jobs its service took.
    pub dispatched: u64,
    /// Parity jobs its service refused (queue full): that group went without this parity output.
    pub refused: u64,
    /// Parity jobs answered with an output.
    pub answered: u64,
    /// Parity jobs answered with an error.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct JobCounters {
    dispatched: AtomicU64,
    refused: AtomicU64,
    answered: AtomicU64,
    failed: AtomicU64,
}

/// The encoder of one parity-coded node.
pub struct ParityEncoder {
    /// Its name in metrics (`<node>.parity_encode`).
    id: String,
    k: usize,
    encoder: Encoder,
    targets: Vec<ParityTarget>,
    /// Jobs dispatched since the last full group.
    open: Mutex<Vec<Arc<Member>>>,
    next_group: AtomicU64,
    groups: AtomicU64,
    jobs: Vec<Arc<JobCounters>>,
}

impl std::fmt::Debug for ParityEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParityEncoder")
            .field("id", &self.id)
            .field("k", &self.k)
            .field("encoder", &self.encoder)
            .finish()
    }
}

impl ParityEncoder {
    /// An encoder named `id` forming groups of `k` coded by `encoder`, parity query `t` going to
    /// `targets[t]`.
    pub fn new(id: &str, k: usize, encoder: Encoder, targets: Vec<ParityTarget>) -> Self {
        ParityEncoder {
            id: id.to_string(),
            k: k.max(2),
            encoder,
            jobs: targets.iter().map(|_| Arc::default()).collect(),
            targets,
            open: Mutex::new(Vec::new()),
            next_group: AtomicU64::new(0),
            groups: AtomicU64::new(0),
        }
    }

    /// Its name in metrics.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The counters now.
    pub fn stats(&self) -> EncoderStats {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EncoderStats {
            groups: s(&self.groups),
            parity_jobs: self
                .targets
                .iter()
                .zip(&self.jobs)
                .map(|(t, c)| {
                    (
                        t.id.clone(),
                        ParityJobStats {
                            dispatched: s(&c.dispatched),
                            refused: s(&c.refused),
                            answered: s(&c.answered),
                            failed: s(&c.failed),
                        },
                    )
                })
                .collect(),
        }
    }

    /// Adds dispatched job `member` to the open group; a full group is coded and its parity jobs
    /// dispatched, their outcomes going to `decoder`.
    pub(super) fn join(&self, member: Arc<Member>, decoder: &Arc<ParityDecoder>) {
        let full = {
            let mut open = lock(&self.open);
            open.push(member);
            if open.len() >= self.k {
                Some(std::mem::take(&mut *open))
            } else {
                None
            }
        };
        if let Some(members) = full {
            self.close_group(members, decoder);
        }
    }

    /// Codes a full group and dispatches its parity jobs.
    fn close_group(&self, members: Vec<Arc<Member>>, decoder: &Arc<ParityDecoder>) {
        let id = self.next_group.fetch_add(1, Ordering::Relaxed);
        self.groups.fetch_add(1, Ordering::Relaxed);
        decoder.open_group(id, &members);
        let inputs: Vec<&[TensorColumn]> = members.iter().map(|m| &m.inputs[..]).collect();
        for (t, (target, counters)) in self.targets.iter().zip(&self.jobs).enumerate() {
            let Some(parity_inputs) = encode_group_for(self.encoder, t, &inputs) else {
                debug!(encoder = %self.id, "A coding group could not be encoded (non-f32 input).");
                decoder.abandon(id);
                return;
            };
            let (me, c) = (Arc::clone(decoder), Arc::clone(counters));
            // A parity job has no deadline of its own: a member it would reconstruct is answered
            // expired by its own job, and a late reconstruction finds it answered.
            let job = Job {
                inputs: parity_inputs,
                enqueued_at: Instant::now(),
                deadline: None,
                trace: None,
                done: Box::new(move |outcome: Result<Vec<TensorColumn>, ExecError>| {
                    let counter = if outcome.is_ok() {
                        &c.answered
                    } else {
                        &c.failed
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    me.on_parity(id, t, outcome);
                }),
            };
            match target.service.try_submit(job) {
                Ok(()) => {
                    counters.dispatched.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    // The parity node's queue is full: the group goes without this parity
                    // output; dispatch of the data jobs was never held up.
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    decoder.on_parity(
                        id,
                        t,
                        Err(ExecError::Unavailable {
                            node: target.id.clone(),
                            message: "parity queue full".into(),
                        }),
                    );
                }
            }
        }
        decoder.arm(id);
    }
}
