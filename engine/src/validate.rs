//! Every rule that can reject a graph spec, run before anything starts.
//!
//! [`validate`] turns a [`GraphSpec`] into a [`ValidGraph`]: names resolved to node indices, nodes in
//! topological order, every edge typed. It collects *all* diagnostics before returning, so one run
//! of `weir validate` lists every problem. Rules, in order:
//!
//! 1. names: graph, inputs, nodes and outputs have usable names; ids are unique across inputs and
//!    nodes (`duplicate id`);
//! 2. each node's own fields (a model file exists and is ONNX, batching sizes ≥ 1, `k` ≥ 1, ...);
//! 3. references: every tensor a node or output reads names a graph input, or a node and one of its
//!    outputs (`unknown node`, `no output`), with a did-you-mean;
//! 4. no cycles (`cycle`), reported with the loop;
//! 5. types along every edge in topological order: dtype and per-request shape of the producer
//!    against what the consumer needs, read from the ONNX model's own metadata for model nodes;
//! 6. outputs: at least one, each reachable from the inputs (`unreachable`); nodes that feed no
//!    output are warnings.
//!
//! weir treats a model's first dimension as the batch dimension: fixed to 1 means one request per
//! call, dynamic means batched calls; the per-request shape is the rest.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::diagnostic::{did_you_mean, Diagnostic, Diagnostics, Location};
use crate::onnx::{read_metadata_under, ElementType, ModelMetadata, OnnxError, TensorInfo};
use crate::parallelism::{check_parallelism, AutoParallelism};
use crate::paths::{FileError, FileRules};
use crate::placement::{check_placement, Placement};
pub use crate::placement::{RemoteExecutor, ReplicaTarget};
use crate::routing::{check_routing, Routing};
use crate::spec::{BatchingSpec, ExecutorSpec, GraphSpec, ModelSpec, NodeSpec, Spanned, TensorRef};
use crate::stateful::{check_state, declared_state, StatefulNode};
use crate::stream::{check_streams, StreamConnector};
use crate::tensor::{DType, Dim, ShapeDisplay, TensorType};

/// Where a tensor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Producer {
    /// A graph input, delivered by the ingress.
    Ingress,
    /// The node at this index of [`ValidGraph::nodes`].
    Node(usize),
}

/// One tensor a node reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    /// The node's local name for it (a model input name, or `input`, `inputs[1]`).
    pub name: String,
    /// The batch column that carries it (see [`crate::batch`]).
    pub column: String,
    /// Its type.
    pub ty: TensorType,
    /// Who produces it.
    pub producer: Producer,
}

/// A model node after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelNode {
    /// The model file, resolved against the graph's folder.
    pub path: PathBuf,
    /// Whether the model takes a dynamic batch dimension (else: one request per call).
    pub batched: bool,
    /// Dynamic batching settings.
    pub batching: BatchingSpec,
    /// Executor settings.
    pub executor: ExecutorSpec,
    /// The model's signature.
    pub metadata: ModelMetadata,
    /// Where its replicas run (at least one).
    pub replicas: Vec<ReplicaTarget>,
    /// ParM parity coding around it, if configured.
    pub parity: Option<ParityPlan>,
    /// How its jobs are spread over its replicas.
    pub routing: Routing,
    /// SERF `parallelism: auto`: the profile the executor switches configurations by (`executor`
    /// then holds the starting configuration). `None` for a fixed configuration.
    pub auto_parallelism: Option<Box<AutoParallelism>>,
    /// The state it carries between calls and how that state is replicated (HAMS); `None` for a
    /// stateless model. State inputs and outputs are not among the node's ports or outputs.
    pub state: Option<Box<StatefulNode>>,
}

/// What a node does.
#[derive(Debug, Clone, PartialEq)]
// A plan holds a handful of nodes: the size of the model variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum NodeKind {
    /// Runs an ONNX model; ports follow the model's input order, outputs its output order.
    Model(ModelNode),
    /// Per-channel `(x - mean) / std`.
    Normalize {
        /// Means (one, or one per channel).
        mean: Vec<f32>,
        /// Standard deviations (one, or one per channel).
        std: Vec<f32>,
    },
    /// Index of the largest element.
    Argmax,
    /// `k` largest elements and their indices.
    TopK {
        /// How many.
        k: usize,
    },
    /// Concatenation along `axis` (normalised to 0..rank).
    Concat {
        /// Axis.
        axis: usize,
    },
}

/// A node after validation.
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

    /// The distinct producers of this node's inputs, ordered.
    pub fn producers(&self) -> Vec<Producer> {
        let set: BTreeSet<Producer> = self.inputs.iter().map(|p| p.producer).collect();
        set.into_iter().collect()
    }
}

/// A graph input after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphInput {
    /// Name (also its batch column).
    pub name: String,
    /// Type, every dimension fixed.
    pub ty: TensorType,
}

/// A graph output after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphOutput {
    /// Name in the reply.
    pub name: String,
    /// Batch column it is read from.
    pub column: String,
    /// Type.
    pub ty: TensorType,
    /// The node producing it.
    pub producer: Producer,
}

/// A graph that passed every rule: nodes in topological order, every reference resolved and typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidGraph {
    /// Name.
    pub name: String,
    /// Inputs.
    pub inputs: Vec<GraphInput>,
    /// Nodes, each after all its producers.
    pub nodes: Vec<ValidNode>,
    /// Outputs.
    pub outputs: Vec<GraphOutput>,
    /// Remote executors declared by the graph.
    pub executors: Vec<RemoteExecutor>,
    /// Streaming connectors declared by the graph.
    pub streams: Vec<StreamConnector>,
    /// Findings that do not stop the graph.
    pub warnings: Vec<Diagnostic>,
}

/// Validates `spec`, resolving relative model paths against `base_dir` (the graph file's folder).
///
/// # Errors
/// Every error found, with warnings, as [`Diagnostics`] (attach the source text for snippets).
pub fn validate(spec: &GraphSpec, base_dir: &Path) -> Result<ValidGraph, Diagnostics> {
    validate_under(spec, base_dir, &FileRules::default())
}

/// As [`validate`], reading every file the graph names within `files` (a path root, size caps).
///
/// # Errors
/// As [`validate`]; a file that breaks `files` is an error naming its field.
pub fn validate_under(
    spec: &GraphSpec,
    base_dir: &Path,
    files: &FileRules,
) -> Result<ValidGraph, Diagnostics> {
    let mut v = Validator {
        spec,
        base_dir,
        files,
        diags: Vec::new(),
        placement: Placement::default(),
    };
    let graph = v.run();
    match graph {
        Some(g)
            if !v
                .diags
                .iter()
                .any(|d| d.severity == crate::diagnostic::Severity::Error) =>
        {
            Ok(ValidGraph {
                warnings: v.diags,
                ..g
            })
        }
        _ => Err(Diagnostics {
            items: v.diags,
            source: None,
        }),
    }
}

struct Validator<'a> {
    spec: &'a GraphSpec,
    base_dir: &'a Path,
    files: &'a FileRules,
    diags: Vec<Diagnostic>,
    placement: Placement,
}

/// One reference a node makes: its field, where it is written, and what it resolved to.
struct RefEdge {
    field: String,
    location: Location,
    target: Option<(Producer, String)>,
}

/// A node typed by rule 5: what it does, its ports and its outputs.
type TypedNode = (NodeKind, Vec<Port>, Vec<(String, TensorType)>);

/// Per spec node: what rule 2 learned, and its outputs once known.
struct NodeFacts {
    model: Option<(ModelMetadata, bool)>,
    outputs: Option<Vec<(String, TensorType)>>,
    parity: Option<ParityPlan>,
    /// `routing:` resolved (`None` after an error).
    routing: Option<Routing>,
    /// The executor setting after `parallelism:`, and the SERF profile under `auto`.
    parallelism: Option<(ExecutorSpec, Option<AutoParallelism>)>,
    /// `state:`/`replication:` resolved (`None` for a stateless node or after an error).
    state: Option<StatefulNode>,
}

/// The output a parity-coded model node adds: 1 for a reconstructed row, 0 for a real one.
pub const RECONSTRUCTED_OUTPUT: &str = "reconstructed";

/// ParM parity coding of a model node, after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityPlan {
    /// Coding-group size.
    pub k: usize,
    /// The parity model, resolved against the graph's folder.
    pub path: PathBuf,
    /// How a group's queries become the parity query.
    pub encoder: crate::spec::ParityEncoder,
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn node_path(id: &str, field: &str) -> String {
    format!("nodes.{id}.{field}")
}

impl<'a> Validator<'a> {
    fn error(&mut self, path: String, loc: Location, msg: String) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(path, loc, msg));
        let last = self.diags.len() - 1;
        &mut self.diags[last]
    }

    fn run(&mut self) -> Option<ValidGraph> {
        let spec = self.spec;
        self.check_names();
        self.placement = check_placement(spec, &mut self.diags);
        let streams = check_streams(spec, self.base_dir, self.files, &mut self.diags);
        let inputs = self.graph_inputs();
        let mut facts: Vec<NodeFacts> = spec
            .nodes
            .iter()
            .map(|n| self.check_node_fields(n))
            .collect();
        let ids: HashMap<&str, usize> = spec
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id().value.as_str(), i))
            .collect();

        // Rule 3: resolve every reference to (producer, output name).
        let mut edges: Vec<Vec<RefEdge>> = Vec::new();
        for node in &spec.nodes {
            let id = node.id().value.as_str();
            let mut resolved = Vec::new();
            for (field, r) in node.input_refs() {
                let path = node_path(id, &field);
                let target = self.resolve(r, &path, &ids, &facts, &inputs);
                resolved.push(RefEdge {
                    field,
                    location: r.location,
                    target,
                });
            }
            edges.push(resolved);
        }

        // Rule 4: topological order, cycles reported.
        let order = self.topological_order(&edges)?;

        // Rule 5: types in topological order.
        let mut index_of = vec![usize::MAX; spec.nodes.len()];
        for (pos, &i) in order.iter().enumerate() {
            index_of[i] = pos;
        }
        let mut nodes = Vec::with_capacity(order.len());
        for &i in &order {
            let node = &spec.nodes[i].value;
            let id = node.id().value.clone();
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
            if let Some((kind, ports, outputs)) = self.type_node(node, &facts[i], ports, &located) {
                facts[i].outputs = Some(outputs.clone());
                nodes.push(ValidNode {
                    id,
                    kind,
                    inputs: ports,
                    outputs,
                });
            }
        }

        // Rule 6: outputs.
        let outputs = self.graph_outputs(&ids, &facts, &inputs, &index_of);
        if self
            .diags
            .iter()
            .any(|d| d.severity == crate::diagnostic::Severity::Error)
        {
            return None;
        }
        self.warn_dead_nodes(&nodes, &outputs);
        Some(ValidGraph {
            name: spec.name.value.clone(),
            inputs,
            nodes,
            outputs,
            executors: self.placement.executors.clone(),
            streams,
            warnings: Vec::new(),
        })
    }

    fn check_names(&mut self) {
        let spec = self.spec;
        if !valid_name(&spec.name) {
            self.error(
                "name".into(),
                spec.name.location,
                format!("graph name `{}` must start with a letter or `_` and hold only letters, digits, `_` and `-`", spec.name.value),
            );
        }
        let mut seen: HashMap<&str, (&str, Location)> = HashMap::new();
        let named = spec
            .inputs
            .iter()
            .map(|i| ("input", &i.name))
            .chain(spec.nodes.iter().map(|n| ("node", n.id())));
        for (what, name) in named {
            let path = if what == "input" {
                format!("inputs.{}", name.value)
            } else {
                format!("nodes.{}.id", name.value)
            };
            if !valid_name(name) {
                self.error(
                    path.clone(),
                    name.location,
                    format!("{what} id `{}` must start with a letter or `_` and hold only letters, digits, `_` and `-`", name.value),
                );
            }
            if let Some((first_what, first_loc)) = seen.get(name.value.as_str()).copied() {
                let at = if first_loc.is_known() {
                    format!(" (first defined at line {})", first_loc.line)
                } else {
                    String::new()
                };
                self.error(
                    path,
                    name.location,
                    format!(
                        "duplicate id `{}`: already used by a graph {first_what}{at}",
                        name.value
                    ),
                )
                .help = Some("node ids and graph input names share one namespace".into());
            } else {
                seen.insert(name.value.as_str(), (what, name.location));
            }
        }
        let mut outs: HashMap<&str, Location> = HashMap::new();
        for o in &spec.outputs {
            if outs
                .insert(o.name.value.as_str(), o.name.location)
                .is_some()
            {
                self.error(
                    format!("outputs.{}", o.name.value),
                    o.name.location,
                    format!("duplicate graph output name `{}`", o.name.value),
                );
            }
        }
    }

    fn graph_inputs(&mut self) -> Vec<GraphInput> {
        let mut out = Vec::new();
        for input in &self.spec.inputs {
            let mut dims = Vec::new();
            let mut ok = true;
            for &d in input.shape.value.iter() {
                if d <= 0 {
                    ok = false;
                } else {
                    dims.push(d as usize);
                }
            }
            if !ok {
                self.error(
                    format!("inputs.{}.shape", input.name.value),
                    input.shape.location,
                    format!(
                        "graph input `{}` has shape {:?}: every dimension must be a positive size",
                        input.name.value, input.shape.value
                    ),
                );
                continue;
            }
            out.push(GraphInput {
                name: input.name.value.clone(),
                ty: TensorType::fixed(input.dtype.value, &dims),
            });
        }
        out
    }

    fn check_node_fields(&mut self, node: &Spanned<NodeSpec>) -> NodeFacts {
        let id = node.id().value.clone();
        let mut facts = NodeFacts {
            model: None,
            outputs: None,
            parity: None,
            routing: None,
            parallelism: None,
            state: None,
        };
        match &node.value {
            NodeSpec::Model(m) => {
                self.check_model_settings(&id, m);
                facts.routing = check_routing(
                    &id,
                    m,
                    self.base_dir,
                    self.files,
                    self.placement.replicas.get(&id).map(Vec::as_slice),
                    &mut self.diags,
                );
                facts.parallelism = check_parallelism(
                    &id,
                    m,
                    self.base_dir,
                    self.files,
                    self.placement.replicas.get(&id).map(Vec::as_slice),
                    &mut self.diags,
                );
                if let Some((meta, batched)) = self.read_model(&id, m) {
                    facts.state = check_state(
                        &id,
                        m,
                        &meta,
                        self.placement.replicas.get(&id).map(Vec::as_slice),
                        &mut self.diags,
                    )
                    .flatten();
                    let (_, state_outputs) = declared_state(m);
                    facts.outputs = Some(
                        meta.outputs
                            .iter()
                            .filter(|o| !state_outputs.contains(&o.name.as_str()))
                            .filter_map(|o| match o.element {
                                ElementType::Supported(dtype) => Some((
                                    o.name.clone(),
                                    TensorType {
                                        dtype,
                                        shape: o.dims.iter().skip(1).copied().collect(),
                                    },
                                )),
                                _ => None,
                            })
                            .collect(),
                    );
                    facts.parity = self.check_parity(&id, m, &meta);
                    if facts.parity.is_some() {
                        if let Some(outputs) = facts.outputs.as_mut() {
                            outputs.push((
                                RECONSTRUCTED_OUTPUT.to_string(),
                                TensorType::fixed(DType::I64, &[1]),
                            ));
                        }
                    }
                    facts.model = Some((meta, batched));
                }
            }
            NodeSpec::Normalize(n) => {
                if n.mean.is_empty() || n.std.is_empty() {
                    self.error(
                        node_path(&id, "mean"),
                        n.mean.location,
                        format!("node `{id}`: `mean` and `std` need at least one value each"),
                    );
                } else if n.mean.len() != n.std.len() && n.mean.len() != 1 && n.std.len() != 1 {
                    self.error(
                        node_path(&id, "std"),
                        n.std.location,
                        format!(
                            "node `{id}`: `mean` has {} values and `std` {}; give one value or one per channel for each",
                            n.mean.len(),
                            n.std.len()
                        ),
                    );
                }
                if n.std.iter().any(|&s| s == 0.0 || !s.is_finite()) {
                    self.error(
                        node_path(&id, "std"),
                        n.std.location,
                        format!("node `{id}`: every `std` value must be finite and non-zero"),
                    );
                }
            }
            NodeSpec::TopK(t) => {
                if t.k.value == 0 {
                    self.error(
                        node_path(&id, "k"),
                        t.k.location,
                        format!("node `{id}`: `k` must be at least 1"),
                    );
                }
            }
            NodeSpec::Concat(c) => {
                if c.inputs.len() < 2 {
                    self.error(
                        node_path(&id, "inputs"),
                        node.location,
                        format!(
                            "node `{id}`: concat needs at least two inputs, got {}",
                            c.inputs.len()
                        ),
                    );
                }
            }
            NodeSpec::Argmax(_) => {}
        }
        facts
    }

    /// ParM: `k ≥ 2`, the sum encoder, and a parity model with the deployed model's signature.
    fn check_parity(
        &mut self,
        id: &str,
        m: &ModelSpec,
        deployed: &ModelMetadata,
    ) -> Option<ParityPlan> {
        let p = m.resilience.as_ref()?.parity.as_ref()?;
        let path_field = node_path(id, "resilience.parity.parity_model");
        if p.k.value < 2 {
            self.error(
                node_path(id, "resilience.parity.k"),
                p.k.location,
                format!(
                    "node `{id}`: a coding group needs `k` ≥ 2, got {}",
                    p.k.value
                ),
            );
            return None;
        }
        if p.encoder.value == crate::spec::ParityEncoder::Concat {
            // Downsample-and-tile needs k = 2 or 4 and one square single-channel image input
            // with an even side.
            let features: Option<usize> = match deployed.inputs.as_slice() {
                [only] => only.dims[1..]
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => Some(*n),
                        Dim::Dynamic => None,
                    })
                    .product(),
                _ => None,
            };
            let side = features.map(|f| ((f as f64).sqrt().round() as usize, f));
            let fits =
                matches!(p.k.value, 2 | 4) && side.is_some_and(|(s, f)| s * s == f && s % 2 == 0);
            if !fits {
                self.error(
                    node_path(id, "resilience.parity.encoder"),
                    p.encoder.location,
                    format!("node `{id}`: the `concat` encoder needs k = 2 or 4 and one input holding a square single-channel image with an even side"),
                );
                return None;
            }
        }
        let path = self.base_dir.join(&p.parity_model.value);
        let meta = match read_metadata_under(&path, self.files) {
            Ok(meta) => meta,
            Err(e) => {
                self.error(
                    path_field,
                    p.parity_model.location,
                    format!("node `{id}`: parity model: {e}"),
                );
                return None;
            }
        };
        if meta.inputs != deployed.inputs || meta.outputs != deployed.outputs {
            self.error(
                path_field,
                p.parity_model.location,
                format!(
                    "node `{id}`: the parity model {} must take and return the deployed model's tensors (same names, types and shapes)",
                    path.display()
                ),
            )
            .help = Some("train it from the deployed model: `weir parity train --deployed ...`".into());
            return None;
        }
        Some(ParityPlan {
            k: p.k.value,
            path,
            encoder: p.encoder.value,
        })
    }

    fn check_model_settings(&mut self, id: &str, m: &ModelSpec) {
        let checks = [
            (m.batching.max_size, "batching.max_size"),
            (m.executor.instances, "executor.instances"),
            (m.executor.intra_op_threads, "executor.intra_op_threads"),
            (m.executor.queue_capacity, "executor.queue_capacity"),
        ];
        for (value, field) in checks {
            if value == 0 {
                self.error(
                    node_path(id, field),
                    m.id.location,
                    format!("node `{id}`: `{field}` must be at least 1"),
                );
            }
        }
    }

    fn read_model(&mut self, id: &str, m: &ModelSpec) -> Option<(ModelMetadata, bool)> {
        let path = self.base_dir.join(&m.path.value);
        let meta = match read_metadata_under(&path, self.files) {
            Ok(meta) => meta,
            Err(OnnxError::Read(FileError::Missing { .. })) => {
                self.error(
                    node_path(id, "path"),
                    m.path.location,
                    format!("node `{id}`: model file {} does not exist", path.display()),
                )
                .help = Some(
                    "relative paths are relative to the graph file's folder; run scripts/setup.sh to fetch the zoo models"
                        .into(),
                );
                return None;
            }
            Err(e) => {
                self.error(
                    node_path(id, "path"),
                    m.path.location,
                    format!("node `{id}`: {e}"),
                );
                return None;
            }
        };
        let mut batched = None;
        let mut ok = true;
        let (state_inputs, state_outputs) = declared_state(m);
        for t in meta.inputs.iter().chain(&meta.outputs) {
            if state_inputs.contains(&t.name.as_str()) || state_outputs.contains(&t.name.as_str()) {
                // A state tensor has no batch dimension; `check_state` checks it.
                continue;
            }
            let this = match (t.element, t.dims.first()) {
                (ElementType::NotATensor, _) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` is not a tensor; weir serves tensor models", t.name));
                    ok = false;
                    continue;
                }
                (ElementType::Unsupported(code), _) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` has ONNX element type {code}; weir moves f32 and i64 tensors", t.name));
                    ok = false;
                    continue;
                }
                (_, None) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` is a scalar; weir needs a batch dimension first", t.name));
                    ok = false;
                    continue;
                }
                (_, Some(Dim::Fixed(1))) => false,
                (_, Some(Dim::Dynamic)) => true,
                (_, Some(Dim::Fixed(n))) => {
                    self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: model tensor `{}` has its first dimension fixed to {n}; weir reads the first dimension as the batch dimension, which must be 1 or dynamic", t.name));
                    ok = false;
                    continue;
                }
            };
            if meta.inputs.iter().any(|i| i.name == t.name) {
                match batched {
                    None => batched = Some(this),
                    // A stateful node's `state:` check names the tensor that does not fit.
                    Some(b) if b != this && m.state.is_none() => {
                        self.error(node_path(id, "path"), m.path.location, format!("node `{id}`: the model mixes inputs with a dynamic and a fixed batch dimension"))
                            .help = Some(format!("if `{}` carries state from one call to the next, name it under `state:`", t.name));
                        ok = false;
                    }
                    _ => {}
                }
            }
        }
        ok.then(|| (meta, batched.unwrap_or(false)))
    }

    fn resolve(
        &mut self,
        r: &Spanned<String>,
        path: &str,
        ids: &HashMap<&str, usize>,
        facts: &[NodeFacts],
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
                .or_else(|| node_output_names(&node.value, facts[*i].model.as_ref().map(|m| &m.0)));
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

    fn topological_order(&mut self, edges: &[Vec<RefEdge>]) -> Option<Vec<usize>> {
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

    fn type_node(
        &mut self,
        node: &NodeSpec,
        facts: &NodeFacts,
        ports: Vec<Port>,
        locs: &[Location],
    ) -> Option<TypedNode> {
        let id = node.id().value.clone();
        let f32_port = |v: &mut Self, p: &Port, loc: Location| -> bool {
            if p.ty.dtype != DType::F32 {
                v.error(
                    node_path(&id, &p.name),
                    loc,
                    format!(
                        "node `{id}` needs an f32 tensor at `{}`, but `{}` is {}",
                        p.name, p.column, p.ty
                    ),
                );
                return false;
            }
            true
        };
        match node {
            NodeSpec::Model(m) => {
                let (meta, batched) = facts.model.clone()?;
                let mut ordered = Vec::new();
                let mut ok = true;
                let (state_inputs, _) = declared_state(m);
                for info in &meta.inputs {
                    if state_inputs.contains(&info.name.as_str()) {
                        continue;
                    }
                    let Some(pos) = ports
                        .iter()
                        .position(|p| p.name == format!("inputs.{}", info.name))
                    else {
                        self.error(node_path(&id, "inputs"), m.id.location, format!("node `{id}`: model input `{}` is not bound; add `{}: <tensor>` under `inputs`", info.name, info.name));
                        ok = false;
                        continue;
                    };
                    let port = &ports[pos];
                    if !self.check_model_input(&id, info, port, locs[pos]) {
                        ok = false;
                    }
                    ordered.push(Port {
                        name: info.name.clone(),
                        ..port.clone()
                    });
                }
                for (pos, p) in ports.iter().enumerate() {
                    let name = p.name.trim_start_matches("inputs.");
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
                            node_path(&id, &p.name),
                            locs[pos],
                            format!("node `{id}`: the model has no input `{name}`"),
                        )
                        .help = Some(help);
                        ok = false;
                    }
                }
                let outputs = facts.outputs.clone()?;
                ok.then(|| {
                    let kind = NodeKind::Model(ModelNode {
                        path: self.base_dir.join(&m.path.value),
                        batched,
                        batching: m.batching,
                        executor: facts.parallelism.as_ref().map_or(m.executor, |(e, _)| *e),
                        metadata: meta,
                        replicas: self
                            .placement
                            .replicas
                            .get(&id)
                            .cloned()
                            .unwrap_or_else(|| vec![ReplicaTarget::Local]),
                        parity: facts.parity.clone(),
                        routing: facts.routing.clone().unwrap_or_default(),
                        auto_parallelism: facts
                            .parallelism
                            .as_ref()
                            .and_then(|(_, a)| a.clone().map(Box::new)),
                        state: facts.state.clone().map(Box::new),
                    });
                    (kind, ordered, outputs)
                })
            }
            NodeSpec::Normalize(n) => {
                let p = &ports[0];
                if !f32_port(self, p, locs[0]) {
                    return None;
                }
                let channels = n.mean.len().max(n.std.len());
                if channels > 1
                    && p.ty.shape.first() != Some(&Dim::Fixed(channels))
                    && p.ty.shape.first() != Some(&Dim::Dynamic)
                {
                    self.error(node_path(&id, "mean"), n.mean.location, format!("node `{id}`: {channels} per-channel values, but `{}` has shape {} (channels are the first dimension)", p.column, ShapeDisplay(&p.ty.shape)));
                    return None;
                }
                let out = vec![("output".to_string(), p.ty.clone())];
                Some((
                    NodeKind::Normalize {
                        mean: n.mean.value.clone(),
                        std: n.std.value.clone(),
                    },
                    ports,
                    out,
                ))
            }
            NodeSpec::Argmax(_) => {
                if !f32_port(self, &ports[0], locs[0]) {
                    return None;
                }
                let out = vec![("index".to_string(), TensorType::fixed(DType::I64, &[1]))];
                Some((NodeKind::Argmax, ports, out))
            }
            NodeSpec::TopK(t) => {
                let p = &ports[0];
                if !f32_port(self, p, locs[0]) {
                    return None;
                }
                if let Some(n) = p.ty.element_count() {
                    if t.k.value > n {
                        self.error(
                            node_path(&id, "k"),
                            t.k.location,
                            format!(
                                "node `{id}`: k = {} but `{}` has only {n} elements",
                                t.k.value, p.column
                            ),
                        );
                        return None;
                    }
                }
                let out = vec![
                    (
                        "values".to_string(),
                        TensorType::fixed(DType::F32, &[t.k.value]),
                    ),
                    (
                        "indices".to_string(),
                        TensorType::fixed(DType::I64, &[t.k.value]),
                    ),
                ];
                Some((NodeKind::TopK { k: t.k.value }, ports, out))
            }
            NodeSpec::Concat(c) => {
                let first = &ports[0];
                let rank = first.ty.shape.len() as i64;
                let axis = if c.axis.value < 0 {
                    rank + c.axis.value
                } else {
                    c.axis.value
                };
                if axis < 0 || axis >= rank.max(1) {
                    self.error(
                        node_path(&id, "axis"),
                        c.axis.location,
                        format!(
                            "node `{id}`: axis {} is out of range for rank {rank}",
                            c.axis.value
                        ),
                    );
                    return None;
                }
                let axis = axis as usize;
                let mut shape = first.ty.shape.clone();
                for (pos, p) in ports.iter().enumerate().skip(1) {
                    let same_rank = p.ty.shape.len() == first.ty.shape.len();
                    let others_match = same_rank
                        && p.ty
                            .shape
                            .iter()
                            .zip(&first.ty.shape)
                            .enumerate()
                            .all(|(i, (a, b))| i == axis || a.compatible(*b));
                    if p.ty.dtype != first.ty.dtype || !others_match {
                        self.error(node_path(&id, &p.name), locs[pos], format!("node `{id}`: cannot concat `{}` ({}) with `{}` ({}) along axis {axis}: dtype, rank and every other dimension must match", p.column, p.ty, first.column, first.ty));
                        return None;
                    }
                    shape[axis] = match (shape[axis], p.ty.shape[axis]) {
                        (Dim::Fixed(a), Dim::Fixed(b)) => Dim::Fixed(a + b),
                        _ => Dim::Dynamic,
                    };
                }
                let out = vec![(
                    "output".to_string(),
                    TensorType {
                        dtype: first.ty.dtype,
                        shape,
                    },
                )];
                Some((NodeKind::Concat { axis }, ports, out))
            }
        }
    }

    fn check_model_input(
        &mut self,
        id: &str,
        info: &TensorInfo,
        port: &Port,
        loc: Location,
    ) -> bool {
        let ElementType::Supported(dtype) = info.element else {
            return false;
        };
        let expected = TensorType {
            dtype,
            shape: info.dims.iter().skip(1).copied().collect(),
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

    fn graph_outputs(
        &mut self,
        ids: &HashMap<&str, usize>,
        facts: &[NodeFacts],
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

    fn warn_dead_nodes(&mut self, nodes: &[ValidNode], outputs: &[GraphOutput]) {
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

fn path_owner(path: &str) -> &str {
    path.rsplit_once('.').map(|(a, _)| a).unwrap_or(path)
}

fn node_output_names(node: &NodeSpec, meta: Option<&ModelMetadata>) -> Option<Vec<String>> {
    let fixed = |names: &[&str]| Some(names.iter().map(|s| s.to_string()).collect());
    match node {
        NodeSpec::Model(_) => meta.map(|m| m.outputs.iter().map(|o| o.name.clone()).collect()),
        NodeSpec::Normalize(_) | NodeSpec::Concat(_) => fixed(&["output"]),
        NodeSpec::Argmax(_) => fixed(&["index"]),
        NodeSpec::TopK(_) => fixed(&["values", "indices"]),
    }
}
