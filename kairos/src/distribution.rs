//! One round of Kairos's query distribution (paper §5.1, Eqs. 1–8).
//!
//! Given the FIFO queue, every instance's state and the clock, [`Distributor::assign`] builds the
//! cost matrix `c_ij = η_j · t_ij` for the first `min(|queue|, 2N)` queries × all `N` instances,
//! where `t_ij` is the instance's remaining busy time plus the predicted latency of query `i`'s
//! batch on `j`'s type, penalises pairs that would miss QoS (`t_ij + w_i > γ·T_QoS`, γ = 0.98),
//! solves the rectangular min-cost assignment, and returns only the pairs whose instance is idle
//! now. Queries matched to busy instances stay queued for the next round; that is how Kairos
//! "waits for the GPU that frees up soon" (as the authors' artifact does).
//!
//! Solver: `pathfinding`'s Kuhn–Munkres (Hungarian, O(n³)) on integer costs (0.1 µs units), chosen
//! over the `lsap` crate because pathfinding is actively maintained; rectangular problems are
//! solved with the smaller side as rows. Decisions where the paper leaves room:
//! - η = `round(L_base(max)/L_j(max), 2)` ([`crate::profile::ModelProfile::eta`]).
//! - Penalty, with `Π = (pairs + 1) · (largest plain cost) + 1`, so that any matching with
//!   fewer (tier-weighted) violations costs less than any with more, whatever the feasible costs
//!   (so no matching trades a QoS violation for cheaper feasible pairs; the artifact's absolute
//!   500/1000 ms constants do not guarantee this once a matching's feasible costs add up past
//!   1000 ms, as they can under RM2's 350 ms target):
//!   - [`Penalty::Flat`] (default): a pair inside the γ band costs `Π`, one beyond QoS `2Π`,
//!     whatever its time: the artifact's rule (equal cost for all violators, band cheaper)
//!     made scale-free. Measured on the simulator it beats the alternative below by up to 5 %
//!     (WND (1,0,13,0): 1470 vs 1398 QPS), because a violator carrying its time is steered to
//!     the idle instance with the smallest η·t, which is the slow CPU that then really violates.
//!   - [`Penalty::Lexicographic`]: adds `tier · Π` to the plain cost, keeping the order among
//!     violators.
//!   - [`Penalty::Replace`]: the artifact's constants verbatim (500 ms in the band, 1000 ms beyond).
//! - Queries that have already missed QoS (`w_i ≥ T_QoS`) keep their plain cost and are still
//!   served, never dropped (as in the artifact).
//! - The caller re-runs a round on every arrival, completion and a fine tick (`T_QoS / 100`), so
//!   an instance that frees up is matched without waiting for the next arrival.

use pathfinding::prelude::{kuhn_munkres_min, Matrix};

use crate::profile::ModelProfile;

/// Costs are solved as integers in units of 0.1 µs.
const COST_UNITS_PER_MS: f64 = 10_000.0;

/// A query waiting in the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueuedQuery {
    /// Its batch size.
    pub batch: u32,
    /// When it arrived (ms, same clock as `now_ms`).
    pub arrival_ms: f64,
}

/// An instance of the pool as the router sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceState {
    /// Index of its instance type in the profile.
    pub type_idx: usize,
    /// When its current query is predicted to finish (ms); idle when `<= now_ms`.
    pub busy_until_ms: f64,
}

impl InstanceState {
    /// Whether it can take a query at `now_ms`.
    pub fn is_idle(&self, now_ms: f64) -> bool {
        self.busy_until_ms <= now_ms
    }
}

/// How pairs that would miss QoS are priced (Eq. 8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Penalty {
    /// Replace the cost by `Π` in the band and `2Π` beyond QoS (the default; see module docs).
    Flat,
    /// Add `Π` (band) or `2Π` (beyond QoS) to the plain cost.
    Lexicographic,
    /// Replace the cost with a constant, as the artifact does.
    Replace {
        /// Cost (ms) inside the safeguard band `γ·T_QoS < t_ij + w_i ≤ T_QoS` (artifact: 500).
        band_ms: f64,
        /// Cost (ms) beyond the QoS target (artifact: 1000).
        violate_ms: f64,
    },
}

impl Penalty {
    /// The artifact's constants.
    pub const ARTIFACT: Penalty = Penalty::Replace {
        band_ms: 500.0,
        violate_ms: 1000.0,
    };
}

/// Settings of a distribution round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistributorConfig {
    /// Safeguard factor γ on the QoS target (paper: 0.98).
    pub gamma: f64,
    /// Penalty form.
    pub penalty: Penalty,
    /// The matrix holds the first `window_per_instance × N` queued queries (artifact: 2).
    pub window_per_instance: usize,
    /// Keep a query queued when the matching pairs it with an idle instance it would miss QoS
    /// on (Eq. 5 as a hard constraint); the artifact dispatches it anyway (`false`).
    pub hold_violating: bool,
}

impl Default for DistributorConfig {
    fn default() -> Self {
        DistributorConfig {
            gamma: 0.98,
            penalty: Penalty::Flat,
            window_per_instance: 2,
            hold_violating: false,
        }
    }
}

/// Predicts a batch's latency on an instance type; the tables of a [`ModelProfile`] or a
/// [`crate::predictor::OnlineLatency`] learned while serving.
pub trait LatencyModel {
    /// Predicted latency (ms) of `batch` on type `type_idx`.
    fn latency_ms(&self, type_idx: usize, batch: u32) -> f64;
}

impl LatencyModel for ModelProfile {
    fn latency_ms(&self, type_idx: usize, batch: u32) -> f64 {
        ModelProfile::latency_ms(self, type_idx, batch)
    }
}

/// Kairos's query distributor for one model: QoS target, η per type and latency tables (or none,
/// for a pool whose latencies are learned while serving).
#[derive(Debug, Clone)]
pub struct Distributor {
    profile: Option<ModelProfile>,
    qos_ms: f64,
    eta: Vec<f64>,
    config: DistributorConfig,
}

/// Predicts 0 ms for everything: what [`Distributor::assign`] uses without tables.
struct NoTables;

impl LatencyModel for NoTables {
    fn latency_ms(&self, _: usize, _: u32) -> f64 {
        0.0
    }
}

impl Distributor {
    /// A distributor with the default settings.
    pub fn new(profile: &ModelProfile) -> Self {
        Self::with_config(profile, DistributorConfig::default())
    }

    /// A distributor with explicit settings.
    pub fn with_config(profile: &ModelProfile, config: DistributorConfig) -> Self {
        Distributor {
            eta: profile.eta(),
            qos_ms: profile.qos_ms,
            profile: Some(profile.clone()),
            config,
        }
    }

    /// A distributor with no latency tables, for `n_types` instance types whose latencies a live
    /// router learns (pass its model to [`Self::assign_with`], and η to [`Self::set_eta`] as it
    /// learns, e.g. from [`eta_from`]). η starts at 1 for every type.
    pub fn learned(qos_ms: f64, n_types: usize, config: DistributorConfig) -> Self {
        Distributor {
            profile: None,
            qos_ms,
            eta: vec![1.0; n_types],
            config,
        }
    }

    /// The profile (latency tables used by [`Self::assign`]); `None` for [`Self::learned`].
    pub fn profile(&self) -> Option<&ModelProfile> {
        self.profile.as_ref()
    }

    /// The QoS target (ms).
    pub fn qos_ms(&self) -> f64 {
        self.qos_ms
    }

    /// The round's settings.
    pub fn config(&self) -> &DistributorConfig {
        &self.config
    }

    /// η per instance type.
    pub fn eta(&self) -> &[f64] {
        &self.eta
    }

    /// Replaces η, for a router whose latencies are learned online rather than read from the
    /// profile's tables (see [`eta_from`]). Types without an entry count as η = 1.
    pub fn set_eta(&mut self, eta: Vec<f64>) {
        self.eta = eta;
    }

    /// One round with the profile's latency tables (0 ms predicted for a [`Self::learned`] one,
    /// which should use [`Self::assign_with`]); see [`Self::assign_with`].
    ///
    /// # Examples
    ///
    /// A routing stage keeps its queue in FIFO order and, per replica, the instance type (from
    /// the executor's `instance_type` label) and when its in-flight batch should finish. Times are
    /// milliseconds on any clock shared by `arrival_ms`, `busy_until_ms` and `now_ms`.
    ///
    /// ```
    /// use weir_kairos::distribution::{Distributor, InstanceState, QueuedQuery};
    /// use weir_kairos::profile::paper::PaperModel;
    ///
    /// let profile = PaperModel::Rm2.profile(); // or ModelProfile::from_yaml(..)?
    /// let router = Distributor::new(&profile);
    /// let gpu = profile.type_index("g4dn.xlarge").unwrap();
    /// let cpu = profile.type_index("r5n.large").unwrap();
    /// let replicas = [
    ///     InstanceState { type_idx: gpu, busy_until_ms: 12.0 }, // busy for 2 more ms
    ///     InstanceState { type_idx: cpu, busy_until_ms: 0.0 },  // idle
    /// ];
    /// let queue = [
    ///     QueuedQuery { batch: 900, arrival_ms: 5.0 }, // too slow on r5n for 350 ms: waits for the GPU
    ///     QueuedQuery { batch: 100, arrival_ms: 6.0 },
    /// ];
    /// // Dispatch query 1 to replica 1 now; query 0 stays queued for the next round.
    /// assert_eq!(router.assign(&queue, &replicas, 10.0), vec![(1, 1)]);
    /// ```
    pub fn assign(
        &self,
        queries: &[QueuedQuery],
        instances: &[InstanceState],
        now_ms: f64,
    ) -> Vec<(usize, usize)> {
        match &self.profile {
            Some(p) => self.assign_with(p, queries, instances, now_ms),
            None => self.assign_with(&NoTables, queries, instances, now_ms),
        }
    }

    /// One round: `queries` in FIFO order, all instances (busy ones included). Returns
    /// `(query index, instance index)` pairs to dispatch now, sorted by query index; every returned
    /// instance is idle and appears once. Instance `type_idx` values must index the profile.
    pub fn assign_with(
        &self,
        model: &dyn LatencyModel,
        queries: &[QueuedQuery],
        instances: &[InstanceState],
        now_ms: f64,
    ) -> Vec<(usize, usize)> {
        self.matching_with(model, queries, instances, now_ms)
            .into_iter()
            .filter(|&(_, _, now)| now)
            .map(|(i, j, _)| (i, j))
            .collect()
    }

    /// The whole matching of one round: `(query index, instance index, dispatch now)` for every
    /// matched pair, sorted by query index. Pairs not dispatched now are queries the round keeps
    /// for a busy instance (or, with `hold_violating`, holds back); [`Self::assign_with`] returns
    /// the others. Empty when no instance is idle.
    pub fn matching_with(
        &self,
        model: &dyn LatencyModel,
        queries: &[QueuedQuery],
        instances: &[InstanceState],
        now_ms: f64,
    ) -> Vec<(usize, usize, bool)> {
        if queries.is_empty() || !instances.iter().any(|s| s.is_idle(now_ms)) {
            return Vec::new();
        }
        let window = &queries[..queries
            .len()
            .min(self.config.window_per_instance.max(1) * instances.len())];
        let (cost, tiers) = self.priced(model, window, instances, now_ms);
        let n = instances.len();
        let mut pairs: Vec<(usize, usize, bool)> = solve_assignment(window.len(), n, &cost)
            .into_iter()
            .map(|(i, j)| {
                let now = instances[j].is_idle(now_ms)
                    && (!self.config.hold_violating || tiers[i * n + j] == 0);
                (i, j, now)
            })
            .collect();
        pairs.sort_unstable_by_key(|&(i, j, _)| (i, j));
        pairs
    }

    /// The penalised cost matrix (row-major, queries × instances, 0.1 µs units) of one round.
    pub fn cost_matrix(
        &self,
        model: &dyn LatencyModel,
        queries: &[QueuedQuery],
        instances: &[InstanceState],
        now_ms: f64,
    ) -> Vec<i64> {
        self.priced(model, queries, instances, now_ms).0
    }

    /// Costs and tiers (0 feasible or already late, 1 inside the γ band, 2 beyond QoS).
    fn priced(
        &self,
        model: &dyn LatencyModel,
        queries: &[QueuedQuery],
        instances: &[InstanceState],
        now_ms: f64,
    ) -> (Vec<i64>, Vec<i64>) {
        let qos = self.qos_ms;
        let (m, n) = (queries.len(), instances.len());
        let mut cost = Vec::with_capacity(m * n);
        // Tier of each pair: 0 feasible, 1 inside the γ safeguard band, 2 beyond the QoS target.
        let mut tiers = Vec::with_capacity(m * n);
        for q in queries {
            let wait = (now_ms - q.arrival_ms).max(0.0);
            let already_late = wait >= qos;
            for s in instances {
                let t = (s.busy_until_ms - now_ms).max(0.0) + model.latency_ms(s.type_idx, q.batch);
                let eta = self.eta.get(s.type_idx).copied().unwrap_or(1.0);
                let tier: i64 = match (already_late, t + wait) {
                    (true, _) => 0,
                    (false, x) if x > qos => 2,
                    (false, x) if x > self.config.gamma * qos => 1,
                    _ => 0,
                };
                let c = match (tier, self.config.penalty) {
                    (1, Penalty::Replace { band_ms, .. }) => band_ms,
                    (2, Penalty::Replace { violate_ms, .. }) => violate_ms,
                    _ => eta * t,
                };
                cost.push((c * COST_UNITS_PER_MS).round() as i64);
                tiers.push(tier);
            }
        }
        if !matches!(self.config.penalty, Penalty::Replace { .. }) && tiers.iter().any(|&v| v > 0) {
            let max = cost.iter().copied().max().unwrap_or(0);
            let big = (m.min(n) as i64 + 1) * max + 1;
            let flat = self.config.penalty == Penalty::Flat;
            for (c, &t) in cost.iter_mut().zip(&tiers) {
                if t > 0 {
                    *c = t * big + if flat { 0 } else { *c };
                }
            }
        }
        (cost, tiers)
    }
}

/// η per type (Definition 1, same rounding as [`ModelProfile::eta`]) from any latency model:
/// `round(L_base(max_batch) / L_t(max_batch), 2)` where the base is the type with the lowest
/// latency at `max_batch` among those `known` (with a prediction). Unknown types get η = 1, so a
/// type nobody has measured yet is neither favoured nor shunned by its weight.
pub fn eta_from(model: &dyn LatencyModel, known: &[bool], max_batch: u32) -> Vec<f64> {
    let lat: Vec<Option<f64>> = known
        .iter()
        .enumerate()
        .map(|(t, &k)| {
            let l = model.latency_ms(t, max_batch);
            (k && l.is_finite() && l > 0.0).then_some(l)
        })
        .collect();
    let base = lat.iter().flatten().copied().reduce(f64::min);
    lat.iter()
        .map(|l| match (l, base) {
            (Some(l), Some(b)) => (b / l * 100.0).round() / 100.0,
            _ => 1.0,
        })
        .collect()
}

/// Optimal rectangular min-cost assignment of a row-major `rows × cols` matrix: exactly
/// `min(rows, cols)` `(row, col)` pairs, each row and column at most once.
///
/// # Panics
/// When `cost.len() != rows * cols` (an internal contract of this module's callers).
pub fn solve_assignment(rows: usize, cols: usize, cost: &[i64]) -> Vec<(usize, usize)> {
    assert_eq!(cost.len(), rows * cols, "cost matrix shape");
    if rows == 0 || cols == 0 {
        return Vec::new();
    }
    if rows <= cols {
        let m = Matrix::from_fn(rows, cols, |(i, j)| cost[i * cols + j]);
        kuhn_munkres_min(&m).1.into_iter().enumerate().collect()
    } else {
        let m = Matrix::from_fn(cols, rows, |(j, i)| cost[i * cols + j]);
        kuhn_munkres_min(&m)
            .1
            .into_iter()
            .enumerate()
            .map(|(j, i)| (i, j))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::profile::paper::PaperModel;

    fn query(batch: u32, arrival_ms: f64) -> QueuedQuery {
        QueuedQuery { batch, arrival_ms }
    }

    fn instance(type_idx: usize, busy_until_ms: f64) -> InstanceState {
        InstanceState {
            type_idx,
            busy_until_ms,
        }
    }

    fn total(cost: &[i64], cols: usize, pairs: &[(usize, usize)]) -> i64 {
        pairs.iter().map(|&(i, j)| cost[i * cols + j]).sum()
    }

    /// Minimum over all injective maps of the smaller side into the larger.
    fn brute(rows: usize, cols: usize, cost: &[i64]) -> i64 {
        fn go(
            r: usize,
            rows: usize,
            cols: usize,
            used: &mut Vec<bool>,
            cost: &[i64],
            t: bool,
        ) -> i64 {
            if r == rows {
                return 0;
            }
            let mut best = i64::MAX;
            for c in 0..cols {
                if !used[c] {
                    used[c] = true;
                    let v = if t {
                        cost[c * rows + r]
                    } else {
                        cost[r * cols + c]
                    };
                    best = best.min(v + go(r + 1, rows, cols, used, cost, t));
                    used[c] = false;
                }
            }
            best
        }
        if rows <= cols {
            go(0, rows, cols, &mut vec![false; cols], cost, false)
        } else {
            go(0, cols, rows, &mut vec![false; rows], cost, true)
        }
    }

    #[test]
    fn solver_matches_brute_force_square_tall_wide() {
        let mut rng = StdRng::seed_from_u64(9);
        for _ in 0..300 {
            let (r, c) = (rng.random_range(1..=7), rng.random_range(1..=7));
            let cost: Vec<i64> = (0..r * c).map(|_| rng.random_range(0..1000)).collect();
            let pairs = solve_assignment(r, c, &cost);
            assert_eq!(pairs.len(), r.min(c));
            let mut rs: Vec<_> = pairs.iter().map(|p| p.0).collect();
            let mut cs: Vec<_> = pairs.iter().map(|p| p.1).collect();
            rs.sort_unstable();
            rs.dedup();
            cs.sort_unstable();
            cs.dedup();
            assert_eq!((rs.len(), cs.len()), (r.min(c), r.min(c)));
            assert_eq!(total(&cost, c, &pairs), brute(r, c, &cost), "{r}x{c}");
        }
        // Known cases: square, tall (3 queries, 2 instances), wide (1 query, 3 instances).
        assert_eq!(solve_assignment(2, 2, &[4, 1, 2, 9]), vec![(0, 1), (1, 0)]);
        let mut tall = solve_assignment(3, 2, &[5, 9, 1, 9, 9, 2]);
        tall.sort_unstable();
        assert_eq!(tall, vec![(1, 0), (2, 1)]);
        assert_eq!(solve_assignment(1, 3, &[3, 1, 2]), vec![(0, 1)]);
        assert!(solve_assignment(0, 3, &[]).is_empty());
    }

    #[test]
    fn cost_is_eta_weighted_time_to_finish() {
        let p = PaperModel::Rm2.profile();
        let d = Distributor::new(&p);
        let q = [query(100, 0.0)];
        let inst = [
            instance(0, 0.0),
            instance(2, 30.0), // busy 20 ms more at now = 10
        ];
        let c = d.cost_matrix(&p, &q, &inst, 10.0);
        assert_eq!(c[0], (29.21 * COST_UNITS_PER_MS).round() as i64);
        assert_eq!(
            c[1],
            (0.65 * (20.0 + 43.22) * COST_UNITS_PER_MS).round() as i64
        );
    }

    #[test]
    fn violating_pairs_never_chosen_when_a_feasible_matching_exists() {
        // DIEN (QoS 35 ms): a batch-1000 query only fits on g4dn (18.6 ms); on r5n it takes 83.6 ms.
        // The plain η-cost prefers r5n (0.22·83.6 = 18.4 < 18.6); the penalty must flip that.
        let p = PaperModel::Dien.profile();
        let big = query(1000, 0.0);
        let inst = [instance(0, 0.0), instance(2, 0.0)];
        for penalty in [Penalty::Flat, Penalty::Lexicographic, Penalty::ARTIFACT] {
            let d = Distributor::with_config(
                &p,
                DistributorConfig {
                    penalty,
                    ..Default::default()
                },
            );
            assert_eq!(d.assign(&[big], &inst, 0.0), vec![(0, 0)], "{penalty:?}");
        }
        // Random rounds: the chosen matching has the least violation weight (1 inside the γ band,
        // 2 beyond QoS) of any full matching, for both scale-free penalties.
        let mut rng = StdRng::seed_from_u64(8);
        for round in 0..400 {
            let penalty = if round % 2 == 0 {
                Penalty::Flat
            } else {
                Penalty::Lexicographic
            };
            let d = Distributor::with_config(
                &p,
                DistributorConfig {
                    penalty,
                    ..Default::default()
                },
            );
            let m = rng.random_range(1..=5);
            let qs: Vec<_> = (0..m)
                .map(|_| query(rng.random_range(1..=100) * 10, -rng.random_range(0.0..30.0)))
                .collect();
            let inst: Vec<_> = (0..4).map(|j| instance(j, 0.0)).collect();
            let viol: Vec<i64> = qs
                .iter()
                .flat_map(|q| (0..4).map(move |j| (q, j)))
                .map(|(q, j)| {
                    let x = p.latency_ms(j, q.batch) - q.arrival_ms;
                    i64::from(x > 0.98 * 35.0) + i64::from(x > 35.0)
                })
                .collect();
            let pairs = d.assign(&qs, &inst, 0.0);
            assert_eq!(pairs.len(), m.min(4));
            assert_eq!(total(&viol, 4, &pairs), brute(m, 4, &viol));
        }
    }

    #[test]
    fn late_queries_keep_plain_cost_and_are_served() {
        let p = PaperModel::Dien.profile();
        let d = Distributor::new(&p);
        let late = query(1000, -100.0); // waited 100 ms > 35 ms
        let inst = [instance(2, 0.0)];
        let c = d.cost_matrix(&p, &[late], &inst, 0.0);
        assert_eq!(c[0], (0.22 * 83.58 * COST_UNITS_PER_MS).round() as i64);
        assert_eq!(d.assign(&[late], &inst, 0.0), vec![(0, 0)]);
    }

    #[test]
    fn hold_violating_keeps_the_query_queued() {
        // DIEN batch 1000 on an idle r5n (83.6 ms > 35 ms) while the g4dn is busy for 30 ms:
        // the matching must pair it with the r5n or the g4dn (30 + 18.6 > 34.3: both violate).
        let p = PaperModel::Dien.profile();
        let q = [query(1000, 0.0)];
        let inst = [instance(0, 30.0), instance(2, 0.0)];
        let art = Distributor::new(&p);
        let hold = Distributor::with_config(
            &p,
            DistributorConfig {
                hold_violating: true,
                ..Default::default()
            },
        );
        assert!(hold.assign(&q, &inst, 0.0).is_empty());
        // Flat penalty: both pairs beyond QoS cost the same; the solver may pick either, but a
        // dispatched pair can only be the idle r5n.
        assert!(art.assign(&q, &inst, 0.0).iter().all(|&(_, j)| j == 1));
    }

    #[test]
    fn eta_from_a_learned_model_matches_the_profile_and_defaults_unknown_types_to_one() {
        let p = PaperModel::Rm2.profile();
        let all = vec![true; p.types.len()];
        assert_eq!(eta_from(&p, &all, p.max_batch), p.eta());
        let mut some = all.clone();
        some[3] = false;
        let eta = eta_from(&p, &some, p.max_batch);
        assert_eq!(eta[3], 1.0);
        assert_eq!(&eta[..3], &p.eta()[..3]);
        assert_eq!(eta_from(&p, &[false, false], 1000), vec![1.0, 1.0]);
    }

    #[test]
    fn only_idle_instances_get_work_and_window_is_2n() {
        let p = PaperModel::Rm2.profile();
        let d = Distributor::new(&p);
        // g4dn busy for 1 more ms; r5n idle. Two big queries: the better home of one is the GPU.
        let inst = [instance(0, 1.0), instance(2, 0.0)];
        let qs = [query(900, 0.0), query(100, 0.0)];
        let got = d.assign(&qs, &inst, 0.0);
        // batch 900 waits for the GPU (r5n would take 363 ms > 0.98·350); batch 100 goes to r5n.
        assert_eq!(got, vec![(1, 1)]);
        // No idle instance: nothing dispatched.
        let busy = [instance(0, 5.0)];
        assert!(d.assign(&qs, &busy, 0.0).is_empty());
        // Window: with 1 instance only the first 2 queries are considered (FIFO kept).
        let one = [instance(0, 0.0)];
        let many: Vec<_> = [500, 400, 10].iter().map(|&b| query(b, 0.0)).collect();
        assert_eq!(d.assign(&many, &one, 0.0), vec![(1, 0)]); // the cheapest of the first two, not batch 10
    }
}
