//! The remote workers of model-less serving: `weir executor --repository` processes this front
//! end may load variants on ("INFaaS: Automated Model-less Inference Serving", §3.2, §4.1).
//!
//! One zenoh session reaches them all. Over it a [`WorkerWatch`] turns each executor's
//! liveliness and load reports into the metadata store's events (so a SIGKILLed executor's
//! instances leave the store at once), a cold start sends the executor a `load` command signed
//! with the control key, and each variant loaded there is served by a one-node graph whose only
//! replica is that executor — the session is shared by every such graph, so starting one opens
//! nothing. The executor serves a variant under the variant's own name, which a graph node id
//! cannot hold (names carry a `.`), so the graph's replica is made through [`ServedAs`], which
//! names the remote model for the node.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_engine::validate::RemoteExecutor;
use weir_executor::client::variants::send_command;
use weir_executor::client::workers::{WatchedExecutor, WorkerWatch};
use weir_executor::client::ZenohReplicas;
pub(super) use weir_executor::variants::Action;
use weir_infaas::dispatch::Dispatcher;
use weir_operators::model::{ExecError, ExecutorConfig, Replica};
use weir_operators::RemoteReplicaSource;

use crate::ModelLessError;

/// Longest a `load` command may take, whatever the request's deadline: the load goes on at the
/// executor after a request stops waiting, and later requests find it done.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a variant's graph waits for its executor's liveliness when it starts (the executor
/// has just answered the load, so it is alive unless it died since).
const WAIT_ALIVE: Duration = Duration::from_secs(2);

/// One executor the front end may load variants on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorSlot {
    /// Its name (`weir executor --name`); its key prefix is `weir/executor/<name>`.
    pub name: String,
    /// Its executor type (a variant's `config.hardware`).
    pub hardware: String,
}

impl ExecutorSlot {
    /// Reads `NAME=HARDWARE`.
    ///
    /// # Errors
    /// When either half is missing or the name is not a key-expression-safe word.
    pub fn parse(text: &str) -> Result<ExecutorSlot, String> {
        let (name, hardware) = text
            .split_once('=')
            .ok_or_else(|| format!("`{text}`: expected NAME=HARDWARE"))?;
        let word = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !word(name) || !word(hardware) {
            return Err(format!(
                "`{text}`: NAME and HARDWARE hold only letters, digits, `_` and `-` (at most 64)"
            ));
        }
        Ok(ExecutorSlot {
            name: name.to_string(),
            hardware: hardware.to_string(),
        })
    }

    /// The key prefix it serves under, which is also its worker id in the store.
    pub fn prefix(&self) -> String {
        format!("weir/executor/{}", self.name)
    }
}

/// How the front end reaches its remote executors.
#[derive(Debug, Clone, Default)]
pub struct RemoteOptions {
    /// The executors.
    pub executors: Vec<ExecutorSlot>,
    /// zenoh endpoints to listen on (for executors started with `--connect`).
    pub listen: Vec<String>,
    /// zenoh endpoints to connect to (executors started with `--listen`).
    pub connect: Vec<String>,
    /// The control key commands are signed with (`--control-key-file`).
    pub control_key: Option<Vec<u8>>,
    /// Executor types the worker autoscaler may start executors of, beside those named.
    pub launchable: Vec<String>,
}

/// The session to the remote executors and what follows them. Executors join at start and
/// whenever the worker autoscaler launches one.
pub(super) struct RemoteWorkers {
    zenoh: Arc<ZenohReplicas>,
    key: Option<Vec<u8>>,
    dispatcher: Arc<dyn Dispatcher>,
    /// The executors followed, each with the watch feeding its events.
    executors: Mutex<Vec<(ExecutorSlot, WorkerWatch)>>,
}

impl RemoteWorkers {
    /// Opens the session and starts following `options.executors` into `dispatcher`.
    pub(super) fn start(
        options: &RemoteOptions,
        dispatcher: Arc<dyn Dispatcher>,
    ) -> Result<RemoteWorkers, ModelLessError> {
        let zenoh = ZenohReplicas::open(&options.listen, &options.connect)
            .map_err(ModelLessError::Session)?
            .with_wait_alive(WAIT_ALIVE);
        if options.control_key.is_none() {
            tracing::warn!(
                "No --control-key-file: variants cannot be loaded on remote executors, only served where already loaded."
            );
        }
        let workers = RemoteWorkers {
            zenoh: Arc::new(zenoh),
            key: options.control_key.clone(),
            dispatcher,
            executors: Mutex::new(Vec::new()),
        };
        for slot in &options.executors {
            workers.follow(slot.clone())?;
        }
        Ok(workers)
    }

    fn executors(&self) -> std::sync::MutexGuard<'_, Vec<(ExecutorSlot, WorkerWatch)>> {
        self.executors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows `slot` from now on (once: following it again changes nothing).
    pub(super) fn follow(&self, slot: ExecutorSlot) -> Result<(), ModelLessError> {
        let mut executors = self.executors();
        if executors.iter().any(|(s, _)| s.name == slot.name) {
            return Ok(());
        }
        let watched = WatchedExecutor {
            prefix: slot.prefix(),
            hardware: slot.hardware.clone(),
        };
        let watch = WorkerWatch::start(
            self.zenoh.session(),
            std::slice::from_ref(&watched),
            Arc::clone(&self.dispatcher),
        )
        .map_err(|source| ModelLessError::Follow {
            executor: slot.name.clone(),
            source,
        })?;
        executors.push((slot, watch));
        Ok(())
    }

    /// Whether `worker` (a key prefix) is one of these executors.
    pub(super) fn knows(&self, worker: &str) -> bool {
        self.executors().iter().any(|(e, _)| e.prefix() == worker)
    }

    /// Sends the executor under `worker` the signed command `action` on `variant` and waits for
    /// its answer (blocking): a load answers once the variant is served; an unload once the jobs
    /// queued are answered and the sessions dropped.
    pub(super) fn command(
        &self,
        action: Action,
        variant: &str,
        worker: &str,
    ) -> Result<(), String> {
        send_command(
            self.zenoh.session(),
            self.key.as_deref(),
            worker,
            action,
            variant,
            LOAD_TIMEOUT,
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
    }

    /// Starts a graph planned with one remote replica serving `variant`.
    pub(super) fn start_graph(
        &self,
        plan: weir_engine::plan::Plan,
        options: weir_engine::runtime::RuntimeOptions,
        variant: &str,
    ) -> Result<weir_runtime::RunningGraph, String> {
        let source = ServedAs {
            inner: &self.zenoh,
            model: variant,
        };
        weir_runtime::TopologyBuilder::new(plan)
            .options(options)
            .shared_remotes(Arc::clone(&self.zenoh), &source)
            .build()
            .map_err(|e| e.to_string())
    }
}

/// Makes a node's remote replicas ask for `model` instead of the node id.
struct ServedAs<'a> {
    inner: &'a ZenohReplicas,
    model: &'a str,
}

impl RemoteReplicaSource for ServedAs<'_> {
    fn replica(
        &self,
        executor: &RemoteExecutor,
        config: &ExecutorConfig,
    ) -> Result<Arc<dyn Replica>, ExecError> {
        let mut renamed = config.clone();
        renamed.node = self.model.to_string();
        self.inner.replica(executor, &renamed)
    }
}

#[cfg(test)]
mod tests {
    use super::ExecutorSlot;

    #[test]
    fn executor_slots_are_read_and_checked() {
        let slot = ExecutorSlot::parse("gpu-a=accel").expect("valid");
        assert_eq!(slot.prefix(), "weir/executor/gpu-a");
        assert_eq!(slot.hardware, "accel");
        for bad in ["gpu-a", "=accel", "a=", "a/b=accel", "a=acc el", "a*=x"] {
            assert!(ExecutorSlot::parse(bad).is_err(), "{bad}");
        }
    }
}
