//! The emulated instance types (a call of `n` rows takes `BASE + PER_ROW × n` ms, at a price) and
//! the Kairos latency profile they make, nominal or measured.

use anyhow::{anyhow, bail, Context, Result};
use weir_executor::emulation::LatencyProfile;
use weir_kairos::profile::{InstanceType, LatencyTable, ModelProfile, TypeProfile};

use super::{MAX_QUERY_ROWS, PROFILE_ROWS};

/// One emulated instance type: a call of `n` rows takes `base_ms + per_row_ms × n`.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulatedType {
    /// Name, used as the `instance_type` label.
    pub name: String,
    /// Its calls' latency (`weir executor --emulate-latency BASE,PER_ROW`).
    pub latency: LatencyProfile,
    /// Price, the `cost_per_hour` label.
    pub cost_per_hour: f64,
}

impl EmulatedType {
    /// Parses `NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR`.
    ///
    /// # Errors
    /// When the text has another shape, or a number is not one (or not positive where it must be).
    pub fn parse(text: &str) -> Result<Self> {
        let parts: Vec<&str> = text.split(':').collect();
        let [name, base, per_row, price] = parts.as_slice() else {
            bail!("`{text}` is not NAME:BASE_MS:PER_ROW_MS:PRICE_PER_HOUR");
        };
        let latency: LatencyProfile = format!("{base},{per_row}")
            .parse()
            .with_context(|| format!("latency of `{text}`"))?;
        let cost_per_hour = price
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| anyhow!("price `{price}` in `{text}` is not a number ≥ 0"))?;
        let name = name.trim().to_string();
        if name.is_empty() || cost_per_hour <= 0.0 {
            bail!("`{text}`: a type needs a name and a positive price");
        }
        Ok(EmulatedType {
            name,
            latency,
            cost_per_hour,
        })
    }

    /// Its emulated latency of a call of `rows` rows, ms.
    pub fn latency_ms(&self, rows: usize) -> f64 {
        self.latency.call_ms(rows)
    }
}

/// Where Kairos's latency predictions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KairosLatency {
    /// A profile measured through weir before the sweep (each type's mean query latency, graph
    /// and zenoh hop included, at a few sizes), given as YAML (`profiles:`): what a user profiling
    /// their deployment would write.
    Measured,
    /// The types' nominal emulated latencies (`BASE + PER_ROW × rows`), given as YAML.
    Nominal,
    /// Learned online from the node's own jobs (no `profiles:`).
    Learned,
}

impl KairosLatency {
    /// Parses `measured`, `nominal` or `learned`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "measured" => Some(KairosLatency::Measured),
            "nominal" => Some(KairosLatency::Nominal),
            "learned" => Some(KairosLatency::Learned),
            _ => None,
        }
    }

    /// How the table names it.
    pub fn describe(self) -> &'static str {
        match self {
            KairosLatency::Measured => {
                "a profile measured through weir before the sweep, given in YAML"
            }
            KairosLatency::Nominal => "the types' nominal emulated latencies, given in YAML",
            KairosLatency::Learned => "learned online",
        }
    }
}

/// A Kairos latency profile of `types` (the YAML `weir plan --profiles` and
/// `routing: {kairos: {profiles: ...}}` read) with `latency(t, rows)` ms at `PROFILE_ROWS` rows
/// for type `t`; with `|t, n| types[t].latency_ms(n)` it is their nominal emulated profile.
///
/// # Errors
/// When the numbers make no valid profile (no type meets `qos_ms` at the largest query).
pub fn emulated_profile(
    types: &[EmulatedType],
    qos_ms: f64,
    latency: impl Fn(usize, usize) -> f64,
) -> Result<ModelProfile> {
    let types = types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Ok(TypeProfile {
                instance: InstanceType {
                    name: t.name.clone(),
                    cost_per_hour: t.cost_per_hour,
                },
                latency: LatencyTable::new(
                    PROFILE_ROWS
                        .iter()
                        .map(|&n| (n as u32, latency(i, n)))
                        .collect(),
                )?,
            })
        })
        .collect::<Result<Vec<_>, weir_kairos::KairosError>>()?;
    Ok(ModelProfile::new(
        "kairos-live-mlp",
        qos_ms,
        MAX_QUERY_ROWS as u32,
        types,
        None,
    )?)
}

/// The pool `weir plan` picks for `profile` within `budget` (instances per type).
///
/// # Errors
/// When the planner finds nothing affordable.
pub fn planned_pool(profile: &ModelProfile, budget_per_hour: f64) -> Result<Vec<usize>> {
    let report = weir_kairos::planner::plan_report(
        &profile.to_yaml(),
        budget_per_hour,
        Some(profile.qos_ms),
        None,
    )?;
    Ok(report.chosen().counts.iter().map(|&n| n as usize).collect())
}
