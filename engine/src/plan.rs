//! `ValidGraph → Plan`: the graph as it will run, with lineage ids and the stages each node becomes.
//!
//! Planning is pure and deterministic, so its text and DOT forms can be golden-tested and printed
//! by `weir validate`. Today a node becomes one stage, preceded by a join when it reads from more
//! than one producer; the mechanism issues (parity coding, routing, parallelism choice) expand nodes
//! here, never in the compiler.

use std::fmt::Write;

use crate::lineage::INGRESS;
use crate::stream::StreamConnector;
use crate::validate::{
    GraphInput, GraphOutput, NodeKind, Producer, ReplicaTarget, ValidGraph, ValidNode,
};

/// A node as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedNode {
    /// Its id in lineage entries (`1..`; `0` is the ingress).
    pub lineage_id: u32,
    /// The validated node.
    pub node: ValidNode,
    /// Lineage ids of the distinct producers it reads from.
    pub producer_ids: Vec<u32>,
}

impl PlannedNode {
    /// Whether a join by request id runs in front of this node.
    pub fn needs_join(&self) -> bool {
        self.producer_ids.len() > 1
    }
}

/// The graph as it will run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Graph name.
    pub name: String,
    /// Inputs, in the order request tensors are laid out.
    pub inputs: Vec<GraphInput>,
    /// Nodes in topological order.
    pub nodes: Vec<PlannedNode>,
    /// Outputs.
    pub outputs: Vec<GraphOutput>,
    /// Streaming connectors to run besides any HTTP server.
    pub streams: Vec<StreamConnector>,
}

/// Lineage id of a producer.
pub fn lineage_id(p: Producer) -> u32 {
    match p {
        Producer::Ingress => INGRESS,
        Producer::Node(i) => i as u32 + 1,
    }
}

/// Plans a validated graph.
pub fn plan(valid: &ValidGraph) -> Plan {
    let nodes = valid
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| PlannedNode {
            lineage_id: i as u32 + 1,
            node: n.clone(),
            producer_ids: n.producers().into_iter().map(lineage_id).collect(),
        })
        .collect();
    Plan {
        name: valid.name.clone(),
        inputs: valid.inputs.clone(),
        nodes,
        outputs: valid.outputs.clone(),
        streams: valid.streams.clone(),
    }
}

fn kind_label(kind: &NodeKind) -> String {
    match kind {
        NodeKind::Model(m) => format!(
            "model {} ({}, {} instance(s) × {} thread(s){}{}{}{})",
            m.path.file_name().and_then(|s| s.to_str()).unwrap_or("?"),
            if m.batched {
                format!(
                    "batched ≤ {} within {} µs",
                    m.batching.max_size, m.batching.max_delay_us
                )
            } else {
                "per request".to_string()
            },
            m.executor.instances,
            m.executor.intra_op_threads,
            if m.executor.spinning {
                ", spinning"
            } else {
                ""
            },
            if m.replicas == [ReplicaTarget::Local] {
                String::new()
            } else {
                let names: Vec<&str> = m.replicas.iter().map(ReplicaTarget::name).collect();
                format!(", replicas: {}", names.join(" "))
            } + &match &m.routing {
                crate::routing::Routing::LeastOutstanding => String::new(),
                crate::routing::Routing::RoundRobin => ", routing: round_robin".to_string(),
                crate::routing::Routing::Kairos(k) => format!(
                    ", routing: kairos qos {} ms, latency {}",
                    k.qos_ms,
                    k.profile_path
                        .as_ref()
                        .and_then(|p| p.file_name())
                        .and_then(|s| s.to_str())
                        .map_or("learned online".to_string(), |f| format!("from {f}"))
                ),
            } + &match &m.state {
                None => String::new(),
                Some(st) => format!(
                    ", state {} → {}, replication {}{}",
                    st.state
                        .iter()
                        .map(|p| p.output.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                    st.state
                        .iter()
                        .map(|p| p.input.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                    st.mode.name(),
                    match st.mode {
                        crate::spec::ReplicationMode::None => String::new(),
                        crate::spec::ReplicationMode::Checkpoint => format!(
                            " (every {} batches, detect {} ms)",
                            st.checkpoint_every,
                            st.detect.as_millis()
                        ),
                        _ => format!(
                            " (detect {} ms, pipeline {})",
                            st.detect.as_millis(),
                            st.pipeline
                        ),
                    }
                ),
            },
            match &m.parity {
                Some(p) => format!(
                    ", parity k={} with {}",
                    p.k,
                    p.path.file_name().and_then(|s| s.to_str()).unwrap_or("?")
                ),
                None => String::new(),
            },
            match &m.auto_parallelism {
                Some(a) => format!(
                    ", parallelism auto over {} configurations from {}{}",
                    a.configs().len(),
                    a.profile_path
                        .file_name()
                        .and_then(|s| s.to_str())
                        .unwrap_or("?"),
                    a.max_utilisation
                        .map_or_else(String::new, |u| format!(", utilisation cap {u}"))
                ),
                None => String::new(),
            }
        ),
        NodeKind::Normalize { mean, std } => format!("normalize mean={mean:?} std={std:?}"),
        NodeKind::Argmax => "argmax".into(),
        NodeKind::TopK { k } => format!("top_k k={k}"),
        NodeKind::Concat { axis } => format!("concat axis={axis}"),
    }
}

impl Plan {
    fn producer_name(&self, id: u32) -> &str {
        if id == INGRESS {
            "ingress"
        } else {
            &self.nodes[id as usize - 1].node.id
        }
    }

    /// A human-readable description, one line per stage.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "graph `{}`", self.name);
        for i in &self.inputs {
            let _ = writeln!(s, "  input  {}: {}", i.name, i.ty);
        }
        for n in &self.nodes {
            let from: Vec<&str> = n
                .producer_ids
                .iter()
                .map(|&p| self.producer_name(p))
                .collect();
            let join = if n.needs_join() {
                " (joined by request id)"
            } else {
                ""
            };
            let _ = writeln!(
                s,
                "  node   {} [{}] ← {}{join}",
                n.node.id,
                kind_label(&n.node.kind),
                from.join(", ")
            );
            for (name, ty) in &n.node.outputs {
                let _ = writeln!(s, "           → {}.{name}: {ty}", n.node.id);
            }
        }
        for o in &self.outputs {
            let _ = writeln!(s, "  output {} ← {}: {}", o.name, o.column, o.ty);
        }
        s
    }

    /// The plan as a Graphviz DOT digraph.
    pub fn dot(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "digraph \"{}\" {{", self.name);
        let _ = writeln!(
            s,
            "  rankdir=LR;\n  ingress [shape=invhouse];\n  egress [shape=house];"
        );
        for n in &self.nodes {
            let _ = writeln!(
                s,
                "  \"{}\" [shape=box, label=\"{}\\n{}\"];",
                n.node.id,
                n.node.id,
                kind_label(&n.node.kind).replace('"', "'")
            );
            for &p in &n.producer_ids {
                let _ = writeln!(s, "  \"{}\" -> \"{}\";", self.producer_name(p), n.node.id);
            }
        }
        let mut seen = Vec::new();
        for o in &self.outputs {
            let from = self.producer_name(lineage_id(o.producer));
            if !seen.contains(&from) {
                seen.push(from);
                let _ = writeln!(s, "  \"{from}\" -> egress;");
            }
        }
        s.push_str("}\n");
        s
    }

    /// Lineage ids of the distinct producers of the graph outputs.
    pub fn output_producer_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self
            .outputs
            .iter()
            .map(|o| lineage_id(o.producer))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}
