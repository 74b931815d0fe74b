//! Infer requests: a JSON body, or a JSON header followed by the inputs' raw tensors (the binary
//! tensor data extension), parsed into weir tensors. Pure functions, no I/O.
//!
//! Every body is hostile: sizes it states are checked against the bytes it carries before they
//! size anything (`data.rs`), `data` and `parameters` are never built into `serde_json::Value`
//! trees, and client text quoted in an error is cut short ([`crate::echo`]).
//!
//! Every datatype of the protocol is read (BOOL, UINT8–64, INT8–64, FP16, FP32, FP64, BF16,
//! BYTES), each element as `element.rs` says. A binary request carries the header
//! `Inference-Header-Content-Length: N`: the first `N` bytes are the JSON request, the rest the
//! raw tensors of the inputs whose `parameters` hold `binary_data_size`, in input order
//! (little-endian fixed widths; BYTES as a 4-byte length before each element). A reply uses binary for an output when the request
//! asked for it (`outputs[i].parameters.binary_data` or `parameters.binary_data_output`).

use std::collections::HashSet;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Number;
use weir_engine::tensor::{DType, TensorData};

use super::data;
use super::error::{perr, ProtocolError};
use crate::echo::quote;

/// Header naming the length of the JSON part of a binary body.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// Bytes of request `parameters` text, at most.
///
/// Parameters are control values (an SLO, a flag) that ride every row of a request through the
/// graph and come back in every row's reply, so one request makes the graph carry them once per
/// row: this caps that at `rows × PARAMETERS_MAX_BYTES`, where rows are in turn capped by the
/// graph's in-flight limit. 64 KiB is hundreds of times what such values take.
pub const PARAMETERS_MAX_BYTES: usize = 64 * 1024;

/// The request as sent, borrowing from the body: `data` and every `parameters` object stay raw
/// text (no `serde_json::Value` tree), read only for the few keys weir uses.
#[derive(Debug, Deserialize)]
struct RawRequest<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default, borrow)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow)]
    inputs: Vec<RawInput<'a>>,
    #[serde(default, borrow)]
    outputs: Option<Vec<RawOutput<'a>>>,
}

#[derive(Debug, Deserialize)]
struct RawInput<'a> {
    name: String,
    /// Numbers, so a dimension past `i64` is named as the shape's fault, not the body's.
    shape: Vec<Number>,
    datatype: String,
    #[serde(default, borrow)]
    parameters: Option<&'a RawValue>,
    #[serde(default, borrow)]
    data: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
struct RawOutput<'a> {
    name: String,
    #[serde(default, borrow)]
    parameters: Option<&'a RawValue>,
}

/// The keys weir reads from the `parameters` objects; every other key is skipped unparsed.
#[derive(Debug, Default, Deserialize)]
struct KnownParameters<'a> {
    #[serde(default, borrow)]
    binary_data_size: Option<&'a RawValue>,
    #[serde(default, borrow)]
    binary_data: Option<&'a RawValue>,
    #[serde(default, borrow)]
    binary_data_output: Option<&'a RawValue>,
}

/// Reads the known keys of a `parameters` object.
fn known_parameters<'a>(
    raw: Option<&'a RawValue>,
    field: &str,
) -> Result<KnownParameters<'a>, ProtocolError> {
    match raw {
        None => Ok(KnownParameters::default()),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
            perr(
                field,
                format!("must be a JSON object: {}", quote(&e.to_string())),
            )
        }),
    }
}

fn is_true(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|v| v.get() == "true")
}

/// One input tensor of a request, with its full shape as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    /// Input name.
    pub name: String,
    /// Shape as sent (may include a batch dimension). Its product is `data`'s length (no
    /// overflow); an empty shape's dimensions are at most the body's length in bytes.
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
    /// Request parameters as JSON object text (at most [`PARAMETERS_MAX_BYTES`]), passed
    /// through the graph with every row and shared by them; `None` when absent or empty.
    pub parameters: Option<Arc<str>>,
    /// Inputs.
    pub inputs: Vec<InputTensor>,
    /// Outputs asked for (`None`: all, as JSON unless `binary_data_output`).
    pub outputs: Option<Vec<RequestedOutput>>,
    /// `parameters.binary_data_output`: every output as binary.
    pub binary_by_default: bool,
    /// Bytes of the body it was parsed from: what the client sent, against which what the
    /// request makes the graph carry is measured.
    pub body_bytes: usize,
    /// The request's trace, set by the transport from the client's `traceparent` when the
    /// server traces (`None`: tracing is off).
    pub trace: Option<super::RequestTracing>,
}

pub(super) fn parse_datatype(name: &str, field: &str) -> Result<DType, ProtocolError> {
    DType::from_oip_name(name).ok_or_else(|| {
        let known: Vec<&str> = DType::ALL.iter().map(|d| d.oip_name()).collect();
        perr(
            field,
            format!(
                "unknown datatype `{}` (the protocol's are {})",
                quote(name),
                known.join(", ")
            ),
        )
    })
}

/// The request `parameters`: an object's text, kept raw and capped at [`PARAMETERS_MAX_BYTES`].
fn request_parameters(raw: Option<&RawValue>) -> Result<Option<Arc<str>>, ProtocolError> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get();
    if text == "null" {
        return Ok(None);
    }
    if !text.starts_with('{') {
        return Err(perr("parameters", "must be a JSON object"));
    }
    if text.len() > PARAMETERS_MAX_BYTES {
        return Err(perr(
            "parameters",
            format!(
                "{} bytes, over the limit of {PARAMETERS_MAX_BYTES} (parameters travel with every row)",
                text.len()
            ),
        ));
    }
    let empty = text[1..text.len() - 1].trim().is_empty();
    Ok((!empty).then(|| Arc::from(text)))
}

/// Decodes input `i`'s tensor, taking its binary data (if any) from the front of `binary`.
fn parse_input(
    i: usize,
    input: &RawInput<'_>,
    binary: &mut &[u8],
    body_len: usize,
) -> Result<InputTensor, ProtocolError> {
    let name = quote(&input.name);
    let field = |f: &str| format!("inputs[{i}] ({name}).{f}");
    let dtype = parse_datatype(&input.datatype, &field("datatype"))?;
    let params = known_parameters(input.parameters, &field("parameters"))?;
    let data = match (params.binary_data_size, input.data) {
        (Some(size), None) => {
            let size_field = field("parameters.binary_data_size");
            let size = serde_json::from_str::<u64>(size.get())
                .map_err(|_| perr(&size_field, "must be a non-negative integer"))?;
            let size = usize::try_from(size)
                .ok()
                .filter(|&s| s <= binary.len())
                .ok_or_else(|| {
                    perr(
                        &size_field,
                        format!(
                            "{size} bytes, but only {} binary bytes remain in the body",
                            binary.len()
                        ),
                    )
                })?;
            let (shape, expected) = data::checked_shape(&input.shape, body_len, &field("shape"))?;
            if let Some(width) = dtype.byte_width() {
                if expected.checked_mul(width) != Some(size) {
                    return Err(perr(
                        size_field,
                        format!(
                            "{size} bytes, but shape {} of {} needs {expected} elements of {width} bytes",
                            data::shown(&input.shape),
                            dtype.oip_name()
                        ),
                    ));
                }
            }
            let (mine, rest) = binary.split_at(size);
            *binary = rest;
            (
                shape,
                data::binary_data(mine, dtype, expected, &size_field)?,
            )
        }
        (None, Some(raw)) => {
            let (shape, expected) = data::checked_shape(&input.shape, body_len, &field("shape"))?;
            let data = data::json_data(raw, dtype, expected, &field("data"))?;
            if data.len() != expected {
                return Err(perr(
                    field("data"),
                    format!(
                        "shape {shape:?} needs {expected} elements, got {}",
                        data.len()
                    ),
                ));
            }
            (shape, data)
        }
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
    let (shape, data) = data;
    Ok(InputTensor {
        name: input.name.clone(),
        shape,
        data,
    })
}

/// Parses a request body; `header_length` is the `Inference-Header-Content-Length` value, if sent.
///
/// Nothing is allocated from a size the body states before that size is checked against what
/// the body carries (see `data`); no `serde_json::Value` tree is built of `data` or of any
/// `parameters`.
///
/// # Errors
/// A [`ProtocolError`] naming the field at fault: bad JSON, an unknown datatype, a negative,
/// overflowing or oversized dimension, data that does not match the shape, binary sizes that do
/// not add up, parameters over [`PARAMETERS_MAX_BYTES`]. Client text in it is cut short.
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
    let raw: RawRequest<'_> = serde_json::from_slice(json)
        .map_err(|e| perr("body", format!("invalid JSON: {}", quote(&e.to_string()))))?;
    let mut inputs = Vec::with_capacity(raw.inputs.len());
    for (i, input) in raw.inputs.iter().enumerate() {
        inputs.push(parse_input(i, input, &mut binary, body.len())?);
    }
    if !binary.is_empty() {
        return Err(perr(
            "body",
            format!("{} binary bytes left over after every input", binary.len()),
        ));
    }
    let binary_by_default =
        is_true(known_parameters(raw.parameters, "parameters")?.binary_data_output);
    let parameters = request_parameters(raw.parameters)?;
    let outputs = match raw.outputs {
        None => None,
        Some(outs) => {
            let mut seen = HashSet::with_capacity(outs.len());
            let mut requested = Vec::with_capacity(outs.len());
            for (i, o) in outs.into_iter().enumerate() {
                let name = quote(&o.name);
                if !seen.insert(o.name.clone()) {
                    return Err(perr(format!("outputs[{i}] ({name})"), "asked for twice"));
                }
                let field = format!("outputs[{i}] ({name}).parameters");
                let asked = known_parameters(o.parameters, &field)?.binary_data;
                requested.push(RequestedOutput {
                    binary: is_true(asked) || (binary_by_default && asked.is_none()),
                    name: o.name,
                });
            }
            Some(requested)
        }
    };
    Ok(InferRequest {
        id: raw.id,
        parameters,
        inputs,
        outputs,
        binary_by_default,
        body_bytes: body.len(),
        trace: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value};
    use weir_engine::tensor::Tensor;

    use super::*;
    use crate::oip::{encode_infer_reply, ReplyTensor};

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
                br#"{"inputs":[{"name":"x","shape":[2],"datatype":"FP8","data":[1,2]}]}"#,
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
        let (body, header) = encode_infer_reply("g", Some("1"), Map::new(), &[out]).unwrap();
        let header = header.unwrap();
        let json: Value = serde_json::from_slice(&body[..header]).unwrap();
        assert_eq!(json["outputs"][0]["parameters"]["binary_data_size"], 8);
        assert_eq!(
            data::binary_data(&body[header..], DType::F32, 2, "y").unwrap(),
            TensorData::F32(vec![0.5, -2.0])
        );
    }
}
