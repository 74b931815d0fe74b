//! Inputs that arrive as parts (name, datatype, shape as integers, elements as raw bytes or as
//! typed values) instead of JSON text: how a protobuf transport (gRPC) hands its tensors to the
//! protocol core, so they pass the same checks as JSON and binary HTTP bodies.
//!
//! The shape goes through the same check as JSON shapes (`data::checked_shape`: no negative
//! dimension, no overflowing count, an empty shape's dimensions at most the request's size).
//! Raw bytes are decoded by the binary extension's decoder (`data::binary_data`: a fixed-width
//! type's bytes exactly `count × width`, every BYTES length checked against the bytes left).
//! Typed values are counted against the shape before any is converted, and integers go through
//! the same range rules as JSON integers (`element.rs`), so a 300 sent for UINT8 is refused the
//! same way on every transport. Typed floats are taken as sent: protobuf floats carry NaN and the
//! infinities natively, and a double is rounded to FP32 once, as JSON numbers are.

use serde_json::Number;
use weir_engine::tensor::{DType, TensorData};

use super::data;
use super::element::{for_dtype, OipElement, Scalar};
use super::error::{perr, ProtocolError};
use super::region::{RegionSlice, SharedInput};
use super::request::{parse_datatype, shared_input, InputTensor};

/// Typed element values, as a protobuf message carries them (one repeated field per kind).
#[derive(Debug, Clone, Copy)]
pub enum TypedValues<'a> {
    /// Booleans.
    Bool(&'a [bool]),
    /// 32-bit signed integers (INT8, INT16 and INT32 elements).
    Int32(&'a [i32]),
    /// 64-bit signed integers.
    Int64(&'a [i64]),
    /// 32-bit unsigned integers (UINT8, UINT16 and UINT32 elements).
    Uint32(&'a [u32]),
    /// 64-bit unsigned integers.
    Uint64(&'a [u64]),
    /// Single-precision floats.
    Fp32(&'a [f32]),
    /// Double-precision floats.
    Fp64(&'a [f64]),
    /// Byte strings (BYTES elements, any bytes).
    Bytes(&'a [Vec<u8>]),
}

impl TypedValues<'_> {
    /// How many values.
    pub fn len(&self) -> usize {
        match self {
            TypedValues::Bool(v) => v.len(),
            TypedValues::Int32(v) => v.len(),
            TypedValues::Int64(v) => v.len(),
            TypedValues::Uint32(v) => v.len(),
            TypedValues::Uint64(v) => v.len(),
            TypedValues::Fp32(v) => v.len(),
            TypedValues::Fp64(v) => v.len(),
            TypedValues::Bytes(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An input's elements, in one of the two forms a protobuf transport carries.
#[derive(Debug, Clone, Copy)]
pub enum InputContents<'a> {
    /// The binary extension's form: little-endian fixed widths, BYTES elements each after a
    /// 4-byte little-endian length.
    Raw(&'a [u8]),
    /// Typed values, flattened in row-major order.
    Typed(TypedValues<'a>),
}

/// One input given as parts: `field` names it in errors (`inputs[0] (x)`), `request_len` is the
/// size of the whole request in bytes (what bounds the dimensions of an empty shape).
///
/// # Errors
/// A [`ProtocolError`] naming `field.datatype`, `field.shape` or `field.contents` when the
/// datatype is unknown, the shape bad, or the elements do not fill it or are not values of the
/// datatype.
pub fn input_from_parts(
    field: &str,
    name: &str,
    datatype: &str,
    shape: &[i64],
    contents: InputContents<'_>,
    request_len: usize,
) -> Result<InputTensor, ProtocolError> {
    let dtype = parse_datatype(datatype, &format!("{field}.datatype"))?;
    let numbers: Vec<Number> = shape.iter().map(|&d| Number::from(d)).collect();
    let (shape, expected) = data::checked_shape(&numbers, request_len, &format!("{field}.shape"))?;
    let data = match contents {
        InputContents::Raw(bytes) => {
            data::binary_data(bytes, dtype, expected, &format!("{field}.contents (raw)"))?
        }
        InputContents::Typed(values) => {
            let at = format!("{field}.contents");
            if values.len() != expected {
                return Err(perr(
                    at,
                    format!(
                        "{} values, but shape {shape:?} needs {expected}",
                        values.len()
                    ),
                ));
            }
            typed(values, dtype).map_err(|m| perr(at, m))?
        }
    };
    Ok(InputTensor {
        name: name.to_string(),
        shape,
        data,
    })
}

/// Input `index`, given as parts, whose elements lie in the shared memory `slice`: the input,
/// empty until the transport reads it, and where it lies. `field` and `request_len` as in
/// [`input_from_parts`].
///
/// # Errors
/// A [`ProtocolError`] naming `field.datatype` or `field.shape`, or the byte size when it is not
/// the shape's.
pub fn shared_input_from_parts(
    index: usize,
    field: &str,
    name: &str,
    datatype: &str,
    shape: &[i64],
    slice: RegionSlice,
    request_len: usize,
) -> Result<(InputTensor, SharedInput), ProtocolError> {
    let dtype = parse_datatype(datatype, &format!("{field}.datatype"))?;
    let numbers: Vec<Number> = shape.iter().map(|&d| Number::from(d)).collect();
    let place = (index, slice, dtype);
    shared_input(place, name, &numbers, request_len, field)
}

/// The typed `values` as elements of `dtype`; integers are range-checked as JSON integers are.
fn typed(values: TypedValues<'_>, dtype: DType) -> Result<TensorData, String> {
    if values.is_empty() {
        return Ok(TensorData::empty(dtype));
    }
    match (values, dtype) {
        (TypedValues::Fp32(v), DType::F32) => Ok(TensorData::F32(v.to_vec())),
        (TypedValues::Fp64(v), DType::F64) => Ok(TensorData::F64(v.to_vec())),
        (TypedValues::Bytes(v), DType::Bytes) => Ok(TensorData::Bytes(v.to_vec())),
        (TypedValues::Bool(v), _) => scalars(v.iter().map(|&b| Scalar::Bool(b)), dtype),
        (TypedValues::Int32(v), _) => scalars(v.iter().map(|&i| Scalar::I64(i.into())), dtype),
        (TypedValues::Int64(v), _) => scalars(v.iter().map(|&i| Scalar::I64(i)), dtype),
        (TypedValues::Uint32(v), _) => scalars(v.iter().map(|&u| Scalar::U64(u.into())), dtype),
        (TypedValues::Uint64(v), _) => scalars(v.iter().map(|&u| Scalar::U64(u)), dtype),
        (TypedValues::Fp32(v), _) => scalars(v.iter().map(|&x| Scalar::F64(x.into())), dtype),
        (TypedValues::Fp64(v), _) => scalars(v.iter().map(|&x| Scalar::F64(x)), dtype),
        (TypedValues::Bytes(_), _) => {
            Err(format!("byte strings are not {} values", dtype.oip_name()))
        }
    }
}

fn scalars<'a>(
    values: impl ExactSizeIterator<Item = Scalar<'a>>,
    dtype: DType,
) -> Result<TensorData, String> {
    for_dtype!(dtype, T => convert::<T>(values).map(T::wrap))
}

fn convert<'a, T: OipElement>(
    values: impl ExactSizeIterator<Item = Scalar<'a>>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.enumerate() {
        out.push(T::from_json(v).map_err(|why| format!("element {i} is `{v}`: {why}"))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_typed_inputs_decode_alike() {
        let raw: Vec<u8> = [3i64, -4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = input_from_parts(
            "inputs[0] (x)",
            "x",
            "INT64",
            &[2],
            InputContents::Raw(&raw),
            64,
        )
        .unwrap();
        let b = input_from_parts(
            "inputs[0] (x)",
            "x",
            "INT64",
            &[2],
            InputContents::Typed(TypedValues::Int64(&[3, -4])),
            64,
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.data, TensorData::I64(vec![3, -4]));
    }

    #[test]
    fn bad_parts_name_their_field() {
        let cases: [(&str, &[i64], InputContents<'_>, &str); 5] = [
            (
                "FP8",
                &[1],
                InputContents::Raw(&[0]),
                "inputs[0] (x).datatype",
            ),
            (
                "FP32",
                &[-1],
                InputContents::Raw(&[]),
                "inputs[0] (x).shape",
            ),
            (
                "FP32",
                &[2],
                InputContents::Raw(&[0; 4]),
                "inputs[0] (x).contents (raw)",
            ),
            (
                "UINT8",
                &[1],
                InputContents::Typed(TypedValues::Uint32(&[300])),
                "inputs[0] (x).contents",
            ),
            (
                "INT32",
                &[3],
                InputContents::Typed(TypedValues::Int32(&[1, 2])),
                "inputs[0] (x).contents",
            ),
        ];
        for (dtype, shape, contents, field) in cases {
            let e = input_from_parts("inputs[0] (x)", "x", dtype, shape, contents, 64).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    #[test]
    fn typed_values_keep_nan_and_convert_small_integers() {
        let f = input_from_parts(
            "i",
            "x",
            "FP32",
            &[2],
            InputContents::Typed(TypedValues::Fp32(&[f32::NAN, f32::INFINITY])),
            8,
        )
        .unwrap();
        let TensorData::F32(v) = f.data else {
            panic!("FP32")
        };
        assert!(v[0].is_nan() && v[1].is_infinite());
        let u = input_from_parts(
            "i",
            "x",
            "UINT16",
            &[1],
            InputContents::Typed(TypedValues::Uint32(&[65535])),
            8,
        )
        .unwrap();
        assert_eq!(u.data, TensorData::U16(vec![65535]));
    }
}
