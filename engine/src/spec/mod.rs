//! The user-facing graph spec: what a YAML file or the builder API describes, before validation.
//!
//! A graph has named `inputs` (per-request tensors with dtype and shape), `nodes` (each one
//! kind: an ONNX `model` or a tensor op), and `outputs` that name the node tensors a reply carries.
//! Nodes read tensors by reference: `node.tensor`, a bare `node` for a node with one output, or a
//! graph input's name. Edges follow from those references, so the graph is a DAG with fan-out (many
//! readers of one tensor) and fan-in (a node reading tensors of several nodes, joined by request id).
//!
//! Node kinds are externally tagged (`- model: {...}`) so every field keeps its YAML location
//! (serde-saphyr loses spans inside internally tagged enums). Nothing here checks meaning; that is
//! [`crate::validate`]'s job. File names follow the node kinds: `model.rs`, `tensor_op.rs`, `text_op.rs`, `fanout.rs`,
//! `region_op.rs`.

mod builder;
mod fanout;
mod image_op;
mod model;
mod parity;
mod region_op;
mod remote;
mod routing;
mod stateful;
mod stream;
mod tensor_op;
mod text_op;
mod warmup;

use std::fmt;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Deserializer};

pub use builder::{CropBoxesBuilder, GraphBuilder, ModelBuilder};
pub use fanout::{BoxCoordinates, CropBoxesSpec, GatherSpec, MAX_PARTS};
pub use image_op::{
    CastSpec, DecodeImageSpec, ImageSize, Interpolation, ResizeSpec, TransposeSpec,
    DEFAULT_MAX_PIXELS,
};
pub use model::{
    AutoSpec, BatchGrow, BatchWait, BatchingSpec, ExecutorSpec, FixedParallelism, GraphLevel,
    ModelSpec, PadSpec, PadWhen, ParallelismSpec, ParityEncoder, ParitySpec, RepositoryModel,
    ResilienceSpec, TaskRequirements, TaskSpec, VersionedModel,
};
pub use parity::{DecodeAfter, DecodeSpec, DEFAULT_FLOOR_MS};
pub use region_op::{CropSpec, PadToSpec, RegionsSpec, SliceSpec, MAX_PAD_ELEMENTS, MAX_REGIONS};
pub use remote::{Device, RemoteExecutorSpec, LOCAL_REPLICA};
pub use routing::{KairosRoutingSpec, RoutingSpec};
pub use stateful::{
    InitialState, PerSequenceSpec, ReplicationMode, ReplicationSpec, SequenceControl,
    SequenceInputSpec, StateSpec,
};
pub use stream::{JsonlStreamSpec, OutputMode, StreamSpec, ZenohStreamSpec};
pub use tensor_op::{ArgmaxSpec, ConcatSpec, NormalizeSpec, ReshapeSpec, TopKSpec};
pub use text_op::{CtcDecodeSpec, DetokenizeSpec, LabelsSpec, SoftmaxSpec, TokenizeSpec};
pub use warmup::{WarmupData, WarmupSpec};

use crate::diagnostic::{Diagnostic, Diagnostics, Location, SourceText};
use crate::tensor::DType;

/// A value with the YAML location it was read from ([`Location::UNKNOWN`] when built in Rust).
///
/// Equality ignores the location, so a YAML spec and the same graph from the builder compare equal.
#[derive(Debug, Clone)]
pub struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub location: Location,
}

impl<T> Spanned<T> {
    /// A value with no location.
    pub fn unlocated(value: T) -> Self {
        Spanned {
            value,
            location: Location::UNKNOWN,
        }
    }
}

impl<T: Default> Default for Spanned<T> {
    fn default() -> Self {
        Spanned::unlocated(T::default())
    }
}

impl<T> From<T> for Spanned<T> {
    fn from(value: T) -> Self {
        Spanned::unlocated(value)
    }
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T> Deref for Spanned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Spanned<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = serde_saphyr::Spanned::<T>::deserialize(d)?;
        Ok(Spanned {
            value: s.value,
            location: s.referenced.into(),
        })
    }
}

/// A whole service graph.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphSpec {
    /// The graph's name; also its model name over the Open Inference Protocol.
    pub name: Spanned<String>,
    /// Free text for people.
    #[serde(default)]
    pub description: Option<String>,
    /// Per-request tensors a client sends.
    pub inputs: Vec<Spanned<InputSpec>>,
    /// The nodes, in any order (edges come from their input references).
    pub nodes: Vec<Spanned<NodeSpec>>,
    /// Tensors a reply carries.
    pub outputs: Vec<Spanned<OutputSpec>>,
    /// Remote executors model nodes may run on (see [`ModelSpec::replicas`]).
    #[serde(default)]
    pub executors: Vec<Spanned<RemoteExecutorSpec>>,
    /// Streaming connectors (JSON lines, zenoh) feeding the graph besides HTTP.
    #[serde(default)]
    pub streams: Vec<Spanned<StreamSpec>>,
}

/// A graph input: one tensor per request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// Name node inputs refer to it by; clients use it too unless `client_name` is set.
    pub name: Spanned<String>,
    /// The name clients send the tensor under, where that is not a name a reference can hold
    /// (a model's own `gpu_0/data_0` or `x.1`): requests, metadata and errors use it, node
    /// references use `name`.
    #[serde(default)]
    pub client_name: Option<Spanned<String>>,
    /// Element type.
    pub dtype: Spanned<DType>,
    /// Per-request shape, without a batch dimension (`[3, 224, 224]` for one RGB image). A
    /// dimension is a size, `-1` (any size, per request), or a name (`seq`): every dimension of
    /// the graph's inputs with that name has the same size within one request, e.g.
    /// `input_ids: [seq]` and `attention_mask: [seq]`. `[]` is a scalar.
    pub shape: Spanned<Vec<DimSpec>>,
    /// Filled by weir from the request's sequence parameters instead of sent by the client
    /// (Triton's sequence control tensors); shape `[1]`.
    #[serde(default)]
    pub sequence: Option<Spanned<SequenceInputSpec>>,
    /// A client may leave it out (Triton's `optional: true`); weir then fills it with the value
    /// the model file holds for it. Every node reading it must be a model input with such a
    /// value: an ONNX initializer listed among the graph's inputs (IR 4 or later), which ONNX
    /// Runtime lets a call override. The per-request value is that initializer, without its
    /// leading dimension of 1 where the model batches.
    #[serde(default)]
    pub optional: bool,
}

/// One dimension of a graph input as written: a size (`-1` for any), or a symbolic name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimSpec {
    /// A size; `-1` means any size, chosen per request.
    Size(i64),
    /// A size chosen per request, equal for every dimension with this name.
    Named(String),
}

impl From<i64> for DimSpec {
    fn from(size: i64) -> Self {
        DimSpec::Size(size)
    }
}

impl From<&str> for DimSpec {
    fn from(name: &str) -> Self {
        DimSpec::Named(name.to_string())
    }
}

impl fmt::Display for DimSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimSpec::Size(n) => write!(f, "{n}"),
            DimSpec::Named(name) => f.write_str(name),
        }
    }
}

impl<'de> Deserialize<'de> for DimSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct DimVisitor;
        impl serde::de::Visitor<'_> for DimVisitor {
            type Value = DimSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a dimension: a size, -1, or a name such as `seq`")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<DimSpec, E> {
                Ok(DimSpec::Size(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<DimSpec, E> {
                i64::try_from(v)
                    .map(DimSpec::Size)
                    .map_err(|_| E::custom(format!("dimension {v} is too large")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DimSpec, E> {
                Ok(DimSpec::Named(v.to_string()))
            }
        }
        d.deserialize_any(DimVisitor)
    }
}

/// A graph output: a node tensor returned to the client under `name`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// Name in the reply.
    pub name: Spanned<String>,
    /// The tensor: `node.tensor`, or `node` when the node has one output.
    pub from: Spanned<String>,
}

/// One node: exactly one kind, written as `- <kind>: {id: ..., ...}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case")]
// A graph holds a handful of nodes, parsed once: the size of the model variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum NodeSpec {
    /// An ONNX model run by ONNX Runtime.
    Model(ModelSpec),
    /// `(x - mean) / std`, per channel.
    Normalize(NormalizeSpec),
    /// Index of the largest element.
    Argmax(ArgmaxSpec),
    /// The `k` largest elements and their indices.
    TopK(TopKSpec),
    /// Two or more tensors joined along an axis.
    Concat(ConcatSpec),
    /// One JPEG or PNG per request decoded to `u8 [height, width, 3]`.
    DecodeImage(DecodeImageSpec),
    /// An HWC image resized to a fixed height and width.
    Resize(ResizeSpec),
    /// Every element converted to another dtype.
    Cast(CastSpec),
    /// Dimensions permuted.
    Transpose(TransposeSpec),
    /// Probabilities along the last axis.
    Softmax(SoftmaxSpec),
    /// Class indices replaced by names from a file.
    Labels(LabelsSpec),
    /// A text split into token ids.
    Tokenize(TokenizeSpec),
    /// Token ids back into a text.
    Detokenize(DetokenizeSpec),
    /// A recogniser's per-step class scores into a text (greedy CTC).
    CtcDecode(CtcDecodeSpec),
    /// Every kept box of a detector cropped out of an image, each crop a part of the request.
    CropBoxes(CropBoxesSpec),
    /// The parts of each request joined back into one row.
    Gather(GatherSpec),
    /// A detector's probability map turned into scored boxes.
    Regions(RegionsSpec),
    /// A fixed height × width window of a tensor.
    Crop(CropSpec),
    /// Dimensions extended to fixed sizes with a value.
    Pad(PadToSpec),
    /// Every `step`-th element between two indices along one axis.
    Slice(SliceSpec),
    /// A row's elements under another shape.
    Reshape(ReshapeSpec),
}

impl NodeSpec {
    /// The node's id.
    pub fn id(&self) -> &Spanned<String> {
        match self {
            NodeSpec::Model(s) => &s.id,
            NodeSpec::Normalize(s) => &s.id,
            NodeSpec::Argmax(s) => &s.id,
            NodeSpec::TopK(s) => &s.id,
            NodeSpec::Concat(s) => &s.id,
            NodeSpec::DecodeImage(s) => &s.id,
            NodeSpec::Resize(s) => &s.id,
            NodeSpec::Cast(s) => &s.id,
            NodeSpec::Transpose(s) => &s.id,
            NodeSpec::Softmax(s) => &s.id,
            NodeSpec::Labels(s) => &s.id,
            NodeSpec::Tokenize(s) => &s.id,
            NodeSpec::Detokenize(s) => &s.id,
            NodeSpec::CtcDecode(s) => &s.id,
            NodeSpec::CropBoxes(s) => &s.id,
            NodeSpec::Gather(s) => &s.id,
            NodeSpec::Regions(s) => &s.id,
            NodeSpec::Crop(s) => &s.id,
            NodeSpec::Pad(s) => &s.id,
            NodeSpec::Slice(s) => &s.id,
            NodeSpec::Reshape(s) => &s.id,
        }
    }

    /// The kind's YAML tag.
    pub fn kind_name(&self) -> &'static str {
        match self {
            NodeSpec::Model(_) => "model",
            NodeSpec::Normalize(_) => "normalize",
            NodeSpec::Argmax(_) => "argmax",
            NodeSpec::TopK(_) => "top_k",
            NodeSpec::Concat(_) => "concat",
            NodeSpec::DecodeImage(_) => "decode_image",
            NodeSpec::Resize(_) => "resize",
            NodeSpec::Cast(_) => "cast",
            NodeSpec::Transpose(_) => "transpose",
            NodeSpec::Softmax(_) => "softmax",
            NodeSpec::Labels(_) => "labels",
            NodeSpec::Tokenize(_) => "tokenize",
            NodeSpec::Detokenize(_) => "detokenize",
            NodeSpec::CtcDecode(_) => "ctc_decode",
            NodeSpec::CropBoxes(_) => "crop_boxes",
            NodeSpec::Gather(_) => "gather",
            NodeSpec::Regions(_) => "regions",
            NodeSpec::Crop(_) => "crop",
            NodeSpec::Pad(_) => "pad",
            NodeSpec::Slice(_) => "slice",
            NodeSpec::Reshape(_) => "reshape",
        }
    }

    /// Every tensor reference the node reads, with the field path (relative to the node) it sits at.
    pub fn input_refs(&self) -> Vec<(String, &Spanned<String>)> {
        match self {
            NodeSpec::Model(s) => s
                .inputs
                .iter()
                .map(|(name, r)| (format!("inputs.{name}"), r))
                .collect(),
            NodeSpec::Normalize(s) => vec![("input".into(), &s.input)],
            NodeSpec::Argmax(s) => vec![("input".into(), &s.input)],
            NodeSpec::TopK(s) => vec![("input".into(), &s.input)],
            NodeSpec::DecodeImage(s) => vec![("input".into(), &s.input)],
            NodeSpec::Resize(s) => vec![("input".into(), &s.input)],
            NodeSpec::Cast(s) => vec![("input".into(), &s.input)],
            NodeSpec::Transpose(s) => vec![("input".into(), &s.input)],
            NodeSpec::Softmax(s) => vec![("input".into(), &s.input)],
            NodeSpec::Labels(s) => vec![("input".into(), &s.input)],
            NodeSpec::Tokenize(s) => vec![("input".into(), &s.input)],
            NodeSpec::Detokenize(s) => vec![("input".into(), &s.input)],
            NodeSpec::CtcDecode(s) => vec![("input".into(), &s.input)],
            NodeSpec::Regions(s) => vec![("input".into(), &s.input)],
            NodeSpec::Crop(s) => vec![("input".into(), &s.input)],
            NodeSpec::Pad(s) => vec![("input".into(), &s.input)],
            NodeSpec::Slice(s) => vec![("input".into(), &s.input)],
            NodeSpec::Reshape(s) => vec![("input".into(), &s.input)],
            NodeSpec::Concat(s) => s
                .inputs
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("inputs[{i}]"), r))
                .collect(),
            NodeSpec::CropBoxes(s) => {
                let mut refs = vec![("image".into(), &s.image), ("boxes".into(), &s.boxes)];
                refs.extend(s.scores.iter().map(|r| ("scores".into(), r)));
                refs
            }
            NodeSpec::Gather(s) => s
                .inputs
                .iter()
                .map(|(name, r)| (format!("inputs.{name}"), r))
                .collect(),
        }
    }
}

/// A parsed tensor reference: `node.tensor`, or a bare name (a graph input, or a node's only output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorRef<'a> {
    /// The node id or graph input name.
    pub source: &'a str,
    /// The tensor, when written.
    pub tensor: Option<&'a str>,
}

impl<'a> TensorRef<'a> {
    /// Splits `text` at its first `.`.
    pub fn parse(text: &'a str) -> Self {
        match text.split_once('.') {
            Some((source, tensor)) => TensorRef {
                source,
                tensor: Some(tensor),
            },
            None => TensorRef {
                source: text,
                tensor: None,
            },
        }
    }
}

impl fmt::Display for TensorRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tensor {
            Some(t) => write!(f, "{}.{t}", self.source),
            None => f.write_str(self.source),
        }
    }
}

/// Errors reading a spec from a file or text.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read (missing, not a regular file, over the size cap).
    #[error("{source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: crate::paths::FileError,
    },
    /// The text is not a valid graph spec, or validation rejected it.
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl GraphSpec {
    /// Parses YAML text. `source_name` names the text in error messages (usually the file path).
    ///
    /// # Errors
    /// [`SpecError::Invalid`] with the YAML location of the first syntax or type error.
    pub fn from_yaml(text: &str, source_name: &str) -> Result<GraphSpec, SpecError> {
        serde_saphyr::from_str::<GraphSpec>(text).map_err(|e| {
            let location = e.location().map(Location::from).unwrap_or_default();
            let message = e.without_snippet().to_string();
            let message = strip_location_suffix(&message);
            SpecError::Invalid(Diagnostics {
                items: vec![Diagnostic::error("(yaml)", location, message)],
                source: Some(SourceText {
                    name: source_name.to_string(),
                    text: Arc::from(text),
                }),
            })
        })
    }

    /// Reads and parses a YAML file.
    ///
    /// # Errors
    /// [`SpecError::Read`] when the file cannot be read, [`SpecError::Invalid`] when it does not parse.
    pub fn from_file(path: &Path) -> Result<GraphSpec, SpecError> {
        let text = crate::paths::read_text(path, &crate::paths::FileRules::default()).map_err(
            |source| SpecError::Read {
                path: path.display().to_string(),
                source,
            },
        )?;
        GraphSpec::from_yaml(&text, &path.display().to_string())
    }

    /// Starts a graph in Rust; see [`GraphBuilder`].
    pub fn builder(name: &str) -> GraphBuilder {
        GraphBuilder::new(name)
    }
}

/// serde-saphyr appends " at line L, column C" to messages; weir prints the location itself.
fn strip_location_suffix(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "\
name: g
inputs:
  - {name: x, dtype: f32, shape: [4]}
nodes:
  - model:
      id: m
      path: m.onnx
      inputs: {x: x}
  - argmax: {id: best, input: m.y}
outputs:
  - {name: class, from: best}
";

    #[test]
    fn parses_nodes_with_locations() {
        let g = GraphSpec::from_yaml(YAML, "g.yaml").unwrap();
        assert_eq!(g.nodes.len(), 2);
        assert_eq!(g.nodes[1].id().location.line, 9);
        assert_eq!(g.nodes[0].kind_name(), "model");
        let refs = g.nodes[1].input_refs();
        assert_eq!(
            TensorRef::parse(refs[0].1),
            TensorRef {
                source: "m",
                tensor: Some("y")
            }
        );
    }

    #[test]
    fn executor_pinning_parses_and_a_bad_first_core_names_its_location() {
        let pinned = YAML.replace(
            "path: m.onnx",
            "path: m.onnx\n      executor: {spinning: true, pin_cores_from: 1}",
        );
        let g = GraphSpec::from_yaml(&pinned, "g.yaml").unwrap();
        let NodeSpec::Model(m) = &g.nodes[0].value else {
            panic!("not a model node");
        };
        assert_eq!(m.executor.pin_cores_from, Some(1));
        assert!(m.executor.spinning);
        let bad = pinned.replace("pin_cores_from: 1", "pin_cores_from: -1");
        let err = GraphSpec::from_yaml(&bad, "g.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("g.yaml:8:"), "{err}");
    }

    /// The three shapes of `parallelism` parse to their variants; a map that mixes them, misses a
    /// field or names an unknown one is refused with the node's location.
    #[test]
    fn parallelism_shapes_parse_and_mixed_ones_are_refused_where_written() {
        let with = |value: &str| {
            YAML.replace(
                "path: m.onnx",
                &format!("path: m.onnx\n      parallelism: {value}"),
            )
        };
        let parsed = |value: &str| {
            let g = GraphSpec::from_yaml(&with(value), "g.yaml").unwrap();
            let NodeSpec::Model(m) = &g.nodes[0].value else {
                panic!("not a model node");
            };
            m.parallelism.as_ref().map(|p| p.value)
        };
        assert_eq!(
            parsed("auto"),
            Some(ParallelismSpec::Auto(AutoSpec::default()))
        );
        assert_eq!(
            parsed("{auto: {}}"),
            Some(ParallelismSpec::Auto(AutoSpec::default()))
        );
        assert_eq!(
            parsed("{auto: {max_utilisation: 0.6}}"),
            Some(ParallelismSpec::Auto(AutoSpec {
                max_utilisation: Some(0.6)
            }))
        );
        assert_eq!(
            parsed("{concurrency: 2, threads: 1}"),
            Some(ParallelismSpec::Fixed(FixedParallelism {
                concurrency: 2,
                threads: 1
            }))
        );
        for (value, says) in [
            ("{auto: {max_utilisation: 0.6}, threads: 2}", "not both"),
            ("{concurrency: 2}", "missing field `threads`"),
            ("{threads: 2}", "missing field `concurrency`"),
            ("{}", "an empty map"),
            ("{auto: {cap: 0.6}}", "cap"),
            ("{auto: {max_utilisation: high}}", "max_utilisation"),
            ("fast", "{concurrency: C, threads: T}"),
        ] {
            let err = GraphSpec::from_yaml(&with(value), "g.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{value}: {err}");
            assert!(err.contains("g.yaml:8:"), "{value}: {err}");
        }
    }

    #[test]
    fn unknown_field_names_its_location() {
        let bad = YAML.replace("path: m.onnx", "paht: m.onnx");
        let err = GraphSpec::from_yaml(&bad, "g.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("paht"), "{err}");
        assert!(err.contains("g.yaml:7:"), "{err}");
    }
}
