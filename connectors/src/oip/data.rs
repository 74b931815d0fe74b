//! One input's shape and tensor data, decoded with every size checked before it is allocated.
//! What each datatype's elements may be, and how they are written, is `element.rs`; this file
//! walks the encodings and holds the sizes.
//!
//! The bounds all come from the request itself, never from a fixed number. The element count
//! is the product of the dimensions computed with `checked_mul` (an overflow is the shape's
//! fault), and it sizes nothing by itself. Binary data lies within its `binary_data_size`, which
//! must lie in the body: a fixed-width type's must be exactly `count × width` bytes; a BYTES
//! element's 4-byte length is checked against the bytes left before the element is copied, and
//! the elements must end exactly at the size and number exactly the count. Either way at most one
//! element is reserved per `MIN_BINARY_BYTES` of the data. JSON data preallocates at most one
//! element per byte of its text (every element takes at least one) and stops at the shape's
//! count. A shape whose product is 0 bounds nothing, so each of its dimensions must be at most
//! the body's length: no encoding of zero elements needs a dimension larger than the request, and
//! whatever later splits rows along such a dimension would allocate by it (`[2^40, 0]`). A shape
//! of no dimensions (`[]`) is a scalar: one element, written as a bare value or in an array.
//!
//! JSON data is parsed by a streaming visitor that flattens nested arrays straight into the typed
//! `Vec`, stopping as soon as the count passes the shape's, so a nested body never becomes a
//! `serde_json::Value` tree many times its size. Depth is bounded by serde_json's recursion limit.

use std::fmt;

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Number;
use weir_engine::tensor::{DType, TensorData};

use super::element::{for_dtype, OipElement, Scalar};
use super::error::{perr, ProtocolError};
use crate::echo::quote;

/// A shape as the client wrote it, for messages: `[64, 3]`, cut short when long.
pub(super) fn shown(shape: &[Number]) -> String {
    let dims: Vec<String> = shape.iter().map(Number::to_string).collect();
    quote(&format!("[{}]", dims.join(", "))).into_owned()
}

/// The shape as sizes and its element count; when the count is 0, every dimension is at most
/// `body_len`.
///
/// # Errors
/// A [`ProtocolError`] on `field` for a negative or non-integer dimension, a count that
/// overflows, or a dimension of an empty shape past `body_len`.
pub(super) fn checked_shape(
    shape: &[Number],
    body_len: usize,
    field: &str,
) -> Result<(Vec<usize>, usize), ProtocolError> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut count = 1usize;
    for d in shape {
        let dim = match (d.as_u64(), d.as_i64()) {
            (Some(u), _) => usize::try_from(u).ok(),
            (None, Some(i)) => return Err(perr(field, format!("dimension {i} is negative"))),
            (None, None) => {
                return Err(perr(field, format!("dimension {d} is not an integer")));
            }
        };
        let dim =
            dim.ok_or_else(|| perr(field, format!("dimension {d} does not fit this machine")))?;
        count = count.checked_mul(dim).ok_or_else(|| {
            perr(
                field,
                format!("the element count of {} overflows", shown(shape)),
            )
        })?;
        dims.push(dim);
    }
    if count == 0 {
        if let Some(d) = dims.iter().find(|&&d| d > body_len) {
            return Err(perr(
                field,
                format!(
                    "dimension {d} of the empty shape {} passes the body's {body_len} bytes",
                    shown(shape)
                ),
            ));
        }
    }
    Ok((dims, count))
}

/// Flattens a scalar or nested arrays of scalars into `out`, refusing element `cap + 1`.
struct Flatten<'a, T> {
    out: &'a mut Vec<T>,
    cap: usize,
}

impl<T: OipElement> Flatten<'_, T> {
    fn push<E: serde::de::Error>(self, v: Scalar<'_>) -> Result<(), E> {
        let i = self.out.len();
        let element =
            T::from_json(v).map_err(|why| E::custom(format!("element {i} is `{v}`: {why}")))?;
        if i >= self.cap {
            return Err(E::custom(format!(
                "more than the shape's {} elements",
                self.cap
            )));
        }
        self.out.push(element);
        Ok(())
    }

    fn not_a_scalar<E: serde::de::Error>(self, what: &str) -> Result<(), E> {
        Err(E::custom(format!(
            "element {} is {what}, not a {} value",
            self.out.len(),
            T::DTYPE.oip_name()
        )))
    }
}

impl<'de, T: OipElement> DeserializeSeed<'de> for Flatten<'_, T> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: OipElement> Visitor<'de> for Flatten<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {} value or an array of them", T::DTYPE.oip_name())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let cap = self.cap;
        while seq
            .next_element_seed(Flatten {
                out: &mut *self.out,
                cap,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        self.push(Scalar::F64(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.push(Scalar::I64(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.push(Scalar::U64(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.push(Scalar::Str(v))
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.push(Scalar::Bool(v))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.not_a_scalar("null")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.not_a_scalar("an object")
    }
}

fn flatten<T: OipElement>(raw: &RawValue, expected: usize) -> Result<Vec<T>, serde_json::Error> {
    // Every element takes at least a byte of the text: never reserve past that.
    let mut out = Vec::with_capacity(expected.min(raw.get().len()));
    let mut de = serde_json::Deserializer::from_str(raw.get());
    Flatten {
        out: &mut out,
        cap: expected,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(out)
}

/// The elements of a JSON `data` value (a scalar, or arrays nested to any depth serde_json
/// allows), at most `expected` of them.
///
/// # Errors
/// A [`ProtocolError`] on `field` naming the first element that is not a value of `dtype` (with
/// its index and text), or saying the data holds more elements than the shape.
pub(super) fn json_data(
    raw: &RawValue,
    dtype: DType,
    expected: usize,
    field: &str,
) -> Result<TensorData, ProtocolError> {
    for_dtype!(dtype, T => flatten::<T>(raw, expected).map(T::wrap))
        .map_err(|e| perr(field, quote(&e.to_string())))
}

/// The `expected` elements of `bytes` of binary data, which must hold exactly those.
///
/// # Errors
/// A [`ProtocolError`] on `field` when the bytes are not exactly `expected` elements of `dtype`:
/// too few or too many bytes, a BYTES length past the bytes left, a BOOL byte other than 0 or 1.
pub(super) fn binary_data(
    bytes: &[u8],
    dtype: DType,
    expected: usize,
    field: &str,
) -> Result<TensorData, ProtocolError> {
    for_dtype!(dtype, T => binary::<T>(bytes, expected).map(T::wrap)).map_err(|m| perr(field, m))
}

fn binary<T: OipElement>(mut rest: &[u8], expected: usize) -> Result<Vec<T>, String> {
    // Every element takes at least `MIN_BINARY_BYTES` of the data: never reserve past that.
    let mut out = Vec::with_capacity(expected.min(rest.len() / T::MIN_BINARY_BYTES));
    // Exactly the shape's elements of a type every bit pattern of which is one: a single pass.
    if expected.checked_mul(T::MIN_BINARY_BYTES) == Some(rest.len()) && T::extend_le(&mut out, rest)
    {
        return Ok(out);
    }
    while !rest.is_empty() {
        if out.len() == expected {
            return Err(format!(
                "{} bytes remain after the shape's {expected} elements",
                rest.len()
            ));
        }
        let i = out.len();
        out.push(T::take_binary(&mut rest).map_err(|why| format!("element {i}: {why}"))?);
    }
    if out.len() != expected {
        return Err(format!(
            "{} elements, but the shape needs {expected}",
            out.len()
        ));
    }
    Ok(out)
}
