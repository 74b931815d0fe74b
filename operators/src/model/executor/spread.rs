//! Spreading one batch over an idle executor's sessions. A batch's rows that reach a node whose
//! sessions all wait would otherwise run as one call on one session while the others idle: a
//! page's text lines through the recogniser, a client's batch of images. When the node's own
//! measured time per row says that the rows moved to the other sessions save more than handing
//! them over costs, the model operator cuts the batch into one job per free session, near-equal
//! in rows, and the queue's share rule (`batching.rs`) gives each free session one of them.
//!
//! Handing rows to another session thread and their answer back costs two thread wake-ups: tens
//! of microseconds on Linux, more where a virtual machine must wake an idle vCPU. A batch is
//! spread only when that saves at least [`SPREAD_PAYS_FROM`], ten times a generous 100 µs, so a
//! small model's rows (microseconds each) keep their one call. On CPU sessions with threads of
//! their own rows cost no less in one call than in several (more past a size, `row_cost.rs`), so
//! a spread adds no work; it is
//! never made while a job waits in the queue or every session but one is busy, when there is no
//! idle session to gain, nor on a GPU session (where rows do cost less together) or a
//! batch-specialised build (whose every call is padded to its whole batch).
//!
//! Where one job stands for one answer (a remote executor's query), [`super::Job::split`]
//! (`split.rs`) cuts it into parts whose outcomes join back into that one answer.

use std::time::Duration;

/// The least time a spread must save, by the node's measured time per row, to be made.
pub const SPREAD_PAYS_FROM: Duration = Duration::from_millis(1);

/// How many jobs to cut `rows` rows into for `free` free sessions, when a row takes `per_row` in
/// a call (`None`: not measured yet, so no spread): one per free session (at most one per row)
/// when the rows moved off the first session take at least [`SPREAD_PAYS_FROM`], else 1.
pub(super) fn parts(rows: usize, free: usize, per_row: Option<Duration>) -> usize {
    let k = free.min(rows);
    let Some(per_row) = per_row else {
        return 1;
    };
    if k < 2 {
        return 1;
    }
    let moved = rows - rows.div_ceil(k);
    let saved = per_row.saturating_mul(u32::try_from(moved).unwrap_or(u32::MAX));
    if saved >= SPREAD_PAYS_FROM {
        k
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_slow_models_rows_spread_one_job_per_free_session() {
        // A recogniser's three lines at 19 ms each on two free sessions: 2 + 1.
        assert_eq!(parts(3, 2, Some(19 * MS)), 2);
        assert_eq!(parts(8, 4, Some(5 * MS)), 4);
        // Never more jobs than rows.
        assert_eq!(parts(2, 4, Some(5 * MS)), 2);
    }

    #[test]
    fn no_spread_without_a_measure_a_second_free_session_or_rows_to_move() {
        assert_eq!(parts(3, 2, None), 1);
        assert_eq!(parts(3, 1, Some(19 * MS)), 1);
        assert_eq!(parts(3, 0, Some(19 * MS)), 1);
        assert_eq!(parts(1, 2, Some(19 * MS)), 1);
        assert_eq!(parts(0, 2, Some(19 * MS)), 1);
    }

    #[test]
    fn a_small_models_rows_keep_their_one_call() {
        // An MLP's 20 µs rows: four rows moved save 80 µs, less than a spread must.
        assert_eq!(parts(8, 2, Some(Duration::from_micros(20))), 1);
        // The saving is counted on the rows moved: 2 rows of 0.5 ms moved out of 3 is 1 ms.
        assert_eq!(parts(3, 3, Some(Duration::from_micros(500))), 3);
        assert_eq!(parts(3, 2, Some(Duration::from_micros(500))), 1);
    }
}
