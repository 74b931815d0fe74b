//! The Open Inference Protocol (KServe v2) infer messages: JSON bodies and the binary tensor
//! data extension, parsed into weir tensors and written back. Pure functions, no I/O.
//!
//! A binary request carries the header `Inference-Header-Content-Length: N`: the first `N` bytes
//! are the JSON request, the rest the raw little-endian tensors of the inputs whose `parameters`
//! hold `binary_data_size`, in input order. A reply uses binary for an output when the request
//! asked for it (`outputs[i].parameters.binary_data` or `parameters.binary_data_output`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weir_engine::tensor::{DType, Tensor, TensorData};

/// Header naming the length of the JSON part of a binary body.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// A malformed request: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ProtocolError {
    /// The request field (`inputs[0].shape`), or `body`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn perr(field: impl Into<String>, message: impl Into<String>) -> ProtocolError {
    ProtocolError {
        field: field.into(),
        message: message.into(),
    }
}

#[derive(Debug, Deserialize)]
struct RawRequest {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    inputs: Vec<RawInput>,
    #[serde(default)]
    outputs: Option<Vec<RawOutput>>,
}

#[derive(Debug, Deserialize)]
struct RawInput {
    name: String,
    shape: Vec<i64>,
    datatype: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    /// Kept raw: a flat array parses straight into numbers, without a JSON value per element.
    #[serde(default)]
    data: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Debug, Deserialize)]
struct RawOutput {
    name: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

/// One input tensor of a request, with its full shape as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    /// Input name.
    pub name: String,
    /// Shape as sent (may include a batch dimension).
    pub shape: Vec<usize>,
    /// Elements.
    pub data: TensorData,
}

/// A requested output.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedOutput {
    /// Output name.
    pub name: String,
    /// Whether to return it as binary data.
    pub binary: bool,
}

/// A parsed infer request.
#[derive(Debug, Clone, PartialEq)]
pub struct InferRequest {
    /// Client's id, echoed back.
    pub id: Option<String>,
    /// Request parameters, passed through.
    pub parameters: Map<String, Value>,
    /// Inputs.
    pub inputs: Vec<InputTensor>,
    /// Outputs asked for (`None`: all, as JSON unless `binary_data_output`).
    pub outputs: Option<Vec<RequestedOutput>>,
    /// `parameters.binary_data_output`: every output as binary.
    pub binary_by_default: bool,
}

/// The KServe datatype name of a weir dtype.
pub fn datatype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "FP32",
        DType::I64 => "INT64",
    }
}

fn parse_datatype(name: &str, field: &str) -> Result<DType, ProtocolError> {
    match name {
        "FP32" => Ok(DType::F32),
        "INT64" => Ok(DType::I64),
        "BOOL" | "UINT8" | "UINT16" | "UINT32" | "UINT64" | "INT8" | "INT16" | "INT32" | "FP16"
        | "FP64" | "BF16" | "BYTES" => Err(perr(
            field,
            format!("datatype {name} is not served; weir tensors are FP32 or INT64"),
        )),
        other => Err(perr(field, format!("unknown datatype `{other}`"))),
    }
}

fn flatten_json(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| flatten_json(i, out)),
        other => out.push(other.clone()),
    }
}

fn json_data(
    raw: &serde_json::value::RawValue,
    dtype: DType,
    field: &str,
) -> Result<TensorData, ProtocolError> {
    // Fast path: a flat array of numbers (what clients send for anything large).
    let fast = match dtype {
        DType::F32 => serde_json::from_str::<Vec<f32>>(raw.get())
            .ok()
            .map(TensorData::F32),
        DType::I64 => serde_json::from_str::<Vec<i64>>(raw.get())
            .ok()
            .map(TensorData::I64),
    };
    if let Some(data) = fast {
        return Ok(data);
    }
    // Nested arrays, or something wrong: walk the values to flatten or to say which element is bad.
    let v: Value =
        serde_json::from_str(raw.get()).map_err(|e| perr(field, format!("invalid JSON: {e}")))?;
    let mut flat = Vec::new();
    flatten_json(&v, &mut flat);
    match dtype {
        DType::F32 => flat
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_f64()
                    .map(|f| f as f32)
                    .ok_or_else(|| perr(field, format!("element {i} is `{x}`, not a number")))
            })
            .collect::<Result<Vec<f32>, _>>()
            .map(TensorData::F32),
        DType::I64 => flat
            .iter()
            .enumerate()
            .map(|(i, x)| {
                x.as_i64()
                    .ok_or_else(|| perr(field, format!("element {i} is `{x}`, not an integer")))
            })
            .collect::<Result<Vec<i64>, _>>()
            .map(TensorData::I64),
    }
}

fn binary_data(bytes: &[u8], dtype: DType, field: &str) -> Result<TensorData, ProtocolError> {
    let width = 4 * (1 + usize::from(dtype == DType::I64));
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
    })
}

fn flag(params: &Option<Map<String, Value>>, key: &str) -> bool {
    params
        .as_ref()
        .and_then(|p| p.get(key))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Parses a request body; `header_length` is the `Inference-Header-Content-Length` value, if sent.
///
/// # Errors
/// A [`ProtocolError`] naming the field at fault: bad JSON, an unknown datatype, a negative
/// dimension, data that does not match the shape, binary sizes that do not add up.
pub fn parse_infer_request(
    body: &[u8],
    header_length: Option<usize>,
) -> Result<InferRequest, ProtocolError> {
    let (json, mut binary) = match header_length {
        Some(n) if n > body.len() => {
            return Err(perr(
                "Inference-Header-Content-Length",
                format!("{n} exceeds the body's {} bytes", body.len()),
            ))
        }
        Some(n) => body.split_at(n),
        None => (body, &[][..]),
    };
    let raw: RawRequest =
        serde_json::from_slice(json).map_err(|e| perr("body", format!("invalid JSON: {e}")))?;
    let mut inputs = Vec::with_capacity(raw.inputs.len());
    for (i, input) in raw.inputs.iter().enumerate() {
        let field = |f: &str| format!("inputs[{i}] ({}).{f}", input.name);
        let dtype = parse_datatype(&input.datatype, &field("datatype"))?;
        if let Some(d) = input.shape.iter().find(|&&d| d < 0) {
            return Err(perr(field("shape"), format!("dimension {d} is negative")));
        }
        let shape: Vec<usize> = input.shape.iter().map(|&d| d as usize).collect();
        let expected: usize = shape.iter().product();
        let binary_size = input
            .parameters
            .as_ref()
            .and_then(|p| p.get("binary_data_size"))
            .map(|v| {
                v.as_u64().ok_or_else(|| {
                    perr(
                        field("parameters.binary_data_size"),
                        "must be a non-negative integer",
                    )
                })
            });
        let data = match (binary_size, &input.data) {
            (Some(size), None) => {
                let size = size? as usize;
                if size > binary.len() {
                    return Err(perr(
                        field("parameters.binary_data_size"),
                        format!(
                            "{size} bytes, but only {} binary bytes remain in the body",
                            binary.len()
                        ),
                    ));
                }
                let (mine, rest) = binary.split_at(size);
                binary = rest;
                binary_data(mine, dtype, &field("parameters.binary_data_size"))?
            }
            (None, Some(v)) => json_data(v, dtype, &field("data"))?,
            (Some(_), Some(_)) => {
                return Err(perr(
                    field("data"),
                    "give either `data` or `parameters.binary_data_size`, not both",
                ))
            }
            (None, None) => {
                return Err(perr(
                    field("data"),
                    "missing: give `data` or `parameters.binary_data_size`",
                ))
            }
        };
        if data.len() != expected {
            return Err(perr(
                field("data"),
                format!(
                    "shape {shape:?} needs {expected} elements, got {}",
                    data.len()
                ),
            ));
        }
        inputs.push(InputTensor {
            name: input.name.clone(),
            shape,
            data,
        });
    }
    if !binary.is_empty() {
        return Err(perr(
            "body",
            format!("{} binary bytes left over after every input", binary.len()),
        ));
    }
    let binary_by_default = flag(&raw.parameters, "binary_data_output");
    let outputs = raw.outputs.map(|outs| {
        outs.into_iter()
            .map(|o| RequestedOutput {
                binary: flag(&o.parameters, "binary_data")
                    || (binary_by_default
                        && o.parameters
                            .as_ref()
                            .and_then(|p| p.get("binary_data"))
                            .is_none()),
                name: o.name,
            })
            .collect()
    });
    Ok(InferRequest {
        id: raw.id,
        parameters: raw.parameters.unwrap_or_default(),
        inputs,
        outputs,
        binary_by_default,
    })
}

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
                match &o.tensor.data {
                    TensorData::F32(v) => v
                        .iter()
                        .for_each(|x| binary.extend_from_slice(&x.to_le_bytes())),
                    TensorData::I64(v) => v
                        .iter()
                        .for_each(|x| binary.extend_from_slice(&x.to_le_bytes())),
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_request_with_nested_data() {
        let body = br#"{"id":"7","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4.5]]}],"outputs":[{"name":"y"}]}"#;
        let r = parse_infer_request(body, None).unwrap();
        assert_eq!(r.id.as_deref(), Some("7"));
        assert_eq!(r.inputs[0].data, TensorData::F32(vec![1.0, 2.0, 3.0, 4.5]));
        assert_eq!(
            r.outputs.unwrap()[0],
            RequestedOutput {
                name: "y".into(),
                binary: false
            }
        );
    }

    #[test]
    fn binary_request_splits_at_the_header_length() {
        let header = br#"{"inputs":[{"name":"x","shape":[2],"datatype":"INT64","parameters":{"binary_data_size":16}}],"parameters":{"binary_data_output":true}}"#;
        let mut body = header.to_vec();
        body.extend_from_slice(&5i64.to_le_bytes());
        body.extend_from_slice(&(-1i64).to_le_bytes());
        let r = parse_infer_request(&body, Some(header.len())).unwrap();
        assert_eq!(r.inputs[0].data, TensorData::I64(vec![5, -1]));
        assert!(r.binary_by_default);
    }

    #[test]
    fn malformed_requests_name_their_field() {
        let cases: [(&[u8], &str); 5] = [
            (b"{not json", "body"),
            (
                br#"{"inputs":[{"name":"x","shape":[2],"datatype":"FP16","data":[1,2]}]}"#,
                "inputs[0] (x).datatype",
            ),
            (
                br#"{"inputs":[{"name":"x","shape":[-2],"datatype":"FP32","data":[1,2]}]}"#,
                "inputs[0] (x).shape",
            ),
            (
                br#"{"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]}"#,
                "inputs[0] (x).data",
            ),
            (
                br#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["a"]}]}"#,
                "inputs[0] (x).data",
            ),
        ];
        for (body, field) in cases {
            assert_eq!(parse_infer_request(body, None).unwrap_err().field, field);
        }
    }

    #[test]
    fn binary_reply_round_trips() {
        let out = ReplyTensor {
            name: "y".into(),
            tensor: Tensor::f32(vec![1, 2], vec![0.5, -2.0]),
            binary: true,
        };
        let (body, header) = encode_infer_reply("g", Some("1"), Map::new(), &[out]);
        let header = header.unwrap();
        let json: Value = serde_json::from_slice(&body[..header]).unwrap();
        assert_eq!(json["outputs"][0]["parameters"]["binary_data_size"], 8);
        assert_eq!(
            binary_data(&body[header..], DType::F32, "y").unwrap(),
            TensorData::F32(vec![0.5, -2.0])
        );
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// What a reply writes as binary, a request reads back bit for bit (same wire format both ways).
        #[test]
        fn binary_tensors_round_trip(f in proptest::collection::vec(any::<f32>().prop_filter("finite", |x| x.is_finite()), 1..50), i in proptest::collection::vec(any::<i64>(), 1..50)) {
            let outputs = [
                ReplyTensor { name: "f".into(), tensor: Tensor::f32(vec![f.len()], f.clone()), binary: true },
                ReplyTensor { name: "i".into(), tensor: Tensor::i64(vec![i.len()], i.clone()), binary: true },
            ];
            let (body, header) = encode_infer_reply("g", None, Map::new(), &outputs);
            let header = header.unwrap();
            let request = format!(
                r#"{{"inputs":[{{"name":"f","shape":[{}],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}},{{"name":"i","shape":[{}],"datatype":"INT64","parameters":{{"binary_data_size":{}}}}}]}}"#,
                f.len(), f.len() * 4, i.len(), i.len() * 8
            );
            let mut wire = request.clone().into_bytes();
            wire.extend_from_slice(&body[header..]);
            let parsed = parse_infer_request(&wire, Some(request.len())).unwrap();
            prop_assert_eq!(&parsed.inputs[0].data, &TensorData::F32(f));
            prop_assert_eq!(&parsed.inputs[1].data, &TensorData::I64(i));
        }

        /// JSON replies carry f32 values exactly (they widen to f64 and narrow back).
        #[test]
        fn json_f32_values_round_trip(f in proptest::collection::vec(any::<f32>().prop_filter("finite", |x| x.is_finite()), 1..50)) {
            let outputs = [ReplyTensor { name: "f".into(), tensor: Tensor::f32(vec![f.len()], f.clone()), binary: false }];
            let (body, _) = encode_infer_reply("g", None, Map::new(), &outputs);
            let json: Value = serde_json::from_slice(&body).unwrap();
            let data = serde_json::to_string(&json["outputs"][0]["data"]).unwrap();
            let request = format!(r#"{{"inputs":[{{"name":"f","shape":[{}],"datatype":"FP32","data":{data}}}]}}"#, f.len());
            let parsed = parse_infer_request(request.as_bytes(), None).unwrap();
            prop_assert_eq!(&parsed.inputs[0].data, &TensorData::F32(f));
        }
    }
}
