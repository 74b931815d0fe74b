//! The executor configuration a model node runs with, after "SERF: Efficient Scheduling for Fast
//! Deep Neural Network Serving via Judicious Parallelism" (SERF, §IV).
//!
//! A fixed `parallelism: {concurrency: C, threads: T}` is the executor setting `{instances: C,
//! intra_op_threads: T}`. Under `parallelism: auto` the node starts in its profile's configuration
//! with the most capacity `c·μ_c`: the load is unknown until the scheduler's first estimate, and a
//! start in the configuration chosen for low load queues requests under moderate load for the
//! seconds that estimate takes.

use std::path::Path;

use weir_serf::config::Config;
use weir_serf::profile::Profile;

use crate::parallelism::{profile_path, AutoParallelism};
use crate::spec::{ExecutorSpec, ModelSpec, ParallelismSpec};

/// Model node `m`'s executor setting and, under `auto`, what the scheduler switches by.
/// `serf_profile` is the profile validation read and its configuration with the most capacity.
pub(super) fn executor_config(
    m: &ModelSpec,
    base_dir: &Path,
    serf_profile: Option<&(Profile, Config)>,
) -> (ExecutorSpec, Option<AutoParallelism>) {
    let configured = |concurrency: usize, threads: usize| ExecutorSpec {
        instances: concurrency,
        intra_op_threads: threads,
        ..m.executor
    };
    match (m.parallelism.as_ref().map(|p| p.value), serf_profile) {
        (Some(ParallelismSpec::Fixed(f)), _) => (configured(f.concurrency, f.threads), None),
        (Some(ParallelismSpec::Auto(auto)), Some((profile, initial))) => (
            configured(initial.concurrency, initial.threads),
            Some(AutoParallelism {
                profile_path: profile_path(base_dir, &m.id.value),
                profile: profile.clone(),
                initial: *initial,
                max_utilisation: auto.max_utilisation,
            }),
        ),
        // No `parallelism:` (validation reads a profile for every `auto` node).
        _ => (m.executor, None),
    }
}
