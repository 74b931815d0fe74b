//! SERF parallelism of a model node (`parallelism:` in YAML): the rules that check it and what it
//! resolves to (paper §IV, note `notes/serf.md` §2.12).
//!
//! `parallelism: {concurrency: C, threads: T}` is the same as `executor: {instances: C,
//! intra_op_threads: T}` and resolves to exactly that executor setting. `parallelism: auto` (or
//! `{auto: {max_utilisation: U}}`, the scheduler's utilisation cap, `0 < U ≤ 1`) needs the
//! node's SERF profile next to the graph (`<graph dir>/<node>.serf.json`, written by `weir profile`):
//! it is read here, so a missing or broken profile is a validation error, and the node starts in the
//! configuration with the most capacity `c·μ_c`: the load is unknown until the scheduler's first
//! estimate, and a start in the low-load choice under moderate load queued for the 2–3 s the
//! estimate takes (measured in the S4 runs, `benchmarks/SERF.md` *serf phases*). The switching
//! itself is the executor's (`weir-operators`); choosing is `weir-serf`'s.
//!
//! Rules: `parallelism` and a non-default `executor.instances`/`executor.intra_op_threads` exclude
//! each other (precedence would be a guess); concurrency and threads are ≥ 1; `concurrency × threads`
//! beyond this machine's cores is a warning (the graph may be meant for a larger host); `auto` needs a
//! readable profile, runs only on the local replica, and warns with dynamic batching of more than one
//! row (the profile measures one-row calls) and when the profile was measured with another
//! `executor.spinning` than the node's (a `t > 1` call that does not spin pays a wake-up of its
//! sleeping threads at every parallel section: on the 2-vCPU VM a 2-thread squeezenet call took
//! 8–9 ms at 20 requests/s without spinning, as long as a 1-thread call, and 4.6–5 ms with it).

use std::path::{Path, PathBuf};

use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use crate::diagnostic::Diagnostic;
use crate::paths::{read_text, FileError, FileRules};
use crate::placement::ReplicaTarget;
use crate::spec::{AutoSpec, ExecutorSpec, ModelSpec, ParallelismSpec};

/// A model node under `parallelism: auto`, after validation.
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

/// The cores of this machine.
fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Checks `m.parallelism` of node `id` and resolves it: the executor setting the node runs with and,
/// for `auto`, the profile. Diagnostics go to `diags`; `None` means an error was reported.
pub(crate) fn check_parallelism(
    id: &str,
    m: &ModelSpec,
    base_dir: &Path,
    files: &FileRules,
    replicas: Option<&[ReplicaTarget]>,
    diags: &mut Vec<Diagnostic>,
) -> Option<(ExecutorSpec, Option<AutoParallelism>)> {
    let Some(spec) = &m.parallelism else {
        return Some((m.executor, None));
    };
    let path = format!("nodes.{id}.parallelism");
    let loc = spec.location;
    if m.executor.instances != 1 || m.executor.intra_op_threads != 1 {
        diags.push(
            Diagnostic::error(
                &path,
                loc,
                format!("node `{id}`: give either `parallelism` or `executor.instances`/`executor.intra_op_threads`, not both"),
            )
            .with_help("`parallelism: {concurrency: C, threads: T}` is the same as `executor: {instances: C, intra_op_threads: T}`"),
        );
        return None;
    }
    let cores = machine_cores();
    match spec.value {
        ParallelismSpec::Fixed(f) => {
            if f.concurrency == 0 || f.threads == 0 {
                diags.push(Diagnostic::error(
                    &path,
                    loc,
                    format!("node `{id}`: `parallelism.concurrency` and `parallelism.threads` must be at least 1"),
                ));
                return None;
            }
            if f.concurrency.saturating_mul(f.threads) > cores {
                diags.push(Diagnostic::warning(
                    &path,
                    loc,
                    format!(
                        "node `{id}`: {} concurrent requests × {} threads need {} cores; this machine has {cores}, so requests will contend for cores",
                        f.concurrency,
                        f.threads,
                        f.concurrency * f.threads
                    ),
                ));
            }
            Some((
                ExecutorSpec {
                    instances: f.concurrency,
                    intra_op_threads: f.threads,
                    ..m.executor
                },
                None,
            ))
        }
        ParallelismSpec::Auto(auto) => {
            if let Some(u) = auto.max_utilisation {
                if !AutoSpec::accepts_max_utilisation(u) {
                    diags.push(
                        Diagnostic::error(
                            format!("{path}.auto.max_utilisation"),
                            loc,
                            format!("node `{id}`: `max_utilisation` {u} is not a utilisation the scheduler can plan for; it must be above 0 and at most 1"),
                        )
                        .with_help("the share of a configuration's capacity the planned load may take, e.g. 0.6 (default 0.5)"),
                    );
                    return None;
                }
            }
            if let Some(r) = replicas {
                if r != [ReplicaTarget::Local] {
                    diags.push(Diagnostic::error(
                        &path,
                        loc,
                        format!("node `{id}`: `parallelism: auto` switches the local executor's configuration; it needs the node to run only locally (no `replicas:`, or `replicas: [local]`)"),
                    ));
                    return None;
                }
            }
            let file = profile_path(base_dir, id);
            let rerun = format!("run `weir profile <graph> --node {id}` to measure it");
            let text = match read_text(&file, files) {
                Ok(text) => text,
                Err(FileError::Missing { .. }) => {
                    diags.push(
                        Diagnostic::error(
                            &path,
                            loc,
                            format!(
                                "node `{id}`: `parallelism: auto` needs the node's SERF profile {}, which does not exist",
                                file.display()
                            ),
                        )
                        .with_help(rerun),
                    );
                    return None;
                }
                Err(e) => {
                    diags.push(
                        Diagnostic::error(
                            &path,
                            loc,
                            format!("node `{id}`: cannot use the SERF profile: {e}"),
                        )
                        .with_help(rerun),
                    );
                    return None;
                }
            };
            let profile = match Profile::from_json(&text) {
                Ok(p) => p,
                Err(e) => {
                    diags.push(
                        Diagnostic::error(
                            &path,
                            loc,
                            format!(
                                "node `{id}`: cannot use the SERF profile {}: {e}",
                                file.display()
                            ),
                        )
                        .with_help(rerun),
                    );
                    return None;
                }
            };
            let initial = match Candidates::from_profile(&profile)
                .max_capacity()
                .map(|c| c.config)
            {
                Some(c) => c,
                None => {
                    diags.push(
                        Diagnostic::error(
                            &path,
                            loc,
                            format!(
                                "node `{id}`: the SERF profile {} has no usable configuration",
                                file.display()
                            ),
                        )
                        .with_help(rerun),
                    );
                    return None;
                }
            };
            if profile.cores > cores {
                diags.push(Diagnostic::warning(
                    &path,
                    loc,
                    format!(
                        "node `{id}`: the SERF profile {} was measured for {} cores; this machine has {cores}",
                        file.display(),
                        profile.cores
                    ),
                ).with_help(rerun.clone()));
            }
            if let Some(measured) = profile.spinning.filter(|s| *s != m.executor.spinning) {
                let setting = |on: bool| if on { "on" } else { "off" };
                diags.push(
                    Diagnostic::warning(
                        &path,
                        loc,
                        format!(
                            "node `{id}`: the SERF profile {} was measured with intra-op spinning {}, but the node runs with `executor.spinning` {}; calls with more than one thread will not take the profiled time",
                            file.display(),
                            setting(measured),
                            setting(m.executor.spinning)
                        ),
                    )
                    .with_help(rerun.clone()),
                );
            }
            if m.batching.max_size > 1 {
                diags.push(Diagnostic::warning(
                    format!("nodes.{id}.batching.max_size"),
                    loc,
                    format!("node `{id}`: SERF models one-request calls; with `batching.max_size` {} the profile's service rates understate batched calls", m.batching.max_size),
                ));
            }
            Some((
                ExecutorSpec {
                    instances: initial.concurrency,
                    intra_op_threads: initial.threads,
                    ..m.executor
                },
                Some(AutoParallelism {
                    profile_path: file,
                    profile,
                    initial,
                    max_utilisation: auto.max_utilisation,
                }),
            ))
        }
    }
}
