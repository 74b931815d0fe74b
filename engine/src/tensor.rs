//! Tensor values as requests and replies carry them, and the element types weir moves through a graph.
//!
//! Inside the dataflow a tensor lives in an Arrow column (see [`crate::batch`]); this module is the
//! owned, per-request form that connectors build from a request body and read back from a reply.
//! The element types are the Open Inference Protocol's (KServe v2) datatypes, each also an ONNX
//! tensor element type: BOOL, UINT8–64, INT8–64, FP16, FP32, FP64, BF16 and BYTES (ONNX `string`).

use std::fmt;

use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Element type of a tensor: one per Open Inference Protocol datatype.
///
/// YAML writes the short names (`f32`, `i64`, `u8`, `bool`, `bytes`, ...); the protocol's own names
/// (`FP32`, `INT64`, `UINT8`, `BOOL`, `BYTES`, ...) and ONNX's `string` are accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// Boolean (ONNX `BOOL`, KServe `BOOL`), one byte per element.
    #[serde(alias = "BOOL")]
    Bool,
    /// Unsigned 8-bit integer (`UINT8`).
    #[serde(alias = "UINT8")]
    U8,
    /// Unsigned 16-bit integer (`UINT16`).
    #[serde(alias = "UINT16")]
    U16,
    /// Unsigned 32-bit integer (`UINT32`).
    #[serde(alias = "UINT32")]
    U32,
    /// Unsigned 64-bit integer (`UINT64`).
    #[serde(alias = "UINT64")]
    U64,
    /// Signed 8-bit integer (`INT8`).
    #[serde(alias = "INT8")]
    I8,
    /// Signed 16-bit integer (`INT16`).
    #[serde(alias = "INT16")]
    I16,
    /// Signed 32-bit integer (`INT32`).
    #[serde(alias = "INT32")]
    I32,
    /// Signed 64-bit integer (ONNX `INT64`, KServe `INT64`).
    #[serde(alias = "INT64")]
    I64,
    /// 16-bit IEEE float (`FP16`).
    #[serde(alias = "FP16")]
    F16,
    /// 32-bit IEEE float (ONNX `FLOAT`, KServe `FP32`).
    #[serde(alias = "FP32")]
    F32,
    /// 64-bit IEEE float (ONNX `DOUBLE`, KServe `FP64`).
    #[serde(alias = "FP64")]
    F64,
    /// bfloat16 (`BF16`).
    #[serde(alias = "BF16")]
    Bf16,
    /// Byte strings (ONNX `string`, KServe `BYTES`): each element is a variable-length byte string.
    #[serde(alias = "BYTES", alias = "string")]
    Bytes,
}

impl DType {
    /// Every element type, in the protocol's order.
    pub const ALL: [DType; 14] = [
        DType::Bool,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Bf16,
        DType::Bytes,
    ];

    /// The name used in YAML and error messages.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Bf16 => "bf16",
            DType::Bytes => "bytes",
        }
    }

    /// The Open Inference Protocol's name (`FP32`, `INT64`, `BYTES`, ...).
    pub fn oip_name(self) -> &'static str {
        match self {
            DType::Bool => "BOOL",
            DType::U8 => "UINT8",
            DType::U16 => "UINT16",
            DType::U32 => "UINT32",
            DType::U64 => "UINT64",
            DType::I8 => "INT8",
            DType::I16 => "INT16",
            DType::I32 => "INT32",
            DType::I64 => "INT64",
            DType::F16 => "FP16",
            DType::F32 => "FP32",
            DType::F64 => "FP64",
            DType::Bf16 => "BF16",
            DType::Bytes => "BYTES",
        }
    }

    /// The type an Open Inference Protocol name stands for.
    pub fn from_oip_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.oip_name() == name)
    }

    /// Bytes per element in the protocol's binary form and in memory; `None` for BYTES, whose
    /// elements have their own lengths.
    pub fn byte_width(self) -> Option<usize> {
        match self {
            DType::Bool | DType::U8 | DType::I8 => Some(1),
            DType::U16 | DType::I16 | DType::F16 | DType::Bf16 => Some(2),
            DType::U32 | DType::I32 | DType::F32 => Some(4),
            DType::U64 | DType::I64 | DType::F64 => Some(8),
            DType::Bytes => None,
        }
    }

    /// Whether elements are IEEE or bfloat16 floats.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::F32 | DType::F64 | DType::Bf16)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Applies `$body` to the element vector of any [`TensorData`] (bound to `$v`), whatever its type.
#[macro_export]
macro_rules! with_elements {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::tensor::TensorData::Bool($v) => $body,
            $crate::tensor::TensorData::U8($v) => $body,
            $crate::tensor::TensorData::U16($v) => $body,
            $crate::tensor::TensorData::U32($v) => $body,
            $crate::tensor::TensorData::U64($v) => $body,
            $crate::tensor::TensorData::I8($v) => $body,
            $crate::tensor::TensorData::I16($v) => $body,
            $crate::tensor::TensorData::I32($v) => $body,
            $crate::tensor::TensorData::I64($v) => $body,
            $crate::tensor::TensorData::F16($v) => $body,
            $crate::tensor::TensorData::F32($v) => $body,
            $crate::tensor::TensorData::F64($v) => $body,
            $crate::tensor::TensorData::Bf16($v) => $body,
            $crate::tensor::TensorData::Bytes($v) => $body,
        }
    };
}

/// The elements of one tensor (or of several, back to back), row-major.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// `bool` elements.
    Bool(Vec<bool>),
    /// `u8` elements.
    U8(Vec<u8>),
    /// `u16` elements.
    U16(Vec<u16>),
    /// `u32` elements.
    U32(Vec<u32>),
    /// `u64` elements.
    U64(Vec<u64>),
    /// `i8` elements.
    I8(Vec<i8>),
    /// `i16` elements.
    I16(Vec<i16>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// IEEE half-precision elements.
    F16(Vec<f16>),
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// bfloat16 elements.
    Bf16(Vec<bf16>),
    /// Byte-string elements.
    Bytes(Vec<Vec<u8>>),
}

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            TensorData::Bool(_) => DType::Bool,
            TensorData::U8(_) => DType::U8,
            TensorData::U16(_) => DType::U16,
            TensorData::U32(_) => DType::U32,
            TensorData::U64(_) => DType::U64,
            TensorData::I8(_) => DType::I8,
            TensorData::I16(_) => DType::I16,
            TensorData::I32(_) => DType::I32,
            TensorData::I64(_) => DType::I64,
            TensorData::F16(_) => DType::F16,
            TensorData::F32(_) => DType::F32,
            TensorData::F64(_) => DType::F64,
            TensorData::Bf16(_) => DType::Bf16,
            TensorData::Bytes(_) => DType::Bytes,
        }
    }

    /// No elements of type `dtype`.
    pub fn empty(dtype: DType) -> Self {
        TensorData::zeros(dtype, 0)
    }

    /// `n` zero elements of type `dtype` (false, 0, +0.0, or empty byte strings).
    pub fn zeros(dtype: DType, n: usize) -> Self {
        match dtype {
            DType::Bool => TensorData::Bool(vec![false; n]),
            DType::U8 => TensorData::U8(vec![0; n]),
            DType::U16 => TensorData::U16(vec![0; n]),
            DType::U32 => TensorData::U32(vec![0; n]),
            DType::U64 => TensorData::U64(vec![0; n]),
            DType::I8 => TensorData::I8(vec![0; n]),
            DType::I16 => TensorData::I16(vec![0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::I64 => TensorData::I64(vec![0; n]),
            DType::F16 => TensorData::F16(vec![f16::ZERO; n]),
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::F64 => TensorData::F64(vec![0.0; n]),
            DType::Bf16 => TensorData::Bf16(vec![bf16::ZERO; n]),
            DType::Bytes => TensorData::Bytes(vec![Vec::new(); n]),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        with_elements!(self, v => v.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `other`'s elements.
    ///
    /// # Errors
    /// [`TypeMismatch`] when the element types differ (nothing is appended).
    pub fn extend(&mut self, other: TensorData) -> Result<(), TypeMismatch> {
        macro_rules! arms {
            ($($variant:ident),*) => {
                match (self, other) {
                    $((TensorData::$variant(a), TensorData::$variant(b)) => {
                        a.extend(b);
                        Ok(())
                    })*
                    (a, b) => Err(TypeMismatch {
                        expected: a.dtype(),
                        found: b.dtype(),
                    }),
                }
            };
        }
        arms!(Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes)
    }

    /// Elements `range` as a new value.
    ///
    /// # Panics
    /// When `range` is out of bounds (callers slice within a shape they checked).
    pub fn slice(&self, range: std::ops::Range<usize>) -> TensorData {
        macro_rules! arms {
            ($($variant:ident),*) => {
                match self {
                    $(TensorData::$variant(v) => TensorData::$variant(v[range].to_vec()),)*
                }
            };
        }
        arms!(Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes)
    }

    /// Bytes of memory the elements hold: their width each, and for BYTES each element's own
    /// vector besides its bytes (so a request of many short strings is charged what it costs,
    /// several times its text).
    pub fn heap_bytes(&self) -> usize {
        match self {
            TensorData::Bytes(v) => v.iter().fold(
                v.len().saturating_mul(std::mem::size_of::<Vec<u8>>()),
                |n, b| n.saturating_add(b.len()),
            ),
            other => other
                .len()
                .saturating_mul(other.dtype().byte_width().unwrap_or(1)),
        }
    }

    /// Appends the elements in the Open Inference Protocol's binary form: little-endian fixed
    /// widths (BOOL one byte), and each BYTES element as a 4-byte little-endian length and its
    /// bytes.
    ///
    /// # Panics
    /// When a BYTES element is 4 GiB or longer, which no request or reply weir accepts can hold.
    pub fn write_le(&self, out: &mut Vec<u8>) {
        macro_rules! le {
            ($v:expr) => {
                for x in $v {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            };
        }
        match self {
            TensorData::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
            TensorData::U8(v) => out.extend_from_slice(v),
            TensorData::U16(v) => le!(v),
            TensorData::U32(v) => le!(v),
            TensorData::U64(v) => le!(v),
            TensorData::I8(v) => le!(v),
            TensorData::I16(v) => le!(v),
            TensorData::I32(v) => le!(v),
            TensorData::I64(v) => le!(v),
            TensorData::F16(v) => le!(v),
            TensorData::F32(v) => le!(v),
            TensorData::F64(v) => le!(v),
            TensorData::Bf16(v) => le!(v),
            TensorData::Bytes(v) => {
                for b in v {
                    let len = u32::try_from(b.len()).expect("a BYTES element under 4 GiB");
                    out.extend_from_slice(&len.to_le_bytes());
                    out.extend_from_slice(b);
                }
            }
        }
    }

    /// Each element as an `f64`, for numeric types (BYTES gives `None`). Used by reports and
    /// comparisons that do not care about the element type; 64-bit integers beyond 2^53 round.
    pub fn to_f64_lossy(&self) -> Option<Vec<f64>> {
        Some(match self {
            TensorData::Bool(v) => v.iter().map(|&b| f64::from(u8::from(b))).collect(),
            TensorData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::F16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::F64(v) => v.clone(),
            TensorData::Bf16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            TensorData::Bytes(_) => return None,
        })
    }
}

/// Two tensors whose element types had to agree did not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("element type {found} where {expected} was expected")]
pub struct TypeMismatch {
    /// The type required.
    pub expected: DType,
    /// The type given.
    pub found: DType,
}

/// A fixed-width element type: its Rust type, and how it wraps into and out of [`TensorData`].
pub trait Element: Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The element type this Rust type stands for.
    const DTYPE: DType;
    /// Wraps a vector of elements.
    fn wrap(values: Vec<Self>) -> TensorData;
    /// The elements, when `data` holds this type.
    fn unwrap(data: &TensorData) -> Option<&[Self]>;
}

macro_rules! impl_element {
    ($($rust:ty => $variant:ident),* $(,)?) => {
        $(impl Element for $rust {
            const DTYPE: DType = DType::$variant;
            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
            fn unwrap(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
        })*
    };
}

impl_element!(
    bool => Bool, u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16,
    i32 => I32, i64 => I64, f16 => F16, f32 => F32, f64 => F64, bf16 => Bf16,
);

impl<T: Element> From<Vec<T>> for TensorData {
    fn from(values: Vec<T>) -> Self {
        T::wrap(values)
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
    /// Dimensions, outermost first. The element count is their product (1 for a scalar, `[]`).
    pub shape: Vec<usize>,
    /// Row-major elements.
    pub data: TensorData,
}

impl Tensor {
    /// A tensor of `shape` holding `data`.
    pub fn new(shape: Vec<usize>, data: impl Into<TensorData>) -> Self {
        Tensor {
            shape,
            data: data.into(),
        }
    }

    /// An `f32` tensor.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Tensor::new(shape, data)
    }

    /// An `i64` tensor.
    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Self {
        Tensor::new(shape, data)
    }

    /// A byte-string tensor.
    pub fn bytes(shape: Vec<usize>, data: Vec<Vec<u8>>) -> Self {
        Tensor {
            shape,
            data: TensorData::Bytes(data),
        }
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }

    /// The elements as `T`, if this tensor holds `T`.
    pub fn values<T: Element>(&self) -> Option<&[T]> {
        T::unwrap(&self.data)
    }

    /// The `f32` elements, if this is an `f32` tensor.
    pub fn as_f32(&self) -> Option<&[f32]> {
        self.values()
    }

    /// The `i64` elements, if this is an `i64` tensor.
    pub fn as_i64(&self) -> Option<&[i64]> {
        self.values()
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
