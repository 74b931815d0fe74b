//! SERF: queueing-model-driven choice of inter-/intra-request parallelism per model node.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]
