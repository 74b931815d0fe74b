//! Tests of the profile: its file format and rules, and the service and path times after idle gaps.

use super::*;
use crate::idle::IdlePoint;

fn idle(threads: usize, points: &[(f64, f64)]) -> AfterIdle {
    AfterIdle {
        threads,
        points: points
            .iter()
            .map(|&(gap_s, mean_service_s)| IdlePoint {
                gap_s,
                mean_service_s,
                samples: 10,
                mean_path_s: None,
            })
            .collect(),
    }
}

#[test]
fn service_after_idle_gaps_round_trips_and_is_checked() {
    let mut p = Profile::from_rates(2, &[(2, vec![250.0]), (1, vec![125.0, 100.0])]).unwrap();
    assert!(p.idle_curve(2).is_none(), "not measured");
    assert!(
        !p.to_json().contains("after_idle"),
        "absent when not measured"
    );
    p.after_idle = vec![
        idle(1, &[(0.002, 0.0081), (0.05, 0.0095)]),
        idle(2, &[(0.01, 0.005)]),
    ];
    let back = Profile::from_json(&p.to_json()).unwrap();
    assert_eq!(back, p);
    // Anchored at the back-to-back time of (1, 2): 4 ms, 5 ms after 10 ms idle.
    let curve = back.idle_curve(2).unwrap();
    assert!((curve.service_after(0.0) - 0.004).abs() < 1e-12);
    assert!((curve.service_after(0.005) - 0.0045).abs() < 1e-12);
    // Every candidate carries the curve of its thread count.
    let candidates = crate::table::Candidates::from_profile(&back);
    for c in candidates.as_slice() {
        assert_eq!(
            c.after_idle,
            back.idle_curve(c.config.threads),
            "{}",
            c.config
        );
    }
    let rules = [
        (idle(3, &[(0.01, 0.005)]), "no series"),
        (idle(2, &[]), "no points"),
        (idle(2, &[(0.0, 0.005)]), "gap_s > 0"),
        (idle(2, &[(0.01, f64::NAN)]), "mean_service_s > 0"),
        (idle(2, &[(0.05, 0.005), (0.01, 0.005)]), "sorted by gap_s"),
    ];
    for (bad, says) in rules {
        let mut q = p.clone();
        q.after_idle = vec![bad];
        let e = q.validate().unwrap_err().to_string();
        assert!(e.contains(says), "{e}");
    }
    let mut twice = p.clone();
    twice.after_idle.push(idle(2, &[(0.02, 0.005)]));
    assert!(twice.validate().unwrap_err().to_string().contains("twice"));
}

#[test]
fn the_path_after_idle_gaps_grows_as_arrivals_thin_out() {
    let mut p = Profile::from_rates(2, &[(1, vec![1000.0, 900.0]), (2, vec![1800.0])]).unwrap();
    assert_eq!(p.path_after(100.0), 0.0, "not measured");
    p.path_s = Some(0.0001);
    assert_eq!(p.path_after(100.0), 0.0001, "back to back only");
    // Measured after 2 and 50 ms idle on one thread: 0.3 and 0.5 ms.
    let mut one = idle(1, &[(0.002, 0.0012), (0.05, 0.0015)]);
    one.points[0].mean_path_s = Some(0.0003);
    one.points[1].mean_path_s = Some(0.0005);
    // The two-thread graph's path is not the one the curve uses.
    let mut two = idle(2, &[(0.002, 0.0007)]);
    two.points[0].mean_path_s = Some(0.009);
    p.after_idle = vec![one, two];
    p.validate().unwrap();
    let back = Profile::from_json(&p.to_json()).unwrap();
    assert_eq!(back, p);
    let (sparse, moderate, dense) = (p.path_after(1.0), p.path_after(100.0), p.path_after(1e5));
    assert!((sparse - 0.0005).abs() < 2e-5, "{sparse}");
    assert!(dense < 0.000101, "{dense}");
    assert!(
        dense < moderate && moderate < sparse,
        "{dense} {moderate} {sparse}"
    );
    assert!((p.predicted_latency(0.002, 1.0) - 0.002 - sparse).abs() < 1e-15);
    let mut broken = p.clone();
    broken.after_idle[0].points[1].mean_path_s = Some(-0.001);
    let e = broken.validate().unwrap_err().to_string();
    assert!(e.contains("points[1].mean_path_s"), "{e}");
}

#[test]
fn profile_json_round_trip_and_rules() {
    let mut p = Profile::from_rates(2, &[(2, vec![580.0]), (1, vec![315.0, 315.0])]).unwrap();
    p.label = Some("squeezenet".into());
    p.wall_s = Some(0.5);
    p.measured_in = Some(MeasuredIn::Graph);
    p.path_s = Some(0.0004);
    assert_eq!(p.series[0].threads, 1);
    let text = p.to_json();
    assert!(text.contains("\"measured_in\": \"graph\""), "{text}");
    assert!((p.predicted_latency(0.002, 50.0) - 0.0024).abs() < 1e-12);
    let back = Profile::from_json(&text).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.to_json(), text);
    let dir = std::env::temp_dir().join(format!("weir-serf-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("p.serf.json");
    p.save(&file).unwrap();
    assert_eq!(Profile::load(&file).unwrap(), p);
    assert!(matches!(
        Profile::load(&dir.join("missing.json")),
        Err(ProfileError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    // Rule violations.
    assert!(matches!(
        Profile::from_json("{"),
        Err(ProfileError::Json(_))
    ));
    let wrong = text.replace(FORMAT, "weir-serf-profile/9");
    assert!(matches!(
        Profile::from_json(&wrong),
        Err(ProfileError::Format { .. })
    ));
    assert!(Profile::from_rates(2, &[(2, vec![1.0, 1.0])]).is_err()); // 2 × 2 > 2 cores
    assert!(Profile::from_rates(2, &[(1, vec![1.0]), (1, vec![1.0])]).is_err()); // duplicate
    assert!(Profile::from_rates(2, &[(1, vec![0.0])]).is_err());
    let negative_path = text.replace("\"path_s\": 0.0004", "\"path_s\": -0.1");
    assert!(matches!(
        Profile::from_json(&negative_path),
        Err(ProfileError::Invalid(m)) if m.contains("path_s")
    ));
    let extra = text.replacen("\"cores\"", "\"bogus\": 1, \"cores\"", 1);
    assert!(matches!(
        Profile::from_json(&extra),
        Err(ProfileError::Json(_))
    ));
}
