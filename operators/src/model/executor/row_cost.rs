//! How a CPU node's cost per row moves with its batch size, measured from its own calls, and the
//! batch size that drives: a call grows to more rows only while larger calls have measured
//! cheaper per row (`batching.grow: while_cheaper`, the default).
//!
//! **Why.** On a GPU a larger batch fills more of the device at once, so rows cost less together.
//! On a CPU session of one intra-op thread the rows of a call are computed one after another by
//! that thread: a larger batch saves only the per-call work (ONNX Runtime's launch, binding and
//! allocations), and once the activations of all its rows no longer fit in the caches each row
//! costs more. PP-OCRv4's text recogniser on one thread takes about 23 ms a row in calls of one
//! or two rows and about 41 ms in calls of sixteen; a node that always took the whole queue into
//! one call would run at little more than half speed exactly when it is loaded.
//!
//! **Measure.** Each call's CPU time on the session thread (`CLOCK_THREAD_CPUTIME_ID`: with one
//! intra-op thread ONNX Runtime computes on the calling thread) per row, kept per batch-size
//! bucket (1, 2, 3–4, 5–8, …, as the batch-size metric buckets them) as a decayed mean with its
//! standard error (a call's weight halves after about seven more calls of its bucket). CPU time,
//! not wall time: under load the larger batches coincide with more threads sharing the cores,
//! which stretches a call's wall time without any cost of its own. Sessions whose cost this does
//! not see (a GPU, several intra-op threads) and calls whose rows are not alike (padded, or
//! padded to a fixed batch) are not measured, and grow up to `max_size`.
//!
//! **Rule.** Among buckets with at least [`MIN_CALLS`] calls, the preferred size is the largest
//! whose mean is not measurably above the cheapest's (by more than [`DEARER_BY_SE`] standard
//! errors of the difference: two sizes that cost the same keep the larger, fewer calls), and
//! it caps calls when some larger measured bucket is measurably dearer; calls then take at most
//! its largest size. While the largest size measured is also the cheapest (cost still falling, or
//! nothing larger seen yet), batches grow up to `max_size` as load brings them.
//!
//! **Exploration.** Load alone would only ever show a loaded node its largest batches, so until
//! every bucket up to `max_size` has been measured [`MIN_CALLS`] times a gather takes at most the
//! smallest unmeasured bucket's size (a dozen calls under load for `max_size` 16). After that one
//! gather in [`EXPLORE_EVERY`] takes the size one bucket below the preferred one and the next
//! such gather one bucket above, so both neighbours stay measured and the preferred size follows
//! a cost that drifts (another load on the machine's caches), one bucket at a time; one call in
//! 32 at a neighbouring size costs a few per cent at most.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::batch_buckets::{bound, bucket_of, BATCH_BUCKETS as BUCKETS};

/// Calls of a bucket before its cost counts.
pub const MIN_CALLS: u32 = 3;

/// Weight of a bucket's earlier calls at each new call of it (halves in about seven calls).
const DECAY: f64 = 0.9;

/// A measured node's gathers per one that takes a neighbouring bucket's size.
pub const EXPLORE_EVERY: u64 = 32;

/// One bucket's decayed sums.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Σ w over the bucket's calls.
    w: f64,
    /// Σ w², for the effective number of calls behind the mean.
    ww: f64,
    /// Σ w · x, `x` a call's CPU seconds per row.
    wx: f64,
    /// Σ w · x².
    wxx: f64,
    /// Calls recorded (saturating).
    calls: u32,
}

/// A bucket's measured CPU seconds per row: the decayed mean over its calls and that mean's
/// squared standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    mean: f64,
    se2: f64,
}

impl Bucket {
    fn add(&mut self, x: f64) {
        self.w = self.w * DECAY + 1.0;
        self.ww = self.ww * DECAY * DECAY + 1.0;
        self.wx = self.wx * DECAY + x;
        self.wxx = self.wxx * DECAY + x * x;
        self.calls = self.calls.saturating_add(1);
    }

    fn measured(&self) -> Option<Measured> {
        if self.calls < MIN_CALLS || self.w <= 0.0 {
            return None;
        }
        let mean = self.wx / self.w;
        // Calls behind the decayed mean: (Σw)² / Σw² (as many as there are, undecayed).
        let n = self.w * self.w / self.ww;
        let var = (self.wxx / self.w - mean * mean).max(0.0) * n / (n - 1.0).max(f64::EPSILON);
        Some(Measured { mean, se2: var / n })
    }
}

/// A node's cost per row by batch size, and the batch size it prefers (module docs).
#[derive(Debug, Default)]
pub struct RowCost {
    buckets: Mutex<[Bucket; BUCKETS]>,
    /// The preferred batch size's largest rows; 0 while batches may grow to `max_size`.
    cap: AtomicUsize,
    /// The smallest bucket with fewer than [`MIN_CALLS`] calls (`BUCKETS` once all have them),
    /// kept beside `cap` so that a gather reads it without the lock.
    first_unmeasured: AtomicUsize,
    /// Gathers made once every size was measured, for exploration.
    gathers: AtomicU64,
}

impl RowCost {
    /// Adds a call of `rows` rows that took `cpu` of its thread's CPU time.
    pub fn record(&self, rows: usize, cpu: Duration) {
        if rows == 0 {
            return;
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        buckets[bucket_of(rows)].add(cpu.as_secs_f64() / rows as f64);
        let per_row = buckets.map(|b| b.measured());
        self.cap
            .store(preferred_rows(&per_row).unwrap_or(0), Ordering::Relaxed);
        let first_unmeasured = per_row.iter().position(Option::is_none).unwrap_or(BUCKETS);
        self.first_unmeasured
            .store(first_unmeasured, Ordering::Relaxed);
    }

    /// Most rows a job or call should hold now, of at most `max_batch`.
    pub fn rows_now(&self, max_batch: usize) -> usize {
        match self.cap.load(Ordering::Relaxed) {
            0 => max_batch,
            cap => cap.min(max_batch),
        }
    }

    /// Most rows the gather starting now may take, of at most `max_batch`. Until every bucket up
    /// to `max_batch`'s has [`MIN_CALLS`] calls, the bound of the smallest that has not (cold
    /// start: under load every size gets measured within a few calls, where load alone would
    /// only ever make the largest); then [`RowCost::rows_now`], except that one gather in
    /// [`EXPLORE_EVERY`] takes the size one bucket below it and the next one the size one bucket
    /// above, in turn, so that the neighbours of the preferred size stay measured.
    pub fn rows_for_gather(&self, max_batch: usize) -> usize {
        let max_batch = max_batch.max(1);
        let unmeasured = self.first_unmeasured.load(Ordering::Relaxed);
        if unmeasured <= bucket_of(max_batch) {
            return bound(unmeasured).min(max_batch);
        }
        let base = self.rows_now(max_batch);
        let n = self.gathers.fetch_add(1, Ordering::Relaxed);
        if n % EXPLORE_EVERY != EXPLORE_EVERY - 1 {
            return base;
        }
        let b = bucket_of(base);
        let explored = if (n / EXPLORE_EVERY).is_multiple_of(2) {
            b.checked_sub(1).map_or(base, bound)
        } else {
            bound(b + 1)
        };
        explored.min(max_batch)
    }

    /// The measured CPU time per row of each bucket (`None`: fewer than [`MIN_CALLS`] calls),
    /// and the preferred size (`None`: batches grow to `max_size`).
    pub fn snapshot(&self) -> RowCostSnapshot {
        let buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        RowCostSnapshot {
            per_row: buckets.map(|b| b.measured().map(|m| Duration::from_secs_f64(m.mean))),
            preferred: match self.cap.load(Ordering::Relaxed) {
                0 => None,
                cap => Some(cap),
            },
        }
    }
}

/// A copy of a node's [`RowCost`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowCostSnapshot {
    /// CPU time per row by batch-size bucket (bounds [`super::BATCH_BUCKET_BOUNDS`], then the open
    /// one); `None` where fewer than [`MIN_CALLS`] calls were measured.
    pub per_row: [Option<Duration>; BUCKETS],
    /// The largest rows a call takes now; `None` while batches grow to `max_size`.
    pub preferred: Option<usize>,
}

/// How many standard errors of the difference a bucket's mean must exceed the cheapest's by to
/// count as dearer: a one-sided test at about 2 %, so that measurement noise alone rarely holds
/// calls at a smaller size that costs no less.
const DEARER_BY_SE: f64 = 2.0;

/// The preferred batch size's largest rows for these per-row costs by bucket: the largest
/// measured bucket not measurably dearer than the cheapest one, when a larger measured bucket
/// is measurably dearer; `None` otherwise (batches grow to `max_size`).
fn preferred_rows(per_row: &[Option<Measured>; BUCKETS]) -> Option<usize> {
    let measured = || {
        per_row
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.map(|m| (i, m)))
    };
    let (_, best) = measured().min_by(|a, b| a.1.mean.total_cmp(&b.1.mean))?;
    // (Plus a picosecond a row, so that equal costs measured without noise, as in a test, are
    // not told apart by rounding.)
    let dearer =
        |m: &Measured| m.mean - best.mean > DEARER_BY_SE * (m.se2 + best.se2).sqrt() + 1e-12;
    let (preferred, _) = measured().rfind(|(_, m)| !dearer(m))?;
    let dearer_above = per_row[preferred + 1..].iter().flatten().any(dearer);
    // The open last bucket has no larger one above it, so never `usize::MAX` here.
    dearer_above.then(|| bound(preferred))
}

/// The calling thread's CPU time so far; `None` where the clock cannot be read.
pub fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A node whose calls of `rows` rows cost `per_row(rows)` a row, each size called `calls`
    /// times.
    fn measured(sizes: &[usize], calls: u32, per_row: impl Fn(usize) -> Duration) -> RowCost {
        let cost = RowCost::default();
        for _ in 0..calls {
            for &rows in sizes {
                cost.record(rows, per_row(rows) * u32::try_from(rows).unwrap());
            }
        }
        cost
    }

    #[test]
    fn rows_dearer_in_larger_calls_cap_the_batch_at_the_cheapest_size() {
        // The recogniser's shape: flat to 2 rows, then dearer per row.
        let cost = measured(&[1, 2, 4, 8, 16], 4, |rows| match rows {
            1 => 25 * MS,
            2 => 24 * MS,
            4 => 27 * MS,
            8 => 40 * MS,
            _ => 50 * MS,
        });
        assert_eq!(cost.snapshot().preferred, Some(2));
        assert_eq!(cost.rows_now(16), 2);
        assert_eq!(cost.rows_now(1), 1);
        let snap = cost.snapshot();
        assert_eq!(snap.per_row[bucket_of(16)], Some(50 * MS));
        assert_eq!(snap.per_row[bucket_of(3)], Some(27 * MS));
    }

    #[test]
    fn rows_cheaper_in_larger_calls_grow_to_the_most() {
        // Per-call work amortised: 1 ms a call plus 0.1 ms a row.
        let cost = measured(&[1, 2, 4, 8, 16], 4, |rows| {
            MS / u32::try_from(rows).unwrap() + MS / 10
        });
        assert_eq!(cost.snapshot().preferred, None);
        assert_eq!(cost.rows_now(64), 64);
        assert_eq!(cost.rows_for_gather(16), 16);
        // Sizes past those measured are measured before any is preferred.
        assert_eq!(cost.rows_for_gather(64), 32);
    }

    #[test]
    fn nothing_caps_before_a_larger_bucket_is_measured_dearer() {
        // Only small calls so far: no evidence about larger ones.
        assert_eq!(measured(&[1, 2], 10, |_| 5 * MS).snapshot().preferred, None);
        // A dearer bucket seen fewer than MIN_CALLS times does not count yet.
        let cost = measured(&[1, 2], 10, |_| 5 * MS);
        for _ in 0..MIN_CALLS - 1 {
            cost.record(8, 80 * MS);
        }
        assert_eq!(cost.snapshot().preferred, None);
        cost.record(8, 80 * MS);
        // Equal costs at 1 and 2 rows: the larger.
        assert_eq!(cost.snapshot().preferred, Some(2));
    }

    #[test]
    fn sizes_within_their_noise_of_the_cheapest_keep_the_larger() {
        // Calls of 1 and of 2 rows cost 21 or 25 ms a row, by chance; calls of 4, 38 or 42.
        let cost = RowCost::default();
        for k in 0..12u32 {
            let noise = if k % 2 == 0 { 0 } else { 4 };
            for (rows, per_row) in [(1u32, 21 + noise), (2, 25 - noise), (4, 38 + noise)] {
                cost.record(rows as usize, MS * per_row * rows);
            }
        }
        assert_eq!(cost.snapshot().preferred, Some(2));
        // Noise alone in a larger size does not cap.
        let flat = RowCost::default();
        for k in 0..12u32 {
            for rows in [1u32, 2, 4] {
                let per_row = if (k + rows) % 2 == 0 { 20 } else { 24 };
                flat.record(rows as usize, MS * per_row * rows);
            }
        }
        assert_eq!(flat.snapshot().preferred, None);
    }

    #[test]
    fn the_preference_follows_a_cost_that_drifts() {
        let cost = measured(&[2, 4], 4, |rows| if rows == 2 { MS } else { 2 * MS });
        assert_eq!(cost.snapshot().preferred, Some(2));
        // Calls of 4 become cheaper than calls of 2 (a decayed mean follows within a few calls).
        for _ in 0..30 {
            cost.record(4, 4 * MS / 2);
        }
        assert_eq!(cost.snapshot().preferred, None);
    }

    #[test]
    fn a_cold_node_measures_every_size_before_it_prefers_one() {
        let cost = RowCost::default();
        // Each size up to max_size in turn, MIN_CALLS calls each, as the calls are recorded.
        let mut sizes = Vec::new();
        for _ in 0..5 * MIN_CALLS {
            let rows = cost.rows_for_gather(12);
            sizes.push(rows);
            // 1 ms a call and 1 ms a row: cheaper per row in larger calls.
            cost.record(rows, MS * (1 + u32::try_from(rows).unwrap()));
        }
        let want: Vec<usize> = [1, 2, 4, 8, 12]
            .iter()
            .flat_map(|&r| [r; MIN_CALLS as usize])
            .collect();
        assert_eq!(sizes, want);
        // All measured, the largest cheapest: no cap.
        assert_eq!(cost.snapshot().preferred, None);
        assert_eq!(cost.rows_for_gather(12), 12);
    }

    #[test]
    fn a_measured_gather_explores_the_sizes_beside_the_preferred_one_in_turn() {
        let cost = measured(&[1, 2, 4, 8, 16], MIN_CALLS, |rows| match rows {
            1 | 2 => 2 * MS,
            4 => MS,
            _ => 3 * MS,
        });
        assert_eq!(cost.snapshot().preferred, Some(4));
        let sizes: Vec<usize> = (0..2 * EXPLORE_EVERY)
            .map(|_| cost.rows_for_gather(16))
            .collect();
        let count = |n: usize| sizes.iter().filter(|&&s| s == n).count();
        assert_eq!((count(2), count(8)), (1, 1), "{sizes:?}");
        assert_eq!(count(4), sizes.len() - 2);
        // Never past max_batch.
        assert!((0..2 * EXPLORE_EVERY).all(|_| cost.rows_for_gather(5) <= 5));
        // Uncapped, a loaded node still looks one size down now and then.
        let falling = measured(&[1, 2, 4, 8, 16], MIN_CALLS, |rows| {
            MS / u32::try_from(rows).unwrap()
        });
        let sizes: Vec<usize> = (0..2 * EXPLORE_EVERY)
            .map(|_| falling.rows_for_gather(16))
            .collect();
        assert_eq!(sizes.iter().filter(|&&s| s == 8).count(), 1, "{sizes:?}");
        assert!(sizes.iter().all(|&s| s == 8 || s == 16));
    }

    #[test]
    fn the_thread_clock_reads_and_moves_with_work() {
        let before = thread_cpu_time().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        std::hint::black_box(x);
        assert!(thread_cpu_time().unwrap() > before);
    }
}
