//! A node as planned: what it does, what it reads, what it writes. A tensor op is planned as
//! validation checked it; a model node gathers what each feature resolves to.

use std::path::{Path, PathBuf};

use super::{padding, parallelism, parity, placement, routing, stateful, PadPlan, ParityPlan};
use crate::onnx::ModelMetadata;
use crate::parallelism::AutoParallelism;
use crate::placement::{RemoteExecutor, ReplicaTarget};
use crate::routing::Routing;
use crate::spec::{BatchingSpec, ExecutorSpec};
use crate::stateful::StatefulNode;
use crate::tensor::TensorType;
use crate::validate::{CallShape, CheckedKind, CheckedModel, Port, TensorOp, TypedNode};

/// A model node, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelNode {
    /// The model file, resolved against the graph's folder.
    pub path: PathBuf,
    /// How the model is called: batched, one request per call, or without a batch dimension.
    pub call: CallShape,
    /// Dynamic batching settings.
    pub batching: BatchingSpec,
    /// Padded batching (`batching.pad`), its dimension resolved to axes.
    pub pad: Option<PadPlan>,
    /// Executor settings (under `parallelism:`, the configuration the node starts in).
    pub executor: ExecutorSpec,
    /// The model's signature.
    pub metadata: ModelMetadata,
    /// Where its replicas run (at least one).
    pub replicas: Vec<ReplicaTarget>,
    /// ParM parity coding around it, if configured: its encoder, parity model nodes and decoder.
    pub parity: Option<ParityPlan>,
    /// How its jobs are spread over its replicas.
    pub routing: Routing,
    /// SERF `parallelism: auto`: the profile the executor switches configurations by (`executor`
    /// then holds the starting configuration). `None` for a fixed configuration.
    pub auto_parallelism: Option<Box<AutoParallelism>>,
    /// The state it carries between calls and how that state is replicated (HAMS); `None` for a
    /// stateless model. State inputs and outputs are not among the node's ports or outputs.
    pub state: Option<Box<StatefulNode>>,
    /// The samples every in-process session runs before the graph reports ready (none: the
    /// first requests warm it).
    pub warmup: Vec<crate::warmup::WarmupSample>,
}

impl ModelNode {
    /// Whether calls may hold several requests (a dynamic batch dimension).
    pub fn batched(&self) -> bool {
        self.call.batched()
    }

    /// Every replica it runs on: its own, then its parity model nodes'.
    pub fn every_replica(&self) -> impl Iterator<Item = &ReplicaTarget> {
        let parity = self.parity.iter().flat_map(|p| &p.models);
        self.replicas.iter().chain(parity.flat_map(|m| &m.replicas))
    }
}

/// What a node does.
#[derive(Debug, Clone, PartialEq)]
// A plan holds a handful of nodes: the size of the model variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum NodeKind {
    /// Runs an ONNX model; ports follow the model's input order, outputs its output order.
    Model(ModelNode),
    /// A tensor op, computed inline by its operator.
    Op(TensorOp),
    /// A gather, joining each request's parts of one fan-out back into one row.
    Gather(GatherPlan),
}

/// What a gather joins and writes.
#[derive(Debug, Clone, PartialEq)]
pub struct GatherPlan {
    /// Lineage id of the fan-out (`crop_boxes`) node whose parts it joins.
    pub fanout: u32,
    /// Per stacked output, in output order: the part column read, the column written, the
    /// part's type (what an empty stack is shaped by).
    pub columns: Vec<GatherColumn>,
    /// The column the part count is written to (`i64 []`).
    pub count_column: String,
}

/// One output of a gather.
#[derive(Debug, Clone, PartialEq)]
pub struct GatherColumn {
    /// The per-part column read.
    pub input: String,
    /// The column written: every part's tensor stacked along a new first axis.
    pub output: String,
    /// The type of one part's tensor.
    pub part: TensorType,
}

/// A node, checked and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidNode {
    /// Id.
    pub id: String,
    /// What it does.
    pub kind: NodeKind,
    /// What it reads, in the order the kind defines.
    pub inputs: Vec<Port>,
    /// What it writes: local output name and type.
    pub outputs: Vec<(String, TensorType)>,
}

impl ValidNode {
    /// The batch column holding output `output` of this node.
    pub fn column(&self, output: &str) -> String {
        format!("{}.{output}", self.id)
    }
}

/// Plans validated node `n`; `executors` are the graph's, as planned.
pub(super) fn resolve(
    n: &TypedNode<'_>,
    base_dir: &Path,
    executors: &[RemoteExecutor],
) -> ValidNode {
    let kind = match &n.kind {
        CheckedKind::Model(m) => NodeKind::Model(model(m, base_dir, executors)),
        CheckedKind::Op(op) => NodeKind::Op(op.clone()),
        CheckedKind::Gather(g) => NodeKind::Gather(gather(n, g.fanout)),
    };
    ValidNode {
        id: n.id.clone(),
        kind,
        inputs: n.inputs.clone(),
        outputs: n.outputs.clone(),
    }
}

/// A gather: its fan-out's lineage id (validated node `fanout`) and its columns.
fn gather(n: &TypedNode<'_>, fanout: usize) -> GatherPlan {
    let columns = n
        .inputs
        .iter()
        .zip(&n.outputs)
        .map(|(port, (name, _))| GatherColumn {
            input: port.column.clone(),
            output: format!("{}.{name}", n.id),
            part: port.ty.clone(),
        })
        .collect();
    GatherPlan {
        fanout: super::lineage_id(crate::validate::Producer::Node(fanout)),
        columns,
        count_column: format!("{}.count", n.id),
    }
}

/// A model node: each feature's resolution, gathered.
fn model(m: &CheckedModel<'_>, base_dir: &Path, executors: &[RemoteExecutor]) -> ModelNode {
    let spec = m.spec;
    let replicas = placement::replica_set(spec, executors);
    let (executor, auto_parallelism) =
        parallelism::executor_config(spec, base_dir, m.serf_profile.as_ref());
    let parity = parity::parity_plan(&spec.id.value, spec, base_dir, &executor, executors);
    ModelNode {
        path: base_dir.join(&spec.path.value),
        call: m.call,
        batching: spec.batching.clone(),
        pad: padding::pad_plan(spec, &m.metadata, m.call),
        executor,
        metadata: m.metadata.clone(),
        parity,
        routing: routing::routing(spec, &replicas, base_dir, m.kairos_profile.as_ref()),
        auto_parallelism: auto_parallelism.map(Box::new),
        state: stateful::stateful_node(spec, &m.metadata).map(Box::new),
        warmup: m.warmup.clone(),
        replicas,
    }
}
