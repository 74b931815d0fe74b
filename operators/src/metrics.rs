//! A graph's operator metrics as one [`Collector`]: each family writes its own series from the
//! counters it keeps ([`model::executor::metrics`], [`model::replicas::metrics`],
//! [`model::parallelism::metrics`], [`stateful::metrics`]), read from the [`OperatorFactory`] at
//! scrape time, in that order. ParM's counters ([`crate::parity::ParityStats`]) are reported by
//! `weir run`, not exported.

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::dataflow::egress::ReplyTable;
use weir_engine::metrics::Collector;

use crate::{model, stateful, OperatorFactory};

/// The operator families of one running graph.
#[derive(Debug)]
pub struct OperatorMetrics {
    graph: String,
    factory: Arc<OperatorFactory>,
    replies: Arc<ReplyTable>,
}

impl OperatorMetrics {
    /// The metrics of graph `graph`'s operators in `factory`, with its HAMS release gate `replies`.
    pub fn new(graph: String, factory: Arc<OperatorFactory>, replies: Arc<ReplyTable>) -> Self {
        OperatorMetrics {
            graph,
            factory,
            replies,
        }
    }
}

impl Collector for OperatorMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let (graph, f) = (self.graph.as_str(), &self.factory);
        model::executor::metrics::encode(&mut encoder, graph, &f.executor_stats())?;
        model::replicas::metrics::encode(&mut encoder, graph, &f.replica_pools())?;
        model::parallelism::metrics::encode(&mut encoder, graph, &f.parallelism_stats())?;
        stateful::metrics::encode(&mut encoder, graph, &f.stateful_nodes(), &self.replies)
    }
}
