//! The naive predictors the paper compares SERF against in Fig. 9 (§IV-C2): plain M/M/c
//! (Erlang C), M/D/c (Cosmetatos' correction of Erlang C) and M/M_interf/c (the exponential chain alone,
//! Eq. 7 + Eq. 12). Each ignores one of SERF's two ingredients: interference or deterministic service.
//!
//! The interference-blind ones need one rate out of the profile; [`RateChoice`] says which (the paper does
//! not; the comparison here uses `μ_1`, the rate a request gets alone). SERF itself is [`crate::model::predict`].

use crate::model::{check_inputs, cosmetatos_f, predict, utilisation, Chain, Estimate, ModelError};
use serde::{Deserialize, Serialize};

/// Which profiled rate an interference-blind baseline uses as "the" service rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateChoice {
    /// `μ_1`: the rate of a request running alone (ignores interference).
    Alone,
    /// `μ_c`: the rate when all `c` slots are busy (assumes interference is always full).
    Full,
}

/// A latency predictor: SERF or one of its baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Predictor {
    /// SERF: M/D_interf/c (Eq. 13 corrected).
    Serf,
    /// M/M/c with one rate (Erlang C waiting time, exponential service of mean `1/μ`).
    MMc {
        /// Which rate of the profile is used.
        rate: RateChoice,
    },
    /// M/D/c with one rate: Cosmetatos' correction (Eq. 8) of the Erlang C waiting time, service `1/μ`.
    MDc {
        /// Which rate of the profile is used.
        rate: RateChoice,
    },
    /// M/M_interf/c: the state-dependent exponential chain (Eq. 7) and PASTA service time (Eq. 12).
    MMInterf,
}

impl Predictor {
    /// Short fixed name for tables and plots (`serf`, `mmc`, `mdc`, `mm_interf`).
    pub fn name(&self) -> &'static str {
        match self {
            Predictor::Serf => "serf",
            Predictor::MMc { .. } => "mmc",
            Predictor::MDc { .. } => "mdc",
            Predictor::MMInterf => "mm_interf",
        }
    }

    /// Predicted mean waiting, service and latency at arrival rate `lambda` for the profile `mu = μ_1..μ_c`.
    ///
    /// # Errors
    /// As [`predict`]: invalid inputs, or [`ModelError::Unstable`] when `λ` reaches the capacity this
    /// predictor assumes (`c·μ_1` or `c·μ_c` for the single-rate ones).
    pub fn estimate(&self, lambda: f64, mu: &[f64]) -> Result<Estimate, ModelError> {
        check_inputs(lambda, mu)?;
        let pick = |rate: RateChoice| match rate {
            RateChoice::Alone => mu[0],
            RateChoice::Full => mu[mu.len() - 1],
        };
        match *self {
            Predictor::Serf => predict(lambda, mu).map(|p| p.estimate()),
            Predictor::MMc { rate } => {
                let m = pick(rate);
                Ok(queued(erlang_c_waiting(lambda, m, mu.len())?, 1.0 / m))
            }
            Predictor::MDc { rate } => {
                let m = pick(rate);
                Ok(queued(
                    cosmetatos_mdc_waiting(lambda, m, mu.len())?,
                    1.0 / m,
                ))
            }
            Predictor::MMInterf => {
                let chain = Chain::solve(lambda, mu)?;
                let waiting = chain.waiting_mm();
                Ok(queued(waiting, chain.service(mu)))
            }
        }
    }
}

/// The estimate of a queue whose requests wait `waiting` and then take `service`.
fn queued(waiting: f64, service: f64) -> Estimate {
    Estimate {
        waiting,
        service,
        latency: waiting + service,
    }
}

/// Exact M/M/c mean waiting time `C(c, λ/μ)/(c·μ − λ)`, with Erlang C computed from the Erlang B recursion
/// `B_k = a·B_{k−1}/(k + a·B_{k−1})` (stable for any `c`).
///
/// # Errors
/// [`ModelError::Unstable`] when `λ ≥ c·μ`; input errors as [`predict`].
pub fn erlang_c_waiting(lambda: f64, mu: f64, servers: usize) -> Result<f64, ModelError> {
    check_inputs(lambda, &vec![mu; servers])?;
    let rho = utilisation(lambda, servers, mu)?;
    let a = lambda / mu;
    let mut b = 1.0;
    for k in 1..=servers {
        b = a * b / (k as f64 + a * b);
    }
    let erlang_c = b / (1.0 - rho * (1.0 - b));
    Ok(erlang_c / (servers as f64 * mu - lambda))
}

/// Cosmetatos' M/D/c mean waiting time `½(1 + f(c)·g(ρ))·W_q^{M/M/c}` (Eqs. 8–10); exact for `c = 1`.
/// At `λ = 0` it is 0 (the limit).
///
/// # Errors
/// As [`erlang_c_waiting`].
pub fn cosmetatos_mdc_waiting(lambda: f64, mu: f64, servers: usize) -> Result<f64, ModelError> {
    let wq_mm = erlang_c_waiting(lambda, mu, servers)?;
    if lambda == 0.0 {
        return Ok(0.0);
    }
    let rho = lambda / (servers as f64 * mu);
    let g = (1.0 - rho) / rho;
    Ok(0.5 * (1.0 + cosmetatos_f(servers) * g) * wq_mm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn severe(c: usize) -> Vec<f64> {
        (1..=c)
            .map(|i| {
                1.0 / if i <= 2 {
                    1.0
                } else {
                    1.0 + 0.5 * (i as f64 - 2.0)
                }
            })
            .collect()
    }

    #[test]
    fn serf_reduces_to_cosmetatos_mdc_without_interference() {
        for c in [1usize, 2, 4, 8, 16] {
            for rho in [0.1, 0.5, 0.9, 0.99] {
                let mu = 2.0;
                let lambda = rho * c as f64 * mu;
                let serf = Predictor::Serf.estimate(lambda, &vec![mu; c]).unwrap();
                let mdc = Predictor::MDc {
                    rate: RateChoice::Alone,
                }
                .estimate(lambda, &vec![mu; c])
                .unwrap();
                assert!(
                    (serf.latency - mdc.latency).abs() <= 1e-9 * mdc.latency,
                    "c={c} rho={rho}"
                );
                let mm = Predictor::MMInterf.estimate(lambda, &vec![mu; c]).unwrap();
                let mmc = Predictor::MMc {
                    rate: RateChoice::Full,
                }
                .estimate(lambda, &vec![mu; c])
                .unwrap();
                assert!((mm.latency - mmc.latency).abs() <= 1e-9 * mmc.latency);
            }
        }
        // c = 1: Cosmetatos is exact Pollaczek–Khinchine.
        assert!((cosmetatos_mdc_waiting(0.5, 1.0, 1).unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(cosmetatos_mdc_waiting(0.0, 1.0, 4).unwrap(), 0.0);
    }

    #[test]
    fn baselines_misjudge_interference() {
        for c in [4usize, 8] {
            let mu = severe(c);
            let cap = c as f64 * mu[c - 1];
            for rho in [0.5, 0.7, 0.9] {
                let lambda = rho * cap;
                let serf = Predictor::Serf.estimate(lambda, &mu).unwrap();
                // Interference-blind M/D/c with μ_1 underestimates at high load.
                let mdc = Predictor::MDc {
                    rate: RateChoice::Alone,
                }
                .estimate(lambda, &mu)
                .unwrap();
                assert!(mdc.latency < serf.latency, "c={c} rho={rho}");
                // M/M_interf/c overestimates W_q by exactly 2/(1 + f·g).
                let mm = Predictor::MMInterf.estimate(lambda, &mu).unwrap();
                let ratio = mm.waiting / serf.waiting;
                let want = 2.0 / (1.0 + cosmetatos_f(c) * (1.0 - rho) / rho);
                assert!(
                    (ratio - want).abs() < 1e-9 && ratio > 1.55,
                    "c={c} rho={rho} ratio={ratio}"
                );
                assert!((mm.service - serf.service).abs() < 1e-15);
            }
        }
        // Capacity each predictor assumes.
        let mu = severe(4);
        assert!(Predictor::MDc {
            rate: RateChoice::Alone
        }
        .estimate(3.0, &mu)
        .is_ok());
        assert!(matches!(
            Predictor::Serf.estimate(3.0, &mu),
            Err(ModelError::Unstable { .. })
        ));
        assert_eq!(Predictor::MMInterf.name(), "mm_interf");
    }
}
