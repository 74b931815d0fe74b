//! How each element type is stored in Arrow, and the conversions between [`TensorData`] and an
//! Arrow values array.
//!
//! Every numeric type is a primitive array of its own width, so a column's elements are one
//! contiguous slice that ONNX Runtime can read in place. Two types have no Arrow primitive of
//! ONNX Runtime's layout and ride as their bits: BOOL as `UInt8` (one byte per element, as ONNX
//! Runtime holds it; Arrow's `Boolean` is bit-packed and would need a copy at every model call)
//! and BF16 as `UInt16` (Arrow has no bfloat16). BYTES is a `Binary` array, one element per
//! value. The tensor field's `weir.dtype` metadata names the logical type, so the two stand-ins
//! read back as what they are.

use std::sync::Arc;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, BinaryArray, PrimitiveArray};
use arrow_buffer::ScalarBuffer;
use arrow_schema::DataType;
use half::{bf16, f16};

use crate::tensor::{DType, Element, TensorData};

/// The Arrow type a column of `dtype` stores its elements as.
pub(crate) fn storage_type(dtype: DType) -> DataType {
    match dtype {
        DType::Bool | DType::U8 => DataType::UInt8,
        DType::U16 | DType::Bf16 => DataType::UInt16,
        DType::U32 => DataType::UInt32,
        DType::U64 => DataType::UInt64,
        DType::I8 => DataType::Int8,
        DType::I16 => DataType::Int16,
        DType::I32 => DataType::Int32,
        DType::I64 => DataType::Int64,
        DType::F16 => DataType::Float16,
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::Bytes => DataType::Binary,
    }
}

/// The element type an Arrow values array of `data_type` holds when the field does not say
/// (`weir.dtype` absent): the type whose storage it is, taking `UInt8` as u8 and `UInt16` as u16.
pub(crate) fn dtype_of_storage(data_type: &DataType) -> Option<DType> {
    Some(match data_type {
        DataType::UInt8 => DType::U8,
        DataType::UInt16 => DType::U16,
        DataType::UInt32 => DType::U32,
        DataType::UInt64 => DType::U64,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Float16 => DType::F16,
        DataType::Float32 => DType::F32,
        DataType::Float64 => DType::F64,
        DataType::Binary => DType::Bytes,
        _ => return None,
    })
}

/// An element type stored as its own Arrow primitive: its elements can be borrowed from a column.
pub trait NativeElement: Element + arrow_buffer::ArrowNativeType {
    /// The Arrow primitive type with `Self` as its native type.
    type Arrow: ArrowPrimitiveType<Native = Self>;
}

macro_rules! impl_native {
    ($($rust:ty => $arrow:ty),* $(,)?) => {
        $(impl NativeElement for $rust {
            type Arrow = $arrow;
        })*
    };
}

impl_native!(
    u8 => UInt8Type, u16 => UInt16Type, u32 => UInt32Type, u64 => UInt64Type, i8 => Int8Type,
    i16 => Int16Type, i32 => Int32Type, i64 => Int64Type, f16 => Float16Type, f32 => Float32Type,
    f64 => Float64Type,
);

/// The largest total byte length a BYTES column's values may have (Arrow `Binary` offsets are i32).
pub(crate) const MAX_BINARY_BYTES: usize = i32::MAX as usize;

/// `data` as an Arrow values array of `storage_type(data.dtype())`; `None` when a BYTES column
/// would hold more than [`MAX_BINARY_BYTES`].
pub(crate) fn values_array(data: TensorData) -> Option<ArrayRef> {
    // The vector becomes the array's buffer as it is: no copy on the fixed-shape path.
    fn prim<T: NativeElement>(v: Vec<T>) -> ArrayRef {
        Arc::new(PrimitiveArray::<T::Arrow>::new(ScalarBuffer::from(v), None))
    }
    Some(match data {
        TensorData::Bool(v) => prim(v.into_iter().map(u8::from).collect::<Vec<u8>>()),
        TensorData::U8(v) => prim(v),
        TensorData::U16(v) => prim(v),
        TensorData::U32(v) => prim(v),
        TensorData::U64(v) => prim(v),
        TensorData::I8(v) => prim(v),
        TensorData::I16(v) => prim(v),
        TensorData::I32(v) => prim(v),
        TensorData::I64(v) => prim(v),
        TensorData::F16(v) => prim(v),
        TensorData::F32(v) => prim(v),
        TensorData::F64(v) => prim(v),
        TensorData::Bf16(v) => prim(v.into_iter().map(bf16::to_bits).collect::<Vec<u16>>()),
        TensorData::Bytes(v) => {
            let total = v.iter().try_fold(0usize, |n, b| n.checked_add(b.len()))?;
            if total > MAX_BINARY_BYTES {
                return None;
            }
            Arc::new(BinaryArray::from_iter_values(v.iter()))
        }
    })
}

/// Elements `range` of `values` (an array of `storage_type(dtype)`) as [`TensorData`]; `None`
/// when the array is not of that storage type or the range is out of bounds.
pub(crate) fn read_values(
    dtype: DType,
    values: &dyn Array,
    range: std::ops::Range<usize>,
) -> Option<TensorData> {
    fn prim<T: NativeElement>(values: &dyn Array, range: std::ops::Range<usize>) -> Option<&[T]> {
        let a = values.as_any().downcast_ref::<PrimitiveArray<T::Arrow>>()?;
        a.values().get(range)
    }
    Some(match dtype {
        DType::Bool => {
            TensorData::Bool(prim::<u8>(values, range)?.iter().map(|&b| b != 0).collect())
        }
        DType::U8 => TensorData::U8(prim::<u8>(values, range)?.to_vec()),
        DType::U16 => TensorData::U16(prim::<u16>(values, range)?.to_vec()),
        DType::U32 => TensorData::U32(prim::<u32>(values, range)?.to_vec()),
        DType::U64 => TensorData::U64(prim::<u64>(values, range)?.to_vec()),
        DType::I8 => TensorData::I8(prim::<i8>(values, range)?.to_vec()),
        DType::I16 => TensorData::I16(prim::<i16>(values, range)?.to_vec()),
        DType::I32 => TensorData::I32(prim::<i32>(values, range)?.to_vec()),
        DType::I64 => TensorData::I64(prim::<i64>(values, range)?.to_vec()),
        DType::F16 => TensorData::F16(prim::<f16>(values, range)?.to_vec()),
        DType::F32 => TensorData::F32(prim::<f32>(values, range)?.to_vec()),
        DType::F64 => TensorData::F64(prim::<f64>(values, range)?.to_vec()),
        DType::Bf16 => TensorData::Bf16(
            prim::<u16>(values, range)?
                .iter()
                .map(|&b| bf16::from_bits(b))
                .collect(),
        ),
        DType::Bytes => {
            let a = values.as_any().downcast_ref::<BinaryArray>()?;
            if range.end > a.len() {
                return None;
            }
            TensorData::Bytes(range.map(|i| a.value(i).to_vec()).collect())
        }
    })
}

/// The elements of `values` as a `T` slice, when it is `T`'s primitive array.
pub(crate) fn native_values<T: NativeElement>(values: &dyn Array) -> Option<&[T]> {
    values
        .as_any()
        .downcast_ref::<PrimitiveArray<T::Arrow>>()
        .map(|a| a.values().as_ref())
}
