//! Why a protocol request got no reply, whatever transport carried it. Each transport shows
//! these its own way (HTTP maps them to status codes in `http/error.rs`; the streams write an
//! error document), with the same text.

use weir_engine::request::RequestError;

use super::element::EncodeFault;

/// A malformed request: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ProtocolError {
    /// The request field (`inputs[0].shape`), or `body`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

pub(super) fn perr(field: impl Into<String>, message: impl Into<String>) -> ProtocolError {
    ProtocolError {
        field: field.into(),
        message: message.into(),
    }
}

/// Why running a parsed request through a graph gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum OipError {
    /// The request or one of its fields is malformed.
    #[error(transparent)]
    Malformed(#[from] ProtocolError),
    /// The request names an output the graph does not have.
    #[error("outputs: graph `{graph}` has no output `{output}`")]
    UnknownOutput {
        /// Graph.
        graph: String,
        /// Output asked for, quoted short.
        output: String,
    },
    /// The graph refused or failed the request.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The rows of a batched request gave one output tensors that do not stack (their shapes or
    /// element types differ).
    #[error("outputs: the rows of this request gave `{output}` tensors that do not stack ({detail}); send the rows as separate requests")]
    RowsDisagree {
        /// Output, quoted short.
        output: String,
        /// How they differ.
        detail: String,
    },
    /// An output cannot be written in the encoding the request asked for.
    #[error(transparent)]
    Reply(#[from] ReplyError),
    /// The request's deadline passed before its answer.
    #[error("deadline of {ms} ms exceeded")]
    Deadline {
        /// The deadline.
        ms: u64,
    },
}

/// An output the reply cannot carry in the encoding asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplyError {
    /// A BYTES element that is not UTF-8, asked for as JSON.
    #[error(
        "outputs: element {element} of `{output}` is not UTF-8 text, which JSON cannot carry; \
         ask for this output as binary data (`\"parameters\": {{\"binary_data\": true}}`)"
    )]
    NotUtf8 {
        /// The output.
        output: String,
        /// Index of the first such element.
        element: usize,
    },
    /// A BYTES element longer than the binary extension's 4-byte length can state.
    #[error("outputs: element {element} of `{output}` holds {len} bytes, more than a 4-byte length states")]
    TooLong {
        /// The output.
        output: String,
        /// Index of the element.
        element: usize,
        /// Its length.
        len: usize,
    },
}

impl ReplyError {
    pub(super) fn new(output: &str, element: usize, fault: EncodeFault) -> ReplyError {
        let output = output.to_string();
        match fault {
            EncodeFault::NotUtf8 => ReplyError::NotUtf8 { output, element },
            EncodeFault::TooLong(len) => ReplyError::TooLong {
                output,
                element,
                len,
            },
        }
    }
}
