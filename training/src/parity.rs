//! `weir parity train`: parity models after "Parity Models: Erasure-Coded Resilience for Prediction
//! Serving Systems" (ParM, §4.3–4.4), and the degraded-mode accuracy of the subtraction decoder:
//! how often a reconstructed prediction is right.
//!
//! A parity model F_P has the deployed model's architecture (see [`OnnxModel::parity_copy`] for
//! the one difference, the dropped final Softmax) and is trained so that F_P(P) ≈ Σ_i F(X_i) for a
//! parity query P = encode(X_1, …, X_k); the decoder then rebuilds an unavailable F(X_j) as
//! F_P(P) − Σ_{i≠j} F(X_i).
//!
//! Decisions where the paper leaves room:
//! - Targets are the deployed model's outputs *as served* (probabilities when the graph ends in a
//!   Softmax, logits otherwise), because those are what the serving-side decoder subtracts.
//! - Coding groups are consecutive k-tuples of the shuffled training rows, ⌊N/k⌋ per epoch, as
//!   in the paper's repository.
//! - The concatenation encoder (§5.2.3) is trained with the same MSE target as the addition
//!   encoder, not the paper's cross-entropy to normalized multi-hot labels: one task-agnostic loss,
//!   and the decoder stays the plain subtraction.
//! - No best-checkpoint selection: the held-out split is what accuracy is reported on, so the last
//!   epoch's weights are kept.
//! - A_d depends on which held-out rows share a coding group, so the final report scores
//!   [`ParityOptions::groupings`] random groupings of the held-out rows and gives their mean and
//!   spread ([`DegradedAccuracy`]); one grouping alone can be a point or two off.

use std::path::PathBuf;

use candle_core::{Device, Tensor};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::classifier::accuracy;
use crate::data::{DataOptions, Dataset, Split};
use crate::error::{Result, TrainError};
use crate::model::OnnxModel;
use crate::schedule::{run_epochs, Progress, Schedule};

pub use weir_parm::Encoder;

/// What [`train_parity`] trains, from what, and where it writes the parity model.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityOptions {
    /// The deployed model (ONNX, one input `[N, features]`, one output `[N, outputs]`).
    pub deployed: PathBuf,
    /// Coding-group size k ≥ 2.
    pub k: usize,
    /// The encoder.
    pub encoder: Encoder,
    /// The data (the deployed model's training set) and its split.
    pub data: DataOptions,
    /// Where the parity model's ONNX file goes.
    pub out: PathBuf,
    /// Epochs, minibatch (in coding groups), learning rate, L2, seed.
    pub schedule: Schedule,
    /// Random groupings of the held-out rows A_d is scored over (default 100).
    pub groupings: usize,
    /// Which parity model of r this is (ParM, §7; default 0, the r = 1 one): its queries are
    /// coded with coefficients `(i + 1)^index` and its target is `Σ_i (i + 1)^index F(X_i)`
    /// (`weir_parm::code`).
    pub index: usize,
}

impl ParityOptions {
    /// A parity model for `deployed` with group size `k` and the addition encoder, trained on
    /// `digits.csv.gz` (20% test split, seed 0) with the paper's Adam lr 1e-3 and L2 1e-5, the
    /// repository's minibatch (64 groups for k = 2, 32 otherwise) and MNIST epochs (500), seed 0.
    /// The digits MLP trains in seconds, the LeNet-style CNN in minutes.
    pub fn new(
        deployed: impl Into<PathBuf>,
        k: usize,
        digits: impl Into<PathBuf>,
        out: impl Into<PathBuf>,
    ) -> Self {
        Self {
            deployed: deployed.into(),
            k,
            encoder: Encoder::Sum,
            data: DataOptions::digits(digits),
            out: out.into(),
            schedule: Schedule {
                epochs: 500,
                batch_size: if k == 2 { 64 } else { 32 },
                ..Schedule::default()
            },
            groupings: 100,
            index: 0,
        }
    }
}

/// A_d over several random groupings of the held-out rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DegradedAccuracy {
    /// Mean over the groupings.
    pub mean: f32,
    /// Sample standard deviation over the groupings (0 for one).
    pub std: f32,
    /// The worst grouping.
    pub min: f32,
    /// The best grouping.
    pub max: f32,
    /// Groupings scored.
    pub groupings: usize,
    /// Grouping `g` shuffled the rows with seed `seed + g`.
    pub seed: u64,
}

impl DegradedAccuracy {
    /// The mean, sample standard deviation, worst and best of per-grouping accuracies (grouping
    /// `g` seeded `seed + g`); `None` for no scores.
    fn of_scores(scores: &[f32], seed: u64) -> Option<Self> {
        if scores.is_empty() {
            return None;
        }
        let n = scores.len() as f32;
        let mean = scores.iter().sum::<f32>() / n;
        let var = scores.iter().map(|a| (a - mean).powi(2)).sum::<f32>() / (n - 1.0).max(1.0);
        Some(Self {
            mean,
            std: var.sqrt(),
            min: scores.iter().copied().fold(f32::INFINITY, f32::min),
            max: scores.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            groupings: scores.len(),
            seed,
        })
    }
}

/// As a percentage: `93.0 % ± 1.3 (90.2–95.8)`, mean ± standard deviation (worst–best).
impl std::fmt::Display for DegradedAccuracy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.1} % ± {:.1} ({:.1}–{:.1})",
            100.0 * self.mean,
            100.0 * self.std,
            100.0 * self.min,
            100.0 * self.max
        )
    }
}

/// The outcome of a parity-model training run.
#[derive(Debug, Clone, PartialEq)]
pub struct ParityReport {
    /// The ONNX file written (empty when nothing was written, see [`fit_parity`]).
    pub out: PathBuf,
    /// Coding-group size.
    pub k: usize,
    /// Mean MSE over the last epoch.
    pub final_loss: f32,
    /// A_a: the deployed model's held-out accuracy.
    pub deployed_accuracy: f32,
    /// A_d: held-out accuracy of the reconstructions, the mean over
    /// [`ParityOptions::groupings`] random groupings ([`Self::degraded`] has the spread).
    pub degraded_accuracy: f32,
    /// A_d's mean and spread over the groupings.
    pub degraded: DegradedAccuracy,
    /// Held-out rows scored.
    pub held_out: usize,
}

impl ParityReport {
    /// A_o(f) = (1 − f)·A_a + f·A_d: the overall accuracy when a fraction `f` of predictions is
    /// unavailable and reconstructed (paper Eq. 1).
    pub fn overall_accuracy(&self, f: f32) -> f32 {
        (1.0 - f) * self.deployed_accuracy + f * self.degraded_accuracy
    }
}

/// Loads the deployed model and the data, trains a parity model, writes it to `opts.out` (a copy
/// of the deployed graph with the trained weights), and reports; `progress` is called after every
/// epoch with the mean MSE and the held-out degraded-mode accuracy.
pub fn train_parity(opts: &ParityOptions, progress: impl FnMut(&Progress)) -> Result<ParityReport> {
    let deployed = OnnxModel::load(&opts.deployed)?;
    let split = opts.data.load()?;
    let (parity, mut report) = fit_parity_model(
        &deployed,
        opts.k,
        (opts.encoder, opts.index),
        &opts.schedule,
        &split,
        progress,
    )?;
    report.degraded = degraded_accuracy_lost(
        &deployed,
        &[(opts.index, &parity)],
        (opts.k, opts.encoder),
        &split.test,
        (opts.schedule.seed ^ 0x5eed, opts.groupings),
    )?;
    report.degraded_accuracy = report.degraded.mean;
    parity.save(&opts.out)?;
    report.out.clone_from(&opts.out);
    Ok(report)
}

/// Trains a parity model for `deployed` on `split.train` and returns it in memory.
pub fn fit_parity(
    deployed: &OnnxModel,
    k: usize,
    encoder: Encoder,
    schedule: &Schedule,
    split: &Split,
    progress: impl FnMut(&Progress),
) -> Result<(OnnxModel, ParityReport)> {
    fit_parity_model(deployed, k, (encoder, 0), schedule, split, progress)
}

/// Trains parity model `index` (of r, ParM §7) for `deployed` on `split.train`: queries coded
/// with its coefficients, target the outputs weighted the same way. Its report's A_d scores it
/// alone, one missing prediction per group.
pub fn fit_parity_model(
    deployed: &OnnxModel,
    k: usize,
    (encoder, index): (Encoder, usize),
    schedule: &Schedule,
    split: &Split,
    progress: impl FnMut(&Progress),
) -> Result<(OnnxModel, ParityReport)> {
    let train = &split.train;
    encoder
        .check(k, train.features())
        .map_err(|e| TrainError::Options(e.to_string()))?;
    let mut rng = StdRng::seed_from_u64(schedule.seed);
    let parity = deployed.parity_copy(&mut rng)?;
    let targets = deployed.forward(&train.all_rows()?)?.to_vec2::<f32>()?;
    let eval_seed = schedule.seed ^ 0x5eed;
    let final_loss = run_epochs(
        schedule,
        parity.vars(),
        train.len(),
        schedule.batch_size * k,
        |rows| {
            let groups: Vec<&[usize]> = rows.chunks_exact(k).collect();
            if groups.is_empty() {
                return Ok(None);
            }
            let p = encode_groups(encoder, index, train, &groups)?;
            let target = sum_outputs(&targets, index, &groups)?;
            let out = parity.forward(&p)?;
            Ok(Some(candle_nn::loss::mse(&out, &target)?))
        },
        || {
            score_one(
                deployed,
                (index, &parity),
                k,
                encoder,
                &split.test,
                eval_seed,
            )
        },
        progress,
    )?;
    let degraded = score_one(
        deployed,
        (index, &parity),
        k,
        encoder,
        &split.test,
        eval_seed,
    )?;
    let report = ParityReport {
        out: PathBuf::new(),
        k,
        final_loss,
        deployed_accuracy: accuracy(deployed, &split.test)?,
        degraded_accuracy: degraded,
        degraded: DegradedAccuracy {
            mean: degraded,
            std: 0.0,
            min: degraded,
            max: degraded,
            groupings: 1,
            seed: eval_seed,
        },
        held_out: split.test.len(),
    };
    Ok((parity, report))
}

/// A_d over `groupings` random groupings of `data` (grouping `g` seeded `seed + g`): the mean, the
/// standard deviation, the worst and the best.
pub fn degraded_accuracy_spread(
    deployed: &OnnxModel,
    parity: &OnnxModel,
    k: usize,
    encoder: Encoder,
    data: &Dataset,
    seed: u64,
    groupings: usize,
) -> Result<DegradedAccuracy> {
    degraded_accuracy_lost(
        deployed,
        &[(0, parity)],
        (k, encoder),
        data,
        (seed, groupings),
    )
}

/// A_d with `parities.len()` = m predictions of every group lost at once, decoded together from
/// the m parity models `(index, model)` (ParM, §7), over `groupings` random groupings of `data`
/// (grouping `g` seeded `seed + g`): every m-subset of every group is lost in turn and each
/// rebuilt prediction scored against its label.
pub fn degraded_accuracy_lost(
    deployed: &OnnxModel,
    parities: &[(usize, &OnnxModel)],
    (k, encoder): (usize, Encoder),
    data: &Dataset,
    (seed, groupings): (u64, usize),
) -> Result<DegradedAccuracy> {
    let outputs = deployed.forward(&data.all_rows()?)?.to_vec2::<f32>()?;
    let scores: Vec<f32> = (0..groupings.max(1) as u64)
        .map(|g| score_grouping(&outputs, parities, k, encoder, data, seed.wrapping_add(g)))
        .collect::<Result<_>>()?;
    DegradedAccuracy::of_scores(&scores, seed)
        .ok_or_else(|| TrainError::Options("no grouping scored".into()))
}

/// A_d: partitions `data` at random (seeded) into ⌊N/k⌋ k-tuples; for each
/// tuple and each j reconstructs F(X_j) as F_P(P) − Σ_{i≠j} F(X_i) and scores its argmax against
/// the true label; returns the fraction right over all k·⌊N/k⌋ reconstructions.
pub fn degraded_accuracy(
    deployed: &OnnxModel,
    parity: &OnnxModel,
    k: usize,
    encoder: Encoder,
    data: &Dataset,
    seed: u64,
) -> Result<f32> {
    score_one(deployed, (0, parity), k, encoder, data, seed)
}

/// A_d of parity model `(index, model)` alone, one grouping.
fn score_one(
    deployed: &OnnxModel,
    parity: (usize, &OnnxModel),
    k: usize,
    encoder: Encoder,
    data: &Dataset,
    seed: u64,
) -> Result<f32> {
    let outputs = deployed.forward(&data.all_rows()?)?.to_vec2::<f32>()?;
    score_grouping(&outputs, &[parity], k, encoder, data, seed)
}

/// The m-subsets of `0..k`, in lexicographic order.
fn subsets(k: usize, m: usize) -> Vec<Vec<usize>> {
    if m == 0 {
        return vec![Vec::new()];
    }
    if m > k {
        return Vec::new();
    }
    let mut out = subsets(k - 1, m);
    for mut s in subsets(k - 1, m - 1) {
        s.push(k - 1);
        out.push(s);
    }
    out
}

/// A_d of one random grouping (seeded) of `data`, whose deployed outputs are `outputs`, with as
/// many predictions per group lost at once as there are `parities`.
fn score_grouping(
    outputs: &[Vec<f32>],
    parities: &[(usize, &OnnxModel)],
    k: usize,
    encoder: Encoder,
    data: &Dataset,
    seed: u64,
) -> Result<f32> {
    encoder
        .check(k, data.features())
        .map_err(|e| TrainError::Options(e.to_string()))?;
    let lost = parities.len();
    if lost == 0 || lost > k {
        return Err(TrainError::Options(format!(
            "{lost} parity models for groups of {k}"
        )));
    }
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    let groups: Vec<&[usize]> = order.chunks_exact(k).collect();
    if groups.is_empty() {
        return Err(TrainError::Options(format!(
            "{} rows make no group of {k}",
            data.len()
        )));
    }
    let parity_out: Vec<(usize, Vec<Vec<f32>>)> = parities
        .iter()
        .map(|&(t, model)| {
            let out = model
                .forward(&encode_groups(encoder, t, data, &groups)?)?
                .to_vec2::<f32>()?;
            Ok((t, out))
        })
        .collect::<Result<_>>()?;
    let width = outputs.first().map_or(0, Vec::len);
    let slot = |index| weir_parm::Slot { index, rows: 1 };
    let (mut right, mut scored) = (0usize, 0usize);
    for (g, group) in groups.iter().enumerate() {
        let ys: Vec<(usize, &[f32])> = parity_out
            .iter()
            .map(|(t, out)| (*t, out[g].as_slice()))
            .collect();
        for missing in subsets(k, lost) {
            let known: Vec<(weir_parm::Slot, &[f32])> = (0..k)
                .filter(|i| !missing.contains(i))
                .map(|i| (slot(i), outputs[group[i]].as_slice()))
                .collect();
            let slots: Vec<weir_parm::Slot> = missing.iter().map(|&i| slot(i)).collect();
            let rebuilt = weir_parm::decode_erasures(k, width, &known, &ys, &slots)
                .ok_or_else(|| TrainError::Options("parity outputs too short".into()))?;
            for (&i, r) in missing.iter().zip(&rebuilt) {
                scored += 1;
                if argmax(r) == Some(data.labels()[group[i]] as usize) {
                    right += 1;
                }
            }
        }
    }
    Ok(right as f32 / scored.max(1) as f32)
}

fn argmax(v: &[f32]) -> Option<usize> {
    v.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
}

/// Parity model `index`'s queries of `groups` (row indices into `data`) as a `[groups,
/// features]` tensor.
fn encode_groups(
    encoder: Encoder,
    index: usize,
    data: &Dataset,
    groups: &[&[usize]],
) -> Result<Tensor> {
    let f = data.features();
    let mut p = vec![0.0f32; groups.len() * f];
    for (group, out) in groups.iter().zip(p.chunks_exact_mut(f)) {
        let rows: Vec<&[f32]> = group.iter().map(|&i| data.row(i)).collect();
        encoder.encode_weighted_into(&rows, &weir_parm::coefficients(index, group.len()), out);
    }
    Ok(Tensor::from_vec(p, (groups.len(), f), &Device::Cpu)?)
}

/// Σ_i c_i F(X_i) for each group (parity model `index`'s coefficients c), from the precomputed
/// outputs, as a `[groups, outputs]` tensor.
fn sum_outputs(outputs: &[Vec<f32>], index: usize, groups: &[&[usize]]) -> Result<Tensor> {
    let width = outputs.first().map_or(0, Vec::len);
    let mut sums = vec![0.0f32; groups.len() * width];
    for (group, sum) in groups.iter().zip(sums.chunks_exact_mut(width.max(1))) {
        let weights = weir_parm::coefficients(index, group.len());
        for (&i, w) in group.iter().zip(weights) {
            for (s, o) in sum.iter_mut().zip(&outputs[i]) {
                *s += w * o;
            }
        }
    }
    Ok(Tensor::from_vec(sums, (groups.len(), width), &Device::Cpu)?)
}

#[cfg(test)]
mod tests;
