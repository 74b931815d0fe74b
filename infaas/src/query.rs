//! What a model-less query asks for, and what a decision answers.
//!
//! Requirements travel in the Open Inference Protocol's standard `parameters` object:
//! `latency_ms` (the SLO for one call of the request's rows), `min_accuracy` (0–1, compared with
//! ≥: the paper's Figure 2 writes "> 70%" but its code accepts equality), and `max_cost` (price per
//! second of the instance that serves it; the paper's API has no cost argument, its code does).
//! Each is optional; a missing one does not constrain. A value that is not a finite number in range
//! is refused naming `parameters.<field>`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The parameter names a model-less query may carry.
pub const LATENCY_MS: &str = "latency_ms";
/// See [`LATENCY_MS`].
pub const MIN_ACCURACY: &str = "min_accuracy";
/// See [`LATENCY_MS`].
pub const MAX_COST: &str = "max_cost";

/// A query's requirements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Requirements {
    /// Latency target for one call, in milliseconds.
    pub latency_ms: Option<f64>,
    /// Least accuracy (0–1), inclusive.
    pub min_accuracy: Option<f64>,
    /// Highest price per second of the serving instance.
    pub max_cost: Option<f64>,
}

/// A requirement that cannot be read; `field` is the parameter's path in the request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RequirementError {
    /// `parameters.<name>`.
    pub field: String,
    /// Why.
    pub message: String,
}

impl Requirements {
    /// Reads the requirements from a request's `parameters` object; other parameters are ignored.
    pub fn from_parameters(parameters: &Map<String, Value>) -> Result<Self, RequirementError> {
        let number = |name: &str, lo: f64, hi: f64| -> Result<Option<f64>, RequirementError> {
            let Some(value) = parameters.get(name) else {
                return Ok(None);
            };
            let bad = |message: String| RequirementError {
                field: format!("parameters.{name}"),
                message,
            };
            let x = value
                .as_f64()
                .ok_or_else(|| bad("must be a number".to_string()))?;
            if !x.is_finite() || x < lo || x > hi {
                return Err(bad(format!("must be between {lo} and {hi}")));
            }
            Ok(Some(x))
        };
        Ok(Requirements {
            latency_ms: number(LATENCY_MS, f64::MIN_POSITIVE, 3.6e6)?,
            min_accuracy: number(MIN_ACCURACY, 0.0, 1.0)?,
            max_cost: number(MAX_COST, 0.0, f64::MAX)?,
        })
    }
}

/// What a query names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Target {
    /// A task: the system picks the variant (model-less).
    Task(String),
    /// One variant by name: only the worker is picked (paper Table 4's explicit mode, §3.1).
    Variant(String),
}

/// One query, as selection sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Task or variant.
    pub target: Target,
    /// Its requirements (ignored for an explicit variant, but for the reply).
    pub requirements: Requirements,
    /// Rows the query holds (the batch a variant must take in one call).
    pub batch: u32,
}

/// The decision for one query: which variant, on which worker, and whether it must be loaded
/// there first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// Variant name.
    pub variant: String,
    /// Worker (executor) id.
    pub worker: String,
    /// The variant is not running there yet: the query waits for a load (a cold start).
    pub cold: bool,
}

/// Why nothing can serve a query, and the closest variant there is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}")]
pub struct NoMatch {
    /// What was not met, in words.
    pub reason: String,
    /// The variant closest to the requirements (see the selection policy for the distance), if
    /// the task has any.
    pub closest: Option<String>,
    /// Its distance to the requirements.
    pub distance: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str) -> Map<String, Value> {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn requirements_are_read_and_bad_ones_name_their_field() {
        let r = Requirements::from_parameters(&params(
            r#"{"latency_ms": 20, "min_accuracy": 0.9, "other": "x"}"#,
        ))
        .unwrap();
        assert_eq!(r.latency_ms, Some(20.0));
        assert_eq!(r.min_accuracy, Some(0.9));
        assert_eq!(r.max_cost, None);
        let e = Requirements::from_parameters(&params(r#"{"min_accuracy": 2}"#)).unwrap_err();
        assert_eq!(e.field, "parameters.min_accuracy");
        let e = Requirements::from_parameters(&params(r#"{"latency_ms": "fast"}"#)).unwrap_err();
        assert_eq!(e.field, "parameters.latency_ms");
        let e = Requirements::from_parameters(&params(r#"{"latency_ms": 0}"#)).unwrap_err();
        assert_eq!(e.field, "parameters.latency_ms");
    }
}
