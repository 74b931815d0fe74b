//! Batching in the central queue: how many queued queries a distribution round hands one idle
//! instance at once (weir's extension of Kairos's query distribution, paper §5.1).
//!
//! The paper's instances serve one query at a time, and a query already is a batch (a
//! recommendation request of 1–1000 items), so its distributor never merges queries. In weir a
//! queued job is whatever the node's batching stage cut (often one row at low load), and executors
//! run a batch of rows in not much more time than one row. A round therefore first matches queries
//! to instances as the paper does ([`crate::distribution::Distributor::assign_with`]), then grows
//! each dispatched query into a batch for its (idle) instance with [`Distributor::fill_batch`]:
//! later queued queries, oldest first, join the batch while
//! - the rows stay within the instance's limit (the node's `batching.max_size`);
//! - every member not already late still meets `γ·T_QoS` with the batch's predicted latency
//!   (Eq. 5 applied to the batch: wait `w_m` + latency of the grown batch);
//! - the query's marginal cost on this instance, `η_j · (L_j(b + b_k) − L_j(b))`, the extra
//!   weighted resource time it adds (Eq. 2's unit), is at most what serving it on its own would
//!   cost on the cheapest other instance that could still meet QoS with it, `η_s · t_ks` with
//!   `t_ks` as in the cost matrix (remaining busy time plus its own latency). A query that no other
//!   instance could serve in time joins whenever the batch stays within QoS.
//!
//! Queries the round matched to a busy instance are left alone: the assignment decided they wait
//! for it. Callers pass instance states with the predicted finish of the batches already given out
//! in the same round, so a later batch compares against the instances as they will be.

use crate::distribution::{Distributor, InstanceState, LatencyModel, QueuedQuery};

impl Distributor {
    /// The queries (indices into `queries`, FIFO order, `head` excluded) that join query `head`'s
    /// batch on idle instance `instance`, for a batch of at most `max_rows` rows. `taken[k]` marks
    /// queries that are not available (dispatched already, or matched to another instance);
    /// `instances` are all usable instances, with the round's earlier batches in their
    /// `busy_until_ms`. See the module docs for the rule.
    #[allow(clippy::too_many_arguments)]
    pub fn fill_batch(
        &self,
        model: &dyn LatencyModel,
        queries: &[QueuedQuery],
        head: usize,
        taken: &[bool],
        instances: &[InstanceState],
        instance: usize,
        now_ms: f64,
        max_rows: u32,
    ) -> Vec<usize> {
        let (Some(first), Some(me)) = (queries.get(head), instances.get(instance)) else {
            return Vec::new();
        };
        let qos = self.qos_ms();
        let limit = self.config().gamma * qos;
        let eta = |t: usize| self.eta().get(t).copied().unwrap_or(1.0);
        let wait = |q: &QueuedQuery| (now_ms - q.arrival_ms).max(0.0);
        // The longest wait among members that have not missed QoS yet: the one the batch's
        // latency must still fit.
        let not_late = |q: &QueuedQuery| Some(wait(q)).filter(|&w| w < qos);
        let mut tightest = not_late(first);
        let mut rows = first.batch;
        let mut latency = model.latency_ms(me.type_idx, rows);
        let mut joined = Vec::new();
        for (k, q) in queries.iter().enumerate() {
            if k == head || taken.get(k).copied().unwrap_or(true) {
                continue;
            }
            let grown = rows.saturating_add(q.batch);
            if grown > max_rows {
                continue;
            }
            let grown_latency = model.latency_ms(me.type_idx, grown);
            let tight = match (tightest, not_late(q)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if tight.is_some_and(|w| w + grown_latency > limit) {
                continue;
            }
            let marginal = eta(me.type_idx) * (grown_latency - latency).max(0.0);
            let late = wait(q) >= qos;
            let alone = instances
                .iter()
                .enumerate()
                .filter(|&(s, _)| s != instance)
                .filter_map(|(_, s)| {
                    let t =
                        (s.busy_until_ms - now_ms).max(0.0) + model.latency_ms(s.type_idx, q.batch);
                    (late || t + wait(q) <= limit).then_some(eta(s.type_idx) * t)
                })
                .fold(f64::INFINITY, f64::min);
            if marginal > alone {
                continue;
            }
            joined.push(k);
            rows = grown;
            latency = grown_latency;
            tightest = tight;
        }
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::DistributorConfig;

    /// Two types: `fast` takes 2 + 1·b ms, `slow` 8 + 4·b ms; η is set by hand in each test.
    struct Linear;

    impl LatencyModel for Linear {
        fn latency_ms(&self, type_idx: usize, batch: u32) -> f64 {
            let b = f64::from(batch);
            match type_idx {
                0 => 2.0 + b,
                _ => 8.0 + 4.0 * b,
            }
        }
    }

    fn distributor(qos_ms: f64) -> Distributor {
        let mut d = Distributor::learned(qos_ms, 2, DistributorConfig::default());
        d.set_eta(vec![1.0, 0.25]);
        d
    }

    fn q(arrival_ms: f64) -> QueuedQuery {
        QueuedQuery {
            batch: 1,
            arrival_ms,
        }
    }

    fn idle(type_idx: usize) -> InstanceState {
        InstanceState {
            type_idx,
            busy_until_ms: 0.0,
        }
    }

    #[test]
    fn a_batch_grows_oldest_first_up_to_the_row_limit() {
        let d = distributor(1_000.0);
        let queries: Vec<QueuedQuery> = (0..10).map(|i| q(f64::from(i))).collect();
        let taken = vec![false; 10];
        let got = d.fill_batch(&Linear, &queries, 0, &taken, &[idle(0)], 0, 10.0, 4);
        assert_eq!(got, vec![1, 2, 3]);
        // Taken queries are skipped; a one-row limit means no batching at all.
        let mut taken = vec![false; 10];
        taken[2] = true;
        assert_eq!(
            d.fill_batch(&Linear, &queries, 0, &taken, &[idle(0)], 0, 10.0, 4),
            vec![1, 3, 4]
        );
        assert!(d
            .fill_batch(&Linear, &queries, 0, &taken, &[idle(0)], 0, 10.0, 1)
            .is_empty());
    }

    #[test]
    fn a_batch_stops_growing_where_its_oldest_member_would_miss_qos() {
        // QoS 20 ms, γ·QoS = 19.6. The head has waited 10 ms; on fast a batch of b rows takes
        // 2 + b ms, so b ≤ 7 fits (10 + 9 = 19 ≤ 19.6) and 8 does not.
        let d = distributor(20.0);
        let queries: Vec<QueuedQuery> = (0..12).map(|_| q(0.0)).collect();
        let got = d.fill_batch(&Linear, &queries, 0, &[false; 12], &[idle(0)], 0, 10.0, 64);
        assert_eq!(got.len(), 6, "7 rows in all");
        // A head that already missed QoS does not hold the others back: they are fresh and
        // only their own deadline counts.
        let mut queries: Vec<QueuedQuery> = (0..12).map(|_| q(9.0)).collect();
        queries[0] = q(-100.0);
        let got = d.fill_batch(&Linear, &queries, 0, &[false; 12], &[idle(0)], 0, 10.0, 64);
        assert_eq!(got.len(), 11, "1 ms waited + 2 + 12 rows ≤ 19.6");
    }

    #[test]
    fn a_query_cheaper_alone_elsewhere_does_not_join() {
        // Slow idle with the head; fast idle too. On slow each extra row costs 0.25 × 4 = 1 ms of
        // weighted time; alone on fast it costs 1 × (2 + 1) = 3: it joins slow's batch.
        let d = distributor(1_000.0);
        let queries: Vec<QueuedQuery> = (0..3).map(|_| q(0.0)).collect();
        let both = [idle(0), idle(1)];
        assert_eq!(
            d.fill_batch(&Linear, &queries, 0, &[false; 3], &both, 1, 0.0, 8),
            vec![1, 2]
        );
        // With η_slow = 1, a row on slow costs 4 > 3 alone on fast: nothing joins.
        let mut d = distributor(1_000.0);
        d.set_eta(vec![1.0, 1.0]);
        assert!(d
            .fill_batch(&Linear, &queries, 0, &[false; 3], &both, 1, 0.0, 8)
            .is_empty());
        // ... unless fast could not serve it within QoS (busy far too long): then it joins.
        let busy_fast = [
            InstanceState {
                type_idx: 0,
                busy_until_ms: 5_000.0,
            },
            idle(1),
        ];
        assert_eq!(
            d.fill_batch(&Linear, &queries, 0, &[false; 3], &busy_fast, 1, 0.0, 8),
            vec![1, 2]
        );
    }
}
