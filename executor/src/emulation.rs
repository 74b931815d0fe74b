//! Emulated instance types: how long a `weir executor` holds a call it has just run for real, so
//! one machine can stand in for a pool of different machines, as the heterogeneous pools of
//! cloud instances in "Kairos: Cost-Efficient ML Inference with Heterogeneous Cloud Resources"
//! (§7) are.
//!
//! - [`Emulation::Slowdown`] (`--slowdown F`): a machine F times slower at everything. The call is
//!   held until F × its real time has passed. Every batch size is slowed alike, so no type is
//!   better than another at any particular batch size.
//! - [`Emulation::Latency`] (`--emulate-latency BASE_MS,PER_ROW_MS`): a machine whose call of `n`
//!   rows takes `BASE_MS + PER_ROW_MS × n` milliseconds, the linear batch-size → latency profile the
//!   paper measured (Pearson > 0.99, Kairos §5.1). A GPU-like type has a large fixed cost and a small
//!   per-row cost; a CPU-like type the opposite, so large queries are cheaper on one and small ones
//!   on the other: the batch-size affinity Kairos's cost model exploits. The call is held until
//!   that time has passed since it could start, or for its real time if that is longer.
//!
//! The functions here are pure (durations in, durations out); the server does the sleeping.

use std::str::FromStr;
use std::time::Duration;

/// A `--slowdown` or `--emulate-latency` value that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EmulationError {
    /// `--slowdown` below 1 or not a number.
    #[error("slowdown must be a number ≥ 1.0 (1 is this machine's own speed), got {0}")]
    Slowdown(f64),
    /// `--emulate-latency` is not two numbers.
    #[error("`{0}` is not BASE_MS,PER_ROW_MS (two numbers of milliseconds, e.g. `26,0.05`)")]
    LatencyFormat(String),
    /// A latency term is negative or not finite, or both are 0.
    #[error("`{text}`: {why}")]
    LatencyValue {
        /// The value as given.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Both kinds were asked for.
    #[error("--slowdown and --emulate-latency emulate the same thing two ways; give one")]
    Both,
}

/// The emulated latency of one call: `base_ms + per_row_ms × rows`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyProfile {
    /// Fixed cost of a call, ms.
    pub base_ms: f64,
    /// Cost of each row of the call, ms.
    pub per_row_ms: f64,
}

impl LatencyProfile {
    /// A profile of `base_ms` per call plus `per_row_ms` per row.
    ///
    /// # Errors
    /// [`EmulationError::LatencyValue`] when a term is negative or not finite, or both are 0.
    pub fn new(base_ms: f64, per_row_ms: f64) -> Result<Self, EmulationError> {
        let text = format!("{base_ms},{per_row_ms}");
        let bad = |why| {
            Err(EmulationError::LatencyValue {
                text: text.clone(),
                why,
            })
        };
        if !(base_ms.is_finite() && per_row_ms.is_finite()) {
            return bad("both terms must be finite numbers of milliseconds");
        }
        if base_ms < 0.0 || per_row_ms < 0.0 {
            return bad("a latency term cannot be negative");
        }
        if base_ms == 0.0 && per_row_ms == 0.0 {
            return bad("a call would take no time; give a positive base or per-row cost");
        }
        Ok(LatencyProfile {
            base_ms,
            per_row_ms,
        })
    }

    /// The emulated time of a call of `rows` rows, in milliseconds.
    pub fn call_ms(&self, rows: usize) -> f64 {
        self.base_ms + self.per_row_ms * rows as f64
    }

    /// The emulated time of a call of `rows` rows.
    pub fn call_time(&self, rows: usize) -> Duration {
        Duration::from_secs_f64(self.call_ms(rows) / 1e3)
    }
}

impl std::fmt::Display for LatencyProfile {
    /// `BASE_MS,PER_ROW_MS`, the text [`LatencyProfile::from_str`] reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.base_ms, self.per_row_ms)
    }
}

impl FromStr for LatencyProfile {
    type Err = EmulationError;

    /// Parses `BASE_MS,PER_ROW_MS`, e.g. `26.2,0.05`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let format = || EmulationError::LatencyFormat(text.to_string());
        let (base, per_row) = text.split_once(',').ok_or_else(format)?;
        let number = |s: &str| s.trim().parse::<f64>().map_err(|_| format());
        LatencyProfile::new(number(base)?, number(per_row)?)
    }
}

/// How an executor emulates an instance type.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Emulation {
    /// This machine as it is.
    #[default]
    Off,
    /// F times slower at everything (F > 1).
    Slowdown(f64),
    /// A call of `n` rows takes `base + per_row × n`.
    Latency(LatencyProfile),
}

impl Emulation {
    /// The emulation the command line asks for: `--slowdown` (1 or absent: off) or
    /// `--emulate-latency`, not both.
    ///
    /// # Errors
    /// [`EmulationError::Slowdown`] for a slowdown below 1 or not a number;
    /// [`EmulationError::Both`] when a slowdown above 1 and a latency profile are both given.
    pub fn from_options(
        slowdown: Option<f64>,
        latency: Option<LatencyProfile>,
    ) -> Result<Self, EmulationError> {
        if let Some(f) = slowdown {
            check_slowdown(f)?;
        }
        match (slowdown.filter(|&f| f > 1.0), latency) {
            (Some(_), Some(_)) => Err(EmulationError::Both),
            (Some(f), None) => Ok(Emulation::Slowdown(f)),
            (None, Some(p)) => Ok(Emulation::Latency(p)),
            (None, None) => Ok(Emulation::Off),
        }
    }

    /// Checks a slowdown built directly rather than by [`Emulation::from_options`].
    ///
    /// # Errors
    /// [`EmulationError::Slowdown`] for a slowdown below 1 or not a number.
    pub fn check(&self) -> Result<(), EmulationError> {
        match *self {
            Emulation::Slowdown(f) => check_slowdown(f),
            _ => Ok(()),
        }
    }

    /// How much longer to hold a call of `rows` rows that really took `ran` (from when it could
    /// start to its outputs) before answering it.
    pub fn hold(&self, ran: Duration, rows: usize) -> Duration {
        match *self {
            Emulation::Off => Duration::ZERO,
            Emulation::Slowdown(f) => ran.mul_f64((f - 1.0).max(0.0)),
            Emulation::Latency(p) => p.call_time(rows).saturating_sub(ran),
        }
    }

    /// Whether calls are held at all.
    pub fn is_on(&self) -> bool {
        !matches!(self, Emulation::Off)
    }
}

/// A slowdown factor must be a number ≥ 1 (1 is the speed of the machine the executor runs on).
fn check_slowdown(f: f64) -> Result<(), EmulationError> {
    if f.is_finite() && f >= 1.0 {
        Ok(())
    } else {
        Err(EmulationError::Slowdown(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1e3)
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_nanos(10)
    }

    #[test]
    fn latency_profile_parses_base_and_per_row() {
        let p: LatencyProfile = "26.24, 0.0495".parse().unwrap();
        assert_eq!(p.base_ms, 26.24);
        assert_eq!(p.per_row_ms, 0.0495);
        let p: LatencyProfile = "0,0.3".parse().unwrap();
        assert_eq!((p.base_ms, p.per_row_ms), (0.0, 0.3));
        assert_eq!(p.to_string().parse::<LatencyProfile>(), Ok(p));
    }

    #[test]
    fn latency_profile_rejects_bad_text_with_its_reason() {
        for text in ["", "26", "26;0.1", "a,0.1", "1,b", "1,2,3"] {
            assert_eq!(
                text.parse::<LatencyProfile>(),
                Err(EmulationError::LatencyFormat(text.to_string())),
                "{text}"
            );
        }
        for text in ["-1,0.1", "1,-0.1", "0,0", "inf,1", "1,NaN"] {
            let e = text.parse::<LatencyProfile>().unwrap_err();
            assert!(
                matches!(e, EmulationError::LatencyValue { .. }),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_call_is_held_until_base_plus_rows_since_it_could_start() {
        let p = Emulation::Latency(LatencyProfile::new(20.0, 0.5).unwrap());
        // 100 rows: 70 ms in all; it ran 3 ms, so 67 more.
        assert!(close(p.hold(ms(3.0), 100), ms(67.0)));
        // 1 row: 20.5 ms.
        assert!(close(p.hold(Duration::ZERO, 1), ms(20.5)));
        // Real time longer than the profile: not held at all.
        assert_eq!(p.hold(ms(90.0), 100), Duration::ZERO);
    }

    #[test]
    fn a_slowdown_holds_a_multiple_of_the_real_time() {
        let s = Emulation::Slowdown(4.0);
        assert!(close(s.hold(ms(2.0), 1), ms(6.0)));
        assert!(close(s.hold(ms(2.0), 500), ms(6.0)));
        assert_eq!(Emulation::Off.hold(ms(2.0), 10), Duration::ZERO);
    }

    #[test]
    fn options_pick_one_emulation() {
        let p = LatencyProfile::new(1.0, 0.1).unwrap();
        assert_eq!(Emulation::from_options(None, None), Ok(Emulation::Off));
        assert_eq!(Emulation::from_options(Some(1.0), None), Ok(Emulation::Off));
        assert_eq!(
            Emulation::from_options(Some(3.0), None),
            Ok(Emulation::Slowdown(3.0))
        );
        assert_eq!(
            Emulation::from_options(Some(1.0), Some(p)),
            Ok(Emulation::Latency(p))
        );
        assert_eq!(
            Emulation::from_options(Some(2.0), Some(p)),
            Err(EmulationError::Both)
        );
        assert_eq!(
            Emulation::from_options(Some(0.5), None),
            Err(EmulationError::Slowdown(0.5))
        );
        assert!(Emulation::from_options(Some(f64::NAN), None).is_err());
        assert_eq!(
            Emulation::Slowdown(0.5).check(),
            Err(EmulationError::Slowdown(0.5))
        );
        assert_eq!(Emulation::Slowdown(2.0).check(), Ok(()));
    }
}
