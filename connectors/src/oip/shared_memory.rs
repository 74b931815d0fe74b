//! A placement's tensors moved: the inputs read into the request before it runs, the outputs
//! written after the graph answers, each through a function the transport gives (the registry's
//! reads and writes, `crate::shared_memory`). A transport that does not serve shared memory
//! leaves the placement in the request, and the request is refused naming the field
//! ([`refuse_unserved`], called by `infer.rs`), so an input is never run without its data and an
//! output never answered without it.

use weir_engine::tensor::{element_count, TensorData};

use super::data;
use super::error::{perr, ProtocolError};
use super::region::{Placement, RegionSlice};
use super::reply::{binary_fault, ReplyTensor};
use super::request::InferRequest;
use crate::echo::quote;

impl Placement {
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
            if let Some(e) = binary_fault(&out.tensor.data, name) {
                return Err(perr(field.as_str(), e.to_string()));
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
}
