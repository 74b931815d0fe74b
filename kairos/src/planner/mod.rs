//! The budget-constrained pool planner (paper §5.2): enumerate every configuration
//! (instances per type) within the hourly budget, bound each one's allowable throughput in closed
//! form (Eqs. 9–15), rank by the bound, and pick one without any online evaluation by the
//! similarity rule; or, with [`kairos_plus`], search online in bound order with pruning.
//!
//! The chosen pool is written as an `executors:` YAML fragment ([`executors_yaml`]):
//!
//! ```yaml
//! executors:
//!   - name: g4dn-xlarge-0          # type name with '.' → '-', then an index per type
//!     labels:
//!       instance_type: g4dn.xlarge
//!       cost_per_hour: 0.526
//! ```
//!
//! [`plan_report`] is the whole of `weir plan --budget --qos-ms --profiles`: profile text in,
//! YAML fragment plus a human-readable ranking out.
//!
//! Decisions: configurations without a base instance are excluded (their bound is undefined, and
//! the authors' artifact excludes them too); the budget is checked with `≤` (1e-9 slack for float sums); bound ties are broken by
//! the count vector in lexicographic order; the similarity pick breaks SSE ties by higher bound;
//! Kairos+ prunes configurations whose bound is `≤` the best measured throughput (our reading of
//! Algorithm 1, which does not say whether a tie is pruned).

mod bound;
mod evolve;
mod search;

pub use bound::{enumerate, upper_bound};
pub use evolve::{bayesian_search, genetic_search};
pub use search::{
    evaluations_to_reach, kairos_plus, random_search, simulated_annealing, SearchOutcome,
};

use crate::profile::throughput::ThroughputProfile;
use crate::profile::ModelProfile;
use crate::workload::BatchDist;
use crate::KairosError;
use bound::BUDGET_SLACK;

/// Instances per type, in the profile's type order.
pub type Counts = Vec<u32>;

/// A configuration within budget with its throughput upper bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Instances per type.
    pub counts: Counts,
    /// Its price in $ per hour.
    pub cost_per_hour: f64,
    /// Its allowable-throughput upper bound in QPS (Eq. 15).
    pub upper_bound: f64,
}

/// All configurations within budget that hold a base instance, by upper bound, highest first.
pub fn rank(
    profile: &ModelProfile,
    tp: &ThroughputProfile,
    budget_per_hour: f64,
) -> Vec<Candidate> {
    let prices: Vec<f64> = profile
        .types
        .iter()
        .map(|t| t.instance.cost_per_hour)
        .collect();
    let mut out: Vec<Candidate> = enumerate(&prices, budget_per_hour)
        .into_iter()
        .filter_map(|counts| {
            let upper_bound = upper_bound(tp, &counts)?;
            Some(Candidate {
                cost_per_hour: profile.cost_per_hour(&counts),
                upper_bound,
                counts,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.upper_bound
            .total_cmp(&a.upper_bound)
            .then_with(|| a.counts.cmp(&b.counts))
    });
    out
}

/// Which rule made the similarity pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickRule {
    /// The top-3 share their base count: take the top-1.
    TopOne,
    /// Otherwise: the top-10 member with the least sum of squared distances to the others.
    Centroid,
}

/// The similarity-based pick (paper §5.2): index into the ranking and the rule used.
/// `None` for an empty ranking.
pub fn similarity_pick(ranked: &[Candidate], base: usize) -> Option<(usize, PickRule)> {
    let first = ranked.first()?;
    let top3 = &ranked[..ranked.len().min(3)];
    if top3
        .iter()
        .all(|c| c.counts.get(base) == first.counts.get(base))
    {
        return Some((0, PickRule::TopOne));
    }
    let top = &ranked[..ranked.len().min(10)];
    let sse = |c: &Candidate| -> u64 {
        top.iter()
            .map(|o| {
                c.counts
                    .iter()
                    .zip(&o.counts)
                    .map(|(a, b)| u64::from(a.abs_diff(*b)).pow(2))
                    .sum::<u64>()
            })
            .sum()
    };
    // min_by_key keeps the first minimum: ties go to the higher bound.
    top.iter()
        .enumerate()
        .min_by_key(|(_, c)| sse(c))
        .map(|(i, _)| (i, PickRule::Centroid))
}

/// Executor name for the `index`-th instance of a type: `g4dn.xlarge` → `g4dn-xlarge-0`.
pub fn executor_name(instance_type: &str, index: u32) -> String {
    let stem: String = instance_type
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{stem}-{index}")
}

/// `(executor name, instance type, $/h)` for every instance of a configuration, in profile type
/// order: the names a model node's `replicas:` list would carry.
pub fn executor_names(profile: &ModelProfile, counts: &[u32]) -> Vec<(String, String, f64)> {
    profile
        .types
        .iter()
        .zip(counts)
        .flat_map(|(t, &n)| {
            (0..n).map(move |i| {
                (
                    executor_name(&t.instance.name, i),
                    t.instance.name.clone(),
                    t.instance.cost_per_hour,
                )
            })
        })
        .collect()
}

/// The `executors:` YAML fragment for a configuration (shape in the module docs).
pub fn executors_yaml(profile: &ModelProfile, counts: &[u32]) -> String {
    let mut s = String::from("executors:\n");
    for (name, instance_type, cost) in executor_names(profile, counts) {
        s += &format!(
            "  - name: {name}\n    labels:\n      instance_type: {instance_type}\n      cost_per_hour: {cost}\n"
        );
    }
    s
}

/// The optimal homogeneous pool, the paper's baseline: as many base instances as the budget buys, and the factor
/// `budget / cost` by which the paper scales its throughput to the full budget.
pub fn homogeneous(profile: &ModelProfile, budget_per_hour: f64) -> (Counts, f64) {
    let price = profile.types[profile.base].instance.cost_per_hour;
    let n = ((budget_per_hour + BUDGET_SLACK) / price).floor().max(0.0) as u32;
    let mut counts = vec![0; profile.types.len()];
    counts[profile.base] = n;
    let scale = if n == 0 {
        0.0
    } else {
        budget_per_hour / (f64::from(n) * price)
    };
    (counts, scale)
}

/// A finished plan: the ranking, the pick, and its renderings.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanReport {
    /// Configurations with a base instance within budget, best bound first.
    pub ranked: Vec<Candidate>,
    /// Index of the pick in `ranked`.
    pub pick: usize,
    /// Which similarity rule chose it.
    pub rule: PickRule,
    /// The pick as an `executors:` YAML fragment.
    pub executors_yaml: String,
    /// A human-readable ranking (top 10 and the pick) for the terminal.
    pub ranking: String,
}

impl PlanReport {
    /// The chosen configuration.
    pub fn chosen(&self) -> &Candidate {
        &self.ranked[self.pick]
    }
}

/// Plans a pool from a profile and its bound inputs: rank, pick, render. Zero online evaluations.
///
/// # Errors
/// [`KairosError::InvalidInput`] for a non-positive budget; [`KairosError::NothingAffordable`]
/// when no configuration within budget holds a base instance.
pub fn plan(
    profile: &ModelProfile,
    tp: &ThroughputProfile,
    budget_per_hour: f64,
) -> Result<PlanReport, KairosError> {
    if !(budget_per_hour.is_finite() && budget_per_hour > 0.0) {
        return Err(KairosError::InvalidInput(format!(
            "budget must be positive, got {budget_per_hour}"
        )));
    }
    let ranked = rank(profile, tp, budget_per_hour);
    let Some((pick, rule)) = similarity_pick(&ranked, profile.base) else {
        return Err(KairosError::NothingAffordable {
            budget_per_hour,
            base: profile.types[profile.base].instance.name.clone(),
        });
    };
    let names: Vec<&str> = profile
        .types
        .iter()
        .map(|t| t.instance.name.as_str())
        .collect();
    let mut ranking = format!(
        "model {} | QoS p99 {} ms | budget ${budget_per_hour}/h | {} configurations with a base instance\n\
         rank  config ({})  $/h  upper bound QPS\n",
        profile.model,
        profile.qos_ms,
        ranked.len(),
        names.join(", ")
    );
    for (i, c) in ranked
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 10 || *i == pick)
    {
        let mark = if i == pick {
            match rule {
                PickRule::TopOne => "  <- pick (top-3 share the base count)",
                PickRule::Centroid => "  <- pick (closest to the rest of the top 10)",
            }
        } else {
            ""
        };
        let counts: Vec<String> = c.counts.iter().map(u32::to_string).collect();
        ranking += &format!(
            "{:>4}  ({})  {:.3}  {:.2}{mark}\n",
            i + 1,
            counts.join(","),
            c.cost_per_hour,
            c.upper_bound
        );
    }
    let (homo, scale) = homogeneous(profile, budget_per_hour);
    if let Some(ub) = upper_bound(tp, &homo) {
        ranking += &format!(
            "homogeneous {} x {}: upper bound {:.2} QPS ({:.2} scaled to the budget)\n",
            homo[profile.base],
            names[profile.base],
            ub,
            ub * scale
        );
    }
    let executors_yaml = executors_yaml(profile, &ranked[pick].counts);
    Ok(PlanReport {
        ranked,
        pick,
        rule,
        executors_yaml,
        ranking,
    })
}

/// Seed of the default batch sample used when a plan is given no monitored batches.
pub const DEFAULT_SAMPLE_SEED: u64 = 2023;
/// Size of that sample (the paper's monitoring window).
pub const DEFAULT_SAMPLE_SIZE: usize = 10_000;

/// `weir plan --budget <$/h> --qos-ms <ms> --profiles <file>`: parses a profile file
/// ([`ModelProfile::from_yaml`]), overrides its QoS target if `qos_ms` is given, derives the bound
/// inputs from `batches` (the monitored window; `None` uses 10 000 draws of the production-trace
/// distribution, seed 2023), and plans. Returns the YAML fragment and the ranking in the report.
///
/// # Errors
/// As [`ModelProfile::from_yaml`] and [`plan`]; [`KairosError::InvalidInput`] for a non-positive
/// `qos_ms` or an empty `batches`.
///
/// # Examples
///
/// ```
/// use weir_kairos::planner::plan_report;
/// use weir_kairos::profile::paper::PaperModel;
///
/// let profiles = PaperModel::Rm2.profile().to_yaml(); // the text of `--profiles <file>`
/// let report = plan_report(&profiles, 2.5, Some(350.0), None)?;
/// assert_eq!(report.chosen().counts, vec![1, 0, 13, 0]); // 1 × g4dn + 13 × r5n
/// assert!(report.executors_yaml.starts_with("executors:\n  - name: g4dn-xlarge-0\n"));
/// print!("{}", report.ranking);
/// # Ok::<(), weir_kairos::KairosError>(())
/// ```
pub fn plan_report(
    profiles_yaml: &str,
    budget_per_hour: f64,
    qos_ms: Option<f64>,
    batches: Option<&[u32]>,
) -> Result<PlanReport, KairosError> {
    let mut profile = ModelProfile::from_yaml(profiles_yaml)?;
    if let Some(q) = qos_ms {
        if !(q.is_finite() && q > 0.0) {
            return Err(KairosError::InvalidInput(format!(
                "qos_ms must be positive, got {q}"
            )));
        }
        profile = profile.with_qos_ms(q);
    }
    let sample;
    let batches = match batches {
        Some(b) => b,
        None => {
            sample = BatchDist::Trace.sample_many(DEFAULT_SAMPLE_SIZE, DEFAULT_SAMPLE_SEED);
            &sample
        }
    };
    let tp = ThroughputProfile::derive(&profile, batches)?;
    plan(&profile, &tp, budget_per_hour)
}

#[cfg(test)]
mod tests;
