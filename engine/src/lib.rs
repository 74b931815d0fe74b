//! weir's engine: the graph spec (YAML and builder API), validation, planning, the Arrow batches
//! with lineage that flow between operators, and the compilation of a plan into a timely dataflow.
//!
//! A graph goes `GraphSpec → validate → ValidGraph → plan → Plan → GraphRuntime::start`, each stage
//! with its own type, so a later stage never re-checks what an earlier one proved. What nodes *do*
//! is left to the `weir-operators` crate through [`compile::NodeFactory`]; how requests arrive is
//! left to connectors, which call [`runtime::GraphRuntime::submit`].

pub mod batch;
pub mod compile;
pub mod dataflow;
pub mod diagnostic;
pub mod lineage;
pub mod metrics;
pub mod onnx;
pub mod parallelism;
pub mod paths;
pub mod placement;
pub mod plan;
pub mod request;
pub mod routing;
pub mod runtime;
pub mod spec;
pub mod stateful;
pub mod stream;
pub mod tensor;
pub mod trace;
pub mod validate;
pub mod warmup;
pub mod wire;

pub use timely;
