use weir_serf::config::Config;
use weir_serf::model::predict;

use super::measure::requests_at;
use super::*;

fn point(predicted_ms: f64, measured_ms: f64) -> SerfPoint {
    SerfPoint {
        config: Config::new(1, 1),
        level: 1,
        lambda: 1.0,
        rho: 0.1,
        predicted_ms,
        back_to_back_ms: predicted_ms,
        measured_ms,
        send_late_ms: 0.0,
        requests: 1,
        predicted_service_ms: 1.0,
        measured_service_ms: None,
        in_situ_ms: None,
        measured_service_scv: None,
        in_situ_scv_ms: None,
        second_predicted_ms: None,
        online_predicted_ms: None,
        carried_predicted_ms: None,
        node_arrival_scv: None,
        in_situ_node_spread_ms: None,
        window_service_cv: None,
        windowed_in_situ_ms: None,
        predicted_node_ms: predicted_ms,
        measured_node_ms: None,
    }
}

#[test]
fn the_latency_splits_into_the_node_and_the_path_outside_it() {
    // Predicted 12 ms of which 10 at the node; measured 15 ms of which 11 at the node.
    let p = SerfPoint {
        predicted_node_ms: 10.0,
        measured_node_ms: Some(11.0),
        ..point(12.0, 15.0)
    };
    assert!((p.node_error().unwrap() + 1.0 / 11.0).abs() < 1e-12);
    let (predicted, measured) = p.outside_the_node_ms().unwrap();
    assert!((predicted - 2.0).abs() < 1e-12 && (measured - 4.0).abs() < 1e-12);
    // Sent 3 ms late on average: 12 ms from the actual send, which the prediction matches.
    let late = SerfPoint {
        send_late_ms: 3.0,
        ..point(12.0, 15.0)
    };
    assert!(late.from_send_error().abs() < 1e-12);
    // Nothing measured at the node: neither split exists.
    let none = point(12.0, 15.0);
    assert_eq!(
        (none.node_error(), none.outside_the_node_ms()),
        (None, None)
    );
}

#[test]
fn each_call_counts_for_the_calls_that_ran_with_it_on_average() {
    use std::time::{Duration, Instant};
    use weir_operators::model::CallRecord;
    let base = Instant::now();
    let ms = Duration::from_millis;
    let call = |start: u64, end: u64| CallRecord {
        ended_at: base + ms(end),
        duration: ms(end - start),
        idle_before: None,
    };
    let calls = [
        call(0, 10),   // beside the next one all along: 2
        call(0, 10),   // 2
        call(20, 30),  // alone: 1
        call(40, 50),  // half its span beside the next: 1.5, rounds to 2
        call(45, 50),  // all along beside the one before: 2
        call(60, 100), // a tenth of its span beside the next: 1.1, rounds to 1
        call(96, 100), // 2
    ];
    assert_eq!(calls_running_with(&calls), vec![2, 2, 1, 2, 2, 1, 2]);
    assert!(calls_running_with(&[]).is_empty());
    // A zero-length call counts for one, and divides nothing by zero.
    assert_eq!(calls_running_with(&[call(5, 5)]), vec![1]);
}

#[test]
fn error_summary_mean_and_quantiles() {
    // |errors| 1 %, 2 %, …, 10 %.
    let points: Vec<SerfPoint> = (1..=10).map(|i| point(100.0 + i as f64, 100.0)).collect();
    let (mean, p90, p95) = error_summary(points.iter().map(SerfPoint::error));
    assert!((mean - 0.055).abs() < 1e-12);
    assert!((p90 - 0.09).abs() < 1e-12);
    assert!((p95 - 0.10).abs() < 1e-12);
    assert_eq!(error_summary(std::iter::empty()), (0.0, 0.0, 0.0));
    assert!((point(90.0, 100.0).error() + 0.1).abs() < 1e-12);
    assert_eq!(point(90.0, 100.0).in_situ_error(), None);
    let p = SerfPoint {
        in_situ_ms: Some(110.0),
        ..point(90.0, 100.0)
    };
    assert!((p.in_situ_error().unwrap() - 0.1).abs() < 1e-12);
}

#[test]
fn in_situ_prediction_rescales_the_service_level() {
    // M/D/1 at 5 ms, λ = 100/s: measured calls take 8 ms instead, so the in-situ prediction is the
    // same model at 8 ms (ρ = 0.8), and at 12 ms it is unstable.
    let mu = [200.0];
    let at5 = predict(100.0, &mu).unwrap();
    assert!((at5.service - 0.005).abs() < 1e-12);
    let scaled = in_situ_latency(100.0, &mu, at5.service, 0.008).unwrap();
    let direct = predict(100.0, &[125.0]).unwrap().latency;
    assert!((scaled - direct).abs() < 1e-12, "{scaled} vs {direct}");
    assert!(scaled > at5.latency);
    assert_eq!(in_situ_latency(100.0, &mu, at5.service, 0.012), None);
    assert_eq!(in_situ_latency(100.0, &mu, at5.service, 0.0), None);
    // A two-slot profile keeps its interference shape: both rates scale by the same factor.
    let two = [140.0, 130.0];
    let p = predict(100.0, &two).unwrap();
    let same = in_situ_latency(100.0, &two, p.service, p.service).unwrap();
    assert!((same - p.latency).abs() < 1e-12);
}

/// The calls' spread: SCV from the durations, and the in-situ prediction with it — at SCV 0
/// the plain in-situ one, at SCV 1 on one slot M/M/1 at the measured service time.
#[test]
fn the_in_situ_prediction_with_the_calls_scv_spans_deterministic_to_exponential() {
    use std::time::Duration;
    let ms = |v: &[u64]| {
        v.iter()
            .map(|&m| Duration::from_millis(m))
            .collect::<Vec<_>>()
    };
    assert_eq!(scv(&ms(&[5])), None);
    assert_eq!(scv(&ms(&[4, 4, 4])), Some(0.0));
    // Mean 4 ms, variance 4 ms²: SCV 0.25.
    assert!((scv(&ms(&[2, 6])).unwrap() - 0.25).abs() < 1e-12);

    let mu = [200.0];
    let at5 = predict(100.0, &mu).unwrap();
    let plain = in_situ_latency(100.0, &mu, at5.service, 0.008).unwrap();
    let with = |measured: f64, spreads: (f64, f64)| {
        in_situ_latency_with_scvs(100.0, &mu, at5.service, measured, spreads)
    };
    assert!((with(0.008, (1.0, 0.0)).unwrap() - plain).abs() < 1e-12);
    // M/M/1 at 8 ms, λ = 100/s: W = S/(1 − ρ) = 40 ms.
    let exponential = with(0.008, (1.0, 1.0)).unwrap();
    assert!((exponential - 0.040).abs() < 1e-9, "{exponential}");
    // Arrivals twice as bursty as Poisson, deterministic calls: the M/M/1 wait again (Kingman).
    assert!((with(0.008, (2.0, 0.0)).unwrap() - exponential).abs() < 1e-9);
    assert_eq!(with(0.012, (1.0, 0.5)), None);

    // Arrival gaps 1, 1, 1 ms: regular, SCV 0; gaps 1 and 3 ms: SCV 0.25.
    let start = std::time::Instant::now();
    let at = |ms: &[u64]| {
        ms.iter()
            .map(|&m| start + Duration::from_millis(m))
            .collect::<Vec<_>>()
    };
    assert_eq!(arrival_scv(&at(&[0, 1, 2, 3])), Some(0.0));
    assert!((arrival_scv(&at(&[0, 1, 4])).unwrap() - 0.25).abs() < 1e-12);
    assert_eq!(arrival_scv(&at(&[0, 1])), None);
}

/// The windows: calls cut by their end times; the windows' spread of service level; and the
/// per-window prediction — one steady window is the plain in-situ one, and a slow stretch plus
/// a fast one of the same mean predict more than their mean does (latency is convex).
#[test]
fn the_windowed_in_situ_prediction_averages_the_service_levels_a_point_went_through() {
    use std::time::{Duration, Instant};
    use weir_operators::model::CallRecord;
    let start = Instant::now();
    let call = |at_ms: u64, took_ms: u64| CallRecord {
        ended_at: start + Duration::from_millis(at_ms),
        duration: Duration::from_millis(took_ms),
        idle_before: None,
    };
    // Calls at 0, 100, 600 and 1700 ms: windows [0, 500) with two, [500, 1000) with one,
    // nothing in [1000, 1500), [1500, 2000) with one — empty windows are left out.
    let calls = [call(0, 4), call(100, 6), call(600, 8), call(1700, 2)];
    let windows = windowed_service(&calls, Duration::from_millis(500));
    let expected = [(2, 0.005), (1, 0.008), (1, 0.002)];
    assert_eq!(windows.len(), expected.len(), "{windows:?}");
    for ((n, m), (en, em)) in windows.iter().zip(expected) {
        assert_eq!(*n, en);
        assert!((m - em).abs() < 1e-12, "{windows:?}");
    }
    assert!(windowed_service(&[], Duration::from_millis(500)).is_empty());

    assert_eq!(window_cv(&[(3, 0.004)]), None);
    assert_eq!(window_cv(&[(3, 0.004), (5, 0.004)]), Some(0.0));
    // Equal weights at 3 and 5 ms: mean 4, standard deviation 1 → CV 0.25.
    assert!((window_cv(&[(2, 0.003), (2, 0.005)]).unwrap() - 0.25).abs() < 1e-12);

    let mu = [200.0];
    let service = predict(100.0, &mu).unwrap().service;
    let steady = windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.006)]).unwrap();
    let plain = in_situ_latency(100.0, &mu, service, 0.006).unwrap();
    assert!((steady - plain).abs() < 1e-12);
    // 4 and 8 ms half the time each: the mean of M/D/1 at ρ 0.4 and 0.8, more than at 6 ms.
    let moving =
        windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.004), (10, 0.008)]).unwrap();
    let halves = (in_situ_latency(100.0, &mu, service, 0.004).unwrap()
        + in_situ_latency(100.0, &mu, service, 0.008).unwrap())
        / 2.0;
    assert!((moving - halves).abs() < 1e-12);
    assert!(moving > plain * 1.1, "{moving} vs {plain}");
    // A stretch too slow to keep up has no quasi-static reading.
    assert_eq!(
        windowed_in_situ_latency(100.0, &mu, service, &[(10, 0.004), (10, 0.011)]),
        None
    );
    assert_eq!(windowed_in_situ_latency(100.0, &mu, service, &[]), None);
}

/// The spread second profile: at least five rounds, at least two requests a round, the
/// rounds' gaps adding up to the span asked for; the one before each configuration is the
/// first's options, quiet.
#[test]
fn the_second_profiles_take_the_first_ones_options_with_their_own_rounds() {
    use std::time::Duration;
    let first = ProfileOptions {
        samples: 10,
        rounds: 3,
        ..ProfileOptions::default()
    };
    let spread = SecondProfile::Spread {
        over: Duration::from_secs(60),
    }
    .options(&first);
    assert_eq!((spread.rounds, spread.samples), (5, 10));
    assert_eq!(spread.round_gap, Duration::from_secs(15));
    assert!(!spread.progress);
    let many = SecondProfile::Spread {
        over: Duration::from_secs(70),
    }
    .options(&ProfileOptions {
        samples: 10,
        rounds: 8,
        ..first
    });
    assert_eq!((many.rounds, many.samples), (8, 16));
    assert_eq!(many.round_gap, Duration::from_secs(10));
    let again = SecondProfile::BeforeEachConfiguration.options(&first);
    assert_eq!(
        again,
        ProfileOptions {
            progress: false,
            ..first
        }
    );
    let unqueued = SecondProfile::WithoutQueue.options(&first);
    assert_eq!(
        unqueued,
        ProfileOptions {
            without_queue: true,
            ..again
        }
    );
}

#[test]
fn requests_grow_with_load_within_bounds() {
    let config = SerfBenchConfig {
        models: vec![],
        requests: 2000,
        min_requests: 200,
        point_seconds: 5.0,
        loads: 10,
        headroom: 0.9,
        profile: ProfileOptions::default(),
        second_profile: None,
    };
    assert_eq!(requests_at(&config, 10, 1000.0), 2000);
    assert_eq!(requests_at(&config, 5, 1000.0), 1000);
    assert_eq!(requests_at(&config, 1, 1000.0), 200);
    // Slow model: capped by time, floored by min_requests.
    assert_eq!(requests_at(&config, 10, 30.0), 200);
    assert_eq!(requests_at(&config, 10, 100.0), 500);
}

#[test]
fn best_at_load_tolerates_five_percent() {
    let b = BestAtLoad {
        level: 1,
        lambda: 1.0,
        predicted: Config::new(1, 2),
        measured: Config::new(2, 1),
        ratio: 1.04,
    };
    assert!(b.acceptable());
    assert!(!BestAtLoad { ratio: 1.2, ..b }.acceptable());
}
