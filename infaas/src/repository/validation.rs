//! A validation set: labelled examples a variant's accuracy is measured on (paper §3.3: each
//! variant's accuracy is part of its metadata, and int8 variants score differently from fp32).
//!
//! Format: JSON lines, one example a line,
//!
//! ```text
//! {"inputs": {"x": [0.0, 0.3125, …]}, "label": 3}
//! ```
//!
//! `inputs` names every model input, each a flat array of numbers holding one row (the shape
//! after the batch dimension, row-major); `label` is the index of the correct class in the first
//! output. Only float32 inputs with fixed non-batch dimensions are supported: a set is checked
//! against the model's signature when it is read. The file is hostile input: a line longer than
//! [`MAX_LINE_BYTES`], more than [`MAX_EXAMPLES`] examples, a value that is not a finite number,
//! a row of the wrong length, or a label out of range is an error naming the line and the field.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use weir_engine::tensor::DType;

use super::metadata::{Signature, TensorSignature};

/// The longest line read.
pub const MAX_LINE_BYTES: u64 = 1 << 20;
/// The most examples a set may hold.
pub const MAX_EXAMPLES: usize = 100_000;

/// Why a validation set cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ValidationError {
    /// The file could not be read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A line, or a field of it, is wrong.
    #[error("{file}:{line}: {field}: {reason}")]
    Line {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The field (`inputs.x`, `label`, or `line` for the line as a whole).
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The model's signature is one this format cannot feed.
    #[error("validation sets feed only float32 inputs with fixed non-batch dimensions: {0}")]
    Unsupported(String),
}

/// The examples, stored as one row-major matrix per input.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationSet {
    /// Per model input (in signature order), every example's row, concatenated.
    pub inputs: Vec<Vec<f32>>,
    /// Per model input, the length of one row.
    pub row_len: Vec<usize>,
    /// Each example's correct class.
    pub labels: Vec<u32>,
    /// Classes in the first output.
    pub classes: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    inputs: HashMap<String, Vec<f64>>,
    label: i64,
}

/// Elements of one row of `t` (all dimensions after the batch one, which must be fixed).
fn row_elements(t: &TensorSignature) -> Result<usize, ValidationError> {
    let unsupported = |why: &str| ValidationError::Unsupported(format!("`{}` {why}", t.name));
    if t.dims.is_empty() {
        return Err(unsupported("has no batch dimension"));
    }
    t.dims[1..].iter().try_fold(1usize, |n, d| {
        let d = d.ok_or_else(|| unsupported("has a dynamic non-batch dimension"))?;
        usize::try_from(d)
            .ok()
            .and_then(|d| n.checked_mul(d))
            .filter(|n| *n <= (1 << 24))
            .ok_or_else(|| unsupported("has rows of more than 2^24 elements"))
    })
}

impl ValidationSet {
    /// Reads the set at `path`, checking each line against `signature`.
    ///
    /// # Errors
    /// [`ValidationError`] naming the line and field.
    pub fn read(path: &Path, signature: &Signature) -> Result<Self, ValidationError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|e| ValidationError::Io {
            file: file.clone(),
            source: e,
        })?;
        Self::from_reader(BufReader::new(f), &file, signature)
    }

    /// Reads a set from `reader`; `file` names it in errors.
    ///
    /// # Errors
    /// As [`ValidationSet::read`].
    pub fn from_reader(
        mut reader: impl BufRead,
        file: &str,
        signature: &Signature,
    ) -> Result<Self, ValidationError> {
        for t in &signature.inputs {
            if t.dtype != DType::F32 {
                return Err(ValidationError::Unsupported(format!(
                    "`{}` is {}",
                    t.name, t.dtype
                )));
            }
        }
        let row_len = signature
            .inputs
            .iter()
            .map(row_elements)
            .collect::<Result<Vec<_>, _>>()?;
        let first = signature
            .outputs
            .first()
            .ok_or_else(|| ValidationError::Unsupported("the model has no output".into()))?;
        let classes = row_elements(first)?;
        let mut set = ValidationSet {
            inputs: vec![Vec::new(); row_len.len()],
            row_len,
            labels: Vec::new(),
            classes,
        };
        let mut buf = Vec::new();
        let mut number = 0usize;
        loop {
            number += 1;
            let err = |field: &str, reason: String| ValidationError::Line {
                file: file.to_string(),
                line: number,
                field: field.to_string(),
                reason,
            };
            buf.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES + 1)
                .read_until(b'\n', &mut buf)
                .map_err(|e| ValidationError::Io {
                    file: file.to_string(),
                    source: e,
                })?;
            if n == 0 {
                break;
            }
            if n as u64 > MAX_LINE_BYTES {
                return Err(err("line", format!("longer than {MAX_LINE_BYTES} bytes")));
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if set.labels.len() >= MAX_EXAMPLES {
                return Err(err("line", format!("more than {MAX_EXAMPLES} examples")));
            }
            let line: Line =
                serde_json::from_slice(&buf).map_err(|e| err("line", e.to_string()))?;
            set.push(line, signature, &err)?;
        }
        if set.labels.is_empty() {
            return Err(ValidationError::Line {
                file: file.to_string(),
                line: number,
                field: "line".into(),
                reason: "the set holds no example".into(),
            });
        }
        Ok(set)
    }

    fn push(
        &mut self,
        mut line: Line,
        signature: &Signature,
        err: &dyn Fn(&str, String) -> ValidationError,
    ) -> Result<(), ValidationError> {
        if let Some(extra) = line
            .inputs
            .keys()
            .find(|k| !signature.inputs.iter().any(|t| &t.name == *k))
        {
            let name: String = extra.chars().take(64).collect();
            return Err(err(
                &format!("inputs.{name}"),
                "is not an input of the model".into(),
            ));
        }
        for (i, t) in signature.inputs.iter().enumerate() {
            let field = format!("inputs.{}", t.name);
            let row = line
                .inputs
                .remove(&t.name)
                .ok_or_else(|| err(&field, "is missing".into()))?;
            if row.len() != self.row_len[i] {
                return Err(err(
                    &field,
                    format!(
                        "has {} values, the model takes {}",
                        row.len(),
                        self.row_len[i]
                    ),
                ));
            }
            if let Some(j) = row
                .iter()
                .position(|v| !v.is_finite() || v.abs() > f64::from(f32::MAX))
            {
                return Err(err(
                    &format!("{field}[{j}]"),
                    "is not a finite float32".into(),
                ));
            }
            self.inputs[i].extend(row.iter().map(|v| *v as f32));
        }
        match u32::try_from(line.label) {
            Ok(l) if (l as usize) < self.classes => self.labels.push(l),
            _ => {
                return Err(err(
                    "label",
                    format!("{} is not a class in 0..{}", line.label, self.classes),
                ))
            }
        }
        Ok(())
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the set holds no example (never true of a set that was read).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Input `i`'s rows `start..start + rows`.
    pub fn rows(&self, i: usize, start: usize, rows: usize) -> &[f32] {
        let w = self.row_len[i];
        &self.inputs[i][start * w..(start + rows) * w]
    }
}

/// Top-1 accuracy: the fraction of `labels` equal to the arg-max of their row of `scores`
/// (`classes` values a row).
pub fn top1(scores: &[f32], classes: usize, labels: &[u32]) -> f64 {
    if labels.is_empty() || classes == 0 {
        return 0.0;
    }
    let right = scores
        .chunks_exact(classes)
        .zip(labels)
        .filter(|(row, label)| {
            let best =
                row.iter()
                    .enumerate()
                    .fold((0usize, f32::NEG_INFINITY), |(bi, bv), (i, v)| {
                        if *v > bv {
                            (i, *v)
                        } else {
                            (bi, bv)
                        }
                    });
            best.0 == **label as usize
        })
        .count();
    right as f64 / labels.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> Signature {
        let t = |name: &str, dims: Vec<Option<u64>>| TensorSignature {
            name: name.into(),
            dtype: DType::F32,
            dims,
        };
        Signature {
            inputs: vec![t("x", vec![None, Some(3)])],
            outputs: vec![t("probs", vec![None, Some(4)])],
        }
    }

    fn read(text: &str) -> Result<ValidationSet, ValidationError> {
        ValidationSet::from_reader(text.as_bytes(), "v.jsonl", &sig())
    }

    #[test]
    fn reads_rows_and_labels() {
        let set = read("{\"inputs\":{\"x\":[1,2,3]},\"label\":3}\n\n{\"inputs\":{\"x\":[4,5,6]},\"label\":0}\n").unwrap();
        assert_eq!(set.len(), 2);
        assert_eq!(set.rows(0, 1, 1), &[4.0, 5.0, 6.0]);
        assert_eq!(set.labels, vec![3, 0]);
    }

    #[test]
    fn bad_lines_are_named() {
        let cases = [
            (
                "{\"inputs\":{\"x\":[1,2]},\"label\":1}",
                "v.jsonl:1: inputs.x: has 2 values",
            ),
            (
                "{\"inputs\":{\"x\":[1,2,3]},\"label\":4}",
                "v.jsonl:1: label: 4 is not a class",
            ),
            ("{\"inputs\":{\"x\":[1,2,3]},\"label\":-1}", "label"),
            (
                "{\"inputs\":{\"y\":[1,2,3]},\"label\":1}",
                "inputs.y: is not an input",
            ),
            ("{\"inputs\":{},\"label\":1}", "inputs.x: is missing"),
            (
                "{\"inputs\":{\"x\":[1,2,1e300]},\"label\":1}",
                "inputs.x[2]: is not a finite float32",
            ),
            ("not json", "v.jsonl:1: line"),
            ("", "holds no example"),
        ];
        for (text, want) in cases {
            let e = read(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let long = format!(
            "{{\"inputs\":{{\"x\":[1,2,3]}},\"label\":1}}\n{}",
            " ".repeat(2 << 20)
        );
        assert!(read(&long)
            .unwrap_err()
            .to_string()
            .contains("v.jsonl:2: line: longer"));
    }

    #[test]
    fn top1_counts_argmax_hits() {
        let scores = [0.1, 0.9, 0.0, 0.0, 0.5, 0.2, 0.2, 0.1];
        assert_eq!(top1(&scores, 4, &[1, 1]), 0.5);
    }
}
