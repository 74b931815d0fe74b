//! Per-(model, instance type) latency profiles, instance prices and the QoS target: the data every
//! other module reads.
//!
//! A [`ModelProfile`] holds, for one model, a batch-size → latency table per instance type, each
//! type's price per hour, the p99 QoS target and which type is the *base* (the type that meets QoS
//! for every batch size, paper §4). The paper's five models on its four AWS types are built in
//! ([`paper`], from the tables of the authors' artifact). Users bring their own
//! profiles as YAML ([`ModelProfile::from_yaml`]):
//!
//! ```yaml
//! model: rm2
//! qos_ms: 350            # p99 target in milliseconds
//! max_batch: 1000        # optional, default 1000: the largest batch a query may have
//! base_type: g4dn.xlarge # optional: default is the cheapest-per-throughput type meeting QoS at max_batch
//! instance_types:
//!   - name: g4dn.xlarge
//!     cost_per_hour: 0.526
//!     latency_ms: {10: 5.40, 100: 29.21, 1000: 260.78}   # batch -> mean latency (ms), any points
//!   - name: r5n.large
//!     cost_per_hour: 0.149
//!     latency_ms: {10: 5.70, 100: 43.22, 1000: 404.20}
//! ```
//!
//! Latency between profiled points is interpolated linearly after rounding the batch up to a
//! multiple of 10 (the artifact's bucket); beyond the last point it is extrapolated
//! from the last two. The throughput-bound inputs derived from a profile live in [`throughput`].

pub mod paper;
pub mod throughput;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::KairosError;

/// Latencies are looked up for the batch rounded up to a multiple of this (as the artifact does).
pub const BATCH_BUCKET: u32 = 10;

/// The default largest batch size of a query (paper §5.1: 1000 "because of QoS constraints").
pub const DEFAULT_MAX_BATCH: u32 = 1000;

/// Rounds a batch size up to its bucket: `ceil(b / 10) * 10`, at least one bucket.
pub fn bucket(batch: u32) -> u32 {
    batch.max(1).div_ceil(BATCH_BUCKET) * BATCH_BUCKET
}

/// A kind of machine an executor runs on, with its hourly price.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    /// Name, e.g. `g4dn.xlarge`; becomes the executor label `instance_type`.
    pub name: String,
    /// Price in $ per hour; becomes the executor label `cost_per_hour`.
    pub cost_per_hour: f64,
}

/// Mean service latency (ms) of one model on one instance type, by batch size.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyTable {
    points: Vec<(u32, f64)>,
}

impl LatencyTable {
    /// Builds a table from `(batch, ms)` points in any order.
    ///
    /// # Errors
    /// [`KairosError::InvalidProfile`] when there are no points, a batch repeats or is 0, or a
    /// latency is not finite and positive.
    pub fn new(mut points: Vec<(u32, f64)>) -> Result<Self, KairosError> {
        points.sort_by_key(|p| p.0);
        if points.is_empty() {
            return Err(KairosError::InvalidProfile(
                "a latency table has no points".into(),
            ));
        }
        for w in points.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(KairosError::InvalidProfile(format!(
                    "batch {} appears twice in a latency table",
                    w[0].0
                )));
            }
        }
        if let Some(&(b, ms)) = points
            .iter()
            .find(|(b, ms)| *b == 0 || !(ms.is_finite() && *ms > 0.0))
        {
            return Err(KairosError::InvalidProfile(format!(
                "latency table point ({b}, {ms}) needs batch >= 1 and a positive latency"
            )));
        }
        Ok(LatencyTable { points })
    }

    /// The profiled `(batch, ms)` points, sorted by batch.
    pub fn points(&self) -> &[(u32, f64)] {
        &self.points
    }

    /// Predicted latency in ms for a batch (bucketed, then interpolated; never below 0.001 ms).
    pub fn latency_ms(&self, batch: u32) -> f64 {
        let b = f64::from(bucket(batch));
        let pts = &self.points;
        let (first, last) = (pts[0], pts[pts.len() - 1]);
        if pts.len() == 1 || b <= f64::from(first.0) {
            return first.1;
        }
        let seg = match pts.iter().position(|p| f64::from(p.0) >= b) {
            Some(i) => (pts[i - 1], pts[i]),
            None => (pts[pts.len() - 2], last),
        };
        let ((b0, l0), (b1, l1)) = seg;
        let (b0, b1) = (f64::from(b0), f64::from(b1));
        (l0 + (l1 - l0) * (b - b0) / (b1 - b0)).max(0.001)
    }
}

/// One instance type's price and latency table for a model.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeProfile {
    /// The type and its price.
    pub instance: InstanceType,
    /// Latency by batch size on this type.
    pub latency: LatencyTable,
}

/// Everything Kairos knows about serving one model on a set of instance types.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelProfile {
    /// Model name (informational).
    pub model: String,
    /// p99 latency target in ms.
    pub qos_ms: f64,
    /// Largest batch a query may have; also the "largest query" η is computed at.
    pub max_batch: u32,
    /// Index into `types` of the base type (meets QoS at `max_batch`).
    pub base: usize,
    /// The instance types, in the order configurations count them.
    pub types: Vec<TypeProfile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    model: String,
    qos_ms: f64,
    #[serde(default)]
    max_batch: Option<u32>,
    #[serde(default)]
    base_type: Option<String>,
    instance_types: Vec<TypeFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeFile {
    name: String,
    cost_per_hour: f64,
    latency_ms: BTreeMap<u32, f64>,
}

impl ModelProfile {
    /// Builds and checks a profile. `base_type` names the base; `None` picks, among the types
    /// whose latency at `max_batch` meets QoS, the one with the most throughput per dollar there.
    ///
    /// # Errors
    /// [`KairosError::InvalidProfile`] for a non-positive QoS or price, duplicate type names, an
    /// unknown `base_type`, or when no type meets QoS at `max_batch`.
    pub fn new(
        model: impl Into<String>,
        qos_ms: f64,
        max_batch: u32,
        types: Vec<TypeProfile>,
        base_type: Option<&str>,
    ) -> Result<Self, KairosError> {
        let bad = |m: String| Err(KairosError::InvalidProfile(m));
        if !(qos_ms.is_finite() && qos_ms > 0.0) {
            return bad(format!("qos_ms must be positive, got {qos_ms}"));
        }
        if max_batch == 0 || types.is_empty() {
            return bad(
                "max_batch must be >= 1 and there must be at least one instance type".into(),
            );
        }
        for (i, t) in types.iter().enumerate() {
            if !(t.instance.cost_per_hour.is_finite() && t.instance.cost_per_hour > 0.0) {
                return bad(format!(
                    "{}: cost_per_hour must be positive",
                    t.instance.name
                ));
            }
            if types[..i]
                .iter()
                .any(|u| u.instance.name == t.instance.name)
            {
                return bad(format!("instance type {} appears twice", t.instance.name));
            }
        }
        let base = match base_type {
            Some(name) => match types.iter().position(|t| t.instance.name == name) {
                Some(i) => i,
                None => return bad(format!("base_type {name} is not among the instance types")),
            },
            None => {
                let score = |t: &TypeProfile| {
                    1.0 / (t.latency.latency_ms(max_batch) * t.instance.cost_per_hour)
                };
                let meets = types
                    .iter()
                    .enumerate()
                    .filter(|(_, t)| t.latency.latency_ms(max_batch) <= qos_ms);
                match meets.max_by(|a, b| score(a.1).total_cmp(&score(b.1))) {
                    Some((i, _)) => i,
                    None => {
                        return bad(format!(
                            "no instance type meets qos_ms {qos_ms} at batch {max_batch}; name base_type"
                        ))
                    }
                }
            }
        };
        Ok(ModelProfile {
            model: model.into(),
            qos_ms,
            max_batch,
            base,
            types,
        })
    }

    /// Parses the YAML profile format shown in the module docs.
    ///
    /// # Errors
    /// [`KairosError::ProfileSyntax`] for malformed YAML or unknown fields, otherwise as [`Self::new`].
    pub fn from_yaml(text: &str) -> Result<Self, KairosError> {
        let file: ProfileFile =
            serde_saphyr::from_str(text).map_err(|e| KairosError::ProfileSyntax(e.to_string()))?;
        let types = file
            .instance_types
            .into_iter()
            .map(|t| {
                Ok(TypeProfile {
                    latency: LatencyTable::new(t.latency_ms.into_iter().collect())
                        .map_err(|e| KairosError::InvalidProfile(format!("{}: {e}", t.name)))?,
                    instance: InstanceType {
                        name: t.name,
                        cost_per_hour: t.cost_per_hour,
                    },
                })
            })
            .collect::<Result<Vec<_>, KairosError>>()?;
        Self::new(
            file.model,
            file.qos_ms,
            file.max_batch.unwrap_or(DEFAULT_MAX_BATCH),
            types,
            file.base_type.as_deref(),
        )
    }

    /// Writes this profile in the YAML format [`Self::from_yaml`] reads.
    pub fn to_yaml(&self) -> String {
        let mut s = format!(
            "model: {}\nqos_ms: {}\nmax_batch: {}\nbase_type: {}\ninstance_types:\n",
            self.model, self.qos_ms, self.max_batch, self.types[self.base].instance.name
        );
        for t in &self.types {
            let pts: Vec<String> = t
                .latency
                .points()
                .iter()
                .map(|(b, ms)| format!("{b}: {ms}"))
                .collect();
            s += &format!(
                "  - name: {}\n    cost_per_hour: {}\n    latency_ms: {{{}}}\n",
                t.instance.name,
                t.instance.cost_per_hour,
                pts.join(", ")
            );
        }
        s
    }

    /// The same profile with another QoS target (the paper's sensitivity study scales it).
    pub fn with_qos_ms(mut self, qos_ms: f64) -> Self {
        self.qos_ms = qos_ms;
        self
    }

    /// Predicted latency in ms of a batch on instance type `type_idx`.
    ///
    /// # Panics
    /// When `type_idx` is out of range (an internal index, never user input).
    pub fn latency_ms(&self, type_idx: usize, batch: u32) -> f64 {
        self.types[type_idx].latency.latency_ms(batch)
    }

    /// Index of the type with this name.
    pub fn type_index(&self, name: &str) -> Option<usize> {
        self.types.iter().position(|t| t.instance.name == name)
    }

    /// Heterogeneity coefficients η per type (Definition 1): `round(L_base(max) / L_t(max), 2)`.
    ///
    /// Decision: the ratio is base over type, as the artifact computes it, so a slower
    /// type gets η < 1 and its busy time counts for less than the base type's.
    pub fn eta(&self) -> Vec<f64> {
        let lb = self.latency_ms(self.base, self.max_batch);
        (0..self.types.len())
            .map(|t| (lb / self.latency_ms(t, self.max_batch) * 100.0).round() / 100.0)
            .collect()
    }

    /// Hourly cost of a configuration (instances per type).
    pub fn cost_per_hour(&self, counts: &[u32]) -> f64 {
        counts
            .iter()
            .zip(&self.types)
            .map(|(n, t)| f64::from(*n) * t.instance.cost_per_hour)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::paper::PaperModel;
    use super::*;

    #[test]
    fn bucket_rounds_up_to_tens() {
        assert_eq!(bucket(1), 10);
        assert_eq!(bucket(10), 10);
        assert_eq!(bucket(11), 20);
        assert_eq!(bucket(0), 10);
    }

    #[test]
    fn table_interpolates_between_points_and_extrapolates() {
        let t = LatencyTable::new(vec![(100, 10.0), (10, 1.0), (200, 30.0)]).unwrap();
        assert_eq!(t.latency_ms(5), 1.0);
        assert!((t.latency_ms(55) - 6.0).abs() < 1e-9); // bucket 60 between (10,1) and (100,10)
        assert!((t.latency_ms(150) - 20.0).abs() < 1e-9);
        assert!((t.latency_ms(300) - 50.0).abs() < 1e-9);
        assert!(LatencyTable::new(vec![]).is_err());
        assert!(LatencyTable::new(vec![(10, 1.0), (10, 2.0)]).is_err());
        assert!(LatencyTable::new(vec![(10, -1.0)]).is_err());
    }

    #[test]
    fn eta_matches_the_artifacts_ratios() {
        // η per model for (c5n, r5n, t3) from the artifact's tables; base g4dn is 1.
        let expect = [
            (PaperModel::Ncf, [0.38, 0.36, 0.19]),
            (PaperModel::Rm2, [0.67, 0.65, 0.29]),
            (PaperModel::Wnd, [0.29, 0.26, 0.15]),
            (PaperModel::MtWnd, [0.31, 0.27, 0.17]),
            (PaperModel::Dien, [0.24, 0.22, 0.15]),
        ];
        for (m, e) in expect {
            let eta = m.profile().eta();
            assert_eq!(eta[0], 1.0);
            assert_eq!(&eta[1..], &e, "{m:?}");
        }
    }

    #[test]
    fn yaml_round_trip_and_base_default() {
        let p = PaperModel::Rm2.profile();
        let text = p.to_yaml();
        let q = ModelProfile::from_yaml(&text).unwrap();
        assert_eq!(p, q);
        // Without base_type, the only type meeting 350 ms at batch 1000 (g4dn) is chosen.
        let no_base: String = text
            .lines()
            .filter(|l| !l.starts_with("base_type"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(ModelProfile::from_yaml(&no_base).unwrap().base, 0);
        assert!(matches!(
            ModelProfile::from_yaml("model: x\nqos_ms: 1\nbogus: 2\ninstance_types: []\n"),
            Err(KairosError::ProfileSyntax(_))
        ));
        // base named explicitly: accepted even if it misses QoS
        assert!(ModelProfile::from_yaml(&text.replace("qos_ms: 350", "qos_ms: 1")).is_ok());
        assert!(matches!(
            ModelProfile::from_yaml(&no_base.replace("qos_ms: 350", "qos_ms: 1")),
            Err(KairosError::InvalidProfile(_))
        ));
    }
}
