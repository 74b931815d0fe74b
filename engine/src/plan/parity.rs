//! Parity coding of a model node, after "Parity Models: Erasure-Coded Resilience for Prediction
//! Serving Systems" (ParM, §4.1, §7), planned as the three stages the paper draws around the
//! deployed model: an *encoder* that forms coding groups of `k` consecutively dispatched jobs and
//! codes each group's parity queries, `r` *parity model nodes* with their own replicas, batching
//! and executors (one per parity model), and a *decoder* that joins each group's `k` predictions
//! with its parity outputs by group id and answers a missing prediction by reconstruction when
//! the decode rule says it is unavailable. The compiler wires each stage as dataflow operators of
//! its own (`crate::compile`), built by `weir-operators` (`parity/`) with their own counters.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::placement::{RemoteExecutor, ReplicaTarget};
use crate::spec::{BatchingSpec, DecodeAfter, ExecutorSpec, ModelSpec, ParityEncoder};

/// ParM parity coding of a model node, as planned: encoder, parity model nodes, decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityPlan {
    /// The encoder stage.
    pub encoder: ParityEncodeStage,
    /// The parity model nodes, parity model `t` at index `t` (r = their number).
    pub models: Vec<ParityModelNode>,
    /// The decoder stage.
    pub decoder: ParityDecodeStage,
}

impl ParityPlan {
    /// Coding-group size.
    pub fn k(&self) -> usize {
        self.encoder.k
    }

    /// Parity models per group: how many missing predictions a group can decode.
    pub fn r(&self) -> usize {
        self.models.len()
    }
}

/// Forms coding groups of `k` consecutively dispatched jobs and codes their parity queries.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityEncodeStage {
    /// Its name in metrics and the plan (`<node>.parity_encode`).
    pub id: String,
    /// Coding-group size.
    pub k: usize,
    /// How a group's queries become a parity query.
    pub encoder: ParityEncoder,
}

/// A parity model, run as a model node of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityModelNode {
    /// Its node id (`<node>.parity` for parity model 0, `<node>.parity<t>` after): the name its
    /// executors and remote replicas serve it under.
    pub id: String,
    /// Which parity model it is: its queries are coded with coefficients `(i + 1)^index`.
    pub index: usize,
    /// The parity model, resolved against the graph's folder.
    pub path: PathBuf,
    /// Its dynamic batching.
    pub batching: BatchingSpec,
    /// Its executor settings.
    pub executor: ExecutorSpec,
    /// Where its replicas run.
    pub replicas: Vec<ReplicaTarget>,
}

/// Joins a group's predictions and parity outputs by group id and decodes what is unavailable.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityDecodeStage {
    /// Its name in metrics and the plan (`<node>.parity_decode`).
    pub id: String,
    /// When a missing prediction counts as unavailable.
    pub decode: DecodeAfter,
    /// The shortest deadline a quantile rule sets.
    pub floor: Duration,
}

/// The id of parity model node `t` of node `node`.
pub fn parity_node_id(node: &str, t: usize) -> String {
    if t == 0 {
        format!("{node}.parity")
    } else {
        format!("{node}.parity{t}")
    }
}

/// Model node `id`'s parity coding, if it has any; `executor` is the deployed node's planned
/// executor, `executors` the graph's remote executors.
pub(super) fn parity_plan(
    id: &str,
    m: &ModelSpec,
    base_dir: &Path,
    executor: &ExecutorSpec,
    executors: &[RemoteExecutor],
) -> Option<ParityPlan> {
    let p = m.resilience.as_ref()?.parity.as_ref()?;
    let k = p.k.value;
    let replicas = super::placement::resolve(p.replicas.as_ref(), executors);
    let batching = p.batching.clone().unwrap_or_else(|| BatchingSpec {
        pad: None,
        fixed_size: None,
        ..m.batching.clone()
    });
    // The paper's m/k parity instances for m deployed ones (at least one).
    let executor = p.executor.unwrap_or_else(|| ExecutorSpec {
        instances: executor.instances.div_ceil(k.max(1)).max(1),
        ..*executor
    });
    Some(ParityPlan {
        encoder: ParityEncodeStage {
            id: format!("{id}.parity_encode"),
            k,
            encoder: p.encoder.value,
        },
        models: p
            .models()
            .into_iter()
            .enumerate()
            .map(|(t, path)| ParityModelNode {
                id: parity_node_id(id, t),
                index: t,
                path: base_dir.join(&path.value),
                batching: batching.clone(),
                executor,
                replicas: replicas.clone(),
            })
            .collect(),
        decoder: ParityDecodeStage {
            id: format!("{id}.parity_decode"),
            decode: p.decode.value.after.value,
            floor: Duration::from_millis(p.decode.value.floor_ms),
        },
    })
}
