//! Online configuration search: Kairos+ (Algorithm 1: bound order, bound and sub-configuration
//! pruning) and two baselines with the same sub-configuration pruning and no bound: random search
//! and simulated annealing (paper Figs. 2 and 11), to compare how many evaluations each needs.

use super::Candidate;

/// Marks every configuration of `ranked` that is a sub-configuration (component-wise `≤`) of `c`.
fn prune_subs(ranked: &[Candidate], c: &[u32], pruned: &mut [bool]) {
    for (cand, p) in ranked.iter().zip(pruned.iter_mut()) {
        if cand.counts.iter().zip(c).all(|(a, b)| a <= b) {
            *p = true;
        }
    }
}

/// What a Kairos+ search did.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    /// Index (into the ranking) of the best evaluated configuration.
    pub best: usize,
    /// Its measured throughput.
    pub best_qps: f64,
    /// Every evaluation, in order: (ranking index, measured QPS).
    pub evaluated: Vec<(usize, f64)>,
}

/// Kairos+ (Algorithm 1): evaluate configurations online in upper-bound order; after
/// each evaluation drop every configuration whose bound is `≤` the best measured throughput and
/// every sub-configuration (component-wise `≤`) of the evaluated one. Stops when none remain.
/// `ranked` must be sorted by bound, highest first (as [`super::rank`] returns it). `None` if empty.
pub fn kairos_plus(
    ranked: &[Candidate],
    mut evaluate: impl FnMut(&[u32]) -> f64,
) -> Option<SearchOutcome> {
    let mut pruned = vec![false; ranked.len()];
    let mut out: Option<SearchOutcome> = None;
    for i in 0..ranked.len() {
        if pruned[i] {
            continue;
        }
        let best_qps = out.as_ref().map_or(f64::NEG_INFINITY, |o| o.best_qps);
        if ranked[i].upper_bound <= best_qps {
            break; // sorted: every later bound is lower too
        }
        let q = evaluate(&ranked[i].counts);
        let o = out.get_or_insert(SearchOutcome {
            best: i,
            best_qps: q,
            evaluated: Vec::new(),
        });
        o.evaluated.push((i, q));
        if q > o.best_qps {
            o.best = i;
            o.best_qps = q;
        }
        prune_subs(ranked, &ranked[i].counts, &mut pruned);
    }
    out
}

/// The random-search baseline of the paper's search comparison (Fig. 11):
/// configurations in a seeded random order, with the same sub-configuration pruning as Kairos+
/// but no bound. Stops after `max_evaluations` or when none remain; returns every evaluation as
/// (ranking index, QPS) in order. Count evaluations until a target with
/// [`evaluations_to_reach`].
pub fn random_search(
    ranked: &[Candidate],
    seed: u64,
    max_evaluations: usize,
    mut evaluate: impl FnMut(&[u32]) -> f64,
) -> Vec<(usize, f64)> {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let mut order: Vec<usize> = (0..ranked.len()).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    let mut pruned = vec![false; ranked.len()];
    let mut out = Vec::new();
    for i in order {
        if out.len() >= max_evaluations {
            break;
        }
        if pruned[i] {
            continue;
        }
        out.push((i, evaluate(&ranked[i].counts)));
        prune_subs(ranked, &ranked[i].counts, &mut pruned);
    }
    out
}

/// The simulated-annealing baseline (paper Fig. 2 explores with it): from a seeded
/// random start, move to a random neighbour (one instance of one type more or fewer, staying
/// within the ranking, i.e. within budget with a base instance), accepting a worse one with
/// probability `exp(Δ / (T · current))`, `T` starting at 0.2 and cooling by 0.95 per evaluation.
/// Only neighbours neither evaluated nor pruned (sub-configurations of evaluated ones) are
/// candidates; when none is left, it restarts at a random configuration not yet evaluated or
/// pruned. Returns every evaluation in order.
pub fn simulated_annealing(
    ranked: &[Candidate],
    seed: u64,
    max_evaluations: usize,
    mut evaluate: impl FnMut(&[u32]) -> f64,
) -> Vec<(usize, f64)> {
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let index: HashMap<&[u32], usize> = ranked
        .iter()
        .enumerate()
        .map(|(i, c)| (c.counts.as_slice(), i))
        .collect();
    let mut pruned = vec![false; ranked.len()];
    let mut known: HashMap<usize, f64> = HashMap::new();
    let mut out = Vec::new();
    let mut temperature = 0.2;
    let mut current: Option<(usize, f64)> = None;
    while out.len() < max_evaluations {
        let fresh = |i: &usize| !pruned[*i] && !known.contains_key(i);
        let next = match current {
            Some((c, _)) => {
                let counts = &ranked[c].counts;
                let mut moves: Vec<usize> = (0..counts.len())
                    .flat_map(|t| [(t, 1i64), (t, -1)])
                    .filter_map(|(t, d)| {
                        let mut n = counts.clone();
                        n[t] = u32::try_from(i64::from(n[t]) + d).ok()?;
                        index.get(n.as_slice()).copied()
                    })
                    .filter(fresh)
                    .collect();
                if moves.is_empty() {
                    None
                } else {
                    Some(moves.swap_remove(rng.random_range(0..moves.len())))
                }
            }
            None => None,
        };
        let next = match next {
            Some(n) => n,
            None => {
                let left: Vec<usize> = (0..ranked.len()).filter(fresh).collect();
                if left.is_empty() {
                    break;
                }
                current = None;
                left[rng.random_range(0..left.len())]
            }
        };
        let q = evaluate(&ranked[next].counts);
        out.push((next, q));
        known.insert(next, q);
        prune_subs(ranked, &ranked[next].counts, &mut pruned);
        let accept = match current {
            None => true,
            Some((_, cur)) if q >= cur => true,
            Some((_, cur)) => {
                rng.random::<f64>() < ((q - cur) / (temperature * cur.max(1e-9))).exp()
            }
        };
        if accept {
            current = Some((next, q));
        }
        temperature *= 0.95;
    }
    out
}

/// How many evaluations a search needed before one reached `target` QPS (`None`: never).
pub fn evaluations_to_reach(evaluated: &[(usize, f64)], target: f64) -> Option<usize> {
    evaluated.iter().position(|e| e.1 >= target).map(|i| i + 1)
}
