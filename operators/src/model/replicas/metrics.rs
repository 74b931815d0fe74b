//! `/metrics` of a graph's replica pools: per replica, liveness, jobs outstanding and dispatched;
//! per node, re-dispatches, jobs failed for want of a live replica, and suppressed late answers.

use std::fmt;

use prometheus_client::encoding::DescriptorEncoder;
use weir_engine::metrics::{self as m, counter, gauge, node_labels, per_node, Value};

use super::{PoolStats, ReplicaPool};

/// One replica as [`ReplicaPool::replica_states`] reports it: name, alive, outstanding, dispatched.
type ReplicaState = (String, bool, usize, u64);

/// Writes the replica families of every graph in `graphs` (graph, its (node, pool) list); nothing
/// without pools.
///
/// # Errors
/// When writing fails.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    graphs: &[(&str, Vec<(String, ReplicaPool)>)],
) -> fmt::Result {
    let pools = per_node(graphs);
    if pools.is_empty() {
        return Ok(());
    }
    let replicas: Vec<(&str, &str, ReplicaState)> = pools
        .iter()
        .flat_map(|&(graph, node, pool)| {
            pool.replica_states()
                .into_iter()
                .map(move |r| (graph, node, r))
        })
        .collect();
    let per_replica = |value: fn(&ReplicaState) -> Value| {
        replicas.iter().map(move |(graph, node, r)| {
            (
                (node_labels(graph, node), [("replica", r.0.as_str())]),
                value(r),
            )
        })
    };
    gauge(
        encoder,
        m::REPLICA_ALIVE,
        "Whether the replica is alive (1) or not (0).",
        per_replica(|r| u64::from(r.1).into()),
    )?;
    gauge(
        encoder,
        m::REPLICA_OUTSTANDING,
        "Jobs sent to the replica and not answered yet.",
        per_replica(|r| r.2.into()),
    )?;
    counter(
        encoder,
        m::REPLICA_DISPATCHED_TOTAL,
        "Jobs sent to the replica.",
        per_replica(|r| r.3.into()),
    )?;
    type PoolValue = fn(&PoolStats) -> u64;
    let per_node: [(&str, &str, PoolValue); 3] = [
        (
            m::REPLICA_REDISPATCHED_TOTAL,
            "Jobs re-dispatched after a replica died, timed out or shed them.",
            |s| s.redispatched,
        ),
        (
            m::REPLICA_FAILED_TOTAL,
            "Jobs failed because no replica was alive.",
            |s| s.failed,
        ),
        (
            m::REPLICA_LATE_ANSWERS_TOTAL,
            "Answers that came after the job was answered (suppressed).",
            |s| s.late_answers,
        ),
    ];
    for (name, help, value) in per_node {
        counter(
            encoder,
            name,
            help,
            pools
                .iter()
                .map(|(graph, node, pool)| (node_labels(graph, node), value(&pool.stats()))),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weir_engine::batch::TensorColumn;
    use weir_engine::metrics::{text, FromFn};
    use weir_engine::tensor::TensorData;

    use super::*;
    use crate::model::{InferenceService, Job, Replica, ReplicaDone};

    /// A replica that answers every job with its inputs, or is down.
    struct Echo(&'static str, bool);

    impl Replica for Echo {
        fn name(&self) -> &str {
            self.0
        }
        fn is_alive(&self) -> bool {
            self.1
        }
        fn capacity(&self) -> usize {
            4
        }
        fn dispatch(
            &self,
            inputs: Vec<TensorColumn>,
            _: crate::model::replicas::JobTiming,
            done: ReplicaDone,
        ) {
            done(Ok(inputs));
        }
    }

    #[test]
    fn replica_metrics_name_every_replica_and_count_dispatches() {
        let pool = ReplicaPool::new(
            "m",
            vec![Arc::new(Echo("a", true)), Arc::new(Echo("b", false))],
            1,
        );
        for _ in 0..3 {
            let col = TensorColumn::from_data("x", vec![1], 1, TensorData::F32(vec![1.0])).unwrap();
            let job = Job {
                inputs: vec![col],
                enqueued_at: std::time::Instant::now(),
                deadline: None,
                trace: None,
                done: Box::new(|r| assert!(r.is_ok())),
            };
            assert!(pool.try_submit(job).is_ok());
        }
        let graphs = vec![("g", vec![("m".to_string(), pool)])];
        let out = text(FromFn(move |e: &mut DescriptorEncoder| encode(e, &graphs))).unwrap();
        assert!(
            out.contains("weir_replica_alive{graph=\"g\",node=\"m\",replica=\"a\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_alive{graph=\"g\",node=\"m\",replica=\"b\"} 0"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_dispatched_total{graph=\"g\",node=\"m\",replica=\"a\"} 3"),
            "{out}"
        );
        assert!(
            out.contains("weir_replica_redispatched_total{graph=\"g\",node=\"m\"} 0"),
            "{out}"
        );
        assert!(
            out.contains("# TYPE weir_replica_outstanding gauge"),
            "{out}"
        );
    }
}
