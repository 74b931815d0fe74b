//! INFaaS's cold-start penalty (why its §4.1 prefers an Active variant): the first query of a
//! variant that is not loaded against the queries after it, and against what the repository's
//! profile predicts (load + inference).
//!
//! The digits architectures are registered into a temporary repository with `weir model
//! register`'s own code; each repeat starts a fresh model-less front end (`weir serve
//! --repository`'s, in this process, without HTTP) and, per architecture, sends one query naming
//! the variant (it loads it: a cold start, the reply says so), then the warm queries. Times are from
//! the call to the reply's outputs.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde_json::json;
use weir::modelless::ModelLessServer;
use weir::RuntimeOptions;
use weir_connectors::oip::{parse_infer_request, ModelLess};
use weir_infaas::repository::Repository;
use weir_infaas::variant::Variant;

use crate::infaas_profiles::register_task;

/// What to register and measure.
#[derive(Debug, Clone)]
pub struct ColdStartConfig {
    /// (name, ONNX file) of each architecture of the task.
    pub models: Vec<(String, PathBuf)>,
    /// The validation set.
    pub validation: PathBuf,
    /// Warm queries per architecture per repeat.
    pub warm: usize,
    /// Fresh front ends (each gives one cold start per architecture).
    pub repeats: usize,
}

/// One architecture's figures, medians over the repeats.
#[derive(Debug, Clone)]
pub struct ColdStartRow {
    /// The variant queried.
    pub variant: String,
    /// First query, ms.
    pub cold_ms: f64,
    /// Median warm query, ms.
    pub warm_ms: f64,
    /// Profiled load + batch-1 inference, ms.
    pub profiled_ms: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn query(variant: &str) -> Result<weir_connectors::oip::InferRequest> {
    let body = json!({"parameters": {"variant": variant},
        "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": vec![0.5f32; 64]}]});
    parse_infer_request(body.to_string().as_bytes(), None).map_err(|e| anyhow!("{e}"))
}

/// One timed query; whether the reply says it was a cold start.
async fn timed(front: &ModelLessServer, variant: &str) -> Result<(f64, bool)> {
    let request = query(variant)?;
    let started = Instant::now();
    let reply = front
        .infer("digits", request, Duration::from_secs(60))
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    Ok((ms, reply.parameters.get("cold_start") == Some(&json!(true))))
}

/// Registers the models into `repository`, then measures.
///
/// # Errors
/// When a registration or a query fails, or a first query is not a cold start.
pub fn cold_start(config: &ColdStartConfig, repository: &Path) -> Result<Vec<ColdStartRow>> {
    register_task(
        "digits",
        &config.models,
        &config.validation,
        repository,
        false,
        vec![1],
        20,
    )?;
    let repo = Repository::open(repository)?;
    let variants: Vec<Variant> = config
        .models
        .iter()
        .filter_map(|(name, _)| {
            repo.variants()
                .find(|v| &v.model == name && v.config.fixed_batch.is_none())
                .cloned()
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut cold: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    let mut warm: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..config.repeats {
        rt.block_on(async {
            let front =
                ModelLessServer::start(repository, RuntimeOptions::default(), &Default::default())?;
            for (i, v) in variants.iter().enumerate() {
                let (ms, was_cold) = timed(&front, &v.name).await?;
                if !was_cold {
                    bail!("the first query of {} was not a cold start", v.name);
                }
                cold[i].push(ms);
                for _ in 0..config.warm {
                    warm[i].push(timed(&front, &v.name).await?.0);
                }
            }
            anyhow::Ok(())
        })?;
    }
    Ok(variants
        .iter()
        .enumerate()
        .map(|(i, v)| ColdStartRow {
            variant: v.name.clone(),
            cold_ms: median(cold[i].clone()),
            warm_ms: median(warm[i].clone()),
            profiled_ms: v.profile.load_ms + v.profile.inference_ms(1).unwrap_or(f64::NAN),
        })
        .collect())
}

/// The table: first query, warm query, their ratio, and the profile's load + inference.
pub fn cold_start_table(rows: &[ColdStartRow]) -> String {
    let mut out = String::from(
        "| variant | first query ms | warm query ms (median) | first / warm | profiled load + inference ms |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.3} | {:.0}× | {:.1} |",
            r.variant,
            r.cold_ms,
            r.warm_ms,
            r.cold_ms / r.warm_ms,
            r.profiled_ms
        );
    }
    out
}
