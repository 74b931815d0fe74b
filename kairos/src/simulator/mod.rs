//! A seeded discrete-event simulator of a heterogeneous pool serving one model, to measure the
//! paper's allowable throughput (§7) of a pool and a policy without the pool.
//!
//! Instances serve one query at a time; a query's service time is its type's latency-table value
//! for its batch (optionally with multiplicative Gaussian noise, [`SimOptions::service_cv`]), and
//! its latency is queue wait plus service. Events are arrivals, completions and, while Kairos holds
//! queued work with an instance idle, a tick of `T_QoS / 100`. A [`policy`] decides
//! dispatch. No wall clock is read: runs are deterministic for a given stream and seed.
//!
//! Measurements:
//! - [`allowable_throughput`]: the highest arrival rate at which at least 99 % of queries meet QoS
//!   (p99 ≤ target, paper §7), found by doubling then 12 bisection steps (resolution: start/4096).
//!   A run stops early once more than 1 % of queries have missed QoS (the rate already fails).
//! - [`oracle_throughput`]: the paper's ORCL: every query known up front, sorted by batch; a free
//!   base instance takes the largest remaining, a free auxiliary one the smallest if it meets QoS.
//! - [`oracle_search`]: ORCL over every configuration within budget; its best is the pool the paper
//!   hands to the competing schemes in Fig. 9.

pub mod policy;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};

use crate::planner::{enumerate, Counts};
use crate::profile::ModelProfile;
use crate::workload::QueryStream;
pub use policy::Policy;
use policy::PoolView;

/// Simulation settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Kairos's re-solve tick as a fraction of the QoS target (default 1/100).
    pub tick_fraction: f64,
    /// Coefficient of variation of actual service time around the table mean (0: exact tables).
    pub service_cv: f64,
    /// Seed of the service-time noise.
    pub seed: u64,
    /// Kairos learns latency online from completions (linear fit, then per-bucket means; starts
    /// knowing nothing) instead of reading the profile's tables (paper §5.1).
    pub learn_latency: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            tick_fraction: 0.01,
            service_cv: 0.0,
            seed: 1,
            learn_latency: false,
        }
    }
}

/// The outcome of one run at one arrival rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunStats {
    /// Queries in the stream.
    pub queries: usize,
    /// Queries that started service before the run ended.
    pub served: usize,
    /// Served queries whose latency exceeded QoS.
    pub violations: usize,
    /// Whether the run stopped early because more than 1 % had already missed QoS.
    pub aborted: bool,
}

impl RunStats {
    /// At least 99 % of all queries served within QoS (the p99 criterion).
    pub fn meets_qos(&self) -> bool {
        !self.aborted && self.served == self.queries && self.violations * 100 <= self.queries
    }
}

/// Instance types of a configuration, base instances first, then the others in profile order.
pub fn pool_types(profile: &ModelProfile, counts: &[u32]) -> Vec<usize> {
    let order = std::iter::once(profile.base)
        .chain((0..profile.types.len()).filter(|&t| t != profile.base));
    order
        .flat_map(|t| std::iter::repeat_n(t, counts.get(t).copied().unwrap_or(0) as usize))
        .collect()
}

/// Runs one stream at `qps` queries per second through a pool under a policy.
pub fn simulate(
    profile: &ModelProfile,
    counts: &[u32],
    policy: Policy,
    stream: &QueryStream,
    qps: f64,
    opts: &SimOptions,
) -> RunStats {
    let types = pool_types(profile, counts);
    let is_base: Vec<bool> = types.iter().map(|&t| t == profile.base).collect();
    let n = stream.len();
    let mut stats = RunStats {
        queries: n,
        served: 0,
        violations: 0,
        aborted: false,
    };
    if types.is_empty() || qps.is_nan() || qps <= 0.0 {
        return stats;
    }
    let arrivals = stream.arrivals_ms(qps);
    let mut busy_until = vec![0.0f64; types.len()];
    let mut dispatcher = policy::dispatcher(policy, profile, types.len(), opts.learn_latency);
    let mut in_flight: Vec<Option<(u32, f64)>> = vec![None; types.len()];
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let (qos, tick) = (
        profile.qos_ms,
        profile.qos_ms * opts.tick_fraction.max(1e-6),
    );
    let limit = n / 100;
    let (mut next, mut now, mut ticking) = (0usize, 0.0f64, false);
    let mut out = Vec::new();
    loop {
        let t_arrival = arrivals.get(next).copied().unwrap_or(f64::INFINITY);
        let t_done = busy_until
            .iter()
            .copied()
            .filter(|&b| b > now)
            .fold(f64::INFINITY, f64::min);
        let t_tick = if ticking { now + tick } else { f64::INFINITY };
        let t = t_arrival.min(t_done).min(t_tick);
        if t.is_infinite() {
            break;
        }
        now = t;
        for (j, f) in in_flight.iter_mut().enumerate() {
            if let Some((batch, service)) = f.filter(|_| busy_until[j] <= now) {
                dispatcher.completed(j, types[j], batch, service);
                *f = None;
            }
        }
        let pool = PoolView {
            types: &types,
            busy_until: &busy_until,
            is_base: &is_base,
        };
        while next < n && arrivals[next] <= now {
            dispatcher.admit(next, stream.batches[next], arrivals[next], &pool);
            next += 1;
        }
        out.clear();
        dispatcher.dispatch(now, &pool, &mut out);
        for &(q, j) in &out {
            let mut service = profile.latency_ms(types[j], stream.batches[q]);
            if opts.service_cv > 0.0 {
                let z: f64 = StandardNormal.sample(&mut rng);
                service *= (1.0 + opts.service_cv * z).max(0.05);
            }
            busy_until[j] = now + service;
            in_flight[j] = Some((stream.batches[q], service));
            stats.served += 1;
            if now + service - arrivals[q] > qos {
                stats.violations += 1;
                if stats.violations > limit {
                    stats.aborted = true;
                    return stats;
                }
            }
        }
        let pool = PoolView {
            types: &types,
            busy_until: &busy_until,
            is_base: &is_base,
        };
        ticking = dispatcher.wants_tick(now, &pool);
    }
    stats
}

/// Highest arrival rate (QPS) meeting the p99 criterion, searched from `start_qps`: doubled while
/// it passes, then bisected 12 times. Returns 0 when even tiny rates fail.
pub fn allowable_throughput(
    profile: &ModelProfile,
    counts: &[u32],
    policy: Policy,
    stream: &QueryStream,
    opts: &SimOptions,
    start_qps: f64,
) -> f64 {
    let passes = |qps: f64| simulate(profile, counts, policy, stream, qps, opts).meets_qos();
    let (mut lo, mut hi) = (0.0, start_qps.max(1e-3));
    for _ in 0..20 {
        if !passes(hi) {
            break;
        }
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..12 {
        let mid = 0.5 * (lo + hi);
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The DRS threshold sweep (its per-configuration tuning): the best allowable throughput over
/// `thresholds`, and the threshold achieving it (first one on ties).
pub fn best_drs(
    profile: &ModelProfile,
    counts: &[u32],
    stream: &QueryStream,
    opts: &SimOptions,
    start_qps: f64,
    thresholds: &[u32],
) -> (f64, u32) {
    thresholds
        .iter()
        .map(|&t| {
            (
                allowable_throughput(
                    profile,
                    counts,
                    Policy::Drs { threshold: t },
                    stream,
                    opts,
                    start_qps,
                ),
                t,
            )
        })
        .fold((0.0, thresholds.first().copied().unwrap_or(0)), |a, b| {
            if b.0 > a.0 {
                b
            } else {
                a
            }
        })
}

/// ORCL: throughput (QPS) of serving `batches`, all known up front and sorted, with no waiting
/// and no QoS violation: base instances take the largest remaining query, auxiliary ones the
/// smallest if it meets QoS on them (else they retire). 0 if some query cannot be served.
pub fn oracle_throughput(profile: &ModelProfile, counts: &[u32], batches: &[u32]) -> f64 {
    let types = pool_types(profile, counts);
    let mut sorted = batches.to_vec();
    sorted.sort_unstable();
    let (mut lo, mut hi) = (0usize, sorted.len());
    let mut free_at: Vec<Option<f64>> = vec![Some(0.0); types.len()];
    let mut makespan = 0.0f64;
    while lo < hi {
        let next = free_at
            .iter()
            .enumerate()
            .filter_map(|(j, f)| f.map(|t| (j, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((j, t)) = next else { return 0.0 };
        let take = if types[j] == profile.base {
            hi -= 1;
            Some(sorted[hi])
        } else if profile.latency_ms(types[j], sorted[lo]) <= profile.qos_ms {
            lo += 1;
            Some(sorted[lo - 1])
        } else {
            None
        };
        match take {
            Some(b) => {
                let done = t + profile.latency_ms(types[j], b);
                makespan = makespan.max(done);
                free_at[j] = Some(done);
            }
            None => free_at[j] = None,
        }
    }
    if makespan > 0.0 {
        1000.0 * sorted.len() as f64 / makespan
    } else {
        0.0
    }
}

/// ORCL over every configuration within budget holding a base instance: the best pool and its
/// ORCL throughput, or `None` if nothing with a base instance is affordable.
pub fn oracle_search(
    profile: &ModelProfile,
    budget_per_hour: f64,
    batches: &[u32],
) -> Option<(Counts, f64)> {
    let prices: Vec<f64> = profile
        .types
        .iter()
        .map(|t| t.instance.cost_per_hour)
        .collect();
    enumerate(&prices, budget_per_hour)
        .into_iter()
        .filter(|c| c[profile.base] > 0)
        .map(|c| {
            let q = oracle_throughput(profile, &c, batches);
            (c, q)
        })
        .fold(None, |best: Option<(Counts, f64)>, (c, q)| match best {
            Some(b) if b.1 >= q => Some(b),
            _ => Some((c, q)),
        })
}

#[cfg(test)]
mod tests;
