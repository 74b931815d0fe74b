//! What every run serves, decided once before the first: the phase rates, the fixed set-ups worth
//! running, the arrivals' schedule and the order the set-ups take in each run.

use anyhow::{anyhow, Result};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use weir_serf::config::Config;
use weir_serf::profile::Profile;
use weir_serf::table::Candidates;

use super::{cap_permille, PhasesConfig, Setup, UNSTABLE_UTILISATION};

/// Piecewise-Poisson send times (seconds) over `phases` of `(rate, seconds)`.
pub fn schedule(phases: &[(f64, f64)], seed: u64) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut start = 0.0;
    for &(rate, len) in phases {
        let end = start + len;
        if let Ok(exp) = Exp::new(rate.max(1e-9)) {
            let mut t = start + exp.sample(&mut rng);
            while t < end {
                out.push(t);
                t += exp.sample(&mut rng);
            }
        }
        start = end;
    }
    out
}

/// The order in which run `run` (from 0) serves `n` set-ups: indices into the canonical list (SERF
/// first), rotated by `run`, so that over `n` runs every set-up runs once in every position.
pub fn run_order(n: usize, run: usize) -> Vec<usize> {
    (0..n).map(|k| (k + run) % n.max(1)).collect()
}

/// `profile` cut to the configurations with `threads` intra-op threads (the control set-up's).
///
/// # Errors
/// When the profile has no such configuration.
pub(super) fn with_threads_only(profile: &Profile, threads: usize) -> Result<Profile> {
    let mut cut = profile.clone();
    cut.series.retain(|s| s.threads == threads);
    cut.after_idle.retain(|a| a.threads == threads);
    if cut.series.is_empty() {
        return Err(anyhow!(
            "the profile has no configuration with {threads} intra-op threads"
        ));
    }
    Ok(cut)
}

/// The planning profile takes this many times [`PhasesConfig::profile`]'s samples per tuple.
pub(super) const PLANNING_SAMPLES_FACTOR: usize = 10;

/// Interleaved rounds of the planning profile (each tuple keeps its median round).
pub(super) const PLANNING_ROUNDS: usize = 9;

/// What every run serves, planned once from a long profile before the first run: the phase rates,
/// the fixed configurations worth running, and the widest configuration (the burn-in's).
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) moderate: f64,
    pub(super) low: f64,
    pub(super) setups: Vec<Setup>,
    pub(super) skipped: Vec<(Config, f64)>,
    pub(super) left_out: Vec<Config>,
    pub(super) widest: Option<Config>,
}

impl Plan {
    /// Rates as given ([`PhasesConfig::rates`]) or as fractions of `profile`'s largest capacity;
    /// a fixed configuration not listed in [`PhasesConfig::fixed`] (when it lists any) is left
    /// out, one whose profiled utilisation at moderate load reaches [`UNSTABLE_UTILISATION`] is
    /// skipped.
    pub(super) fn from_profile(config: &PhasesConfig, profile: &Profile) -> Result<Plan> {
        let candidates = Candidates::from_profile(profile);
        let max_capacity = candidates.max_capacity().map_or(0.0, |c| c.capacity());
        if max_capacity <= 0.0 {
            return Err(anyhow!("{}: empty profile", config.model.0));
        }
        let (moderate, low) = config
            .rates
            .unwrap_or((config.moderate * max_capacity, config.low * max_capacity));
        if let Some(unknown) = config
            .fixed
            .iter()
            .find(|f| !candidates.as_slice().iter().any(|c| c.config == **f))
        {
            return Err(anyhow!(
                "{}: fixed configuration {unknown} is not in the profile",
                config.model.0
            ));
        }
        let mut setups = vec![Setup::Serf];
        if let Some(threads) = config.control_threads {
            with_threads_only(profile, threads)?;
            setups.push(Setup::SerfThreads(threads));
        }
        if let Some(cap) = config.also_cap {
            setups.push(Setup::SerfCapped(cap_permille(cap)));
        }
        let (mut skipped, mut left_out) = (Vec::new(), Vec::new());
        for c in candidates.as_slice() {
            let utilisation = moderate / c.capacity();
            if !config.fixed.is_empty() && !config.fixed.contains(&c.config) {
                left_out.push(c.config);
            } else if utilisation >= UNSTABLE_UTILISATION {
                skipped.push((c.config, utilisation));
            } else {
                setups.push(Setup::Fixed(c.config));
            }
        }
        Ok(Plan {
            moderate,
            low,
            setups,
            skipped,
            left_out,
            widest: candidates.max_capacity().map(|c| c.config),
        })
    }
}
