//! timely's cluster flags (`--processes`, `--process`, `--hostfile`), shared by `weir run` and
//! `weir serve`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

/// timely's cluster options: the same command runs once per process, each with its own index.
#[derive(Debug, Clone, Args)]
pub(super) struct ClusterArgs {
    /// Processes in the timely cluster (graph workers spread over all of them).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// This process's index in the cluster, 0-based.
    #[arg(long, default_value_t = 0)]
    process: usize,
    /// File with one `host:port` per process, in index order (default: 127.0.0.1:2101, 2102, ...).
    #[arg(long)]
    hostfile: Option<PathBuf>,
}

impl ClusterArgs {
    pub(super) fn options(&self) -> Result<Option<crate::ClusterOptions>> {
        if self.processes <= 1 && self.hostfile.is_none() {
            return Ok(None);
        }
        let addresses: Vec<String> = match &self.hostfile {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect(),
            None => (0..self.processes)
                .map(|i| format!("127.0.0.1:{}", 2101 + i))
                .collect(),
        };
        if self.hostfile.is_some() && self.processes > 1 && addresses.len() != self.processes {
            bail!(
                "--processes {} but the host file lists {} addresses",
                self.processes,
                addresses.len()
            );
        }
        if self.process >= addresses.len() {
            bail!(
                "--process {} is not below the {} processes",
                self.process,
                addresses.len()
            );
        }
        Ok(Some(crate::ClusterOptions {
            process: self.process,
            addresses,
        }))
    }
}
