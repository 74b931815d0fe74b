//! Small ONNX files written by the tests: only a graph's inputs and outputs (which is all the
//! signature reader and the graph validation read), each tensor's dims a size or, for `-1`, a
//! named free dimension, and float initializers for inputs a call may leave out.

use prost::Message;

/// ONNX element types.
pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;
/// ONNX `UINT64`.
pub const UINT64: i32 = 13;

#[derive(Clone, PartialEq, Message)]
struct ModelProto {
    #[prost(int64, tag = "1")]
    ir_version: i64,
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    opset_import: Vec<OpsetId>,
}

#[derive(Clone, PartialEq, Message)]
struct OpsetId {
    #[prost(string, tag = "1")]
    domain: String,
    #[prost(int64, tag = "2")]
    version: i64,
}

#[derive(Clone, PartialEq, Message)]
struct GraphProto {
    #[prost(string, tag = "2")]
    name: String,
    #[prost(message, repeated, tag = "5")]
    initializer: Vec<Initializer>,
    #[prost(message, repeated, tag = "11")]
    input: Vec<ValueInfo>,
    #[prost(message, repeated, tag = "12")]
    output: Vec<ValueInfo>,
}

#[derive(Clone, PartialEq, Message)]
struct Initializer {
    #[prost(int64, repeated, tag = "1")]
    dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(float, repeated, tag = "4")]
    float_data: Vec<f32>,
    #[prost(string, tag = "8")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct ValueInfo {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    r#type: Option<TypeProto>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeProto {
    #[prost(message, optional, tag = "1")]
    tensor_type: Option<TensorType>,
}

#[derive(Clone, PartialEq, Message)]
struct TensorType {
    #[prost(int32, tag = "1")]
    elem_type: i32,
    #[prost(message, optional, tag = "2")]
    shape: Option<Shape>,
}

#[derive(Clone, PartialEq, Message)]
struct Shape {
    #[prost(message, repeated, tag = "1")]
    dim: Vec<Dimension>,
}

#[derive(Clone, PartialEq, Message)]
struct Dimension {
    #[prost(int64, optional, tag = "1")]
    dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    dim_param: Option<String>,
}

/// A tensor: name, ONNX element type, dims (`-1` free).
pub type Tensor<'a> = (&'a str, i32, &'a [i64]);

fn value(&(name, elem, dims): &Tensor<'_>) -> ValueInfo {
    ValueInfo {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorType {
                elem_type: elem,
                shape: Some(Shape {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: (d >= 0).then_some(d),
                            dim_param: (d < 0).then(|| "N".to_string()),
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

/// The bytes of a model with these inputs and outputs.
pub fn model(inputs: &[Tensor<'_>], outputs: &[Tensor<'_>]) -> Vec<u8> {
    model_with_defaults(inputs, outputs, &[])
}

/// The bytes of a model with these inputs and outputs, each `(name, dims, values)` of
/// `initializers` a float initializer (an input of that name becomes one a call may leave out).
pub fn model_with_defaults(
    inputs: &[Tensor<'_>],
    outputs: &[Tensor<'_>],
    initializers: &[(&str, &[i64], &[f32])],
) -> Vec<u8> {
    ModelProto {
        ir_version: 8,
        graph: Some(GraphProto {
            name: "g".into(),
            initializer: initializers
                .iter()
                .map(|&(name, dims, values)| Initializer {
                    dims: dims.to_vec(),
                    data_type: FLOAT,
                    float_data: values.to_vec(),
                    name: name.into(),
                })
                .collect(),
            input: inputs.iter().map(value).collect(),
            output: outputs.iter().map(value).collect(),
        }),
        opset_import: vec![OpsetId {
            domain: String::new(),
            version: 17,
        }],
    }
    .encode_to_vec()
}
