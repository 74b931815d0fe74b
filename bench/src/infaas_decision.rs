//! INFaaS decision time (the paper's Table 7, §6.4): how long the metadata store takes to
//! pick a variant and a worker, against a brute-force scan of every variant, instance and worker,
//! on the paper's variant population.
//!
//! The population is 175 synthetic variants with the paper's Table 8 per-architecture counts and
//! accuracies (22 architectures; GNMT is its own task), spread over three hardware types, on 12
//! workers. Each repeat draws a fresh random state (which variants are loaded where, and each
//! instance's load, so that instances are Active, Overloaded or Interfered) and a stream of
//! queries: explicit variants, and classification queries with drawn accuracy and latency
//! targets. Each query is decided by the indexed policy and by brute force on the same snapshot
//! (they must agree; a disagreement aborts the run), and by the store's `Dispatcher::select` (the
//! policy plus loading the snapshot and counting the decision). Task queries are classed by what
//! was decided: an Active variant ("loaded", the paper's state (b)) or one to load ("not loaded",
//! state (a)).

use std::time::Instant;

use anyhow::{bail, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_infaas::dispatch::Dispatcher;
use weir_infaas::query::{Query, Requirements, Target};
use weir_infaas::select::{BruteForce, PaperPolicy, VariantPolicy};
use weir_infaas::state::{Event, Worker};
use weir_infaas::store::MetadataStore;
use weir_infaas::variant::{GraphLevel, Precision, Profile, Variant, VariantConfig};

/// Table 8 of the paper: architecture, top-1 accuracy (GNMT: BLEU), variant count, and a latency
/// scale (batch-1 ms on a CPU) drawn from its parameter count.
const TABLE_8: [(&str, f64, u32, f64); 22] = [
    ("mobilenetv1", 70.4, 10, 15.0),
    ("mobilenetv2", 71.3, 3, 14.0),
    ("alexnet", 56.6, 9, 40.0),
    ("densenet121", 75.0, 12, 60.0),
    ("densenet169", 76.2, 5, 80.0),
    ("densenet201", 77.3, 5, 100.0),
    ("resnet50", 74.9, 19, 90.0),
    ("resnet50v2", 76.0, 4, 92.0),
    ("resnext50", 77.7, 3, 110.0),
    ("resnet101", 76.4, 12, 160.0),
    ("resnet101v2", 77.2, 4, 165.0),
    ("resnext101", 78.7, 3, 200.0),
    ("resnet152", 76.6, 12, 230.0),
    ("resnet152v2", 78.0, 4, 235.0),
    ("vgg16", 71.3, 18, 300.0),
    ("vgg19", 71.3, 12, 350.0),
    ("inceptionv3", 77.9, 12, 100.0),
    ("xception", 79.0, 3, 150.0),
    ("inceptionresnetv2", 80.3, 10, 220.0),
    ("nasnetmobile", 74.4, 3, 40.0),
    ("nasnetlarge", 82.5, 3, 500.0),
    ("gnmt", 24.5, 9, 400.0),
];

/// Hardware types: name, latency factor against CPU, price per second, workers.
const HARDWARE: [(&str, f64, f64, usize); 3] = [
    ("cpu", 1.0, 1.0, 6),
    ("gpu", 0.08, 16.0, 4),
    ("inferentia", 0.2, 3.0, 2),
];

/// The experiment's settings.
#[derive(Debug, Clone)]
pub struct DecisionConfig {
    /// Queries per repeat.
    pub queries: usize,
    /// Repeats, each with a fresh random state.
    pub repeats: usize,
    /// Fraction of variants loaded somewhere.
    pub loaded_fraction: f64,
    /// Random seed.
    pub seed: u64,
}

/// One row of the table: a query kind's decision times, in µs.
#[derive(Debug, Clone)]
pub struct DecisionRow {
    /// Query kind.
    pub kind: &'static str,
    /// Decisions measured.
    pub count: usize,
    /// Indexed policy: median and p99.
    pub policy: (f64, f64),
    /// The store's `Dispatcher::select`: median and p99.
    pub dispatcher: (f64, f64),
    /// Brute force: median and p99.
    pub brute: (f64, f64),
    /// The paper's median ms and speed-up for this kind (Table 7).
    pub paper: &'static str,
}

/// The 175 variants.
pub fn population(rng: &mut StdRng) -> Vec<Variant> {
    let mut out = Vec::new();
    for (arch, acc, count, cpu_ms) in TABLE_8 {
        let task = if arch == "gnmt" {
            "translation"
        } else {
            "classification"
        };
        for i in 0..count {
            let (hw, factor, price, _) = HARDWARE[i as usize % HARDWARE.len()];
            let batch = 1u32 << (i / 3).min(6);
            let ms = cpu_ms * factor * rng.random_range(0.8..1.25);
            let profile = Profile {
                load_ms: rng.random_range(590.0..11_000.0),
                latency_ms: (0..7)
                    .map(|k| (1u32 << k, ms * (1.0 + 0.6 * f64::from(k))))
                    .collect(),
                peak_memory_bytes: 0,
                saturation_qps: 1000.0 / ms * f64::from(batch),
            };
            out.push(Variant {
                name: format!("{arch}.v{i}-{hw}"),
                task: task.into(),
                model: arch.into(),
                config: VariantConfig {
                    precision: if i % 2 == 0 {
                        Precision::Fp32
                    } else {
                        Precision::Int8
                    },
                    graph_level: GraphLevel::All,
                    intra_threads: 1,
                    fixed_batch: None,
                    hardware: hw.into(),
                },
                file: String::new(),
                sha256: String::new(),
                accuracy: acc / 100.0,
                max_batch: batch.max(8),
                profile,
                price_per_s: price,
            });
        }
    }
    out
}

/// The events of a random state: 12 workers, a fraction of the variants loaded on one or two
/// workers of their hardware, each instance's load drawn so about half are Active and the rest
/// Overloaded or Interfered.
fn random_state(variants: &[Variant], config: &DecisionConfig, rng: &mut StdRng) -> Vec<Event> {
    let mut events = Vec::new();
    let mut workers: Vec<(String, &str)> = Vec::new();
    for (hw, _, _, n) in HARDWARE {
        for i in 0..n {
            let id = format!("{hw}-{i}");
            events.push(Event::WorkerUp(Worker {
                id: id.clone(),
                hardware: hw.into(),
            }));
            events.push(Event::WorkerLoad {
                worker: id.clone(),
                utilisation: rng.random_range(0.0..1.0),
            });
            workers.push((id, hw));
        }
    }
    for v in variants {
        if !rng.random_bool(config.loaded_fraction) {
            continue;
        }
        let mine: Vec<&String> = workers
            .iter()
            .filter(|(_, hw)| *hw == v.config.hardware)
            .map(|(id, _)| id)
            .collect();
        for _ in 0..rng.random_range(1..=2usize) {
            let worker = mine[rng.random_range(0..mine.len())].clone();
            let ms = v.profile.inference_ms(1).unwrap_or(1.0);
            let (qps, latency) = match rng.random_range(0..4) {
                0 => (v.profile.saturation_qps * 1.1, ms),
                1 => (v.profile.saturation_qps * 0.6, ms * 2.0),
                _ => (v.profile.saturation_qps * rng.random_range(0.0..0.9), ms),
            };
            events.push(Event::Loaded {
                variant: v.name.clone(),
                worker: worker.clone(),
            });
            events.push(Event::InstanceLoad {
                variant: v.name.clone(),
                worker,
                qps,
                mean_latency_ms: latency,
                outstanding: rng.random_range(0..4),
            });
        }
    }
    events
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[derive(Default)]
struct Samples {
    policy: Vec<f64>,
    dispatcher: Vec<f64>,
    brute: Vec<f64>,
}

fn micros(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e6
}

/// Runs the experiment: one row per query kind (explicit, loaded, not loaded).
pub fn decision(config: &DecisionConfig) -> Result<Vec<DecisionRow>> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let variants = population(&mut rng);
    let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
    let mut kinds: [Samples; 3] = Default::default();
    for _ in 0..config.repeats {
        let store = MetadataStore::start(variants.clone())?;
        for e in random_state(&variants, config, &mut rng) {
            store.record(e);
        }
        store.sync()?;
        let snapshot = store.snapshot();
        for _ in 0..config.queries {
            let query = if rng.random_bool(0.2) {
                Query {
                    target: Target::Variant(names[rng.random_range(0..names.len())].clone()),
                    requirements: Requirements::default(),
                    batch: 1,
                }
            } else {
                Query {
                    target: Target::Task("classification".into()),
                    requirements: Requirements {
                        latency_ms: Some(rng.random_range(5.0..400.0)),
                        min_accuracy: Some(rng.random_range(0.55..0.80)),
                        max_cost: None,
                    },
                    batch: 1 << rng.random_range(0..4),
                }
            };
            let t = Instant::now();
            let picked = PaperPolicy.select(&snapshot, &query);
            let policy = micros(t);
            let t = Instant::now();
            let through_store = store.select(&query);
            let dispatcher = micros(t);
            let t = Instant::now();
            let brute = BruteForce.select(&snapshot, &query);
            let brute_us = micros(t);
            if picked != brute || picked != through_store {
                bail!("the policy and brute force disagree on {query:?}: {picked:?} against {brute:?}");
            }
            let kind = match (&query.target, &picked) {
                (Target::Variant(_), _) => 0,
                (_, Ok(c)) if !c.cold => 1,
                (_, Ok(_)) => 2,
                (_, Err(_)) => continue,
            };
            let s = &mut kinds[kind];
            s.policy.push(policy);
            s.dispatcher.push(dispatcher);
            s.brute.push(brute_us);
        }
    }
    let labels = [
        ("explicit variant", "1.0 (N/A)"),
        ("task, variant loaded", "2.2 (44×)"),
        ("task, variant not loaded", "3.5 (27×)"),
    ];
    Ok(kinds
        .into_iter()
        .zip(labels)
        .map(|(mut s, (kind, paper))| {
            let stats = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                (percentile(v, 0.5), percentile(v, 0.99))
            };
            DecisionRow {
                kind,
                count: s.policy.len(),
                policy: stats(&mut s.policy),
                dispatcher: stats(&mut s.dispatcher),
                brute: stats(&mut s.brute),
                paper,
            }
        })
        .collect())
}

/// The Markdown table of `rows`.
pub fn decision_table(rows: &[DecisionRow]) -> String {
    let mut out = String::from(
        "| query | decisions | weir policy median µs | p99 µs | through the store median µs | p99 µs | brute force median µs | p99 µs | speed-up (median) | paper median ms (speed-up) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let speedup = if r.policy.0 > 0.0 {
            r.brute.0 / r.policy.0
        } else {
            0.0
        };
        out.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1}× | {} |\n",
            r.kind,
            r.count,
            r.policy.0,
            r.policy.1,
            r.dispatcher.0,
            r.dispatcher.1,
            r.brute.0,
            r.brute.1,
            speedup,
            r.paper
        ));
    }
    out
}
