//! Inputs and outputs that lie in shared memory regions (Triton's system shared memory
//! extension), as a request names them: `shared_memory_region`, `shared_memory_byte_size` and
//! an optional `shared_memory_offset` among an input's or a requested output's `parameters`.
//!
//! Parsing records where each such tensor lies ([`Placement`]) and nothing more; the transport
//! that serves the extension takes the placement out of the request, reads the inputs through
//! the server's registry of regions (`crate::shared_memory`) and writes the outputs after the
//! graph answers. A transport that does not serve it leaves the placement in, and the request is
//! refused naming the field (`infer.rs`), so an input is never run without its data and an
//! output never answered without it.

use serde_json::value::RawValue;
use weir_engine::tensor::{element_count, DType, TensorData};

use super::data;
use super::error::{perr, ProtocolError};
use super::reply::ReplyTensor;
use super::request::InferRequest;
use crate::echo::quote;

/// Longest region name a request may give (as long as any the registry keeps).
pub const REGION_NAME_MAX_BYTES: usize = 256;

/// Where a tensor lies: `byte_size` bytes at `offset` into the registered region `region`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionSlice {
    /// The region's registered name.
    pub region: String,
    /// Bytes into the region.
    pub offset: u64,
    /// Bytes the tensor may take.
    pub byte_size: u64,
}

/// An input whose data lies in a region: `inputs[index]` of a request, of `dtype`, its data
/// empty until read.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedInput {
    /// Its index among the request's inputs.
    pub index: usize,
    /// Its element type.
    pub dtype: DType,
    /// Where its bytes lie.
    pub slice: RegionSlice,
}

/// A request's tensors in shared memory: the inputs to read before it runs, and the outputs
/// (by name, with the field that asked) to write after.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// Inputs to read from regions.
    pub inputs: Vec<SharedInput>,
    /// Outputs to write to regions: name, the field that asked, where.
    pub outputs: Vec<(String, String, RegionSlice)>,
}

/// The three parameters as sent, raw.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RawRegion<'a> {
    pub region: Option<&'a RawValue>,
    pub byte_size: Option<&'a RawValue>,
    pub offset: Option<&'a RawValue>,
}

/// A parameter's name and value as a protobuf transport carries them.
pub enum RegionParameter<'a> {
    /// A string value.
    Text(&'a str),
    /// A whole number (negative ones are refused).
    Number(i128),
    /// Anything else.
    Other,
}

/// Checks a region name given for `field`.
fn region_name(name: &str, field: &str) -> Result<String, ProtocolError> {
    if name.is_empty() || name.len() > REGION_NAME_MAX_BYTES {
        return Err(perr(
            field,
            format!("a region name of 1 to {REGION_NAME_MAX_BYTES} bytes"),
        ));
    }
    Ok(name.to_string())
}

fn byte_count(value: i128, field: &str) -> Result<u64, ProtocolError> {
    u64::try_from(value).map_err(|_| perr(field, format!("{value} is not a byte count")))
}

/// The slice `parameters` (of `field`) name, when they name a region.
pub(super) fn json_slice(
    raw: RawRegion<'_>,
    field: &str,
) -> Result<Option<RegionSlice>, ProtocolError> {
    let Some(region) = raw.region else {
        if raw.byte_size.is_some() || raw.offset.is_some() {
            return Err(perr(
                format!("{field}.shared_memory_region"),
                "missing: a shared memory byte size or offset needs its region",
            ));
        }
        return Ok(None);
    };
    let name_field = format!("{field}.shared_memory_region");
    let name: String =
        serde_json::from_str(region.get()).map_err(|_| perr(&name_field, "must be a string"))?;
    let number = |raw: Option<&RawValue>, key: &str| -> Result<Option<u64>, ProtocolError> {
        raw.map(|v| {
            serde_json::from_str::<u64>(v.get())
                .map_err(|_| perr(format!("{field}.{key}"), "must be a non-negative integer"))
        })
        .transpose()
    };
    Ok(Some(RegionSlice {
        region: region_name(&name, &name_field)?,
        byte_size: number(raw.byte_size, "shared_memory_byte_size")?.ok_or_else(|| {
            perr(
                format!("{field}.shared_memory_byte_size"),
                "missing: a shared memory region needs the tensor's byte size",
            )
        })?,
        offset: number(raw.offset, "shared_memory_offset")?.unwrap_or(0),
    }))
}

/// The slice a protobuf transport's parameters (looked up by key) name, when they name a region.
pub fn parameter_slice<'a>(
    get: impl Fn(&str) -> Option<RegionParameter<'a>>,
    field: &str,
) -> Result<Option<RegionSlice>, ProtocolError> {
    let number = |key: &str| -> Result<Option<u64>, ProtocolError> {
        let field = format!("{field}.{key}");
        match get(key) {
            None => Ok(None),
            Some(RegionParameter::Number(n)) => byte_count(n, &field).map(Some),
            Some(_) => Err(perr(field, "must be an integer parameter")),
        }
    };
    let name_field = format!("{field}.shared_memory_region");
    let name = match get("shared_memory_region") {
        None => {
            if get("shared_memory_byte_size").is_some() || get("shared_memory_offset").is_some() {
                return Err(perr(
                    name_field,
                    "missing: a shared memory byte size or offset needs its region",
                ));
            }
            return Ok(None);
        }
        Some(RegionParameter::Text(name)) => region_name(name, &name_field)?,
        Some(_) => return Err(perr(name_field, "must be a string parameter")),
    };
    Ok(Some(RegionSlice {
        region: name,
        byte_size: number("shared_memory_byte_size")?.ok_or_else(|| {
            perr(
                format!("{field}.shared_memory_byte_size"),
                "missing: a shared memory region needs the tensor's byte size",
            )
        })?,
        offset: number("shared_memory_offset")?.unwrap_or(0),
    }))
}

/// Checks that an input of `shape` (already checked, `count` elements) and `dtype` can lie in
/// `slice`: a fixed-width type's bytes are exactly its byte size.
pub(super) fn check_input(
    slice: &RegionSlice,
    dtype: DType,
    count: usize,
    field: &str,
) -> Result<(), ProtocolError> {
    if let Some(width) = dtype.byte_width() {
        let needed = count.checked_mul(width).map(|n| n as u64);
        if needed != Some(slice.byte_size) {
            return Err(perr(
                format!("{field}.parameters.shared_memory_byte_size"),
                format!(
                    "{} bytes, but the shape's {count} elements of {} take {}",
                    slice.byte_size,
                    dtype.oip_name(),
                    needed.map_or_else(|| "more than this machine holds".into(), |n| n.to_string())
                ),
            ));
        }
    }
    Ok(())
}

impl Placement {
    /// Whether the request names no region.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty() && self.outputs.is_empty()
    }

    /// Bytes the inputs to read take, in all (saturating: a total past memory is refused by the
    /// byte budget before anything is read).
    pub fn input_bytes(&self) -> usize {
        self.inputs.iter().fold(0usize, |n, i| {
            n.saturating_add(usize::try_from(i.slice.byte_size).unwrap_or(usize::MAX))
        })
    }

    /// Reads each input's bytes through `read` (which bounds and fetches them) into `request`'s
    /// inputs, decoded as the binary extension's bytes are.
    ///
    /// # Errors
    /// A [`ProtocolError`] on the input's `shared_memory_region` when `read` refuses, or on the
    /// input when the bytes are not its elements (a BYTES length past the end).
    pub fn read_inputs(
        &self,
        request: &mut InferRequest,
        mut read: impl FnMut(&RegionSlice) -> Result<Vec<u8>, String>,
    ) -> Result<(), ProtocolError> {
        for shared in &self.inputs {
            let Some(input) = request.inputs.get_mut(shared.index) else {
                continue;
            };
            let field = format!("inputs[{}] ({})", shared.index, quote(&input.name));
            let expected = element_count(&input.shape).unwrap_or(0);
            let bytes = read(&shared.slice)
                .map_err(|why| perr(format!("{field}.parameters.shared_memory_region"), why))?;
            input.data = data::binary_data(
                &bytes,
                shared.dtype,
                expected,
                &format!("{field}.parameters.shared_memory_region"),
            )?;
        }
        Ok(())
    }

    /// Writes each output asked for in a region through `write` and marks it so that the reply
    /// carries its place instead of its data; an output the graph did not give is left out, as
    /// in any reply.
    ///
    /// # Errors
    /// A [`ProtocolError`] on the output's `shared_memory_byte_size` when its bytes do not fit
    /// the slice, or on its region when `write` refuses.
    pub fn write_outputs(
        &self,
        outputs: &mut [ReplyTensor],
        mut write: impl FnMut(&RegionSlice, &[u8]) -> Result<(), String>,
    ) -> Result<(), ProtocolError> {
        for (name, field, slice) in &self.outputs {
            let Some(out) = outputs.iter_mut().find(|o| &o.name == name) else {
                continue;
            };
            if let TensorData::Bytes(v) = &out.tensor.data {
                if let Some(i) = v.iter().position(|e| u32::try_from(e.len()).is_err()) {
                    return Err(perr(
                        field.as_str(),
                        format!("element {i} is longer than a 4-byte length states"),
                    ));
                }
            }
            let mut bytes = Vec::new();
            out.tensor.data.write_le(&mut bytes);
            if bytes.len() as u64 > slice.byte_size {
                return Err(perr(
                    format!("{field}.shared_memory_byte_size"),
                    format!(
                        "{} bytes, but output `{}` takes {}",
                        slice.byte_size,
                        quote(name),
                        bytes.len()
                    ),
                ));
            }
            write(slice, &bytes)
                .map_err(|why| perr(format!("{field}.shared_memory_region"), why))?;
            out.tensor.data = TensorData::empty(out.tensor.dtype());
            out.region = Some(RegionSlice {
                byte_size: bytes.len() as u64,
                ..slice.clone()
            });
        }
        Ok(())
    }
}

/// Refuses a request that still names a region: the transport it came by does not serve shared
/// memory.
pub(super) fn refuse_unserved(request: &InferRequest) -> Result<(), ProtocolError> {
    if let Some(i) = request.placement.inputs.first() {
        return Err(perr(
            format!("inputs[{}].parameters.shared_memory_region", i.index),
            "shared memory is served over HTTP and gRPC, not on this transport",
        ));
    }
    if let Some((_, field, _)) = request.placement.outputs.first() {
        return Err(perr(
            format!("{field}.shared_memory_region"),
            "shared memory is served over HTTP and gRPC, not on this transport",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oip::parse_infer_request;

    #[test]
    fn a_transport_without_shared_memory_refuses_a_request_that_names_a_region() {
        let input = br#"{"inputs": [{"name": "x", "shape": [2], "datatype": "INT32",
            "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 8}}]}"#;
        let request = parse_infer_request(input, None).unwrap();
        assert_eq!(request.placement.input_bytes(), 8);
        let e = refuse_unserved(&request).unwrap_err();
        assert_eq!(e.field, "inputs[0].parameters.shared_memory_region");
        let output =
            br#"{"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1]}],
            "outputs": [{"name": "y", "parameters": {"shared_memory_region": "r",
                "shared_memory_byte_size": 8, "shared_memory_offset": 4}}]}"#;
        let mut request = parse_infer_request(output, None).unwrap();
        assert_eq!(
            request.placement.outputs,
            vec![(
                "y".to_string(),
                "outputs[0] (y).parameters".to_string(),
                RegionSlice {
                    region: "r".into(),
                    offset: 4,
                    byte_size: 8
                }
            )]
        );
        let e = refuse_unserved(&request).unwrap_err();
        assert_eq!(e.field, "outputs[0] (y).parameters.shared_memory_region");
        // Taken out by a transport that serves it, the request goes on.
        std::mem::take(&mut request.placement);
        assert!(refuse_unserved(&request).is_ok());
    }

    #[test]
    fn protobuf_parameters_name_a_slice_with_integer_sizes() {
        let params = |region: Option<RegionParameter<'static>>, size: i128| {
            move |key: &str| match key {
                "shared_memory_region" => region.as_ref().map(|r| match r {
                    RegionParameter::Text(t) => RegionParameter::Text(t),
                    RegionParameter::Number(n) => RegionParameter::Number(*n),
                    RegionParameter::Other => RegionParameter::Other,
                }),
                "shared_memory_byte_size" => Some(RegionParameter::Number(size)),
                _ => None,
            }
        };
        let slice = parameter_slice(params(Some(RegionParameter::Text("r")), 16), "f")
            .unwrap()
            .unwrap();
        assert_eq!(
            (slice.region.as_str(), slice.offset, slice.byte_size),
            ("r", 0, 16)
        );
        let e = parameter_slice(params(Some(RegionParameter::Text("r")), -1), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_byte_size");
        let e = parameter_slice(params(Some(RegionParameter::Other), 16), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_region");
        let e = parameter_slice(params(None, 16), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_region");
    }
}
