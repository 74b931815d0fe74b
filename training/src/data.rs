//! The labelled data sets models train on: the 8×8 digits set read from `digits.csv.gz`, and a
//! seeded train/test split.

use std::io::{BufRead, BufReader};
use std::path::Path;

use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::{Result, TrainError};

/// Pixels per digits image (8×8).
pub const DIGITS_FEATURES: usize = 64;
/// Classes of the digits set (0–9).
pub const DIGITS_CLASSES: usize = 10;
/// The largest pixel value in `digits.csv.gz`; pixels are divided by it, so features lie in [0, 1].
pub const DIGITS_MAX_PIXEL: f32 = 16.0;

/// A labelled classification data set held in memory: `len` rows of `features` f32 values each.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    features: usize,
    x: Vec<f32>,
    labels: Vec<u32>,
}

impl Dataset {
    /// Builds a data set from row-major features (`labels.len() * features` values) and labels.
    pub fn new(features: usize, x: Vec<f32>, labels: Vec<u32>) -> Result<Self> {
        if features == 0 || x.len() != labels.len() * features {
            return Err(TrainError::Options(format!(
                "{} feature values do not make {} rows of {features}",
                x.len(),
                labels.len()
            )));
        }
        Ok(Self {
            features,
            x,
            labels,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Features per row.
    pub fn features(&self) -> usize {
        self.features
    }

    /// The label of every row.
    pub fn labels(&self) -> &[u32] {
        &self.labels
    }

    /// The features of row `i` (panics if `i >= len()`, like slice indexing).
    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// The rows `indices`, stacked as a `[indices.len(), features]` tensor.
    pub fn rows(&self, indices: &[usize]) -> Result<Tensor> {
        let mut x = Vec::with_capacity(indices.len() * self.features);
        for &i in indices {
            x.extend_from_slice(self.row(i));
        }
        Ok(Tensor::from_vec(
            x,
            (indices.len(), self.features),
            &Device::Cpu,
        )?)
    }

    /// All rows as a `[len, features]` tensor.
    pub fn all_rows(&self) -> Result<Tensor> {
        Ok(Tensor::from_slice(
            &self.x,
            (self.len(), self.features),
            &Device::Cpu,
        )?)
    }

    /// The labels of rows `indices` as a u32 tensor.
    pub fn label_tensor(&self, indices: &[usize]) -> Result<Tensor> {
        let y: Vec<u32> = indices.iter().map(|&i| self.labels[i]).collect();
        Ok(Tensor::from_vec(y, indices.len(), &Device::Cpu)?)
    }

    /// Randomly splits the rows into (train, test), `round(test_fraction * len)` rows going to
    /// test; the same seed gives the same split.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<Split> {
        if !(0.0..1.0).contains(&test_fraction) {
            return Err(TrainError::Options(format!(
                "test fraction {test_fraction} is not in [0, 1)"
            )));
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        order.shuffle(&mut StdRng::seed_from_u64(seed));
        let n_test = (test_fraction * self.len() as f64).round() as usize;
        let (test, train) = order.split_at(n_test);
        let mut test = test.to_vec();
        test.sort_unstable();
        Ok(Split {
            train: self.subset(train),
            test: self.subset(&test),
        })
    }

    fn subset(&self, indices: &[usize]) -> Dataset {
        let mut x = Vec::with_capacity(indices.len() * self.features);
        for &i in indices {
            x.extend_from_slice(self.row(i));
        }
        Dataset {
            features: self.features,
            x,
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
        }
    }
}

/// A data set split into a training part and a held-out test part.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Rows to train on.
    pub train: Dataset,
    /// Held-out rows to measure accuracy on.
    pub test: Dataset,
}

/// Where the training data comes from and how it is split.
#[derive(Debug, Clone, PartialEq)]
pub struct DataOptions {
    /// `digits.csv.gz` (scikit-learn's 8×8 digits; `scripts/setup.sh` puts it in `.weir/data/`).
    pub digits: std::path::PathBuf,
    /// Fraction of rows held out for testing (default 0.2, as `scripts/make_models.py`).
    pub test_fraction: f64,
    /// Seed of the train/test split (the split is not numpy's, so it differs from the one that
    /// wrote `.weir/models/digits_test.csv`).
    pub split_seed: u64,
}

impl DataOptions {
    /// The digits file at `digits`, a 20% test split with seed 0.
    pub fn digits(digits: impl Into<std::path::PathBuf>) -> Self {
        Self {
            digits: digits.into(),
            test_fraction: 0.2,
            split_seed: 0,
        }
    }

    /// Loads the file and splits it.
    pub fn load(&self) -> Result<Split> {
        load_digits(&self.digits)?.split(self.test_fraction, self.split_seed)
    }
}

/// Reads scikit-learn's `digits.csv.gz`: one image a line, 64 pixel values 0..=16 then the label
/// 0..=9, comma-separated. Pixels are scaled by 1/16 into [0, 1].
pub fn load_digits(path: &Path) -> Result<Dataset> {
    let io = |source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let reader = BufReader::new(flate2::read::GzDecoder::new(file));
    let mut x = Vec::new();
    let mut labels = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(io)?;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| TrainError::Data {
            path: path.to_path_buf(),
            line: n + 1,
            reason,
        };
        let values = line
            .split(',')
            .map(|v| v.trim().parse::<f32>())
            .collect::<std::result::Result<Vec<f32>, _>>()
            .map_err(|e| bad(format!("not a number: {e}")))?;
        if values.len() != DIGITS_FEATURES + 1 {
            return Err(bad(format!(
                "{} values, expected {}",
                values.len(),
                DIGITS_FEATURES + 1
            )));
        }
        let label = values[DIGITS_FEATURES];
        if label.fract() != 0.0 || !(0.0..DIGITS_CLASSES as f32).contains(&label) {
            return Err(bad(format!("label {label} is not a class 0..=9")));
        }
        x.extend(
            values[..DIGITS_FEATURES]
                .iter()
                .map(|p| p / DIGITS_MAX_PIXEL),
        );
        labels.push(label as u32);
    }
    Dataset::new(DIGITS_FEATURES, x, labels)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn toy(n: usize) -> Dataset {
        let x = (0..n * 2).map(|v| v as f32).collect();
        let labels = (0..n as u32).collect();
        Dataset::new(2, x, labels).unwrap()
    }

    #[test]
    fn split_is_seeded_disjoint_and_complete() {
        let d = toy(50);
        let a = d.split(0.2, 7).unwrap();
        assert_eq!(a, d.split(0.2, 7).unwrap());
        assert_ne!(a, d.split(0.2, 8).unwrap());
        assert_eq!((a.train.len(), a.test.len()), (40, 10));
        let mut all: Vec<u32> = a
            .train
            .labels()
            .iter()
            .chain(a.test.labels())
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..50).collect::<Vec<u32>>());
        // rows travel with their labels
        for (i, &l) in a.test.labels().iter().enumerate() {
            assert_eq!(a.test.row(i), &[2.0 * l as f32, 2.0 * l as f32 + 1.0]);
        }
    }

    #[test]
    fn rejects_ragged_rows() {
        assert!(Dataset::new(3, vec![0.0; 7], vec![0, 1]).is_err());
    }

    #[test]
    fn reads_the_digits_csv() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("weir-training-digits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("d.csv.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        let row: Vec<String> = (0..64).map(|i| (i % 17).to_string()).collect();
        writeln!(gz, "{},3", row.join(",")).unwrap();
        gz.finish().unwrap();
        let d = load_digits(&path).unwrap();
        assert_eq!((d.len(), d.labels()), (1, &[3u32][..]));
        assert_eq!(d.row(0)[16], 16.0 / 16.0);
        assert_eq!(d.row(0)[1], 1.0 / 16.0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A small seeded stand-in for the digits in unit tests: `rows` rows of `features` values in
    /// [0, 1], `classes` classes, each class a random prototype plus uniform noise of ±`noise`.
    pub(crate) fn synthetic(
        rows: usize,
        features: usize,
        classes: usize,
        noise: f32,
        seed: u64,
    ) -> Dataset {
        use rand::Rng;
        let mut rng = StdRng::seed_from_u64(seed);
        let protos: Vec<f32> = (0..classes * features)
            .map(|_| rng.random::<f32>())
            .collect();
        let mut x = Vec::with_capacity(rows * features);
        let mut labels = Vec::with_capacity(rows);
        for i in 0..rows {
            let c = i % classes;
            labels.push(c as u32);
            for f in 0..features {
                let v = protos[c * features + f] + rng.random_range(-noise..noise);
                x.push(v.clamp(0.0, 1.0));
            }
        }
        Dataset {
            features,
            x,
            labels,
        }
    }
}
