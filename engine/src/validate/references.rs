//! References: every tensor a node or graph output reads, resolved to its producer.
//!
//! A reference is `node.tensor`, a bare `node` when the node has one output, or a graph input's
//! name. An unknown name or output is reported with a did-you-mean; a reference to a node whose own
//! errors left its outputs unknown is skipped (already reported). The resolved edges must form a DAG:
//! a cycle is reported once, with the loop, and stops validation, since nothing after it has an
//! order to check in. Outputs must come from a node (a reply that only echoes an input is a
//! mistake), and a node that feeds no output is a warning.

use std::collections::{BTreeSet, HashMap};

use super::{node_path, GraphInput, GraphOutput, NodeFacts, Producer, TypedNode, Validator};
use crate::diagnostic::{did_you_mean, Diagnostic, Location};
use crate::onnx::ModelMetadata;
use crate::spec::{NodeSpec, Spanned, TensorRef};

/// One reference a node makes: its field, where it is written, and what it resolved to.
pub(super) struct RefEdge {
    pub field: String,
    pub location: Location,
    pub target: Option<(Producer, String)>,
}

impl Validator<'_, '_> {
    /// Resolves every reference of every spec node, in spec order.
    pub(super) fn resolve_node_inputs(
        &mut self,
        ids: &HashMap<&str, usize>,
        facts: &[NodeFacts<'_>],
        inputs: &[GraphInput],
    ) -> Vec<Vec<RefEdge>> {
        let mut edges = Vec::new();
        for node in &self.spec.nodes {
            let id = node.id().value.as_str();
            let mut resolved = Vec::new();
            for (field, r) in node.input_refs() {
                let path = node_path(id, &field);
                let target = self.resolve(r, &path, ids, facts, inputs);
                resolved.push(RefEdge {
                    field,
                    location: r.location,
                    target,
                });
            }
            edges.push(resolved);
        }
        edges
    }

    fn resolve(
        &mut self,
        r: &Spanned<String>,
        path: &str,
        ids: &HashMap<&str, usize>,
        facts: &[NodeFacts<'_>],
        inputs: &[GraphInput],
    ) -> Option<(Producer, String)> {
        let tr = TensorRef::parse(&r.value);
        if let Some(i) = ids.get(tr.source) {
            let node = &self.spec.nodes[*i];
            // A model node's outputs are known from its file (plus `reconstructed` under ParM).
            let outputs = facts[*i]
                .outputs
                .as_ref()
                .filter(|_| facts[*i].model.is_some())
                .map(|o| o.iter().map(|(n, _)| n.clone()).collect())
                .or_else(|| {
                    node_output_names(&node.value, facts[*i].model.as_ref().map(|m| &m.metadata))
                });
            let Some(outputs) = outputs else {
                return None; // model unreadable: already reported
            };
            return match tr.tensor {
                Some(t) if outputs.iter().any(|o| o == t) => {
                    Some((Producer::Node(*i), t.to_string()))
                }
                Some(t) => {
                    let help = did_you_mean(t, outputs.iter().map(String::as_str))
                        .map(|s| format!("did you mean `{}.{s}`?", tr.source))
                        .unwrap_or_else(|| format!("its outputs are: {}", outputs.join(", ")));
                    self.error(
                        path.to_string(),
                        r.location,
                        format!(
                            "`{}` reads `{}`, but node `{}` has no output `{t}`",
                            path_owner(path),
                            r.value,
                            tr.source
                        ),
                    )
                    .help = Some(help);
                    None
                }
                None if outputs.len() == 1 => Some((Producer::Node(*i), outputs[0].clone())),
                None => {
                    self.error(path.to_string(), r.location, format!("`{}` reads `{}`, but node `{}` has {} outputs; name one as `{}.<output>`", path_owner(path), r.value, tr.source, outputs.len(), tr.source)).help = Some(format!("its outputs are: {}", outputs.join(", ")));
                    None
                }
            };
        }
        if tr.tensor.is_none() {
            if inputs.iter().any(|g| g.name == tr.source) {
                return Some((Producer::Ingress, tr.source.to_string()));
            }
            if self.spec.inputs.iter().any(|g| g.name.value == tr.source) {
                return None; // input with a bad shape: already reported
            }
        }
        let candidates = ids
            .keys()
            .copied()
            .chain(inputs.iter().map(|g| g.name.as_str()));
        let help = did_you_mean(tr.source, candidates).map(|s| format!("did you mean `{s}`?"));
        let d = self.error(
            path.to_string(),
            r.location,
            format!(
                "`{}` reads from `{}`, which is not a node or graph input (unknown node)",
                path_owner(path),
                tr.source
            ),
        );
        d.help = help;
        None
    }

    pub(super) fn topological_order(&mut self, edges: &[Vec<RefEdge>]) -> Option<Vec<usize>> {
        let n = edges.len();
        let mut indegree = vec![0usize; n];
        let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node_edges) in edges.iter().enumerate() {
            let preds: BTreeSet<usize> = node_edges
                .iter()
                .filter_map(|e| match e.target {
                    Some((Producer::Node(p), _)) => Some(p),
                    _ => None,
                })
                .collect();
            indegree[i] = preds.len();
            for p in preds {
                consumers[p].push(i);
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).rev().collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop() {
            order.push(i);
            for &c in &consumers[i] {
                indegree[c] -= 1;
                if indegree[c] == 0 {
                    ready.push(c);
                }
            }
        }
        if order.len() == n {
            return Some(order);
        }
        // Walk predecessors from a node left over until one repeats: that is a cycle.
        let left: Vec<usize> = (0..n).filter(|&i| indegree[i] > 0).collect();
        let mut walk = vec![left[0]];
        loop {
            let cur = walk[walk.len() - 1];
            let next = edges[cur].iter().find_map(|e| match e.target {
                Some((Producer::Node(p), _)) if indegree[p] > 0 => Some(p),
                _ => None,
            });
            let Some(next) = next else { break };
            if let Some(pos) = walk.iter().position(|&w| w == next) {
                let mut cycle: Vec<&str> = walk[pos..]
                    .iter()
                    .rev()
                    .map(|&i| self.spec.nodes[i].id().value.as_str())
                    .collect();
                // `walk` follows predecessors; reversed it is the data flow, ending at the node
                // reported, so rotate that node to the front.
                cycle.rotate_right(1);
                cycle.push(cycle[0]);
                let first = &self.spec.nodes[walk[pos]];
                self.error(
                    format!("nodes.{}", first.id().value),
                    first.id().location,
                    format!("the graph has a cycle: {}", cycle.join(" → ")),
                )
                .help = Some("a service graph must be a DAG; break the loop".into());
                return None;
            }
            walk.push(next);
        }
        None
    }

    pub(super) fn graph_outputs(
        &mut self,
        ids: &HashMap<&str, usize>,
        facts: &[NodeFacts<'_>],
        inputs: &[GraphInput],
        index_of: &[usize],
    ) -> Vec<GraphOutput> {
        let spec = self.spec;
        if spec.outputs.is_empty() {
            self.error(
                "outputs".into(),
                spec.name.location,
                "the graph has no outputs; a reply would be empty".into(),
            );
        }
        let mut out = Vec::new();
        for o in &spec.outputs {
            let path = format!("outputs.{}.from", o.name.value);
            let Some((producer, tensor)) = self.resolve(&o.from, &path, ids, facts, inputs) else {
                continue;
            };
            let Producer::Node(i) = producer else {
                self.error(path, o.from.location, format!("graph output `{}` reads graph input `{tensor}` directly; outputs must come from a node", o.name.value));
                continue;
            };
            let ty = facts[i].outputs.as_ref().and_then(|outs| {
                outs.iter()
                    .find(|(n, _)| *n == tensor)
                    .map(|(_, t)| t.clone())
            });
            match ty {
                Some(ty) if index_of[i] != usize::MAX => out.push(GraphOutput {
                    name: o.name.value.clone(),
                    column: format!("{}.{tensor}", spec.nodes[i].id().value),
                    ty,
                    producer: Producer::Node(index_of[i]),
                }),
                _ => {
                    self.error(path, o.from.location, format!("graph output `{}` is unreachable: node `{}` could not be typed from the graph inputs (see the errors above)", o.name.value, spec.nodes[i].id().value));
                }
            }
        }
        out
    }

    pub(super) fn warn_dead_nodes(&mut self, nodes: &[TypedNode<'_>], outputs: &[GraphOutput]) {
        let mut live = vec![false; nodes.len()];
        let mut stack: Vec<usize> = outputs
            .iter()
            .filter_map(|o| match o.producer {
                Producer::Node(i) => Some(i),
                Producer::Ingress => None,
            })
            .collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut live[i], true) {
                continue;
            }
            for p in &nodes[i].inputs {
                if let Producer::Node(j) = p.producer {
                    stack.push(j);
                }
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            if !live[i] {
                let loc = self
                    .spec
                    .nodes
                    .iter()
                    .find(|s| s.id().value == n.id)
                    .map(|s| s.id().location)
                    .unwrap_or_default();
                self.diags.push(
                    Diagnostic::warning(
                        format!("nodes.{}", n.id),
                        loc,
                        format!(
                            "node `{}` feeds no graph output; it will run for nothing",
                            n.id
                        ),
                    )
                    .with_help("read one of its outputs in `outputs`, or remove it"),
                );
            }
        }
    }
}

/// A dotted spec path without its last field: `nodes.a.input` → `nodes.a`.
fn path_owner(path: &str) -> &str {
    path.rsplit_once('.').map(|(a, _)| a).unwrap_or(path)
}

/// A node's output names as its kind fixes them; a model's come from its file (`None` when that
/// could not be read).
fn node_output_names(node: &NodeSpec, meta: Option<&ModelMetadata>) -> Option<Vec<String>> {
    let fixed = |names: &[&str]| Some(names.iter().map(|s| s.to_string()).collect());
    match node {
        NodeSpec::Model(_) => meta.map(|m| m.outputs.iter().map(|o| o.name.clone()).collect()),
        NodeSpec::Normalize(_)
        | NodeSpec::Concat(_)
        | NodeSpec::Softmax(_)
        | NodeSpec::DecodeImage(_)
        | NodeSpec::Resize(_)
        | NodeSpec::Cast(_)
        | NodeSpec::Transpose(_)
        | NodeSpec::Crop(_)
        | NodeSpec::Pad(_)
        | NodeSpec::Slice(_)
        | NodeSpec::Reshape(_) => fixed(&["output"]),
        NodeSpec::Regions(_) => fixed(&["boxes", "scores"]),
        NodeSpec::Labels(_) => fixed(&["labels"]),
        NodeSpec::Tokenize(_) => fixed(&["input_ids", "attention_mask"]),
        NodeSpec::Detokenize(_) => fixed(&["text"]),
        NodeSpec::CtcDecode(_) => fixed(&["text", "confidence"]),
        NodeSpec::Argmax(_) => fixed(&["index"]),
        NodeSpec::TopK(_) => fixed(&["values", "indices"]),
        NodeSpec::CropBoxes(_) => fixed(&["image", "box", "score"]),
        NodeSpec::Gather(g) => Some(
            g.inputs
                .keys()
                .cloned()
                .chain(std::iter::once("count".to_string()))
                .collect(),
        ),
    }
}
