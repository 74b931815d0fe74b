//! Types and shapes: the graph inputs', and along every edge in topological order.
//!
//! A graph input's dimensions are positive sizes, `-1` or symbolic names (sizes chosen per
//! request). Each node is typed once all its producers are: a model input takes the dtype and per-request shape the model's metadata gives (its first
//! dimension is the batch, unless the node says `batch: false`), and every model input is bound while no binding names an input the
//! model lacks; a tensor op's rules are in [`super::tensor_ops`]. A node whose producer could not be
//! typed is skipped, so one error is reported once, where it happens, rather than again downstream.

use super::references::RefEdge;
use super::{node_path, CheckedKind, GraphInput, NodeFacts, Port, Producer, TypedNode, Validator};
use crate::diagnostic::{did_you_mean, Location};
use crate::onnx::{ElementType, TensorInfo};
use crate::spec::{DimSpec, ModelSpec, NodeSpec};
use crate::tensor::{Dim, ShapeDisplay, TensorType};

/// Whether `name` may name a symbolic dimension: a letter or `_`, then letters, digits or `_`.
fn is_symbol(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every dimension of `dims` as a size, or `None` when one is dynamic.
pub(crate) fn fixed_shape(dims: &[Dim]) -> Option<Vec<usize>> {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => Some(*n),
            Dim::Dynamic => None,
        })
        .collect()
}

impl<'a> Validator<'a, '_> {
    /// The graph inputs whose shapes are usable: every dimension a positive size, `-1`, or a
    /// name (a symbolic dimension, the same size wherever it appears within one request).
    pub(super) fn graph_inputs(&mut self) -> Vec<GraphInput> {
        let mut out = Vec::new();
        for input in &self.spec.inputs {
            let mut dims = Vec::new();
            let mut symbols = Vec::new();
            let mut ok = true;
            for d in input.shape.value.iter() {
                match d {
                    DimSpec::Size(n) if *n > 0 => {
                        dims.push(Dim::Fixed(*n as usize));
                        symbols.push(None);
                    }
                    DimSpec::Size(-1) => {
                        dims.push(Dim::Dynamic);
                        symbols.push(None);
                    }
                    DimSpec::Named(name) if is_symbol(name) => {
                        dims.push(Dim::Dynamic);
                        symbols.push(Some(name.clone()));
                    }
                    _ => ok = false,
                }
            }
            if !ok {
                let shown: Vec<String> = input.shape.value.iter().map(|d| d.to_string()).collect();
                self.error(
                    format!("inputs.{}.shape", input.name.value),
                    input.shape.location,
                    format!(
                        "graph input `{}` has shape [{}]: every dimension must be a positive size, -1 (any size) or a name such as `seq`",
                        input.name.value,
                        shown.join(", ")
                    ),
                );
                continue;
            }
            if let Some(seq) = &input.sequence {
                let problem = super::sequences::sequence_input_problem(
                    input.dtype.value,
                    &input.shape.value,
                    &seq.value,
                );
                if let Some(problem) = problem {
                    self.error(
                        format!("inputs.{}.sequence", input.name.value),
                        seq.location,
                        format!("graph input `{}`: {problem}", input.name.value),
                    );
                    continue;
                }
            }
            out.push(GraphInput {
                name: input.name.value.clone(),
                client_name: input.client_name.as_ref().map(|c| c.value.clone()),
                ty: TensorType {
                    dtype: input.dtype.value,
                    shape: dims,
                },
                symbols,
                sequence: input.sequence.as_ref().map(|s| s.value),
                default: None,
            });
        }
        out
    }

    /// Types the spec's nodes in `order` along their resolved `edges`, recording each node's
    /// outputs in `facts`. Returns the typed nodes and, per spec node, its index among them
    /// (`usize::MAX` for a node left untyped).
    pub(super) fn type_nodes(
        &mut self,
        order: &[usize],
        edges: &[Vec<RefEdge>],
        facts: &mut [NodeFacts<'a>],
        inputs: &[GraphInput],
    ) -> (Vec<TypedNode<'a>>, Vec<usize>) {
        let spec = self.spec;
        let mut index_of = vec![usize::MAX; spec.nodes.len()];
        for (pos, &i) in order.iter().enumerate() {
            index_of[i] = pos;
        }
        let mut nodes = Vec::with_capacity(order.len());
        for &i in order {
            let node = &spec.nodes[i].value;
            let mut ports = Vec::new();
            let mut complete = true;
            for RefEdge { field, target, .. } in &edges[i] {
                let Some((producer, output)) = target else {
                    complete = false;
                    continue;
                };
                let (column, ty) = match producer {
                    Producer::Ingress => match inputs.iter().find(|g| &g.name == output) {
                        Some(g) => (g.name.clone(), Some(g.ty.clone())),
                        None => (output.clone(), None),
                    },
                    Producer::Node(p) => {
                        let ty = facts[*p].outputs.as_ref().and_then(|outs| {
                            outs.iter()
                                .find(|(n, _)| n == output)
                                .map(|(_, t)| t.clone())
                        });
                        (format!("{}.{output}", spec.nodes[*p].id().value), ty)
                    }
                };
                let Some(ty) = ty else {
                    complete = false;
                    continue;
                };
                let producer = match producer {
                    Producer::Ingress => Producer::Ingress,
                    Producer::Node(p) => Producer::Node(index_of[*p]),
                };
                ports.push(Port {
                    name: field.clone(),
                    column,
                    ty,
                    producer,
                });
            }
            if !complete {
                continue;
            }
            let located: Vec<Location> = edges[i].iter().map(|e| e.location).collect();
            let typed = match node {
                NodeSpec::Model(m) => self.type_model(m, &facts[i], ports, &located),
                NodeSpec::Gather(g) => Some(self.type_gather(g, ports)),
                op => self.type_op(op, ports, &located),
            };
            if let Some(typed) = typed {
                facts[i].outputs = Some(typed.outputs.clone());
                nodes.push(typed);
            }
        }
        (nodes, index_of)
    }

    /// Orders a model node's `ports` as the model's inputs and checks each against the model.
    fn type_model(
        &mut self,
        m: &ModelSpec,
        facts: &NodeFacts<'a>,
        ports: Vec<Port>,
        locs: &[Location],
    ) -> Option<TypedNode<'a>> {
        let id = m.id.value.as_str();
        let checked = facts.model.clone()?;
        let meta = &checked.metadata;
        let mut ordered = Vec::new();
        let mut ok = true;
        let (state_inputs, _) = m.state_tensors();
        for info in &meta.inputs {
            if state_inputs.contains(&info.name.as_str()) || m.constants.contains_key(&info.name) {
                continue;
            }
            let Some(pos) = ports
                .iter()
                .position(|p| p.name == format!("inputs.{}", info.name))
            else {
                self.error(node_path(id, "inputs"), m.id.location, format!("node `{id}`: model input `{}` is not bound; add `{}: <tensor>` under `inputs`", info.name, info.name));
                ok = false;
                continue;
            };
            let port = &ports[pos];
            let batch_dim = checked.call.has_batch_dim();
            if !self.check_model_input(id, (info, batch_dim), port, locs[pos]) {
                ok = false;
            }
            ordered.push(Port {
                name: info.name.clone(),
                ..port.clone()
            });
        }
        for (pos, p) in ports.iter().enumerate() {
            let name = p.name.trim_start_matches("inputs.");
            // An overridable initializer: bound when a graph input may override it.
            if let Some(o) = meta.overridable(name) {
                let batch_dim = checked.call.has_batch_dim();
                let remote = m.replicas.as_ref().is_some_and(|r| {
                    r.value
                        .iter()
                        .any(|n| n.value != crate::spec::LOCAL_REPLICA)
                });
                if remote {
                    self.error(node_path(id, &p.name), locs[pos], format!("node `{id}`: model input `{name}` (an initializer a call may override) is bound, but the node runs on remote executors, which feed a model only the inputs it cannot run without"))
                        .help = Some("run the node on `local` replicas, or leave the input unbound (the model then always uses its file's value)".into());
                    ok = false;
                }
                if !self.check_overridable_batch(id, &o.info, checked.call, locs[pos])
                    || !self.check_model_input(id, (&o.info, batch_dim), p, locs[pos])
                {
                    ok = false;
                }
                ordered.push(Port {
                    name: name.to_string(),
                    ..p.clone()
                });
                continue;
            }
            if !meta.inputs.iter().any(|i| i.name == name) {
                let names = meta.inputs.iter().map(|i| i.name.as_str());
                let help = did_you_mean(name, names)
                    .map(|s| format!("did you mean `{s}`?"))
                    .unwrap_or_else(|| {
                        format!(
                            "its inputs are: {}",
                            meta.inputs
                                .iter()
                                .map(|i| i.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    });
                self.error(
                    node_path(id, &p.name),
                    locs[pos],
                    format!("node `{id}`: the model has no input `{name}`"),
                )
                .help = Some(help);
                ok = false;
            }
        }
        let outputs = facts.outputs.clone()?;
        ok.then(|| TypedNode {
            id: id.to_string(),
            kind: CheckedKind::Model(Box::new(checked)),
            inputs: ordered,
            outputs,
        })
    }

    /// Whether overridable initializer `info` of node `id`'s model has a first dimension that
    /// calls of shape `call` can fill (else an error at `loc`): a batched call's rows stack along
    /// it.
    fn check_overridable_batch(
        &mut self,
        id: &str,
        info: &TensorInfo,
        call: super::CallShape,
        loc: Location,
    ) -> bool {
        use super::CallShape;
        let first = info.dims.first().copied();
        let fits = match call {
            CallShape::Unbatched => true,
            CallShape::Batched => first == Some(Dim::Dynamic),
            CallShape::PerRequest => matches!(first, Some(Dim::Dynamic | Dim::Fixed(1))),
            CallShape::Fixed(n) => {
                matches!(first, Some(Dim::Dynamic)) || first == Some(Dim::Fixed(n))
            }
        };
        if !fits {
            self.error(node_path(id, &format!("inputs.{}", info.name)), loc, format!("node `{id}`: model input `{}` (an initializer a call may override) has shape {} in the file, whose first dimension cannot hold this node's batches", info.name, ShapeDisplay(&info.dims)))
                .help = Some("declare its first dimension free (a name such as `N`) in the model, or add `batch: false` to the node".into());
        }
        fits
    }

    /// Whether `port` fits model input `info` of node `id` (else an error at `loc`); a request's
    /// tensor is the input without its batch dimension when `batch_dim`, the whole input otherwise.
    fn check_model_input(
        &mut self,
        id: &str,
        (info, batch_dim): (&TensorInfo, bool),
        port: &Port,
        loc: Location,
    ) -> bool {
        let ElementType::Supported(dtype) = info.element else {
            return false;
        };
        let expected = TensorType {
            dtype,
            shape: info.request_dims(batch_dim).to_vec(),
        };
        if dtype != port.ty.dtype {
            self.error(
                node_path(id, &port.name),
                loc,
                format!(
                    "node `{id}`: model input `{}` takes {dtype}, but `{}` is {} (dtype mismatch)",
                    info.name, port.column, port.ty.dtype
                ),
            );
            return false;
        }
        if !port.ty.compatible(&expected) {
            self.error(node_path(id, &port.name), loc, format!("node `{id}`: model input `{}` takes per-request shape {}, but `{}` has shape {} (shape mismatch)", info.name, ShapeDisplay(&expected.shape), port.column, ShapeDisplay(&port.ty.shape)));
            return false;
        }
        true
    }
}
