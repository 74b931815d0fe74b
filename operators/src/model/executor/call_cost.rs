//! The cost of a padded node's calls, learnt from its own calls, and the choice it drives: which
//! jobs of a batch share one call padded to their longest, and which run in calls of their own.
//!
//! **Model.** A call of `rows` rows padded to length `len` takes `t ≈ a + b·rows + c·rows·len`:
//! a fixed cost per call `a` (ONNX Runtime's launch, input binding and output allocation, weir's
//! own per-call work), a cost per row `b` (what does not grow with the length: a pooled output,
//! answering a job) and a cost per padded position `c` (the model's work on a sequence, linear in
//! it for embeddings, convolutions and feed-forward layers; the padding copy and the cut back).
//! It is fitted by least squares over the node's recent calls, each weighted `DECAY^age` (the
//! weight halves in about 350 calls), with a small ridge so that a fit over too few kinds of call
//! stays finite. Every call is timed where it runs, padding and cut back included
//! (`sessions.rs`). A model whose work grows faster than its length (attention) is fitted by its
//! slope at the lengths it serves; the model underestimates the padded call then, so it pads a
//! little more than it should, never less.
//!
//! **Choice.** The jobs, sorted by length, are cut into consecutive groups, one call each padded
//! to the group's longest, minimising the predicted time of all the calls (dynamic programming
//! over the sorted jobs, `O(n²)` for a batch of `n ≤ max_size` jobs). Consecutive groups lose
//! nothing: a group's cost depends only on its rows and its longest job, so exchanging a long job
//! of an early group with a shorter one of a later group never raises either group's longest.
//! The `b·rows` terms add up to `b` times all the rows in every cut, so the choice rests on `a`
//! (fewer calls) against `c` (fewer padded positions): one padded call when `a` outweighs the
//! padding it adds, calls of near lengths otherwise. A tie keeps the fewer calls.
//!
//! **Cold start.** Until the node has run [`EXPLORE_CALLS`] batches of mixed lengths each way,
//! batches alternate, deterministically, between one padded call and one call per length, so the
//! fit sees both forms. After that one mixed batch in [`EXPLORE_EVERY`] takes the form the model
//! did not choose, so the fit keeps seeing both and follows a cost that drifts (another load on
//! the machine, another mix of lengths).

/// Weight of a call `k` calls old: `DECAY^k` (halves in about 350 calls).
const DECAY: f64 = 0.998;

/// Ridge added to the fit's diagonal, relative to each diagonal term.
const RIDGE: f64 = 1e-6;

/// Batches of mixed lengths run each way (one padded call, one call per length) before the model
/// decides.
pub const EXPLORE_CALLS: u64 = 8;

/// After the cold start, one mixed batch in this many takes the form the model did not choose.
pub const EXPLORE_EVERY: u64 = 32;

/// The fitted cost of a node's calls: `t ≈ a + b·rows + c·rows·len` (module docs).
#[derive(Debug, Clone, Default)]
pub struct CallCost {
    /// `Σ w·φφᵀ` over calls, `φ = (1, rows, rows·len)`.
    gram: [[f64; 3]; 3],
    /// `Σ w·φ·t`, `t` in microseconds.
    moments: [f64; 3],
    /// Calls recorded.
    calls: u64,
}

/// The fitted coefficients, microseconds: per call, per row, per padded position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coefficients {
    /// Per call.
    pub per_call: f64,
    /// Per row.
    pub per_row: f64,
    /// Per padded position (row × length).
    pub per_position: f64,
}

impl Coefficients {
    /// Predicted microseconds of one call of `rows` rows padded to `len`.
    pub fn call(&self, rows: usize, len: usize) -> f64 {
        let rows = rows as f64;
        self.per_call + self.per_row * rows + self.per_position * rows * len as f64
    }
}

impl CallCost {
    /// Adds a call of `rows` rows padded to `len` that took `micros`.
    pub fn record(&mut self, rows: usize, len: usize, micros: f64) {
        if rows == 0 || !micros.is_finite() || micros < 0.0 {
            return;
        }
        let phi = [1.0, rows as f64, rows as f64 * len as f64];
        for i in 0..3 {
            self.moments[i] = self.moments[i] * DECAY + phi[i] * micros;
            for j in 0..3 {
                self.gram[i][j] = self.gram[i][j] * DECAY + phi[i] * phi[j];
            }
        }
        self.calls += 1;
    }

    /// Calls recorded.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// The fit, or `None` before any call (or for a fit that cannot be solved).
    pub fn coefficients(&self) -> Option<Coefficients> {
        if self.calls == 0 {
            return None;
        }
        // Each diagonal term grows by its own share, so the ridge does not depend on the
        // features' scales (a call counts 1, a padded position up to thousands).
        let mut a = self.gram;
        for (i, row) in a.iter_mut().enumerate() {
            row[i] *= 1.0 + RIDGE;
        }
        let [per_call, per_row, per_position] = solve(a, self.moments)?;
        Some(Coefficients {
            per_call,
            per_row,
            per_position,
        })
    }
}

/// Solves the 3 × 3 system `a·x = b` by Gaussian elimination with partial pivoting; `None` when
/// it is singular or the answer is not finite.
fn solve(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> Option<[f64; 3]> {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..3 {
            let f = a[row][col] / a[col][col];
            let pivot_row = a[col];
            for (x, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let rest: f64 = (row + 1..3).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Cuts jobs of `(rows, length)` into groups, one call each, minimising the calls' predicted
/// time under `cost` (module docs). Returns groups of indices into `jobs`, each sorted by
/// length and the groups in ascending length.
pub fn cheapest_groups(jobs: &[(usize, usize)], cost: &Coefficients) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].1);
    // The b·rows terms are the same in every cut; negative fitted terms count as none.
    let (per_call, per_position) = (cost.per_call.max(0.0), cost.per_position.max(0.0));
    let n = order.len();
    // rows_before[i]: rows of the first i sorted jobs.
    let mut rows_before = vec![0usize; n + 1];
    for (k, &i) in order.iter().enumerate() {
        rows_before[k + 1] = rows_before[k] + jobs[i].0;
    }
    // best[j]: least cost of the first j sorted jobs; from[j]: where its last group starts.
    // Trying the longest last group first and keeping a later one only when strictly cheaper
    // makes a tie keep the fewer calls.
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0.0;
    for j in 1..=n {
        let longest = jobs[order[j - 1]].1 as f64;
        for i in 0..j {
            let rows = (rows_before[j] - rows_before[i]) as f64;
            let c = best[i] + per_call + per_position * rows * longest;
            if c < best[j] {
                best[j] = c;
                from[j] = i;
            }
        }
    }
    let mut groups = Vec::new();
    let mut j = n;
    while j > 0 {
        let i = from[j];
        groups.push(order[i..j].to_vec());
        j = i;
    }
    groups.reverse();
    groups
}

/// One call per distinct length, in ascending length.
pub fn groups_by_length(jobs: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| jobs[i].1);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for i in order {
        match groups.last_mut() {
            Some(g) if jobs[g[0]].1 == jobs[i].1 => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    groups
}

/// How a batch of mixed lengths was cut, for the node's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// One call, padded to the longest.
    Padded,
    /// Several calls of nearer lengths.
    Split,
}

/// A padded node's cost model and the cold-start and exploration schedule around it.
#[derive(Debug, Default)]
pub struct PadChooser {
    cost: CallCost,
    /// Mixed batches run as one padded call and as one call per length while exploring.
    explored_padded: u64,
    explored_split: u64,
    /// Mixed batches decided since the cold start ended.
    decided: u64,
}

impl PadChooser {
    /// Adds a call of `rows` rows padded to `len` that took `micros` (any call of the node).
    pub fn record(&mut self, rows: usize, len: usize, micros: f64) {
        self.cost.record(rows, len, micros);
    }

    /// The fit now.
    pub fn coefficients(&self) -> Option<Coefficients> {
        self.cost.coefficients()
    }

    /// Cuts a batch of jobs of `(rows, length)` into calls (indices into `jobs`, groups in
    /// ascending length), and says how. A batch of one length is one call.
    pub fn choose(&mut self, jobs: &[(usize, usize)]) -> (Vec<Vec<usize>>, Decision) {
        let by_length = groups_by_length(jobs);
        if by_length.len() <= 1 {
            return (by_length, Decision::Padded);
        }
        let padded = || {
            let mut all: Vec<usize> = by_length.iter().flatten().copied().collect();
            all.sort_by_key(|&i| jobs[i].1);
            vec![all]
        };
        let explore_padded = self.explored_padded <= self.explored_split;
        let cold = self.explored_padded.min(self.explored_split) < EXPLORE_CALLS;
        let fit = self.cost.coefficients();
        let groups = match fit {
            Some(fit) if !cold => {
                self.decided += 1;
                let chosen = cheapest_groups(jobs, &fit);
                if self.decided.is_multiple_of(EXPLORE_EVERY) {
                    if chosen.len() == 1 {
                        by_length.clone()
                    } else {
                        padded()
                    }
                } else {
                    chosen
                }
            }
            _ if explore_padded => {
                self.explored_padded += 1;
                padded()
            }
            _ => {
                self.explored_split += 1;
                by_length.clone()
            }
        };
        let decision = if groups.len() == 1 {
            Decision::Padded
        } else {
            Decision::Split
        };
        (groups, decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(per_call: f64, per_position: f64) -> Coefficients {
        Coefficients {
            per_call,
            per_row: 3.0,
            per_position,
        }
    }

    #[test]
    fn the_fit_recovers_the_coefficients_it_was_fed() {
        let mut c = CallCost::default();
        let truth = Coefficients {
            per_call: 40.0,
            per_row: 5.0,
            per_position: 0.25,
        };
        for k in 0..200usize {
            let rows = 1 + k % 8;
            let len = 8 + (k * 37) % 121;
            c.record(rows, len, truth.call(rows, len));
        }
        let fit = c.coefficients().unwrap();
        assert!((fit.per_call - 40.0).abs() < 0.1, "{fit:?}");
        assert!((fit.per_row - 5.0).abs() < 0.1, "{fit:?}");
        assert!((fit.per_position - 0.25).abs() < 0.001, "{fit:?}");
    }

    #[test]
    fn a_large_fixed_cost_pads_everything_into_one_call() {
        let jobs = [(1, 10), (1, 120), (1, 60), (1, 64)];
        let groups = cheapest_groups(&jobs, &cost(1000.0, 0.01));
        assert_eq!(groups, vec![vec![0, 2, 3, 1]]);
    }

    #[test]
    fn no_fixed_cost_runs_each_length_alone() {
        let jobs = [(1, 10), (1, 120), (1, 60), (1, 10)];
        let groups = cheapest_groups(&jobs, &cost(0.0, 1.0));
        assert_eq!(groups, vec![vec![0, 3], vec![2], vec![1]]);
    }

    #[test]
    fn near_lengths_share_a_call_and_far_ones_do_not() {
        // Per call 50 µs, 1 µs per padded position: 100 and 104 together cost 50 + 208 against
        // 50 + 100 + 50 + 104 apart; 10 joining them would add 94 padded positions > 50.
        let jobs = [(1, 100), (1, 10), (1, 104)];
        let groups = cheapest_groups(&jobs, &cost(50.0, 1.0));
        assert_eq!(groups, vec![vec![1], vec![0, 2]]);
        // The chosen cut is never predicted dearer than one padded call or one call per job.
        let fit = cost(50.0, 1.0);
        let total = |gs: &[Vec<usize>]| {
            gs.iter()
                .map(|g| {
                    let rows = g.iter().map(|&i| jobs[i].0).sum();
                    let len = g.iter().map(|&i| jobs[i].1).max().unwrap();
                    fit.call(rows, len)
                })
                .sum::<f64>()
        };
        assert!(total(&groups) <= total(&[vec![0, 1, 2]]));
        assert!(total(&groups) <= total(&[vec![0], vec![1], vec![2]]));
    }

    #[test]
    fn a_tie_keeps_the_fewer_calls() {
        // Lengths 10 and 20, 10 µs per call and 1 per position: apart (10 + 10) + (10 + 20) =
        // 50, together 10 + 2·20 = 50.
        let groups = cheapest_groups(&[(1, 10), (1, 20)], &cost(10.0, 1.0));
        assert_eq!(groups, vec![vec![0, 1]]);
    }

    #[test]
    fn rows_of_multi_row_jobs_count() {
        // A job of 4 rows at 20 joining one at 100 pads 320 positions.
        let jobs = [(4, 20), (1, 100)];
        assert_eq!(
            cheapest_groups(&jobs, &cost(300.0, 1.0)),
            vec![vec![0], vec![1]]
        );
        assert_eq!(cheapest_groups(&jobs, &cost(330.0, 1.0)), vec![vec![0, 1]]);
    }

    #[test]
    fn cold_start_alternates_then_the_model_decides_and_keeps_exploring() {
        let mut chooser = PadChooser::default();
        let jobs = [(1, 10), (1, 100)];
        // One length: one call, nothing explored.
        assert_eq!(
            chooser.choose(&[(1, 7), (1, 7)]),
            (vec![vec![0, 1]], Decision::Padded)
        );
        let mut seen = Vec::new();
        for _ in 0..2 * EXPLORE_CALLS {
            let (groups, decision) = chooser.choose(&jobs);
            // Feed the truth: no fixed cost, so split is cheaper.
            for g in &groups {
                let len = g.iter().map(|&i| jobs[i].1).max().unwrap();
                chooser.record(g.len(), len, 1.0 * (g.len() * len) as f64 + 2.0);
            }
            seen.push(decision);
        }
        let expected: Vec<Decision> = (0..2 * EXPLORE_CALLS)
            .map(|k| {
                if k % 2 == 0 {
                    Decision::Padded
                } else {
                    Decision::Split
                }
            })
            .collect();
        assert_eq!(seen, expected);
        // Decided now: split, except one batch in EXPLORE_EVERY, padded.
        let decisions: Vec<Decision> = (0..EXPLORE_EVERY)
            .map(|_| chooser.choose(&jobs).1)
            .collect();
        let padded = decisions.iter().filter(|d| **d == Decision::Padded).count();
        assert_eq!(padded, 1);
        assert_eq!(decisions.last(), Some(&Decision::Padded));
    }
}
