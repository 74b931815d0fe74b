//! `weir train`: trains a deployed classifier (the MLP or the LeNet-style CNN of
//! [`crate::architecture`]) on the digits with cross-entropy and Adam, and writes it as ONNX.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::architecture::Architecture;
use crate::data::{DataOptions, Dataset, Split, DIGITS_CLASSES};
use crate::error::Result;
use crate::model::{Init, OnnxModel};
use crate::schedule::{run_epochs, Progress, Schedule};

/// What [`train_classifier`] trains, on what, and where it writes the model.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// The network.
    pub architecture: Architecture,
    /// The data and its split.
    pub data: DataOptions,
    /// Where the ONNX model goes.
    pub out: PathBuf,
    /// Epochs, minibatch, learning rate, L2, seed.
    pub schedule: Schedule,
}

impl TrainOptions {
    /// Trains `architecture` on `digits.csv.gz` into `out` with the default schedule (60 epochs,
    /// minibatch 32, Adam lr 1e-3, L2 1e-5, seed 0) and a 20% test split (seed 0).
    pub fn new(
        architecture: Architecture,
        digits: impl Into<PathBuf>,
        out: impl Into<PathBuf>,
    ) -> Self {
        Self {
            architecture,
            data: DataOptions::digits(digits),
            out: out.into(),
            schedule: Schedule::default(),
        }
    }
}

/// The outcome of a classifier training run.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainReport {
    /// The ONNX file written (empty when nothing was written, see [`fit_classifier`]).
    pub out: PathBuf,
    /// Trainable parameters.
    pub parameters: usize,
    /// Mean cross-entropy over the last epoch.
    pub final_loss: f32,
    /// Accuracy on the training rows.
    pub train_accuracy: f32,
    /// Accuracy on the held-out rows.
    pub test_accuracy: f32,
}

/// Loads the data, trains, writes the model to `opts.out`, and reports; `progress` is called after
/// every epoch with the mean loss and the held-out accuracy.
pub fn train_classifier(
    opts: &TrainOptions,
    progress: impl FnMut(&Progress),
) -> Result<TrainReport> {
    let split = opts.data.load()?;
    let (model, mut report) = fit_classifier(&opts.architecture, &opts.schedule, &split, progress)?;
    model.save(&opts.out)?;
    report.out.clone_from(&opts.out);
    Ok(report)
}

/// Trains `architecture` on `split.train` (cross-entropy on the logits before the final Softmax)
/// and returns the model in memory. The number of classes is 10 (digits) or more if a label says so.
pub fn fit_classifier(
    architecture: &Architecture,
    schedule: &Schedule,
    split: &Split,
    progress: impl FnMut(&Progress),
) -> Result<(OnnxModel, TrainReport)> {
    let train = &split.train;
    let classes = train
        .labels()
        .iter()
        .chain(split.test.labels())
        .map(|&l| l as usize + 1)
        .max()
        .unwrap_or(0)
        .max(DIGITS_CLASSES);
    let model = OnnxModel::from_proto(architecture.build(train.features(), classes)?)?;
    let mut rng = StdRng::seed_from_u64(schedule.seed);
    model.reinitialize(Init::Xavier, &mut rng)?;
    let final_loss = run_epochs(
        schedule,
        model.vars(),
        train.len(),
        schedule.batch_size,
        |rows| {
            let logits = model.scores(&train.rows(rows)?)?;
            let loss = candle_nn::loss::cross_entropy(&logits, &train.label_tensor(rows)?)?;
            Ok(Some(loss))
        },
        || accuracy(&model, &split.test),
        progress,
    )?;
    let report = TrainReport {
        out: PathBuf::new(),
        parameters: model.parameter_count(),
        final_loss,
        train_accuracy: accuracy(&model, train)?,
        test_accuracy: accuracy(&model, &split.test)?,
    };
    Ok((model, report))
}

/// Fraction of `data`'s rows whose argmax output is the label.
pub fn accuracy(model: &OnnxModel, data: &Dataset) -> Result<f32> {
    if data.is_empty() {
        return Ok(f32::NAN);
    }
    let predicted = model
        .forward(&data.all_rows()?)?
        .argmax(1)?
        .to_vec1::<u32>()?;
    let right = predicted
        .iter()
        .zip(data.labels())
        .filter(|(p, l)| p == l)
        .count();
    Ok(right as f32 / data.len() as f32)
}

/// Loads an ONNX classifier and measures its accuracy on the held-out split of `data`.
pub fn evaluate_classifier(model: &Path, data: &DataOptions) -> Result<f32> {
    accuracy(&OnnxModel::load(model)?, &data.load()?.test)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tests::synthetic;

    fn split() -> Split {
        synthetic(240, 64, 10, 0.35, 11).split(0.25, 1).unwrap()
    }

    fn schedule(epochs: usize) -> Schedule {
        Schedule {
            epochs,
            batch_size: 32,
            learning_rate: 1e-2,
            seed: 9,
            ..Schedule::default()
        }
    }

    #[test]
    fn training_lowers_the_loss_and_learns() {
        for arch in [Architecture::digits_mlp(), Architecture::LeNet] {
            let mut seen = Vec::new();
            let (_, report) =
                fit_classifier(&arch, &schedule(5), &split(), |p| seen.push(*p)).unwrap();
            assert_eq!(seen.len(), 5);
            assert_eq!((seen[0].epoch, seen[4].epoch, seen[4].epochs), (1, 5, 5));
            // the first epoch starts near ln 10 = 2.30 (near-uniform logits)
            assert!(seen[0].loss < 2.6 && seen[0].loss > 1.5, "{seen:?}");
            assert_eq!(seen[4].loss, report.final_loss);
            assert!(
                report.final_loss < 0.5 * seen[0].loss,
                "{}: {seen:?}",
                arch.name()
            );
            assert!(report.test_accuracy > 0.8, "{}: {report:?}", arch.name());
        }
    }

    #[test]
    fn same_seed_gives_bit_identical_weights() {
        let small = synthetic(120, 64, 10, 0.35, 11).split(0.2, 1).unwrap();
        let run = |seed| {
            let s = Schedule {
                seed,
                ..schedule(1)
            };
            let (m, r) = fit_classifier(&Architecture::LeNet, &s, &small, |_| ()).unwrap();
            let w: Vec<Vec<f32>> = m
                .params()
                .iter()
                .map(|(_, v)| v.flatten_all().unwrap().to_vec1::<f32>().unwrap())
                .collect();
            (w, r.final_loss.to_bits())
        };
        let a = run(9);
        assert_eq!(a, run(9));
        assert_ne!(a, run(10));
    }
}
