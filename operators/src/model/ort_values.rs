//! Conversions between weir's tensors and ONNX Runtime values, for every element type.
//!
//! A call's input is borrowed from its column whenever the column's storage is ONNX Runtime's
//! layout (every numeric type, and BF16 whose `u16` bits are reinterpreted in place), so the
//! fixed-shape path copies nothing. BOOL (stored one byte per element, which ONNX Runtime may
//! not be handed as `bool` without checking each byte) and BYTES (ONNX string tensors, which
//! ONNX Runtime copies into its own strings) are converted per call. ONNX strings are UTF-8
//! text: a BYTES element that is not UTF-8 fails the call, naming the node and the input.

use std::ops::Range;

use half::bf16;
use half::slice::HalfBitsSliceExt;
use ort::session::{SessionInputValue, SessionOutputs};
use ort::value::{Tensor, TensorRef};
use weir_engine::batch::{NativeElement, TensorColumn};
use weir_engine::tensor::{DType, Element, TensorData};

use super::ExecError;

/// One input of a call: elements borrowed from a column, or gathered into an owned buffer.
#[derive(Debug, Clone)]
pub(crate) enum CallInput<'a> {
    /// Elements `range` (as [`TensorColumn::row_range`] counts them) of a column.
    Column(&'a TensorColumn, Range<usize>),
    /// Elements gathered from several columns (or padded).
    Owned(TensorData),
}

fn borrowed<'a, T: NativeElement + ort::value::PrimitiveTensorElementType + std::fmt::Debug>(
    column: &'a TensorColumn,
    range: Range<usize>,
    shape: Vec<usize>,
) -> Result<SessionInputValue<'a>, String> {
    let values = column
        .storage_values::<T>()
        .and_then(|v| v.get(range))
        .ok_or_else(|| format!("{} column without its elements", column.dtype()))?;
    view(values, shape)
}

fn view<'a, T: ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone + 'static>(
    values: &'a [T],
    shape: Vec<usize>,
) -> Result<SessionInputValue<'a>, String> {
    Ok(TensorRef::from_array_view((shape, values))
        .map_err(|e| e.to_string())?
        .into())
}

fn strings(values: &[Vec<u8>], shape: Vec<usize>) -> Result<SessionInputValue<'static>, String> {
    let text = values
        .iter()
        .enumerate()
        .map(|(i, b)| {
            String::from_utf8(b.clone())
                .map_err(|_| format!("BYTES element {i} is not UTF-8 (ONNX strings are text)"))
        })
        .collect::<Result<Vec<String>, String>>()?;
    Ok(Tensor::from_string_array((shape, text.as_slice()))
        .map_err(|e| e.to_string())?
        .into())
}

/// `input` as an ONNX Runtime value of `shape` (batch dimension included when the model has one).
///
/// # Errors
/// A message (the caller adds the node and input) when ONNX Runtime refuses the value or a
/// BYTES element is not UTF-8.
pub(crate) fn input_value<'a>(
    input: &'a CallInput<'a>,
    shape: Vec<usize>,
) -> Result<SessionInputValue<'a>, String> {
    match input {
        CallInput::Column(c, range) => {
            let range = range.clone();
            match c.dtype() {
                DType::U8 => borrowed::<u8>(c, range, shape),
                DType::U16 => borrowed::<u16>(c, range, shape),
                DType::U32 => borrowed::<u32>(c, range, shape),
                DType::U64 => borrowed::<u64>(c, range, shape),
                DType::I8 => borrowed::<i8>(c, range, shape),
                DType::I16 => borrowed::<i16>(c, range, shape),
                DType::I32 => borrowed::<i32>(c, range, shape),
                DType::I64 => borrowed::<i64>(c, range, shape),
                DType::F16 => borrowed::<half::f16>(c, range, shape),
                DType::F32 => borrowed::<f32>(c, range, shape),
                DType::F64 => borrowed::<f64>(c, range, shape),
                DType::Bf16 => {
                    let bits = c
                        .storage_values::<u16>()
                        .and_then(|v| v.get(range))
                        .ok_or("bf16 column without its elements")?;
                    view::<bf16>(bits.reinterpret_cast(), shape)
                }
                DType::Bool => {
                    let bytes = c
                        .storage_values::<u8>()
                        .and_then(|v| v.get(range))
                        .ok_or("bool column without its elements")?;
                    let owned: Vec<bool> = bytes.iter().map(|&b| b != 0).collect();
                    Ok(Tensor::from_array((shape, owned))
                        .map_err(|e| e.to_string())?
                        .into())
                }
                DType::Bytes => match c.data_range(range) {
                    Some(TensorData::Bytes(v)) => strings(&v, shape),
                    _ => Err("bytes column without its elements".into()),
                },
            }
        }
        CallInput::Owned(data) => match data {
            TensorData::Bool(v) => view(v, shape),
            TensorData::U8(v) => view(v, shape),
            TensorData::U16(v) => view(v, shape),
            TensorData::U32(v) => view(v, shape),
            TensorData::U64(v) => view(v, shape),
            TensorData::I8(v) => view(v, shape),
            TensorData::I16(v) => view(v, shape),
            TensorData::I32(v) => view(v, shape),
            TensorData::I64(v) => view(v, shape),
            TensorData::F16(v) => view(v, shape),
            TensorData::F32(v) => view(v, shape),
            TensorData::F64(v) => view(v, shape),
            TensorData::Bf16(v) => view(v, shape),
            TensorData::Bytes(v) => strings(v, shape),
        },
    }
}

fn extract<T: Element + ort::value::PrimitiveTensorElementType + std::fmt::Debug + Clone>(
    value: &ort::value::DynValue,
) -> Result<(Vec<i64>, TensorData), ort::Error> {
    let (shape, v) = value.try_extract_tensor::<T>()?;
    Ok((shape.to_vec(), T::wrap(v.to_vec())))
}

/// Output `name` of a call on node `node`, read as `dtype`: its whole shape (rows first, when
/// the model has a batch dimension) and its elements.
///
/// # Errors
/// [`ExecError::Inference`] when the model returned no such output, or one of another type.
pub(crate) fn output_tensor(
    outputs: &SessionOutputs<'_>,
    name: &str,
    dtype: DType,
    node: &str,
) -> Result<(Vec<i64>, TensorData), ExecError> {
    let value = outputs.get(name).ok_or_else(|| ExecError::Inference {
        node: node.to_string(),
        message: format!("the model returned no output `{name}`"),
    })?;
    let wrap = |e: ort::Error| ExecError::Inference {
        node: node.to_string(),
        message: format!("output `{name}`: {e}"),
    };
    match dtype {
        DType::Bool => extract::<bool>(value),
        DType::U8 => extract::<u8>(value),
        DType::U16 => extract::<u16>(value),
        DType::U32 => extract::<u32>(value),
        DType::U64 => extract::<u64>(value),
        DType::I8 => extract::<i8>(value),
        DType::I16 => extract::<i16>(value),
        DType::I32 => extract::<i32>(value),
        DType::I64 => extract::<i64>(value),
        DType::F16 => extract::<half::f16>(value),
        DType::F32 => extract::<f32>(value),
        DType::F64 => extract::<f64>(value),
        DType::Bf16 => extract::<bf16>(value),
        DType::Bytes => value.try_extract_strings().map(|(shape, v)| {
            (
                shape.to_vec(),
                TensorData::Bytes(v.into_iter().map(String::into_bytes).collect()),
            )
        }),
    }
    .map_err(wrap)
}
