//! The one error type of this crate: every way training, loading or writing a model can fail.

use std::path::PathBuf;

/// Why a training run, a data load or a model load/write failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The data set file is malformed.
    #[error("{path}: line {line}: {reason}")]
    Data {
        /// The data file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The bytes of an ONNX file are not a valid protobuf `ModelProto`.
    #[error("{path}: not an ONNX model: {source}")]
    Decode {
        /// The ONNX file.
        path: PathBuf,
        /// The protobuf error.
        source: prost::DecodeError,
    },
    /// The ONNX graph is valid protobuf but not one this crate can train (e.g. two inputs).
    #[error("unsupported ONNX graph: {0}")]
    Graph(String),
    /// The options or the data do not fit together (e.g. k = 1, an empty split).
    #[error("invalid training options: {0}")]
    Options(String),
    /// A tensor computation in candle failed (shape mismatch, unsupported op, ...).
    #[error("tensor computation failed: {0}")]
    Candle(#[from] candle_core::Error),
}

/// Shorthand for this crate's results.
pub type Result<T, E = TrainError> = std::result::Result<T, E>;
