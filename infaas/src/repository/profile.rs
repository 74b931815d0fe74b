//! Profiling a variant (paper §3.3): load time, median latency for batch sizes 1, 2, 4, …, 64
//! (up to the variant's max batch), peak memory, saturation throughput, and accuracy on the
//! validation set — measured once, at registration, and stored with the variant.
//!
//! The procedure is written against [`Loader`] and [`Session`], so this crate stays free of
//! ONNX Runtime; `weir model register` supplies the ONNX Runtime implementation (the same
//! session builder the serving path uses), and tests may supply a stub.
//!
//! - **Load time**: building the session plus its first call (one row, or the fixed batch),
//!   so lazy initialisation is counted where a cold start pays it.
//! - **Latency**: after one warm-up call per size, the median of `runs` calls. Rows come from
//!   the validation set (cycled). A fixed-batch variant accepts only its batch, so a smaller
//!   call is padded to it: its latency for every size up to the batch is the full batch's.
//! - **Memory**: the growth of this process's resident set (`VmRSS` in `/proc/self/status`)
//!   from before the session is built to after a max-batch call, the session still alive: the
//!   weights, the session's arenas and the buffers of its largest call. It is a process-level
//!   measure, so it is approximate (allocator reuse can hide some of it); 0 where `/proc` is
//!   missing.
//! - **Saturation throughput**: `max over b of b·1000 / latency(b)`, the rate one instance
//!   serves when every call is full — the public INFaaS code's definition (decision 13.4 of the
//!   paper notes: the paper does not pin it down).
//! - **Emulated hardware** ([`Emulation`]): a type that stands for a machine this one is not
//!   reports `max(real, BASE + PER_ROW·b)` for each batch and `max(real, LOAD)` for loading,
//!   exactly what `weir executor --emulate-latency` then holds each call for.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use super::validation::{top1, ValidationSet};
use crate::variant::{Profile, VariantConfig};

/// A loaded variant that runs calls.
pub trait Session {
    /// Runs one call of `rows` rows; `inputs` holds one row-major buffer per model input.
    /// Returns the first output, row-major.
    ///
    /// # Errors
    /// The runtime's message.
    fn run(&mut self, inputs: &[Vec<f32>], rows: usize) -> Result<Vec<f32>, String>;
}

/// Builds sessions for variants.
pub trait Loader {
    /// The session type.
    type Session: Session;
    /// A session for the file at `path` built as `config` says.
    ///
    /// # Errors
    /// The runtime's message.
    fn load(&self, path: &Path, config: &VariantConfig) -> Result<Self::Session, String>;
}

/// The latency an emulated executor type adds (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Emulation {
    /// Fixed cost of a call, ms.
    pub base_ms: f64,
    /// Cost of each row, ms.
    pub per_row_ms: f64,
    /// Load time, ms, if the type declares one.
    pub load_ms: Option<f64>,
}

/// What a variant measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Load, latency, memory, throughput.
    pub profile: Profile,
    /// Top-1 accuracy on the validation set.
    pub accuracy: f64,
}

/// Batch sizes profiled: powers of two up to `max_batch`, and `max_batch` itself.
pub fn batch_sizes(max_batch: u32) -> Vec<u32> {
    let mut out: Vec<u32> = (0..)
        .map(|k| 1u32 << k)
        .take_while(|b| *b <= max_batch)
        .collect();
    if out.last() != Some(&max_batch) && max_batch > 0 {
        out.push(max_batch);
    }
    out
}

/// `rows` rows of the validation set starting at example `start` (wrapping round), one
/// buffer per input.
fn rows_from(set: &ValidationSet, start: usize, rows: usize) -> Vec<Vec<f32>> {
    (0..set.row_len.len())
        .map(|i| {
            let mut buf = Vec::with_capacity(rows * set.row_len[i]);
            for r in 0..rows {
                buf.extend_from_slice(set.rows(i, (start + r) % set.len(), 1));
            }
            buf
        })
        .collect()
}

/// This process's resident set, in bytes (0 where `/proc/self/status` is missing).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib.saturating_mul(1024))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Profiles the variant in `path` built as `config` (max batch `max_batch`), scoring it on
/// `set`; `runs` timed calls per batch size (at least 1).
///
/// # Errors
/// The runtime's message, or a call that returned the wrong number of values.
pub fn measure<L: Loader>(
    loader: &L,
    path: &Path,
    config: &VariantConfig,
    max_batch: u32,
    set: &ValidationSet,
    emulation: Option<Emulation>,
    runs: usize,
) -> Result<Measured, String> {
    let call_rows = |b: u32| config.fixed_batch.unwrap_or(b) as usize;
    let before = resident_bytes();
    let t = Instant::now();
    let mut session = loader.load(path, config)?;
    session.run(&rows_from(set, 0, call_rows(1)), call_rows(1))?;
    let mut load_ms = ms_since(t);
    let max_rows = call_rows(max_batch);
    session.run(&rows_from(set, 0, max_rows), max_rows)?;
    let peak_memory_bytes = resident_bytes().saturating_sub(before);

    let mut latency_ms = BTreeMap::new();
    let mut measured_at: BTreeMap<usize, f64> = BTreeMap::new();
    for b in batch_sizes(max_batch) {
        let rows = call_rows(b);
        let ms = match measured_at.get(&rows) {
            Some(ms) => *ms,
            None => {
                let inputs = rows_from(set, b as usize, rows);
                session.run(&inputs, rows)?;
                let mut times = Vec::with_capacity(runs.max(1));
                for _ in 0..runs.max(1) {
                    let t = Instant::now();
                    session.run(&inputs, rows)?;
                    times.push(ms_since(t));
                }
                let ms = median(times);
                measured_at.insert(rows, ms);
                ms
            }
        };
        let ms = match emulation {
            Some(e) => ms.max(e.base_ms + e.per_row_ms * f64::from(b)),
            None => ms,
        };
        latency_ms.insert(b, ms);
    }
    if let Some(l) = emulation.and_then(|e| e.load_ms) {
        load_ms = load_ms.max(l);
    }
    let saturation_qps = latency_ms
        .iter()
        .filter(|(_, ms)| **ms > 0.0)
        .map(|(b, ms)| f64::from(*b) * 1000.0 / ms)
        .fold(0.0, f64::max);

    let accuracy = score(&mut session, set, max_batch, config.fixed_batch.is_some())?;
    Ok(Measured {
        profile: Profile {
            load_ms,
            latency_ms,
            peak_memory_bytes,
            saturation_qps,
        },
        accuracy,
    })
}

/// Top-1 accuracy of `session` on `set`, in calls of up to `max_batch` rows (exactly
/// `max_batch` when `fixed`: the last call is padded and its extra rows ignored).
fn score<S: Session>(
    session: &mut S,
    set: &ValidationSet,
    max_batch: u32,
    fixed: bool,
) -> Result<f64, String> {
    let step = (max_batch as usize).max(1);
    let mut scores = Vec::with_capacity(set.len() * set.classes);
    let mut start = 0;
    while start < set.len() {
        let rows = step.min(set.len() - start);
        let call = if fixed { step } else { rows };
        let out = session.run(&rows_from(set, start, call), call)?;
        let want = call * set.classes;
        if out.len() != want {
            return Err(format!(
                "a call of {call} rows returned {} values, expected {want}",
                out.len()
            ));
        }
        scores.extend_from_slice(&out[..rows * set.classes]);
        start += rows;
    }
    Ok(top1(&scores, set.classes, &set.labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repository::metadata::{Signature, TensorSignature};
    use crate::variant::{GraphLevel, Precision};
    use weir_engine::tensor::DType;

    /// Answers class = first input value, as a one-hot row of 2 classes.
    struct Echo {
        fixed: Option<usize>,
    }
    impl Session for Echo {
        fn run(&mut self, inputs: &[Vec<f32>], rows: usize) -> Result<Vec<f32>, String> {
            if self.fixed.is_some_and(|f| f != rows) {
                return Err(format!("fixed batch, got {rows}"));
            }
            Ok(inputs[0]
                .iter()
                .flat_map(|v| if *v > 0.5 { [0.0, 1.0] } else { [1.0, 0.0] })
                .collect())
        }
    }
    struct EchoLoader;
    impl Loader for EchoLoader {
        type Session = Echo;
        fn load(&self, _: &Path, c: &VariantConfig) -> Result<Echo, String> {
            Ok(Echo {
                fixed: c.fixed_batch.map(|b| b as usize),
            })
        }
    }

    fn set() -> ValidationSet {
        let t = |n: &str| TensorSignature {
            name: n.into(),
            dtype: DType::F32,
            dims: vec![None, Some(1)],
        };
        let sig = Signature {
            inputs: vec![t("x")],
            outputs: vec![TensorSignature {
                dims: vec![None, Some(2)],
                ..t("y")
            }],
        };
        let text = "{\"inputs\":{\"x\":[1]},\"label\":1}\n{\"inputs\":{\"x\":[0]},\"label\":0}\n{\"inputs\":{\"x\":[0]},\"label\":1}\n";
        ValidationSet::from_reader(text.as_bytes(), "v", &sig).unwrap()
    }

    fn config(fixed_batch: Option<u32>) -> VariantConfig {
        VariantConfig {
            precision: Precision::Fp32,
            graph_level: GraphLevel::All,
            intra_threads: 1,
            fixed_batch,
            hardware: "local".into(),
        }
    }

    #[test]
    fn batch_sizes_are_powers_of_two_and_the_max() {
        assert_eq!(batch_sizes(64), vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(batch_sizes(6), vec![1, 2, 4, 6]);
        assert_eq!(batch_sizes(1), vec![1]);
    }

    #[test]
    fn profiles_every_size_and_scores_padded_fixed_batches() {
        for fixed in [None, Some(2)] {
            let max = fixed.unwrap_or(8);
            let m = measure(
                &EchoLoader,
                Path::new("-"),
                &config(fixed),
                max,
                &set(),
                None,
                3,
            )
            .unwrap();
            assert_eq!(
                m.profile.latency_ms.keys().copied().collect::<Vec<_>>(),
                batch_sizes(max)
            );
            assert!((m.accuracy - 2.0 / 3.0).abs() < 1e-9, "{fixed:?}");
        }
    }

    #[test]
    fn emulation_sets_a_floor() {
        let e = Emulation {
            base_ms: 50.0,
            per_row_ms: 1.0,
            load_ms: Some(1000.0),
        };
        let m = measure(
            &EchoLoader,
            Path::new("-"),
            &config(None),
            4,
            &set(),
            Some(e),
            1,
        )
        .unwrap();
        assert_eq!(m.profile.latency_ms[&4], 54.0);
        assert_eq!(m.profile.load_ms, 1000.0);
        assert!((m.profile.saturation_qps - 4000.0 / 54.0).abs() < 1e-9);
    }
}
