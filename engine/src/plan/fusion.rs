//! Operator fusion: a `cast → transpose → normalize` chain (either of the first two may be
//! missing) becomes one [`TensorOp::Preprocess`] node when nothing but the next node of the chain
//! reads each intermediate tensor, so the worker makes one pass over each image instead of three,
//! and no tensor is written only to be read once and dropped.
//!
//! The fused node keeps the normalize's id, lineage id and outputs, so every reader and graph
//! output finds it as before; it reads what the chain's first node read. The nodes folded in are
//! removed from the plan (their ids are named in the fused node's label), and the lineage ids of
//! the rest are kept, so a lineage id is not an index into the plan's nodes. A chain is fused only
//! when its cast produces f32 (what normalize reads), so the fused node computes exactly the
//! values of the chain.

use std::collections::HashMap;

use super::{NodeKind, PlannedNode};
use crate::tensor::DType;
use crate::validate::{GraphOutput, PreprocessOp, TensorOp};

/// `nodes` (in topological order) with every fusable chain made one node.
pub(super) fn fuse(mut nodes: Vec<PlannedNode>, outputs: &[GraphOutput]) -> Vec<PlannedNode> {
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for port in nodes.iter().flat_map(|n| &n.node.inputs) {
        *readers.entry(port.column.as_str()).or_default() += 1;
    }
    for o in outputs {
        *readers.entry(o.column.as_str()).or_default() += 1;
    }
    // The chains, found first (against the unchanged plan), applied after.
    let chains: Vec<(usize, Vec<usize>)> = (0..nodes.len())
        .filter_map(|i| chain(&nodes, i, &readers).map(|c| (i, c)))
        .collect();
    drop(readers);
    let mut removed = vec![false; nodes.len()];
    for (last, folded) in chains {
        let (mut cast, mut perm) = (None, None);
        for &f in &folded {
            match &nodes[f].node.kind {
                NodeKind::Op(TensorOp::Cast { to }) => cast = Some(*to),
                NodeKind::Op(TensorOp::Transpose { perm: p }) => perm = Some(p.clone()),
                _ => {}
            }
            removed[f] = true;
        }
        let first = &nodes[folded[0]];
        let (inputs, producer_ids) = (first.node.inputs.clone(), first.producer_ids.clone());
        let fused = folded.iter().map(|&f| nodes[f].node.id.clone()).collect();
        let node = &mut nodes[last];
        let NodeKind::Op(TensorOp::Normalize { mean, std }) = &node.node.kind else {
            continue;
        };
        node.node.kind = NodeKind::Op(TensorOp::Preprocess(PreprocessOp {
            cast,
            perm,
            mean: mean.clone(),
            std: std.clone(),
            fused,
        }));
        node.node.inputs = inputs;
        node.producer_ids = producer_ids;
    }
    let mut keep = removed.iter().map(|r| !r);
    nodes.retain(|_| keep.next().unwrap_or(true));
    nodes
}

/// The indices of the nodes a normalize at `last` can fold in (chain order), if at least one.
fn chain(nodes: &[PlannedNode], last: usize, readers: &HashMap<&str, usize>) -> Option<Vec<usize>> {
    if !matches!(
        nodes[last].node.kind,
        NodeKind::Op(TensorOp::Normalize { .. })
    ) {
        return None;
    }
    let mut folded = Vec::new();
    let mut at = last;
    // Walking back: at most a transpose, then at most a cast.
    for step in [Step::Transpose, Step::Cast] {
        let Some(p) = sole_producer(nodes, at, readers) else {
            break;
        };
        let fits = match (&nodes[p].node.kind, step) {
            (NodeKind::Op(TensorOp::Transpose { .. }), Step::Transpose) => true,
            (NodeKind::Op(TensorOp::Cast { to }), _) => *to == DType::F32,
            _ => false,
        };
        if !fits {
            continue;
        }
        folded.insert(0, p);
        at = p;
        if matches!(nodes[p].node.kind, NodeKind::Op(TensorOp::Cast { .. })) {
            break;
        }
    }
    (!folded.is_empty()).then_some(folded)
}

/// A fusable link of the chain, walking back from the normalize.
#[derive(Clone, Copy)]
enum Step {
    Transpose,
    Cast,
}

/// The node whose output node `at`'s only input is, when node `at` is its only reader.
fn sole_producer(
    nodes: &[PlannedNode],
    at: usize,
    readers: &HashMap<&str, usize>,
) -> Option<usize> {
    let [port] = &nodes[at].node.inputs[..] else {
        return None;
    };
    if readers.get(port.column.as_str()) != Some(&1) {
        return None;
    }
    let [id] = nodes[at].producer_ids[..] else {
        return None;
    };
    let p = nodes.iter().position(|n| n.lineage_id == id)?;
    // A single-output op: the column is its whole output.
    (nodes[p].node.outputs.len() == 1 && nodes[p].node.inputs.len() == 1).then_some(p)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::plan::{plan, NodeKind};
    use crate::spec::GraphSpec;
    use crate::validate::{validate, TensorOp};

    fn planned(nodes: &str, outputs: &str) -> crate::plan::Plan {
        let text = format!(
            "name: g\ninputs: [{{name: x, dtype: u8, shape: [4, 5, 3]}}]\nnodes:\n{nodes}\noutputs: [{outputs}]\n"
        );
        let spec = GraphSpec::from_yaml(&text, "test.yaml").unwrap();
        plan(&validate(&spec, Path::new(".")).unwrap())
    }

    const CHAIN: &str = "  - cast: {id: f, input: x, to: f32}\n  \
        - transpose: {id: t, input: f, perm: [2, 0, 1]}\n  \
        - normalize: {id: n, input: t, mean: [1.0, 2.0, 3.0], std: [4.0]}";

    #[test]
    fn a_chain_read_only_along_itself_becomes_one_node_keeping_the_last_id() {
        let p = planned(CHAIN, "{name: y, from: n.output}");
        assert_eq!(p.nodes.len(), 1);
        let n = &p.nodes[0];
        assert_eq!((n.node.id.as_str(), n.lineage_id), ("n", 3));
        assert_eq!(n.producer_ids, vec![0]);
        assert_eq!(n.node.inputs[0].column, "x");
        let NodeKind::Op(TensorOp::Preprocess(op)) = &n.node.kind else {
            panic!("{:?}", n.node.kind)
        };
        assert_eq!(op.fused, ["f", "t"]);
        assert_eq!(op.perm.as_deref(), Some(&[2, 0, 1][..]));
        assert!(p.describe().contains(
            "node   n [cast to=f32 → transpose perm=[2, 0, 1] → normalize mean=[1.0, 2.0, 3.0] std=[4.0] (fused: f, t)] ← ingress"
        ), "{}", p.describe());
    }

    #[test]
    fn an_intermediate_read_elsewhere_stays_its_own_node() {
        // The transpose's output is also a graph output: only the cast cannot be folded past it.
        let p = planned(
            CHAIN,
            "{name: y, from: n.output}, {name: z, from: t.output}",
        );
        let ids: Vec<&str> = p.nodes.iter().map(|n| n.node.id.as_str()).collect();
        assert_eq!(ids, ["f", "t", "n"]);
        // The cast's output read by two nodes: the transpose and normalize fuse, the cast stays.
        let p = planned(
            &format!("{CHAIN}\n  - transpose: {{id: u, input: f, perm: [1, 0, 2]}}"),
            "{name: y, from: n.output}, {name: z, from: u.output}",
        );
        let mut ids: Vec<&str> = p.nodes.iter().map(|n| n.node.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["f", "n", "u"]);
        let n = p.nodes.iter().find(|n| n.node.id == "n").unwrap();
        assert_eq!(p.producer_name(n.producer_ids[0]), "f");
    }
}
