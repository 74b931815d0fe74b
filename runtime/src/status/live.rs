//! Live figures of a node (a model node's executor, a tensor op, a gather) over the last tick: counters read at two moments and turned into
//! rates, means and call-time quantiles. Pure arithmetic over snapshots, so it is tested without
//! a running graph; a figure with nothing to measure in the window is `null`, never a made-up 0.

use serde_json::{json, Value};
use weir_engine::dataflow::gather_stats::GatherSnapshot;
use weir_operators::model::executor::CALL_SECONDS_BOUNDS;
use weir_operators::model::{ExecutorReport, LoadSnapshot};
use weir_operators::tensor::operator::OpSnapshot;

/// The `q` quantile (0..=1), in seconds, of calls counted per duration bucket (`counts[i]` calls
/// at most `bounds[i]` and above `bounds[i - 1]`; the last bucket is open), interpolated inside
/// its bucket; a quantile in the open bucket is its lower bound. `None` without calls.
pub(super) fn quantile(counts: &[u64], bounds: &[f64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            let Some(&upper) = bounds.get(i) else {
                return Some(lower);
            };
            let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            return Some(lower + (upper - lower) * within);
        }
        below += n;
    }
    bounds.last().copied()
}

/// `now - before`, element-wise (counters only grow; a restart reads as 0).
fn delta<const N: usize>(now: &[u64; N], before: &[u64; N]) -> [u64; N] {
    std::array::from_fn(|i| now[i].saturating_sub(before[i]))
}

/// An executor's figures over the `secs` since `before` (`None`: first sample, whole counts
/// used for means and quantiles, no rates).
pub(super) fn executor(now: &LoadSnapshot, before: Option<&LoadSnapshot>, secs: f64) -> Value {
    let zero = LoadSnapshot::default();
    let b = before.unwrap_or(&zero);
    let runs = now.runs.saturating_sub(b.runs);
    let rows = now.rows.saturating_sub(b.rows);
    let jobs = now.jobs_answered.saturating_sub(b.jobs_answered);
    let sojourn = now.sojourn.saturating_sub(b.sojourn);
    let calls = delta(&now.call_seconds, &b.call_seconds);
    let rate = |n: u64| match (before, secs > 0.0) {
        (Some(_), true) => json!(n as f64 / secs),
        _ => Value::Null,
    };
    let ms = |s: Option<f64>| s.map_or(Value::Null, |s| json!(s * 1e3));
    json!({
        "rows_per_s": rate(rows),
        "calls_per_s": rate(runs),
        "queue_depth": now.queue_depth(),
        "mean_batch": if runs > 0 { json!(rows as f64 / runs as f64) } else { Value::Null },
        "call_p50_ms": ms(quantile(&calls, &CALL_SECONDS_BOUNDS, 0.5)),
        "call_p99_ms": ms(quantile(&calls, &CALL_SECONDS_BOUNDS, 0.99)),
        "latency_ms": if jobs > 0 { json!(sojourn.as_secs_f64() * 1e3 / jobs as f64) } else { Value::Null },
        "rows": now.rows,
        "errors": now.errors,
        "errors_per_s": rate(now.errors.saturating_sub(b.errors)),
    })
}

/// A tensor-op node's figures over the `secs` since `before` (`None`: first sample, no rates).
pub(super) fn op(now: &OpSnapshot, before: Option<&OpSnapshot>, secs: f64) -> Value {
    let zero = OpSnapshot::default();
    let b = before.unwrap_or(&zero);
    let rate = |n: u64| match (before, secs > 0.0) {
        (Some(_), true) => json!(n as f64 / secs),
        _ => Value::Null,
    };
    let batches = now.batches.saturating_sub(b.batches);
    let rows = now.rows.saturating_sub(b.rows);
    json!({
        "rows_per_s": rate(rows),
        "batches_per_s": rate(batches),
        "mean_batch": if batches > 0 { json!(rows as f64 / batches as f64) } else { Value::Null },
        "rows": now.rows,
        "errors": now.errors,
        "errors_per_s": rate(now.errors.saturating_sub(b.errors)),
    })
}

/// A gather node's figures over the `secs` since `before` (`None`: first sample, no rates; the
/// mean wait over all joins so far).
pub(super) fn gather(now: &GatherSnapshot, before: Option<&GatherSnapshot>, secs: f64) -> Value {
    let zero = GatherSnapshot::default();
    let b = before.unwrap_or(&zero);
    let rate = |n: u64| match (before, secs > 0.0) {
        (Some(_), true) => json!(n as f64 / secs),
        _ => Value::Null,
    };
    let joined = now.joined.saturating_sub(b.joined);
    let wait = now.wait.saturating_sub(b.wait);
    let closed = |s: &GatherSnapshot| s.failed + s.dropped;
    json!({
        "joined_per_s": rate(joined),
        "parts_per_s": rate(now.parts.saturating_sub(b.parts)),
        "waiting": now.waiting(),
        "mean_wait_ms": if joined > 0 { json!(wait.as_secs_f64() * 1e3 / joined as f64) } else { Value::Null },
        "joined": now.joined,
        "parts": now.parts,
        "failed": now.failed,
        "dropped": now.dropped,
        "errors": closed(now),
        "errors_per_s": rate(closed(now).saturating_sub(closed(b))),
    })
}

/// A remote replica's executor as it reports itself, with rates over the `secs` since `before`
/// (`None`: first sample or no earlier report, no rates). Counters its executor does not send
/// are `null`.
pub(super) fn reported(now: &ExecutorReport, before: Option<&ExecutorReport>, secs: f64) -> Value {
    let window = before.filter(|b| b.reported_ago.is_some() && secs > 0.0);
    let rate = |now: Option<u64>, before: Option<u64>| match (window, now, before) {
        (Some(_), Some(n), Some(b)) => json!(n.saturating_sub(b) as f64 / secs),
        _ => Value::Null,
    };
    let b = window.cloned().unwrap_or_default();
    let reported = now.reported_ago.is_some();
    let some = |v: u64| reported.then_some(v);
    json!({
        "report_age_s": now.reported_ago.map(|d| d.as_secs_f64()),
        "device": reported.then(|| now.device.clone()),
        "sessions": some(u64::from(now.sessions)),
        "queue_depth": some(now.queue_depth),
        "in_flight": now.in_flight,
        "rows": some(now.rows),
        "runs": some(now.runs),
        "served": now.served,
        "errors": now.errors,
        "rows_per_s": rate(some(now.rows), Some(b.rows)),
        "served_per_s": rate(now.served, b.served),
        "busy_s": reported.then_some(now.busy.as_secs_f64()),
        "preferred_batch": now.preferred_batch,
    })
}

/// A node with no executor in this process: its rows/s and queue are its remote replicas'
/// reports added up (`null` when none reported a rate yet), so its row reads as a local node's.
pub(super) fn from_reports(live: &mut Value, replicas: &[Value]) {
    let sum = |field: &str| {
        let values: Vec<f64> = replicas
            .iter()
            .filter_map(|r| r["executor"][field].as_f64())
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>())
    };
    live["rows_per_s"] = json!(sum("rows_per_s"));
    live["queue_depth"] = json!(sum("queue_depth"));
    live["from_reports"] = json!(true);
}

/// Shares of `now - before` per key (jobs dispatched per replica or instance type), over the
/// window when it saw any, else over all time; empty when nothing was ever dispatched.
pub(super) fn shares(now: &[(String, u64)], before: &[(String, u64)]) -> Value {
    let window: Vec<(&str, u64)> = now
        .iter()
        .map(|(k, n)| {
            let b = before.iter().find(|(kb, _)| kb == k).map_or(0, |(_, n)| *n);
            (k.as_str(), n.saturating_sub(b))
        })
        .collect();
    let total: u64 = window.iter().map(|(_, n)| n).sum();
    let (pairs, total): (Vec<(&str, u64)>, u64) = if total > 0 {
        (window, total)
    } else {
        let all: u64 = now.iter().map(|(_, n)| n).sum();
        (now.iter().map(|(k, n)| (k.as_str(), *n)).collect(), all)
    };
    if total == 0 {
        return json!({});
    }
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, n)| (k.to_string(), json!(n as f64 / total as f64)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let bounds = [1.0, 2.0, 4.0];
        assert_eq!(quantile(&[0, 0, 0, 0], &bounds, 0.5), None);
        assert_eq!(quantile(&[10, 0, 0, 0], &bounds, 0.5), Some(0.5));
        assert_eq!(quantile(&[0, 10, 0, 0], &bounds, 0.99), Some(1.99));
        // In the open bucket: its lower bound.
        assert_eq!(quantile(&[1, 0, 0, 99], &bounds, 0.99), Some(4.0));
    }

    #[test]
    fn figures_are_over_the_window_and_null_without_one() {
        let before = LoadSnapshot {
            runs: 10,
            rows: 40,
            jobs_answered: 10,
            sojourn: Duration::from_millis(100),
            ..Default::default()
        };
        let now = LoadSnapshot {
            enqueued: 25,
            dequeued: 20,
            runs: 20,
            rows: 100,
            jobs_answered: 20,
            sojourn: Duration::from_millis(300),
            ..Default::default()
        };
        let f = executor(&now, Some(&before), 2.0);
        assert_eq!(f["rows_per_s"], json!(30.0));
        assert_eq!(f["mean_batch"], json!(6.0));
        assert_eq!(f["queue_depth"], json!(5));
        assert_eq!(f["latency_ms"], json!(20.0));
        assert_eq!(f["call_p50_ms"], Value::Null);
        assert_eq!(executor(&now, None, 0.0)["rows_per_s"], Value::Null);
    }

    #[test]
    fn op_figures_are_rates_over_the_window() {
        let before = OpSnapshot {
            batches: 2,
            rows: 10,
            errors: 1,
        };
        let now = OpSnapshot {
            batches: 6,
            rows: 30,
            errors: 3,
        };
        let f = op(&now, Some(&before), 2.0);
        assert_eq!(f["rows_per_s"], json!(10.0));
        assert_eq!(f["batches_per_s"], json!(2.0));
        assert_eq!(f["mean_batch"], json!(5.0));
        assert_eq!(f["errors"], json!(3));
        assert_eq!(f["errors_per_s"], json!(1.0));
        assert_eq!(op(&now, None, 0.0)["rows_per_s"], Value::Null);
    }

    #[test]
    fn gather_figures_are_joins_over_the_window() {
        let before = GatherSnapshot {
            opened: 10,
            parts: 30,
            joined: 8,
            failed: 1,
            dropped: 0,
            wait: Duration::from_millis(80),
        };
        let now = GatherSnapshot {
            opened: 20,
            parts: 70,
            joined: 16,
            failed: 1,
            dropped: 1,
            wait: Duration::from_millis(240),
        };
        let f = gather(&now, Some(&before), 2.0);
        assert_eq!(f["joined_per_s"], json!(4.0));
        assert_eq!(f["parts_per_s"], json!(20.0));
        assert_eq!(f["waiting"], json!(2));
        assert_eq!(f["mean_wait_ms"], json!(20.0));
        assert_eq!(f["errors"], json!(2));
        assert_eq!(f["errors_per_s"], json!(0.5));
        let first = gather(&now, None, 0.0);
        assert_eq!(first["joined_per_s"], Value::Null);
        assert_eq!(first["mean_wait_ms"], json!(15.0));
        let idle = gather(&now, Some(&now), 1.0);
        assert_eq!(idle["joined_per_s"], json!(0.0));
        assert_eq!(idle["mean_wait_ms"], Value::Null);
    }

    #[test]
    fn an_executor_s_own_figures_are_rates_over_the_window_and_null_where_unsent() {
        let before = ExecutorReport {
            reported_ago: Some(Duration::from_millis(200)),
            rows: 10,
            served: Some(4),
            ..Default::default()
        };
        let now = ExecutorReport {
            heard_ago: Duration::from_millis(100),
            reported_ago: Some(Duration::from_millis(100)),
            device: "cpu".into(),
            queue_depth: 2,
            in_flight: Some(3),
            rows: 30,
            served: Some(8),
            preferred_batch: Some(4),
            ..Default::default()
        };
        let f = reported(&now, Some(&before), 2.0);
        assert_eq!(f["preferred_batch"], json!(4));
        assert_eq!(f["rows_per_s"], json!(10.0));
        assert_eq!(f["served_per_s"], json!(2.0));
        assert_eq!(f["in_flight"], json!(3));
        assert_eq!(f["queue_depth"], json!(2));
        assert_eq!(
            f["errors"],
            Value::Null,
            "an older executor sends no errors"
        );
        assert_eq!(reported(&now, None, 0.0)["rows_per_s"], Value::Null);
        let silent = reported(&ExecutorReport::default(), None, 0.0);
        assert_eq!(silent["rows"], Value::Null, "no report yet");
        assert_eq!(silent["report_age_s"], Value::Null);
        assert_eq!(silent["preferred_batch"], Value::Null);
    }

    #[test]
    fn a_node_served_only_remotely_adds_up_its_replicas_reports() {
        let replicas = vec![
            json!({"name": "a", "executor": {"rows_per_s": 10.0, "queue_depth": 2}}),
            json!({"name": "b", "executor": {"rows_per_s": 5.5, "queue_depth": 0}}),
            json!({"name": "c"}),
        ];
        let mut live = json!({"expired": 0});
        from_reports(&mut live, &replicas);
        assert_eq!(live["rows_per_s"], json!(15.5));
        assert_eq!(live["queue_depth"], json!(2.0));
        let mut none = json!({});
        from_reports(&mut none, &[json!({"name": "c"})]);
        assert_eq!(none["rows_per_s"], Value::Null);
    }

    #[test]
    fn shares_fall_back_to_all_time_when_the_window_is_empty() {
        let now = vec![("a".to_string(), 30), ("b".to_string(), 10)];
        assert_eq!(shares(&now, &now), json!({"a": 0.75, "b": 0.25}));
        let before = vec![("a".to_string(), 30), ("b".to_string(), 0)];
        assert_eq!(shares(&now, &before), json!({"a": 0.0, "b": 1.0}));
        assert_eq!(shares(&[], &[]), json!({}));
    }
}
