//! What recent queries asked of each variant they chose: the strictest latency target, the
//! highest accuracy floor, and whether any named it explicitly. The model-autoscaler reads it to
//! know an architecture's SLO (a plan's variants must meet it), how far it may downgrade (never
//! below the accuracy floor), and whether it may change variants at all (a variant that queries
//! name is only replicated or shrunk: they would not follow an upgrade).
//!
//! The serving side notes every query; each note is a short lock on one map. Notes older than the
//! window are forgotten when read.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::query::Requirements;

/// One variant's recent requirements.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    at: Instant,
    latency_ms: Option<f64>,
    min_accuracy: Option<f64>,
    explicit: bool,
}

/// What the queries of one architecture asked for lately.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Asked {
    /// The strictest latency target, ms.
    pub latency_ms: Option<f64>,
    /// The highest accuracy floor.
    pub min_accuracy: Option<f64>,
    /// Some query named one of its variants.
    pub explicit: bool,
}

/// Recent requirements by variant.
#[derive(Debug)]
pub struct Demand {
    window: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

impl Demand {
    /// Remembers notes for `window`.
    pub fn new(window: Duration) -> Self {
        Demand {
            window,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// A query that chose `variant` with `requirements` (`explicit`: it named the variant).
    pub fn note(&self, variant: &str, requirements: &Requirements, explicit: bool) {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = Seen {
            at: now,
            latency_ms: requirements.latency_ms,
            min_accuracy: requirements.min_accuracy,
            explicit,
        };
        match seen.get_mut(variant) {
            // Within the window the strictest requirement holds; after it, the latest.
            Some(s) if now.duration_since(s.at) < self.window => {
                s.at = now;
                s.latency_ms = min_opt(s.latency_ms, fresh.latency_ms);
                s.min_accuracy = max_opt(s.min_accuracy, fresh.min_accuracy);
                s.explicit |= explicit;
            }
            _ => {
                seen.insert(variant.to_string(), fresh);
            }
        }
    }

    /// What the queries of the variants `of` asked for within the window.
    pub fn asked<'a>(&self, of: impl Iterator<Item = &'a str>) -> Asked {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.retain(|_, s| now.duration_since(s.at) < self.window);
        of.filter_map(|v| seen.get(v))
            .fold(Asked::default(), |a, s| Asked {
                latency_ms: min_opt(a.latency_ms, s.latency_ms),
                min_accuracy: max_opt(a.min_accuracy, s.min_accuracy),
                explicit: a.explicit || s.explicit,
            })
    }
}
