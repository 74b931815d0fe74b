//! Image pre-processing nodes (decode_image, resize, cast, transpose): their settings and types.
//!
//! Rules: `decode_image` reads a BYTES tensor of shape `[]` or `[1]` (one encoded picture per
//! request), with `max_pixels` ≥ 1 and each side of a `draft` 1 to 65,535 (a JPEG's sizes are
//! 16-bit), and yields `u8 [-1, -1, 3]`; `resize` reads `u8` or `f32` of rank 3 (height, width,
//! channels) and yields `[height, width, channels]`, both ≥ 1; `cast` reads and yields any dtype
//! but `bytes`; `transpose` takes a `perm` that is a permutation of `0..rank` of its input. What
//! only the bytes settle (the format, the declared size against `max_pixels`, a corrupt file) fails
//! that request at run time, naming the node.

use super::{node_path, Port, TensorOp, Validator};
use crate::diagnostic::Location;
use crate::spec::NodeSpec;
use crate::tensor::{DType, Dim, TensorType};

impl Validator<'_, '_> {
    /// An image node's settings, before its input is known.
    pub(super) fn check_image_fields(&mut self, node: &NodeSpec) {
        let id = node.id().value.as_str();
        match node {
            NodeSpec::DecodeImage(d) => {
                if d.max_pixels.value == 0 {
                    self.error(
                        node_path(id, "max_pixels"),
                        d.max_pixels.location,
                        format!("node `{id}`: `max_pixels` must be at least 1"),
                    );
                }
                if let Some(draft) = &d.draft {
                    let size = draft.value;
                    for (field, v) in [("height", size.height), ("width", size.width)] {
                        if !(1..=usize::from(u16::MAX)).contains(&v) {
                            self.error(
                                node_path(id, &format!("draft.{field}")),
                                draft.location,
                                format!(
                                    "node `{id}`: `draft.{field}` must be 1 to {}, not {v}",
                                    u16::MAX
                                ),
                            );
                        }
                    }
                }
            }
            NodeSpec::Resize(r) => {
                for (field, v) in [("height", &r.height), ("width", &r.width)] {
                    if v.value == 0 {
                        self.error(
                            node_path(id, field),
                            v.location,
                            format!("node `{id}`: `{field}` must be at least 1"),
                        );
                    }
                }
            }
            NodeSpec::Cast(c) if c.to.value == DType::Bytes => {
                self.error(
                    node_path(id, "to"),
                    c.to.location,
                    format!(
                        "node `{id}`: cannot cast to bytes; `to` must be a numeric or bool dtype"
                    ),
                );
            }
            NodeSpec::Transpose(t) => {
                let mut seen = vec![false; t.perm.len()];
                let is_perm = t
                    .perm
                    .iter()
                    .all(|&a| a < seen.len() && !std::mem::replace(&mut seen[a], true));
                if t.perm.is_empty() || !is_perm {
                    self.error(
                        node_path(id, "perm"),
                        t.perm.location,
                        format!(
                            "node `{id}`: `perm` {:?} is not a permutation of 0..{}",
                            t.perm.value,
                            t.perm.len()
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// The image op `node` is and its outputs, from its resolved `ports` (written at `locs`).
    pub(super) fn type_image_op(
        &mut self,
        node: &NodeSpec,
        ports: &[Port],
        locs: &[Location],
    ) -> Option<(TensorOp, Vec<(String, TensorType)>)> {
        let id = node.id().value.as_str();
        let p = &ports[0];
        let refuse = |v: &mut Self, needs: &str| {
            v.wrong_port(id, p, locs[0], needs);
            None
        };
        let (op, ty) = match node {
            NodeSpec::DecodeImage(d) => {
                let one = matches!(p.ty.shape[..], [] | [Dim::Fixed(1)] | [Dim::Dynamic]);
                if p.ty.dtype != DType::Bytes || !one {
                    return refuse(self, "one encoded image (bytes of shape [] or [1])");
                }
                let shape = vec![Dim::Dynamic, Dim::Dynamic, Dim::Fixed(3)];
                let op = TensorOp::DecodeImage {
                    max_pixels: d.max_pixels.value,
                    draft: d.draft.as_ref().map(|s| s.value),
                };
                (
                    op,
                    TensorType {
                        dtype: DType::U8,
                        shape,
                    },
                )
            }
            NodeSpec::Resize(r) => {
                let image = matches!(p.ty.dtype, DType::U8 | DType::F32) && p.ty.shape.len() == 3;
                if !image {
                    return refuse(self, "a u8 or f32 image of shape [height, width, channels]");
                }
                let shape = vec![
                    Dim::Fixed(r.height.value),
                    Dim::Fixed(r.width.value),
                    p.ty.shape[2],
                ];
                let op = TensorOp::Resize {
                    height: r.height.value,
                    width: r.width.value,
                    interpolation: r.interpolation.value,
                };
                (
                    op,
                    TensorType {
                        dtype: p.ty.dtype,
                        shape,
                    },
                )
            }
            NodeSpec::Cast(c) => {
                if p.ty.dtype == DType::Bytes {
                    return refuse(self, "a numeric or bool tensor");
                }
                let ty = TensorType {
                    dtype: c.to.value,
                    shape: p.ty.shape.clone(),
                };
                (TensorOp::Cast { to: c.to.value }, ty)
            }
            NodeSpec::Transpose(t) => {
                if p.ty.shape.len() != t.perm.len() {
                    return refuse(self, &format!("a tensor of rank {}", t.perm.len()));
                }
                let shape = t.perm.iter().map(|&a| p.ty.shape[a]).collect();
                let ty = TensorType {
                    dtype: p.ty.dtype,
                    shape,
                };
                let op = TensorOp::Transpose {
                    perm: t.perm.value.clone(),
                };
                (op, ty)
            }
            _ => return None,
        };
        Some((op, vec![("output".to_string(), ty)]))
    }
}
