//! Tensor values as requests and replies carry them, and the element types weir moves through a graph.
//!
//! Inside the dataflow a tensor lives in an Arrow column (see [`crate::batch`]); this module is the
//! owned, per-request form that connectors build from a request body and read back from a reply.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Element type of a tensor. weir moves `f32` and `i64` tensors; ONNX models with other element types
/// are rejected by validation with the type they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float (ONNX `FLOAT`, KServe `FP32`).
    F32,
    /// 64-bit signed integer (ONNX `INT64`, KServe `INT64`).
    I64,
}

impl DType {
    /// The name used in YAML and error messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I64 => "i64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The elements of one tensor, row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `i64` elements.
    I64(Vec<i64>),
}

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::F32(_) => DType::F32,
            TensorData::I64(_) => DType::I64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::I64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The number of elements a tensor of `shape` holds, or `None` when the product overflows.
/// Shapes from requests, peers and files are hostile: every such count goes through here.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// One request's tensor: its shape (without a batch dimension) and its elements.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first. The element count is their product.
    pub shape: Vec<usize>,
    /// Row-major elements.
    pub data: TensorData,
}

impl Tensor {
    /// An `f32` tensor.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Tensor {
            shape,
            data: TensorData::F32(data),
        }
    }

    /// An `i64` tensor.
    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Self {
        Tensor {
            shape,
            data: TensorData::I64(data),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The `f32` elements, if this is an `f32` tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            TensorData::I64(_) => None,
        }
    }

    /// The `i64` elements, if this is an `i64` tensor.
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.data {
            TensorData::I64(v) => Some(v),
            TensorData::F32(_) => None,
        }
    }
}

/// A tensor with the name of the graph input or output it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedTensor {
    /// Graph input or output name.
    pub name: String,
    /// The tensor.
    pub tensor: Tensor,
}

/// One dimension of a static tensor type: a fixed size, or dynamic (known only at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known before anything runs.
    Fixed(usize),
    /// A size only known at run time (an ONNX `dim_param` or an unknown dimension).
    Dynamic,
}

impl Dim {
    /// Whether two dimensions can describe the same tensor.
    pub fn compatible(self, other: Dim) -> bool {
        match (self, other) {
            (Dim::Fixed(a), Dim::Fixed(b)) => a == b,
            _ => true,
        }
    }
}

/// The static type of a per-request tensor: element type and shape (no batch dimension).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Per-request shape.
    pub shape: Vec<Dim>,
}

impl TensorType {
    /// A type whose dimensions are all fixed.
    pub fn fixed(dtype: DType, shape: &[usize]) -> Self {
        TensorType {
            dtype,
            shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        }
    }

    /// Element count when every dimension is fixed.
    pub fn element_count(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |acc, d| match d {
            Dim::Fixed(n) => Some(acc * n),
            Dim::Dynamic => None,
        })
    }

    /// Whether a value of type `self` may flow where `other` is expected.
    pub fn compatible(&self, other: &TensorType) -> bool {
        self.dtype == other.dtype
            && self.shape.len() == other.shape.len()
            && self
                .shape
                .iter()
                .zip(&other.shape)
                .all(|(a, b)| a.compatible(*b))
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&self.shape))
    }
}

/// Formats a static shape as `[3, 224, 224]`, with `?` for dynamic dimensions.
pub struct ShapeDisplay<'a>(pub &'a [Dim]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match d {
                Dim::Fixed(n) => write!(f, "{n}")?,
                Dim::Dynamic => f.write_str("?")?,
            }
        }
        f.write_str("]")
    }
}
