//! The set-ups compared: the heterogeneous pool and every homogeneous pool the budget buys, each
//! under every routing policy.

use super::types::EmulatedType;
use super::{KairosLatency, KairosLiveConfig, MAX_QUERY_ROWS, PROFILE_FILE};

/// A routing policy of the model node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `routing: {kairos: {qos_ms, profiles}}` (or latencies learned online): weir's Kairos, which
    /// may send an idle replica several queued queries in one call.
    Kairos,
    /// The same with `batch_queued_jobs: false`: one query per call, as in the paper.
    KairosOnePerCall,
    /// `routing: least_outstanding`.
    LeastOutstanding,
    /// `routing: round_robin`.
    RoundRobin,
}

impl Policy {
    /// Every policy.
    pub const ALL: [Policy; 4] = [
        Policy::Kairos,
        Policy::KairosOnePerCall,
        Policy::LeastOutstanding,
        Policy::RoundRobin,
    ];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Kairos => "kairos",
            Policy::KairosOnePerCall => "kairos, one query per call",
            Policy::LeastOutstanding => "least outstanding",
            Policy::RoundRobin => "round robin",
        }
    }

    /// Whether it is one of the Kairos variants.
    pub fn is_kairos(self) -> bool {
        matches!(self, Policy::Kairos | Policy::KairosOnePerCall)
    }

    /// Parses `kairos`, `kairos_one_per_call`, `least_outstanding` or `round_robin`.
    pub fn parse(text: &str) -> Option<Policy> {
        match text.replace('-', "_").as_str() {
            "kairos" => Some(Policy::Kairos),
            "kairos_one_per_call" => Some(Policy::KairosOnePerCall),
            "least_outstanding" => Some(Policy::LeastOutstanding),
            "round_robin" => Some(Policy::RoundRobin),
            _ => None,
        }
    }

    pub(super) fn yaml(self, qos_ms: f64, latency: KairosLatency) -> String {
        let profiles = match latency {
            KairosLatency::Measured | KairosLatency::Nominal => {
                format!(", profiles: {PROFILE_FILE}")
            }
            KairosLatency::Learned => String::new(),
        };
        match self {
            Policy::Kairos => format!("{{kairos: {{qos_ms: {qos_ms}{profiles}}}}}"),
            Policy::KairosOnePerCall => {
                format!("{{kairos: {{qos_ms: {qos_ms}{profiles}, batch_queued_jobs: false}}}}")
            }
            Policy::LeastOutstanding => "least_outstanding".into(),
            Policy::RoundRobin => "round_robin".into(),
        }
    }
}

/// A pool and its routing.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The pool, for tables (`1×emu.fast + 2×emu.slow`).
    pub pool_label: String,
    /// Instances per type.
    pub pool: Vec<usize>,
    /// Routing.
    pub policy: Policy,
}

impl Setup {
    /// Label in tables and plots.
    pub fn label(&self) -> String {
        format!("{} · {}", self.pool_label, self.policy.name())
    }

    /// Whether the pool has one instance type only.
    pub fn homogeneous(&self) -> bool {
        self.pool.iter().filter(|&&n| n > 0).count() == 1
    }
}

/// The set-ups: the heterogeneous pool `hetero`, then, for each type that meets the QoS target at
/// the largest query, as many of it as the budget buys; each under every policy of the config.
pub fn setups(config: &KairosLiveConfig, hetero: &[usize]) -> Vec<Setup> {
    let describe = |pool: &[usize]| {
        pool.iter()
            .zip(&config.types)
            .filter(|(n, _)| **n > 0)
            .map(|(n, t)| format!("{n}×{}", t.name))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let mut pools = vec![hetero.to_vec()];
    for (i, t) in config.types.iter().enumerate() {
        let n = (config.budget_per_hour / t.cost_per_hour + 1e-9).floor() as usize;
        if n == 0 || t.latency_ms(MAX_QUERY_ROWS) > config.qos_ms {
            continue;
        }
        let mut pool = vec![0; config.types.len()];
        pool[i] = n;
        if !pools.contains(&pool) {
            pools.push(pool);
        }
    }
    let mut v = Vec::new();
    for pool in pools {
        for &policy in &config.policies {
            v.push(Setup {
                pool_label: describe(&pool),
                pool: pool.clone(),
                policy,
            });
        }
    }
    v
}

/// Share of the trace's queries larger than the largest that `ty` serves within `qos_ms`
/// (from a sample of `n` sizes): where that exceeds 1 %, a pool of `ty` alone cannot meet a p99.
pub fn share_over_limit(ty: &EmulatedType, qos_ms: f64, sizes: &[usize]) -> f64 {
    let over = sizes
        .iter()
        .filter(|&&rows| ty.latency_ms(rows) > qos_ms)
        .count();
    over as f64 / sizes.len().max(1) as f64
}

/// What `pool` (instances per type) costs, $/h.
pub(super) fn pool_cost(config: &KairosLiveConfig, pool: &[usize]) -> f64 {
    pool.iter()
        .zip(&config.types)
        .map(|(n, t)| *n as f64 * t.cost_per_hour)
        .sum()
}
