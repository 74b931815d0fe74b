//! Tensor-op nodes (normalize, argmax, top-k, concat; reshape in [`super::reshape`]): their
//! settings and their types.
//!
//! Rules: `normalize` has at least one `mean` and one `std` value, one or one per channel each,
//! every `std` finite and non-zero, and an f32 input whose first dimension matches a per-channel
//! count; `argmax` and `top_k` read f32, with `k` between 1 and the input's element count;
//! `concat` joins at least two inputs of one dtype and rank that agree on every dimension but
//! `axis` (negative counts from the end). Every op computes each row on its own shape, so free
//! dimensions are accepted; what only a row's sizes settle (`k` against its element count, its
//! channels, the dimensions concat needs equal) is checked per row at run time, and a row that
//! does not fit fails its batch with a message naming the row. An op has nothing left for the plan
//! to decide, so validation yields it as a [`TensorOp`].

use super::text_ops::TextOp;
use super::{node_path, CheckedKind, Port, TypedNode, Validator};
use crate::diagnostic::Location;
use crate::spec::{ImageSize, Interpolation, NodeSpec};
use crate::tensor::{DType, Dim, ShapeDisplay, TensorType};

/// A tensor op, checked: what the operator computes.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorOp {
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
    /// One JPEG or PNG per row decoded to `u8 [height, width, 3]`.
    DecodeImage {
        /// The most pixels a header may declare.
        max_pixels: u64,
        /// The least size a JPEG is decoded at, by reducing its DCT (none: decoded whole).
        draft: Option<ImageSize>,
    },
    /// An HWC image resized.
    Resize {
        /// Output height.
        height: usize,
        /// Output width.
        width: usize,
        /// How pixels are computed.
        interpolation: Interpolation,
    },
    /// Elements converted to `to`.
    Cast {
        /// Output dtype (never bytes).
        to: DType,
    },
    /// Dimensions permuted: output `i` is input `perm[i]`.
    Transpose {
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// A post-processing op (softmax, labels).
    Text(TextOp),
    /// Every kept box cropped out of an image: the node fans out, one part per crop.
    CropBoxes(super::CropBoxesOp),
    /// A probability map's regions as boxes and scores.
    Regions(super::RegionsOp),
    /// A window of the input: crop, pad or slice.
    Window(super::WindowOp),
    /// Each row's elements under another shape.
    Reshape(super::ReshapeOp),
    /// A `cast`, `transpose`, `normalize` chain run as one pass; never written in a spec, made by
    /// planning (`plan::fusion`) when nothing else reads the chain's intermediate tensors.
    Preprocess(PreprocessOp),
}

/// What a fused `cast → transpose → normalize` chain computes: element for element what the
/// nodes it replaces would, in one pass over each row.
#[derive(Debug, Clone, PartialEq)]
pub struct PreprocessOp {
    /// The cast's output dtype (`None`: no cast in the chain).
    pub cast: Option<DType>,
    /// The transpose's permutation (`None`: no transpose in the chain).
    pub perm: Option<Vec<usize>>,
    /// The normalize's means (one, or one per channel).
    pub mean: Vec<f32>,
    /// The normalize's standard deviations (one, or one per channel).
    pub std: Vec<f32>,
    /// Ids of the nodes folded into this one, in chain order (the node itself is the last).
    pub fused: Vec<String>,
}

impl TensorOp {
    /// Whether the op's outputs hold, per request, one entry per part along their first axis,
    /// which the dataflow splits into one row per part.
    pub fn fans_out(&self) -> bool {
        matches!(self, TensorOp::CropBoxes(_))
    }
}

impl<'a> Validator<'a, '_> {
    /// An op node's settings, before its inputs are known. `at` is where the node is written.
    pub(super) fn check_op_fields(&mut self, node: &NodeSpec, at: Location) {
        let id = node.id().value.as_str();
        match node {
            NodeSpec::Normalize(n) => {
                if n.mean.is_empty() || n.std.is_empty() {
                    self.error(
                        node_path(id, "mean"),
                        n.mean.location,
                        format!("node `{id}`: `mean` and `std` need at least one value each"),
                    );
                } else if n.mean.len() != n.std.len() && n.mean.len() != 1 && n.std.len() != 1 {
                    self.error(
                        node_path(id, "std"),
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
                        node_path(id, "std"),
                        n.std.location,
                        format!("node `{id}`: every `std` value must be finite and non-zero"),
                    );
                }
            }
            NodeSpec::TopK(t) => {
                if t.k.value == 0 {
                    self.error(
                        node_path(id, "k"),
                        t.k.location,
                        format!("node `{id}`: `k` must be at least 1"),
                    );
                }
            }
            NodeSpec::Concat(c) => {
                if c.inputs.len() < 2 {
                    self.error(
                        node_path(id, "inputs"),
                        at,
                        format!(
                            "node `{id}`: concat needs at least two inputs, got {}",
                            c.inputs.len()
                        ),
                    );
                }
            }
            NodeSpec::DecodeImage(_)
            | NodeSpec::Resize(_)
            | NodeSpec::Cast(_)
            | NodeSpec::Transpose(_) => self.check_image_fields(node),
            NodeSpec::Argmax(_)
            | NodeSpec::Model(_)
            | NodeSpec::Softmax(_)
            | NodeSpec::Labels(_)
            | NodeSpec::Tokenize(_)
            | NodeSpec::Detokenize(_)
            | NodeSpec::CtcDecode(_) => {}
            NodeSpec::CropBoxes(_) | NodeSpec::Gather(_) => self.check_fanout_fields(node),
            NodeSpec::Regions(_) | NodeSpec::Crop(_) | NodeSpec::Pad(_) | NodeSpec::Slice(_) => {
                self.check_region_fields(node)
            }
            // Its sizes are checked with its type: they are settled against the input's.
            NodeSpec::Reshape(_) => {}
        }
    }

    /// Types op node `node` from its resolved `ports` (written at `locs`).
    pub(super) fn type_op(
        &mut self,
        node: &NodeSpec,
        ports: Vec<Port>,
        locs: &[Location],
    ) -> Option<TypedNode<'a>> {
        let id = node.id().value.as_str();
        let (op, outputs) = self.type_op_outputs(node, &ports, locs)?;
        Some(TypedNode {
            id: id.to_string(),
            kind: CheckedKind::Op(op),
            inputs: ports,
            outputs,
        })
    }

    /// The op node `node` is and its outputs, from its resolved `ports` (written at `locs`).
    fn type_op_outputs(
        &mut self,
        node: &NodeSpec,
        ports: &[Port],
        locs: &[Location],
    ) -> Option<(TensorOp, Vec<(String, TensorType)>)> {
        let id = node.id().value.as_str();
        match node {
            NodeSpec::Model(_) | NodeSpec::Gather(_) => None,
            NodeSpec::CropBoxes(c) => self.type_crop_boxes(c, ports, locs),
            NodeSpec::Regions(_) | NodeSpec::Crop(_) | NodeSpec::Pad(_) | NodeSpec::Slice(_) => {
                self.type_region_op(node, ports, locs)
            }
            NodeSpec::DecodeImage(_)
            | NodeSpec::Resize(_)
            | NodeSpec::Cast(_)
            | NodeSpec::Transpose(_) => self.type_image_op(node, ports, locs),
            NodeSpec::Softmax(_)
            | NodeSpec::Labels(_)
            | NodeSpec::Tokenize(_)
            | NodeSpec::Detokenize(_)
            | NodeSpec::CtcDecode(_) => self
                .type_text_op(node, ports, locs)
                .map(|(op, outputs)| (TensorOp::Text(op), outputs)),
            NodeSpec::Reshape(r) => {
                let (op, ty) = self.type_reshape(r, &ports[0])?;
                Some((TensorOp::Reshape(op), vec![("output".to_string(), ty)]))
            }
            NodeSpec::Normalize(n) => {
                let p = &ports[0];
                if !self.f32_port(id, p, locs[0]) {
                    return None;
                }
                let channels = n.mean.len().max(n.std.len());
                if channels > 1
                    && p.ty.shape.first() != Some(&Dim::Fixed(channels))
                    && p.ty.shape.first() != Some(&Dim::Dynamic)
                {
                    self.error(node_path(id, "mean"), n.mean.location, format!("node `{id}`: {channels} per-channel values, but `{}` has shape {} (channels are the first dimension)", p.column, ShapeDisplay(&p.ty.shape)));
                    return None;
                }
                let out = vec![("output".to_string(), p.ty.clone())];
                let op = TensorOp::Normalize {
                    mean: n.mean.value.clone(),
                    std: n.std.value.clone(),
                };
                Some((op, out))
            }
            NodeSpec::Argmax(_) => {
                if !self.f32_port(id, &ports[0], locs[0]) {
                    return None;
                }
                let out = vec![("index".to_string(), TensorType::fixed(DType::I64, &[1]))];
                Some((TensorOp::Argmax, out))
            }
            NodeSpec::TopK(t) => {
                let p = &ports[0];
                if !self.f32_port(id, p, locs[0]) {
                    return None;
                }
                if let Some(n) = p.ty.element_count() {
                    if t.k.value > n {
                        self.error(
                            node_path(id, "k"),
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
                Some((TensorOp::TopK { k: t.k.value }, out))
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
                        node_path(id, "axis"),
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
                        self.error(node_path(id, &p.name), locs[pos], format!("node `{id}`: cannot concat `{}` ({}) with `{}` ({}) along axis {axis}: dtype, rank and every other dimension must match", p.column, p.ty, first.column, first.ty));
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
                Some((TensorOp::Concat { axis }, out))
            }
        }
    }

    /// Whether port `p` of node `id` carries f32 (else an error at `loc`).
    pub(super) fn f32_port(&mut self, id: &str, p: &Port, loc: Location) -> bool {
        if p.ty.dtype != DType::F32 {
            self.wrong_port(id, p, loc, "an f32 tensor");
            return false;
        }
        true
    }

    /// Reports, at `loc`, that port `p` of node `id` does not carry what it `needs`.
    pub(super) fn wrong_port(&mut self, id: &str, p: &Port, loc: Location, needs: &str) {
        self.error(
            node_path(id, &p.name),
            loc,
            format!(
                "node `{id}` needs {needs} at `{}`, but `{}` is {}",
                p.name, p.column, p.ty
            ),
        );
    }
}
