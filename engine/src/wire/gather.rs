//! Writing a payload without copying its tensors: the IPC stream's framing is written here and
//! the large Arrow buffers are handed on as they are.
//!
//! arrow's `StreamWriter` copies every buffer of a record batch into one body `Vec`: for a
//! 600 KiB image that is a fresh allocation and a full copy per request, before zenoh copies the
//! bytes again into its transmission batches. This writer produces the same stream — arrow's own
//! schema message, a record batch message whose flatbuffer it builds with arrow's generated
//! builders, the body, the end-of-stream marker — as a list of [`Bytes`]: small pieces (framing,
//! offsets, validity bitmaps, padding) gathered into owned chunks, and every buffer of at least
//! [`SHARED_MIN_BYTES`] passed as a `Bytes` owning a clone of its Arrow [`Buffer`] (a reference
//! count, no copy). A transport that sends a list of slices (zenoh's `ZBytes`) then copies the
//! tensor once, into its own batches.
//!
//! The body follows arrow's writer's layout for the types weir writes (primitives, binary and
//! UTF-8, lists, fixed-size lists, structs): each field's node, its validity bitmap, its own
//! buffers, then its children, each buffer padded to [`ALIGNMENT`]; sliced arrays are cut to
//! their rows and list offsets rebased to 0, as arrow does. A field without nulls gets an empty
//! validity bitmap, which the format allows (arrow writes one of all ones). Any other type is
//! [`Unsupported`], and the caller falls back on arrow's writer. Decoding needs nothing new: the
//! stream is one arrow's reader reads.

use std::mem;

use arrow_array::{Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_ipc::writer::IpcWriteOptions;
use arrow_ipc::writer::{write_message, DictionaryTracker, EncodedData, IpcDataGenerator};
use arrow_ipc::{FieldNode, MessageBuilder, MessageHeader, MetadataVersion, RecordBatchBuilder};
use arrow_schema::DataType;
use bytes::Bytes;

/// Buffers at least this long travel as their own slice; shorter ones are copied into the
/// gathered chunk beside them (a copy of a few KiB costs less than a slice to track).
pub(super) const SHARED_MIN_BYTES: usize = 16 * 1024;

/// Body buffers start at multiples of this many bytes (arrow's writer's default).
pub(super) const ALIGNMENT: usize = 64;

const PADDING: [u8; ALIGNMENT] = [0; ALIGNMENT];

/// The end-of-stream marker: a continuation marker and a zero metadata length.
const END_OF_STREAM: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];

/// A column this writer does not lay out (a type weir's tensor columns never have, or a length
/// past what the format's `i64` holds); arrow's writer handles it instead.
#[derive(Debug)]
pub(super) struct Unsupported(pub(super) String);

/// The body being written: its parts so far, the chunk being gathered, and the descriptors the
/// record batch message lists.
#[derive(Default)]
struct Body {
    parts: Vec<Bytes>,
    gathered: Vec<u8>,
    len: usize,
    buffers: Vec<arrow_ipc::Buffer>,
    nodes: Vec<FieldNode>,
}

/// An Arrow buffer as the owner of a [`Bytes`] (arrow's `Buffer` derefs to bytes but does not
/// implement `AsRef<[u8]>`).
struct SharedBuffer(Buffer);

impl AsRef<[u8]> for SharedBuffer {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

fn as_i64(n: usize) -> Result<i64, Unsupported> {
    i64::try_from(n).map_err(|_| Unsupported(format!("a length of {n} bytes")))
}

impl Body {
    /// Appends `buffer` to the body, shared when long, copied when short, then its padding.
    fn buffer(&mut self, buffer: Buffer) -> Result<(), Unsupported> {
        let n = buffer.len();
        self.buffers
            .push(arrow_ipc::Buffer::new(as_i64(self.len)?, as_i64(n)?));
        if n >= SHARED_MIN_BYTES {
            if !self.gathered.is_empty() {
                self.parts.push(Bytes::from(mem::take(&mut self.gathered)));
            }
            self.parts.push(Bytes::from_owner(SharedBuffer(buffer)));
        } else {
            self.gathered.extend_from_slice(buffer.as_slice());
        }
        let pad = n.next_multiple_of(ALIGNMENT) - n;
        self.gathered.extend_from_slice(&PADDING[..pad]);
        self.len += n + pad;
        Ok(())
    }

    /// Appends an empty buffer (a validity bitmap of a field without nulls).
    fn empty(&mut self) -> Result<(), Unsupported> {
        self.buffers
            .push(arrow_ipc::Buffer::new(as_i64(self.len)?, 0));
        Ok(())
    }

    /// Appends a field's node and buffers, then its children's, in the order arrow reads them.
    fn field(&mut self, data: &ArrayData) -> Result<(), Unsupported> {
        let len = data.len();
        self.nodes
            .push(FieldNode::new(as_i64(len)?, as_i64(data.null_count())?));
        match data.nulls().filter(|n| n.null_count() > 0) {
            Some(nulls) => self.buffer(nulls.inner().sliced())?,
            None => self.empty()?,
        }
        let data_type = data.data_type();
        match data_type {
            DataType::Binary | DataType::Utf8 => {
                let (offsets, start, end) = rebased_offsets(data)?;
                self.buffer(offsets)?;
                let values = own_buffer(data, 1)?;
                self.buffer(slice(values, start, end - start)?)
            }
            DataType::Boolean => {
                let values = own_buffer(data, 0)?;
                if data
                    .offset()
                    .checked_add(len)
                    .is_none_or(|e| e > values.len() * 8)
                {
                    return Err(Unsupported("a boolean array past its buffer".into()));
                }
                self.buffer(values.bit_slice(data.offset(), len))
            }
            t if t.is_primitive() => {
                let width = t
                    .primitive_width()
                    .ok_or_else(|| Unsupported(format!("{t} has no width")))?;
                let values = own_buffer(data, 0)?;
                let start = data.offset().checked_mul(width);
                let bytes = len.checked_mul(width);
                match (start, bytes) {
                    (Some(start), Some(bytes)) => self.buffer(slice(values, start, bytes)?),
                    _ => Err(Unsupported("a primitive array past usize".into())),
                }
            }
            DataType::List(_) => {
                let (offsets, start, end) = rebased_offsets(data)?;
                self.buffer(offsets)?;
                let child = only_child(data)?;
                check_child_range(child, start, end - start)?;
                self.field(&child.slice(start, end - start))
            }
            DataType::FixedSizeList(_, size) => {
                let size = usize::try_from(*size)
                    .map_err(|_| Unsupported(format!("a list size of {size}")))?;
                let child = only_child(data)?;
                let (Some(start), Some(n)) =
                    (data.offset().checked_mul(size), len.checked_mul(size))
                else {
                    return Err(Unsupported("a fixed-size list past usize".into()));
                };
                check_child_range(child, start, n)?;
                self.field(&child.slice(start, n))
            }
            // A struct's children are sliced with it (`ArrayData::slice`).
            DataType::Struct(_) => data.child_data().iter().try_for_each(|c| self.field(c)),
            other => Err(Unsupported(format!("the type {other}"))),
        }
    }
}

fn own_buffer(data: &ArrayData, index: usize) -> Result<&Buffer, Unsupported> {
    data.buffers()
        .get(index)
        .ok_or_else(|| Unsupported(format!("{} without buffer {index}", data.data_type())))
}

fn only_child(data: &ArrayData) -> Result<&ArrayData, Unsupported> {
    match data.child_data() {
        [child] => Ok(child),
        _ => Err(Unsupported(format!(
            "{} without one child",
            data.data_type()
        ))),
    }
}

fn check_child_range(child: &ArrayData, start: usize, n: usize) -> Result<(), Unsupported> {
    if start.checked_add(n).is_none_or(|end| end > child.len()) {
        return Err(Unsupported("a list past its child".into()));
    }
    Ok(())
}

/// `len` bytes of `buffer` from `start`, checked.
fn slice(buffer: &Buffer, start: usize, len: usize) -> Result<Buffer, Unsupported> {
    if start.checked_add(len).is_none_or(|end| end > buffer.len()) {
        return Err(Unsupported("a slice past its buffer".into()));
    }
    Ok(buffer.slice_with_length(start, len))
}

/// A list's or binary array's `i32` offsets for its rows, rebased to start at 0 (a slice of
/// the original when they already do), and the range of the child they span.
fn rebased_offsets(data: &ArrayData) -> Result<(Buffer, usize, usize), Unsupported> {
    let len = data.len();
    if len == 0 {
        return Ok((Buffer::from(&[][..]), 0, 0));
    }
    let width = mem::size_of::<i32>();
    let buffer = own_buffer(data, 0)?;
    let (Some(start), Some(bytes)) = (
        data.offset().checked_mul(width),
        len.checked_add(1).and_then(|n| n.checked_mul(width)),
    ) else {
        return Err(Unsupported("offsets past usize".into()));
    };
    let raw = slice(buffer, start, bytes)?;
    let offsets: Vec<i32> = raw
        .as_slice()
        .chunks_exact(width)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (first, last) = (offsets[0], offsets[len]);
    let (Ok(begin), Ok(end)) = (usize::try_from(first), usize::try_from(last)) else {
        return Err(Unsupported("negative offsets".into()));
    };
    if end < begin {
        return Err(Unsupported("decreasing offsets".into()));
    }
    if first == 0 {
        return Ok((raw, begin, end));
    }
    let rebased: Vec<i32> = offsets.iter().map(|o| o - first).collect();
    Ok((Buffer::from_vec(rebased), begin, end))
}

/// `rb` as one IPC stream (schema, record batch, end of stream), in parts whose large ones are
/// the batch's own buffers.
///
/// # Errors
/// [`Unsupported`] for a column of a type this writer does not lay out.
pub(super) fn write_parts(rb: &RecordBatch) -> Result<Vec<Bytes>, Unsupported> {
    let mut body = Body::default();
    for column in rb.columns() {
        body.field(&column.to_data())?;
    }
    let options = IpcWriteOptions::default();
    let mut head = Vec::with_capacity(1024);
    let schema = IpcDataGenerator {}.schema_to_bytes_with_dictionary_tracker(
        &rb.schema(),
        &mut DictionaryTracker::new(false),
        &options,
    );
    let framing = |e: arrow_schema::ArrowError| Unsupported(format!("framing: {e}"));
    write_message(&mut head, schema, &options).map_err(framing)?;

    let mut fbb = flatbuffers::FlatBufferBuilder::new();
    let buffers = fbb.create_vector(&body.buffers);
    let nodes = fbb.create_vector(&body.nodes);
    let header = {
        let mut batch = RecordBatchBuilder::new(&mut fbb);
        batch.add_length(as_i64(rb.num_rows())?);
        batch.add_nodes(nodes);
        batch.add_buffers(buffers);
        batch.finish().as_union_value()
    };
    let mut message = MessageBuilder::new(&mut fbb);
    message.add_version(MetadataVersion::V5);
    message.add_header_type(MessageHeader::RecordBatch);
    message.add_bodyLength(as_i64(body.len)?);
    message.add_header(header);
    let root = message.finish();
    fbb.finish(root, None);
    let batch = EncodedData {
        ipc_message: fbb.finished_data().to_vec(),
        arrow_data: Vec::new(),
    };
    write_message(&mut head, batch, &options).map_err(framing)?;

    let mut parts = Vec::with_capacity(body.parts.len() + 2);
    parts.push(Bytes::from(head));
    parts.append(&mut body.parts);
    body.gathered.extend_from_slice(&END_OF_STREAM);
    parts.push(Bytes::from(body.gathered));
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{Float32Builder, ListBuilder};
    use arrow_array::types::Float32Type;
    use arrow_array::{
        ArrayRef, BinaryArray, BooleanArray, FixedSizeListArray, Float16Array, Float32Array,
        Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, StringArray, StructArray,
        UInt16Array, UInt32Array, UInt64Array, UInt8Array,
    };
    use arrow_ipc::reader::StreamReader;
    use arrow_schema::{Field, Fields};

    use super::*;
    use crate::batch::TensorColumn;
    use crate::tensor::{DType, TensorData};
    use crate::wire::{decode_columns, encode_columns, encode_columns_parts, WireError};

    fn concat(parts: &[Bytes]) -> Vec<u8> {
        parts.iter().flat_map(|p| p.iter().copied()).collect()
    }

    /// What arrow's own reader makes of `bytes` (one record batch).
    fn read_back(bytes: &[u8]) -> RecordBatch {
        let mut reader = StreamReader::try_new(bytes, None).unwrap();
        let rb = reader.next().unwrap().unwrap();
        assert!(
            reader.next().is_none(),
            "one batch, then the end of the stream"
        );
        rb
    }

    /// Six rows of every type the writer lays out, with nulls, lists whose first offset is not
    /// zero once sliced, and a struct of both list kinds.
    fn every_type() -> RecordBatch {
        let list = {
            let mut b = ListBuilder::new(Float32Builder::new());
            for row in 0..6 {
                if row == 2 {
                    b.append_null();
                } else {
                    b.append_value((0..row).map(|v| Some(v as f32)));
                }
            }
            b.finish()
        };
        let fixed = FixedSizeListArray::from_iter_primitive::<Float32Type, _, _>(
            (0..6).map(|r| Some((0..3).map(move |v| Some((r * 3 + v) as f32)))),
            3,
        );
        let structs = StructArray::from(vec![
            (
                Arc::new(Field::new("data", list.data_type().clone(), true)),
                Arc::new(list.clone()) as ArrayRef,
            ),
            (
                Arc::new(Field::new("shape", fixed.data_type().clone(), true)),
                Arc::new(fixed.clone()) as ArrayRef,
            ),
        ]);
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("i8", Arc::new(Int8Array::from(vec![-1, 2, -3, 4, -5, 6]))),
            ("i16", Arc::new(Int16Array::from(vec![1, -2, 3, -4, 5, -6]))),
            (
                "i32",
                Arc::new(Int32Array::from(vec![
                    Some(1),
                    None,
                    Some(3),
                    None,
                    Some(5),
                    Some(6),
                ])),
            ),
            (
                "i64",
                Arc::new(Int64Array::from(vec![i64::MIN, 0, 1, 2, 3, i64::MAX])),
            ),
            ("u8", Arc::new(UInt8Array::from(vec![0, 1, 2, 3, 4, 255]))),
            (
                "u16",
                Arc::new(UInt16Array::from(vec![0, 1, 2, 3, 4, u16::MAX])),
            ),
            (
                "u32",
                Arc::new(UInt32Array::from(vec![0, 1, 2, 3, 4, u32::MAX])),
            ),
            (
                "u64",
                Arc::new(UInt64Array::from(vec![0, 1, 2, 3, 4, u64::MAX])),
            ),
            (
                "f16",
                Arc::new(Float16Array::from(vec![half::f16::from_f32(0.5); 6])),
            ),
            (
                "f32",
                Arc::new(Float32Array::from(vec![
                    Some(0.5),
                    Some(1.5),
                    None,
                    Some(3.5),
                    Some(4.5),
                    None,
                ])),
            ),
            (
                "f64",
                Arc::new(Float64Array::from(vec![0.25, 1.25, 2.25, 3.25, 4.25, 5.25])),
            ),
            (
                "bool",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    None,
                    Some(false),
                    Some(true),
                    Some(true),
                    None,
                ])),
            ),
            (
                "utf8",
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    None,
                    Some("ccc"),
                    Some(""),
                    Some("ééé"),
                    Some("f"),
                ])),
            ),
            (
                "binary",
                Arc::new(BinaryArray::from(vec![
                    &b"x"[..],
                    b"",
                    b"zz",
                    b"\0\xff",
                    b"w",
                    b"vvv",
                ])),
            ),
            ("list", Arc::new(list)),
            ("fixed", Arc::new(fixed)),
            ("struct", Arc::new(structs)),
        ];
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(arrow_schema::Schema::new(Fields::from(fields))),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    }

    #[test]
    fn every_type_reads_back_whole_and_sliced() {
        let rb = every_type();
        for (offset, len) in [(0, 6), (1, 3), (2, 4), (5, 1), (3, 0)] {
            let sliced = rb.slice(offset, len);
            let parts = write_parts(&sliced).unwrap();
            let back = read_back(&concat(&parts));
            assert_eq!(back, sliced, "rows {offset}..{}", offset + len);
        }
    }

    #[test]
    fn an_unsupported_type_is_refused_for_arrows_writer() {
        let large = arrow_array::LargeStringArray::from(vec!["a", "b"]);
        let rb = RecordBatch::try_from_iter([("s", Arc::new(large) as ArrayRef)]).unwrap();
        assert!(write_parts(&rb).is_err());
    }

    /// A 224×224×3 image: its values travel as the column's own buffer, and the rest is a
    /// couple of gathered parts.
    #[test]
    fn a_large_tensor_is_shared_not_copied() {
        let values: Vec<f32> = (0..3 * 224 * 224).map(|v| v as f32).collect();
        let col =
            TensorColumn::from_data("x", vec![3, 224, 224], 1, TensorData::F32(values)).unwrap();
        let theirs = col.f32_values().unwrap().as_ptr() as *const u8;
        let parts = encode_columns_parts([("x", &col)]).unwrap();
        assert_eq!(parts.len(), 3, "head, the tensor, the tail");
        assert_eq!(
            parts[1].as_ptr(),
            theirs,
            "the tensor part is the column's memory"
        );
        assert_eq!(parts[1].len(), 3 * 224 * 224 * 4);
        let back = decode_columns(&concat(&parts)).unwrap();
        assert_eq!(back[0].1.f32_values().unwrap(), col.f32_values().unwrap());
    }

    /// Every tensor column kind, uniform and ragged, sliced, round-trips, also from bytes that
    /// lie one byte off any alignment (arrow then copies the arrays it cannot slice).
    #[test]
    fn tensor_columns_round_trip_from_misaligned_bytes() {
        for dtype in DType::ALL {
            let data = TensorData::zeros(dtype, 24);
            let uniform = TensorColumn::from_data("u", vec![3, 2], 4, data.clone())
                .unwrap()
                .slice(1, 3);
            let ragged = TensorColumn::from_ragged(
                "r",
                vec![vec![2, 2], vec![4, 1], vec![2, 2], vec![3, 4]],
                data,
            )
            .unwrap()
            .slice(1, 3);
            let bytes = encode_columns([("u", &uniform), ("r", &ragged)]).unwrap();
            let mut shifted = vec![0u8];
            shifted.extend_from_slice(&bytes);
            let buffer = Buffer::from_vec(shifted).slice(1);
            assert_ne!(buffer.as_ptr() as usize % 8, 0);
            let back = crate::wire::decode_guarded(|| {
                crate::wire::columns_of(crate::wire::read_ipc(buffer)?)
            })
            .unwrap_or_else(|e| panic!("{dtype}: {e}"));
            assert_eq!(back[0].1.data(), uniform.data(), "{dtype}");
            assert_eq!(back[1].1.row_shape(0), vec![4, 1], "{dtype}");
            assert_eq!(back[1].1.data(), ragged.data(), "{dtype}");
        }
    }

    /// A payload cut anywhere — at every part boundary, inside the framing, inside the tensor —
    /// is an error naming what is short, never a panic.
    #[test]
    fn cut_payloads_are_refused() {
        let values: Vec<f32> = (0..5000).map(|v| v as f32).collect();
        let col = TensorColumn::from_data("x", vec![5000], 1, TensorData::F32(values)).unwrap();
        let parts = encode_columns_parts([("x", &col)]).unwrap();
        let bytes = concat(&parts);
        let mut cuts: Vec<usize> = parts
            .iter()
            .scan(0, |end, p| {
                *end += p.len();
                Some(*end)
            })
            .collect();
        cuts.extend([0, 1, 7, 8, 100, bytes.len() / 2, bytes.len() - 9]);
        for cut in cuts.into_iter().filter(|&c| c < bytes.len() - 8) {
            match decode_columns(&bytes[..cut]) {
                Err(
                    WireError::Truncated { .. } | WireError::Empty | WireError::Metadata { .. },
                ) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        // Without its end-of-stream marker the stream still holds its batch.
        assert!(decode_columns(&bytes[..bytes.len() - 8]).is_ok());
    }
}
