//! Latency read call by call: several ways of answering the same request, one call of each in
//! turn, round after round. On a shared VM whose speed drifts over seconds, two p50s measured one
//! phase after the other differ by the drift as well as by the paths; within a round every path
//! sees the same machine, so the median of the paired differences is the paths' own difference.

use std::time::Duration;

use anyhow::Result;

use crate::overhead::median;

/// Runs `calls` (each one timed call of a path) in turn for `warm` unrecorded rounds, then
/// `rounds` recorded ones; each path's recorded durations, round by round.
pub(crate) fn in_turn<const N: usize>(
    rounds: usize,
    warm: usize,
    mut calls: [&mut dyn FnMut() -> Result<Duration>; N],
) -> Result<[Vec<Duration>; N]> {
    let mut recorded: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(rounds));
    for round in 0..warm + rounds {
        for (call, out) in calls.iter_mut().zip(recorded.iter_mut()) {
            let took = call()?;
            if round >= warm {
                out.push(took);
            }
        }
    }
    Ok(recorded)
}

/// The median over rounds of `a − b − …` (the first path less every other), in ms.
pub(crate) fn median_difference_ms(first: &[Duration], others: &[&[Duration]]) -> f64 {
    let differences = first
        .iter()
        .enumerate()
        .map(|(k, d)| {
            others
                .iter()
                .fold(d.as_secs_f64(), |left, o| left - o[k].as_secs_f64())
        })
        .collect();
    median(differences) * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_alternate_and_warm_rounds_are_not_recorded() {
        let order = std::cell::RefCell::new(Vec::new());
        let mut a = || {
            order.borrow_mut().push('a');
            Ok(Duration::from_millis(5))
        };
        let mut b = || {
            order.borrow_mut().push('b');
            Ok(Duration::from_millis(2))
        };
        let [got_a, got_b] = in_turn(3, 2, [&mut a, &mut b]).expect("runs");
        assert_eq!(order.borrow().iter().collect::<String>(), "ababababab");
        assert_eq!((got_a.len(), got_b.len()), (3, 3));
        assert!((median_difference_ms(&got_a, &[&got_b]) - 3.0).abs() < 1e-9);
        assert!((median_difference_ms(&got_a, &[&got_b, &got_b]) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_failing_call_ends_the_measurement() {
        let mut ok = || Ok(Duration::ZERO);
        let mut failing = || -> Result<Duration> { anyhow::bail!("refused") };
        assert!(in_turn(2, 0, [&mut ok, &mut failing]).is_err());
    }
}
