//! The Rust builder API: the same [`GraphSpec`] value a YAML file gives, written in code.
//!
//! ```
//! use weir_engine::spec::{GraphSpec, ModelBuilder};
//! use weir_engine::tensor::DType;
//!
//! let spec = GraphSpec::builder("classify")
//!     .input("image", DType::F32, &[3, 224, 224])
//!     .model(ModelBuilder::new("squeezenet", "squeezenet.onnx").input("data_0", "image"))
//!     .top_k("top5", "squeezenet", 5)
//!     .output("classes", "top5.indices")
//!     .build();
//! assert_eq!(spec.nodes.len(), 2);
//! ```

use std::path::PathBuf;

use super::{
    ArgmaxSpec, BoxCoordinates, CastSpec, ConcatSpec, CropBoxesSpec, CropSpec, CtcDecodeSpec,
    DecodeImageSpec, DetokenizeSpec, DimSpec, GatherSpec, GraphSpec, ImageSize, InputSpec,
    Interpolation, LabelsSpec, NodeSpec, NormalizeSpec, OutputSpec, PadToSpec, RegionsSpec,
    RemoteExecutorSpec, ReshapeSpec, ResizeSpec, SequenceControl, SequenceInputSpec, SliceSpec,
    SoftmaxSpec, Spanned, TokenizeSpec, TopKSpec, TransposeSpec, DEFAULT_MAX_PIXELS,
};
use crate::tensor::DType;

mod model;

pub use model::ModelBuilder;

fn s<T>(v: T) -> Spanned<T> {
    Spanned::unlocated(v)
}

/// Builds a [`GraphSpec`] step by step. Nothing is checked until [`crate::validate`].
#[derive(Debug, Clone)]
pub struct GraphBuilder {
    spec: GraphSpec,
}

impl GraphBuilder {
    /// A graph named `name` with nothing in it.
    pub fn new(name: &str) -> Self {
        GraphBuilder {
            spec: GraphSpec {
                name: s(name.to_string()),
                description: None,
                inputs: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
                executors: Vec::new(),
                streams: Vec::new(),
            },
        }
    }

    /// Declares a remote executor that model nodes may list in their replicas.
    pub fn remote_executor(mut self, executor: RemoteExecutorSpec) -> Self {
        self.spec.executors.push(s(executor));
        self
    }

    /// Sets the description.
    pub fn description(mut self, text: &str) -> Self {
        self.spec.description = Some(text.to_string());
        self
    }

    /// Adds a graph input with a per-request shape (`-1` for a free dimension).
    pub fn input(self, name: &str, dtype: DType, shape: &[i64]) -> Self {
        self.input_dims(
            name,
            dtype,
            shape.iter().map(|&d| DimSpec::Size(d)).collect(),
        )
    }

    /// Adds a graph input whose dimensions may be named (`DimSpec::from("seq")`) or free (`-1`).
    pub fn input_dims(mut self, name: &str, dtype: DType, shape: Vec<DimSpec>) -> Self {
        self.spec.inputs.push(s(InputSpec {
            name: s(name.to_string()),
            client_name: None,
            dtype: s(dtype),
            shape: s(shape),
            sequence: None,
            optional: false,
        }));
        self
    }

    /// Lets clients leave graph input `name` out (see [`InputSpec::optional`]).
    pub fn optional(mut self, name: &str) -> Self {
        if let Some(i) = self.spec.inputs.iter_mut().find(|i| i.name.value == name) {
            i.value.optional = true;
        }
        self
    }

    /// Names graph input `name` `client` on the wire (see [`InputSpec::client_name`]).
    pub fn client_name(mut self, name: &str, client: &str) -> Self {
        if let Some(i) = self.spec.inputs.iter_mut().find(|i| i.name.value == name) {
            i.value.client_name = Some(s(client.to_string()));
        }
        self
    }

    /// Adds a graph input of shape `[1]` that weir fills from each request's sequence
    /// parameters (`control`, with `false_true` as the values of a flag) instead of the client.
    pub fn sequence_input(
        mut self,
        name: &str,
        dtype: DType,
        control: SequenceControl,
        false_true: Option<[f64; 2]>,
    ) -> Self {
        self.spec.inputs.push(s(InputSpec {
            name: s(name.to_string()),
            client_name: None,
            dtype: s(dtype),
            shape: s(vec![DimSpec::Size(1)]),
            sequence: Some(s(SequenceInputSpec {
                control,
                false_true,
            })),
            optional: false,
        }));
        self
    }

    /// Adds a model node.
    pub fn model(mut self, model: ModelBuilder) -> Self {
        self.spec.nodes.push(s(NodeSpec::Model(model.into_spec())));
        self
    }

    /// Adds a `normalize` node.
    pub fn normalize(mut self, id: &str, input: &str, mean: &[f32], std: &[f32]) -> Self {
        self.spec.nodes.push(s(NodeSpec::Normalize(NormalizeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            mean: s(mean.to_vec()),
            std: s(std.to_vec()),
        })));
        self
    }

    /// Adds an `argmax` node.
    pub fn argmax(mut self, id: &str, input: &str) -> Self {
        self.spec.nodes.push(s(NodeSpec::Argmax(ArgmaxSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
        })));
        self
    }

    /// Adds a `top_k` node.
    pub fn top_k(mut self, id: &str, input: &str, k: usize) -> Self {
        self.spec.nodes.push(s(NodeSpec::TopK(TopKSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            k: s(k),
        })));
        self
    }

    /// Adds a `concat` node over `inputs` along `axis` (-1 = last).
    pub fn concat(mut self, id: &str, inputs: &[&str], axis: i64) -> Self {
        self.spec.nodes.push(s(NodeSpec::Concat(ConcatSpec {
            id: s(id.to_string()),
            inputs: inputs.iter().map(|r| s(r.to_string())).collect(),
            axis: s(axis),
        })));
        self
    }

    /// Adds a `softmax` node (along the last axis).
    pub fn softmax(mut self, id: &str, input: &str) -> Self {
        self.spec.nodes.push(s(NodeSpec::Softmax(SoftmaxSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
        })));
        self
    }

    /// Adds a `labels` node naming `input`'s indices from the file at `labels` (one per line).
    pub fn labels(mut self, id: &str, input: &str, labels: impl Into<PathBuf>) -> Self {
        self.spec.nodes.push(s(NodeSpec::Labels(LabelsSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            labels: s(labels.into()),
        })));
        self
    }

    /// Adds a `tokenize` node with the Hugging Face `tokenizer.json` at `tokenizer`.
    pub fn tokenize(
        mut self,
        id: &str,
        input: &str,
        tokenizer: impl Into<PathBuf>,
        max_length: usize,
    ) -> Self {
        self.spec.nodes.push(s(NodeSpec::Tokenize(TokenizeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            tokenizer: s(tokenizer.into()),
            max_length: s(max_length),
        })));
        self
    }

    /// Adds a `decode_image` node (JPEG or PNG bytes → `u8 [height, width, 3]`, at most the
    /// default number of pixels).
    pub fn decode_image(self, id: &str, input: &str) -> Self {
        self.decode_image_node(id, input, None)
    }

    /// Adds a `decode_image` node that decodes a JPEG at the smallest DCT scale keeping it at
    /// least `height` × `width` (see [`DecodeImageSpec::draft`]).
    pub fn decode_image_draft(self, id: &str, input: &str, height: usize, width: usize) -> Self {
        self.decode_image_node(id, input, Some(ImageSize { height, width }))
    }

    fn decode_image_node(mut self, id: &str, input: &str, draft: Option<ImageSize>) -> Self {
        self.spec
            .nodes
            .push(s(NodeSpec::DecodeImage(DecodeImageSpec {
                id: s(id.to_string()),
                input: s(input.to_string()),
                max_pixels: s(DEFAULT_MAX_PIXELS),
                draft: draft.map(s),
            })));
        self
    }

    /// Adds a `resize` node bringing an HWC image to `height` × `width`.
    pub fn resize(
        mut self,
        id: &str,
        input: &str,
        height: usize,
        width: usize,
        interpolation: Interpolation,
    ) -> Self {
        self.spec.nodes.push(s(NodeSpec::Resize(ResizeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            height: s(height),
            width: s(width),
            interpolation: s(interpolation),
        })));
        self
    }

    /// Adds a `cast` node converting `input` to `to`.
    pub fn cast(mut self, id: &str, input: &str, to: DType) -> Self {
        self.spec.nodes.push(s(NodeSpec::Cast(CastSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            to: s(to),
        })));
        self
    }

    /// Adds a `transpose` node: output dimension `i` is input dimension `perm[i]`.
    pub fn transpose(mut self, id: &str, input: &str, perm: &[usize]) -> Self {
        self.spec.nodes.push(s(NodeSpec::Transpose(TransposeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            perm: s(perm.to_vec()),
        })));
        self
    }

    /// Adds a `crop_boxes` node: the graph fans out, one part per kept box.
    pub fn crop_boxes(mut self, crop: CropBoxesBuilder) -> Self {
        self.spec.nodes.push(s(NodeSpec::CropBoxes(crop.spec)));
        self
    }

    /// Adds a `gather` node joining each request's parts back: output `name` stacks tensor
    /// `from` of every part, for each `(name, from)` of `inputs`.
    pub fn gather(mut self, id: &str, inputs: &[(&str, &str)]) -> Self {
        self.spec.nodes.push(s(NodeSpec::Gather(GatherSpec {
            id: s(id.to_string()),
            inputs: inputs
                .iter()
                .map(|(name, from)| (name.to_string(), s(from.to_string())))
                .collect(),
        })));
        self
    }

    /// Adds any node, as written (for settings the shorthand methods leave at their defaults).
    pub fn node(mut self, node: NodeSpec) -> Self {
        self.spec.nodes.push(s(node));
        self
    }

    /// Adds a `regions` node: a detector's probability map into boxes above `threshold` whose
    /// mean score is at least `min_score`, grown by `expand` (at least 3 pixels, at most 100).
    pub fn regions(self, id: &str, input: &str, [threshold, min_score, expand]: [f64; 3]) -> Self {
        self.node(NodeSpec::Regions(RegionsSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            threshold: s(threshold),
            min_score: s(min_score),
            expand: s(expand),
            min_size: s(3),
            max_regions: s(100),
        }))
    }

    /// Adds a `crop` node: the `[height, width]` window at `[top, left]`, or centred when
    /// `at` is `None`.
    pub fn crop(
        self,
        id: &str,
        input: &str,
        at: Option<[usize; 2]>,
        [height, width]: [usize; 2],
    ) -> Self {
        self.node(NodeSpec::Crop(CropSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            top: at.map(|[t, _]| s(t)),
            left: at.map(|[_, l]| s(l)),
            height: s(height),
            width: s(width),
            center: s(at.is_none()),
        }))
    }

    /// Adds a `pad` node: every dimension filled up to `shape` (`-1` keeps one) with `value`.
    pub fn pad(self, id: &str, input: &str, shape: &[i64], value: f64) -> Self {
        self.node(NodeSpec::Pad(PadToSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            shape: s(shape.to_vec()),
            value: s(value),
        }))
    }

    /// Adds a `slice` node: `x[start:end:step]` along `axis`, as numpy reads it.
    pub fn slice(
        self,
        id: &str,
        input: &str,
        axis: i64,
        [start, step]: [i64; 2],
        end: Option<i64>,
    ) -> Self {
        self.node(NodeSpec::Slice(SliceSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            axis: s(axis),
            start: s(start),
            end: end.map(s),
            step: s(step),
        }))
    }

    /// Adds a `reshape` node: each row's elements under `shape` (one `-1` taken from the row).
    pub fn reshape(self, id: &str, input: &str, shape: &[i64]) -> Self {
        self.node(NodeSpec::Reshape(ReshapeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            shape: s(shape.to_vec()),
        }))
    }

    /// Adds a `ctc_decode` node naming classes from the file at `labels`, class `blank` the blank.
    pub fn ctc_decode(
        self,
        id: &str,
        input: &str,
        labels: impl Into<PathBuf>,
        blank: usize,
    ) -> Self {
        self.node(NodeSpec::CtcDecode(CtcDecodeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            labels: s(labels.into()),
            blank: s(blank),
        }))
    }

    /// Adds a `detokenize` node (special tokens skipped) with the `tokenizer.json` at `tokenizer`.
    pub fn detokenize(self, id: &str, input: &str, tokenizer: impl Into<PathBuf>) -> Self {
        self.node(NodeSpec::Detokenize(DetokenizeSpec {
            id: s(id.to_string()),
            input: s(input.to_string()),
            tokenizer: s(tokenizer.into()),
            skip_special_tokens: s(true),
        }))
    }

    /// Adds a graph output returning tensor `from` under `name`.
    pub fn output(mut self, name: &str, from: &str) -> Self {
        self.spec.outputs.push(s(OutputSpec {
            name: s(name.to_string()),
            from: s(from.to_string()),
        }));
        self
    }

    /// The finished spec.
    pub fn build(self) -> GraphSpec {
        self.spec
    }
}

/// Builds a `crop_boxes` node: boxes in pixels, every box kept (score ≥ 0, no suppression), at
/// most 64 parts, until told otherwise.
#[derive(Debug, Clone)]
pub struct CropBoxesBuilder {
    spec: CropBoxesSpec,
}

impl CropBoxesBuilder {
    /// Node `id` cropping `boxes` out of `image`, each crop resized to `height` × `width`.
    pub fn new(
        id: &str,
        image: &str,
        boxes: &str,
        [height, width]: [usize; 2],
        interpolation: Interpolation,
    ) -> Self {
        CropBoxesBuilder {
            spec: CropBoxesSpec {
                id: s(id.to_string()),
                image: s(image.to_string()),
                boxes: s(boxes.to_string()),
                scores: None,
                coordinates: s(BoxCoordinates::Pixels),
                height: s(height),
                width: s(width),
                interpolation: s(interpolation),
                min_score: s(0.0),
                iou_threshold: None,
                max_boxes: s(64),
            },
        }
    }

    /// Reads the boxes' scores from tensor `scores`, keeping those of at least `min_score`.
    pub fn scores(mut self, scores: &str, min_score: f32) -> Self {
        self.spec.scores = Some(s(scores.to_string()));
        self.spec.min_score = s(min_score);
        self
    }

    /// Reads box coordinates as fractions of the image's width and height.
    pub fn normalized(mut self) -> Self {
        self.spec.coordinates = s(BoxCoordinates::Normalized);
        self
    }

    /// Drops a box overlapping a better one by more than `iou` (intersection over union).
    pub fn suppress_above(mut self, iou: f32) -> Self {
        self.spec.iou_threshold = Some(s(iou));
        self
    }

    /// Keeps at most `n` boxes per request.
    pub fn max_boxes(mut self, n: usize) -> Self {
        self.spec.max_boxes = s(n);
        self
    }
}
