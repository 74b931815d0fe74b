//! Which model nodes of a graph `weir profile` measures, how it reads the graph (before the
//! profiles an `auto` node needs exist), and where each node's profile is saved.

use std::path::{Path, PathBuf};

use super::SerfError;
use weir_engine::paths::FileRules;
use weir_engine::plan::{NodeKind, Plan};
use weir_runtime::{LoadError, LoadedGraph};

/// A model node to profile.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeToProfile {
    /// Node id.
    pub id: String,
    /// The model file.
    pub path: PathBuf,
    /// Whether its executor's intra-op threads spin (`executor.spinning`); the profile is measured
    /// the same way.
    pub spinning: bool,
    /// Its executor's `pin_cores_from`; the profile pins the same way.
    pub pin_cores_from: Option<usize>,
}

/// The model nodes of `plan`, in plan order.
pub fn model_nodes(plan: &Plan) -> Vec<NodeToProfile> {
    plan.nodes
        .iter()
        .filter_map(|n| match &n.node.kind {
            NodeKind::Model(m) => Some(NodeToProfile {
                id: n.node.id.clone(),
                path: m.path.clone(),
                spinning: m.executor.spinning,
                pin_cores_from: m.executor.pin_cores_from,
            }),
            _ => None,
        })
        .collect()
}

/// The model nodes to profile: every one, or the one named `only`.
///
/// # Errors
/// [`SerfError::NoSuchNode`] when `only` names no model node.
pub fn select_nodes(plan: &Plan, only: Option<&str>) -> Result<Vec<NodeToProfile>, SerfError> {
    let all = model_nodes(plan);
    match only {
        None => Ok(all),
        Some(id) => {
            let picked: Vec<_> = all.into_iter().filter(|n| n.id == id).collect();
            if picked.is_empty() {
                Err(SerfError::NoSuchNode(id.to_string()))
            } else {
                Ok(picked)
            }
        }
    }
}

/// Reads, validates and plans the graph at `path` for `weir profile`: as
/// [`weir_runtime::load_graph`], except that `parallelism: auto` is read as the default executor
/// setting, since the profile it needs is what profiling writes.
///
/// # Errors
/// As [`weir_runtime::load_graph`].
pub fn load_for_profiling(path: &Path) -> Result<LoadedGraph, LoadError> {
    use weir_engine::spec::{NodeSpec, ParallelismSpec};
    weir_runtime::load_graph_resolving(path, &FileRules::default(), |spec| {
        for node in &mut spec.nodes {
            if let NodeSpec::Model(m) = &mut node.value {
                if matches!(
                    m.parallelism.as_ref().map(|p| p.value),
                    Some(ParallelismSpec::Auto(_))
                ) {
                    m.parallelism = None;
                }
            }
        }
        Ok(())
    })
}

/// Where the profile of node `node` of the graph file `graph` lives: `<graph dir>/<node>.serf.json`.
pub fn profile_path(graph: &Path, node: &str) -> PathBuf {
    weir_engine::parallelism::profile_path(graph.parent().unwrap_or(Path::new(".")), node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_path_sits_next_to_the_graph() {
        assert_eq!(
            profile_path(Path::new("graphs/quickstart.yaml"), "squeezenet"),
            PathBuf::from("graphs/squeezenet.serf.json")
        );
        assert_eq!(
            profile_path(Path::new("g.yaml"), "m"),
            PathBuf::from("m.serf.json")
        );
    }
}
