//! High availability for stateful model nodes, after "HAMS: High Availability for Distributed
//! Machine Learning Service Graphs" (HAMS, §IV), as pure protocol logic shared by the executor
//! processes that hold a node's primary and backup and by the graph process that runs the frontend
//! and the manager.
//!
//! - [`protocol`]: the messages (run, state tuple, applied, durable, assign) and their framing.
//! - [`durability`]: the durable view of every stateful node and Algorithm 2's apply queue.
//! - [`gate`]: the frontend's release rule (a reply waits until every state it depends on is durable).
//! - [`rollback`]: the rollback set after a primary fails: a node that consumed a rolled-back
//!   version is rolled back too, transitively.
//! - [`journal`]: the consistency journal every role writes and the checker tests run on it.
//! - [`sequences`]: per-sequence state (one state per client sequence, in one table per version)
//!   on the wire: the rows' sequence controls and the refusals.
//! - [`sequence_params`]: a request's sequence controls read from its parameters as Triton's
//!   clients send them (the per-sequence node and the admission of sequence control inputs).
//!
//! Decisions where the paper is silent or wrong are written where they apply; the main ones:
//! Algorithm 2 line 8 waits *while* `durable[m] < seq`; durability is monotone per node across
//! epochs; a promoted backup drops its unapplied states and re-announces its applied sequence; a
//! primary without a live backup runs *solo* (its own states count as durable once their
//! dependencies are); every message carries the sender's epoch and stale ones are dropped.

pub mod control_auth;
pub mod durability;
pub mod gate;
pub mod journal;
pub mod protocol;
pub mod rollback;
pub mod sequence_params;
pub mod sequences;

/// A stateful node's identity in lineage entries (the plan's lineage id).
pub type NodeId = u32;

/// A state version of one node: the sequence number of the batch that made it (`0` = the initial
/// state, before any batch).
pub type Seq = u64;

/// An incarnation of a node's primary; bumped by every promotion.
pub type Epoch = u64;
