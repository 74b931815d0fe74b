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
use super::region::{self, Placement, RawRegion, RegionSlice, SharedInput};
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
    #[serde(default, borrow)]
    shared_memory_region: Option<&'a RawValue>,
    #[serde(default, borrow)]
    shared_memory_byte_size: Option<&'a RawValue>,
    #[serde(default, borrow)]
    shared_memory_offset: Option<&'a RawValue>,
}

impl<'a> KnownParameters<'a> {
    /// The shared memory slice these parameters (of `field`) name, if any.
    fn region(&self, field: &str) -> Result<Option<RegionSlice>, ProtocolError> {
        region::json_slice(
            RawRegion {
                region: self.shared_memory_region,
                byte_size: self.shared_memory_byte_size,
                offset: self.shared_memory_offset,
            },
            field,
        )
    }
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
    /// The inputs and outputs that lie in shared memory regions; an input there has no elements
    /// until the transport reads them (`shared_memory.rs`).
    pub placement: Placement,
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

/// Where the inputs' binary data comes from: the bytes after the JSON header, or the inputs'
/// elements already decoded from them as they arrived (`tail.rs`), in input order.
enum Binary<'a> {
    Raw(&'a [u8]),
    Decoded {
        parts: std::vec::IntoIter<TensorData>,
        left: usize,
    },
}

impl Binary<'_> {
    /// Binary bytes not yet taken by an input.
    fn remaining(&self) -> usize {
        match self {
            Binary::Raw(b) => b.len(),
            Binary::Decoded { left, .. } => *left,
        }
    }

    /// The next input's `size` bytes (at most [`Binary::remaining`]) as `expected` elements of
    /// `dtype`.
    fn take(
        &mut self,
        size: usize,
        dtype: DType,
        expected: usize,
        field: &str,
    ) -> Result<TensorData, ProtocolError> {
        match self {
            Binary::Raw(b) => {
                let (mine, rest) = b.split_at(size);
                *b = rest;
                data::binary_data(mine, dtype, expected, field)
            }
            Binary::Decoded { parts, left } => {
                // The parts were decoded by `binary_layout` of this same header, so they agree
                // with it; a disagreement is refused, never trusted.
                let part = parts
                    .next()
                    .filter(|p| p.dtype() == dtype && p.len() == expected)
                    .ok_or_else(|| perr(field, "does not match the decoded binary data"))?;
                *left -= size;
                Ok(part)
            }
        }
    }
}

/// Decodes input `i`'s tensor, taking its binary data (if any) from the front of `binary`; an
/// input in a shared memory region comes back empty, with where it lies.
fn parse_input(
    i: usize,
    input: &RawInput<'_>,
    binary: &mut Binary<'_>,
    body_len: usize,
) -> Result<(InputTensor, Option<SharedInput>), ProtocolError> {
    let name = quote(&input.name);
    let field = |f: &str| format!("inputs[{i}] ({name}).{f}");
    let dtype = parse_datatype(&input.datatype, &field("datatype"))?;
    let params = known_parameters(input.parameters, &field("parameters"))?;
    if let Some(slice) = params.region(&field("parameters"))? {
        if params.binary_data_size.is_some() || input.data.is_some() {
            return Err(perr(
                field("parameters.shared_memory_region"),
                "give `data`, `parameters.binary_data_size` or a shared memory region, one of them",
            ));
        }
        let place = (i, slice, dtype);
        let named = format!("inputs[{i}] ({name})");
        let (tensor, shared) = shared_input(place, &input.name, &input.shape, body_len, &named)?;
        return Ok((tensor, Some(shared)));
    }
    let data = match (params.binary_data_size, input.data) {
        (Some(size), None) => {
            let size_field = field("parameters.binary_data_size");
            let size = serde_json::from_str::<u64>(size.get())
                .map_err(|_| perr(&size_field, "must be a non-negative integer"))?;
            let size = usize::try_from(size)
                .ok()
                .filter(|&s| s <= binary.remaining())
                .ok_or_else(|| {
                    perr(
                        &size_field,
                        format!(
                            "{size} bytes, but only {} binary bytes remain in the body",
                            binary.remaining()
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
            (shape, binary.take(size, dtype, expected, &size_field)?)
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
                "missing: give `data`, `parameters.binary_data_size` or a shared memory region",
            ))
        }
    };
    let (shape, data) = data;
    let tensor = InputTensor {
        name: input.name.clone(),
        shape,
        data,
    };
    Ok((tensor, None))
}

/// Input `index` of `dtype` and `shape` (the client's) whose elements lie in `slice`: the input,
/// empty until the transport reads it, and where it lies. `field` names the input
/// (`inputs[0] (x)`), `request_len` bounds the dimensions of an empty shape, as for any input.
pub(super) fn shared_input(
    (index, slice, dtype): (usize, RegionSlice, DType),
    name: &str,
    shape: &[Number],
    request_len: usize,
    field: &str,
) -> Result<(InputTensor, SharedInput), ProtocolError> {
    let (shape, count) = data::checked_shape(shape, request_len, &format!("{field}.shape"))?;
    region::check_input(&slice, dtype, count, field)?;
    let tensor = InputTensor {
        name: name.to_string(),
        shape,
        data: TensorData::empty(dtype),
    };
    Ok((
        tensor,
        SharedInput {
            index,
            dtype,
            slice,
        },
    ))
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
    let (json, binary) = match header_length {
        Some(n) if n > body.len() => {
            return Err(perr(
                "Inference-Header-Content-Length",
                format!("{n} exceeds the body's {} bytes", body.len()),
            ))
        }
        Some(n) => body.split_at(n),
        None => (body, &[][..]),
    };
    parse_parts(json, Binary::Raw(binary), body.len())
}

/// Parses a binary request whose tensors were decoded as the body arrived (`tail.rs`): `json` is
/// the header, `parts` the binary inputs' elements in input order, decoded from the `tail_len`
/// bytes after the header by the layout [`binary_layout`] read from this same header.
///
/// # Errors
/// As [`parse_infer_request`].
pub fn parse_infer_request_split(
    json: &[u8],
    parts: Vec<TensorData>,
    tail_len: usize,
) -> Result<InferRequest, ProtocolError> {
    let binary = Binary::Decoded {
        parts: parts.into_iter(),
        left: tail_len,
    };
    parse_parts(json, binary, json.len().saturating_add(tail_len))
}

/// The binary inputs' element types and byte sizes, in input order, when the header `json`
/// states a binary layout that can be decoded as the `tail_len` bytes after it arrive: every
/// binary input of a type whose every bit pattern is an element (not BOOL, not BYTES), its
/// `binary_data_size` exactly its shape's elements times the width, the sizes adding up to
/// `tail_len`. `None` for any other header, which is then parsed whole by
/// [`parse_infer_request`], naming what is wrong.
pub fn binary_layout(json: &[u8], tail_len: usize) -> Option<Vec<(DType, usize)>> {
    let raw: RawRequest<'_> = serde_json::from_slice(json).ok()?;
    let body_len = json.len().checked_add(tail_len)?;
    let mut layout = Vec::with_capacity(raw.inputs.len());
    let mut total = 0usize;
    for input in &raw.inputs {
        let params = known_parameters(input.parameters, "").ok()?;
        match (params.binary_data_size, input.data) {
            (Some(size), None) => {
                let dtype = DType::from_oip_name(&input.datatype)?;
                if matches!(dtype, DType::Bool | DType::Bytes) {
                    return None;
                }
                let size = usize::try_from(serde_json::from_str::<u64>(size.get()).ok()?).ok()?;
                let (_, expected) = data::checked_shape(&input.shape, body_len, "").ok()?;
                if expected.checked_mul(dtype.byte_width()?) != Some(size) {
                    return None;
                }
                total = total.checked_add(size)?;
                layout.push((dtype, size));
            }
            (None, Some(_)) => {}
            _ => return None,
        }
    }
    (total == tail_len).then_some(layout)
}

/// Parses the JSON header `json` of a `body_len`-byte body, the binary inputs' data taken from
/// `binary`.
fn parse_parts(
    json: &[u8],
    mut binary: Binary<'_>,
    body_len: usize,
) -> Result<InferRequest, ProtocolError> {
    let raw: RawRequest<'_> = serde_json::from_slice(json)
        .map_err(|e| perr("body", format!("invalid JSON: {}", quote(&e.to_string()))))?;
    let mut inputs = Vec::with_capacity(raw.inputs.len());
    let mut placement = Placement::default();
    for (i, input) in raw.inputs.iter().enumerate() {
        let (tensor, shared) = parse_input(i, input, &mut binary, body_len)?;
        inputs.push(tensor);
        placement.inputs.extend(shared);
    }
    if binary.remaining() != 0 {
        return Err(perr(
            "body",
            format!(
                "{} binary bytes left over after every input",
                binary.remaining()
            ),
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
                let params = known_parameters(o.parameters, &field)?;
                let asked = params.binary_data;
                if let Some(slice) = params.region(&field)? {
                    placement.outputs.push((o.name.clone(), field, slice));
                }
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
        body_bytes: body_len,
        trace: None,
        placement,
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
            region: None,
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
