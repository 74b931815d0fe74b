//! When a parity-coded node decodes (`resilience.parity.decode`), after "Parity Models:
//! Erasure-Coded Resilience for Prediction Serving Systems" (ParM, §4.1), which allows two rules:
//! a prediction is unavailable once the parity output and the other `k − 1` predictions of its
//! group are in (`first_available`), or once a time-out has passed. The time-out is weir's
//! default, taken from the node's own recent latencies (a quantile, `p99`) or given (`<ms>`), so
//! that without a straggler the node answers exactly what the deployed model answers.
//!
//! `after` is written as YAML wants it: a string (`p99`, `p99.9`, `first_available`) or a number
//! of milliseconds; one hand-written deserializer takes both and names what it expected.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use super::Spanned;

/// The deadline's floor when none is given, in milliseconds.
pub const DEFAULT_FLOOR_MS: u64 = 20;

/// When a parity-coded node's missing prediction counts as unavailable.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeSpec {
    /// The rule (default `p99`).
    #[serde(default)]
    pub after: Spanned<DecodeAfter>,
    /// A quantile deadline is never shorter than this, in milliseconds (default 20): latencies
    /// jitter by a few milliseconds on any shared host, and a reconstruction that saves less than
    /// that is not worth its accuracy.
    #[serde(default = "default_floor_ms")]
    pub floor_ms: u64,
}

impl Default for DecodeSpec {
    fn default() -> Self {
        DecodeSpec {
            after: Spanned::default(),
            floor_ms: DEFAULT_FLOOR_MS,
        }
    }
}

fn default_floor_ms() -> u64 {
    DEFAULT_FLOOR_MS
}

/// The decode rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DecodeAfter {
    /// A prediction is unavailable once it is later than this quantile (a percentage in (0, 100))
    /// of the node's recent latencies, or its replica failed.
    Quantile(f64),
    /// A prediction is unavailable once it is later than this many milliseconds, or its replica
    /// failed.
    Millis(f64),
    /// A prediction is unavailable as soon as the parity output and the group's other
    /// predictions are in, or its replica failed.
    FirstAvailable,
}

impl Default for DecodeAfter {
    fn default() -> Self {
        DecodeAfter::Quantile(99.0)
    }
}

impl fmt::Display for DecodeAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeAfter::Quantile(q) => write!(f, "p{q}"),
            DecodeAfter::Millis(ms) => write!(f, "{ms} ms"),
            DecodeAfter::FirstAvailable => f.write_str("first_available"),
        }
    }
}

const EXPECTED: &str =
    "`first_available`, a quantile `p<N>` with 0 < N < 100 (`p99`, `p99.9`) or a positive number of milliseconds";

impl DecodeAfter {
    /// Parses `p<N>`, `first_available`, or a number of milliseconds.
    ///
    /// # Errors
    /// A message naming the accepted forms.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "first_available" {
            return Ok(DecodeAfter::FirstAvailable);
        }
        let bad = || format!("`{s}` is not a decode rule; expected {EXPECTED}");
        match s.strip_prefix('p') {
            Some(q) => match q.parse::<f64>() {
                Ok(q) if q > 0.0 && q < 100.0 => Ok(DecodeAfter::Quantile(q)),
                _ => Err(bad()),
            },
            None => match s.strip_suffix("ms").unwrap_or(s).trim().parse::<f64>() {
                Ok(ms) => Self::millis(ms).ok_or_else(bad),
                Err(_) => Err(bad()),
            },
        }
    }

    fn millis(ms: f64) -> Option<Self> {
        (ms.is_finite() && ms > 0.0 && ms <= 3_600_000.0).then_some(DecodeAfter::Millis(ms))
    }
}

impl<'de> Deserialize<'de> for DecodeAfter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = DecodeAfter;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(EXPECTED)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<DecodeAfter, E> {
                DecodeAfter::parse(s).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, ms: u64) -> Result<DecodeAfter, E> {
                self.visit_f64(ms as f64)
            }
            fn visit_i64<E: de::Error>(self, ms: i64) -> Result<DecodeAfter, E> {
                self.visit_f64(ms as f64)
            }
            fn visit_f64<E: de::Error>(self, ms: f64) -> Result<DecodeAfter, E> {
                DecodeAfter::millis(ms).ok_or_else(|| {
                    E::custom(format!(
                        "{ms} ms is not a decode deadline; expected {EXPECTED}"
                    ))
                })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeAfter;

    #[test]
    fn decode_rules_parse_and_bad_ones_name_the_accepted_forms() {
        assert_eq!(DecodeAfter::parse("p99"), Ok(DecodeAfter::Quantile(99.0)));
        assert_eq!(DecodeAfter::parse("p99.9"), Ok(DecodeAfter::Quantile(99.9)));
        assert_eq!(DecodeAfter::parse("50"), Ok(DecodeAfter::Millis(50.0)));
        assert_eq!(DecodeAfter::parse("7.5ms"), Ok(DecodeAfter::Millis(7.5)));
        assert_eq!(
            DecodeAfter::parse("first_available"),
            Ok(DecodeAfter::FirstAvailable)
        );
        for bad in ["p100", "p0", "pNaN", "-3", "0", "soon", "inf"] {
            let e = DecodeAfter::parse(bad).unwrap_err();
            assert!(e.contains("first_available"), "{bad}: {e}");
        }
    }
}
