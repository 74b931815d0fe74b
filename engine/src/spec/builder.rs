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

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{
    ArgmaxSpec, BatchingSpec, BoxCoordinates, CastSpec, ConcatSpec, CropBoxesSpec, CropSpec,
    CtcDecodeSpec, DecodeImageSpec, DetokenizeSpec, DimSpec, ExecutorSpec, GatherSpec, GraphSpec,
    ImageSize, InputSpec, Interpolation, LabelsSpec, ModelSpec, NodeSpec, NormalizeSpec,
    OutputSpec, PadToSpec, RegionsSpec, RemoteExecutorSpec, ReshapeSpec, ResizeSpec,
    SequenceControl, SequenceInputSpec, SliceSpec, SoftmaxSpec, Spanned, TokenizeSpec, TopKSpec,
    TransposeSpec, DEFAULT_MAX_PIXELS,
};
use crate::tensor::DType;

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
        self.spec.nodes.push(s(NodeSpec::Model(model.spec)));
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

/// Builds a `model` node.
#[derive(Debug, Clone)]
pub struct ModelBuilder {
    spec: ModelSpec,
}

impl ModelBuilder {
    /// A model node `id` running the ONNX file at `path`.
    pub fn new(id: &str, path: impl Into<PathBuf>) -> Self {
        ModelBuilder {
            spec: ModelSpec {
                id: s(id.to_string()),
                path: s(path.into()),
                task: None,
                repository: None,
                inputs: BTreeMap::new(),
                batch: s(true),
                batching: BatchingSpec::default(),
                executor: ExecutorSpec::default(),
                replicas: None,
                routing: None,
                resilience: None,
                parallelism: None,
                state: None,
                replication: None,
                constants: BTreeMap::new(),
                warmup: None,
            },
        }
    }

    /// Warms every in-process session of the node with `warmup` before the graph is ready.
    pub fn warmup(mut self, warmup: super::WarmupSpec) -> Self {
        self.spec.warmup = Some(s(warmup));
        self
    }

    /// The node as built.
    pub fn into_spec(self) -> ModelSpec {
        self.spec
    }

    /// Binds model input `name` to tensor reference `from`.
    pub fn input(mut self, name: &str, from: &str) -> Self {
        self.spec
            .inputs
            .insert(name.to_string(), s(from.to_string()));
        self
    }

    /// Sets dynamic batching.
    pub fn batching(mut self, max_size: usize, max_delay_us: u64) -> Self {
        self.spec.batching = BatchingSpec {
            max_size,
            max_delay_us,
            wait: self.spec.batching.wait,
            pad: self.spec.batching.pad.take(),
            fixed_size: self.spec.batching.fixed_size.take(),
        };
        self
    }

    /// Sets when a batch waits `max_delay_us` for company (`batching.wait`).
    pub fn batch_wait(mut self, wait: super::BatchWait) -> Self {
        self.spec.batching.wait = wait;
        self
    }

    /// Pads every call to exactly `size` rows: for a model whose file fixes its batch dimension
    /// (`batching.fixed_size`).
    pub fn fixed_batch(mut self, size: usize) -> Self {
        self.spec.batching.fixed_size = Some(s(size));
        self
    }

    /// Pads requests along the model's dimension named `dim` with `value`, so that requests of
    /// different lengths join one call (see [`super::PadSpec`]).
    pub fn pad(mut self, dim: &str, value: f64) -> Self {
        self.spec.batching.pad = Some(s(super::PadSpec {
            dim: s(dim.to_string()),
            value: s(value),
            when: super::PadWhen::default(),
        }));
        self
    }

    /// Sets when a padded node joins requests of different lengths into one call (after
    /// [`ModelBuilder::pad`]; see [`super::PadWhen`]). Without `pad` it does nothing.
    pub fn pad_when(mut self, when: super::PadWhen) -> Self {
        if let Some(pad) = self.spec.batching.pad.as_mut() {
            pad.value.when = when;
        }
        self
    }

    /// Declares that the model has no batch dimension (`batch: false`): each request is one call
    /// with its tensors as they are.
    pub fn unbatched(mut self) -> Self {
        self.spec.batch = s(false);
        self
    }

    /// Sets the executor.
    pub fn executor(mut self, executor: ExecutorSpec) -> Self {
        self.spec.executor = executor;
        self
    }

    /// Sets SERF parallelism: `auto`, or a fixed concurrency × threads.
    pub fn parallelism(mut self, parallelism: super::ParallelismSpec) -> Self {
        self.spec.parallelism = Some(s(parallelism));
        self
    }

    /// Makes the node stateful: model input `inputs[i]` is fed by output `outputs[i]` of the
    /// previous call (HAMS).
    pub fn state(mut self, inputs: &[&str], outputs: &[&str]) -> Self {
        self.spec.state = Some(Box::new(s(super::StateSpec {
            inputs: inputs.iter().map(|n| s(n.to_string())).collect(),
            outputs: outputs.iter().map(|n| s(n.to_string())).collect(),
            per_sequence: None,
        })));
        self
    }

    /// Keeps the node's state per client sequence (call after [`Self::state`]): sequences stack
    /// along `batch_axis` of the state tensors, start at zeros, time out after `idle_timeout_ms`,
    /// at most `max_sequences` at once.
    pub fn per_sequence(
        mut self,
        batch_axis: usize,
        idle_timeout_ms: u64,
        max_sequences: usize,
    ) -> Self {
        if let Some(state) = self.spec.state.as_mut() {
            state.value.per_sequence = Some(s(super::PerSequenceSpec {
                batch_axis: s(batch_axis),
                initial: s(super::InitialState::Zeros),
                idle_timeout_ms: s(idle_timeout_ms),
                max_sequences: s(max_sequences),
            }));
        }
        self
    }

    /// Protects the node's state with `mode`, declaring a primary failed after `detect_ms`.
    pub fn replication(mut self, mode: super::ReplicationMode, detect_ms: u64) -> Self {
        self.spec.replication = Some(Box::new(s(super::ReplicationSpec {
            mode: s(mode),
            detect_ms,
            ..super::ReplicationSpec::unreplicated()
        })));
        self
    }

    /// Adds ParM parity coding: groups of `k`, the parity model at `parity_model`, sum encoder.
    pub fn parity(mut self, k: usize, parity_model: impl Into<PathBuf>) -> Self {
        self.spec.resilience = Some(super::ResilienceSpec {
            parity: Some(s(super::ParitySpec {
                k: s(k),
                parity_model: Some(s(parity_model.into())),
                parity_models: None,
                encoder: s(super::ParityEncoder::Sum),
                decode: s(super::DecodeSpec::default()),
                replicas: None,
                batching: None,
                executor: None,
            })),
        });
        self
    }

    /// Sets when the node's parity coding decodes (after [`Self::parity`]; default `p99`): a
    /// missing prediction counts as unavailable after `after`, never sooner than `floor_ms` for a
    /// quantile. Without parity coding it does nothing.
    pub fn parity_decode(mut self, after: super::DecodeAfter, floor_ms: u64) -> Self {
        if let Some(p) = self
            .spec
            .resilience
            .as_mut()
            .and_then(|r| r.parity.as_mut())
        {
            p.value.decode = s(super::DecodeSpec {
                after: s(after),
                floor_ms,
            });
        }
        self
    }

    /// Runs the node on these replicas: remote executor names or
    /// [`LOCAL_REPLICA`](super::LOCAL_REPLICA).
    pub fn replicas(mut self, names: &[&str]) -> Self {
        self.spec.replicas = Some(s(names.iter().map(|n| s(n.to_string())).collect()));
        self
    }

    /// Sets how jobs are spread over the replicas (default least outstanding).
    pub fn routing(mut self, routing: super::RoutingSpec) -> Self {
        self.spec.routing = Some(s(routing));
        self
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
