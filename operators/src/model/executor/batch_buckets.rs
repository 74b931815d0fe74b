//! The batch-size buckets a node's calls are counted in: 1, 2, 3–4, 5–8, …, 65–128 rows and an
//! open last one. The batch-size histogram (`stats.rs`) and the cost per row by batch size
//! (`row_cost.rs`) share them, so a preferred size is always one of the histogram's bounds.

/// Buckets: one per bound and the open one above.
pub const BATCH_BUCKETS: usize = 9;

/// Upper bounds of the batch-size buckets (the last bucket is open).
pub const BATCH_BUCKET_BOUNDS: [usize; BATCH_BUCKETS - 1] = [1, 2, 4, 8, 16, 32, 64, 128];

/// The bucket of a call of `rows` rows.
pub fn bucket_of(rows: usize) -> usize {
    BATCH_BUCKET_BOUNDS
        .iter()
        .position(|&b| rows <= b)
        .unwrap_or(BATCH_BUCKETS - 1)
}

/// The largest rows of bucket `b` (the open last bucket: no bound).
pub fn bound(b: usize) -> usize {
    BATCH_BUCKET_BOUNDS.get(b).copied().unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_size_falls_in_the_bucket_its_bound_closes() {
        let buckets: Vec<usize> = [1, 2, 3, 4, 5, 8, 9, 128, 129, usize::MAX]
            .iter()
            .map(|&r| bucket_of(r))
            .collect();
        assert_eq!(buckets, [0, 1, 2, 2, 3, 3, 4, 7, 8, 8]);
        assert_eq!((bound(2), bound(8)), (4, usize::MAX));
    }
}
