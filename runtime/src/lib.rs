//! Graph assembly: the step between a graph file and a running service.
//!
//! [`load`] reads a YAML graph (or takes a builder's spec), validates and plans it.
//! [`TopologyBuilder`] starts a plan: it makes the shared resources first — the zenoh session
//! remote executors are reached through, the request log, admission's counters and, when
//! stateful nodes run on executors, the HAMS coordinator — and hands them down to the
//! executors, the dataflow and the manager that use them. [`RunningGraph`] owns what was
//! started and stops it in order; [`StatusBoard`] reads what runs for the status feed.
//!
//! It is a crate of its own so that every front end (the CLI's `serve` and `run`, model-less
//! serving, the benchmarks, an embedding program) starts graphs the same way, and none of them
//! has to know in which order the parts are made.

pub mod load;
mod running;
pub mod status;
mod topology;
mod warmup_file;

pub use load::{
    load_graph, load_graph_resolving, load_graph_under, plan_spec, plan_spec_under, LoadError,
    LoadedGraph,
};
pub use running::{operator_metrics, RunningGraph};
pub use status::{GraphProbe, StatusBoard};
pub use topology::{start, start_distributed, DistributedOptions, StartError, TopologyBuilder};
