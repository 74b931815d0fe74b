//! A plan as the status document shows it: every node with its kind, its one-line settings (as
//! `weir validate` prints them), what it reads, whether it fans out, joins or gathers, and for a
//! model node its replicas (local or remote, with their labels), routing, parity coding and
//! replication; and the edges between them, `ingress` and `egress` included.

use serde_json::{json, Value};
use weir_engine::placement::ReplicaTarget;
use weir_engine::plan::{lineage_id, NodeKind, Plan, PlannedNode};
use weir_engine::routing::Routing;

/// The graph's nodes (plan order) and edges, without live figures.
pub(super) fn graph(plan: &Plan) -> (Vec<Value>, Vec<Value>) {
    let nodes = plan.nodes.iter().map(|n| node(plan, n)).collect();
    let mut edges = Vec::new();
    for n in &plan.nodes {
        for &p in &n.producer_ids {
            edges.push(json!({"from": plan.producer_name(p), "to": n.node.id, "kind": "data"}));
        }
        if let NodeKind::Gather(g) = &n.node.kind {
            edges.push(
                json!({"from": plan.producer_name(g.fanout), "to": n.node.id, "kind": "parts"}),
            );
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for o in &plan.outputs {
        let from = plan.producer_name(lineage_id(o.producer));
        if !seen.contains(&from) {
            seen.push(from);
            edges.push(json!({"from": from, "to": "egress", "kind": "data"}));
        }
    }
    (nodes, edges)
}

fn node(plan: &Plan, n: &PlannedNode) -> Value {
    let mut v = json!({
        "id": n.node.id,
        "label": plan.node_label(n),
        "inputs": n.producer_ids.iter().map(|&p| plan.producer_name(p)).collect::<Vec<_>>(),
        "join": n.needs_join(),
        "fan_out": n.fans_out(),
    });
    match &n.node.kind {
        NodeKind::Model(m) => {
            v["kind"] = json!("model");
            v["replicas"] = m.replicas.iter().map(replica).collect();
            v["routing"] = json!(match &m.routing {
                Routing::LeastOutstanding => "least_outstanding",
                Routing::RoundRobin => "round_robin",
                Routing::Kairos(_) => "kairos",
            });
            if let Routing::Kairos(k) = &m.routing {
                v["kairos_qos_ms"] = json!(k.qos_ms);
            }
            v["parity"] = m.parity.as_ref().map_or(Value::Null, |p| {
                json!({
                    "k": p.k(),
                    "r": p.r(),
                    "encoder": p.encoder.id,
                    "parity_nodes": p.models.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
                    "decoder": p.decoder.id,
                })
            });
            v["stateful"] = m.state.as_ref().map_or(Value::Null, |s| {
                json!({"mode": s.mode.name(), "members": m.replicas.iter().map(ReplicaTarget::name).collect::<Vec<_>>()})
            });
            v["auto_parallelism"] = json!(m.auto_parallelism.is_some());
        }
        NodeKind::Op(_) => v["kind"] = json!("op"),
        NodeKind::Gather(g) => {
            v["kind"] = json!("gather");
            v["gathers"] = json!(plan.producer_name(g.fanout));
        }
    }
    v
}

fn replica(r: &ReplicaTarget) -> Value {
    match r {
        ReplicaTarget::Local => json!({"name": r.name(), "remote": false}),
        ReplicaTarget::Remote(e) => json!({
            "name": e.name,
            "remote": true,
            "endpoint": e.endpoint,
            "instance_type": e.labels.get("instance_type"),
        }),
    }
}
