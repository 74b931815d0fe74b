//! The paper's five models on its four AWS instance types, as built-in profiles.
//!
//! Latency tables: mean end-to-end latency (inference + data load, ms) at 12 batch sizes, computed
//! from the authors' artifact `boringlee24/hpdc23-kairos` (`data.tar.gz`, MIT licence). Prices:
//! paper Table 4. QoS: paper Table 3. Throughput-bound inputs: the artifact's
//! `allocator_profile.json`, kept verbatim because re-deriving them from the 12-point tables
//! ([`super::throughput::ThroughputProfile::derive`]) differs by 1–11 % and the golden upper bounds
//! use these.

use std::collections::BTreeMap;

use super::throughput::{AuxProfile, ThroughputProfile};
use super::{InstanceType, LatencyTable, ModelProfile, TypeProfile, DEFAULT_MAX_BATCH};

/// The artifact's default budget in $/h (`instance.json`; the paper's number is lost).
pub const PAPER_BUDGET_PER_HOUR: f64 = 2.5;

/// The paper's instance types in configuration order (g4dn, c5n, r5n, t3) with Table 4 prices.
pub fn paper_instance_types() -> Vec<InstanceType> {
    [
        ("g4dn.xlarge", 0.526),
        ("c5n.2xlarge", 0.432),
        ("r5n.large", 0.149),
        ("t3.xlarge", 0.1664),
    ]
    .into_iter()
    .map(|(n, c)| InstanceType {
        name: n.to_string(),
        cost_per_hour: c,
    })
    .collect()
}

/// Batch sizes of the built-in latency tables.
const BATCHES: [u32; 12] = [10, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000];

/// One of the paper's five recommendation models (Table 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaperModel {
    /// Neural collaborative filtering, QoS 5 ms.
    Ncf,
    /// Meta's RM2, QoS 350 ms.
    Rm2,
    /// Wide and Deep, QoS 25 ms.
    Wnd,
    /// Multi-task Wide and Deep, QoS 25 ms.
    MtWnd,
    /// Deep Interest Evolution Network, QoS 35 ms.
    Dien,
}

impl PaperModel {
    /// All five, in the paper's Table 3 order.
    pub const ALL: [PaperModel; 5] = [
        PaperModel::Ncf,
        PaperModel::Rm2,
        PaperModel::Wnd,
        PaperModel::MtWnd,
        PaperModel::Dien,
    ];

    /// The model with this short name (`ncf`, `rm2`, `wnd`, `mtwnd`, `dien`; `mt-wnd` too).
    pub fn from_name(name: &str) -> Option<Self> {
        let n = name.to_ascii_lowercase().replace(['-', '_'], "");
        PaperModel::ALL.into_iter().find(|m| m.name() == n)
    }

    /// Short name as the artifact spells it.
    pub fn name(self) -> &'static str {
        match self {
            PaperModel::Ncf => "ncf",
            PaperModel::Rm2 => "rm2",
            PaperModel::Wnd => "wnd",
            PaperModel::MtWnd => "mtwnd",
            PaperModel::Dien => "dien",
        }
    }

    /// p99 QoS target in ms (Table 3).
    pub fn qos_ms(self) -> f64 {
        match self {
            PaperModel::Ncf => 5.0,
            PaperModel::Rm2 => 350.0,
            PaperModel::Wnd | PaperModel::MtWnd => 25.0,
            PaperModel::Dien => 35.0,
        }
    }

    /// Latency rows (g4dn, c5n, r5n, t3) at [`BATCHES`].
    // DIEN's 6.28 ms is a measurement that happens to look like τ.
    #[allow(clippy::approx_constant)]
    fn rows(self) -> [[f64; 12]; 4] {
        match self {
            PaperModel::Ncf => [
                [
                    0.61, 0.77, 0.88, 1.06, 1.24, 1.48, 1.66, 1.80, 1.99, 2.13, 2.31, 2.46,
                ],
                [
                    0.31, 0.56, 0.81, 1.37, 1.92, 2.52, 2.90, 3.46, 4.04, 4.57, 5.13, 6.51,
                ],
                [
                    0.39, 0.67, 1.14, 1.81, 2.60, 3.33, 3.62, 4.24, 4.82, 5.74, 6.26, 6.76,
                ],
                [
                    0.82, 1.20, 1.61, 2.76, 3.57, 5.13, 5.97, 8.17, 9.61, 9.98, 11.11, 12.78,
                ],
            ],
            PaperModel::Rm2 => [
                [
                    5.40, 15.96, 29.21, 55.27, 81.18, 106.85, 132.81, 158.36, 183.99, 209.63,
                    235.15, 260.78,
                ],
                [
                    4.96, 20.61, 39.52, 80.20, 119.44, 158.18, 196.82, 235.44, 273.70, 311.61,
                    349.71, 387.60,
                ],
                [
                    5.70, 22.47, 43.22, 84.06, 124.75, 164.97, 205.23, 247.04, 285.31, 324.41,
                    363.01, 404.20,
                ],
                [
                    14.28, 52.22, 92.38, 178.69, 265.53, 354.78, 440.21, 529.01, 619.53, 708.38,
                    794.12, 885.71,
                ],
            ],
            PaperModel::Wnd => [
                [
                    2.43, 2.71, 3.07, 3.79, 4.35, 5.18, 5.89, 6.46, 7.28, 8.00, 8.68, 9.44,
                ],
                [
                    1.97, 2.71, 4.14, 7.02, 10.15, 13.76, 16.63, 19.75, 23.10, 26.39, 29.57, 32.65,
                ],
                [
                    2.18, 3.98, 5.25, 8.56, 12.44, 16.81, 19.97, 24.70, 28.15, 30.53, 36.16, 36.95,
                ],
                [
                    3.88, 7.32, 10.00, 17.30, 25.13, 31.22, 37.16, 42.71, 50.14, 57.71, 58.72,
                    64.63,
                ],
            ],
            PaperModel::MtWnd => [
                [
                    3.62, 4.03, 4.55, 5.60, 6.45, 7.63, 8.64, 9.51, 10.68, 11.71, 12.73, 13.76,
                ],
                [
                    2.64, 3.64, 5.54, 9.52, 13.62, 18.45, 22.70, 26.58, 30.81, 35.20, 40.55, 44.78,
                ],
                [
                    2.99, 4.85, 6.92, 11.71, 17.11, 21.51, 26.05, 31.36, 37.68, 42.93, 47.11, 50.16,
                ],
                [
                    6.10, 9.47, 13.63, 23.39, 32.07, 41.55, 50.57, 53.70, 60.03, 69.80, 71.79,
                    79.30,
                ],
            ],
            PaperModel::Dien => [
                [
                    6.28, 7.11, 7.85, 9.02, 10.13, 11.82, 12.60, 13.49, 15.74, 16.66, 17.61, 18.59,
                ],
                [
                    2.44, 4.95, 8.24, 15.23, 23.12, 31.22, 38.93, 45.81, 54.32, 61.53, 69.23, 77.36,
                ],
                [
                    2.96, 5.79, 9.48, 17.19, 24.98, 33.02, 41.19, 49.79, 57.82, 66.54, 75.08, 83.58,
                ],
                [
                    5.51, 12.14, 18.57, 32.37, 49.87, 57.32, 76.79, 84.18, 93.35, 108.44, 115.75,
                    125.24,
                ],
            ],
        }
    }

    /// The built-in latency profile (base type g4dn.xlarge, index 0).
    pub fn profile(self) -> ModelProfile {
        let types = paper_instance_types()
            .into_iter()
            .zip(self.rows())
            .map(|(instance, row)| TypeProfile {
                instance,
                latency: LatencyTable {
                    points: BATCHES.iter().copied().zip(row).collect(),
                },
            })
            .collect();
        ModelProfile {
            model: self.name().to_string(),
            qos_ms: self.qos_ms(),
            max_batch: DEFAULT_MAX_BATCH,
            base: 0,
            types,
        }
    }

    /// The artifact's throughput-bound inputs (`allocator_profile.json`).
    pub fn throughput_profile(self) -> ThroughputProfile {
        // (qps, p, k, r, [(threshold, qps)]) for c5n, r5n, t3.
        type Aux = (f64, u32, f64, &'static [(u32, f64)]);
        let (qb, aux): (f64, [Aux; 3]) = match self {
            PaperModel::Ncf => (
                861.33,
                [
                    (0.985, 880, 0.973, &[(880, 690.13)]),
                    (0.967, 740, 0.942, &[(740, 499.0), (880, 486.14)]),
                    (
                        0.858,
                        440,
                        0.756,
                        &[(440, 407.0), (880, 317.16), (740, 335.46)],
                    ),
                ],
            ),
            PaperModel::Rm2 => (
                15.04,
                [
                    (0.989, 910, 0.959, &[(910, 10.73)]),
                    (0.984, 870, 0.941, &[(870, 10.39), (910, 10.27)]),
                    (0.837, 400, 0.614, &[(400, 6.39), (910, 4.74), (870, 4.83)]),
                ],
            ),
            PaperModel::Wnd => (
                246.18,
                [
                    (0.971, 770, 0.94, &[(770, 126.04)]),
                    (0.951, 620, 0.903, &[(620, 106.1), (770, 102.08)]),
                    (0.804, 340, 0.7, &[(340, 67.98), (770, 52.74), (620, 54.11)]),
                ],
            ),
            PaperModel::MtWnd => (
                167.36,
                [
                    (0.934, 570, 0.877, &[(570, 100.18)]),
                    (0.877, 470, 0.792, &[(470, 89.4), (570, 82.47)]),
                    (
                        0.745,
                        230,
                        0.635,
                        &[(230, 57.27), (570, 41.94), (470, 45.39)],
                    ),
                ],
            ),
            PaperModel::Dien => (
                105.56,
                [
                    (0.873, 460, 0.808, &[(460, 69.52)]),
                    (0.857, 430, 0.788, &[(430, 63.06), (460, 61.44)]),
                    (
                        0.741,
                        220,
                        0.657,
                        &[(220, 41.45), (460, 32.76), (430, 33.52)],
                    ),
                ],
            ),
        };
        let mut types = vec![None];
        for (p, k, r, qps) in aux {
            types.push(Some(AuxProfile {
                vio_batch: k,
                small_ratio: p,
                time_ratio: r,
                qps_below: qps.iter().copied().collect::<BTreeMap<u32, f64>>(),
            }));
        }
        ThroughputProfile {
            base: 0,
            base_qps: qb,
            aux: types,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in PaperModel::ALL {
            assert_eq!(PaperModel::from_name(m.name()), Some(m));
        }
        assert_eq!(PaperModel::from_name("MT-WND"), Some(PaperModel::MtWnd));
        assert_eq!(PaperModel::from_name("bert"), None);
    }
}
