//! The values an ONNX file holds for its overridable initializers: graph inputs that also have an
//! initializer (IR 4 and later). ONNX Runtime runs a call that leaves such an input out with the
//! file's value, and one that gives it with the call's; weir reads the value so that a graph
//! input marked `optional` can be filled with it when a request leaves it out.
//!
//! The messages below declare `TensorProto`'s value fields (numbers of `onnx/onnx.proto`);
//! `raw_data` is a [`Bytes`] so decoding from the file's buffer slices it instead of copying every
//! weight. A value is read only for the initializers asked for, and every length is checked
//! against the element count its dims give before a vector is built, so a hostile file gets an
//! error, not an allocation of the size it claims.

use prost::bytes::Bytes;
use prost::Message;

use super::element_type;
use super::ElementType;
use crate::tensor::{DType, Tensor, TensorData};

#[derive(Clone, PartialEq, Message)]
struct ModelProto {
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
struct GraphProto {
    #[prost(message, repeated, tag = "5")]
    initializer: Vec<InitializerProto>,
}

#[derive(Clone, PartialEq, Message)]
struct InitializerProto {
    #[prost(int64, repeated, tag = "1")]
    dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(float, repeated, tag = "4")]
    float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    int32_data: Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    string_data: Vec<Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    name: String,
    #[prost(bytes = "bytes", tag = "9")]
    raw_data: Bytes,
    #[prost(double, repeated, tag = "10")]
    double_data: Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    uint64_data: Vec<u64>,
    #[prost(message, repeated, tag = "13")]
    external_data: Vec<StringStringEntry>,
    #[prost(int32, tag = "14")]
    data_location: i32,
}

#[derive(Clone, PartialEq, Message)]
struct StringStringEntry {
    #[prost(string, tag = "1")]
    key: String,
}

/// The value of each initializer of `model` named in `names`, in that order: the tensor, or why
/// it cannot be read.
///
/// # Errors
/// When `model` is not an ONNX `ModelProto`.
pub(super) fn initializer_values(
    model: Bytes,
    names: &[&str],
) -> Result<Vec<Result<Tensor, String>>, String> {
    let decoded = ModelProto::decode(model).map_err(|e| e.to_string())?;
    let initializers = decoded.graph.map(|g| g.initializer).unwrap_or_default();
    Ok(names
        .iter()
        .map(|name| {
            initializers
                .iter()
                .find(|t| t.name == *name)
                .map_or_else(|| Err("no initializer of that name".into()), value)
        })
        .collect())
}

/// The tensor `t` holds.
fn value(t: &InitializerProto) -> Result<Tensor, String> {
    if t.data_location == 1 || !t.external_data.is_empty() {
        return Err("its value is stored outside the model file (external data)".into());
    }
    let dtype = match element_type(t.data_type) {
        ElementType::Supported(d) => d,
        _ => {
            return Err(format!(
                "its ONNX element type {} has no Open Inference Protocol datatype",
                t.data_type
            ))
        }
    };
    let shape = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("dimension {d} is negative")))
        .collect::<Result<Vec<usize>, String>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or("its dims overflow an element count")?;
    let data = if t.raw_data.is_empty() {
        typed(t, dtype, count)?
    } else {
        raw(&t.raw_data, dtype, count)?
    };
    Ok(Tensor::new(shape, data))
}

/// `count` elements of `dtype` from the little-endian bytes of `raw_data`.
fn raw(bytes: &[u8], dtype: DType, count: usize) -> Result<TensorData, String> {
    let width = dtype
        .byte_width()
        .ok_or("a string tensor cannot be stored as raw data")?;
    let want = count
        .checked_mul(width)
        .ok_or("its dims overflow a byte count")?;
    if bytes.len() != want {
        return Err(format!(
            "raw data of {} bytes for {count} elements of {dtype}",
            bytes.len()
        ));
    }
    macro_rules! le {
        ($t:ty) => {
            bytes
                .chunks_exact(std::mem::size_of::<$t>())
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect::<Vec<$t>>()
        };
    }
    Ok(match dtype {
        DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        DType::U8 => TensorData::U8(bytes.to_vec()),
        DType::I8 => TensorData::I8(le!(i8)),
        DType::U16 => TensorData::U16(le!(u16)),
        DType::I16 => TensorData::I16(le!(i16)),
        DType::U32 => TensorData::U32(le!(u32)),
        DType::I32 => TensorData::I32(le!(i32)),
        DType::U64 => TensorData::U64(le!(u64)),
        DType::I64 => TensorData::I64(le!(i64)),
        DType::F32 => TensorData::F32(le!(f32)),
        DType::F64 => TensorData::F64(le!(f64)),
        DType::F16 => TensorData::F16(le!(u16).into_iter().map(half::f16::from_bits).collect()),
        DType::Bf16 => TensorData::Bf16(le!(u16).into_iter().map(half::bf16::from_bits).collect()),
        DType::Bytes => return Err("a string tensor cannot be stored as raw data".into()),
    })
}

/// `count` elements of `dtype` from the typed field ONNX keeps them in.
fn typed(t: &InitializerProto, dtype: DType, count: usize) -> Result<TensorData, String> {
    let len = match dtype {
        DType::F32 => t.float_data.len(),
        DType::F64 => t.double_data.len(),
        DType::I64 => t.int64_data.len(),
        DType::U32 | DType::U64 => t.uint64_data.len(),
        DType::Bytes => t.string_data.len(),
        _ => t.int32_data.len(),
    };
    if len != count {
        return Err(format!("{len} stored elements for {count} of {dtype}"));
    }
    // Narrower types are stored widened (ONNX's rule); a value out of range is the file's error.
    fn narrow<T: TryFrom<i64>>(values: impl Iterator<Item = i64>) -> Result<Vec<T>, String> {
        values
            .map(|v| T::try_from(v).map_err(|_| format!("stored value {v} is out of range")))
            .collect()
    }
    let ints = || t.int32_data.iter().map(|&v| i64::from(v));
    Ok(match dtype {
        DType::F32 => TensorData::F32(t.float_data.clone()),
        DType::F64 => TensorData::F64(t.double_data.clone()),
        DType::I64 => TensorData::I64(t.int64_data.clone()),
        DType::U64 => TensorData::U64(t.uint64_data.clone()),
        DType::U32 => TensorData::U32(
            t.uint64_data
                .iter()
                .map(|&v| u32::try_from(v).map_err(|_| format!("stored value {v} is out of range")))
                .collect::<Result<_, _>>()?,
        ),
        DType::Bytes => TensorData::Bytes(t.string_data.clone()),
        DType::Bool => TensorData::Bool(ints().map(|v| v != 0).collect()),
        DType::I32 => TensorData::I32(t.int32_data.clone()),
        DType::I16 => TensorData::I16(narrow(ints())?),
        DType::I8 => TensorData::I8(narrow(ints())?),
        DType::U16 => TensorData::U16(narrow(ints())?),
        DType::U8 => TensorData::U8(narrow(ints())?),
        DType::F16 => TensorData::F16(
            narrow::<u16>(ints())?
                .into_iter()
                .map(half::f16::from_bits)
                .collect(),
        ),
        DType::Bf16 => TensorData::Bf16(
            narrow::<u16>(ints())?
                .into_iter()
                .map(half::bf16::from_bits)
                .collect(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(initializer: Vec<InitializerProto>) -> Bytes {
        Bytes::from(
            ModelProto {
                graph: Some(GraphProto { initializer }),
            }
            .encode_to_vec(),
        )
    }

    fn init(name: &str, dims: &[i64], data_type: i32) -> InitializerProto {
        InitializerProto {
            name: name.into(),
            dims: dims.to_vec(),
            data_type,
            ..Default::default()
        }
    }

    #[test]
    fn raw_and_typed_values_read_as_the_file_holds_them() {
        let mut raw = init("scale", &[1, 2], 1);
        raw.raw_data = Bytes::from(
            [2.0f32, -3.5]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        let mut ints = init("k", &[3], 3);
        ints.int32_data = vec![-1, 0, 7];
        let mut words = init("w", &[1], 8);
        words.string_data = vec![b"hi".to_vec()];
        let values =
            initializer_values(model(vec![raw, ints, words]), &["scale", "k", "w", "none"])
                .unwrap();
        assert_eq!(values[0], Ok(Tensor::new(vec![1, 2], vec![2.0f32, -3.5])));
        assert_eq!(
            values[1],
            Ok(Tensor::new(vec![3], TensorData::I8(vec![-1, 0, 7])))
        );
        assert_eq!(
            values[2],
            Ok(Tensor::new(
                vec![1],
                TensorData::Bytes(vec![b"hi".to_vec()])
            ))
        );
        assert!(values[3].is_err());
    }

    #[test]
    fn lengths_that_disagree_with_the_dims_are_errors_not_allocations() {
        let mut huge = init("a", &[1 << 40, 1 << 30], 1);
        huge.raw_data = Bytes::from_static(&[0; 8]);
        let mut short = init("b", &[4], 7);
        short.int64_data = vec![1, 2];
        let mut negative = init("c", &[-2], 1);
        negative.float_data = vec![1.0];
        let mut external = init("d", &[1], 1);
        external.data_location = 1;
        let mut wide = init("e", &[1], 3);
        wide.int32_data = vec![300];
        let values = initializer_values(
            model(vec![huge, short, negative, external, wide]),
            &["a", "b", "c", "d", "e"],
        )
        .unwrap();
        for v in values {
            assert!(v.is_err(), "{v:?}");
        }
    }
}
