//! The parity encoder operator of a parity-coded node (ParM, §4.1, §4.2, §7), on the node's input
//! stream: it cuts the node's jobs as the model operator would (up to the deployed service's rows
//! per job), passes each on to the deployed model operator at once (encoding never delays
//! dispatch), sends its [`Tag`] to the decoder, and forms coding groups of `k` consecutive jobs.
//! When a group fills, it codes one parity query per parity model — row position i of parity
//! query `t` codes row i of every member that has one, weighted by parity model `t`'s
//! coefficients ([`super::columns`]) — and emits it on that parity model's stream.
//!
//! Groups are formed per worker; a worker's jobs stay on it through the deployed model operator
//! and the decoder (pipelined), so a group never spans workers. The operator holds no
//! capability: a group's parity queries go out at the time of the job that filled it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::UInt64Array;
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::builder_rc::OperatorBuilder;
use timely::dataflow::operators::generic::OutputBuilder;
use tracing::debug;
use weir_engine::batch::{Batch, TensorColumn};
use weir_engine::compile::ParityEncoded;
use weir_engine::dataflow::BatchStream;
use weir_engine::lineage::from_clients;
use weir_engine::request::{RequestError, RowError};

use super::columns::encode_group_for;
use super::tag::{parity_row_id, Tag};
use super::Encoder;

/// Counters of a parity encoder; every field only grows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EncoderStats {
    /// Coding groups formed.
    pub groups: u64,
    /// Per parity model node (index order): its id and its jobs' counts.
    pub parity_jobs: Vec<(String, ParityJobStats)>,
}

/// One parity model node's jobs, as its encoder and decoder count them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ParityJobStats {
    /// Parity queries sent to the parity model node.
    pub dispatched: u64,
    /// Parity queries answered with an output.
    pub answered: u64,
    /// Parity queries answered with an error.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct JobCounters {
    dispatched: AtomicU64,
    answered: AtomicU64,
    failed: AtomicU64,
}

/// The encoder of one parity-coded node as every worker shares it: its settings and counters.
#[derive(Debug)]
pub struct ParityEncoder {
    /// Its name in metrics (`<node>.parity_encode`).
    id: String,
    k: usize,
    encoder: Encoder,
    /// The parity model nodes' ids, parity model `t` at index `t`.
    targets: Vec<String>,
    groups: AtomicU64,
    jobs: Vec<JobCounters>,
}

impl ParityEncoder {
    /// An encoder named `id` forming groups of `k` coded by `encoder`, parity query `t` going to
    /// parity model node `targets[t]`.
    pub fn new(id: &str, k: usize, encoder: Encoder, targets: Vec<String>) -> Self {
        ParityEncoder {
            id: id.to_string(),
            k: k.max(2),
            encoder,
            jobs: targets.iter().map(|_| JobCounters::default()).collect(),
            targets,
            groups: AtomicU64::new(0),
        }
    }

    /// Its name in metrics.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Coding-group size.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Parity models per group.
    pub fn r(&self) -> usize {
        self.targets.len()
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
                        t.clone(),
                        ParityJobStats {
                            dispatched: s(&c.dispatched),
                            answered: s(&c.answered),
                            failed: s(&c.failed),
                        },
                    )
                })
                .collect(),
        }
    }

    /// Counts parity model `t`'s answer to one query (the decoder sees it).
    pub(super) fn count_answer(&self, t: usize, ok: bool) {
        if let Some(c) = self.jobs.get(t) {
            let counter = if ok { &c.answered } else { &c.failed };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The encoder operator for node `node` on `input`: jobs of up to `max_rows` rows whose
    /// model inputs are the columns `input_columns`.
    pub fn build<'s>(
        self: &Arc<Self>,
        node: &str,
        input: BatchStream<'s>,
        input_columns: Vec<String>,
        max_rows: usize,
    ) -> ParityEncoded<'s> {
        let scope = input.scope();
        let mut builder = OperatorBuilder::new(format!("parity_encode/{node}"), scope);
        let mut input = builder.new_input(input, Pipeline);
        type Rows = OutputBuilder<u64, CapacityContainerBuilder<Vec<Batch>>>;
        let (data, data_stream) = builder.new_output();
        let (tags, tags_stream) = builder.new_output();
        let (errors, errors_stream) = builder.new_output();
        let mut data = Rows::from(data);
        let mut tags = Rows::from(tags);
        let mut errors =
            OutputBuilder::<u64, CapacityContainerBuilder<Vec<RowError>>>::from(errors);
        let mut queries: Vec<Rows> = Vec::new();
        let mut query_streams = Vec::new();
        for _ in 0..self.r() {
            let (q, stream) = builder.new_output();
            queries.push(Rows::from(q));
            query_streams.push(stream);
        }
        let me = Arc::clone(self);
        let node = node.to_string();
        let max_rows = max_rows.max(1);
        builder.build(move |_caps| {
            let mut next_member: u64 = 0;
            let mut open: Vec<Vec<TensorColumn>> = Vec::with_capacity(me.k);
            move |_frontiers| {
                let mut data_out = data.activate();
                let mut tags_out = tags.activate();
                let mut errors_out = errors.activate();
                let mut queries_out: Vec<_> = queries.iter_mut().map(|q| q.activate()).collect();
                input.for_each(|cap, batches| {
                    let Some(caps) = (0..3 + me.r())
                        .map(|port| cap.retain_least(port))
                        .collect::<Option<Vec<_>>>()
                    else {
                        return;
                    };
                    for batch in batches.drain(..) {
                        let mut offset = 0;
                        while offset < batch.num_rows() {
                            let n = max_rows.min(batch.num_rows() - offset);
                            let part = batch.slice(offset, n);
                            offset += n;
                            let columns: Option<Vec<TensorColumn>> = input_columns
                                .iter()
                                .map(|c| part.tensor(c).cloned())
                                .collect();
                            let Some(columns) = columns else {
                                let error = Arc::new(RequestError::Node {
                                    node: node.clone(),
                                    message: "an input column is missing from the batch".into(),
                                });
                                let mut s = errors_out.session(&caps[2]);
                                for &id in part.request_ids() {
                                    s.give(RowError {
                                        request_id: id,
                                        error: Arc::clone(&error),
                                    });
                                }
                                continue;
                            };
                            let seq = next_member;
                            next_member += 1;
                            let k = me.k as u64;
                            let group = ((seq / k) & 0xFFFF_FFFF) as u32;
                            let position = (seq % k) as usize;
                            data_out.session(&caps[0]).give(part.clone());
                            open.push(columns);
                            let mut coded = false;
                            if open.len() >= me.k {
                                let members = std::mem::take(&mut open);
                                me.groups.fetch_add(1, Ordering::Relaxed);
                                match me.code(group, &members, &input_columns) {
                                    Some(parity) => {
                                        coded = true;
                                        for (t, query) in parity.into_iter().enumerate() {
                                            if let Some(out) = queries_out.get_mut(t) {
                                                out.session(&caps[3 + t]).give(query);
                                                me.jobs[t].dispatched.fetch_add(1, Ordering::Relaxed);
                                            }
                                        }
                                    }
                                    None => {
                                        debug!(encoder = %me.id, "A coding group could not be encoded (non-f32 input).");
                                    }
                                }
                            }
                            let tag = Tag {
                                group,
                                position,
                                coded,
                            };
                            match tag.batch(&part) {
                                Ok(b) => tags_out.session(&caps[1]).give(b),
                                Err(e) => {
                                    debug!(encoder = %me.id, error = %e, "A job could not be tagged.");
                                }
                            }
                        }
                    }
                });
            }
        });
        ParityEncoded {
            data: data_stream,
            tags: tags_stream,
            queries: query_streams,
            errors: errors_stream,
        }
    }

    /// Group `group`'s parity queries, one per parity model, from its members' input columns
    /// (`None`: the group cannot be coded).
    fn code(
        &self,
        group: u32,
        members: &[Vec<TensorColumn>],
        input_columns: &[String],
    ) -> Option<Vec<Batch>> {
        let inputs: Vec<&[TensorColumn]> = members.iter().map(|m| &m[..]).collect();
        (0..self.r())
            .map(|t| {
                let columns = encode_group_for(self.encoder, t, &inputs)?;
                let rows = columns.first().map_or(0, TensorColumn::len);
                let ids: Vec<u64> = (0..rows).map(|i| parity_row_id(group, i)).collect();
                let tensors = input_columns
                    .iter()
                    .map(|c| Arc::from(c.as_str()))
                    .zip(columns)
                    .collect();
                Batch::new(
                    UInt64Array::from(ids.clone()),
                    from_clients(&ids, u64::from(group)),
                    tensors,
                )
                .ok()
            })
            .collect()
    }
}
