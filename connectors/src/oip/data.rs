//! One input's shape and tensor data, decoded with every size checked before it is allocated.
//!
//! The bounds all come from the request itself, never from a fixed number. The element count
//! is the product of the dimensions computed with `checked_mul` (an overflow is the shape's
//! fault), and it sizes nothing by itself: binary data must be exactly `count × width` bytes of
//! `binary_data_size`, which must lie in the body; JSON data preallocates at most one element
//! per byte of its text (every element takes at least one) and stops at the shape's count. A
//! shape whose product is 0 bounds nothing, so each of its dimensions must be at most the body's
//! length: no encoding of zero elements needs a dimension larger than the request, and whatever
//! later splits rows along such a dimension would allocate by it (`[2^40, 0]`).
//!
//! JSON data is parsed by a streaming visitor that flattens nested arrays straight into the typed
//! `Vec`, stopping as soon as the count passes the shape's, so a nested body never becomes a
//! `serde_json::Value` tree many times its size. Depth is bounded by serde_json's recursion limit.

use std::fmt;

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Number;
use weir_engine::tensor::{DType, TensorData};

use super::error::{perr, ProtocolError};
use crate::echo::quote;

/// Bytes per element in the binary extension.
pub(super) fn width(dtype: DType) -> usize {
    dtype.byte_width().unwrap_or(1)
}

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

/// One element type's conversions from JSON numbers, as the protocol reads them.
trait Element: Sized {
    fn from_f64(v: f64) -> Option<Self>;
    fn from_i64(v: i64) -> Option<Self>;
    fn from_u64(v: u64) -> Option<Self>;
    const WANTED: &'static str;
}

impl Element for f32 {
    fn from_f64(v: f64) -> Option<Self> {
        Some(v as f32)
    }
    fn from_i64(v: i64) -> Option<Self> {
        Some(v as f32)
    }
    fn from_u64(v: u64) -> Option<Self> {
        Some(v as f32)
    }
    const WANTED: &'static str = "a number";
}

impl Element for i64 {
    fn from_f64(_: f64) -> Option<Self> {
        None
    }
    fn from_i64(v: i64) -> Option<Self> {
        Some(v)
    }
    fn from_u64(v: u64) -> Option<Self> {
        i64::try_from(v).ok()
    }
    const WANTED: &'static str = "an integer";
}

/// Flattens a number or nested arrays of numbers into `out`, refusing element `cap + 1`.
struct Flatten<'a, T> {
    out: &'a mut Vec<T>,
    cap: usize,
}

impl<T: Element> Flatten<'_, T> {
    fn push<E: serde::de::Error>(self, v: Option<T>, shown: impl fmt::Display) -> Result<(), E> {
        let i = self.out.len();
        let v =
            v.ok_or_else(|| E::custom(format!("element {i} is `{shown}`, not {}", T::WANTED)))?;
        if i >= self.cap {
            return Err(E::custom(format!(
                "more than the shape's {} elements",
                self.cap
            )));
        }
        self.out.push(v);
        Ok(())
    }

    fn not_a_number<E: serde::de::Error>(self, what: &str) -> Result<(), E> {
        Err(E::custom(format!(
            "element {} is {what}, not {}",
            self.out.len(),
            T::WANTED
        )))
    }
}

impl<'de, T: Element> DeserializeSeed<'de> for Flatten<'_, T> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: Element> Visitor<'de> for Flatten<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or an array of numbers")
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
        self.push(T::from_f64(v), v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.push(T::from_i64(v), v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.push(T::from_u64(v), v)
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.not_a_number("a string")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.push(None, v)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.not_a_number("null")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.not_a_number("an object")
    }
}

fn flatten<T: Element>(raw: &RawValue, expected: usize) -> Result<Vec<T>, serde_json::Error> {
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

/// The elements of a JSON `data` value (a number, or arrays nested to any depth serde_json
/// allows), at most `expected` of them.
///
/// # Errors
/// A [`ProtocolError`] on `field` naming the first element that is not a number of `dtype`, or
/// saying the data holds more elements than the shape.
pub(super) fn json_data(
    raw: &RawValue,
    dtype: DType,
    expected: usize,
    field: &str,
) -> Result<TensorData, ProtocolError> {
    let data = match dtype {
        DType::F32 => flatten::<f32>(raw, expected).map(TensorData::F32),
        DType::I64 => flatten::<i64>(raw, expected).map(TensorData::I64),
        other => {
            return Err(perr(
                field,
                format!("{} is not accepted yet", other.oip_name()),
            ))
        }
    };
    data.map_err(|e| perr(field, quote(&e.to_string())))
}

/// The elements of `bytes` of binary data (little-endian, `dtype`'s width each).
///
/// # Errors
/// When `bytes` is not a whole number of elements.
pub(super) fn binary_data(
    bytes: &[u8],
    dtype: DType,
    field: &str,
) -> Result<TensorData, ProtocolError> {
    let width = width(dtype);
    if !bytes.len().is_multiple_of(width) {
        return Err(perr(
            field,
            format!(
                "{} bytes of binary data is not a whole number of {width}-byte elements",
                bytes.len()
            ),
        ));
    }
    Ok(match dtype {
        DType::F32 => TensorData::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::I64 => TensorData::I64(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        other => {
            return Err(perr(
                field,
                format!("{} is not accepted yet", other.oip_name()),
            ))
        }
    })
}
