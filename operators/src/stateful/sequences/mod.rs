//! Per-sequence state: a stateful node that keeps one state per client sequence (Triton's
//! sequence batcher with implicit state) instead of one for the node.
//!
//! The node's state version is then a [`SequenceTable`]; the graph side reads each row's
//! sequence controls from its request parameters (`weir_hams::sequence_params`), the state holder plans a batch
//! against its table ([`table`]: time-outs, refusals, and the calls the rows share), stacks the
//! sequences' slices along the state's batch axis for each call and cuts them back ([`stack`]),
//! and ships each version to its backup as the batch's delta ([`codec`]). The ONNX Runtime side
//! is `crate::stateful::sequence_step`.

pub mod codec;
pub mod stack;
pub mod table;

pub use table::{BatchPlan, Entry, RowStep, SequenceDelta, SequenceTable};
