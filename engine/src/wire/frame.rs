//! The Arrow IPC stream framing of a payload, checked against the bytes actually received before
//! arrow reads a single length from it.
//!
//! Arrow's stream reader trusts the lengths it reads: it sizes the metadata buffer from the
//! 4-byte prefix and allocates a message's whole body from the flatbuffer's `bodyLength` before
//! reading any of it, so a 40-byte message claiming a 1 TiB body is a 1 TiB allocation. Payloads
//! arrive from zenoh peers and from other timely processes, so every length is hostile. This walk
//! reads the same framing — continuation marker `0xFFFFFFFF`, little-endian `i32` metadata
//! length, a flatbuffer `Message` (verified by [`arrow_ipc::root_as_message`]), then `bodyLength`
//! bytes — and refuses any length that passes the bytes remaining, with checked arithmetic. A
//! weir payload is a schema message followed by one record batch (what [`super::encode_columns`]
//! and [`super::encode_batch`] write), so only that is accepted. The record batch's row count is
//! capped at [`max_rows`], its field-node lengths at [`max_values`], and every buffer must lie
//! inside the body: what arrow then allocates is bounded by the payload's own size. A node that
//! claims nulls must have a bit of validity bitmap per value, which arrow asserts instead of
//! checking.

use arrow_ipc::{root_as_message, Field, Message, MessageHeader, RecordBatch, Schema, Type};

use super::WireError;

const CONTINUATION: [u8; 4] = [0xFF; 4];

/// The most values one field node of a payload of `bytes` bytes can hold.
///
/// The densest Arrow layout spends one bit per value (a boolean or a validity bitmap), so a
/// payload claiming more values than eight per byte it holds is lying about its lengths.
pub(super) fn max_values(bytes: usize) -> u64 {
    (bytes as u64).saturating_mul(8)
}

/// The most rows a payload of `bytes` bytes can hold.
///
/// Every row of a weir payload takes at least one byte of body (an 8-byte request id, a 4- or
/// 8-byte tensor element), so a payload claiming more rows than it has bytes is lying; capping
/// there also bounds what is later built per row (a reply, a `Tensor`) by the payload's size.
pub(super) fn max_rows(bytes: usize) -> u64 {
    bytes as u64
}

/// One framed message: its verified metadata and where its body ends.
struct Framed<'a> {
    message: Message<'a>,
    body_len: u64,
    end: usize,
}

/// Reads the message framed at `at`; `None` at the end of the stream (no bytes left, or the
/// end-of-stream marker).
fn next_message(bytes: &[u8], at: usize, index: usize) -> Result<Option<Framed<'_>>, WireError> {
    let rest = bytes.get(at..).unwrap_or_default();
    if rest.is_empty() {
        return Ok(None);
    }
    let truncated = |what: &'static str, needed: u64| WireError::Truncated {
        message: index,
        what,
        needed,
        available: rest.len(),
    };
    let (Some(marker), Some(len)) = (rest.get(..4), rest.get(4..8)) else {
        return Err(truncated("prefix", 8));
    };
    if marker != CONTINUATION {
        return Err(WireError::NoContinuation { message: index });
    }
    let meta_len = i32::from_le_bytes([len[0], len[1], len[2], len[3]]);
    if meta_len == 0 {
        return Ok(None);
    }
    let meta_len = usize::try_from(meta_len).map_err(|_| WireError::NegativeLength {
        message: index,
        what: "metadata length",
        value: i64::from(meta_len),
    })?;
    let meta_end = meta_len
        .checked_add(8)
        .filter(|&end| end <= rest.len())
        .ok_or_else(|| truncated("metadata", meta_len as u64 + 8))?;
    let message = root_as_message(&rest[8..meta_end]).map_err(|e| WireError::Metadata {
        message: index,
        reason: e.to_string(),
    })?;
    let body = message.bodyLength();
    let body_len = u64::try_from(body).map_err(|_| WireError::NegativeLength {
        message: index,
        what: "body length",
        value: body,
    })?;
    let end = usize::try_from(body_len)
        .ok()
        .and_then(|b| b.checked_add(meta_end))
        .filter(|&end| end <= rest.len())
        .ok_or_else(|| truncated("body", (meta_end as u64).saturating_add(body_len)))?;
    Ok(Some(Framed {
        message,
        body_len,
        end: at + end,
    }))
}

fn header_name(header: MessageHeader) -> String {
    header
        .variant_name()
        .map_or_else(|| format!("header type {}", header.0), str::to_string)
}

/// Checks that `bytes` frame a schema message then one record batch whose lengths the payload
/// can back; only then may arrow read them.
///
/// # Errors
/// A [`WireError`] naming the message and the length at fault.
pub(super) fn check_stream(bytes: &[u8]) -> Result<(), WireError> {
    let Some(schema) = next_message(bytes, 0, 0)? else {
        return Err(WireError::Empty);
    };
    let Some(fields) = schema.message.header_as_schema() else {
        return Err(WireError::Unexpected {
            message: 0,
            expected: "a schema",
            found: header_name(schema.message.header_type()),
        });
    };
    super::schema::check_schema(&fields, max_values(bytes.len()))?;
    let Some(batch) = next_message(bytes, schema.end, 1)? else {
        return Err(WireError::Empty);
    };
    let Some(rb) = batch.message.header_as_record_batch() else {
        return Err(WireError::Unexpected {
            message: 1,
            expected: "a record batch",
            found: header_name(batch.message.header_type()),
        });
    };
    check_record_batch(&rb, batch.body_len, bytes.len())?;
    check_validity(&fields, &rb)
}

/// How many buffers arrow reads for a field node of `field`'s type, its children's aside (the
/// Arrow IPC format's buffer layout for the types [`super::schema`] lets through).
fn own_buffers(field: &Field<'_>) -> usize {
    match field.type_type() {
        Type::Utf8 | Type::Binary => 3,
        Type::List | Type::Int | Type::FloatingPoint => 2,
        _ => 1,
    }
}

/// Walks the schema's fields in the order arrow reads their nodes and buffers (each field's
/// node and buffers, then its children's) and checks that a node with nulls has a validity
/// bitmap of a bit per value: arrow asserts that (and panics) rather than refusing it.
fn check_validity(schema: &Schema<'_>, rb: &RecordBatch<'_>) -> Result<(), WireError> {
    let (Some(nodes), Some(buffers)) = (rb.nodes(), rb.buffers()) else {
        return Ok(());
    };
    let mut stack: Vec<Field<'_>> = schema.fields().iter().flatten().collect();
    stack.reverse();
    let (mut node, mut buffer) = (0usize, 0usize);
    while let Some(field) = stack.pop() {
        let (Some(n), Some(validity)) = (nodes.iter().nth(node), buffers.iter().nth(buffer)) else {
            // Fewer nodes or buffers than fields: arrow refuses that itself.
            return Ok(());
        };
        if n.null_count() > 0 {
            let needed = u64::try_from(n.length()).unwrap_or(u64::MAX).div_ceil(8);
            if u64::try_from(validity.length()).unwrap_or_default() < needed {
                return Err(WireError::Length {
                    what: "validity bitmap length",
                    value: validity.length(),
                    cap: needed,
                });
            }
        }
        node += 1;
        buffer += own_buffers(&field);
        let mut children: Vec<Field<'_>> = field.children().iter().flatten().collect();
        children.reverse();
        stack.extend(children);
    }
    Ok(())
}

fn check_length(what: &'static str, value: i64, cap: u64) -> Result<(), WireError> {
    match u64::try_from(value) {
        Ok(v) if v <= cap => Ok(()),
        _ => Err(WireError::Length { what, value, cap }),
    }
}

/// Checks a record batch's row count, field nodes and buffers against its `body_len` and the
/// payload's size, `bytes`.
fn check_record_batch(rb: &RecordBatch<'_>, body_len: u64, bytes: usize) -> Result<(), WireError> {
    if rb.compression().is_some() {
        return Err(WireError::Compressed);
    }
    check_length("row count", rb.length(), max_rows(bytes))?;
    let cap = max_values(bytes);
    for node in rb.nodes().iter().flatten() {
        check_length("field node length", node.length(), cap)?;
        check_length("field node null count", node.null_count(), cap)?;
        if node.null_count() > node.length() {
            return Err(WireError::Length {
                what: "field node null count",
                value: node.null_count(),
                cap: u64::try_from(node.length()).unwrap_or_default(),
            });
        }
    }
    for (index, buffer) in rb.buffers().iter().flatten().enumerate() {
        let end = u64::try_from(buffer.offset())
            .ok()
            .zip(u64::try_from(buffer.length()).ok())
            .and_then(|(offset, length)| offset.checked_add(length));
        if end.is_none_or(|end| end > body_len) {
            return Err(WireError::BufferOutside {
                index,
                offset: buffer.offset(),
                length: buffer.length(),
                body: body_len,
            });
        }
    }
    // Only view types have variadic buffers, and weir writes none (arrow asserts on a stray count).
    if rb.variadicBufferCounts().is_some_and(|c| !c.is_empty()) {
        return Err(WireError::Unexpected {
            message: 1,
            expected: "no variadic buffer counts",
            found: "some".into(),
        });
    }
    Ok(())
}
