//! Two more baselines for the search-cost comparison (paper Figs. 10–11): a
//! genetic algorithm and a Bayesian-optimisation-like search (Ribbon's approach: a Gaussian-process
//! surrogate with an upper-confidence-bound acquisition). Both share Kairos+'s evaluator interface
//! and its sub-configuration pruning (a configuration component-wise `≤` an evaluated one is never
//! evaluated) and neither uses the upper bound. Each returns every evaluation as (ranking index,
//! QPS) in order; count evaluations to a target with [`super::evaluations_to_reach`].

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::Candidate;

/// Evaluations, pruning and the index of configurations shared by both searches.
struct Space<'a, F> {
    ranked: &'a [Candidate],
    index: HashMap<&'a [u32], usize>,
    pruned: Vec<bool>,
    known: HashMap<usize, f64>,
    evaluated: Vec<(usize, f64)>,
    evaluate: F,
}

impl<'a, F: FnMut(&[u32]) -> f64> Space<'a, F> {
    fn new(ranked: &'a [Candidate], evaluate: F) -> Self {
        Space {
            index: ranked
                .iter()
                .enumerate()
                .map(|(i, c)| (c.counts.as_slice(), i))
                .collect(),
            pruned: vec![false; ranked.len()],
            known: HashMap::new(),
            evaluated: Vec::new(),
            ranked,
            evaluate,
        }
    }

    /// Neither evaluated nor pruned.
    fn fresh(&self, i: usize) -> bool {
        !self.pruned[i] && !self.known.contains_key(&i)
    }

    fn fresh_all(&self) -> Vec<usize> {
        (0..self.ranked.len()).filter(|&i| self.fresh(i)).collect()
    }

    fn eval(&mut self, i: usize) -> f64 {
        let q = (self.evaluate)(&self.ranked[i].counts);
        self.evaluated.push((i, q));
        self.known.insert(i, q);
        let c = &self.ranked[i].counts;
        for (cand, p) in self.ranked.iter().zip(self.pruned.iter_mut()) {
            if cand.counts.iter().zip(c).all(|(a, b)| a <= b) {
                *p = true;
            }
        }
        q
    }

    fn random_fresh(&self, rng: &mut StdRng) -> Option<usize> {
        let left = self.fresh_all();
        (!left.is_empty()).then(|| left[rng.random_range(0..left.len())])
    }
}

/// Population of the genetic search.
const POPULATION: usize = 8;
/// Per-type chance of a ±1 mutation of a child.
const MUTATION: f64 = 0.3;
/// Children drawn before a fresh random configuration replaces an unusable one.
const TRIES: usize = 30;

/// A steady-state genetic algorithm over instance counts: a seeded random population of
/// [`POPULATION`] configurations; each step picks two parents by binary tournament, takes each
/// type's count from either parent (uniform crossover), adds ±1 to each count with probability
/// [`MUTATION`], and evaluates the child if it is within the space (budget, a base instance) and
/// fresh (neither evaluated nor pruned); a child fitter than the population's worst replaces it.
/// After [`TRIES`] unusable children a fresh random configuration is evaluated instead. Stops after
/// `max_evaluations` or when nothing fresh is left.
pub fn genetic_search(
    ranked: &[Candidate],
    seed: u64,
    max_evaluations: usize,
    evaluate: impl FnMut(&[u32]) -> f64,
) -> Vec<(usize, f64)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut space = Space::new(ranked, evaluate);
    let mut population: Vec<(usize, f64)> = Vec::new();
    while population.len() < POPULATION && space.evaluated.len() < max_evaluations {
        let Some(i) = space.random_fresh(&mut rng) else {
            break;
        };
        population.push((i, space.eval(i)));
    }
    while space.evaluated.len() < max_evaluations && !population.is_empty() {
        let pick = |rng: &mut StdRng| {
            let a = population[rng.random_range(0..population.len())];
            let b = population[rng.random_range(0..population.len())];
            if a.1 >= b.1 {
                a.0
            } else {
                b.0
            }
        };
        let mut child = None;
        for _ in 0..TRIES {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            let counts: Vec<u32> = ranked[a]
                .counts
                .iter()
                .zip(&ranked[b].counts)
                .map(|(&x, &y)| {
                    let n = if rng.random::<bool>() { x } else { y };
                    if rng.random::<f64>() < MUTATION {
                        if rng.random::<bool>() {
                            n + 1
                        } else {
                            n.saturating_sub(1)
                        }
                    } else {
                        n
                    }
                })
                .collect();
            if let Some(&i) = space.index.get(counts.as_slice()) {
                if space.fresh(i) {
                    child = Some(i);
                    break;
                }
            }
        }
        let Some(i) = child.or_else(|| space.random_fresh(&mut rng)) else {
            break;
        };
        let q = space.eval(i);
        if let Some(worst) = population
            .iter()
            .enumerate()
            .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
            .map(|(k, _)| k)
        {
            if q > population[worst].1 {
                population[worst] = (i, q);
            }
        }
    }
    space.evaluated
}

/// Initial random evaluations of the Bayesian-optimisation-like search.
const BO_INITIAL: usize = 4;
/// Candidates scored by the acquisition per step (a random sample of the fresh ones).
const BO_CANDIDATES: usize = 200;
/// Length scale of the squared-exponential kernel, on counts scaled to 0..1 per type.
const BO_LENGTH: f64 = 0.3;
/// Exploration weight of the upper confidence bound `μ + κσ`.
const BO_KAPPA: f64 = 2.0;

/// A Bayesian-optimisation-like search (Ribbon's baseline family): after [`BO_INITIAL`] seeded
/// random evaluations, fit a Gaussian process (squared-exponential kernel on each type's count
/// scaled by its largest count in the space, length [`BO_LENGTH`], targets standardised, small
/// noise) to every evaluation so far, score a random sample of [`BO_CANDIDATES`] fresh
/// configurations by `μ + κσ` ([`BO_KAPPA`]) and evaluate the best. Stops after `max_evaluations`
/// or when nothing fresh is left.
pub fn bayesian_search(
    ranked: &[Candidate],
    seed: u64,
    max_evaluations: usize,
    evaluate: impl FnMut(&[u32]) -> f64,
) -> Vec<(usize, f64)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut space = Space::new(ranked, evaluate);
    let dims = ranked.first().map_or(0, |c| c.counts.len());
    let scale: Vec<f64> = (0..dims)
        .map(|t| f64::from(ranked.iter().map(|c| c.counts[t]).max().unwrap_or(1)).max(1.0))
        .collect();
    let point = |i: usize| -> Vec<f64> {
        ranked[i]
            .counts
            .iter()
            .zip(&scale)
            .map(|(&n, s)| f64::from(n) / s)
            .collect()
    };
    let kernel = |a: &[f64], b: &[f64]| {
        let d2: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        (-d2 / (2.0 * BO_LENGTH * BO_LENGTH)).exp()
    };
    while space.evaluated.len() < max_evaluations {
        let mut fresh = space.fresh_all();
        if fresh.is_empty() {
            break;
        }
        if space.evaluated.len() < BO_INITIAL {
            let i = fresh[rng.random_range(0..fresh.len())];
            space.eval(i);
            continue;
        }
        let xs: Vec<Vec<f64>> = space.evaluated.iter().map(|e| point(e.0)).collect();
        let ys: Vec<f64> = space.evaluated.iter().map(|e| e.1).collect();
        let n = ys.len() as f64;
        let mean = ys.iter().sum::<f64>() / n;
        let sd = (ys.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n)
            .sqrt()
            .max(1e-9);
        let y: Vec<f64> = ys.iter().map(|v| (v - mean) / sd).collect();
        let k: Vec<Vec<f64>> = xs
            .iter()
            .enumerate()
            .map(|(a, xa)| {
                xs.iter()
                    .enumerate()
                    .map(|(b, xb)| kernel(xa, xb) + if a == b { 1e-4 } else { 0.0 })
                    .collect()
            })
            .collect();
        let Some(l) = cholesky(&k) else {
            // Numerically singular (should not happen with the jitter): fall back to random.
            let i = fresh[rng.random_range(0..fresh.len())];
            space.eval(i);
            continue;
        };
        let alpha = solve_upper_t(&l, &solve_lower(&l, &y));
        if fresh.len() > BO_CANDIDATES {
            // A partial Fisher–Yates shuffle: the first BO_CANDIDATES are a random sample.
            for s in 0..BO_CANDIDATES {
                let r = rng.random_range(s..fresh.len());
                fresh.swap(s, r);
            }
            fresh.truncate(BO_CANDIDATES);
        }
        let best = fresh
            .iter()
            .map(|&i| {
                let x = point(i);
                let ks: Vec<f64> = xs.iter().map(|xa| kernel(xa, &x)).collect();
                let mu: f64 = ks.iter().zip(&alpha).map(|(a, b)| a * b).sum();
                let v = solve_lower(&l, &ks);
                let var = (1.0 - v.iter().map(|z| z * z).sum::<f64>()).max(0.0);
                (i, mu + BO_KAPPA * var.sqrt())
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i);
        match best {
            Some(i) => {
                space.eval(i);
            }
            None => break,
        }
    }
    space.evaluated
}

/// Lower-triangular `L` with `L Lᵀ = a` (`a` symmetric positive definite); `None` otherwise.
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d <= 0.0 {
                    return None;
                }
                l[i][j] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// `x` with `L x = b`.
fn solve_lower(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let mut x = vec![0.0; b.len()];
    for i in 0..b.len() {
        let s: f64 = (0..i).map(|k| l[i][k] * x[k]).sum();
        x[i] = (b[i] - s) / l[i][i];
    }
    x
}

/// `x` with `Lᵀ x = b`.
fn solve_upper_t(l: &[Vec<f64>], b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k][i] * x[k]).sum();
        x[i] = (b[i] - s) / l[i][i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cholesky_solves_a_small_system() {
        let a = vec![
            vec![4.0, 2.0, 0.4],
            vec![2.0, 3.0, 0.5],
            vec![0.4, 0.5, 2.0],
        ];
        let l = cholesky(&a).unwrap();
        let b = [1.0, 2.0, 3.0];
        let x = solve_upper_t(&l, &solve_lower(&l, &b));
        for (row, bi) in a.iter().zip(b) {
            let ax: f64 = row.iter().zip(&x).map(|(p, q)| p * q).sum();
            assert!((ax - bi).abs() < 1e-9);
        }
        assert!(cholesky(&[vec![0.0]]).is_none());
    }
}
