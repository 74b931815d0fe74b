//! The status document of the graphs a process runs, as `/v2/weir/status` and the dashboard show
//! it: each graph's structure as the planner decided it ([`structure`]) and each node's live
//! figures over the last sample ([`live`]): a tensor op's rows, batches and errors; a gather's
//! joins per second, joins waiting for parts, failed or dropped joins and mean wait; executor
//! throughput, queue, batch, call-time quantiles, errors and expired rows; replica liveness and
//! a remote replica's executor as it reports itself (last heard, its queue, jobs held, rows and
//! jobs served, errors); dispatch shares (per instance type under Kairos); SERF's running configuration with its predicted against measured latency;
//! ParM's counters; HAMS epoch, primary, backup and durable lag; the ids of the newest requests
//! whose paths the graph keeps.
//!
//! A [`StatusBoard`] keeps the previous sample's counters, so rates are over the time between two
//! samples; the feed samples it once per tick. Reading it takes no lock a request holds: counters
//! are atomics and the handles' own snapshots (the path store's lock is held by a reply only while
//! it appends one path).

mod live;
mod structure;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use weir_engine::dataflow::gather_stats::GatherSnapshot;
use weir_engine::placement::ReplicaTarget;
use weir_engine::plan::NodeKind;
use weir_engine::runtime::GraphRuntime;
use weir_hams_manager::HamsManager;
use weir_operators::model::{ExecutorReport, LoadSnapshot};
use weir_operators::tensor::operator::OpSnapshot;
use weir_operators::OperatorFactory;

use crate::RunningGraph;

/// Recent request ids each graph's document lists (the page's "request path" panel; the
/// whole list is `/v2/weir/requests`).
pub const RECENT_PATHS: usize = 16;

/// What the board reads of one running graph.
#[derive(Debug, Clone)]
pub struct GraphProbe {
    runtime: Arc<GraphRuntime>,
    factory: Arc<OperatorFactory>,
    hams: Option<Arc<HamsManager>>,
}

impl RunningGraph {
    /// The handles the status board reads this graph through (they outlive this borrow).
    pub fn status_probe(&self) -> GraphProbe {
        GraphProbe {
            runtime: Arc::clone(&self.runtime),
            factory: Arc::clone(&self.factory),
            hams: self.hams.clone(),
        }
    }
}

/// One graph's counters at the last sample.
#[derive(Debug, Default)]
struct Previous {
    admitted: u64,
    answered: u64,
    executors: HashMap<String, LoadSnapshot>,
    ops: HashMap<String, OpSnapshot>,
    gathers: HashMap<String, GatherSnapshot>,
    /// Jobs dispatched per replica, by node.
    dispatched: HashMap<String, Vec<(String, u64)>>,
    /// What each remote replica's executor reported, by node.
    reports: HashMap<String, Vec<(String, ExecutorReport)>>,
    /// Batches a stateful node numbered, by node.
    batches: HashMap<String, u64>,
}

/// The name the graph gives the member whose key prefix (or name) is `role`.
fn member_name(members: &[ReplicaTarget], role: String) -> String {
    members
        .iter()
        .find_map(|m| match m {
            ReplicaTarget::Remote(e) if e.key_prefix == role || e.name == role => {
                Some(e.name.clone())
            }
            _ => None,
        })
        .unwrap_or(role)
}

/// The status of a process's graphs, sampled again at every [`StatusBoard::sample`].
#[derive(Debug)]
pub struct StatusBoard {
    graphs: Vec<(GraphProbe, Previous)>,
    at: Option<Instant>,
    samples: u64,
}

impl StatusBoard {
    /// A board over `graphs`.
    pub fn new(graphs: Vec<GraphProbe>) -> StatusBoard {
        StatusBoard {
            graphs: graphs
                .into_iter()
                .map(|g| (g, Previous::default()))
                .collect(),
            at: None,
            samples: 0,
        }
    }

    /// The document now, rates over the time since the previous sample.
    pub fn sample(&mut self) -> Value {
        let now = Instant::now();
        let secs = self
            .at
            .map_or(0.0, |at| now.duration_since(at).as_secs_f64());
        let first = self.at.is_none();
        self.at = Some(now);
        self.samples += 1;
        let graphs: Vec<Value> = self
            .graphs
            .iter_mut()
            .map(|(probe, prev)| graph(probe, prev, secs, first))
            .collect();
        json!({
            "sample": self.samples,
            "interval_s": secs,
            "graphs": graphs,
        })
    }
}

fn graph(probe: &GraphProbe, prev: &mut Previous, secs: f64, first: bool) -> Value {
    let plan = probe.runtime.plan();
    let (mut nodes, edges) = structure::graph(plan);
    let executors: HashMap<String, LoadSnapshot> =
        probe.factory.executor_stats().into_iter().collect();
    let expired: HashMap<String, u64> = probe.factory.expired_rows().into_iter().collect();
    let ops: HashMap<String, OpSnapshot> = probe.factory.op_stats().into_iter().collect();
    let gathers: HashMap<String, GatherSnapshot> =
        probe.factory.gather_stats().into_iter().collect();
    let pools: HashMap<_, _> = probe.factory.replica_pools().into_iter().collect();
    let serf: HashMap<_, _> = probe.factory.parallelism_stats().into_iter().collect();
    let parity: HashMap<_, _> = probe.factory.parity_services().into_iter().collect();
    let stateful: HashMap<String, _> = probe
        .factory
        .stateful_nodes()
        .into_iter()
        .map(|h| (h.node.clone(), h))
        .collect();
    let roles: HashMap<String, (u64, Option<String>, Option<String>)> = probe
        .hams
        .as_ref()
        .map(|m| m.roles())
        .unwrap_or_default()
        .into_iter()
        .map(|(n, e, p, b)| (n, (e, p, b)))
        .collect();
    for (v, planned) in nodes.iter_mut().zip(&plan.nodes) {
        let id = planned.node.id.as_str();
        if let Some(now) = ops.get(id) {
            v["live"] = live::op(now, (!first).then(|| prev.ops.get(id)).flatten(), secs);
        }
        if let Some(now) = gathers.get(id) {
            let before = (!first).then(|| prev.gathers.get(id)).flatten();
            v["live"] = live::gather(now, before, secs);
        }
        let NodeKind::Model(m) = &planned.node.kind else {
            continue;
        };
        let mut live = executors
            .get(id)
            .map(|now| {
                live::executor(
                    now,
                    (!first).then(|| prev.executors.get(id)).flatten(),
                    secs,
                )
            })
            .unwrap_or_else(|| json!({}));
        live["expired"] = json!(expired.get(id));
        if let Some(pool) = pools.get(id) {
            let states = pool.replica_states();
            let reports = pool.executor_reports();
            let reported_before = prev.reports.remove(id).unwrap_or_default();
            if let Some(replicas) = v["replicas"].as_array_mut() {
                for r in replicas.iter_mut() {
                    let name = r["name"].as_str().unwrap_or_default().to_string();
                    if let Some((_, now)) = reports.iter().find(|(n, _)| *n == name) {
                        let before = reported_before
                            .iter()
                            .find(|(n, _)| *n == name)
                            .map(|(_, b)| b)
                            .filter(|_| !first);
                        r["heard_ago_s"] = json!(now.heard_ago.as_secs_f64());
                        r["executor"] = live::reported(now, before, secs);
                    }
                    if let Some((_, alive, outstanding, dispatched)) = states
                        .iter()
                        .find(|s| Some(s.0.as_str()) == r["name"].as_str())
                    {
                        r["alive"] = json!(alive);
                        r["outstanding"] = json!(outstanding);
                        r["dispatched"] = json!(dispatched);
                    }
                }
            }
            if !executors.contains_key(id) {
                if let Some(replicas) = v["replicas"].as_array() {
                    live::from_reports(&mut live, replicas);
                }
            }
            prev.reports.insert(id.to_string(), reports);
            let now: Vec<(String, u64)> = states.iter().map(|s| (s.0.clone(), s.3)).collect();
            let before = prev.dispatched.get(id).cloned().unwrap_or_default();
            let by_type = |d: &[(String, u64)]| -> Vec<(String, u64)> {
                let mut out: Vec<(String, u64)> = Vec::new();
                for (name, n) in d {
                    let ty = m
                        .replicas
                        .iter()
                        .find(|r| r.name() == name)
                        .and_then(|r| match r {
                            ReplicaTarget::Remote(e) => e.labels.get("instance_type").cloned(),
                            ReplicaTarget::Local => None,
                        })
                        .unwrap_or_else(|| name.clone());
                    match out.iter_mut().find(|(t, _)| *t == ty) {
                        Some(slot) => slot.1 += n,
                        None => out.push((ty, *n)),
                    }
                }
                out
            };
            v["shares"] = live::shares(&now, &before);
            v["shares_by_type"] = live::shares(&by_type(&now), &by_type(&before));
            let stats = pool.stats();
            live["redispatched"] = json!(stats.redispatched);
            live["failed"] = json!(stats.failed);
            let jobs: u64 = now.iter().map(|(_, n)| n).sum();
            let jobs_before: u64 = before.iter().map(|(_, n)| n).sum();
            if !first && secs > 0.0 {
                live["jobs_per_s"] = json!(jobs.saturating_sub(jobs_before) as f64 / secs);
            }
            prev.dispatched.insert(id.to_string(), now);
        } else if let Some(replicas) = v["replicas"].as_array_mut() {
            // One in-process executor: alive while the graph runs.
            for r in replicas.iter_mut() {
                r["alive"] = json!(true);
            }
        }
        if let Some(p) = serf.get(id) {
            let predicted = p
                .standings
                .iter()
                .find(|s| s.config.concurrency == p.concurrency && s.config.threads == p.threads)
                .and_then(|s| s.estimate)
                .map(|e| e.latency * 1e3);
            v["serf"] = json!({
                "concurrency": p.concurrency,
                "threads": p.threads,
                "switches": p.switches,
                "arrival_rate": p.arrival_rate,
                "waiting": p.waiting,
                "predicted_ms": predicted,
                "measured_ms": live.get("latency_ms").cloned().unwrap_or(Value::Null),
            });
        }
        if let Some(p) = parity.get(id) {
            let s = p.stats();
            v["parm"] = json!({
                "groups": s.groups,
                "parity_dispatched": s.parity_dispatched,
                "reconstructed": s.reconstructed,
                "late_real": s.late_real,
            });
        }
        if let Some(h) = stateful.get(id) {
            let s = h.status();
            let (epoch, primary, backup) =
                roles
                    .get(id)
                    .cloned()
                    .unwrap_or((s.epoch, s.primary.clone(), None));
            // Roles name an executor by its key prefix; the page names it as the graph does.
            let named = |role: Option<String>| role.map(|r| member_name(&h.members, r));
            let (primary, backup) = (named(primary), named(backup));
            let backups: Vec<String> = match backup {
                Some(b) => vec![b],
                None => h
                    .members
                    .iter()
                    .map(|r| r.name().to_string())
                    .filter(|n| Some(n) != primary.as_ref())
                    .collect(),
            };
            if !first && secs > 0.0 {
                let before = prev.batches.get(id).copied().unwrap_or(s.last_seq);
                live["jobs_per_s"] = json!(s.last_seq.saturating_sub(before) as f64 / secs);
            }
            prev.batches.insert(id.to_string(), s.last_seq);
            v["hams"] = json!({
                "epoch": epoch,
                "primary": primary,
                "backups": backups,
                "paused": s.paused,
                "last_seq": s.last_seq,
                "durable": s.durable,
                "durable_lag": s.last_seq.saturating_sub(s.durable),
                "recorded_rows": s.recorded,
                "undurable_batches": s.undurable,
            });
        }
        v["live"] = live;
    }
    prev.executors = executors;
    prev.ops = ops;
    prev.gathers = gathers;
    let admitted = probe.runtime.admission().admitted();
    let answered = probe.runtime.answered();
    let rate = |now: u64, before: u64| {
        (!first && secs > 0.0).then(|| now.saturating_sub(before) as f64 / secs)
    };
    let recoveries = probe
        .hams
        .as_ref()
        .map(|m| m.recoveries())
        .unwrap_or_default();
    let doc = json!({
        "name": plan.name,
        "inputs": plan.inputs.iter().map(|i| i.name.clone()).collect::<Vec<_>>(),
        "outputs": plan.outputs.iter().map(|o| json!({"name": o.name, "column": o.column})).collect::<Vec<_>>(),
        "nodes": nodes,
        "edges": edges,
        "live": {
            "requests_per_s": rate(admitted, prev.admitted),
            "answered_per_s": rate(answered, prev.answered),
            "in_flight": probe.runtime.in_flight(),
            "max_in_flight": probe.runtime.max_in_flight(),
            "admitted": admitted,
            "answered": answered,
        },
        "paths": {
            "every": probe.runtime.paths().every(),
            "recent": probe.runtime.paths().recent_ids(RECENT_PATHS),
        },
        "failovers": recoveries.iter().rev().take(8).map(|r| json!({
            "node": r.node,
            "reason": r.reason,
            "ago_s": r.detected_at.elapsed().as_secs_f64(),
            "protocol_ms": r.protocol.as_secs_f64() * 1e3,
            "retried": r.retried,
        })).collect::<Vec<_>>(),
    });
    prev.admitted = admitted;
    prev.answered = answered;
    doc
}
