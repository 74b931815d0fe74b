//! Where a request's tensors lie in shared memory regions (Triton's system shared memory
//! extension), as the request names them: `shared_memory_region`, `shared_memory_byte_size` and
//! an optional `shared_memory_offset` among an input's or a requested output's `parameters`,
//! read from JSON (`request.rs`) or from a protobuf transport's parameters.
//!
//! Parsing records where each such tensor lies ([`Placement`]) and nothing more; the transport
//! that serves the extension takes the placement out of the request and reads and writes the
//! tensors through the server's registry of regions (`shared_memory.rs`, `crate::shared_memory`).

use std::borrow::Cow;

use serde_json::value::RawValue;
use weir_engine::tensor::DType;

use super::error::{perr, ProtocolError};

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

/// A parameter's value, as JSON or a protobuf transport carries it.
pub enum RegionParameter<'a> {
    /// A string value.
    Text(Cow<'a, str>),
    /// A whole number (negative ones are refused).
    Number(i128),
    /// Anything else.
    Other,
}

impl RegionParameter<'_> {
    /// A JSON value as a parameter.
    fn of_json(raw: &RawValue) -> RegionParameter<'static> {
        if let Ok(text) = serde_json::from_str::<String>(raw.get()) {
            RegionParameter::Text(Cow::Owned(text))
        } else if let Ok(n) = serde_json::from_str::<i128>(raw.get()) {
            RegionParameter::Number(n)
        } else {
            RegionParameter::Other
        }
    }
}

/// Whether `name` may name a region: 1 to [`REGION_NAME_MAX_BYTES`] bytes (the registry keeps
/// no other).
pub fn region_name_fits(name: &str) -> bool {
    !name.is_empty() && name.len() <= REGION_NAME_MAX_BYTES
}

/// The slice JSON `parameters` (of `field`) name, when they name a region ([`parameter_slice`]).
pub(super) fn json_slice(
    raw: RawRegion<'_>,
    field: &str,
) -> Result<Option<RegionSlice>, ProtocolError> {
    let get = |key: &str| {
        match key {
            "shared_memory_region" => raw.region,
            "shared_memory_byte_size" => raw.byte_size,
            "shared_memory_offset" => raw.offset,
            _ => None,
        }
        .map(RegionParameter::of_json)
    };
    parameter_slice(get, field)
}

/// The slice the parameters (looked up by key) of `field` name, when they name a region: a
/// string `shared_memory_region`, a byte count `shared_memory_byte_size`, and an optional byte
/// count `shared_memory_offset` (0 without it).
pub fn parameter_slice<'a>(
    get: impl Fn(&str) -> Option<RegionParameter<'a>>,
    field: &str,
) -> Result<Option<RegionSlice>, ProtocolError> {
    let number = |key: &str| -> Result<Option<u64>, ProtocolError> {
        let field = format!("{field}.{key}");
        match get(key) {
            None => Ok(None),
            Some(RegionParameter::Number(n)) => u64::try_from(n)
                .map(Some)
                .map_err(|_| perr(field, format!("{n} is not a byte count"))),
            Some(_) => Err(perr(field, "must be a non-negative integer")),
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
        Some(RegionParameter::Text(name)) if region_name_fits(&name) => name.into_owned(),
        Some(RegionParameter::Text(_)) => {
            return Err(perr(
                name_field,
                format!("a region name of 1 to {REGION_NAME_MAX_BYTES} bytes"),
            ))
        }
        Some(_) => return Err(perr(name_field, "must be a string")),
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_parameters_name_a_slice_with_integer_sizes() {
        let params = |region: Option<RegionParameter<'static>>, size: i128| {
            move |key: &str| match key {
                "shared_memory_region" => region.as_ref().map(|r| match r {
                    RegionParameter::Text(t) => RegionParameter::Text(t.clone()),
                    RegionParameter::Number(n) => RegionParameter::Number(*n),
                    RegionParameter::Other => RegionParameter::Other,
                }),
                "shared_memory_byte_size" => Some(RegionParameter::Number(size)),
                _ => None,
            }
        };
        let slice = parameter_slice(params(Some(RegionParameter::Text("r".into())), 16), "f")
            .unwrap()
            .unwrap();
        assert_eq!(
            (slice.region.as_str(), slice.offset, slice.byte_size),
            ("r", 0, 16)
        );
        let e =
            parameter_slice(params(Some(RegionParameter::Text("r".into())), -1), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_byte_size");
        let e = parameter_slice(params(Some(RegionParameter::Other), 16), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_region");
        let e = parameter_slice(params(None, 16), "f").unwrap_err();
        assert_eq!(e.field, "f.shared_memory_region");
    }
}
