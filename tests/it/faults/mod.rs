//! Faults of the network rather than of processes: a remote `weir executor` in a network
//! namespace of its own ([`netns`]), its link cut, healed, flapped, while clients with request
//! ids keep a model node with a local replica beside it busy. The rules checked after each
//! scenario (`load`): every request answered exactly once, every answer equal to ONNX Runtime's
//! own on the same input, nothing failed with a status that forbids a retry. And a node with no
//! live replica at all (`no_replica`): 503 with `Retry-After`, not ready.

mod load;
pub(crate) mod netns;
mod no_replica;
mod partition;
