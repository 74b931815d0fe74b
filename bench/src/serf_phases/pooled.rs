//! SERF's mean latency against the best fixed configuration's, pooled over runs, and how sure the
//! pooled ratio is: a 95 % interval from resampling the runs.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_serf::config::Config;

use super::runs::PhasesRun;
use super::Setup;

/// One set-up's latencies in one run and scope, summed: what pooling across runs needs.
#[derive(Debug, Clone, Copy)]
struct ScopeTotal {
    setup: Setup,
    sum_ms: f64,
    answered: usize,
    failed: usize,
}

/// Every set-up's [`ScopeTotal`] in `run` for scope `phase` (`None`: whole run).
fn scope_totals(run: &PhasesRun, phase: Option<usize>, settled: bool) -> Vec<ScopeTotal> {
    (0..run.setups.len())
        .map(|i| {
            let (sum_ms, answered) = run
                .latencies(i, phase, settled)
                .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
            ScopeTotal {
                setup: run.setups[i].setup,
                sum_ms,
                answered,
                failed: run.failed(i, phase, settled),
            }
        })
        .collect()
}

/// Which set-up's mean the report pools over runs, and against which fixed configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// SERF against every fixed configuration.
    Serf,
    /// The control [`Setup::SerfThreads`] against the fixed configurations with its threads.
    Control(usize),
    /// SERF under another utilisation cap ([`Setup::SerfCapped`]) against every fixed configuration.
    Capped(u16),
}

impl Compared {
    fn numerator(self) -> Setup {
        match self {
            Compared::Serf => Setup::Serf,
            Compared::Control(threads) => Setup::SerfThreads(threads),
            Compared::Capped(permille) => Setup::SerfCapped(permille),
        }
    }

    fn admits(self, fixed: Config) -> bool {
        match self {
            Compared::Serf | Compared::Capped(_) => true,
            Compared::Control(threads) => fixed.threads == threads,
        }
    }
}

/// `compared`'s pooled mean latency over the lowest pooled mean among the fixed configurations it
/// admits that failed no request in any of `runs` (each run a list of [`ScopeTotal`]s), and that
/// configuration.
fn pooled_ratio<'a>(
    runs: impl Iterator<Item = &'a [ScopeTotal]> + Clone,
    compared: Compared,
) -> Option<(f64, Config)> {
    let pooled = |setup: Setup| {
        let (sum, n, failed) = runs
            .clone()
            .flat_map(|r| r.iter().filter(move |t| t.setup == setup))
            .fold((0.0, 0usize, 0usize), |(s, n, f), t| {
                (s + t.sum_ms, n + t.answered, f + t.failed)
            });
        (n > 0).then(|| (sum / n as f64, failed))
    };
    let mut fixed: Vec<Config> = runs
        .clone()
        .flat_map(|r| r.iter())
        .filter_map(|t| match t.setup {
            Setup::Fixed(c) if compared.admits(c) => Some(c),
            _ => None,
        })
        .collect();
    fixed.sort();
    fixed.dedup();
    let (best, config) = fixed
        .into_iter()
        .filter_map(|c| match pooled(Setup::Fixed(c)) {
            Some((mean, 0)) => Some((mean, c)),
            _ => None,
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))?;
    Some((pooled(compared.numerator())?.0 / best, config))
}

/// `compared`'s (SERF's, or the control's) mean latency over every request of every run in scope
/// `phase` (`None`: whole run) over the lowest such mean among the fixed configurations it admits
/// (each over the runs it ran in), and that
/// configuration: each set-up's mean latency estimated from all runs, compared with the
/// configuration that is best for the scope on average rather than with the luckiest fixed draw of
/// each run. A fixed configuration that failed requests in the scope in any run is not a candidate.
pub fn ratio_over_all_runs(
    runs: &[PhasesRun],
    compared: Compared,
    phase: Option<usize>,
    settled: bool,
) -> Option<(f64, Config)> {
    let totals: Vec<Vec<ScopeTotal>> = runs
        .iter()
        .map(|r| scope_totals(r, phase, settled))
        .collect();
    pooled_ratio(totals.iter().map(Vec::as_slice), compared)
}

/// Bootstrap draws behind [`ratio_interval`].
pub const BOOTSTRAP_DRAWS: usize = 2000;

/// The seed of the report's bootstrap resamples.
pub(super) const INTERVAL_SEED: u64 = 0x5E8F;

/// A 95 % interval for [`ratio_over_all_runs`]: the 2.5th and 97.5th percentiles of the same ratio
/// over [`BOOTSTRAP_DRAWS`] resamples of the runs (drawn with replacement, as many as there are;
/// seeded, so a table rebuilt from the same runs is the same). The runs are the unit because the
/// machine drifts between set-ups served minutes apart, which is the noise that decides whether a
/// few per cent are resolved; requests within one set-up are not independent of that drift. `None`
/// with fewer than two runs or when no resample has a ratio.
pub fn ratio_interval(
    runs: &[PhasesRun],
    compared: Compared,
    phase: Option<usize>,
    settled: bool,
    seed: u64,
) -> Option<(f64, f64)> {
    if runs.len() < 2 {
        return None;
    }
    let totals: Vec<Vec<ScopeTotal>> = runs
        .iter()
        .map(|r| scope_totals(r, phase, settled))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ratios: Vec<f64> = (0..BOOTSTRAP_DRAWS)
        .filter_map(|_| {
            let picks: Vec<usize> = (0..totals.len())
                .map(|_| rng.random_range(0..totals.len()))
                .collect();
            pooled_ratio(picks.iter().map(|&i| totals[i].as_slice()), compared).map(|(r, _)| r)
        })
        .filter(|r| r.is_finite())
        .collect();
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Some((at(0.025), at(0.975)))
}
