//! Faults of the network rather than of processes: remote `weir executor`s and HAMS members in
//! network namespaces of their own (`weir_faults::netns`), their links cut, healed, flapped,
//! while clients with request ids keep the graph busy (`weir_faults::load`, whose checker runs
//! after each scenario: every request answered exactly once, every answer right, nothing failed
//! with a status that forbids a retry).
//!
//! - `partition`: a model node with a local replica beside the remote one, its link cut and
//!   healed, then flapping;
//! - `hams_partition`: a HAMS primary partitioned, replaced and healed, twice; and healed the
//!   moment it is replaced, a batch in flight;
//! - `hams_front_end`: the front end cut off from a live HAMS primary its backup still reaches;
//! - `stream`: the executor's stream delayed, stalled and reset by a fault proxy, a local
//!   replica beside it;
//! - `no_replica`: a node with no live replica at all: 503 with `Retry-After`, not ready;
//! - `netns`: the harness's own faults apply and heal.

use weir_faults::load::{inputs, Outcome, Reference};

use crate::common::{direct_ort, model};

mod hams_front_end;
mod hams_partition;
mod netns;
mod no_replica;
mod partition;
mod stream;

/// The 64-wide MLP test model's workload: 16 inputs and ONNX Runtime's own outputs for them.
pub(crate) fn mlp_reference() -> Reference {
    let inputs = inputs(16, 64);
    let outputs = inputs
        .iter()
        .map(|x| direct_ort(&model("mlp_a.onnx"), "x", &[1, 64], x))
        .collect();
    Reference {
        input: "x".into(),
        output: "probs".into(),
        inputs,
        outputs,
    }
}

/// The checker's rules: every request answered once, right, and nothing failed.
pub(crate) fn assert_clean(outcome: &Outcome, what: &str) {
    assert!(outcome.sent > 0, "{what}: no load");
    assert!(
        outcome.not_once.is_empty(),
        "{what}: answered other than once: {:?}",
        outcome.not_once
    );
    assert!(
        outcome.wrong.is_empty(),
        "{what}: wrong answers: {:?}",
        outcome.wrong
    );
    assert!(
        outcome.failed.is_empty(),
        "{what}: failed: {:?}",
        outcome.failed
    );
}
