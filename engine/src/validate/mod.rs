//! Every rule that can reject a graph spec, run before anything starts.
//!
//! [`validate`] checks a [`GraphSpec`] and returns a [`ValidGraph`]: the same spec with its
//! references resolved to nodes, its nodes in topological order and every edge typed. It decides
//! nothing about how the graph runs; that is [`crate::plan`]'s job, which reads the checked graph
//! and cannot fail. Validation collects *all* diagnostics before returning, so one run of
//! `weir validate` lists every problem, each with its spec path and YAML location. Rules, in order:
//!
//! 1. names (`names.rs`): graph, inputs, nodes and outputs have usable names; ids are unique across
//!    inputs and nodes (`duplicate id`);
//! 2. the graph-wide sections: remote executors and each node's replica list (`placement.rs`),
//!    streaming connectors (`streams.rs`), the inputs' shapes;
//! 3. each node's own fields: a model file exists and is ONNX with a batch dimension first (or
//!    `batch: false`), batching and executor sizes ≥ 1 (`model.rs`), padded batching
//!    (`padding.rs`), routing (`routing.rs`), parallelism (`parallelism.rs`), state and its
//!    replication (`stateful.rs`, per-sequence state `sequences.rs`), constant inputs
//!    (`constants.rs`), parity coding (`parity.rs`); a tensor op's settings
//!    (`tensor_ops.rs`), a text op's (`text_ops.rs`, which reads label and tokenizer files), an
//!    image op's (`image_ops.rs`), a region or window op's (`region_ops.rs`);
//! 4. references (`references.rs`): every tensor a node or output reads names a graph input, or a
//!    node and one of its outputs (`unknown node`, `no output`), with a did-you-mean; no cycles
//!    (`cycle`), reported with the loop;
//! 5. types along every edge in topological order (`types.rs`): dtype and per-request shape of the
//!    producer against what the consumer needs, read from the ONNX model's own metadata for model
//!    nodes;
//! 6. outputs (`references.rs`): at least one, each read from a node reachable from the inputs
//!    (`unreachable`); nodes that feed no output are warnings;
//! 7. optional inputs (`optional_inputs.rs`): each is read only by model inputs whose files hold
//!    one default value for it, which becomes the tensor admission fills in.
//!
//! weir treats a model's first dimension as the batch dimension: fixed to 1 means one request per
//! call, dynamic means batched calls; the per-request shape is the rest. A node with `batch: false`
//! has none: each request is one call with its tensors as they are ([`CallShape`]).

mod constants;
mod fanout;
mod image_ops;
mod model;
mod names;
mod optional_inputs;
mod padding;
mod parallelism;
mod parity;
mod placement;
mod references;
mod region_ops;
mod reshape;
mod routing;
mod sequences;
mod stateful;
mod streams;
mod tensor_ops;
mod text_ops;
mod types;
mod warmup;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use weir_kairos::profile::ModelProfile;
use weir_serf::config::Config;
use weir_serf::profile::Profile;

use crate::diagnostic::{Diagnostic, Diagnostics, Location, Severity};
use crate::onnx::ModelMetadata;
use crate::paths::FileRules;
use crate::spec::{GraphSpec, ModelSpec, NodeSpec, Spanned};
use crate::tensor::TensorType;

pub use fanout::{CropBoxesOp, GatherCheck};
pub use model::CallShape;
pub use parity::RECONSTRUCTED_OUTPUT;
pub use region_ops::{RegionsOp, WindowOp};
pub use reshape::ReshapeOp;
pub use tensor_ops::{PreprocessOp, TensorOp};
pub use text_ops::{TextOp, TokenizerFile, MAX_LABELS_BYTES, MAX_TOKENS};
pub(crate) use types::fixed_shape;
// A model node's replica targets, also named here: the operators and the executor client read
// them by this path.
pub use crate::placement::{RemoteExecutor, ReplicaTarget};

/// Where a tensor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Producer {
    /// A graph input, delivered by the ingress.
    Ingress,
    /// The node at this index of [`ValidGraph::nodes`] (and of the plan's nodes).
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

/// A graph input after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphInput {
    /// Name (also its batch column).
    pub name: String,
    /// The name clients send it under, when that differs from `name`.
    pub client_name: Option<String>,
    /// Type; a `-1` or named dimension is [`crate::tensor::Dim::Dynamic`].
    pub ty: TensorType,
    /// Per dimension, the symbolic name it was declared with (`seq`), if any.
    pub symbols: Vec<Option<String>>,
    /// Filled by weir from the request's sequence parameters, not sent by the client.
    pub sequence: Option<crate::spec::SequenceInputSpec>,
    /// For an optional input, the per-request tensor weir fills when a request leaves it out:
    /// the value the model files reading it hold ([`crate::spec::InputSpec::optional`]).
    pub default: Option<crate::tensor::Tensor>,
}

impl GraphInput {
    /// The name clients send it under: requests are matched, and errors and metadata name it,
    /// by this.
    pub fn client(&self) -> &str {
        self.client_name.as_deref().unwrap_or(&self.name)
    }

    /// The type as declared, symbolic names shown: `i64[seq]`, `f32[3, ?, ?]`.
    pub fn declared(&self) -> String {
        let dims: Vec<String> = self
            .ty
            .shape
            .iter()
            .zip(&self.symbols)
            .map(|(d, symbol)| match (d, symbol) {
                (_, Some(name)) => name.clone(),
                (crate::tensor::Dim::Fixed(n), None) => n.to_string(),
                (crate::tensor::Dim::Dynamic, None) => "?".to_string(),
            })
            .collect();
        format!("{}[{}]", self.ty.dtype, dims.join(", "))
    }
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

/// What validation read for a model node beyond its spec: the files its settings name, parsed and
/// checked, so that planning never reads a file again.
#[derive(Debug, Clone)]
pub struct CheckedModel<'a> {
    /// The node as written.
    pub spec: &'a ModelSpec,
    /// The model's signature.
    pub metadata: ModelMetadata,
    /// How the model is called (batched, one request per call, or without a batch dimension).
    pub call: CallShape,
    /// Under `parallelism: auto`: the node's SERF profile and its configuration with the most
    /// capacity.
    pub serf_profile: Option<(Profile, Config)>,
    /// Under `routing: {kairos: {profiles: ...}}`: the latency profile that file holds.
    pub kairos_profile: Option<ModelProfile>,
    /// The warm-up samples its sessions run before the graph is ready.
    pub warmup: Vec<crate::warmup::WarmupSample>,
}

/// What a node does, as far as validation settles it.
#[derive(Debug, Clone)]
pub enum CheckedKind<'a> {
    /// A model node; the plan resolves how it runs.
    Model(Box<CheckedModel<'a>>),
    /// A tensor op, fully determined by its checked fields.
    Op(TensorOp),
    /// A gather, joining the parts of the fan-out it closes.
    Gather(GatherCheck),
}

/// A node after validation: what it reads and writes, typed.
#[derive(Debug, Clone)]
pub struct TypedNode<'a> {
    /// Id.
    pub id: String,
    /// What it does.
    pub kind: CheckedKind<'a>,
    /// What it reads, in the order the kind defines (a model's input order).
    pub inputs: Vec<Port>,
    /// What it writes: local output name and type (state outputs excluded).
    pub outputs: Vec<(String, TensorType)>,
}

impl TypedNode<'_> {
    /// The distinct producers of this node's inputs, ordered.
    pub fn producers(&self) -> Vec<Producer> {
        let set: BTreeSet<Producer> = self.inputs.iter().map(|p| p.producer).collect();
        set.into_iter().collect()
    }
}

/// A spec that passed every rule: nodes in topological order, every reference resolved and typed.
#[derive(Debug, Clone)]
pub struct ValidGraph<'a> {
    /// The spec that was checked.
    pub spec: &'a GraphSpec,
    /// The folder the spec's relative paths resolve against (the graph file's folder).
    pub base_dir: &'a Path,
    /// Inputs, in spec order.
    pub inputs: Vec<GraphInput>,
    /// Nodes, each after all its producers.
    pub nodes: Vec<TypedNode<'a>>,
    /// Outputs, in spec order.
    pub outputs: Vec<GraphOutput>,
    /// Findings that do not stop the graph.
    pub warnings: Vec<Diagnostic>,
}

/// Validates `spec`, resolving relative model paths against `base_dir` (the graph file's folder).
///
/// # Errors
/// Every error found, with warnings, as [`Diagnostics`] (attach the source text for snippets).
pub fn validate<'a>(
    spec: &'a GraphSpec,
    base_dir: &'a Path,
) -> Result<ValidGraph<'a>, Diagnostics> {
    validate_under(spec, base_dir, &FileRules::default())
}

/// As [`validate`], reading every file the graph names within `files` (a path root, size caps).
///
/// # Errors
/// As [`validate`]; a file that breaks `files` is an error naming its field.
pub fn validate_under<'a>(
    spec: &'a GraphSpec,
    base_dir: &'a Path,
    files: &FileRules,
) -> Result<ValidGraph<'a>, Diagnostics> {
    let mut v = Validator {
        spec,
        base_dir,
        files,
        diags: Vec::new(),
        replicas: placement::ReplicaLists::default(),
    };
    match v.run() {
        Some(g) if !has_errors(&v.diags) => Ok(ValidGraph {
            warnings: v.diags,
            ..g
        }),
        _ => Err(Diagnostics {
            items: v.diags,
            source: None,
        }),
    }
}

fn has_errors(diags: &[Diagnostic]) -> bool {
    error_count(diags) > 0
}

fn error_count(diags: &[Diagnostic]) -> usize {
    diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count()
}

/// Whether `text` is a zenoh locator: `<protocol>/<address>`.
fn is_locator(text: &str) -> bool {
    text.split_once('/')
        .is_some_and(|(proto, addr)| !proto.is_empty() && !addr.is_empty())
}

/// The dotted spec path of field `field` of node `id`.
fn node_path(id: &str, field: &str) -> String {
    format!("nodes.{id}.{field}")
}

struct Validator<'a, 'f> {
    spec: &'a GraphSpec,
    base_dir: &'a Path,
    files: &'f FileRules,
    diags: Vec<Diagnostic>,
    replicas: placement::ReplicaLists<'a>,
}

/// Per spec node, what its own fields' rules learned.
struct NodeFacts<'a> {
    /// A model node whose file was read.
    model: Option<CheckedModel<'a>>,
    /// The node's outputs, once known (a model's from its file, a tensor op's once typed).
    outputs: Option<Vec<(String, TensorType)>>,
}

impl<'a> Validator<'a, '_> {
    fn error(&mut self, path: String, loc: Location, msg: String) -> &mut Diagnostic {
        self.diags.push(Diagnostic::error(path, loc, msg));
        let last = self.diags.len() - 1;
        &mut self.diags[last]
    }

    fn run(&mut self) -> Option<ValidGraph<'a>> {
        let spec = self.spec;
        self.check_names();
        self.check_placement();
        self.check_streams();
        let inputs = self.graph_inputs();
        let mut facts: Vec<NodeFacts<'a>> = spec
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
        let edges = self.resolve_node_inputs(&ids, &facts, &inputs);
        let order = self.topological_order(&edges)?;
        let (mut nodes, index_of) = self.type_nodes(&order, &edges, &mut facts, &inputs);
        let outputs = self.graph_outputs(&ids, &facts, &inputs, &index_of);
        let inputs = self.fill_defaults(inputs, &nodes, &outputs);
        if !has_errors(&self.diags) {
            self.check_levels(&mut nodes, &outputs);
        }
        if has_errors(&self.diags) {
            return None;
        }
        self.warn_dead_nodes(&nodes, &outputs);
        Some(ValidGraph {
            spec,
            base_dir: self.base_dir,
            inputs,
            nodes,
            outputs,
            warnings: Vec::new(),
        })
    }

    /// A node's own fields, checked before any reference is resolved.
    fn check_node_fields(&mut self, node: &'a Spanned<NodeSpec>) -> NodeFacts<'a> {
        match &node.value {
            NodeSpec::Model(m) => self.check_model(m),
            op => {
                self.check_op_fields(op, node.location);
                NodeFacts {
                    model: None,
                    outputs: None,
                }
            }
        }
    }
}
