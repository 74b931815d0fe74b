//! The operator metrics of every graph a process runs, as one [`Collector`]: each family writes
//! its own series from the counters it keeps (rows expired per node, the gathers' joins,
//! [`model::executor::metrics`],
//! [`model::replicas::metrics`], [`model::parallelism::metrics`], [`parity::metrics`],
//! [`stateful::metrics`]), read from each graph's [`OperatorFactory`] at scrape time, in that
//! order. Every family is written
//! once with the series of all graphs under it (labelled by `graph`): the Prometheus text format
//! allows one `# HELP`/`# TYPE` block per family.

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::dataflow::egress::ReplyTable;
use weir_engine::dataflow::gather_stats::GatherSnapshot;
use weir_engine::metrics::{self as m, Collector};

use crate::{model, parity, stateful, OperatorFactory};

/// One running graph's operators: its name, its factory and its reply table (HAMS's release gate).
#[derive(Debug)]
pub struct GraphOperators {
    /// The graph's name (the `graph` label).
    pub graph: String,
    /// Its operators.
    pub factory: Arc<OperatorFactory>,
    /// Its reply table.
    pub replies: Arc<ReplyTable>,
}

/// The operator families of every running graph of the process.
#[derive(Debug)]
pub struct OperatorMetrics {
    graphs: Vec<GraphOperators>,
}

impl OperatorMetrics {
    /// The metrics of `graphs`' operators.
    pub fn new(graphs: Vec<GraphOperators>) -> Self {
        OperatorMetrics { graphs }
    }

    /// Each graph's name with what `read` takes from its factory.
    fn per_graph<T>(&self, read: impl Fn(&OperatorFactory) -> T) -> Vec<(&str, T)> {
        self.graphs
            .iter()
            .map(|g| (g.graph.as_str(), read(&g.factory)))
            .collect()
    }
}

impl Collector for OperatorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let e = &mut encoder;
        model::executor::metrics::encode(e, &self.per_graph(|f| f.executor_stats()))?;
        let expired = self.per_graph(|f| f.expired_rows());
        weir_engine::metrics::counter(
            e,
            weir_engine::metrics::NODE_EXPIRED_TOTAL,
            "Rows a model node answered expired instead of running: their deadline passed while they waited.",
            weir_engine::metrics::per_node(&expired)
                .into_iter()
                .map(|(g, n, rows)| (weir_engine::metrics::node_labels(g, n), *rows)),
        )?;
        gathers(e, &self.per_graph(|f| f.gather_stats()))?;
        model::replicas::metrics::encode(e, &self.per_graph(|f| f.replica_pools()))?;
        model::parallelism::metrics::encode(e, &self.per_graph(|f| f.parallelism_stats()))?;
        parity::metrics::encode(e, &self.per_graph(|f| f.parity_services()))?;
        let state: Vec<_> = self
            .graphs
            .iter()
            .map(|g| (g.graph.as_str(), g.factory.stateful_nodes(), &*g.replies))
            .collect();
        stateful::metrics::encode(e, &state)
    }
}

/// The gather nodes' families: joins, parts, failures, drops, joins waiting and time waited.
fn gathers(
    e: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, GatherSnapshot)>)],
) -> fmt::Result {
    let nodes = m::per_node(graphs);
    let series = |f: fn(&GatherSnapshot) -> m::Value| {
        nodes
            .iter()
            .map(move |(g, n, s)| (m::node_labels(g, n), f(s)))
    };
    m::counter(
        e,
        m::GATHER_JOINED_TOTAL,
        "Requests whose parts a gather joined into one row.",
        series(|s| s.joined.into()),
    )?;
    m::counter(
        e,
        m::GATHER_PARTS_TOTAL,
        "Parts a gather took.",
        series(|s| s.parts.into()),
    )?;
    m::counter(
        e,
        m::GATHER_FAILED_TOTAL,
        "Requests whose parts a gather could not join.",
        series(|s| s.failed.into()),
    )?;
    m::counter(
        e,
        m::GATHER_DROPPED_TOTAL,
        "Requests a gather dropped incomplete when their epoch closed (a part failed elsewhere).",
        series(|s| s.dropped.into()),
    )?;
    m::gauge(
        e,
        m::GATHER_WAITING,
        "Joins a gather holds open, waiting for parts.",
        series(|s| s.waiting().into()),
    )?;
    m::counter(
        e,
        m::GATHER_WAIT_SECONDS_TOTAL,
        "Time joined requests waited for their last part, summed.",
        series(|s| s.wait.as_secs_f64().into()),
    )
}
