//! Hostile payloads against the decoder: hand-made length bombs, and proptest fuzzing over
//! arbitrary bytes and over valid payloads with bytes flipped, cut short or lengths rewritten.
//! Properties: decoding never panics out of the decoder, never builds more than a small
//! multiple of the payload, and valid payloads round-trip.

use std::sync::Arc;

use arrow_array::{StringArray, UInt64Array};
use proptest::prelude::*;

use super::*;
use crate::lineage;
use crate::tensor::TensorData;

fn batch(rows: usize, width: usize, parameters: &str) -> Batch {
    let values = (0..rows * width).map(|v| v as f32).collect();
    let col = TensorColumn::from_data("x", vec![width], rows, TensorData::F32(values)).unwrap();
    let id_list: Vec<u64> = (0..rows as u64).collect();
    let lineage = lineage::from_clients(&id_list, 0);
    let ids = UInt64Array::from(id_list);
    let params = StringArray::from(vec![Some(parameters); rows]);
    Batch::new(ids, lineage, vec![(Arc::from("x"), col)])
        .unwrap()
        .with_parameters(params)
        .unwrap()
}

fn columns(rows: usize, width: usize) -> Vec<u8> {
    let values = (0..rows * width).map(|v| v as i64).collect();
    let col = TensorColumn::from_data("k", vec![width], rows, TensorData::I64(values)).unwrap();
    encode_columns([("k", &col)]).unwrap()
}

/// Where the record batch message's metadata starts, and its `bodyLength`.
fn second_message(bytes: &[u8]) -> (usize, usize, i64) {
    let meta = |at: usize| i32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    let schema_meta = meta(0);
    let at = 8 + schema_meta;
    let len = meta(at);
    let msg = arrow_ipc::root_as_message(&bytes[at + 8..at + 8 + len]).unwrap();
    (at + 8, len, msg.bodyLength())
}

/// Replaces the first little-endian occurrence of `old` within `range` by `new`.
fn rewrite_i64(bytes: &mut [u8], range: std::ops::Range<usize>, old: i64, new: i64) {
    let window = &bytes[range.clone()];
    let pos = window
        .windows(8)
        .position(|w| w == old.to_le_bytes())
        .expect("value present in the metadata");
    bytes[range.start + pos..range.start + pos + 8].copy_from_slice(&new.to_le_bytes());
}

/// Whether either decoder had to catch a panic (the schema and framing checks should leave
/// arrow nothing to panic on).
fn caught_a_panic(bytes: &[u8]) -> bool {
    matches!(decode_columns(bytes), Err(WireError::Panicked(_)))
        || matches!(decode_batch(bytes), Err(WireError::Panicked(_)))
}

/// Decoded columns' memory, for the bound on what a payload may build.
fn decoded_size(bytes: &[u8]) -> Option<usize> {
    let cols = decode_columns(bytes).ok()?;
    Some(cols.iter().map(|(_, c)| c.memory_size()).sum())
}

#[test]
fn a_body_claiming_a_terabyte_is_refused_before_any_allocation() {
    let mut bytes = columns(2, 3);
    let (start, len, body) = second_message(&bytes);
    rewrite_i64(&mut bytes, start..start + len, body, 1 << 40);
    let err = decode_columns(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            WireError::Truncated {
                what: "body",
                message: 1,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_metadata_length_past_the_payload_is_refused() {
    let mut bytes = columns(1, 1);
    bytes[4..8].copy_from_slice(&i32::MAX.to_le_bytes());
    assert!(matches!(
        decode_columns(&bytes),
        Err(WireError::Truncated {
            what: "metadata",
            message: 0,
            ..
        })
    ));
    bytes[4..8].copy_from_slice(&(-5i32).to_le_bytes());
    assert!(matches!(
        decode_columns(&bytes),
        Err(WireError::NegativeLength { message: 0, .. })
    ));
}

#[test]
fn a_row_count_past_the_payload_is_refused() {
    let mut bytes = columns(3, 2);
    let (start, len, _) = second_message(&bytes);
    rewrite_i64(&mut bytes, start..start + len, 3, 1 << 50);
    let err = decode_columns(&bytes).unwrap_err();
    assert!(matches!(err, WireError::Length { .. }), "{err}");
}

#[test]
fn a_bare_header_claiming_a_huge_body_is_refused() {
    // A 40-byte message of the shape an attacker sends: a marker, a length, then garbage that is
    // no valid flatbuffer, or a prefix with nothing behind it.
    let mut bytes = vec![0xFF; 4];
    bytes.extend_from_slice(&32i32.to_le_bytes());
    bytes.extend_from_slice(&[0x7F; 32]);
    assert!(decode_batch(&bytes).is_err());
    assert!(matches!(
        decode_batch(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
        Err(WireError::Truncated { what: "prefix", .. })
    ));
}

#[test]
fn a_payload_without_its_record_batch_is_refused() {
    let bytes = columns(1, 1);
    let (start, _, _) = second_message(&bytes);
    // Only the schema: no record batch.
    assert!(matches!(
        decode_columns(&bytes[..start - 8]),
        Err(WireError::Empty)
    ));
    // Schema then end-of-stream marker.
    let mut ended = bytes[..start - 8].to_vec();
    ended.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
    assert!(matches!(decode_columns(&ended), Err(WireError::Empty)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes are an error, never a panic out of the decoder.
    #[test]
    fn arbitrary_bytes_are_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        prop_assert!(decode_columns(&bytes).is_err());
        prop_assert!(decode_batch(&bytes).is_err());
    }

    /// Valid payloads round-trip.
    #[test]
    fn batches_round_trip(rows in 1usize..20, width in 1usize..8, params in "[a-z]{0,12}") {
        let b = batch(rows, width, &params);
        let back = decode_batch(&encode_batch(&b).unwrap()).unwrap();
        prop_assert_eq!(back.request_ids(), b.request_ids());
        prop_assert_eq!(back.row_parameters(rows - 1), Some(params.as_str()));
        prop_assert_eq!(
            back.tensor("x").unwrap().f32_values().unwrap(),
            b.tensor("x").unwrap().f32_values().unwrap()
        );
    }

    /// A valid payload with bytes flipped decodes to an error or to columns no larger than a
    /// small multiple of the payload.
    #[test]
    fn flipped_bytes_stay_bounded(
        rows in 1usize..16,
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = columns(rows, 3);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(size) = decoded_size(&bytes) {
            prop_assert!(size <= 16 * bytes.len() + 4096, "{size} from {}", bytes.len());
        }
        prop_assert!(!caught_a_panic(&bytes));
    }

    /// Every 8-byte word of a valid payload rewritten to a huge or negative length is refused or
    /// stays bounded.
    #[test]
    fn lengths_rewritten_to_huge_values_are_refused(
        rows in 1usize..16,
        at in any::<prop::sample::Index>(),
        value in prop::sample::select(vec![1i64 << 40, i64::MAX, -1, i64::MIN, 1 << 62, (1 << 31) - 1]),
        narrow in any::<bool>(),
    ) {
        let mut bytes = encode_batch(&batch(rows, 2, "{\"a\":1}")).unwrap();
        let width = if narrow { 4 } else { 8 };
        let i = at.index(bytes.len() - width + 1);
        bytes[i..i + width].copy_from_slice(&value.to_le_bytes()[..width]);
        if let Ok(b) = decode_batch(&bytes) {
            prop_assert!(b.num_rows() <= bytes.len());
        }
        if let Some(size) = decoded_size(&bytes) {
            prop_assert!(size <= 16 * bytes.len() + 4096);
        }
        prop_assert!(!caught_a_panic(&bytes));
    }

    /// A valid payload cut short anywhere is an error.
    #[test]
    fn truncated_payloads_are_an_error(rows in 1usize..16, cut in any::<prop::sample::Index>()) {
        let bytes = encode_batch(&batch(rows, 2, "")).unwrap();
        let (start, len, body) = second_message(&bytes);
        let end = start + len + body as usize;
        let cut = cut.index(end);
        prop_assert!(decode_batch(&bytes[..cut]).is_err());
    }
}
