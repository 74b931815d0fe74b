//! Model-level autoscaling's arithmetic (INFaaS §4.2): what an action costs, whether a set of
//! actions meets the load, the SLO and the worker's resources, and two ways to choose the
//! actions — the paper's greedy heuristic ([`greedy`], run every tick) and the exact integer
//! program it approximates ([`ilp`], for small instances and offline checks).
//!
//! One [`Problem`] is one application's variants on one worker: for each variant its saturation
//! throughput `Q`, inference latency, load latency, price `C`, the resources one instance holds,
//! and how many instances run now (`N`). A plan gives each variant a change `δ` (load `δ > 0`,
//! unload `−δ`). Its cost is the paper's Σ `C·(δ + λ·T_load·max(δ, 0))` (§4.2.1): unloading earns
//! its price back, loading pays the price plus `λ` seconds' worth per second of load time, so a
//! large `λ` (unpredictable load) favours variants that load fast. A plan is feasible when
//! (1) Σ `Q·(N + δ)` ≥ load + slack, (2) only variants within the SLO are loaded, (3) the
//! instances fit the worker's cores and memory, (4) no count goes below zero.
//!
//! [`workers`] holds the other level: when to add an executor of a hardware type or remove an
//! idle one (§4.2.3).
//!
//! Pure functions of their inputs: no clock, no threads; the live autoscaler feeds them the
//! metadata store's figures.

pub mod greedy;
pub mod ilp;
pub mod workers;

use serde::{Deserialize, Serialize};

/// What one instance holds, or what a worker has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// CPU cores.
    pub cores: f64,
    /// Memory, in bytes.
    pub memory_bytes: f64,
}

/// One variant the autoscaler may run more or fewer of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Variant name.
    pub name: String,
    /// The registered model (architecture) it was made from: upgrades and downgrades stay within
    /// one (§4.2.2).
    pub architecture: String,
    /// Requests per second one instance sustains (`Q`).
    pub saturation_qps: f64,
    /// Latency of one call at the batch it serves, in milliseconds.
    pub inference_ms: f64,
    /// Time to load one instance, in seconds.
    pub load_s: f64,
    /// Price of one instance per second (`C`).
    pub price_per_s: f64,
    /// What one instance holds.
    pub needs: Resources,
    /// Instances running now (`N`).
    pub running: u32,
    /// Most instances it may have: a variant holds an executor once, so its replicas are
    /// bounded by the executors of its type there are or may be started (`None`: no bound).
    #[serde(default)]
    pub max_instances: Option<u32>,
}

/// One application's scaling question on one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// Its variants (those meeting its accuracy requirement).
    pub candidates: Vec<Candidate>,
    /// Load to serve, requests per second.
    pub load_qps: f64,
    /// The application's latency SLO, in milliseconds.
    pub slo_ms: f64,
    /// Extra capacity to hold beyond the load, requests per second.
    pub slack_qps: f64,
    /// Weight of load latency in an action's cost, per second (`λ`).
    pub lambda_per_s: f64,
    /// The worker's resources.
    pub capacity: Resources,
}

/// Why a plan does not do what a plan must.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Infeasible {
    /// The plan has a change for a different number of variants.
    #[error("the plan has {got} changes for {want} variants")]
    Shape {
        /// Changes given.
        got: usize,
        /// Variants in the problem.
        want: usize,
    },
    /// Constraint (1).
    #[error("capacity {capacity:.1} req/s is below the load plus slack, {needed:.1} req/s")]
    Capacity {
        /// Σ Q·(N + δ).
        capacity: f64,
        /// Load + slack.
        needed: f64,
    },
    /// Constraint (2).
    #[error("`{0}` is loaded but its latency is above the SLO")]
    Slo(String),
    /// Constraint (3).
    #[error("the instances need {needed:.2} {what}, the worker has {has:.2}")]
    Resources {
        /// Cores or memory.
        what: &'static str,
        /// What the plan's instances hold.
        needed: f64,
        /// What the worker has.
        has: f64,
    },
    /// Constraint (4).
    #[error("`{0}` would go below zero instances")]
    Negative(String),
    /// More instances of a variant than executors of its type to hold them.
    #[error("`{name}` would have {want} instances; its type has executors for {most}")]
    Placement {
        /// The variant.
        name: String,
        /// Instances the plan gives it.
        want: i64,
        /// Its bound.
        most: u32,
    },
}

/// The cost of changing a variant's instances by `delta` (§4.2.1).
pub fn action_cost(c: &Candidate, delta: i64, lambda_per_s: f64) -> f64 {
    let d = delta as f64;
    c.price_per_s * (d + lambda_per_s * c.load_s * d.max(0.0))
}

impl Problem {
    /// Capacity of the instances running now, requests per second.
    pub fn running_capacity(&self) -> f64 {
        self.candidates
            .iter()
            .map(|c| c.saturation_qps * f64::from(c.running))
            .sum()
    }

    /// Capacity over load (the paper's headroom); infinite when there is no load.
    pub fn headroom(&self) -> f64 {
        if self.load_qps <= 0.0 {
            f64::INFINITY
        } else {
            self.running_capacity() / self.load_qps
        }
    }

    /// The cost of `deltas` (one per candidate, in order).
    pub fn cost(&self, deltas: &[i64]) -> f64 {
        self.candidates
            .iter()
            .zip(deltas)
            .map(|(c, d)| action_cost(c, *d, self.lambda_per_s))
            .sum()
    }

    /// Whether `deltas` meet constraints (1)–(4).
    ///
    /// # Errors
    /// The first constraint broken.
    pub fn check(&self, deltas: &[i64]) -> Result<(), Infeasible> {
        if deltas.len() != self.candidates.len() {
            return Err(Infeasible::Shape {
                got: deltas.len(),
                want: self.candidates.len(),
            });
        }
        let mut capacity = 0.0;
        let mut used = Resources::default();
        for (c, d) in self.candidates.iter().zip(deltas) {
            let after = i64::from(c.running) + d;
            if after < 0 {
                return Err(Infeasible::Negative(c.name.clone()));
            }
            if *d > 0 && c.inference_ms > self.slo_ms {
                return Err(Infeasible::Slo(c.name.clone()));
            }
            if let Some(most) = c.max_instances.filter(|m| *d > 0 && after > i64::from(*m)) {
                return Err(Infeasible::Placement {
                    name: c.name.clone(),
                    want: after,
                    most,
                });
            }
            let n = after as f64;
            capacity += c.saturation_qps * n;
            used.cores += c.needs.cores * n;
            used.memory_bytes += c.needs.memory_bytes * n;
        }
        let needed = self.load_qps + self.slack_qps;
        // A relative tolerance: capacities are sums of profiled floats.
        if capacity + 1e-9 * needed.max(1.0) < needed {
            return Err(Infeasible::Capacity { capacity, needed });
        }
        for (what, needed, has) in [
            ("cores", used.cores, self.capacity.cores),
            (
                "bytes of memory",
                used.memory_bytes,
                self.capacity.memory_bytes,
            ),
        ] {
            if needed > has * (1.0 + 1e-9) {
                return Err(Infeasible::Resources { what, needed, has });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Table 2's three ResNet50 variants (INFaaS §2.2): latency, saturation throughput, price.
    pub(crate) fn table2(load_qps: f64, slo_ms: f64) -> Problem {
        let v = |name: &str, ms: f64, qps: f64, price: f64| Candidate {
            name: name.into(),
            architecture: "resnet50".into(),
            saturation_qps: qps,
            inference_ms: ms,
            load_s: 0.0,
            price_per_s: price,
            needs: Resources {
                cores: 1.0,
                memory_bytes: 1.0,
            },
            running: 0,
            max_instances: None,
        };
        Problem {
            candidates: vec![
                v("A", 200.0, 5.0, 1.0),
                v("B", 20.0, 100.0, 3.0),
                v("C", 15.0, 800.0, 16.0),
            ],
            load_qps,
            slo_ms,
            slack_qps: 0.0,
            lambda_per_s: 0.0,
            capacity: Resources {
                cores: 1e6,
                memory_bytes: 1e6,
            },
        }
    }

    #[test]
    fn the_cost_charges_loading_and_refunds_unloading() {
        let mut p = table2(10.0, 300.0);
        p.lambda_per_s = 0.5;
        p.candidates[1].load_s = 4.0;
        // B: 3 × (2 + 0.5 × 4 × 2) = 18; A: 1 × (−1) = −1.
        p.candidates[0].running = 1;
        assert_eq!(p.cost(&[-1, 2, 0]), 17.0);
    }

    #[test]
    fn each_constraint_is_checked() {
        let p = table2(10.0, 50.0);
        assert!(p.check(&[0, 1, 0]).is_ok());
        assert!(matches!(p.check(&[2, 0, 0]), Err(Infeasible::Slo(_))));
        assert!(matches!(
            p.check(&[0, 0, 0]),
            Err(Infeasible::Capacity { .. })
        ));
        assert!(matches!(p.check(&[0, -1, 1]), Err(Infeasible::Negative(_))));
        assert!(matches!(p.check(&[0, 1]), Err(Infeasible::Shape { .. })));
        let mut small = table2(1000.0, 300.0);
        small.capacity.cores = 2.0;
        assert!(matches!(
            small.check(&[0, 2, 1]),
            Err(Infeasible::Resources { what: "cores", .. })
        ));
    }
}
