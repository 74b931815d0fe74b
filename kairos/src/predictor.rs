//! Latency learned online (paper §5.1): a per-type least-squares line
//! `latency = a + b·batch` from the first observations, replaced per batch bucket by the bucket's
//! mean once that bucket has been observed. Until a type has two distinct batch sizes, it falls
//! back to a prior (the profile tables, or nothing).

use std::collections::BTreeMap;

use crate::distribution::LatencyModel;
use crate::profile::{bucket, ModelProfile};

#[derive(Debug, Clone, Default)]
struct TypeStats {
    n: f64,
    sum_b: f64,
    sum_l: f64,
    sum_bb: f64,
    sum_bl: f64,
    buckets: BTreeMap<u32, (f64, u32)>,
}

/// Online latency model for every instance type of a pool.
#[derive(Debug, Clone)]
pub struct OnlineLatency {
    types: Vec<TypeStats>,
    prior: Option<ModelProfile>,
    /// Batch sizes per bucket (the paper's 10; 1 keys every size on its own).
    bucket_width: u32,
}

impl OnlineLatency {
    /// A model for `n_types` types; `prior` answers until a type has data to fit.
    pub fn new(n_types: usize, prior: Option<ModelProfile>) -> Self {
        OnlineLatency {
            types: vec![TypeStats::default(); n_types],
            prior,
            bucket_width: crate::profile::BATCH_BUCKET,
        }
    }

    /// The same with buckets of `width` batch sizes instead of the paper's 10. A router whose
    /// batches hold a few rows (weir's jobs: up to the node's `batching.max_size`) needs narrower
    /// buckets, or a 1-row and an 8-row batch share one mean and batching looks free.
    pub fn with_bucket_width(mut self, width: u32) -> Self {
        self.bucket_width = width.max(1);
        self
    }

    fn bucket(&self, batch: u32) -> u32 {
        if self.bucket_width == crate::profile::BATCH_BUCKET {
            bucket(batch)
        } else {
            batch.max(1).div_ceil(self.bucket_width) * self.bucket_width
        }
    }

    /// Records one served query: its batch and measured latency on type `type_idx`.
    /// Observations for unknown types are ignored.
    pub fn observe(&mut self, type_idx: usize, batch: u32, latency_ms: f64) {
        let key = self.bucket(batch);
        let Some(s) = self.types.get_mut(type_idx) else {
            return;
        };
        let b = f64::from(batch);
        s.n += 1.0;
        s.sum_b += b;
        s.sum_l += latency_ms;
        s.sum_bb += b * b;
        s.sum_bl += b * latency_ms;
        let e = s.buckets.entry(key).or_insert((0.0, 0));
        e.0 += latency_ms;
        e.1 += 1;
    }

    /// The fitted line `(intercept, slope)` of a type, once it has two distinct batch sizes.
    pub fn linear_fit(&self, type_idx: usize) -> Option<(f64, f64)> {
        let s = self.types.get(type_idx)?;
        let den = s.n * s.sum_bb - s.sum_b * s.sum_b;
        if s.n < 2.0 || den.abs() < 1e-9 {
            return None;
        }
        let slope = (s.n * s.sum_bl - s.sum_b * s.sum_l) / den;
        Some(((s.sum_l - slope * s.sum_b) / s.n, slope))
    }

    /// Prediction: the bucket mean if observed, else the line, else the prior, else `None`.
    pub fn predict_ms(&self, type_idx: usize, batch: u32) -> Option<f64> {
        let s = self.types.get(type_idx)?;
        if let Some((sum, n)) = s.buckets.get(&self.bucket(batch)) {
            return Some(sum / f64::from(*n));
        }
        if let Some((a, b)) = self.linear_fit(type_idx) {
            return Some((a + b * f64::from(batch)).max(0.001));
        }
        self.prior.as_ref().map(|p| p.latency_ms(type_idx, batch))
    }
}

impl LatencyModel for OnlineLatency {
    /// As [`OnlineLatency::predict_ms`]; with no data and no prior, 0 (optimistic: try it).
    fn latency_ms(&self, type_idx: usize, batch: u32) -> f64 {
        self.predict_ms(type_idx, batch).unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::paper::PaperModel;

    fn pearson(x: &[f64], y: &[f64]) -> f64 {
        let n = x.len() as f64;
        let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
        let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
        let vx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
        let vy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
        cov / (vx * vy).sqrt()
    }

    #[test]
    fn latency_is_linear_in_batch_on_artifact_tables() {
        for m in PaperModel::ALL {
            for t in m.profile().types {
                let (b, l): (Vec<f64>, Vec<f64>) = t
                    .latency
                    .points()
                    .iter()
                    .map(|&(b, l)| (f64::from(b), l))
                    .unzip();
                let r = pearson(&b, &l);
                assert!(r > 0.99, "{:?} {} r = {r}", m, t.instance.name);
            }
        }
    }

    #[test]
    fn linear_fit_then_lookup_table() {
        let rm2 = PaperModel::Rm2.profile();
        let mut o = OnlineLatency::new(4, None);
        assert_eq!(o.predict_ms(0, 100), None);
        o.observe(0, 100, rm2.latency_ms(0, 100));
        o.observe(0, 900, rm2.latency_ms(0, 900));
        // Line through the two points; the least-squares fit of RM2's whole g4dn table is
        // 3.70 + 0.2575·b.
        let (a, b) = o.linear_fit(0).unwrap();
        assert!(
            (b - 0.2575).abs() < 0.005 && (a - 3.7).abs() < 2.0,
            "{a} {b}"
        );
        let line = o.predict_ms(0, 500).unwrap();
        assert!((line - (a + b * 500.0)).abs() < 1e-9);
        // After observing bucket 500, the bucket mean wins.
        o.observe(0, 495, 140.0);
        o.observe(0, 500, 142.0);
        assert_eq!(o.predict_ms(0, 500), Some(141.0));
        // Prior answers for types without data.
        let p = OnlineLatency::new(4, Some(rm2.clone()));
        assert_eq!(p.predict_ms(3, 1000), Some(885.71));
    }

    #[test]
    fn narrow_buckets_tell_small_batches_apart() {
        // The paper's buckets of 10 give a 1-row and an 8-row batch one mean; width 1 does not.
        let mut paper = OnlineLatency::new(1, None);
        let mut rows = OnlineLatency::new(1, None).with_bucket_width(1);
        for o in [&mut paper, &mut rows] {
            o.observe(0, 1, 2.0);
            o.observe(0, 8, 9.0);
        }
        assert_eq!(paper.predict_ms(0, 1), Some(5.5));
        assert_eq!(paper.predict_ms(0, 8), Some(5.5));
        assert_eq!(rows.predict_ms(0, 1), Some(2.0));
        assert_eq!(rows.predict_ms(0, 8), Some(9.0));
        // Sizes not seen yet come from the line through the others.
        assert!((rows.predict_ms(0, 4).unwrap() - 5.0).abs() < 1e-9);
    }
}
