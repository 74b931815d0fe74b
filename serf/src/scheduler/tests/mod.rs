//! The scheduler's tests, by rule: the decision and its hysteresis, the utilisation caps, surges,
//! online re-profiling and rates by load, exploration and trials, and the backlog guard. This file
//! holds the candidates and the drivers they share: [`serve`] feeds arrivals and service times
//! drawn from a "true" set of rates, [`ticked`] hands Poisson arrivals over the way weir's control
//! loop does.

mod backlog;
mod caps;
mod decision;
mod explore;
mod reprofile;
mod surge;

use super::control::tagging::{is_load_step, split_at_step};
use super::*;
use crate::baseline::Predictor;
use crate::online::{LoadBands, OnlineOptions, OnlineProfile};
use crate::slow_state::SlowStateOptions;
use crate::table::{Candidates, TableOptions};
use rand::{rngs::StdRng, SeedableRng};
use rand_distr::{Distribution, Exp};
use std::collections::BTreeMap;
use std::time::Duration;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A 2-core illustration: (1,1) 0.2 s, (1,2) 0.12 s, (2,1) 0.20/0.22 s; the model's crossover from
/// (1,2) to (2,1) is near 6.5/s.
fn two_core() -> Candidates {
    Candidates::two_core_from_times(0.20, 0.22, 0.12)
}

/// Squeezenet-like rates on 2 cores, as profiled: (1,1) 133/s, (1,2) 161/s, (2,1) 256/s.
fn squeezenet_like() -> Candidates {
    Candidates::two_core_from_times(0.0075, 0.0078, 0.0062)
}

/// Poisson arrivals at `rates` (`(requests/s, seconds)` one after the other), handed to the scheduler
/// the way weir's control loop does: counted, then recorded and polled every `tick` seconds.
fn ticked(s: &mut Scheduler, rates: &[(f64, f64)], tick: f64, seed: u64) -> Vec<Switch> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut arrivals = Vec::new();
    let mut start = 0.0;
    for &(rate, len) in rates {
        let exp = Exp::new(rate).unwrap();
        let mut t = start + exp.sample(&mut rng);
        while t < start + len {
            arrivals.push(t);
            t += exp.sample(&mut rng);
        }
        start += len;
    }
    let mut switches = Vec::new();
    let mut next = 0;
    let ticks = (start / tick).round() as usize;
    for k in 1..=ticks {
        let now = k as f64 * tick;
        let from = next;
        while next < arrivals.len() && arrivals[next] < now {
            next += 1;
        }
        s.record_arrivals(secs(now), (next - from) as u64);
        switches.extend(s.poll(secs(now)));
    }
    switches
}

/// Feeds `seconds` of evenly spaced arrivals at `lambda` from `from`, and for each one a service time of
/// the configuration in force drawn from `truth` (±10%, with `i` running drawn uniformly from `1..=c`).
fn serve(
    s: &mut Scheduler,
    truth: &Candidates,
    lambda: f64,
    from: f64,
    seconds: f64,
    rng: &mut StdRng,
) -> Vec<Switch> {
    serve_queued(s, truth, (lambda, from, seconds), rng, |_| None)
}

/// [`serve`], and before each arrival the queue length `queue(t)` gives at time `t` (seconds), when
/// it gives one and a tenth of a second has passed since the last reading.
fn serve_queued(
    s: &mut Scheduler,
    truth: &Candidates,
    (lambda, from, seconds): (f64, f64, f64),
    rng: &mut StdRng,
    queue: impl Fn(f64) -> Option<u64>,
) -> Vec<Switch> {
    use rand::Rng;
    let mut switches = Vec::new();
    let n = (lambda * seconds) as usize;
    let mut next_reading = from;
    for k in 0..n {
        let at = from + (k as f64 + 0.5) / lambda;
        let t = secs(at);
        if at >= next_reading {
            if let Some(q) = queue(at) {
                s.record_queue(q);
            }
            next_reading += 0.1;
        }
        s.record_arrival(t);
        let cur = s.current();
        let i = rng.random_range(1..=cur.concurrency);
        let mu = truth.get(cur).unwrap().mu[i - 1];
        s.record_service(
            t,
            ServedCall::new(cur.tuple(i), rng.random_range(0.9..1.1) / mu),
        );
        switches.extend(s.poll(t));
    }
    switches
}

/// One cap of 0.6 for every configuration, shown to hold or not (the YAML's
/// `max_utilisation: 0.6`): the scenarios built on it test other rules than *Earned headroom*.
fn cap_at_six_tenths() -> SchedulerOptions {
    SchedulerOptions {
        max_utilisation: 0.6,
        unproven_utilisation: None,
        ..Default::default()
    }
}

/// [`cap_at_six_tenths`] with exploration off (online re-profiling and load bands on).
fn without_exploration() -> SchedulerOptions {
    exploration_off(cap_at_six_tenths())
}

/// The default options with slow levels tracked as `slow_states` says (`None`: not tracked).
fn with_slow_states(slow_states: Option<SlowStateOptions>) -> SchedulerOptions {
    SchedulerOptions {
        online: Some(OnlineOptions {
            slow_states,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `options` with exploration off and the default online re-profiling and load bands.
fn exploration_off(options: SchedulerOptions) -> SchedulerOptions {
    SchedulerOptions {
        online: Some(OnlineOptions {
            explore: None,
            ..Default::default()
        }),
        ..options
    }
}

/// Offline: `(2, 1)` interferes badly (`μ_2 = 3.3`), `(1, 2)` takes 0.12 s.
fn pessimistic() -> Candidates {
    Candidates::two_core_from_times(0.20, 0.30, 0.12)
}
