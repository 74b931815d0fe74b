//! weir-triton: a Triton model repository as weir graphs.
//!
//! Triton's model repository is an input format beside graph YAML (the design's "Interfaces"):
//! `<root>/<model>/config.pbtxt`, protobuf text format against Triton's published `ModelConfig`
//! schema, and numbered version folders `<root>/<model>/<n>/model.onnx`. This crate reads one
//! and gives, per model and served version, the effective configuration Triton would report and
//! a [`weir_engine::spec::GraphSpec`] that serves it. It wires nothing to HTTP or gRPC.
//!
//! ```no_run
//! use weir_triton::{graph, json, load, LoadOptions};
//!
//! let repo = load(std::path::Path::new("models"), &LoadOptions::default())?;
//! for (name, version) in repo.served() {
//!     let served = graph(&repo, name, Some(version.version))?;
//!     let config = json::config_json(&version.config)?;
//!     println!("{name} v{}: {} nodes, /config {config}", version.version, served.spec.nodes.len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The path a model takes, one module per step:
//!
//! - [`repository`]: the folders, read as hostile input (size caps, symlinks confined to the
//!   root, names checked, Triton's rules for version folders);
//! - [`pbtxt`]: the text parsed by a real protobuf text-format parser against the schema's
//!   descriptors ([`proto`]);
//! - [`fields`]: every field the text sets is honoured, accepted and ignored for a stated reason,
//!   or refused by name;
//! - [`autocomplete`], [`validate`], [`version_policy`], [`signature`], [`normalize`],
//!   [`warmup`]: Triton's auto-complete for ONNX, its value rules, the versions served, the
//!   check against the ONNX file, Triton's defaults, and the warm-up samples;
//! - [`ensemble`]: an ensemble's steps as a checked dataflow in run order;
//! - [`graph`](mod@graph) (with [`names`], [`reshape`] and [`sequence_controls`]): the weir graph; [`json`]: Triton's JSON of the configuration.
//!
//! [`load`](load()) ties them together and keeps every failure with its model, or version: one
//! bad model never stops the others.

pub mod autocomplete;
pub mod datatype;
pub mod ensemble;
pub mod error;
pub mod fields;
pub mod graph;
pub mod graph_nodes;
pub mod json;
pub mod load;
pub mod names;
pub mod normalize;
pub mod pbtxt;
pub mod proto;
pub mod repository;
pub mod reshape;
pub mod sequence_controls;
pub mod signature;
pub mod validate;
pub mod version_policy;
pub mod warmup;

pub use autocomplete::ModelKind;
pub use error::{EnsembleError, GraphError, LoadError, ModelError, RepositoryError};
pub use graph::{graph, ServedGraph};
pub use load::{
    load, LoadOptions, LoadedModel, ModelEntry, QueueTimeout, Repository, ServedVersion,
};
pub use proto::inference::ModelConfig;
pub use repository::Limits;

#[cfg(test)]
mod tests;
