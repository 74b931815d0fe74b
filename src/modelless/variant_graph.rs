//! The one-node graph that serves one variant: the task's signature in, the variant's model
//! node, its outputs out. In this process the node runs the variant's file with the variant's
//! intra-op threads; on a remote executor the node's only replica is that executor, and the file
//! here gives the node its inputs and outputs. Either way the sessions are built as the variant
//! was profiled: its threads, its graph-optimisation level, its fixed batch.

use std::path::Path;

use weir_infaas::repository::Signature;
use weir_infaas::variant::Variant;

/// The executor name a remote variant's graph gives its one executor.
const REMOTE_NAME: &str = "worker";

/// The graph's YAML for `variant` (file at `path`) with the task's signature `sig`, run in this
/// process (`remote: None`) or on the executor serving under the key prefix `remote`.
pub(super) fn variant_graph(
    variant: &Variant,
    sig: &Signature,
    path: &Path,
    remote: Option<&str>,
) -> String {
    let dims = |d: &[Option<u64>]| -> String {
        d.iter()
            .skip(1)
            .map(|x| x.map_or_else(|| "-1".to_string(), |n| n.to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut yaml = format!("name: {}\n", variant.task);
    if let Some(prefix) = remote {
        yaml.push_str(&format!(
            "executors:\n  - {{name: {REMOTE_NAME}, key: {prefix:?}}}\n"
        ));
    }
    yaml.push_str("inputs:\n");
    for i in &sig.inputs {
        yaml.push_str(&format!(
            "  - {{name: {}, dtype: {}, shape: [{}]}}\n",
            i.name,
            i.dtype.name(),
            dims(&i.dims)
        ));
    }
    let inputs: Vec<String> = sig
        .inputs
        .iter()
        .map(|i| format!("{0}: {0}", i.name))
        .collect();
    let placement = match remote {
        Some(_) => format!("replicas: [{REMOTE_NAME}]"),
        None => format!(
            "executor: {{intra_op_threads: {}, graph_optimization: {}}}",
            variant.config.intra_threads.max(1),
            variant.config.graph_level.name()
        ),
    };
    let fixed = variant
        .config
        .fixed_batch
        .map(|b| format!(", fixed_size: {b}"))
        .unwrap_or_default();
    yaml.push_str(&format!(
        "nodes:\n  - model: {{id: m, path: {:?}, inputs: {{{}}}, batching: {{max_size: {}{fixed}}}, {placement}}}\noutputs:\n",
        path.display().to_string(),
        inputs.join(", "),
        variant.max_batch.max(1),
    ));
    for o in &sig.outputs {
        yaml.push_str(&format!("  - {{name: {0}, from: m.{0}}}\n", o.name));
    }
    yaml
}
