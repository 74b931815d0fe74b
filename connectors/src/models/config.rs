//! A graph's (or a model-less task's) configuration in Triton's JSON form, for the tools that
//! read `…/config` before anything else (`perf_analyzer` reads the batch size and the tensors'
//! types and shapes there).
//!
//! A graph's inputs are per-request tensors and both transports accept a leading batch dimension
//! on top of them, which they split into one graph request per row: that is Triton's
//! `max_batch_size > 0` (dims without the batch dimension). The batch a request may carry is
//! bounded by the rows the graph admits at once, so that is the `max_batch_size` given.

use prost::Message;
use serde_json::{json, Value};
use weir_engine::runtime::GraphRuntime;
use weir_engine::tensor::{DType, Dim, TensorType};

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

fn tensor(t: &Tensor) -> Value {
    json!({"name": t.name, "data_type": data_type(t.ty.dtype), "dims": dims(&t.ty.shape)})
}

/// An input as a configuration shows it: a tensor, and whether a request may leave it out.
fn input(t: &Tensor) -> Value {
    let mut v = tensor(t);
    v["optional"] = Value::Bool(t.optional);
    v
}

/// One input or output as configurations and metadata show it: its name and per-request type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// Its name in requests and replies.
    pub name: String,
    /// Its element type and per-request shape (no batch dimension).
    pub ty: TensorType,
    /// An input a request may leave out (Triton's `optional`); false for an output.
    pub optional: bool,
}

impl Tensor {
    /// The tensor as v2 metadata shows it, with a batch dimension when `batched`.
    pub fn metadata(&self, batched: bool) -> Value {
        json!({"name": self.name, "datatype": self.ty.dtype.oip_name(), "shape": metadata_shape(&self.ty.shape, batched)})
    }
}

/// A per-request shape as v2 metadata shows it: when `batched` (Triton's `max_batch_size > 0`),
/// `-1` first for the batch dimension a request may add; then each dimension, `-1` where it is
/// free.
pub fn metadata_shape(shape: &[Dim], batched: bool) -> Vec<i64> {
    let batch = batched.then_some(-1);
    batch.into_iter().chain(dims(shape)).collect()
}

/// What a served name shows a client that reads before it infers: its tensors, per request, and
/// the rows one request may carry on top of them. A graph and a model-less task are both
/// described this way, so their configurations and metadata are written by one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The name served.
    pub name: String,
    /// Triton's `platform` (`weir_graph` for a graph).
    pub platform: String,
    /// The most rows a request may carry (Triton's `max_batch_size`).
    pub max_batch: u64,
    /// Inputs, in order.
    pub inputs: Vec<Tensor>,
    /// Outputs, in order.
    pub outputs: Vec<Tensor>,
}

impl Signature {
    /// A graph served as a model: its inputs and outputs, and the rows it admits at once.
    pub fn of_graph(runtime: &GraphRuntime) -> Signature {
        let plan = runtime.plan();
        let tensor = |name: &String, ty: &TensorType| Tensor {
            name: name.clone(),
            ty: ty.clone(),
            optional: false,
        };
        Signature {
            name: plan.name.clone(),
            platform: "weir_graph".into(),
            max_batch: u64::try_from(runtime.max_in_flight()).unwrap_or(u64::MAX),
            // Sequence control inputs are filled from the request's parameters, not sent.
            inputs: plan
                .inputs
                .iter()
                .filter(|i| i.sequence.is_none())
                .map(|i| Tensor {
                    optional: i.default.is_some(),
                    ..tensor(&i.client().to_string(), &i.ty)
                })
                .collect(),
            outputs: plan
                .outputs
                .iter()
                .map(|o| tensor(&o.name, &o.ty))
                .collect(),
        }
    }

    /// The configuration in Triton's JSON form, of version 1.
    pub fn config(&self) -> Value {
        json!({
            "name": self.name,
            "platform": self.platform,
            "backend": "weir",
            "version_policy": {"latest": {"num_versions": 1}},
            "max_batch_size": i64::try_from(self.max_batch).unwrap_or(i64::MAX),
            "input": self.inputs.iter().map(input).collect::<Vec<_>>(),
            "output": self.outputs.iter().map(tensor).collect::<Vec<_>>(),
        })
    }

    /// Whether a request may carry rows on top of the per-request shapes (Triton's
    /// `max_batch_size > 0`), which metadata shows as a leading `-1`.
    pub fn batched(&self) -> bool {
        self.max_batch > 0
    }

    /// The v2 metadata document (`GET /v2/models/{m}`) of this model, served in `versions`.
    pub fn metadata(&self, versions: &[u64]) -> Value {
        json!({
            "name": self.name,
            "versions": versions.iter().map(u64::to_string).collect::<Vec<_>>(),
            "platform": self.platform,
            "inputs": self.inputs.iter().map(|t| t.metadata(self.batched())).collect::<Vec<_>>(),
            "outputs": self.outputs.iter().map(|t| t.metadata(self.batched())).collect::<Vec<_>>(),
        })
    }

    /// [`Signature::config`] as an encoded `inference.ModelConfig` message.
    pub fn config_proto(&self) -> Vec<u8> {
        GraphConfigMessage {
            name: self.name.clone(),
            platform: self.platform.clone(),
            max_batch_size: i32::try_from(self.max_batch).unwrap_or(i32::MAX),
            input: self
                .inputs
                .iter()
                .map(|t| TensorMessage {
                    name: t.name.clone(),
                    data_type: data_type_number(t.ty.dtype),
                    dims: dims(&t.ty.shape),
                    optional: t.optional,
                })
                .collect(),
            output: self
                .outputs
                .iter()
                .map(|t| OutputMessage {
                    name: t.name.clone(),
                    data_type: data_type_number(t.ty.dtype),
                    dims: dims(&t.ty.shape),
                })
                .collect(),
            backend: "weir".into(),
        }
        .encode_to_vec()
    }
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

/// `inference.ModelInput`: name, data_type, dims (field 4; 3 is its format), optional.
#[derive(Clone, PartialEq, Message)]
struct TensorMessage {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(int32, tag = "2")]
    data_type: i32,
    #[prost(int64, repeated, tag = "4")]
    dims: Vec<i64>,
    #[prost(bool, tag = "8")]
    optional: bool,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_shows_the_batch_and_per_request_dimensions_as_minus_one() {
        let tensor = |name: &str, dtype, shape| Tensor {
            name: name.into(),
            ty: TensorType { dtype, shape },
            optional: false,
        };
        let x = tensor("x", DType::F16, vec![Dim::Fixed(3), Dim::Dynamic]);
        let meta = x.metadata(true);
        assert_eq!(
            meta,
            json!({"name": "x", "datatype": "FP16", "shape": [-1, 3, -1]})
        );
        let scalar = tensor("sr", DType::I64, vec![]).metadata(true);
        assert_eq!(scalar["shape"], json!([-1]));
        // A model that does not batch (Triton's `max_batch_size: 0`) shows its shapes as they are.
        assert_eq!(x.metadata(false)["shape"], json!([3, -1]));
    }

    #[test]
    fn the_configuration_shows_which_inputs_a_request_may_leave_out() {
        let ty = TensorType {
            dtype: DType::F32,
            shape: vec![Dim::Fixed(4)],
        };
        let t = |name: &str, optional| Tensor {
            name: name.into(),
            ty: ty.clone(),
            optional,
        };
        let sig = Signature {
            name: "g".into(),
            platform: "weir_graph".into(),
            max_batch: 8,
            inputs: vec![t("x", false), t("scale", true)],
            outputs: vec![t("y", false)],
        };
        let config = sig.config();
        assert_eq!(config["input"][0]["optional"], json!(false));
        assert_eq!(config["input"][1]["optional"], json!(true));
        assert!(config["output"][0].get("optional").is_none());
        // Metadata has no such field (Triton's neither).
        assert!(sig.metadata(&[1])["inputs"][1].get("optional").is_none());
        let message = GraphConfigMessage::decode(sig.config_proto().as_slice()).expect("decodes");
        let flags: Vec<bool> = message.input.iter().map(|i| i.optional).collect();
        assert_eq!(flags, [false, true]);
    }
}
