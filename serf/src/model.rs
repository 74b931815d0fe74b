//! SERF's latency model of one configuration: the M/D_interf/c queue (paper §IV-C, Eqs. 2–13), solved as
//! the state-dependent birth–death chain M/M_interf/c plus Cosmetatos' M/D/c correction of the waiting time.
//!
//! Inputs are the arrival rate `λ` and the profiled per-request service rates `μ_1..μ_c`, where `μ_i` is the
//! mean service rate of one request while `i` requests run at once (the paper's interference profile). The chain has birth rate `λ`
//! in every state and death rate `n·μ_n` in state `n ≤ c`, `c·μ_c` above (Eq. 2).
//!
//! **Erratum (decision).** The paper prints Eq. 12 and Eq. 13 without the factor `p_0` in the closed form of
//! the `Σ_{n≥c} p_n / μ_c` term. Its own first line of Eq. 12 and the M/D/1 case (`c = 1`, `μ = 1`, `λ = 0.5`
//! must give `S = 1`, the printed form gives 1.5) show it is a typo; this module implements the corrected form,
//! and `md1_exact_guards_erratum` fails on the printed one.
//!
//! **Numerics.** `p_n` is computed iteratively as `q_n = q_{n-1}·ρ_n/n` (no factorials), with a running
//! rescale so that no intermediate overflows; `c` up to 64 and `ρ` up to 0.999 give finite results. The
//! Cosmetatos term `g(ρ)·W_q^{MM}` is simplified algebraically so no `1/ρ` appears, which makes `λ = 0` (the
//! `λ → 0` limit, `W = 1/μ_1`) exact rather than a 0/0.
//!
//! What this module leaves to others: the baselines of Fig. 9 are in [`crate::baseline`], choosing among
//! configurations is [`crate::table`]'s job, and checking the approximation is [`crate::simulator`]'s.

use serde::Serialize;

/// Why a prediction could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The profile has no service rates (`c = 0`).
    #[error("the service-rate profile is empty (need μ_1..μ_c with c ≥ 1)")]
    EmptyProfile,
    /// A service rate is zero, negative, infinite or NaN.
    #[error("service rate μ_{index} = {value} is not a finite positive number")]
    InvalidServiceRate {
        /// 1-based concurrency level `i` of the bad `μ_i`.
        index: usize,
        /// The value given.
        value: f64,
    },
    /// The arrival rate is negative, infinite or NaN.
    #[error("arrival rate λ = {0} is not a finite non-negative number")]
    InvalidArrivalRate(f64),
    /// The load is at or above capacity: `ρ = λ/(c·μ_c) ≥ 1`, so the queue grows without bound (W = +∞).
    #[error("unstable load: λ = {lambda} ≥ capacity c·μ_c = {capacity} (ρ = {rho})")]
    Unstable {
        /// The arrival rate given.
        lambda: f64,
        /// The configuration's capacity `c·μ_c` in requests per second.
        capacity: f64,
        /// The utilisation `λ/(c·μ_c)`.
        rho: f64,
    },
    /// An intermediate result was not finite (only for pathological rate ratios beyond ~1e150).
    #[error("numerical failure solving the birth–death chain (rates too far apart)")]
    NumericalFailure,
}

/// The three mean times every predictor in this crate produces, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Mean time a request waits in the queue before it starts (`W_q`).
    pub waiting: f64,
    /// Mean service (execution) time of a request (`S`).
    pub service: f64,
    /// Mean latency, waiting plus service (`W = W_q + S`).
    pub latency: f64,
}

/// The full SERF prediction for one configuration at one load.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Arrival rate `λ` the prediction is for (requests per second).
    pub lambda: f64,
    /// Utilisation `ρ = λ/(c·μ_c)`.
    pub rho: f64,
    /// Steady-state probabilities `p_0..p_{c-1}` of having `n < c` requests in the system.
    pub p: Vec<f64>,
    /// Probability that an arrival must wait, `Σ_{n≥c} p_n`.
    pub p_wait: f64,
    /// Mean waiting time of the exponential-service chain M/M_interf/c (Eq. 7).
    pub waiting_mm: f64,
    /// Mean waiting time after Cosmetatos' correction (Eq. 11).
    pub waiting: f64,
    /// Mean service time by PASTA (Eq. 12, corrected).
    pub service: f64,
    /// Mean latency (Eq. 13, corrected): `waiting + service`.
    pub latency: f64,
}

impl Prediction {
    /// The waiting/service/latency triple of this prediction.
    pub fn estimate(&self) -> Estimate {
        Estimate {
            waiting: self.waiting,
            service: self.service,
            latency: self.latency,
        }
    }

    /// Mean waiting time for service times with squared coefficient of variation `scv` instead
    /// of deterministic ones: linear in the SCV from the deterministic wait ([`Self::waiting`],
    /// SCV 0) through the exponential one ([`Self::waiting_mm`], SCV 1). With one server this is
    /// exactly Pollaczek–Khinchine (`W_q ∝ (1 + SCV)/2`, and the exponential wait is twice the
    /// deterministic); with several it is the usual two-moment interpolation, not an exact result.
    /// Decision (weir's, not the paper's, which assumes homogeneous, near-deterministic service):
    /// used only to judge how much of a measured queue the service-time spread explains
    /// (`weir bench serf`'s *in situ with the call SCV*), not in the scheduler. A negative `scv`
    /// counts as 0.
    pub fn waiting_with_scv(&self, scv: f64) -> f64 {
        self.waiting_with_scvs(1.0, scv)
    }

    /// Mean waiting time for arrivals whose gaps have squared coefficient of variation
    /// `arrival_scv` (1 for Poisson) and service times with `service_scv`: the same line as
    /// [`Self::waiting_with_scv`] in `arrival_scv + service_scv − 1`, never below 0. With one server
    /// this is Kingman's two-moment form `W_q ≈ ρ·S·(c_a² + c_s²) / (2(1 − ρ))` (0 for regular
    /// arrivals of deterministic service, as D/D/1 has); with several, the Allen–Cunneen
    /// interpolation around this chain. Decision as for [`Self::waiting_with_scv`]: a diagnostic of
    /// measured queues (`weir bench serf`'s arrivals at the node), not used by the scheduler.
    /// Negative SCVs count as 0.
    pub fn waiting_with_scvs(&self, arrival_scv: f64, service_scv: f64) -> f64 {
        let spread = arrival_scv.max(0.0) + service_scv.max(0.0) - 1.0;
        (self.waiting + spread * (self.waiting_mm - self.waiting)).max(0.0)
    }
}

/// Cosmetatos' server-count term `f(c) = (c−1)·(√(4+5c) − 2)/(16c)` (Eq. 9); `f(1) = 0`.
pub fn cosmetatos_f(servers: usize) -> f64 {
    let c = servers.max(1) as f64;
    (c - 1.0) * ((4.0 + 5.0 * c).sqrt() - 2.0) / (16.0 * c)
}

/// Rescale threshold for the unnormalised chain weights: far below `f64::MAX`, far above any weight that
/// matters after normalisation.
const RESCALE_ABOVE: f64 = 1e150;

/// Checks a service-rate profile `μ_1..μ_c` and an arrival rate; shared by every predictor in the crate.
pub(crate) fn check_inputs(lambda: f64, mu: &[f64]) -> Result<(), ModelError> {
    if mu.is_empty() {
        return Err(ModelError::EmptyProfile);
    }
    if let Some((i, &value)) = mu
        .iter()
        .enumerate()
        .find(|(_, m)| !(m.is_finite() && **m > 0.0))
    {
        return Err(ModelError::InvalidServiceRate {
            index: i + 1,
            value,
        });
    }
    if !(lambda.is_finite() && lambda >= 0.0) {
        return Err(ModelError::InvalidArrivalRate(lambda));
    }
    Ok(())
}

/// Capacity check: `ρ = λ/(c·μ_c)`, or [`ModelError::Unstable`] when `ρ ≥ 1`.
pub(crate) fn utilisation(lambda: f64, servers: usize, rate: f64) -> Result<f64, ModelError> {
    let capacity = servers as f64 * rate;
    let rho = lambda / capacity;
    if rho >= 1.0 {
        return Err(ModelError::Unstable {
            lambda,
            capacity,
            rho,
        });
    }
    Ok(rho)
}

/// Solution of the M/M_interf/c chain, normalised: the part both SERF and the M/M_interf/c baseline share.
pub(crate) struct Chain {
    /// `ρ = λ/(c·μ_c)`.
    pub rho: f64,
    /// `p_0..p_{c-1}`.
    pub p: Vec<f64>,
    /// `Σ_{n≥c} p_n`.
    pub p_wait: f64,
    /// `p_0·Π_{i≤c} ρ_i / (λ·c!)`, the common factor of Eqs. 7 and 11 (finite at `λ = 0`).
    pub queue_factor: f64,
}

impl Chain {
    /// Solves Eqs. 2–4 for `λ` and `μ_1..μ_c` (inputs already checked).
    pub fn solve(lambda: f64, mu: &[f64]) -> Result<Self, ModelError> {
        let c = mu.len();
        let mu_c = mu[c - 1];
        let rho = utilisation(lambda, c, mu_c)?;
        // Unnormalised weights q_n = Π_{i≤n} ρ_i / n!, rescaled on the fly (only ratios matter).
        let mut q = Vec::with_capacity(c);
        q.push(1.0_f64);
        for n in 1..c {
            let next = q[n - 1] * (lambda / mu[n - 1]) / n as f64;
            q.push(next);
            if next > RESCALE_ABOVE {
                q.iter_mut().for_each(|x| *x /= RESCALE_ABOVE);
            }
        }
        // r = q_c / λ = q_{c-1} / (c·μ_c): avoids dividing by λ.
        let r = q[c - 1] / (c as f64 * mu_c);
        let tail = r * lambda / (1.0 - rho); // Σ_{n≥c} q_n
        let h: f64 = q.iter().sum::<f64>() + tail;
        if !(h.is_finite() && h > 0.0) {
            return Err(ModelError::NumericalFailure);
        }
        let p: Vec<f64> = q.iter().map(|x| x / h).collect();
        Ok(Self {
            rho,
            p,
            p_wait: tail / h,
            queue_factor: r / h,
        })
    }

    /// Eq. 7: mean waiting time of the exponential-service chain.
    pub fn waiting_mm(&self) -> f64 {
        self.queue_factor * self.rho / ((1.0 - self.rho) * (1.0 - self.rho))
    }

    /// Eq. 12 (corrected): mean service time by PASTA. An arrival that finds `n < c` in the system runs at
    /// `μ_{n+1}`; one that finds `n ≥ c` runs at `μ_c`.
    pub fn service(&self, mu: &[f64]) -> f64 {
        let mu_c = mu[mu.len() - 1];
        self.p.iter().zip(mu).map(|(p, m)| p / m).sum::<f64>() + self.p_wait / mu_c
    }
}

/// SERF's prediction for one configuration (Eq. 13, corrected) at arrival rate `lambda` with profiled
/// per-request service rates `mu = [μ_1, …, μ_c]` (all in requests per second).
///
/// `λ = 0` is allowed and gives the `λ → 0` limit (`W = S = 1/μ_1`, `W_q = 0`).
///
/// # Errors
/// [`ModelError::Unstable`] iff `λ ≥ c·μ_c`; [`ModelError::EmptyProfile`], [`ModelError::InvalidServiceRate`]
/// or [`ModelError::InvalidArrivalRate`] for bad inputs; [`ModelError::NumericalFailure`] only for
/// pathological rate ratios.
///
/// # Examples
/// ```
/// // M/D/1: λ = 0.5, μ = 1 → S = 1, W_q = 0.5, W = 1.5.
/// let p = weir_serf::model::predict(0.5, &[1.0]).unwrap();
/// assert!((p.latency - 1.5).abs() < 1e-12);
/// ```
pub fn predict(lambda: f64, mu: &[f64]) -> Result<Prediction, ModelError> {
    check_inputs(lambda, mu)?;
    let chain = Chain::solve(lambda, mu)?;
    let waiting_mm = chain.waiting_mm();
    // Eq. 11: ½(1 + f·g)·W_q^MM with g·W_q^MM = queue_factor/(1−ρ) (no 1/ρ, exact at λ = 0).
    let f = cosmetatos_f(mu.len());
    let waiting = 0.5 * waiting_mm + 0.5 * f * chain.queue_factor / (1.0 - chain.rho);
    let service = chain.service(mu);
    let latency = waiting + service;
    if !latency.is_finite() {
        return Err(ModelError::NumericalFailure);
    }
    Ok(Prediction {
        lambda,
        rho: chain.rho,
        p: chain.p.clone(),
        p_wait: chain.p_wait,
        waiting_mm,
        waiting,
        service,
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// One server: the SCV interpolation is Pollaczek–Khinchine, `W_q = (1 + SCV)·ρ·S / (2(1 − ρ))`;
    /// with several it runs from the deterministic wait (SCV 0) to the exponential one (SCV 1).
    #[test]
    fn the_scv_wait_is_pollaczek_khinchine_for_one_server() {
        let (lambda, mu) = (0.6, 1.0);
        let p = predict(lambda, &[mu]).unwrap();
        let rho = lambda / mu;
        for scv in [0.0, 0.2, 1.0, 2.5] {
            let pk = (1.0 + scv) * rho / mu / (2.0 * (1.0 - rho));
            assert!(close(p.waiting_with_scv(scv), pk, 1e-12), "SCV {scv}");
        }
        assert_eq!(p.waiting_with_scv(-1.0), p.waiting);
        let three = predict(2.0, &[1.0, 0.9, 0.8]).unwrap();
        assert_eq!(three.waiting_with_scv(0.0), three.waiting);
        assert!(close(three.waiting_with_scv(1.0), three.waiting_mm, 1e-15));
        assert!(three.waiting_with_scv(0.5) > three.waiting);
    }

    /// Both spreads: one server gives Kingman's `W_q ≈ ρ·S·(c_a² + c_s²) / (2(1 − ρ))` (exact
    /// P-K at Poisson arrivals, 0 for regular arrivals of deterministic service); bursty arrivals
    /// wait longer on several servers too, and the wait never goes negative.
    #[test]
    fn the_two_scv_wait_is_kingman_for_one_server() {
        let (lambda, mu) = (0.7, 1.0);
        let p = predict(lambda, &[mu]).unwrap();
        let rho = lambda / mu;
        for (ca, cs) in [(1.0, 0.0), (1.0, 0.3), (2.0, 0.1), (0.5, 0.5)] {
            let kingman = rho / mu * (ca + cs) / (2.0 * (1.0 - rho));
            assert!(
                close(p.waiting_with_scvs(ca, cs), kingman, 1e-12),
                "({ca}, {cs})"
            );
            assert_eq!(p.waiting_with_scvs(1.0, cs), p.waiting_with_scv(cs));
        }
        assert_eq!(p.waiting_with_scvs(0.0, 0.0), 0.0);
        let three = predict(2.0, &[1.0, 0.9, 0.8]).unwrap();
        assert!(three.waiting_with_scvs(1.8, 0.0) > three.waiting_with_scvs(1.0, 0.0));
        assert!(three.waiting_with_scvs(0.0, 0.0) >= 0.0);
    }

    #[test]
    fn interface_and_stability_boundary() {
        let mu = [1.0, 0.75, 0.5];
        let p = predict(1.0, &mu).unwrap();
        assert_eq!(p.p.len(), 3);
        assert!(close(p.rho, 1.0 / 1.5, 1e-15));
        assert!(close(p.latency, p.waiting + p.service, 1e-15));
        // Exactly at capacity c·μ_c = 1.5: unstable; just below: finite.
        assert!(matches!(
            predict(1.5, &mu),
            Err(ModelError::Unstable { .. })
        ));
        assert!(matches!(predict(3.0, &mu), Err(ModelError::Unstable { rho, .. }) if rho > 1.0));
        assert!(predict(1.5 * (1.0 - 1e-9), &mu)
            .unwrap()
            .latency
            .is_finite());
        assert_eq!(predict(1.0, &[]), Err(ModelError::EmptyProfile));
        assert_eq!(
            predict(1.0, &[1.0, 0.0]),
            Err(ModelError::InvalidServiceRate {
                index: 2,
                value: 0.0
            })
        );
        assert!(matches!(
            predict(-1.0, &mu),
            Err(ModelError::InvalidArrivalRate(_))
        ));
        assert!(matches!(
            predict(f64::NAN, &mu),
            Err(ModelError::InvalidArrivalRate(_))
        ));
        // λ → 0 limit: W = S = 1/μ_1, W_q = 0.
        let z = predict(0.0, &[4.0, 2.0, 1.0]).unwrap();
        assert_eq!(
            (z.waiting, z.service, z.latency, z.p[0]),
            (0.0, 0.25, 0.25, 1.0)
        );
        let tiny = predict(1e-9, &[4.0, 2.0, 1.0]).unwrap();
        assert!(close(tiny.latency, 0.25, 1e-9));
    }

    #[test]
    fn normalisation_and_large_c() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        for c in [1usize, 2, 3, 8, 16, 32, 64] {
            for rho in [0.01, 0.3, 0.9, 0.99, 0.999] {
                let mu: Vec<f64> = (0..c).map(|_| rng.random_range(0.5..2.0)).collect();
                let lambda = rho * c as f64 * mu[c - 1];
                let p = predict(lambda, &mu).unwrap();
                let total: f64 = p.p.iter().sum::<f64>() + p.p_wait;
                assert!(close(total, 1.0, 1e-12), "c={c} rho={rho} total={total}");
                assert!(p.latency.is_finite() && p.latency > 0.0 && !p.latency.is_nan());
                assert!(p.p.iter().all(|x| x.is_finite() && *x >= 0.0));
            }
        }
        // Rates far apart (heavy interference at high c) still solve.
        let mu: Vec<f64> = (1..=64).map(|i| 1.0 / (i as f64).powi(2)).collect();
        let p = predict(0.999 * 64.0 * mu[63], &mu).unwrap();
        assert!(p.latency.is_finite());
    }

    /// Erlang C waiting time, written independently of the chain (Erlang B recursion).
    fn erlang_c_wait(lambda: f64, mu: f64, c: usize) -> f64 {
        let a = lambda / mu;
        let mut b = 1.0;
        for k in 1..=c {
            b = a * b / (k as f64 + a * b);
        }
        let rho = a / c as f64;
        let erlang_c = b / (1.0 - rho * (1.0 - b));
        erlang_c / (c as f64 * mu - lambda)
    }

    #[test]
    fn erlang_c_reduction() {
        for c in 1..=16 {
            for k in 1..=10 {
                let rho = if k == 10 { 0.99 } else { k as f64 / 10.0 };
                let mu = 2.5;
                let lambda = rho * c as f64 * mu;
                let p = predict(lambda, &vec![mu; c]).unwrap();
                let want = erlang_c_wait(lambda, mu, c);
                assert!(
                    (p.waiting_mm - want).abs() <= 1e-9 * want,
                    "c={c} rho={rho}"
                );
                // No interference: S = 1/μ exactly (up to round-off).
                assert!(close(p.service, 1.0 / mu, 1e-12));
            }
        }
    }

    #[test]
    fn md1_exact_guards_erratum() {
        let p = predict(0.5, &[1.0]).unwrap();
        assert!(close(p.service, 1.0, 1e-12));
        assert!(close(p.waiting, 0.5, 1e-12));
        assert!(close(p.latency, 1.5, 1e-12));
        // The paper's printed Eq. 12 (without p_0) would give S = 1.5 and W = 2.0 here.
        assert!(!close(p.latency, 2.0, 1e-3));
        for rho in [0.05, 0.3, 0.7, 0.95, 0.999] {
            let mu = 3.0;
            let lambda = rho * mu;
            let p = predict(lambda, &[mu]).unwrap();
            let pk = 1.0 / mu + rho / (2.0 * mu * (1.0 - rho));
            assert!((p.latency - pk).abs() <= 1e-12 * pk.max(1.0), "rho={rho}");
        }
    }

    #[test]
    fn cosmetatos_constants() {
        let want = [
            (1, 0.0),
            (2, 0.0544268),
            (3, 0.0982875),
            (4, 0.1358897),
            (8, 0.2533808),
        ];
        for (c, f) in want {
            assert!(
                close(cosmetatos_f(c), f, 1e-6),
                "c={c}: {}",
                cosmetatos_f(c)
            );
        }
    }

    #[test]
    fn golden_vectors() {
        let a = predict(1.0, &[1.0, 1.0]).unwrap();
        assert!(close(a.p[0], 1.0 / 3.0, 1e-12));
        assert!(close(a.waiting_mm, 1.0 / 3.0, 1e-12));
        assert!(close(a.waiting, 0.175738, 1e-6));
        assert!(close(a.service, 1.0, 1e-12));
        assert!(close(a.latency, 1.175738, 1e-6));
        let b = predict(1.0, &[1.0, 1.0, 2.0 / 3.0, 0.5]).unwrap();
        assert!(close(b.p[0], 1.0 / 3.0, 1e-12));
        assert!(close(b.waiting_mm, 0.083333, 1e-6));
        assert!(close(b.service, 1.25, 1e-12));
        assert!(close(b.waiting, 0.047329, 1e-6));
        assert!(close(b.latency, 1.297329, 1e-6));
        // A 2-core illustration: A = (c=1, t=2), B = (c=2, t=1).
        let a_mu = [1.0 / 0.12];
        let b_mu = [1.0 / 0.20, 1.0 / 0.22];
        for (lambda, wa, wb) in [
            (1.0, 0.1282, 0.2055),
            (4.0, 0.1754, 0.2389),
            (6.0, 0.2743, 0.3011),
            (7.0, 0.4350, 0.3779),
        ] {
            assert!(
                close(predict(lambda, &a_mu).unwrap().latency, wa, 1e-4),
                "A at {lambda}"
            );
            assert!(
                close(predict(lambda, &b_mu).unwrap().latency, wb, 1e-4),
                "B at {lambda}"
            );
        }
    }

    #[test]
    fn bounds_and_monotonicity() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..300 {
            let c = rng.random_range(1..=16usize);
            let mut mu = vec![rng.random_range(0.5..5.0)];
            for _ in 1..c {
                let last = mu[mu.len() - 1];
                mu.push(last * rng.random_range(0.6..=1.0));
            }
            let (lo, hi) = mu.iter().fold((f64::MAX, 0.0_f64), |(l, h), m| {
                (l.min(1.0 / m), h.max(1.0 / m))
            });
            let cap = c as f64 * mu[c - 1];
            let mut prev = 0.0;
            for k in 0..=100 {
                let lambda = cap * 0.999 * k as f64 / 100.0;
                let p = predict(lambda, &mu).unwrap();
                assert!(p.service >= lo * (1.0 - 1e-12) && p.service <= hi * (1.0 + 1e-12));
                assert!(
                    p.latency >= prev * (1.0 - 1e-12),
                    "W decreased: c={c} k={k}"
                );
                prev = p.latency;
            }
            assert!(close(
                predict(0.0, &mu).unwrap().service,
                1.0 / mu[0],
                1e-15
            ));
            // S moves towards 1/μ_c as ρ → 1 (how fast depends on how far apart the rates are).
            let gap = |eps: f64| {
                (predict(cap * (1.0 - eps), &mu).unwrap().service - 1.0 / mu[c - 1]).abs()
            };
            assert!(gap(1e-11) <= gap(1e-5) + 1e-12 * hi);
        }
        // On a mild (3 % per extra request) and a severe interference profile the limit is reached
        // to 1e-6 at 1 − ρ = 1e-9.
        for c in [2usize, 4, 8, 16] {
            let mild: Vec<f64> = (1..=c)
                .map(|i| 1.0 / (1.0 + 0.03 * (i as f64 - 1.0)))
                .collect();
            let severe: Vec<f64> = (1..=c)
                .map(|i| 1.0 / (1.0 + 0.5 * (i as f64 - 2.0).max(0.0)))
                .collect();
            for mu in [mild, severe] {
                let cap = c as f64 * mu[c - 1];
                let s = predict(cap * (1.0 - 1e-9), &mu).unwrap().service;
                assert!((s - 1.0 / mu[c - 1]).abs() < 1e-6, "c={c}: S = {s}");
            }
        }
    }
}
