//! The training loop both trainers share: epochs of seeded, shuffled minibatches, each step Adam
//! with L2 regularization added to the gradient, and a progress report after every epoch.
//!
//! The optimizer is PyTorch's `Adam(lr, weight_decay=λ)`, which the paper trains with (§5.1: lr
//! 1e-3, L2 1e-5). candle-nn only has AdamW, whose decay is decoupled from the gradient; with its
//! decay at 0 and λ·w added to each gradient here, the update is the coupled one.

use candle_core::{Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use crate::error::{Result, TrainError};

/// How long and how fast to train; the defaults are the paper's (§5.1) where it states them.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Passes over the training rows.
    pub epochs: usize,
    /// Minibatch size: rows for a classifier, coding groups (of k rows each) for a parity model.
    pub batch_size: usize,
    /// Adam's learning rate (paper: 1e-3).
    pub learning_rate: f64,
    /// L2 regularization coefficient λ, added as λ·w to each gradient (paper: 1e-5).
    pub l2: f64,
    /// Seed of the weight initialization and of the minibatch order. The same seed and data give
    /// bit-identical weights.
    pub seed: u64,
}

impl Default for Schedule {
    fn default() -> Self {
        Self {
            epochs: 60,
            batch_size: 32,
            learning_rate: 1e-3,
            l2: 1e-5,
            seed: 0,
        }
    }
}

/// What a training run reports after each epoch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// The epoch just finished, 1-based.
    pub epoch: usize,
    /// Epochs in the run.
    pub epochs: usize,
    /// Mean training loss over the epoch (cross-entropy for a classifier, MSE for a parity model).
    pub loss: f32,
    /// Held-out accuracy after the epoch: the classifier's own, or for a parity model the
    /// degraded-mode accuracy of its reconstructions.
    pub accuracy: f32,
}

/// Runs `schedule.epochs` epochs over `rows` training rows. Each epoch shuffles the row indices
/// (with an RNG seeded by `schedule.seed + 1`, apart from the initialization's) and cuts them into steps of `rows_per_step`; `loss` turns a step's row indices into
/// the loss to descend (it may drop a remainder, e.g. rows that do not fill a coding group);
/// `evaluate` gives the held-out accuracy reported to `progress`. Returns the last epoch's loss.
pub(crate) fn run_epochs(
    schedule: &Schedule,
    vars: Vec<Var>,
    rows: usize,
    rows_per_step: usize,
    mut loss: impl FnMut(&[usize]) -> Result<Option<Tensor>>,
    mut evaluate: impl FnMut() -> Result<f32>,
    mut progress: impl FnMut(&Progress),
) -> Result<f32> {
    if schedule.epochs == 0 || rows_per_step == 0 || rows == 0 {
        return Err(TrainError::Options(format!(
            "nothing to train: {} epochs, {rows_per_step} rows a step, {rows} rows",
            schedule.epochs
        )));
    }
    let mut adam = AdamL2::new(vars, schedule.learning_rate, schedule.l2)?;
    let mut rng = StdRng::seed_from_u64(schedule.seed.wrapping_add(1));
    let mut order: Vec<usize> = (0..rows).collect();
    let mut last = f32::NAN;
    for epoch in 1..=schedule.epochs {
        order.shuffle(&mut rng);
        let (mut total, mut steps) = (0.0f64, 0usize);
        for step in order.chunks(rows_per_step) {
            if let Some(l) = loss(step)? {
                total += f64::from(l.to_scalar::<f32>()?);
                steps += 1;
                adam.step(&l)?;
            }
        }
        if steps == 0 {
            return Err(TrainError::Options(format!(
                "{rows} training rows make no full step"
            )));
        }
        last = (total / steps as f64) as f32;
        progress(&Progress {
            epoch,
            epochs: schedule.epochs,
            loss: last,
            accuracy: evaluate()?,
        });
    }
    Ok(last)
}

/// Adam over a fixed set of `Var`s, with coupled L2 regularization.
struct AdamL2 {
    adam: AdamW,
    vars: Vec<Var>,
    l2: f64,
}

impl AdamL2 {
    /// Adam with learning rate `lr` and L2 coefficient `l2` (β = 0.9, 0.999; ε = 1e-8).
    fn new(vars: Vec<Var>, lr: f64, l2: f64) -> Result<Self> {
        let params = ParamsAdamW {
            lr,
            weight_decay: 0.0,
            ..Default::default()
        };
        Ok(Self {
            adam: AdamW::new(vars.clone(), params)?,
            vars,
            l2,
        })
    }

    /// One update from the gradient of `loss` (plus λ·w).
    fn step(&mut self, loss: &Tensor) -> Result<()> {
        let mut grads = loss.backward()?;
        if self.l2 > 0.0 {
            for var in &self.vars {
                let decay = (var.as_tensor() * self.l2)?;
                let grad = match grads.get(var.as_tensor()) {
                    Some(g) => (g + decay)?,
                    None => decay,
                };
                grads.insert(var.as_tensor(), grad);
            }
        }
        Ok(self.adam.step(&grads)?)
    }
}
