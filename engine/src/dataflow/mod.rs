//! The structural operators every compiled graph has, whatever its node kinds: the ingress that
//! turns requests into batches, the join that merges branches by request id, the split and gather of a fan-out, the egress that
//! answers each request once, and the exchange that routes rows between the processes of a
//! cluster. Node-kind operators live in the `weir-operators` crate.

pub mod egress;
pub mod exchange;
pub mod fanout;
pub mod gather_stats;
pub mod ingress;
pub mod join;

use timely::dataflow::Stream;

use crate::batch::Batch;
use crate::request::RowError;

/// A stream of request batches, timestamped with ingestion epochs.
pub type BatchStream<'s> = Stream<'s, u64, Vec<Batch>>;

/// A stream of per-request errors.
pub type ErrorStream<'s> = Stream<'s, u64, Vec<RowError>>;
