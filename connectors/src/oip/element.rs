//! How one element of each Open Inference Protocol datatype is read from, and written to, the
//! protocol's two encodings: a JSON value and the binary tensor data extension.
//!
//! One trait, [`OipElement`], is implemented for the fourteen Rust element types of
//! [`TensorData`] (`bool`, the integers, `f16`, `f32`, `f64`, `bf16`, and `Vec<u8>` for BYTES);
//! the decoders in `data.rs` and the reply writer in `reply.rs` are generic over it, and
//! `for_dtype!` picks the Rust type of a runtime [`DType`]. So every rule
//! below is written once, not once per datatype:
//!
//! - **Integers** take JSON integers within the type's range; a fraction, an exponent form
//!   (`2.5`, `1e3`: JSON numbers that are not integer literals) or a value out of range is
//!   refused, naming the range. Replies write them as JSON integers, the full `u64`/`i64` range
//!   included.
//! - **Floats** take any JSON number, read as a double and then rounded once, to nearest with
//!   ties to even, into the declared type, as IEEE 754 conversion does. FP16 and BF16 round in a
//!   single step: the double is first narrowed to `f32` *rounding to odd* (24 bits, more than
//!   FP16's 11 + 2 and BF16's 8 + 2 over the whole range of both), which makes the second rounding
//!   to nearest-even exact (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums:
//!   proved algorithms using rounding to odd", §3). A finite number that would round to an
//!   infinity (past the type's largest finite value) is refused. JSON has no NaN or infinities:
//!   the strings `"NaN"`, `"Infinity"` and `"-Infinity"` stand for them both ways, as numpy (and
//!   so `tritonclient`'s `as_numpy`) reads them. Replies write every float as the exact value of
//!   the element widened to a double (the shortest text that reads back as that double).
//! - **BOOL** takes JSON `true`/`false` (and, in binary, the bytes 0 and 1 only).
//! - **BYTES** takes JSON strings, as their UTF-8 bytes; replies write them back as strings. An
//!   element that is not UTF-8 has no JSON form: the reply refuses it and says to ask for the
//!   output as binary data, which is how Triton's clients receive arbitrary bytes (base64 would
//!   turn them into text indistinguishable from a real string). In binary each element is a
//!   4-byte little-endian length followed by that many bytes, every length checked against the
//!   bytes that remain before anything is copied.
//! - **Fixed-width types** are little-endian in binary, `DType::byte_width` bytes each.
//!
//! Writing binary is the engine's [`TensorData::write_le`] (the same form the engine uses
//! elsewhere); this file reads it back and says which elements it cannot write.

use std::fmt;

use half::{bf16, f16};
use serde::ser::Error as _;
use serde::Serializer;
use weir_engine::tensor::{DType, TensorData};

use crate::echo::quote;

/// One JSON scalar of `data`, as the parser saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Scalar<'a> {
    /// `true` or `false`.
    Bool(bool),
    /// A negative integer literal.
    I64(i64),
    /// A non-negative integer literal.
    U64(u64),
    /// A number with a fraction or an exponent.
    F64(f64),
    /// A string.
    Str(&'a str),
}

impl fmt::Display for Scalar<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::I64(i) => write!(f, "{i}"),
            Scalar::U64(u) => write!(f, "{u}"),
            Scalar::F64(x) => write!(f, "{x}"),
            Scalar::Str(s) => write!(f, "\"{}\"", quote(s)),
        }
    }
}

/// Why an element could not be written in the encoding asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EncodeFault {
    /// A BYTES element that is not UTF-8, asked for as JSON.
    NotUtf8,
    /// A BYTES element longer than a 4-byte length can state.
    TooLong(usize),
}

/// An element type of the protocol: how one element reads from and writes to JSON and binary.
pub(super) trait OipElement: Sized {
    /// The datatype.
    const DTYPE: DType;
    /// Fewest bytes one element takes in binary (its width; 4 for a BYTES length prefix).
    const MIN_BINARY_BYTES: usize;

    /// The element a JSON scalar stands for, or why it stands for none.
    fn from_json(v: Scalar<'_>) -> Result<Self, String>;

    /// Takes one element off the front of `rest`, or says why the bytes there are not one.
    fn take_binary(rest: &mut &[u8]) -> Result<Self, String>;

    /// Appends the little-endian elements `bytes` holds to `out` in one pass (a loop the compiler
    /// turns into a vectorised copy), when every bit pattern of the type's width is an element
    /// and `bytes` is a whole number of them; `false`, appending nothing, otherwise. BOOL (a
    /// byte other than 0 or 1 is refused) and BYTES (lengths to check) are read element by
    /// element with [`OipElement::take_binary`].
    fn extend_le(_out: &mut Vec<Self>, _bytes: &[u8]) -> bool {
        false
    }

    /// Why the element has no JSON form, if it has none (every type but BYTES always has one).
    fn json_fault(&self) -> Option<EncodeFault> {
        None
    }

    /// Why the element has no binary form, if it has none (every type but BYTES always has one;
    /// the form itself is [`TensorData::write_le`]'s).
    fn binary_fault(&self) -> Option<EncodeFault> {
        None
    }

    /// Writes the element as a JSON value (callers check [`OipElement::json_fault`] first).
    fn write_json<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error>;

    /// Wraps elements of this type.
    fn wrap(values: Vec<Self>) -> TensorData;
}

/// Runs `$body` with `$t` bound to the Rust element type of `$dtype`.
macro_rules! for_dtype {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            weir_engine::tensor::DType::Bool => {
                type $t = bool;
                $body
            }
            weir_engine::tensor::DType::U8 => {
                type $t = u8;
                $body
            }
            weir_engine::tensor::DType::U16 => {
                type $t = u16;
                $body
            }
            weir_engine::tensor::DType::U32 => {
                type $t = u32;
                $body
            }
            weir_engine::tensor::DType::U64 => {
                type $t = u64;
                $body
            }
            weir_engine::tensor::DType::I8 => {
                type $t = i8;
                $body
            }
            weir_engine::tensor::DType::I16 => {
                type $t = i16;
                $body
            }
            weir_engine::tensor::DType::I32 => {
                type $t = i32;
                $body
            }
            weir_engine::tensor::DType::I64 => {
                type $t = i64;
                $body
            }
            weir_engine::tensor::DType::F16 => {
                type $t = half::f16;
                $body
            }
            weir_engine::tensor::DType::F32 => {
                type $t = f32;
                $body
            }
            weir_engine::tensor::DType::F64 => {
                type $t = f64;
                $body
            }
            weir_engine::tensor::DType::Bf16 => {
                type $t = half::bf16;
                $body
            }
            weir_engine::tensor::DType::Bytes => {
                type $t = Vec<u8>;
                $body
            }
        }
    };
}
pub(super) use for_dtype;

/// Takes `N` bytes off the front of `rest`.
fn take_le<const N: usize>(rest: &mut &[u8]) -> Result<[u8; N], String> {
    let Some((head, tail)) = rest.split_first_chunk::<N>() else {
        return Err(format!(
            "{} bytes left, fewer than one {N}-byte element",
            rest.len()
        ));
    };
    *rest = tail;
    Ok(*head)
}

/// Appends the `N`-byte little-endian elements of `bytes` to `out` when `bytes` is a whole
/// number of them. `chunks_exact` is a trusted length, so `out` grows once and the loop has no
/// per-element checks left.
fn extend_from_le<const N: usize, T>(
    out: &mut Vec<T>,
    bytes: &[u8],
    from_le: impl Fn([u8; N]) -> T,
) -> bool {
    if !bytes.len().is_multiple_of(N) {
        return false;
    }
    out.extend(bytes.chunks_exact(N).map(|c| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        from_le(a)
    }));
    true
}

impl OipElement for bool {
    const DTYPE: DType = DType::Bool;
    const MIN_BINARY_BYTES: usize = 1;

    fn from_json(v: Scalar<'_>) -> Result<Self, String> {
        match v {
            Scalar::Bool(b) => Ok(b),
            _ => Err("not true or false".into()),
        }
    }

    fn take_binary(rest: &mut &[u8]) -> Result<Self, String> {
        match take_le::<1>(rest)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [b] => Err(format!("byte {b} is neither 0 (false) nor 1 (true)")),
        }
    }

    fn write_json<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(*self)
    }

    fn wrap(values: Vec<Self>) -> TensorData {
        TensorData::Bool(values)
    }
}

macro_rules! integers {
    ($($t:ty => $variant:ident, $write:ident;)*) => {$(
        impl OipElement for $t {
            const DTYPE: DType = DType::$variant;
            const MIN_BINARY_BYTES: usize = std::mem::size_of::<$t>();

            fn from_json(v: Scalar<'_>) -> Result<Self, String> {
                let fits = match v {
                    Scalar::I64(i) => <$t>::try_from(i).ok(),
                    Scalar::U64(u) => <$t>::try_from(u).ok(),
                    Scalar::F64(_) => {
                        return Err(format!("not an integer literal, as {} needs", Self::DTYPE.oip_name()))
                    }
                    Scalar::Bool(_) | Scalar::Str(_) => return Err("not a number".into()),
                };
                fits.ok_or_else(|| {
                    format!(
                        "outside {}'s range {}..={}",
                        Self::DTYPE.oip_name(),
                        <$t>::MIN,
                        <$t>::MAX
                    )
                })
            }

            fn take_binary(rest: &mut &[u8]) -> Result<Self, String> {
                take_le(rest).map(<$t>::from_le_bytes)
            }

            fn extend_le(out: &mut Vec<Self>, bytes: &[u8]) -> bool {
                extend_from_le::<{ std::mem::size_of::<$t>() }, $t>(out, bytes, <$t>::from_le_bytes)
            }

            fn write_json<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.$write(*self)
            }

            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
        }
    )*};
}

integers! {
    u8 => U8, serialize_u8;
    u16 => U16, serialize_u16;
    u32 => U32, serialize_u32;
    u64 => U64, serialize_u64;
    i8 => I8, serialize_i8;
    i16 => I16, serialize_i16;
    i32 => I32, serialize_i32;
    i64 => I64, serialize_i64;
}

/// The double a JSON scalar stands for in a float tensor.
fn json_double(v: Scalar<'_>) -> Result<f64, String> {
    match v {
        Scalar::F64(x) => Ok(x),
        Scalar::I64(i) => Ok(i as f64),
        Scalar::U64(u) => Ok(u as f64),
        Scalar::Str("NaN") => Ok(f64::NAN),
        Scalar::Str("Infinity") => Ok(f64::INFINITY),
        Scalar::Str("-Infinity") => Ok(f64::NEG_INFINITY),
        Scalar::Str(_) => Err("a string other than \"NaN\", \"Infinity\", \"-Infinity\"".into()),
        Scalar::Bool(_) => Err("not a number".into()),
    }
}

/// `x` rounded to an `f32` toward zero, with the last bit set when inexact ("rounding to odd").
fn f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if !x.is_finite() || f64::from(nearest) == x {
        return nearest;
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > x.abs() {
        // Nearest rounded away from zero (to an infinity, at worst): step back one unit.
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `x` rounded to nearest-even into a float type, refused when a finite `x` overflows it.
fn narrow<T>(
    x: f64,
    round: impl FnOnce(f64) -> T,
    is_infinite: impl Fn(&T) -> bool,
) -> Result<T, String>
where
    T: OipElement,
{
    let y = round(x);
    if x.is_finite() && is_infinite(&y) {
        return Err(format!(
            "beyond {}'s largest finite value",
            T::DTYPE.oip_name()
        ));
    }
    Ok(y)
}

/// Writes a float (widened exactly to a double) as JSON: a number, or the string for a NaN or an
/// infinity.
fn write_double<S: Serializer>(x: f64, s: S) -> Result<S::Ok, S::Error> {
    if x.is_nan() {
        s.serialize_str("NaN")
    } else if x.is_infinite() {
        s.serialize_str(if x > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        s.serialize_f64(x)
    }
}

macro_rules! floats {
    ($($t:ty => $variant:ident, $round:expr;)*) => {$(
        impl OipElement for $t {
            const DTYPE: DType = DType::$variant;
            const MIN_BINARY_BYTES: usize = std::mem::size_of::<$t>();

            fn from_json(v: Scalar<'_>) -> Result<Self, String> {
                narrow(json_double(v)?, $round, |y: &$t| y.is_infinite())
            }

            fn take_binary(rest: &mut &[u8]) -> Result<Self, String> {
                take_le(rest).map(<$t>::from_le_bytes)
            }

            fn extend_le(out: &mut Vec<Self>, bytes: &[u8]) -> bool {
                extend_from_le::<{ std::mem::size_of::<$t>() }, $t>(out, bytes, <$t>::from_le_bytes)
            }

            fn write_json<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                write_double(f64::from(*self), s)
            }

            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
        }
    )*};
}

floats! {
    f16 => F16, |x| f16::from_f32(f32_round_to_odd(x));
    f32 => F32, |x| x as f32;
    f64 => F64, |x| x;
    bf16 => Bf16, |x| bf16::from_f32(f32_round_to_odd(x));
}

impl OipElement for Vec<u8> {
    const DTYPE: DType = DType::Bytes;
    const MIN_BINARY_BYTES: usize = 4;

    fn from_json(v: Scalar<'_>) -> Result<Self, String> {
        match v {
            Scalar::Str(s) => Ok(s.as_bytes().to_vec()),
            _ => Err("not a string".into()),
        }
    }

    fn take_binary(rest: &mut &[u8]) -> Result<Self, String> {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(format!(
                "{} bytes left, too few for a 4-byte length",
                rest.len()
            ));
        };
        let len = u32::from_le_bytes(*len);
        let Some((bytes, tail)) = usize::try_from(len)
            .ok()
            .and_then(|n| (n <= tail.len()).then(|| tail.split_at(n)))
        else {
            return Err(format!(
                "length {len} passes the {} bytes left after it",
                tail.len()
            ));
        };
        *rest = tail;
        Ok(bytes.to_vec())
    }

    fn json_fault(&self) -> Option<EncodeFault> {
        std::str::from_utf8(self)
            .err()
            .map(|_| EncodeFault::NotUtf8)
    }

    fn binary_fault(&self) -> Option<EncodeFault> {
        u32::try_from(self.len())
            .is_err()
            .then_some(EncodeFault::TooLong(self.len()))
    }

    fn write_json<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(self) {
            Ok(text) => s.serialize_str(text),
            Err(_) => Err(S::Error::custom("a BYTES element is not UTF-8")),
        }
    }

    fn wrap(values: Vec<Self>) -> TensorData {
        TensorData::Bytes(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json<T: OipElement>(v: Scalar<'_>) -> Result<T, String> {
        T::from_json(v)
    }

    #[test]
    fn integers_are_range_checked_and_never_fractions() {
        assert_eq!(json::<u8>(Scalar::U64(255)), Ok(255));
        assert_eq!(
            json::<u8>(Scalar::U64(256)).unwrap_err(),
            "outside UINT8's range 0..=255"
        );
        assert_eq!(
            json::<i8>(Scalar::I64(-129)).unwrap_err(),
            "outside INT8's range -128..=127"
        );
        assert!(json::<u16>(Scalar::I64(-1)).is_err());
        assert_eq!(json::<u64>(Scalar::U64(u64::MAX)), Ok(u64::MAX));
        assert_eq!(json::<i64>(Scalar::I64(i64::MIN)), Ok(i64::MIN));
        assert!(json::<i64>(Scalar::U64(1 << 63)).is_err());
        assert!(json::<i32>(Scalar::F64(2.5))
            .unwrap_err()
            .contains("not an integer literal"));
        assert!(json::<i32>(Scalar::Bool(true)).is_err());
        assert!(json::<bool>(Scalar::U64(1)).is_err());
    }

    #[test]
    fn floats_round_to_nearest_even_once_and_refuse_overflow() {
        // 1 + 2^-11 is halfway between FP16's 1 and 1 + 2^-10: ties to even, down to 1.
        assert_eq!(json::<f16>(Scalar::F64(1.0 + 2f64.powi(-11))), Ok(f16::ONE));
        // Just above the halfway point, by less than an f32 can hold: it must round up, which
        // narrowing through a nearest f32 first would get wrong.
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(
            json::<f16>(Scalar::F64(above)),
            Ok(f16::from_bits(f16::ONE.to_bits() + 1))
        );
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(
            json::<bf16>(Scalar::F64(above)),
            Ok(bf16::from_bits(bf16::ONE.to_bits() + 1))
        );
        assert_eq!(json::<f16>(Scalar::U64(65504)), Ok(f16::MAX));
        // 65520 is halfway between FP16's largest finite value and the next power of two.
        assert!(json::<f16>(Scalar::U64(65520))
            .unwrap_err()
            .contains("FP16"));
        assert!(json::<f32>(Scalar::F64(1e39)).unwrap_err().contains("FP32"));
        assert!(json::<bf16>(Scalar::F64(-1e39)).is_err());
        assert_eq!(json::<f32>(Scalar::Str("-Infinity")), Ok(f32::NEG_INFINITY));
        assert!(json::<f64>(Scalar::Str("NaN")).unwrap().is_nan());
        assert!(json::<f64>(Scalar::Str("nan")).is_err());
        // Tiny values go to a signed zero, not to an error.
        assert_eq!(
            json::<f16>(Scalar::F64(-1e-300)).map(|x| x.to_bits()),
            Ok(0x8000)
        );
    }

    #[test]
    fn round_to_odd_keeps_the_sticky_bit() {
        let x = 1.0 + 2f64.powi(-30);
        let y = f32_round_to_odd(x);
        assert_eq!(y.to_bits(), 1.0f32.to_bits() | 1);
        assert_eq!(f32_round_to_odd(1e300), f32::MAX);
        assert_eq!(f32_round_to_odd(-1e300), f32::MIN);
        assert_eq!(f32_round_to_odd(1e-300).to_bits(), 1);
        assert_eq!(f32_round_to_odd(0.5), 0.5);
    }

    #[test]
    fn bytes_lengths_are_checked_before_copying() {
        let mut rest: &[u8] = &[2, 0, 0, 0, b'h', b'i', 9];
        assert_eq!(Vec::<u8>::take_binary(&mut rest), Ok(b"hi".to_vec()));
        assert_eq!(rest, &[9]);
        let mut rest: &[u8] = &[255, 255, 255, 255, 1, 2];
        assert!(Vec::<u8>::take_binary(&mut rest)
            .unwrap_err()
            .contains("length 4294967295 passes the 2 bytes left"));
        let mut rest: &[u8] = &[1, 0];
        assert!(Vec::<u8>::take_binary(&mut rest).is_err());
        let mut rest: &[u8] = &[2];
        assert!(bool::take_binary(&mut rest).unwrap_err().contains("byte 2"));
    }
}
