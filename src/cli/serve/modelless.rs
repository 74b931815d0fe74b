//! `weir serve --repository`: the model-less front end beside the graphs, its autoscaler, and
//! the variants preloaded before serving starts.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use weir_infaas::autoscale::RunningAutoscaler;
use weir_modelless::remote::{ExecutorSlot, RemoteOptions};
use weir_modelless::scaling::AutoscaleFile;
use weir_modelless::{ModelLessServer, LOCAL_WORKER};

use super::{runtime_options, ServeArgs, PRELOAD_TIMEOUT};
use crate::RunningGraph;

/// The model-less front end and the autoscaler acting on it.
pub(super) struct ModelLess {
    /// Declared first, so it stops before the front end it acts on.
    autoscaler: Option<RunningAutoscaler>,
    pub(super) front: Arc<ModelLessServer>,
}

impl ModelLess {
    /// `/metrics` lines of the front end and its autoscaler.
    pub(super) fn metrics_source(&self) -> weir_connectors::http::MetricsSource {
        self.front
            .metrics_source(self.autoscaler.as_ref().map(|a| a.metrics()))
    }
}

/// Starts the front end over `--repository` when one is given: its tasks must not share a name
/// with a served graph; then the autoscaler (`--autoscale`, its loads run on `rt`) and the
/// `--preload`ed variants.
pub(super) fn start(
    args: &ServeArgs,
    running: &[RunningGraph],
    autoscale: Option<&AutoscaleFile>,
    rt: &tokio::runtime::Handle,
) -> Result<Option<ModelLess>> {
    let Some(dir) = &args.repository else {
        return Ok(None);
    };
    let remote = RemoteOptions {
        executors: args.executors.clone(),
        listen: args.zenoh_listen.clone(),
        connect: args.zenoh_connect.clone(),
        control_key: crate::hams::control_auth::key().map(<[u8]>::to_vec),
        launchable: autoscale
            .iter()
            .flat_map(|f| f.launch.keys().cloned())
            .collect(),
    };
    let front = ModelLessServer::start(dir, runtime_options(args), &remote)?;
    let tasks: Vec<&str> = front.tasks().collect();
    if tasks.is_empty() {
        bail!(
            "{}: no task has a variant this process can serve",
            dir.display()
        );
    }
    for task in &tasks {
        if running.iter().any(|r| r.runtime().plan().name == *task) {
            bail!("task `{task}` has the name of a graph served too");
        }
    }
    eprintln!("weir serving model-less tasks: {}", tasks.join(", "));
    let autoscaler = autoscale
        .map(|file| front.autoscale(file, rt.clone()))
        .transpose()?;
    preload(args, &front, rt)?;
    Ok(Some(ModelLess { autoscaler, front }))
}

/// Loads every `--preload VARIANT=WORKER` and waits until each serves.
fn preload(args: &ServeArgs, front: &ModelLessServer, rt: &tokio::runtime::Handle) -> Result<()> {
    for (variant, worker) in &args.preload {
        let id = match worker.as_str() {
            LOCAL_WORKER => worker.clone(),
            name => args
                .executors
                .iter()
                .find(|e| e.name == name)
                .map(ExecutorSlot::prefix)
                .with_context(|| {
                    format!("--preload {variant}={worker}: no --executor named `{worker}`")
                })?,
        };
        rt.block_on(front.preload_when_up(variant, &id, PRELOAD_TIMEOUT))
            .map_err(|e| anyhow::anyhow!("--preload {variant}={worker}: {e}"))?;
    }
    Ok(())
}
