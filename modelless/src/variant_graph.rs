//! The one-node graph that serves one variant: the task's signature in, the variant's model
//! node, its outputs out. In this process the node runs the variant's file with the variant's
//! intra-op threads; on a remote executor the node's only replica is that executor, and the file
//! here gives the node its inputs and outputs. Either way the sessions are built as the variant
//! was profiled: its threads, its graph-optimisation level, its fixed batch.

use std::path::Path;

use weir_engine::spec::{
    DimSpec, ExecutorSpec, GraphBuilder, GraphSpec, ModelBuilder, RemoteExecutorSpec, Spanned,
};
use weir_infaas::repository::Signature;
use weir_infaas::variant::Variant;

/// The executor name a remote variant's graph gives its one executor.
const REMOTE_NAME: &str = "worker";
/// The model node's id.
const NODE: &str = "m";

/// The graph for `variant` (file at `path`) with the task's signature `sig`, run in this
/// process (`remote: None`) or on the executor serving under the key prefix `remote`.
pub(super) fn variant_graph(
    variant: &Variant,
    sig: &Signature,
    path: &Path,
    remote: Option<&str>,
) -> GraphSpec {
    let mut graph = GraphBuilder::new(&variant.task);
    if let Some(prefix) = remote {
        graph = graph.remote_executor(RemoteExecutorSpec {
            name: Spanned::unlocated(REMOTE_NAME.to_string()),
            endpoint: None,
            key: Some(Spanned::unlocated(prefix.to_string())),
            device: Default::default(),
            threads: None,
            labels: Default::default(),
        });
    }
    let mut node = ModelBuilder::new(NODE, path).batching(variant.max_batch.max(1) as usize, 0);
    for i in &sig.inputs {
        // The batch dimension is the graph's own; the rest are the task's, free where `None`.
        let dims = i
            .dims
            .iter()
            .skip(1)
            .map(|d| DimSpec::Size(d.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX))))
            .collect();
        graph = graph.input_dims(&i.name, i.dtype, dims);
        node = node.input(&i.name, &i.name);
    }
    if let Some(b) = variant.config.fixed_batch {
        node = node.fixed_batch(b as usize);
    }
    node = match remote {
        Some(_) => node.replicas(&[REMOTE_NAME]),
        None => node.executor(ExecutorSpec {
            intra_op_threads: variant.config.intra_threads.max(1) as usize,
            graph_optimization: variant.config.graph_level,
            ..ExecutorSpec::default()
        }),
    };
    graph = graph.model(node);
    for o in &sig.outputs {
        graph = graph.output(&o.name, &format!("{NODE}.{}", o.name));
    }
    graph.build()
}
