//! Payloads as zenoh bytes, both ways.
//!
//! Sending: an encoded payload's parts ([`weir_engine::wire::encode_columns_parts`]) become one
//! `ZBytes` of as many slices, the large ones the tensors' own Arrow buffers, so zenoh's copy into
//! its transmission batches is the only one on the sending side. Receiving: zenoh hands a large
//! payload over as the fragments it arrived in; [`decode`] joins them once into a `Vec` and the
//! columns are built over that `Vec` (a payload that came in one piece is copied once too, out of
//! zenoh's receive buffer, which is reused).

use weir_engine::batch::TensorColumn;
use weir_engine::wire::{decode_columns_owned, encode_columns_parts, WireError};
use zenoh::bytes::ZBytes;

/// Named columns encoded as one payload of several slices.
///
/// # Errors
/// When Arrow rejects the columns.
pub(crate) fn encode<'a>(
    columns: impl IntoIterator<Item = (&'a str, &'a TensorColumn)>,
) -> Result<ZBytes, WireError> {
    let mut writer = ZBytes::writer();
    for part in encode_columns_parts(columns)? {
        writer.append(ZBytes::from(part));
    }
    Ok(writer.finish())
}

/// The columns of a received payload, in the order written.
///
/// # Errors
/// When the bytes are not an IPC stream of tensor columns.
pub(crate) fn decode(payload: &ZBytes) -> Result<Vec<(String, TensorColumn)>, WireError> {
    decode_columns_owned(payload.to_bytes().into_owned())
}

#[cfg(test)]
mod tests {
    use weir_engine::tensor::TensorData;

    use super::*;

    #[test]
    fn a_payload_of_slices_decodes_to_its_columns() {
        let values: Vec<f32> = (0..3 * 64 * 64).map(|v| v as f32).collect();
        let x = TensorColumn::from_data("x", vec![3, 64, 64], 1, TensorData::F32(values)).unwrap();
        let k = TensorColumn::from_data("k", vec![2], 1, TensorData::I64(vec![4, 5])).unwrap();
        let payload = encode([("x", &x), ("k", &k)]).unwrap();
        assert!(
            payload.slices().count() > 1,
            "the tensor is a slice of its own"
        );
        let back = decode(&payload).unwrap();
        assert_eq!(back[0].1.f32_values().unwrap(), x.f32_values().unwrap());
        assert_eq!(back[1].1.i64_values().unwrap(), &[4, 5]);
    }

    #[test]
    fn a_cut_payload_is_an_error() {
        let x = TensorColumn::from_data("x", vec![4], 1, TensorData::F32(vec![1.0; 4])).unwrap();
        let bytes = encode([("x", &x)]).unwrap().to_bytes().into_owned();
        let cut = ZBytes::from(bytes[..bytes.len() / 2].to_vec());
        assert!(decode(&cut).is_err());
    }
}
