//! The cost model: the cheapest number of instances of each variant that serves a load within a
//! latency SLO ("INFaaS: Automated Model-less Inference Serving", §2.2, Tables 2 and 3).
//!
//! A variant is eligible when its latency is within the SLO; a mix of instances serves the load
//! when the sum of their saturation throughputs reaches it (equality allowed: Table 3's last row
//! is exactly 2 × 100 + 800 = 1000). Among those mixes the cheapest wins (ties: fewer instances,
//! then more of the earlier-listed variants).
//!
//! The search is exhaustive: variant i never needs more than ⌈qps / saturation_i⌉ instances (that
//! many alone serve the load), so it enumerates every count vector under those bounds, pruning
//! partial mixes already dearer than the best one. The product of the bounds is capped at
//! [`MAX_COMBINATIONS`]; larger inputs are refused rather than searched for minutes (an ILP
//! solves those).

/// What the cost model needs to know about a variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Offer {
    /// Variant name.
    pub name: String,
    /// Latency of one query, ms.
    pub latency_ms: f64,
    /// Requests per second one instance sustains.
    pub saturation_qps: f64,
    /// Price of one instance per second.
    pub price: f64,
}

/// The cheapest mix.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Instances of each offer, in the offers' order.
    pub counts: Vec<u32>,
    /// Total price per second.
    pub cost: f64,
    /// Total saturation throughput.
    pub capacity: f64,
}

/// Why no plan was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CostError {
    /// An input is not a finite, non-negative number.
    #[error("{field} must be a finite, non-negative number")]
    BadInput {
        /// Which input (`qps`, `slo_ms`, or `<offer>.<field>`).
        field: String,
    },
    /// No variant meets the SLO with a positive throughput.
    #[error("no variant meets the {slo_ms} ms SLO")]
    NoEligible {
        /// The SLO.
        slo_ms: f64,
    },
    /// The search space exceeds [`MAX_COMBINATIONS`].
    #[error("{combinations} instance mixes exceed the exhaustive search's bound")]
    TooLarge {
        /// Mixes the bounds allow.
        combinations: u128,
    },
}

/// The most count vectors the exhaustive search will enumerate.
pub const MAX_COMBINATIONS: u128 = 10_000_000;

fn check(field: impl FnOnce() -> String, x: f64) -> Result<(), CostError> {
    if x.is_finite() && x >= 0.0 {
        Ok(())
    } else {
        Err(CostError::BadInput { field: field() })
    }
}

struct Search<'a> {
    offers: Vec<(usize, &'a Offer, u32)>,
    qps: f64,
    counts: Vec<u32>,
    best: Option<Plan>,
}

impl Search<'_> {
    fn better(&self, cost: f64, instances: u32) -> bool {
        match &self.best {
            None => true,
            Some(b) => {
                let best_n: u32 = b.counts.iter().sum();
                cost < b.cost - 1e-9 || (cost <= b.cost + 1e-9 && instances < best_n)
            }
        }
    }

    fn walk(&mut self, level: usize, cost: f64, capacity: f64, instances: u32) {
        let slack = 1e-9 * self.qps.max(1.0);
        if capacity + slack >= self.qps {
            if self.better(cost, instances) {
                self.best = Some(Plan {
                    counts: self.counts.clone(),
                    cost,
                    capacity,
                });
            }
            return;
        }
        let Some(&(index, offer, bound)) = self.offers.get(level) else {
            return;
        };
        for n in (0..=bound).rev() {
            let c = cost + f64::from(n) * offer.price;
            if self.best.as_ref().is_some_and(|b| c > b.cost + 1e-9) {
                continue;
            }
            self.counts[index] = n;
            self.walk(
                level + 1,
                c,
                capacity + f64::from(n) * offer.saturation_qps,
                instances + n,
            );
        }
        self.counts[index] = 0;
    }
}

/// The cheapest instance counts of `offers` that serve `qps` within `slo_ms`.
pub fn cheapest(offers: &[Offer], qps: f64, slo_ms: f64) -> Result<Plan, CostError> {
    check(|| "qps".into(), qps)?;
    check(|| "slo_ms".into(), slo_ms)?;
    for o in offers {
        check(|| format!("{}.latency_ms", o.name), o.latency_ms)?;
        check(|| format!("{}.saturation_qps", o.name), o.saturation_qps)?;
        check(|| format!("{}.price", o.name), o.price)?;
    }
    let mut eligible = Vec::new();
    let mut combinations: u128 = 1;
    for (i, o) in offers.iter().enumerate() {
        if o.latency_ms <= slo_ms && o.saturation_qps > 0.0 {
            let bound = (qps / o.saturation_qps).ceil();
            if bound > f64::from(u32::MAX) {
                return Err(CostError::TooLarge {
                    combinations: u128::MAX,
                });
            }
            let bound = bound as u32;
            combinations = combinations.saturating_mul(u128::from(bound) + 1);
            eligible.push((i, o, bound));
        }
    }
    if eligible.is_empty() {
        return Err(CostError::NoEligible { slo_ms });
    }
    if combinations > MAX_COMBINATIONS {
        return Err(CostError::TooLarge { combinations });
    }
    let mut search = Search {
        offers: eligible,
        qps,
        counts: vec![0; offers.len()],
        best: None,
    };
    search.walk(0, 0.0, 0.0, 0);
    search.best.ok_or(CostError::NoEligible { slo_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table2() -> Vec<Offer> {
        let o = |name: &str, latency_ms, saturation_qps, price| Offer {
            name: name.into(),
            latency_ms,
            saturation_qps,
            price,
        };
        vec![
            o("A", 200.0, 5.0, 1.0),
            o("B", 20.0, 100.0, 3.0),
            o("C", 15.0, 800.0, 16.0),
        ]
    }

    #[test]
    fn table_2_gives_table_3() {
        let rows = [
            (10.0, 300.0, vec![2, 0, 0], 2.0),
            (10.0, 50.0, vec![0, 1, 0], 3.0),
            (1000.0, 300.0, vec![0, 2, 1], 22.0),
        ];
        for (qps, slo, counts, cost) in rows {
            let plan = cheapest(&table2(), qps, slo).unwrap();
            assert_eq!(plan.counts, counts, "qps {qps} slo {slo}");
            assert_eq!(plan.cost, cost);
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        assert_eq!(
            cheapest(&table2(), 10.0, 10.0),
            Err(CostError::NoEligible { slo_ms: 10.0 })
        );
        assert!(matches!(
            cheapest(&table2(), f64::NAN, 10.0),
            Err(CostError::BadInput { field }) if field == "qps"
        ));
        assert!(matches!(
            cheapest(&table2(), 1e9, 300.0),
            Err(CostError::TooLarge { .. })
        ));
    }

    proptest! {
        /// The plan serves the load and no single instance can be removed while still serving it
        /// more cheaply: a cheaper mix would have been found.
        #[test]
        fn plans_serve_the_load_and_are_minimal(
            qps in 0.0f64..400.0,
            specs in proptest::collection::vec((1.0f64..100.0, 5.0f64..200.0, 0.5f64..20.0), 1..4),
        ) {
            let offers: Vec<Offer> = specs.iter().enumerate().map(|(i, (l, s, p))| Offer {
                name: format!("v{i}"), latency_ms: *l, saturation_qps: *s, price: *p,
            }).collect();
            let plan = cheapest(&offers, qps, 100.0).unwrap();
            prop_assert!(plan.capacity + 1e-6 >= qps);
            for (i, n) in plan.counts.iter().enumerate() {
                if *n > 0 {
                    let without = plan.capacity - offers[i].saturation_qps;
                    prop_assert!(without + 1e-6 < qps || offers[i].price <= 0.0);
                }
            }
        }
    }
}
