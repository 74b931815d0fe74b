//! SERF parallelism of a model node (`parallelism:`), after "SERF: Efficient Scheduling for Fast
//! Deep Neural Network Serving via Judicious Parallelism" (SERF, §IV).
//!
//! Rules: `parallelism` and a non-default `executor.instances`/`executor.intra_op_threads` exclude
//! each other (precedence would be a guess); concurrency and threads are ≥ 1; `concurrency ×
//! threads` beyond the cores of the machine validating the graph is a warning (the graph may be
//! meant for a larger host). `auto` caps utilisation within `(0, 1]`, runs only on the local
//! replica (the scheduler switches the in-process executor), and needs a readable profile with a
//! usable configuration; it warns when the profile was measured on more cores than there are, with
//! dynamic batching of more than one row (the profile measures one-row calls), and when the profile
//! was measured with another `executor.spinning` than the node's: a call with more than one thread
//! that does not spin wakes its sleeping threads at every parallel section, which can cost as much
//! as the parallelism gains, so the profiled times would not hold.
//!
//! The profile is read here, so a missing or broken one is a validation error; the plan decides the
//! configuration the node starts in ([`crate::plan`]).

use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::placement::only_local;
use super::Validator;
use crate::diagnostic::Diagnostic;
use crate::parallelism::profile_path;
use crate::paths::{read_text, FileError};
use crate::spec::{AutoSpec, ModelSpec, ParallelismSpec};

/// The cores of the machine validating the graph.
fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Validator<'_, '_> {
    /// Checks `m.parallelism` of node `id` against its resolved replicas. Under `auto`, returns the
    /// node's SERF profile and its configuration with the most capacity when every rule held.
    pub(super) fn check_parallelism(
        &mut self,
        id: &str,
        m: &ModelSpec,
    ) -> Option<(Profile, Config)> {
        let (base_dir, files) = (self.base_dir, self.files);
        let replicas = self.replicas.of(id);
        let diags = &mut self.diags;
        let spec = m.parallelism.as_ref()?;
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
                None
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
                    if !only_local(r) {
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
                Some((profile, initial))
            }
        }
    }
}
