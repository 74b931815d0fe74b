//! Post-processing nodes (softmax, labels): their settings and their types.
//!
//! Rules: `softmax` reads an f32 tensor of rank ≥ 1 and keeps its type (the last axis is the one
//! normalised, so a free last dimension is fine: each row is computed on its own length).
//! `labels` reads an i64 tensor and gives a BYTES tensor of the same shape; its `labels` file is
//! read here, through [`crate::paths`] (regular file, under the root, at most
//! [`MAX_LABELS_BYTES`]), must be UTF-8 and hold at least one non-blank line. Reading it here
//! means a graph with a missing or empty label file is refused before it starts, and the running
//! operator holds the names in memory. Whether an index is in range depends on the data, so it is
//! checked per request at run time.

use std::sync::Arc;

use super::tensor_ops::TensorOp;
use super::{node_path, Port, Validator};
use crate::diagnostic::Location;
use crate::paths::read_capped;
use crate::spec::{LabelsSpec, NodeSpec};
use crate::tensor::{DType, TensorType};

/// Largest label file read: ample for any class list (ImageNet-21k's names are about 1 MB).
pub const MAX_LABELS_BYTES: u64 = 16 << 20;

/// A post-processing op, checked: what the operator computes.
#[derive(Debug, Clone, PartialEq)]
pub enum TextOp {
    /// Softmax along the last axis.
    Softmax,
    /// Index → name lookup.
    Labels {
        /// The names, line `i` of the file at index `i`.
        names: Arc<[String]>,
    },
}

impl Validator<'_, '_> {
    /// Types post-processing node `node` from its resolved `ports` (written at `locs`): the op
    /// and its outputs, or `None` after reporting why not.
    pub(super) fn type_text_op(
        &mut self,
        node: &NodeSpec,
        ports: &[Port],
        locs: &[Location],
    ) -> Option<(TensorOp, Vec<(String, TensorType)>)> {
        let id = node.id().value.as_str();
        let p = &ports[0];
        match node {
            NodeSpec::Softmax(_) => {
                if !self.f32_port(id, p, locs[0]) {
                    return None;
                }
                if p.ty.shape.is_empty() {
                    self.error(
                        node_path(id, "input"),
                        locs[0],
                        format!(
                            "node `{id}`: softmax needs a tensor with at least one dimension, but `{}` is a scalar",
                            p.column
                        ),
                    );
                    return None;
                }
                let out = vec![("output".to_string(), p.ty.clone())];
                Some((TensorOp::Text(TextOp::Softmax), out))
            }
            NodeSpec::Labels(l) => {
                if p.ty.dtype != DType::I64 {
                    self.error(
                        node_path(id, "input"),
                        locs[0],
                        format!(
                            "node `{id}` maps i64 class indices to names, but `{}` is {}",
                            p.column, p.ty
                        ),
                    );
                    return None;
                }
                let names = self.read_labels(id, l)?;
                let out = vec![(
                    "labels".to_string(),
                    TensorType {
                        dtype: DType::Bytes,
                        shape: p.ty.shape.clone(),
                    },
                )];
                Some((TensorOp::Text(TextOp::Labels { names }), out))
            }
            _ => None,
        }
    }

    /// The label file of node `id`: one name per line (a trailing `\r` dropped).
    fn read_labels(&mut self, id: &str, l: &LabelsSpec) -> Option<Arc<[String]>> {
        let path = self.base_dir.join(&l.labels.value);
        let refuse = |this: &mut Self, why: String| {
            this.error(
                node_path(id, "labels"),
                l.labels.location,
                format!("node `{id}`: `labels`: {why}"),
            )
            .help = Some(
                "a UTF-8 text file with one label per line, relative to the graph file's folder"
                    .into(),
            );
            None
        };
        let bytes = match read_capped(&path, MAX_LABELS_BYTES, self.files) {
            Ok(bytes) => bytes,
            Err(e) => return refuse(self, e.to_string()),
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return refuse(self, format!("{} is not UTF-8 text", path.display()));
        };
        let names: Vec<String> = text
            .lines()
            .map(|line| line.strip_suffix('\r').unwrap_or(line).to_string())
            .collect();
        if names.iter().all(|n| n.trim().is_empty()) {
            return refuse(self, format!("{} holds no labels", path.display()));
        }
        Some(names.into())
    }
}
