//! A plan's text and DOT forms, as `weir validate` prints them: one line (or box) per node, with
//! everything the plan decided for it.

use std::fmt::Write;

use super::{lineage_id, ModelNode, NodeKind, ParityModelNode, ParityPlan, Plan};
use crate::placement::ReplicaTarget;
use crate::routing::Routing;
use crate::spec::{BatchGrow, BatchWait, GraphLevel, PadWhen, ReplicationMode};
use crate::validate::{CallShape, TensorOp, TextOp};

/// How a batch waits, after its delay: nothing for the default (only while busy).
fn wait_label(wait: BatchWait) -> &'static str {
    match wait {
        BatchWait::WhenBusy => "",
        BatchWait::Always => " (always waiting)",
    }
}

/// One node's kind and settings, on one line (`plan` names a gather's fan-out).
fn kind_label(plan: &Plan, kind: &NodeKind) -> String {
    match kind {
        NodeKind::Model(m) => format!(
            "model {} ({}, {} instance(s) × {} thread(s){}{}{}{})",
            m.path.file_name().and_then(|s| s.to_str()).unwrap_or("?"),
            match (m.call, &m.pad) {
                (CallShape::Batched, pad) => format!(
                    "batched ≤ {} within {} µs{}{}{}",
                    m.batching.max_size,
                    m.batching.max_delay_us,
                    wait_label(m.batching.wait),
                    match m.batching.grow {
                        BatchGrow::WhileCheaper => "",
                        BatchGrow::ToMaxSize => " (always up to max_size)",
                    },
                    pad.as_ref()
                        .map(|p| format!(
                            ", padded along `{}` with {}{}",
                            p.dim,
                            p.value,
                            match p.when {
                                PadWhen::Cheaper => " (when predicted cheaper)",
                                PadWhen::Always => "",
                            }
                        ))
                        .unwrap_or_default()
                ),
                (CallShape::Fixed(n), _) => format!(
                    "batched ≤ {} within {} µs{}, padded to its fixed batch of {n}",
                    m.call.call_rows(m.batching.max_size),
                    m.batching.max_delay_us,
                    wait_label(m.batching.wait),
                ),
                (CallShape::PerRequest, _) => "per request".to_string(),
                (CallShape::Unbatched, _) => "per request, no batch dimension".to_string(),
            },
            m.executor.instances,
            m.executor.intra_op_threads,
            match (m.executor.spinning, m.executor.graph_optimization) {
                (spinning, GraphLevel::All) => if spinning { ", spinning" } else { "" }.to_string(),
                (spinning, level) => format!(
                    "{}, graph optimisation {}",
                    if spinning { ", spinning" } else { "" },
                    level.name()
                ),
            },
            if m.replicas == [ReplicaTarget::Local] {
                String::new()
            } else {
                let names: Vec<&str> = m.replicas.iter().map(ReplicaTarget::name).collect();
                format!(", replicas: {}", names.join(" "))
            } + &match &m.routing {
                Routing::LeastOutstanding => String::new(),
                Routing::RoundRobin => ", routing: round_robin".to_string(),
                Routing::Kairos(k) => format!(
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
                    ", state {} → {}{}, replication {}{}",
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
                    st.sequences.as_ref().map_or(String::new(), |q| format!(
                        " per sequence (axis {}, ≤ {}, idle {} ms)",
                        q.batch_axis, q.max_sequences, q.idle_timeout_ms
                    )),
                    st.mode.name(),
                    match st.mode {
                        ReplicationMode::None => String::new(),
                        ReplicationMode::Checkpoint => format!(
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
                Some(p) => format!(", parity-coded k={} r={}", p.k(), p.r()),
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
        NodeKind::Op(TensorOp::Normalize { mean, std }) => {
            format!("normalize mean={mean:?} std={std:?}")
        }
        NodeKind::Op(TensorOp::Argmax) => "argmax".into(),
        NodeKind::Op(TensorOp::TopK { k }) => format!("top_k k={k}"),
        NodeKind::Op(TensorOp::Concat { axis }) => format!("concat axis={axis}"),
        NodeKind::Op(TensorOp::DecodeImage { max_pixels, draft }) => match draft {
            Some(d) => format!(
                "decode_image max_pixels={max_pixels} draft={}x{}",
                d.height, d.width
            ),
            None => format!("decode_image max_pixels={max_pixels}"),
        },
        NodeKind::Op(TensorOp::Resize {
            height,
            width,
            interpolation,
        }) => format!("resize {height}x{width} {interpolation:?}"),
        NodeKind::Op(TensorOp::Cast { to }) => format!("cast to={to}"),
        NodeKind::Op(TensorOp::Transpose { perm }) => format!("transpose perm={perm:?}"),
        NodeKind::Op(TensorOp::Preprocess(p)) => {
            let mut steps = Vec::new();
            if let Some(to) = p.cast {
                steps.push(format!("cast to={to}"));
            }
            if let Some(perm) = &p.perm {
                steps.push(format!("transpose perm={perm:?}"));
            }
            steps.push(format!("normalize mean={:?} std={:?}", p.mean, p.std));
            format!("{} (fused: {})", steps.join(" → "), p.fused.join(", "))
        }
        NodeKind::Op(TensorOp::Regions(op)) => op.to_string(),
        NodeKind::Op(TensorOp::Window(op)) => op.to_string(),
        NodeKind::Op(TensorOp::Reshape(op)) => format!("reshape shape={op}"),
        NodeKind::Op(TensorOp::Text(TextOp::Softmax)) => "softmax axis=-1".into(),
        NodeKind::Op(TensorOp::Text(TextOp::Tokenize {
            tokenizer,
            max_length,
        })) => format!(
            "tokenize {} max_length={max_length}",
            file_name(&tokenizer.path)
        ),
        NodeKind::Op(TensorOp::Text(TextOp::Labels { names })) => {
            format!("labels ({} names)", names.len())
        }
        NodeKind::Op(TensorOp::Text(TextOp::Detokenize {
            tokenizer,
            skip_special_tokens,
        })) => format!(
            "detokenize {} skip_special_tokens={skip_special_tokens}",
            file_name(&tokenizer.path)
        ),
        NodeKind::Op(TensorOp::Text(TextOp::CtcDecode { names, blank })) => {
            format!("ctc_decode ({} classes) blank={blank}", names.len())
        }
        NodeKind::Op(TensorOp::CropBoxes(c)) => format!(
            "crop_boxes {}x{} {:?}, {:?} boxes, score ≥ {}{}, ≤ {} parts per request (fans out)",
            c.height,
            c.width,
            c.interpolation,
            c.coordinates,
            c.min_score,
            c.iou_threshold
                .map_or(String::new(), |t| format!(", nms iou > {t}")),
            c.max_boxes
        ),
        NodeKind::Gather(g) => format!(
            "gather the parts of `{}` into one row per request",
            plan.producer_name(g.fanout)
        ),
    }
}

impl Plan {
    /// A human-readable description, one line per stage.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "graph `{}`", self.name);
        for i in &self.inputs {
            let _ = writeln!(s, "  input  {}: {}", i.name, i.declared());
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
                kind_label(self, &n.node.kind),
                from.join(", ")
            );
            for (name, ty) in &n.node.outputs {
                let _ = writeln!(s, "           → {}.{name}: {ty}", n.node.id);
            }
            if let NodeKind::Model(ModelNode {
                parity: Some(p), ..
            }) = &n.node.kind
            {
                for (id, label, from) in parity_stages(&n.node.id, p) {
                    let _ = writeln!(s, "  parity {id} [{label}] ← {from}");
                }
            }
        }
        for o in &self.outputs {
            let _ = writeln!(s, "  output {} ← {}: {}", o.name, o.column, o.ty);
        }
        s
    }

    /// Node `node`'s kind and settings on one line, as [`Plan::describe`] prints them.
    pub fn node_label(&self, node: &super::PlannedNode) -> String {
        kind_label(self, &node.node.kind)
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
                kind_label(self, &n.node.kind).replace('"', "'")
            );
            for &p in &n.producer_ids {
                let _ = writeln!(s, "  \"{}\" -> \"{}\";", self.producer_name(p), n.node.id);
            }
            if let NodeKind::Model(ModelNode {
                parity: Some(p), ..
            }) = &n.node.kind
            {
                parity_dot(&mut s, &n.node.id, p);
            }
            if let NodeKind::Gather(g) = &n.node.kind {
                // The fan-out's part counts reach its gathers directly.
                let _ = writeln!(
                    s,
                    "  \"{}\" -> \"{}\" [style=dashed, label=\"parts\"];",
                    self.producer_name(g.fanout),
                    n.node.id
                );
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
}

/// A parity-coded node's stages as `(id, label, what it reads)`: encoder, parity model nodes,
/// decoder (ParM, §4.1).
fn parity_stages(node: &str, p: &ParityPlan) -> Vec<(String, String, String)> {
    let mut stages = vec![(
        p.encoder.id.clone(),
        format!(
            "parity encoder {}: coding groups of k={} consecutive jobs, each numbered by its group id and position",
            match p.encoder.encoder {
                crate::spec::ParityEncoder::Sum => "sum",
                crate::spec::ParityEncoder::Concat => "concat",
            },
            p.k()
        ),
        format!("{node} (its dispatched jobs)"),
    )];
    for m in &p.models {
        stages.push((
            m.id.clone(),
            parity_model_label(p.k(), m),
            p.encoder.id.clone(),
        ));
    }
    let parities: Vec<&str> = p.models.iter().map(|m| m.id.as_str()).collect();
    stages.push((
        p.decoder.id.clone(),
        format!(
            "parity decoder: any {} of k={} missing predictions, unavailable after {}{} or when their replica failed",
            p.r(),
            p.k(),
            p.decoder.decode,
            match p.decoder.decode {
                crate::spec::DecodeAfter::Quantile(_) => {
                    format!(" (≥ {} ms)", p.decoder.floor.as_millis())
                }
                _ => String::new(),
            }
        ),
        format!("{node}, {} (joined by group id)", parities.join(", ")),
    ));
    stages
}

/// A parity model node on one line: its model, code, batching, executor and replicas.
fn parity_model_label(k: usize, m: &ParityModelNode) -> String {
    let coefficients: Vec<String> = coefficient_labels(m.index, k);
    format!(
        "parity model {} (coefficients {}; batched ≤ {} within {} µs{}, {} instance(s) × {} thread(s){})",
        file_name(&m.path),
        coefficients.join(" "),
        m.batching.max_size,
        m.batching.max_delay_us,
        wait_label(m.batching.wait),
        m.executor.instances,
        m.executor.intra_op_threads,
        if m.replicas == [ReplicaTarget::Local] {
            String::new()
        } else {
            let names: Vec<&str> = m.replicas.iter().map(ReplicaTarget::name).collect();
            format!(", replicas: {}", names.join(" "))
        }
    )
}

/// Parity model `t`'s coefficients over a group of `k`, as printed (`weir_parm::coefficients`).
fn coefficient_labels(t: usize, k: usize) -> Vec<String> {
    weir_parm::coefficients(t, k)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// A parity-coded node's stages and group edges in DOT.
fn parity_dot(s: &mut String, node: &str, p: &ParityPlan) {
    for (id, label, _) in parity_stages(node, p) {
        let shape = if id == p.encoder.id || id == p.decoder.id {
            "hexagon"
        } else {
            "box"
        };
        let _ = writeln!(
            s,
            "  \"{id}\" [shape={shape}, label=\"{id}\\n{}\"];",
            label.replace('"', "'")
        );
    }
    let (enc, dec) = (&p.encoder.id, &p.decoder.id);
    let _ = writeln!(
        s,
        "  \"{node}\" -> \"{enc}\" [style=dashed, label=\"jobs\"];"
    );
    for m in &p.models {
        let _ = writeln!(
            s,
            "  \"{enc}\" -> \"{}\" [label=\"parity query {} (group id)\"];",
            m.id, m.index
        );
        let _ = writeln!(
            s,
            "  \"{}\" -> \"{dec}\" [label=\"parity output (group id)\"];",
            m.id
        );
    }
    let _ = writeln!(
        s,
        "  \"{node}\" -> \"{dec}\" [label=\"k predictions (group id)\"];"
    );
    let _ = writeln!(
        s,
        "  \"{dec}\" -> \"{node}\" [style=dashed, label=\"answers\"];"
    );
}

/// The last part of `path`, as plans print a file.
fn file_name(path: &std::path::Path) -> &str {
    path.file_name().and_then(|s| s.to_str()).unwrap_or("?")
}
