//! Text and post-processing nodes (tokenize, detokenize, softmax, labels, ctc_decode): their
//! settings and their types.
//!
//! Rules: `tokenize` reads a BYTES tensor of one element per request and gives `input_ids` and
//! `attention_mask`, i64 of one free dimension; its `tokenizer` file is read and parsed here as a
//! Hugging Face `tokenizer.json` (at most [`crate::paths::MAX_TEXT_BYTES`]), and `max_length` is
//! between 1 and [`MAX_TOKENS`]. `detokenize` reads i64 token ids of rank 1 (the same tokenizer
//! file rules) and gives one BYTES text. `ctc_decode` reads f32 scores of rank 2, steps by
//! classes, and gives a BYTES text and an f32 confidence, both scalars; its `labels` file follows
//! the `labels` rules, and its `blank` must be one of the classes when their count is fixed. `softmax` reads an f32 tensor of rank ≥ 1 and keeps its type (the last axis is the one
//! normalised, so a free last dimension is fine: each row is computed on its own length).
//! `labels` reads an i64 tensor and gives a BYTES tensor of the same shape; its `labels` file is
//! read here, through [`crate::paths`] (regular file, under the root, at most
//! [`MAX_LABELS_BYTES`]), must be UTF-8 and hold at least one non-blank line. Reading it here
//! means a graph with a missing or empty label file is refused before it starts, and the running
//! operator holds the names in memory. Whether an index is in range depends on the data, so it is
//! checked per request at run time.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use tokenizers::Tokenizer;

use super::{node_path, Port, Validator};
use crate::diagnostic::Location;
use crate::paths::{read_capped, MAX_TEXT_BYTES};
use crate::spec::{NodeSpec, Spanned};
use crate::tensor::{DType, Dim, TensorType};

/// Largest label file read: ample for any class list (ImageNet-21k's names are about 1 MB).
pub const MAX_LABELS_BYTES: u64 = 16 << 20;

/// Largest `max_length` a `tokenize` node may set (the longest context of common text models, with
/// room to spare).
pub const MAX_TOKENS: usize = 1 << 16;

/// A parsed `tokenizer.json`, with the path it came from (what plans print and compare).
#[derive(Clone)]
pub struct TokenizerFile {
    /// The file, as resolved against the graph's folder.
    pub path: PathBuf,
    /// The tokenizer it holds.
    pub tokenizer: Arc<Tokenizer>,
}

impl fmt::Debug for TokenizerFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenizerFile({})", self.path.display())
    }
}

impl PartialEq for TokenizerFile {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

/// A text or post-processing op, checked: what the operator computes.
#[derive(Debug, Clone, PartialEq)]
pub enum TextOp {
    /// A text into token ids (special tokens added), refused past `max_length` tokens.
    Tokenize {
        /// The tokenizer.
        tokenizer: TokenizerFile,
        /// Most tokens per text.
        max_length: usize,
    },
    /// Softmax along the last axis.
    Softmax,
    /// Index → name lookup.
    Labels {
        /// The names, line `i` of the file at index `i`.
        names: Arc<[String]>,
    },
    /// Token ids back into a text.
    Detokenize {
        /// The tokenizer.
        tokenizer: TokenizerFile,
        /// Whether special tokens are left out.
        skip_special_tokens: bool,
    },
    /// Greedy CTC decoding of `[T, C]` scores.
    CtcDecode {
        /// The class texts, line `i` of the file at index `i`.
        names: Arc<[String]>,
        /// The blank class.
        blank: usize,
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
    ) -> Option<(TextOp, Vec<(String, TensorType)>)> {
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
                Some((TextOp::Softmax, out))
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
                let names = self.read_labels(id, &l.labels)?;
                let out = vec![(
                    "labels".to_string(),
                    TensorType {
                        dtype: DType::Bytes,
                        shape: p.ty.shape.clone(),
                    },
                )];
                Some((TextOp::Labels { names }, out))
            }
            NodeSpec::Tokenize(t) => {
                if p.ty.dtype != DType::Bytes || p.ty.element_count() != Some(1) {
                    self.error(
                        node_path(id, "input"),
                        locs[0],
                        format!(
                            "node `{id}` tokenizes one BYTES text per request, but `{}` is {}",
                            p.column, p.ty
                        ),
                    );
                    return None;
                }
                if t.max_length.value == 0 || t.max_length.value > MAX_TOKENS {
                    self.error(
                        node_path(id, "max_length"),
                        t.max_length.location,
                        format!(
                            "node `{id}`: `max_length` is {}, but must be between 1 and {MAX_TOKENS}",
                            t.max_length.value
                        ),
                    );
                    return None;
                }
                let tokenizer = self.read_tokenizer(id, &t.tokenizer)?;
                let ids = TensorType {
                    dtype: DType::I64,
                    shape: vec![Dim::Dynamic],
                };
                let out = vec![
                    ("input_ids".to_string(), ids.clone()),
                    ("attention_mask".to_string(), ids),
                ];
                let op = TextOp::Tokenize {
                    tokenizer,
                    max_length: t.max_length.value,
                };
                Some((op, out))
            }
            NodeSpec::Detokenize(d) => {
                if p.ty.dtype != DType::I64 || p.ty.shape.len() != 1 {
                    self.error(
                        node_path(id, "input"),
                        locs[0],
                        format!(
                            "node `{id}` turns one sequence of i64 token ids per request into a text, but `{}` is {}",
                            p.column, p.ty
                        ),
                    );
                    return None;
                }
                let tokenizer = self.read_tokenizer(id, &d.tokenizer)?;
                let op = TextOp::Detokenize {
                    tokenizer,
                    skip_special_tokens: d.skip_special_tokens.value,
                };
                Some((op, vec![("text".to_string(), text_type())]))
            }
            NodeSpec::CtcDecode(c) => {
                if p.ty.dtype != DType::F32 || p.ty.shape.len() != 2 {
                    self.error(
                        node_path(id, "input"),
                        locs[0],
                        format!(
                            "node `{id}` decodes f32 scores of shape [steps, classes], but `{}` is {}",
                            p.column, p.ty
                        ),
                    );
                    return None;
                }
                if let Dim::Fixed(classes) = p.ty.shape[1] {
                    if c.blank.value >= classes {
                        self.error(
                            node_path(id, "blank"),
                            c.blank.location,
                            format!(
                                "node `{id}`: `blank` is {}, but `{}` has {classes} classes",
                                c.blank.value, p.column
                            ),
                        );
                        return None;
                    }
                }
                let names = self.read_labels(id, &c.labels)?;
                let out = vec![
                    ("text".to_string(), text_type()),
                    (
                        "confidence".to_string(),
                        TensorType {
                            dtype: DType::F32,
                            shape: vec![],
                        },
                    ),
                ];
                let op = TextOp::CtcDecode {
                    names,
                    blank: c.blank.value,
                };
                Some((op, out))
            }
            _ => None,
        }
    }

    /// The `tokenizer.json` of node `id` (its `tokenizer` field), parsed.
    fn read_tokenizer(&mut self, id: &str, file: &Spanned<PathBuf>) -> Option<TokenizerFile> {
        let path = self.base_dir.join(&file.value);
        let parsed = read_capped(&path, MAX_TEXT_BYTES, self.files)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                Tokenizer::from_bytes(bytes).map_err(|e| {
                    format!(
                        "{} is not a Hugging Face tokenizer.json: {e}",
                        path.display()
                    )
                })
            });
        match parsed {
            Ok(tokenizer) => Some(TokenizerFile {
                path,
                tokenizer: Arc::new(tokenizer),
            }),
            Err(why) => {
                self.error(
                    node_path(id, "tokenizer"),
                    file.location,
                    format!("node `{id}`: `tokenizer`: {why}"),
                );
                None
            }
        }
    }

    /// The label file of node `id` (its `labels` field): one name per line (a trailing `\r`
    /// dropped).
    fn read_labels(&mut self, id: &str, file: &Spanned<PathBuf>) -> Option<Arc<[String]>> {
        let path = self.base_dir.join(&file.value);
        let refuse = |this: &mut Self, why: String| {
            this.error(
                node_path(id, "labels"),
                file.location,
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

/// One text per request: a BYTES scalar.
fn text_type() -> TensorType {
    TensorType {
        dtype: DType::Bytes,
        shape: vec![],
    }
}
