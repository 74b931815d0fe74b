//! How much memory a request message takes once prost has decoded it, read from its encoding
//! without decoding it, so the server can charge that much against its byte budget first.
//!
//! A message's encoded size says little about its decoded size: protobuf is compact where Rust's
//! types are not. An empty `bytes_contents` element is 2 bytes on the wire (tag, length 0) and a
//! 24-byte `Vec<u8>` decoded; an `int64_contents` varint is 1 byte on the wire and 8 decoded; an
//! empty `InferInputTensor` is 2 bytes on the wire and a struct of a few hundred bytes decoded. A
//! single worst-case factor over the whole message would have to be that last ratio (more than
//! 100×), which would refuse every large but ordinary raw-tensor request. So instead the encoding
//! is walked once, field by field, with the request types' schema, and each field is charged
//! what prost will allocate for it:
//!
//! - a repeated element costs [`GROWTH`] times its in-memory size (a `Vec` grows by doubling: its
//!   capacity is at most twice its length, and while it moves both the old and the new buffer
//!   are alive); a packed scalar field holds as many elements as its payload has varint ends (or
//!   payload bytes over the fixed width);
//! - a string or copied byte string costs its length plus [`ALLOC_OVERHEAD`] for the allocator;
//! - `raw_input_contents` elements are `Bytes` slices of the received buffer, so only their
//!   headers cost (the buffer itself is charged by the caller);
//! - a map entry costs [`MAP_GROWTH`] times its key and value (a hash table keeps a load factor,
//!   rounds to a power of two and, while it grows, holds both tables), plus its strings;
//! - a singular scalar lives inside its parent and costs nothing more; unknown fields are skipped
//!   by prost and cost nothing.
//!
//! The walk allocates nothing, visits each byte once, and its depth is the schema's (three
//! levels). Groups (a deprecated wire type) are refused, as is anything malformed: prost would
//! refuse the same message.

use std::mem::size_of;

use bytes::Bytes;

use super::health_proto::HealthCheckRequest;
use super::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::proto::{InferParameter, ModelInferRequest};

/// How many times its in-memory size a repeated element may hold (capacity doubling, and both
/// buffers alive while one grows).
pub(super) const GROWTH: usize = 3;
/// How many times an entry's size a hash map may hold (load factor 7/8, power-of-two tables, old
/// and new table alive while it grows).
pub(super) const MAP_GROWTH: usize = 4;
/// Bytes the allocator may add to each heap allocation (its header and rounding).
pub(super) const ALLOC_OVERHEAD: usize = 32;

/// What a field decodes into, as far as memory goes.
#[derive(Debug, Clone, Copy)]
enum Field {
    /// A `String` or `Vec<u8>`: its bytes on the heap (in a `Vec` when `repeated`).
    Text { repeated: bool },
    /// A repeated `bytes` decoded as `Bytes` slices of the received buffer.
    Slices,
    /// A repeated scalar of `width` bytes in memory; `wire` is its fixed wire width, or `None`
    /// for varints.
    Scalars { width: usize, wire: Option<usize> },
    /// A message: `size` is its in-memory size when it is an element of a repeated field (or a
    /// map entry's key and value, when `map`), `None` when it is singular (inside its parent).
    Message {
        schema: &'static Schema,
        size: Option<usize>,
        map: bool,
    },
}

/// The fields of a message type that allocate, by field number; the others (singular scalars
/// inside their parent, unknown fields) cost nothing.
#[derive(Debug)]
pub(super) struct Schema {
    fields: &'static [(u32, Field)],
}

impl Schema {
    fn field(&self, number: u32) -> Option<Field> {
        self.fields
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, f)| *f)
    }
}

const TEXT: Field = Field::Text { repeated: false };

const fn repeated(schema: &'static Schema, size: usize) -> Field {
    Field::Message {
        schema,
        size: Some(size),
        map: false,
    }
}

const fn map(schema: &'static Schema, size: usize) -> Field {
    Field::Message {
        schema,
        size: Some(size),
        map: true,
    }
}

const fn varints(width: usize) -> Field {
    Field::Scalars { width, wire: None }
}

const fn fixed(width: usize) -> Field {
    Field::Scalars {
        width,
        wire: Some(width),
    }
}

static PARAMETER: Schema = Schema {
    // A oneof: only `string_param` (3) allocates.
    fields: &[(3, TEXT)],
};

/// A `map<string, InferParameter>` entry: key 1, value 2.
static PARAMETER_ENTRY: Schema = Schema {
    fields: &[
        (1, TEXT),
        (
            2,
            Field::Message {
                schema: &PARAMETER,
                size: None,
                map: false,
            },
        ),
    ],
};

const PARAMETER_ENTRY_SIZE: usize = size_of::<String>() + size_of::<InferParameter>();

static CONTENTS: Schema = Schema {
    fields: &[
        (1, varints(size_of::<bool>())),
        (2, varints(size_of::<i32>())),
        (3, varints(size_of::<i64>())),
        (4, varints(size_of::<u32>())),
        (5, varints(size_of::<u64>())),
        (6, fixed(size_of::<f32>())),
        (7, fixed(size_of::<f64>())),
        (8, Field::Text { repeated: true }),
    ],
};

static INPUT: Schema = Schema {
    fields: &[
        (1, TEXT),
        (2, TEXT),
        (3, varints(size_of::<i64>())),
        (4, map(&PARAMETER_ENTRY, PARAMETER_ENTRY_SIZE)),
        (
            5,
            Field::Message {
                schema: &CONTENTS,
                size: None,
                map: false,
            },
        ),
    ],
};

static OUTPUT: Schema = Schema {
    fields: &[(1, TEXT), (2, map(&PARAMETER_ENTRY, PARAMETER_ENTRY_SIZE))],
};

/// `inference.ModelInferRequest`, the request of ModelInfer and ModelStreamInfer.
pub(super) static INFER_REQUEST: Schema = Schema {
    fields: &[
        (1, TEXT),
        (2, TEXT),
        (3, TEXT),
        (4, map(&PARAMETER_ENTRY, PARAMETER_ENTRY_SIZE)),
        (5, repeated(&INPUT, size_of::<InferInputTensor>())),
        (
            6,
            repeated(&OUTPUT, size_of::<InferRequestedOutputTensor>()),
        ),
        (7, Field::Slices),
    ],
};

/// Every other request of the two services: at most two strings (`name` and `version` of
/// ModelReady and ModelMetadata, `service` of a health check; the others are empty).
pub(super) static SMALL_REQUEST: Schema = Schema {
    fields: &[(1, TEXT), (2, TEXT)],
};

/// The in-memory size of the largest request type, charged once per message.
pub(super) const REQUEST_SIZE: usize = {
    let infer = size_of::<ModelInferRequest>();
    let health = size_of::<HealthCheckRequest>();
    if infer > health {
        infer
    } else {
        health
    }
};

/// Why an encoding cannot be walked (prost would refuse it too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum WireError {
    /// The message ends inside a field.
    #[error("the message ends inside field {0}")]
    Truncated(u32),
    /// A varint runs past ten bytes.
    #[error("a varint is longer than ten bytes")]
    LongVarint,
    /// Field number 0 or a wire type protobuf does not have (or a group).
    #[error("field {field}: wire type {wire} is not accepted")]
    WireType { field: u32, wire: u64 },
    /// A fixed-width packed field whose length is not a multiple of its width.
    #[error("field {0}: packed length is not a multiple of its element width")]
    PackedLength(u32),
}

/// A reader over an encoding.
struct Wire<'a> {
    rest: &'a [u8],
}

impl<'a> Wire<'a> {
    fn varint(&mut self, field: u32) -> Result<u64, WireError> {
        let mut value = 0u64;
        for i in 0..10 {
            let (&byte, rest) = self.rest.split_first().ok_or(WireError::Truncated(field))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::LongVarint)
    }

    fn take(&mut self, n: u64, field: u32) -> Result<&'a [u8], WireError> {
        let n = usize::try_from(n).map_err(|_| WireError::Truncated(field))?;
        if n > self.rest.len() {
            return Err(WireError::Truncated(field));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }
}

/// Heap bytes for a copied string or byte string of `len` bytes.
fn heap(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.saturating_add(ALLOC_OVERHEAD)
    }
}

/// Bytes that decoding `encoded` as a message of `schema` allocates, at most (the message's own
/// struct and the encoded buffer not included).
///
/// # Errors
/// When the encoding is malformed for the schema.
pub(super) fn decoded_bytes(encoded: &[u8], schema: &Schema) -> Result<usize, WireError> {
    let mut wire = Wire { rest: encoded };
    let mut total = 0usize;
    while !wire.rest.is_empty() {
        let key = wire.varint(0)?;
        let number = u32::try_from(key >> 3).unwrap_or(0);
        let kind = key & 7;
        if number == 0 {
            return Err(WireError::WireType {
                field: number,
                wire: kind,
            });
        }
        let cost = match (schema.field(number), kind) {
            // Unknown: skipped by prost.
            (None, 0) => wire.varint(number).map(|_| 0)?,
            (None, 1) => wire.take(8, number).map(|_| 0)?,
            (None, 5) => wire.take(4, number).map(|_| 0)?,
            (None, 2) => {
                let len = wire.varint(number)?;
                wire.take(len, number).map(|_| 0)?
            }
            (Some(Field::Scalars { width, wire: None }), 0) => {
                wire.varint(number)?;
                GROWTH * width
            }
            (
                Some(Field::Scalars {
                    width,
                    wire: Some(w),
                }),
                1 | 5,
            ) => {
                wire.take(w as u64, number)?;
                GROWTH * width
            }
            (Some(Field::Scalars { width, wire: w }), 2) => {
                let len = wire.varint(number)?;
                let payload = wire.take(len, number)?;
                let count = match w {
                    None => payload.iter().filter(|b| *b & 0x80 == 0).count(),
                    Some(w) if payload.len() % w == 0 => payload.len() / w,
                    Some(_) => return Err(WireError::PackedLength(number)),
                };
                GROWTH * width * count
            }
            (Some(Field::Text { repeated }), 2) => {
                let len = wire.varint(number)?;
                let payload = wire.take(len, number)?;
                let element = if repeated {
                    GROWTH * size_of::<Vec<u8>>()
                } else {
                    0
                };
                element + heap(payload.len())
            }
            (Some(Field::Slices), 2) => {
                let len = wire.varint(number)?;
                wire.take(len, number)?;
                GROWTH * size_of::<Bytes>()
            }
            (Some(Field::Message { schema, size, map }), 2) => {
                let len = wire.varint(number)?;
                let payload = wire.take(len, number)?;
                let growth = if map { MAP_GROWTH } else { GROWTH };
                let element = size.map_or(0, |s| growth * s);
                element.saturating_add(decoded_bytes(payload, schema)?)
            }
            (_, wire) => {
                return Err(WireError::WireType {
                    field: number,
                    wire,
                })
            }
        };
        total = total.saturating_add(cost);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::super::proto::InferTensorContents;
    use super::*;

    fn bound(request: &ModelInferRequest) -> usize {
        decoded_bytes(&request.encode_to_vec(), &INFER_REQUEST).expect("well formed")
    }

    #[test]
    fn empty_byte_strings_are_charged_their_vec_headers() {
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor {
                contents: Some(InferTensorContents {
                    bytes_contents: vec![Vec::new(); 1000],
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let encoded = request.encoded_len();
        let charged = bound(&request);
        assert!(charged >= 1000 * size_of::<Vec<u8>>());
        assert!(charged > 10 * encoded, "{charged} for {encoded} encoded");
    }

    #[test]
    fn packed_varints_are_counted_by_their_ends() {
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor {
                contents: Some(InferTensorContents {
                    int64_contents: vec![1; 1000],
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let charged = bound(&request);
        assert!(charged >= GROWTH * 8 * 1000);
        assert!(charged < GROWTH * 8 * 1000 + 4096);
    }

    #[test]
    fn raw_contents_cost_their_slices_not_their_bytes() {
        let request = ModelInferRequest {
            raw_input_contents: vec![Bytes::from(vec![7u8; 1 << 20])],
            inputs: vec![InferInputTensor {
                name: "x".into(),
                datatype: "UINT8".into(),
                shape: vec![1 << 20],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(bound(&request) < 4096);
    }

    #[test]
    fn empty_tensors_are_charged_their_structs() {
        let request = ModelInferRequest {
            inputs: vec![InferInputTensor::default(); 100],
            ..Default::default()
        };
        assert!(bound(&request) >= 100 * size_of::<InferInputTensor>());
    }

    #[test]
    fn malformed_encodings_are_refused() {
        // Field 5 says 10 bytes but the message ends.
        assert_eq!(
            decoded_bytes(&[0x2a, 10, 0], &INFER_REQUEST),
            Err(WireError::Truncated(5))
        );
        // A group (wire type 3).
        assert!(matches!(
            decoded_bytes(&[0x0b], &INFER_REQUEST),
            Err(WireError::WireType { field: 1, wire: 3 })
        ));
        assert_eq!(
            decoded_bytes(
                &[0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                &SMALL_REQUEST
            )
            .err(),
            Some(WireError::LongVarint)
        );
    }

    #[test]
    fn the_bound_covers_what_prost_decodes() {
        let request = ModelInferRequest {
            model_name: "m".into(),
            id: "request-1".into(),
            parameters: [(
                "p".to_string(),
                InferParameter {
                    parameter_choice: Some(
                        super::super::proto::infer_parameter::ParameterChoice::StringParam(
                            "v".repeat(100),
                        ),
                    ),
                },
            )]
            .into(),
            outputs: vec![InferRequestedOutputTensor {
                name: "y".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let decoded =
            ModelInferRequest::decode(request.encode_to_vec().as_slice()).expect("round trip");
        assert_eq!(decoded, request);
        assert!(bound(&request) >= 100 + size_of::<InferRequestedOutputTensor>());
    }
}
