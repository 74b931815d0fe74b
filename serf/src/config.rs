//! The parallelism configuration space of one serving unit: what a configuration is, which ones exist for a
//! core count (paper §IV-C3: `c·t ≤ cores`), and how a cluster's load splits over serving units (paper
//! §IV-C3, last paragraph).
//!
//! A configuration is the paper's triple (max service parallelism `C_service`, inter-node parallelism
//! `C_inter`, intra-node parallelism `C_intra`). In weir, `C_service` is the executor's admission limit (how
//! many requests run at once) and `C_intra` the ONNX Runtime intra-op thread count of each request. weir runs
//! every model node on one machine, so `inter_node` is 1 there; it is kept so the paper's 20/40/80 counts can
//! be checked and a partitioned executor can use it later.
//!
//! Nothing here measures or predicts; the profile and the model consume these values.

use serde::{Deserialize, Serialize};

/// One parallelism configuration `(c, C_inter, t)` of a serving unit.
///
/// The derived order (concurrency, then inter-node degree, then threads) is the table's tie-break order
/// (on a tie of predicted latency, prefer smaller `c`, then smaller `t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Max service parallelism `c`: at most this many requests run at once; the rest wait in a FIFO queue.
    pub concurrency: usize,
    /// Inter-node parallelism `C_inter`: machines one request is partitioned over (1 in weir).
    #[serde(default = "one")]
    pub inter_node: usize,
    /// Intra-node parallelism `t`: intra-op threads (cores) each running request uses.
    pub threads: usize,
}

fn one() -> usize {
    1
}

impl Config {
    /// A single-machine configuration: `concurrency` requests at once, `threads` intra-op threads each.
    pub fn new(concurrency: usize, threads: usize) -> Self {
        Self {
            concurrency,
            inter_node: 1,
            threads,
        }
    }

    /// Cores of one machine this configuration occupies when all its slots are busy (`c·t`).
    pub fn cores_used(&self) -> usize {
        self.concurrency.saturating_mul(self.threads)
    }

    /// The profiling tuple `(i, C_inter, t)` for `i` requests running at once under this configuration's
    /// per-request parallelism.
    pub fn tuple(&self, running: usize) -> Config {
        Config {
            concurrency: running,
            ..*self
        }
    }
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.inter_node == 1 {
            write!(f, "c={} t={}", self.concurrency, self.threads)
        } else {
            write!(
                f,
                "c={} inter={} t={}",
                self.concurrency, self.inter_node, self.threads
            )
        }
    }
}

/// Every configuration `(c, C_inter, t)` with `c·t ≤ cores`, `c, t ≥ 1` and `C_inter` from `inter_set`
/// (paper §IV-C3), sorted by [`Config`]'s order and without duplicates.
///
/// For 8 cores this gives 20 configurations per inter-node degree (the paper's 20/40/80); for 2 cores it gives
/// `(1,1)`, `(1,2)`, `(2,1)`. An empty `inter_set` or zero cores gives an empty list.
pub fn enumerate(cores: usize, inter_set: &[usize]) -> Vec<Config> {
    let mut out = Vec::new();
    for &inter_node in inter_set.iter().filter(|&&n| n >= 1) {
        for concurrency in 1..=cores {
            for threads in 1..=cores / concurrency {
                out.push(Config {
                    concurrency,
                    inter_node,
                    threads,
                });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Arrival rate seen by one serving unit when a cluster of `machines` machines is cut into
/// `machines / inter_node` units and receives `cluster_rate` requests per second (paper §IV-C3):
/// `λ = λ_all · C_inter / N`.
///
/// The paper assumes an even random split (a random split of a Poisson stream is Poisson). When `inter_node`
/// does not divide `machines` the paper is silent; this function keeps the formula (fractional units), which
/// is what an even split over the `N / C_inter` units would give if leftover machines took a share too.
/// Returns `None` when `machines` or `inter_node` is zero.
pub fn unit_arrival_rate(cluster_rate: f64, inter_node: usize, machines: usize) -> Option<f64> {
    if machines == 0 || inter_node == 0 {
        return None;
    }
    Some(cluster_rate * inter_node as f64 / machines as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configuration_space_counts() {
        assert_eq!(enumerate(8, &[1]).len(), 20);
        assert_eq!(enumerate(8, &[1, 2]).len(), 40);
        assert_eq!(enumerate(8, &[1, 2, 3, 4]).len(), 80);
        assert_eq!(
            enumerate(2, &[1]),
            vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)]
        );
        assert!(enumerate(8, &[1, 2]).iter().all(|c| c.cores_used() <= 8));
        assert!(enumerate(0, &[1]).is_empty());
        assert!(enumerate(8, &[]).is_empty());
        // Duplicated inter-node degrees do not duplicate configurations.
        assert_eq!(enumerate(8, &[1, 1]).len(), 20);
    }

    #[test]
    fn cluster_split_rate() {
        // 20 machines, units of 4 machines: 5 units, each gets a fifth of the load.
        assert_eq!(unit_arrival_rate(10.0, 4, 20), Some(2.0));
        assert_eq!(unit_arrival_rate(10.0, 1, 1), Some(10.0));
        assert_eq!(unit_arrival_rate(10.0, 0, 20), None);
    }

    #[test]
    fn config_order_is_tie_break_order() {
        let mut v = vec![Config::new(2, 1), Config::new(1, 2), Config::new(1, 1)];
        v.sort();
        assert_eq!(
            v,
            vec![Config::new(1, 1), Config::new(1, 2), Config::new(2, 1)]
        );
        assert_eq!(Config::new(2, 3).tuple(1), Config::new(1, 3));
        assert_eq!(Config::new(2, 3).to_string(), "c=2 t=3");
    }

    #[test]
    fn config_json_defaults_inter_node() {
        let c: Config = serde_json::from_str(r#"{"concurrency":2,"threads":1}"#).unwrap();
        assert_eq!(c, Config::new(2, 1));
        assert!(serde_json::from_str::<Config>(r#"{"concurrency":2,"threads":1,"x":1}"#).is_err());
    }
}
