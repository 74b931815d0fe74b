//! Element types across the three vocabularies that meet here: Triton's `DataType`
//! (`TYPE_FP32`), weir's [`DType`] and ONNX's element types as [`weir_engine::onnx`] reads them.
//!
//! The pairs are those of Triton's ONNX Runtime backend (`onnxruntime_utils.cc`,
//! `OnnxDataTypeToModelConfigDataType`): ONNX `FLOAT` is `TYPE_FP32`, `STRING` is `TYPE_STRING`
//! (weir's `bytes`), `BFLOAT16` is `TYPE_BF16`, and so on one to one.

use weir_engine::onnx::ElementType;
use weir_engine::tensor::DType;

use crate::proto::inference::DataType;

/// The weir type of a Triton data type; `None` for `TYPE_INVALID`.
pub fn dtype(data_type: DataType) -> Option<DType> {
    Some(match data_type {
        DataType::TypeInvalid => return None,
        DataType::TypeBool => DType::Bool,
        DataType::TypeUint8 => DType::U8,
        DataType::TypeUint16 => DType::U16,
        DataType::TypeUint32 => DType::U32,
        DataType::TypeUint64 => DType::U64,
        DataType::TypeInt8 => DType::I8,
        DataType::TypeInt16 => DType::I16,
        DataType::TypeInt32 => DType::I32,
        DataType::TypeInt64 => DType::I64,
        DataType::TypeFp16 => DType::F16,
        DataType::TypeFp32 => DType::F32,
        DataType::TypeFp64 => DType::F64,
        DataType::TypeString => DType::Bytes,
        DataType::TypeBf16 => DType::Bf16,
    })
}

/// The Triton data type of a weir type.
pub fn data_type(dtype: DType) -> DataType {
    match dtype {
        DType::Bool => DataType::TypeBool,
        DType::U8 => DataType::TypeUint8,
        DType::U16 => DataType::TypeUint16,
        DType::U32 => DataType::TypeUint32,
        DType::U64 => DataType::TypeUint64,
        DType::I8 => DataType::TypeInt8,
        DType::I16 => DataType::TypeInt16,
        DType::I32 => DataType::TypeInt32,
        DType::I64 => DataType::TypeInt64,
        DType::F16 => DataType::TypeFp16,
        DType::F32 => DataType::TypeFp32,
        DType::F64 => DataType::TypeFp64,
        DType::Bytes => DataType::TypeString,
        DType::Bf16 => DataType::TypeBf16,
    }
}

/// The Triton data type of an ONNX tensor's elements, or a description of what the file has
/// instead (for error messages).
pub fn of_onnx(element: ElementType) -> Result<DataType, String> {
    match element {
        ElementType::Supported(d) => Ok(data_type(d)),
        ElementType::Unsupported(code) => Err(format!("ONNX element type {code}")),
        ElementType::NotATensor => Err("a value that is not a tensor".into()),
    }
}

/// A data type's name as configurations write it (`TYPE_FP32`); the raw number when the
/// configuration holds a value outside the enum.
pub fn name(raw: i32) -> String {
    DataType::try_from(raw).map_or_else(|_| raw.to_string(), |d| d.as_str_name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_weir_type_round_trips_through_triton() {
        for d in DType::ALL {
            assert_eq!(dtype(data_type(d)), Some(d), "{d}");
        }
        assert_eq!(dtype(DataType::TypeInvalid), None);
        assert_eq!(name(DataType::TypeString as i32), "TYPE_STRING");
        assert_eq!(name(99), "99");
    }
}
