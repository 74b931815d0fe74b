//! Which configurations exist within a budget, and the closed-form throughput upper bound of
//! each (paper §5.2, Eqs. 9–15, rebuilt and checked against the authors' artifact).

use super::Counts;
use crate::profile::throughput::{AuxProfile, ThroughputProfile};

/// Tolerance on the budget check (float sums of prices).
pub(crate) const BUDGET_SLACK: f64 = 1e-9;

/// Every non-empty configuration with `Σ n_t·c_t ≤ budget`, in lexicographic order.
pub fn enumerate(prices: &[f64], budget_per_hour: f64) -> Vec<Counts> {
    fn go(prices: &[f64], left: f64, cur: &mut Counts, out: &mut Vec<Counts>) {
        let Some((&price, rest)) = prices.split_first() else {
            if cur.iter().any(|&n| n > 0) {
                out.push(cur.clone());
            }
            return;
        };
        let mut n = 0u32;
        while f64::from(n) * price <= left + BUDGET_SLACK {
            cur.push(n);
            go(rest, left - f64::from(n) * price, cur, out);
            cur.pop();
            n += 1;
        }
    }
    let mut out = Vec::new();
    if prices.iter().all(|p| *p > 0.0) && budget_per_hour.is_finite() {
        go(
            prices,
            budget_per_hour,
            &mut Vec::with_capacity(prices.len()),
            &mut out,
        );
    }
    out
}

/// The throughput upper bound of a configuration (Eqs. 9–15), or `None` without a
/// base instance.
///
/// With no auxiliary instance it is `n_b·Q_b`. Otherwise, over the auxiliary types present,
/// `k* = max k`, `p* = max p`, `r* = max r`, `Q_b^L = Q_b(1−p*)/(1−r*)`,
/// `A = Σ n_a·Q_a^(k*)`, `Θ = (1−p*)/p*·A` (Eq. 14), and
/// `UB = n_b·Q_b^L/(1−p*)` if `Θ ≥ n_b·Q_b^L` (base-bound), else `A/p* + (1 − Θ/(n_b·Q_b^L))·n_b·Q_b`
/// (Eq. 15). Auxiliary types that serve no batch (`p = 0`) add nothing; if some type serves every
/// batch (`p* = 1`) the bound is `A + n_b·Q_b`.
pub fn upper_bound(tp: &ThroughputProfile, counts: &[u32]) -> Option<f64> {
    let nb = f64::from(*counts.get(tp.base)?);
    if nb == 0.0 {
        return None;
    }
    let present: Vec<(f64, &AuxProfile)> = counts
        .iter()
        .zip(&tp.aux)
        .filter_map(|(&n, a)| {
            a.as_ref()
                .filter(|a| n > 0 && a.small_ratio > 0.0)
                .map(|a| (f64::from(n), a))
        })
        .collect();
    let full = nb * tp.base_qps;
    if present.is_empty() {
        return Some(full);
    }
    let k = present.iter().map(|(_, a)| a.vio_batch).max().unwrap_or(0);
    let p = present
        .iter()
        .map(|(_, a)| a.small_ratio)
        .fold(0.0, f64::max);
    let r = present
        .iter()
        .map(|(_, a)| a.time_ratio)
        .fold(0.0, f64::max);
    let qa = |a: &AuxProfile| -> f64 {
        a.qps_below
            .get(&k)
            .or_else(|| a.qps_below.range(..=k).next_back().map(|(_, q)| q))
            .or_else(|| a.qps_below.get(&a.vio_batch))
            .copied()
            .unwrap_or(0.0)
    };
    let aux_qps: f64 = present.iter().map(|(n, a)| n * qa(a)).sum();
    if p >= 1.0 || r >= 1.0 {
        return Some(aux_qps + full);
    }
    let base_large = nb * tp.base_qps * (1.0 - p) / (1.0 - r);
    let theta = (1.0 - p) / p * aux_qps;
    Some(if theta >= base_large {
        base_large / (1.0 - p)
    } else {
        aux_qps / p + (1.0 - theta / base_large) * full
    })
}
