//! Variants and events for the crate's tests.

use std::collections::BTreeMap;

use crate::state::{Event, Worker};
use crate::variant::{GraphLevel, Precision, Profile, Variant, VariantConfig};

/// A variant of `task` with batch-1 latency `ms` (linear in batch), `load_ms`, saturation `qps`.
pub fn variant(
    name: &str,
    task: &str,
    accuracy: f64,
    ms: f64,
    load_ms: f64,
    qps: f64,
    hw: &str,
) -> Variant {
    Variant {
        name: name.into(),
        task: task.into(),
        model: name.split('.').next().unwrap_or(name).into(),
        config: VariantConfig {
            precision: Precision::Fp32,
            graph_level: GraphLevel::All,
            intra_threads: 1,
            fixed_batch: None,
            hardware: hw.into(),
        },
        file: format!("{name}.onnx"),
        sha256: String::new(),
        accuracy,
        max_batch: 8,
        profile: Profile {
            load_ms,
            latency_ms: BTreeMap::from([(1, ms), (8, ms * 4.0)]),
            peak_memory_bytes: 0,
            saturation_qps: qps,
        },
        price_per_s: 1.0,
    }
}

pub fn up(id: &str, hw: &str) -> Event {
    Event::WorkerUp(Worker {
        id: id.into(),
        hardware: hw.into(),
    })
}

pub fn loaded(variant: &str, worker: &str) -> Event {
    Event::Loaded {
        variant: variant.into(),
        worker: worker.into(),
    }
}

pub fn report(
    variant: &str,
    worker: &str,
    qps: f64,
    mean_latency_ms: f64,
    outstanding: u32,
) -> Event {
    Event::InstanceLoad {
        variant: variant.into(),
        worker: worker.into(),
        qps,
        mean_latency_ms,
        outstanding,
    }
}

pub fn util(worker: &str, utilisation: f64) -> Event {
    Event::WorkerLoad {
        worker: worker.into(),
        utilisation,
    }
}
