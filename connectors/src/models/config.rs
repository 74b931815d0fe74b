//! A graph's configuration in Triton's JSON form, for the tools that read `…/config` before
//! anything else (`perf_analyzer` reads the batch size and the tensors' types and shapes there).
//!
//! A graph's inputs are per-request tensors and both transports accept a leading batch dimension
//! on top of them, which they split into one graph request per row: that is Triton's
//! `max_batch_size > 0` (dims without the batch dimension). The batch a request may carry is
//! bounded by the rows the graph admits at once, so that is the `max_batch_size` given.

use prost::Message;
use serde_json::{json, Value};
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::{DType, Dim};

/// Triton's `data_type` name for a tensor type (`TYPE_FP32`; BYTES is `TYPE_STRING`).
pub fn data_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bool => "TYPE_BOOL",
        DType::U8 => "TYPE_UINT8",
        DType::U16 => "TYPE_UINT16",
        DType::U32 => "TYPE_UINT32",
        DType::U64 => "TYPE_UINT64",
        DType::I8 => "TYPE_INT8",
        DType::I16 => "TYPE_INT16",
        DType::I32 => "TYPE_INT32",
        DType::I64 => "TYPE_INT64",
        DType::F16 => "TYPE_FP16",
        DType::F32 => "TYPE_FP32",
        DType::F64 => "TYPE_FP64",
        DType::Bf16 => "TYPE_BF16",
        DType::Bytes => "TYPE_STRING",
    }
}

/// A shape as Triton's `dims`: -1 for a dimension known only per request.
pub fn dims(shape: &[Dim]) -> Vec<i64> {
    shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => i64::try_from(*n).unwrap_or(i64::MAX),
            Dim::Dynamic => -1,
        })
        .collect()
}

fn tensor(name: &str, dtype: DType, shape: &[Dim]) -> Value {
    json!({"name": name, "data_type": data_type(dtype), "dims": dims(shape)})
}

/// The configuration of a graph served as a model of version 1.
pub fn graph_config(runtime: &GraphRuntime) -> Value {
    let plan = runtime.plan();
    let max_batch = i64::try_from(runtime.max_in_flight()).unwrap_or(i64::MAX);
    json!({
        "name": plan.name,
        "platform": "weir_graph",
        "backend": "weir",
        "version_policy": {"latest": {"num_versions": 1}},
        "max_batch_size": max_batch,
        "input": plan.inputs.iter().map(|i| tensor(&i.name, i.ty.dtype, &i.ty.shape)).collect::<Vec<_>>(),
        "output": plan.outputs.iter().map(|o| tensor(&o.name, o.ty.dtype, &o.ty.shape)).collect::<Vec<_>>(),
    })
}

/// The fields of Triton's `inference.ModelConfig` a graph's configuration sets, with Triton's
/// field numbers (model_config.proto), so the encoded message is one Triton's clients decode.
#[derive(Clone, PartialEq, Message)]
struct GraphConfigMessage {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    platform: String,
    #[prost(int32, tag = "4")]
    max_batch_size: i32,
    #[prost(message, repeated, tag = "5")]
    input: Vec<TensorMessage>,
    #[prost(message, repeated, tag = "6")]
    output: Vec<OutputMessage>,
    #[prost(string, tag = "17")]
    backend: String,
}

/// `inference.ModelInput`: name, data_type, dims (field 4; 3 is its format).
#[derive(Clone, PartialEq, Message)]
struct TensorMessage {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(int64, repeated, tag = "4")]
    dims: Vec<i64>,
}

/// `inference.ModelOutput`: name, data_type, dims.
#[derive(Clone, PartialEq, Message)]
struct OutputMessage {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(int64, repeated, tag = "3")]
    dims: Vec<i64>,
}

/// Triton's `DataType` enum value for a tensor type.
fn data_type_number(dtype: DType) -> i32 {
    match dtype {
        DType::Bool => 1,
        DType::U8 => 2,
        DType::U16 => 3,
        DType::U32 => 4,
        DType::U64 => 5,
        DType::I8 => 6,
        DType::I16 => 7,
        DType::I32 => 8,
        DType::I64 => 9,
        DType::F16 => 10,
        DType::F32 => 11,
        DType::F64 => 12,
        DType::Bytes => 13,
        DType::Bf16 => 14,
    }
}

/// [`graph_config`] as an encoded `inference.ModelConfig` message.
pub fn graph_config_proto(runtime: &GraphRuntime) -> Vec<u8> {
    let plan = runtime.plan();
    GraphConfigMessage {
        name: plan.name.clone(),
        platform: "weir_graph".into(),
        max_batch_size: i32::try_from(runtime.max_in_flight()).unwrap_or(i32::MAX),
        input: plan
            .inputs
            .iter()
            .map(|i| TensorMessage {
                name: i.name.clone(),
                data_type: data_type_number(i.ty.dtype),
                dims: dims(&i.ty.shape),
            })
            .collect(),
        output: plan
            .outputs
            .iter()
            .map(|o| OutputMessage {
                name: o.name.clone(),
                data_type: data_type_number(o.ty.dtype),
                dims: dims(&o.ty.shape),
            })
            .collect(),
        backend: "weir".into(),
    }
    .encode_to_vec()
}
