//! A started graph: the runtime requests are submitted to, and the executors, pools, stateful
//! proxies and manager behind it, readable for metrics and status while it runs.

use std::sync::Arc;

use weir_connectors::http::MetricsSource;
use weir_connectors::models::{Execution, ExecutionStats};
use weir_engine::runtime::GraphRuntime;
use weir_executor::client::ZenohReplicas;
use weir_hams_manager::HamsManager;
use weir_operators::model::executor::{batch_bucket_bound, BATCH_BUCKET_BOUNDS};
use weir_operators::model::{LoadSnapshot, LoadStats, ParallelismSnapshot, ReplicaPool};
use weir_operators::parity::ParityNode;
use weir_operators::stateful::StatefulNodeHandle;
use weir_operators::OperatorFactory;

/// A graph running in this process, with its executors.
#[derive(Debug)]
pub struct RunningGraph {
    pub(crate) runtime: Arc<GraphRuntime>,
    pub(crate) factory: Arc<OperatorFactory>,
    /// The HAMS manager of stateful nodes on executors.
    pub(crate) hams: Option<Arc<HamsManager>>,
    /// The zenoh session remote replicas use; dropped after the runtime.
    pub(crate) _zenoh: Option<Arc<ZenohReplicas>>,
}

impl RunningGraph {
    /// The runtime, to submit requests.
    pub fn runtime(&self) -> &GraphRuntime {
        &self.runtime
    }

    /// A shared handle to the runtime (for connectors that outlive a borrow).
    pub fn runtime_handle(&self) -> Arc<GraphRuntime> {
        Arc::clone(&self.runtime)
    }

    /// Load counters of every model node's executor.
    pub fn executor_stats(&self) -> Vec<(String, LoadSnapshot)> {
        self.factory.executor_stats()
    }

    /// [`RunningGraph::executor_stats`] as a reader that outlives this borrow, for a metrics
    /// source built once and read at every scrape.
    pub fn executor_stats_reader(
        &self,
    ) -> impl Fn() -> Vec<(String, LoadSnapshot)> + Send + Sync + 'static {
        let factory = Arc::clone(&self.factory);
        move || factory.executor_stats()
    }

    /// The live counters of model node `node`'s in-process executor (`None`: no such node, or it
    /// runs remotely).
    pub fn executor_load(&self, node: &str) -> Option<&LoadStats> {
        self.factory.executor(node).map(|e| e.load_stats())
    }

    /// `/metrics` lines for this graph's operators alone (see [`operator_metrics`]).
    pub fn executor_metrics(&self) -> MetricsSource {
        operator_metrics(std::slice::from_ref(self))
    }

    /// This graph's operators, for [`operator_metrics`].
    fn operators(&self) -> weir_operators::metrics::GraphOperators {
        weir_operators::metrics::GraphOperators {
            graph: self.runtime.plan().name.clone(),
            factory: Arc::clone(&self.factory),
            replies: Arc::clone(self.runtime.replies()),
        }
    }

    /// SERF parallelism gauges of every `parallelism: auto` node, sorted by node.
    pub fn parallelism_stats(&self) -> Vec<(String, ParallelismSnapshot)> {
        self.factory.parallelism_stats()
    }

    /// Parity-coded model nodes (ParM): name and service (its counters), sorted.
    pub fn parity_services(&self) -> Vec<(String, ParityNode)> {
        self.factory.parity_services()
    }

    /// The HAMS manager, when stateful nodes run on executors.
    pub fn hams(&self) -> Option<&HamsManager> {
        self.hams.as_deref()
    }

    /// Stateful nodes' proxies (HAMS), in plan order.
    pub fn stateful_nodes(&self) -> Vec<Arc<StatefulNodeHandle>> {
        self.factory.stateful_nodes()
    }

    /// Replica pools (model nodes with several or remote replicas): name and pool, sorted.
    pub fn replica_pools(&self) -> Vec<(String, ReplicaPool)> {
        self.factory.replica_pools()
    }

    /// The figures of this graph's in-process executors that Triton's statistics report
    /// (`weir_connectors::models`), read live.
    pub fn execution_stats(&self) -> Arc<dyn ExecutionStats> {
        Arc::new(GraphExecution {
            factory: Arc::clone(&self.factory),
        })
    }

    /// Stops admission, answers everything admitted, stops the workers and executors.
    pub fn shutdown(self) {
        self.runtime.shutdown();
    }
}

/// `/metrics` lines for the operators of every graph in `graphs`: executors (queue, calls, rows,
/// errors, busy time, batch sizes), replica pools, SERF parallelism and HAMS, per model node. Each
/// family is written once, with every graph's series under it.
pub fn operator_metrics(graphs: &[RunningGraph]) -> MetricsSource {
    weir_connectors::http::metrics::source(weir_operators::metrics::OperatorMetrics::new(
        graphs.iter().map(RunningGraph::operators).collect(),
    ))
}

/// A graph's executors read as Triton's execution figures: calls, time in ONNX Runtime, and the
/// time jobs waited before their call (each answered job's time from queued to answered, less
/// the calls' time: exact when a call serves one job, the queue's share otherwise). Calls by
/// batch size are kept in buckets ([`BATCH_BUCKET_BOUNDS`]); each is reported under its upper
/// bound, and time per bucket is not kept (its `ns` is 0).
struct GraphExecution {
    factory: Arc<OperatorFactory>,
}

impl ExecutionStats for GraphExecution {
    fn execution(&self) -> Execution {
        let mut total = Execution::default();
        let mut buckets = [0u64; BATCH_BUCKET_BOUNDS.len() + 1];
        for (_, s) in self.factory.executor_stats() {
            // Warm-up calls are executions of the model too (not inferences of a request), as
            // the previous graph-level warm-up showed them.
            total.executions += s.runs + s.warmup_runs;
            total.compute_infer += s.busy;
            total.queue += s.sojourn.saturating_sub(s.busy + s.held);
            for (b, n) in buckets.iter_mut().zip(s.batch_sizes) {
                *b += n;
            }
        }
        total.batches = buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let bound = batch_bucket_bound(i) as u64;
                (bound, *n, std::time::Duration::ZERO)
            })
            .collect();
        total
    }
}
