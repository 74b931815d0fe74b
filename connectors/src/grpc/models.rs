//! Triton's model extensions over gRPC: `ModelConfig` and `ModelStatistics`, answered from the
//! same table (and model-less names) and with the same figures as their HTTP routes
//! (`crate::models`).

use serde_json::Value;

use super::proto::{
    InferBatchStatistics, InferStatistics, ModelStatistics, ModelStatisticsResponse,
    StatisticDuration,
};
use super::status::Failure;
use crate::models::Models;
use crate::oip::ModelLess;

fn number(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn duration(v: &Value, key: &str) -> Option<StatisticDuration> {
    let d = v.get(key)?;
    Some(StatisticDuration {
        count: number(d, "count"),
        ns: number(d, "ns"),
    })
}

/// One model version's statistics, from the document the HTTP route writes.
fn model_statistics(doc: &Value) -> ModelStatistics {
    let stats = doc.get("inference_stats").cloned().unwrap_or(Value::Null);
    ModelStatistics {
        name: doc["name"].as_str().unwrap_or_default().to_string(),
        version: doc["version"].as_str().unwrap_or_default().to_string(),
        last_inference: number(doc, "last_inference"),
        inference_count: number(doc, "inference_count"),
        execution_count: number(doc, "execution_count"),
        inference_stats: Some(InferStatistics {
            success: duration(&stats, "success"),
            fail: duration(&stats, "fail"),
            queue: duration(&stats, "queue"),
            compute_input: duration(&stats, "compute_input"),
            compute_infer: duration(&stats, "compute_infer"),
            compute_output: duration(&stats, "compute_output"),
            cache_hit: duration(&stats, "cache_hit"),
            cache_miss: duration(&stats, "cache_miss"),
        }),
        batch_stats: doc["batch_stats"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| InferBatchStatistics {
                batch_size: number(b, "batch_size"),
                compute_input: duration(b, "compute_input"),
                compute_infer: duration(b, "compute_infer"),
                compute_output: duration(b, "compute_output"),
            })
            .collect(),
    }
}

/// The statistics of every model (`name` empty), of every version of one, or of one version.
///
/// # Errors
/// Not found, naming the model or the version.
pub(super) fn statistics(
    models: &Models,
    modelless: Option<&dyn ModelLess>,
    name: &str,
    version: &str,
) -> Result<ModelStatisticsResponse, Failure> {
    let name = (!name.is_empty()).then_some(name);
    let version = (!version.is_empty()).then_some(version);
    let doc = crate::models::modelless::statistics(models, modelless, name, version)
        .map_err(|e| Failure::lookup(&e))?;
    Ok(ModelStatisticsResponse {
        model_stats: doc["model_stats"]
            .as_array()
            .into_iter()
            .flatten()
            .map(model_statistics)
            .collect(),
    })
}
