//! Batches and tensor columns as bytes: the Arrow IPC stream format, which is what weir's own
//! components exchange between processes (remote executors over zenoh, timely exchange between
//! processes). No JSON between weir's own components.
//!
//! A payload is one IPC stream holding one `RecordBatch`. Tensor columns keep their shape in the
//! field metadata, exactly as inside a [`Batch`], so decoding restores them without a side channel.
//!
//! Every payload is decoded as hostile input (it comes from a zenoh peer or another timely
//! process): `frame` checks every declared length against the bytes received before arrow
//! reads any, so no length in a payload reaches an allocation unchecked, and `schema` admits
//! only the Arrow types weir writes, since arrow's schema conversion panics on some well-formed
//! but unsupported flatbuffers (an `Int` of width 0, a type tag without its table, a list without
//! a child). Arrow's record-batch decoding validates what it builds against those checked
//! lengths; should any panic remain reachable in it, `decode_guarded` catches it as the last
//! line of defence, because a panic in a zenoh callback or a timely worker would take the whole
//! process down.
//!
//! Decoding builds the columns over the payload's own bytes: arrow's push decoder slices its
//! `Buffer` for every array whose data lies aligned in it (IPC pads bodies to 8 bytes), and copies
//! only one that does not. A payload handed over as an owned `Vec` ([`decode_columns_owned`], what
//! zenoh's reassembly of a fragmented message yields) is therefore never copied again; a borrowed
//! one is copied once, as arrow's reader would.
//!
//! Encoding tensor columns writes the stream's framing itself (`gather`) so that a payload can
//! leave as a list of slices whose large ones are the columns' own Arrow buffers
//! ([`encode_columns_parts`]); a transport that takes such a list copies a tensor once, into its
//! own buffers, rather than after arrow's writer has copied it into one `Vec`.

mod frame;
mod gather;
mod schema;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, Schema};
use bytes::Bytes;

use crate::batch::{Batch, BatchError, TensorColumn};

/// Errors encoding or decoding a payload.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Arrow could not write or read the IPC stream.
    #[error("Arrow IPC: {0}")]
    Arrow(#[from] ArrowError),
    /// The stream held no record batch.
    #[error("the payload holds no record batch")]
    Empty,
    /// A column is not what weir writes.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A message is cut short: a length in its framing points past the bytes received.
    #[error("message {message}: its {what} needs {needed} bytes, {available} remain")]
    Truncated {
        /// Message index in the stream (0: the schema).
        message: usize,
        /// Which part: `prefix`, `metadata` or `body`.
        what: &'static str,
        /// Bytes the message claims from its start.
        needed: u64,
        /// Bytes left from the message's start.
        available: usize,
    },
    /// A message does not start with the continuation marker `0xFFFFFFFF`.
    #[error("message {message}: no continuation marker")]
    NoContinuation {
        /// Message index in the stream.
        message: usize,
    },
    /// A length in a message's framing is negative.
    #[error("message {message}: {what} {value} is negative")]
    NegativeLength {
        /// Message index in the stream.
        message: usize,
        /// Which length.
        what: &'static str,
        /// The value read.
        value: i64,
    },
    /// A message's metadata is not a valid flatbuffer `Message`.
    #[error("message {message}: invalid metadata: {reason}")]
    Metadata {
        /// Message index in the stream.
        message: usize,
        /// The flatbuffer verifier's complaint.
        reason: String,
    },
    /// A message is not the kind a weir payload has at that place.
    #[error("message {message}: expected {expected}, found {found}")]
    Unexpected {
        /// Message index in the stream.
        message: usize,
        /// What a weir payload has there.
        expected: &'static str,
        /// What came.
        found: String,
    },
    /// A record batch's row count or field-node length passes what the payload can carry.
    #[error("record batch: {what} {value} is outside 0..={cap}")]
    Length {
        /// Which length.
        what: &'static str,
        /// The value read.
        value: i64,
        /// The most the payload's size allows.
        cap: u64,
    },
    /// A record batch buffer lies outside the message body.
    #[error("record batch: buffer {index} (offset {offset}, length {length}) lies outside the {body}-byte body")]
    BufferOutside {
        /// Buffer index.
        index: usize,
        /// Declared offset.
        offset: i64,
        /// Declared length.
        length: i64,
        /// Body length.
        body: u64,
    },
    /// A schema field has a type weir never writes.
    #[error("schema: field `{field}` has {reason}")]
    Schema {
        /// The field's name (cut short).
        field: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A record batch body is compressed; weir never compresses its payloads.
    #[error("record batch: compressed bodies are not accepted")]
    Compressed,
    /// Arrow panicked on a payload that passed the framing checks (caught; see the module doc).
    #[error("Arrow IPC: the decoder rejected the payload ({0})")]
    Panicked(String),
}

fn write_ipc(rb: &RecordBatch) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(rb.get_array_memory_size() + 512);
    {
        let mut writer = StreamWriter::try_new(&mut out, &rb.schema())?;
        writer.write(rb)?;
        writer.finish()?;
    }
    Ok(out)
}

/// The payload's first record batch, its arrays slices of `bytes` where aligned.
fn read_ipc(mut bytes: Buffer) -> Result<RecordBatch, WireError> {
    frame::check_stream(bytes.as_slice())?;
    let mut decoder = StreamDecoder::new();
    decoder.decode(&mut bytes)?.ok_or(WireError::Empty)
}

/// Runs a decode of checked bytes, turning a panic inside arrow into [`WireError::Panicked`].
fn decode_guarded<T>(decode: impl FnOnce() -> Result<T, WireError>) -> Result<T, WireError> {
    catch_unwind(AssertUnwindSafe(decode)).unwrap_or_else(|panic| {
        let reason = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        let reason: String = reason.chars().take(200).collect();
        Err(WireError::Panicked(reason))
    })
}

/// Encodes named tensor columns (all with the same number of rows) as one IPC payload, in parts:
/// concatenated, the parts are the stream [`encode_columns`] writes. Buffers of 16 KiB or more are
/// parts of their own that share the columns' memory (no copy); the rest is gathered into a few
/// owned parts.
///
/// # Errors
/// When Arrow rejects the columns (rows differ, say).
pub fn encode_columns_parts<'a>(
    columns: impl IntoIterator<Item = (&'a str, &'a TensorColumn)>,
) -> Result<Vec<Bytes>, WireError> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    let mut rows = 0;
    for (name, col) in columns {
        fields.push(col.field(name));
        arrays.push(col.to_arrow());
        rows = col.len();
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    let rb = RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)?;
    match gather::write_parts(&rb) {
        Ok(parts) => Ok(parts),
        Err(gather::Unsupported(what)) => {
            tracing::debug!(what = %what, "Payload written by arrow's IPC writer.");
            Ok(vec![Bytes::from(write_ipc(&rb)?)])
        }
    }
}

/// Encodes named tensor columns (all with the same number of rows) as one IPC payload.
///
/// # Errors
/// When Arrow rejects the columns (rows differ, say).
pub fn encode_columns<'a>(
    columns: impl IntoIterator<Item = (&'a str, &'a TensorColumn)>,
) -> Result<Vec<u8>, WireError> {
    let parts = encode_columns_parts(columns)?;
    let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for part in &parts {
        out.extend_from_slice(part);
    }
    Ok(out)
}

/// Decodes a payload written by [`encode_columns`], in the order written.
///
/// # Errors
/// When the bytes are not an IPC stream of tensor columns.
pub fn decode_columns(bytes: &[u8]) -> Result<Vec<(String, TensorColumn)>, WireError> {
    decode_guarded(|| columns_of(read_ipc(Buffer::from(bytes))?))
}

/// Decodes a payload as [`decode_columns`] does, the columns built over `bytes` itself (no copy
/// of aligned data).
///
/// # Errors
/// When the bytes are not an IPC stream of tensor columns.
pub fn decode_columns_owned(bytes: Vec<u8>) -> Result<Vec<(String, TensorColumn)>, WireError> {
    decode_guarded(|| columns_of(read_ipc(Buffer::from_vec(bytes))?))
}

fn columns_of(rb: RecordBatch) -> Result<Vec<(String, TensorColumn)>, WireError> {
    let schema = rb.schema();
    schema
        .fields()
        .iter()
        .zip(rb.columns())
        .map(|(f, c)| Ok((f.name().clone(), TensorColumn::from_arrow(f, c)?)))
        .collect()
}

/// Encodes a whole batch (ids, lineage, parameters, tensors).
///
/// # Errors
/// When Arrow rejects the batch, which weir's own batches never cause.
pub fn encode_batch(batch: &Batch) -> Result<Vec<u8>, WireError> {
    write_ipc(&batch.to_record_batch()?)
}

/// Decodes a payload written by [`encode_batch`].
///
/// # Errors
/// When the bytes are not such a payload.
pub fn decode_batch(bytes: &[u8]) -> Result<Batch, WireError> {
    decode_guarded(|| {
        Ok(Batch::try_from_record_batch(&read_ipc(Buffer::from(
            bytes,
        ))?)?)
    })
}

/// A batch crosses timely's process boundary as its IPC payload (bincode carries the bytes).
/// Decoding is checked like any payload: a bad one is a deserialization error, never an
/// allocation by a length it states. Timely 0.32 itself treats a failed decode on its channels as
/// fatal (`expect` in `timely::dataflow::channels`), so cluster peers must be weir's own
/// processes; that is the cluster link's boundary, not this decoder's.
impl serde::Serialize for Batch {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = encode_batch(self).map_err(serde::ser::Error::custom)?;
        s.serialize_bytes(&bytes)
    }
}

impl<'de> serde::Deserialize<'de> for Batch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes = <Vec<u8>>::deserialize(d)?;
        decode_batch(&bytes).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    #[test]
    fn columns_round_trip_including_slices() {
        let a = TensorColumn::from_data(
            "x",
            vec![2, 3],
            4,
            TensorData::F32((0..24).map(|v| v as f32).collect()),
        )
        .unwrap();
        let b =
            TensorColumn::from_data("k", vec![1], 4, TensorData::I64(vec![7, 8, 9, 10])).unwrap();
        let (a, b) = (a.slice(1, 2), b.slice(1, 2));
        let bytes = encode_columns([("x", &a), ("k", &b)]).unwrap();
        let back = decode_columns(&bytes).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].0, "x");
        assert_eq!(back[0].1.uniform_shape(), Some(&[2, 3][..]));
        assert_eq!(
            back[0].1.f32_values().unwrap(),
            (6..18).map(|v| v as f32).collect::<Vec<_>>().as_slice()
        );
        assert_eq!(back[1].1.i64_values().unwrap(), &[8, 9]);
    }

    /// A uniform and a ragged column of every element type cross the wire unchanged.
    #[test]
    fn every_element_type_round_trips_uniform_and_ragged() {
        for dtype in crate::tensor::DType::ALL {
            let data = TensorData::zeros(dtype, 10);
            let uniform = TensorColumn::from_data("u", vec![5], 2, data.clone()).unwrap();
            let ragged =
                TensorColumn::from_ragged("r", vec![vec![2, 2], vec![3, 2]], data).unwrap();
            let bytes = encode_columns([("u", &uniform), ("r", &ragged)]).unwrap();
            let back = decode_columns(&bytes).unwrap_or_else(|e| panic!("{dtype}: {e}"));
            assert_eq!(back[0].1.dtype(), dtype);
            assert_eq!(back[0].1.data(), uniform.data(), "{dtype}");
            assert_eq!(back[1].1.row_shape(1), vec![3, 2], "{dtype}");
            assert_eq!(back[1].1.data(), ragged.data(), "{dtype}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_columns(b"not arrow").is_err());
        assert!(decode_batch(&[]).is_err());
    }
}

#[cfg(test)]
mod hostile;
