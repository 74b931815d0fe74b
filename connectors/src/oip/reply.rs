//! Open Inference Protocol replies: the graph's outputs written as a JSON body, with the
//! outputs the request asked for as binary appended after it (the binary tensor extension).
//!
//! Element data is serialized straight from the typed vectors (no `serde_json::Value` per
//! element), each datatype as `element.rs` says. Writing can fail for BYTES only: an element that
//! is not UTF-8 has no JSON form, and one over 4 GiB no binary length; the reply then is a
//! [`ReplyError`] naming the output and the element, never a lossy text.

use std::collections::BTreeMap;

use serde::ser::SerializeSeq;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};
use weir_engine::tensor::{Tensor, TensorData};
use weir_engine::with_elements;

use super::element::{EncodeFault, OipElement};
use super::error::ReplyError;
use super::region::RegionSlice;

/// One output of a reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplyTensor {
    /// Output name.
    pub name: String,
    /// The tensor (shape including any batch dimension).
    pub tensor: Tensor,
    /// Send as binary data.
    pub binary: bool,
    /// Where the tensor was written instead (the shared memory extension): the reply then
    /// carries no data for it (over gRPC, the region and byte size in its parameters).
    pub region: Option<RegionSlice>,
}

#[derive(Serialize)]
struct RawReply<'a> {
    model_name: &'a str,
    model_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    parameters: Map<String, Value>,
    outputs: Vec<RawReplyOutput<'a>>,
}

#[derive(Serialize)]
struct RawReplyOutput<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [usize],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<&'static str, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<JsonData<'a>>,
}

/// A tensor's elements as a flat JSON array; every element was checked to have a JSON form.
struct JsonData<'a>(&'a TensorData);

impl Serialize for JsonData<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        with_elements!(self.0, v => json_array(v, s))
    }
}

fn json_array<T: OipElement, S: Serializer>(values: &[T], s: S) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(values.len()))?;
    for v in values {
        seq.serialize_element(&JsonElement(v))?;
    }
    seq.end()
}

struct JsonElement<'a, T>(&'a T);

impl<T: OipElement> Serialize for JsonElement<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.write_json(s)
    }
}

/// The index and fault of the first element of `values` that `fault` finds one in.
fn first_fault<T: OipElement>(
    values: &[T],
    fault: impl Fn(&T) -> Option<EncodeFault>,
) -> Option<(usize, EncodeFault)> {
    values
        .iter()
        .enumerate()
        .find_map(|(i, v)| fault(v).map(|f| (i, f)))
}

/// Why the elements of `data` cannot be written as the binary extension's bytes (a BYTES element
/// past a 4-byte length), if they cannot: the output named `output`'s [`ReplyError`].
pub(super) fn binary_fault(data: &TensorData, output: &str) -> Option<ReplyError> {
    with_elements!(data, v => first_fault(v, OipElement::binary_fault))
        .map(|(i, f)| ReplyError::new(output, i, f))
}

/// Writes a reply body; returns it and, when any output is binary, the JSON header's length.
///
/// # Errors
/// A [`ReplyError`] when an output asked for as JSON holds BYTES that are not UTF-8, or one
/// asked for as binary holds an element over 4 GiB.
pub fn encode_infer_reply(
    model: &str,
    id: Option<&str>,
    parameters: Map<String, Value>,
    outputs: &[ReplyTensor],
) -> Result<(Vec<u8>, Option<usize>), ReplyError> {
    let mut binary = Vec::new();
    let mut raw_outputs = Vec::with_capacity(outputs.len());
    for o in outputs {
        let data = &o.tensor.data;
        let mut parameters = BTreeMap::new();
        // An output written to its region has no data here, and no parameters, as Triton
        // answers (its clients read `binary_data_size` from any output that has parameters).
        let json = if o.region.is_some() {
            None
        } else {
            let fault = if o.binary {
                binary_fault(data, &o.name)
            } else {
                with_elements!(data, v => first_fault(v, OipElement::json_fault))
                    .map(|(i, f)| ReplyError::new(&o.name, i, f))
            };
            if let Some(e) = fault {
                return Err(e);
            }
            if o.binary {
                let start = binary.len();
                data.write_le(&mut binary);
                parameters.insert("binary_data_size", Value::from(binary.len() - start));
                None
            } else {
                Some(JsonData(data))
            }
        };
        raw_outputs.push(RawReplyOutput {
            name: &o.name,
            datatype: o.tensor.dtype().oip_name(),
            shape: &o.tensor.shape,
            parameters,
            data: json,
        });
    }
    let reply = RawReply {
        model_name: model,
        model_version: "1",
        id,
        parameters,
        outputs: raw_outputs,
    };
    // Every element was checked to have a JSON form, and maps have string keys: writing to a
    // `Vec` cannot fail.
    let mut body = serde_json::to_vec(&reply)
        .unwrap_or_else(|e| format!("{{\"error\":\"encoding the reply: {e}\"}}").into_bytes());
    if outputs.iter().any(|o| o.binary && o.region.is_none()) {
        let header = body.len();
        body.extend_from_slice(&binary);
        Ok((body, Some(header)))
    } else {
        Ok((body, None))
    }
}
