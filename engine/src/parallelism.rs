//! SERF parallelism of a model node (`parallelism:` in YAML), after "SERF: Efficient Scheduling for
//! Fast Deep Neural Network Serving via Judicious Parallelism" (SERF, §IV): how many requests a
//! node runs at once and with how many intra-op threads each.
//!
//! `parallelism: {concurrency: C, threads: T}` is the same as `executor: {instances: C,
//! intra_op_threads: T}`. `parallelism: auto` (or `{auto: {max_utilisation: U}}`, the scheduler's
//! utilisation cap) switches among the configurations of the node's SERF profile, read from next
//! to the graph (`<graph dir>/<node>.serf.json`, written by `weir profile`): [`crate::validate`]
//! checks the profile, [`crate::plan`] picks the configuration the node starts in, the executor
//! (`weir-operators`) switches, and `weir-serf` chooses.

use std::path::{Path, PathBuf};

use weir_serf::config::Config;
use weir_serf::profile::Profile;

/// A model node under `parallelism: auto`, as planned.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoParallelism {
    /// The profile file it was read from.
    pub profile_path: PathBuf,
    /// The node's SERF profile: the configurations and their service rates.
    pub profile: Profile,
    /// The configuration the node starts in (the one with the most capacity).
    pub initial: Config,
    /// `parallelism: {auto: {max_utilisation: U}}`, checked to lie in `(0, 1]` (`None`: the
    /// scheduler's default).
    pub max_utilisation: Option<f64>,
}

impl AutoParallelism {
    /// Every configuration the scheduler may switch to, in the profile's order.
    pub fn configs(&self) -> Vec<Config> {
        self.profile
            .candidates()
            .into_iter()
            .map(|(c, _)| c)
            .collect()
    }
}

/// Where `parallelism: auto` looks for node `node`'s profile: `<base_dir>/<node>.serf.json`.
pub fn profile_path(base_dir: &Path, node: &str) -> PathBuf {
    base_dir.join(format!("{node}.serf.json"))
}
