//! Open Inference Protocol replies: the graph's outputs written as a JSON body, with the
//! outputs the request asked for as binary appended after it (the binary tensor extension).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use weir_engine::tensor::{Tensor, TensorData};

use super::datatype_name;

/// One output of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyTensor {
    /// Output name.
    pub name: String,
    /// The tensor (shape including any batch dimension).
    pub tensor: Tensor,
    /// Send as binary data.
    pub binary: bool,
}

#[derive(Serialize)]
struct RawReply<'a> {
    model_name: &'a str,
    model_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    parameters: Map<String, Value>,
    outputs: Vec<RawReplyOutput>,
}

#[derive(Serialize)]
struct RawReplyOutput {
    name: String,
    datatype: &'static str,
    shape: Vec<usize>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<&'static str, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
}

/// Writes a reply body; returns it and, when any output is binary, the JSON header's length.
pub fn encode_infer_reply(
    model: &str,
    id: Option<&str>,
    parameters: Map<String, Value>,
    outputs: &[ReplyTensor],
) -> (Vec<u8>, Option<usize>) {
    let mut binary = Vec::new();
    let raw_outputs = outputs
        .iter()
        .map(|o| {
            let mut parameters = BTreeMap::new();
            let data = if o.binary {
                let start = binary.len();
                o.tensor.data.write_le(&mut binary);
                parameters.insert("binary_data_size", Value::from(binary.len() - start));
                None
            } else {
                Some(match &o.tensor.data {
                    TensorData::F32(v) => Value::Array(
                        v.iter()
                            .map(|&x| {
                                serde_json::Number::from_f64(f64::from(x))
                                    .map(Value::Number)
                                    .unwrap_or(Value::Null)
                            })
                            .collect(),
                    ),
                    TensorData::I64(v) => Value::Array(v.iter().map(|&x| Value::from(x)).collect()),
                    other => Value::Array(
                        other
                            .to_f64_lossy()
                            .unwrap_or_default()
                            .into_iter()
                            .map(Value::from)
                            .collect(),
                    ),
                })
            };
            RawReplyOutput {
                name: o.name.clone(),
                datatype: datatype_name(o.tensor.dtype()),
                shape: o.tensor.shape.clone(),
                parameters,
                data,
            }
        })
        .collect();
    let reply = RawReply {
        model_name: model,
        model_version: "1",
        id,
        parameters,
        outputs: raw_outputs,
    };
    let mut body = serde_json::to_vec(&reply)
        .unwrap_or_else(|e| format!("{{\"error\":\"encoding the reply: {e}\"}}").into_bytes());
    if binary.is_empty() {
        (body, None)
    } else {
        let header = body.len();
        body.extend_from_slice(&binary);
        (body, Some(header))
    }
}
