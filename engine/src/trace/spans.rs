//! A sampled request's spans, read off its lineage at the reply.
//!
//! Every lineage entry `(pred_node, pred_seq, node, seq)` is a hop: node `node` processed the row
//! in its batch `seq`, having received it from `pred_node`'s batch `pred_seq`. So the hop's span
//! is named by `(node, seq)` and its parent by `(pred_node, pred_seq)`; the ingress's entry has the
//! client as predecessor, and its parent is the request's server span. Span ids are derived from
//! the trace id and the pair ([`super::hop_span_id`]), so a model operator that sends a job to a
//! remote executor names the same span as its parent. A node that joins rows (a fan-in node, a
//! gather) appears once, under its first predecessor, with the count of rows it joined. A part
//! entry of a fan-out marks the next hop as part `i` of `n`.
//!
//! Times come from the [`TraceBook`]'s record of the batch when there is one (model nodes: the
//! job's arrival, queue wait, ONNX Runtime call and batch size); a hop without one (the ingress,
//! inline tensor ops, joins) runs from its parent's end to its first child's start, so the tree
//! still covers the request's whole time without the inline operators recording anything.
//!
//! Two spans are not hops: a model node's job whose answer ParM decoded from its coding group
//! gets a `reconstruct <node>` child (the group, `k`, why), and a reply the HAMS release gate held
//! until the state it passed was durable gets a `release wait` span under the server span, from
//! the moment the reply was ready (where the graph's hops end) to its release. Their ids are
//! derived as the hops' are, so a request's several rows name each once.

use std::collections::HashMap;
use std::time::SystemTime;

use super::book::{ReleaseWait, TraceBook};
use super::context::{hop_span_id, RequestTrace, SpanContext};
use super::{micros, AttributeValue, Reconstruction, SpanKind, SpanRecord};
use crate::lineage::{LineageEntry, CLIENT, INGRESS};

/// The pseudo-node a `release wait` span's id is derived under (with the request id): beyond
/// every plan's lineage ids, as [`CLIENT`] is.
const RELEASE_WAIT: u32 = u32::MAX - 3;

/// The pseudo-node a `reconstruct` span's id is derived under (with its hop span's id).
const RECONSTRUCTION: u32 = u32::MAX - 4;
use crate::plan::Plan;

/// The spans of request `request_id` (sampled in `trace`) below its server span, which ran from
/// `admitted` to `answered`: one per hop of `lineage`, named after `plan`'s nodes.
pub fn request_spans(
    book: &TraceBook,
    plan: &Plan,
    trace: &RequestTrace,
    request_id: u64,
    lineage: &[LineageEntry],
    (admitted, answered): (SystemTime, SystemTime),
) -> Vec<SpanRecord> {
    let trace_id = trace.span.trace_id;
    let wait = book.release_wait(request_id);
    // The graph's hops end where the reply was ready: a held reply waited from there on.
    let graph_end = wait.as_ref().map_or(answered, |w| w.start.min(answered));
    let names: HashMap<u32, &str> = plan
        .nodes
        .iter()
        .map(|n| (n.lineage_id, n.node.id.as_str()))
        .collect();
    let mut spans: Vec<SpanRecord> = Vec::new();
    let mut index: HashMap<(u32, u64), usize> = HashMap::new();
    // Spans timed from their neighbours: their end is filled in the second pass.
    let mut open: Vec<bool> = Vec::new();
    let mut extra: Vec<SpanRecord> = Vec::new();
    let mut part: Option<(u32, u32)> = None;
    for e in lineage {
        if let Some((_, i, n)) = e.as_any_part() {
            part = Some((i, n));
            continue;
        }
        // A part (or gathered-part) entry names the hop right after it only.
        let part = part.take();
        let key = (e.node, e.seq);
        if let Some(&at) = index.get(&key) {
            bump_inputs(&mut spans[at]);
            continue;
        }
        let parent = if e.pred_node == CLIENT {
            trace.span.span_id
        } else {
            hop_span_id(&trace_id, e.pred_node, e.pred_seq)
        };
        let parent_end = index
            .get(&(e.pred_node, e.pred_seq))
            .map(|&at| spans[at].end)
            .unwrap_or(admitted);
        let name = if e.node == INGRESS {
            "ingress"
        } else {
            names.get(&e.node).copied().unwrap_or("node")
        };
        let mut attributes = vec![
            ("weir.node", AttributeValue::Str(name.to_string())),
            (
                "weir.batch_seq",
                AttributeValue::Int(i64::try_from(e.seq).unwrap_or(i64::MAX)),
            ),
            ("weir.inputs", AttributeValue::Int(1)),
        ];
        if let Some((i, n)) = part {
            attributes.push(("weir.part_index", AttributeValue::Int(i64::from(i))));
            attributes.push(("weir.part_count", AttributeValue::Int(i64::from(n))));
        }
        let record = book.hop(e.node, e.seq, request_id);
        let (start, end, kind) = match &record {
            Some(r) => {
                if let Some(w) = r.queue_wait {
                    attributes.push(("weir.queue_wait_us", micros(w)));
                }
                if let Some(run) = r.run {
                    attributes.push(("weir.run_us", micros(run)));
                }
                if let Some(b) = r.batch_size {
                    attributes.push((
                        "weir.batch_size",
                        AttributeValue::Int(i64::try_from(b).unwrap_or(i64::MAX)),
                    ));
                }
                if let Some(replica) = &r.replica {
                    attributes.push(("weir.replica", AttributeValue::Str(replica.clone())));
                }
                attributes.push((
                    "weir.job_rows",
                    AttributeValue::Int(i64::try_from(r.job_rows).unwrap_or(i64::MAX)),
                ));
                // A job that did not run here, and was not decoded here, went to a remote
                // executor: the hop is a call.
                let kind = if r.run.is_some() || r.reconstruction.is_some() {
                    SpanKind::Internal
                } else {
                    attributes.push(("weir.remote", AttributeValue::Bool(true)));
                    SpanKind::Client
                };
                (r.start, r.end, kind)
            }
            None => (parent_end, parent_end, SpanKind::Internal),
        };
        let span_id = hop_span_id(&trace_id, e.node, e.seq);
        if let Some(r) = record.as_ref().and_then(|r| r.reconstruction.as_ref()) {
            extra.push(reconstruction_span(trace, span_id, name, r));
        }
        index.insert(key, spans.len());
        open.push(record.is_none());
        spans.push(SpanRecord {
            context: SpanContext {
                trace_id,
                span_id,
                sampled: true,
            },
            parent: Some(parent),
            parent_is_remote: false,
            state: trace.state.clone(),
            name: name.to_string(),
            kind,
            start,
            end,
            attributes,
            error: false,
        });
    }
    // A span timed from its neighbours ends where its first child starts (or at the answer).
    let ends: Vec<Option<SystemTime>> = spans
        .iter()
        .zip(&open)
        .map(|(span, &open)| {
            open.then(|| {
                let id = span.context.span_id;
                spans
                    .iter()
                    .filter(|s| s.parent == Some(id))
                    .map(|s| s.start)
                    .min()
                    .unwrap_or(graph_end)
            })
        })
        .collect();
    for (span, end) in spans.iter_mut().zip(ends) {
        if let Some(end) = end {
            span.end = end.max(span.start);
        }
    }
    spans.extend(extra);
    if let Some(w) = wait {
        spans.push(release_wait_span(trace, request_id, &names, &w, answered));
    }
    spans
}

/// The child of hop span `hop` whose job ParM decoded (`reconstruction`) at node `node`.
fn reconstruction_span(
    trace: &RequestTrace,
    hop: [u8; 8],
    node: &str,
    reconstruction: &Reconstruction,
) -> SpanRecord {
    let trace_id = trace.span.trace_id;
    let r = reconstruction;
    SpanRecord {
        context: SpanContext {
            trace_id,
            span_id: hop_span_id(&trace_id, RECONSTRUCTION, u64::from_be_bytes(hop)),
            sampled: true,
        },
        parent: Some(hop),
        parent_is_remote: false,
        state: trace.state.clone(),
        name: format!("reconstruct {node}"),
        kind: SpanKind::Internal,
        start: r.unavailable_at.min(r.decoded_at),
        end: r.decoded_at,
        attributes: vec![
            ("weir.node", AttributeValue::Str(node.to_string())),
            (
                "weir.parity.group",
                AttributeValue::Int(i64::try_from(r.group).unwrap_or(i64::MAX)),
            ),
            (
                "weir.parity.k",
                AttributeValue::Int(i64::try_from(r.k).unwrap_or(i64::MAX)),
            ),
            ("weir.parity.reason", AttributeValue::Str(r.reason.into())),
        ],
        error: false,
    }
}

/// The span of request `request_id`'s reply held at the release gate (`wait`), under the server
/// span; a wait not over yet ends at `answered`.
fn release_wait_span(
    trace: &RequestTrace,
    request_id: u64,
    names: &HashMap<u32, &str>,
    wait: &ReleaseWait,
    answered: SystemTime,
) -> SpanRecord {
    let trace_id = trace.span.trace_id;
    let nodes: Vec<&str> = wait
        .deps
        .iter()
        .map(|(n, _)| names.get(n).copied().unwrap_or("node"))
        .collect();
    let version = wait.deps.iter().map(|&(_, v)| v).max().unwrap_or(0);
    SpanRecord {
        context: SpanContext {
            trace_id,
            span_id: hop_span_id(&trace_id, RELEASE_WAIT, request_id),
            sampled: true,
        },
        parent: Some(trace.span.span_id),
        parent_is_remote: false,
        state: trace.state.clone(),
        name: "release wait".into(),
        kind: SpanKind::Internal,
        start: wait.start,
        end: wait.end.unwrap_or(answered).max(wait.start),
        attributes: vec![
            ("weir.node", AttributeValue::Str(nodes.join(","))),
            (
                "weir.state_version",
                AttributeValue::Int(i64::try_from(version).unwrap_or(i64::MAX)),
            ),
        ],
        error: false,
    }
}

fn bump_inputs(span: &mut SpanRecord) {
    for (k, v) in &mut span.attributes {
        if *k == "weir.inputs" {
            if let AttributeValue::Int(n) = v {
                *n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::lineage::tests::entry;
    use crate::trace::book::HopRecord;
    use crate::trace::context::Sampler;

    fn empty_plan() -> Plan {
        Plan {
            name: "g".into(),
            inputs: Vec::new(),
            nodes: Vec::new(),
            outputs: Vec::new(),
            streams: Vec::new(),
        }
    }

    #[test]
    fn lineage_makes_a_tree_under_the_server_span() {
        let book = TraceBook::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        book.record(
            1,
            4,
            HopRecord {
                requests: vec![7],
                start: t0 + Duration::from_millis(1),
                end: t0 + Duration::from_millis(5),
                queue_wait: Some(Duration::from_millis(1)),
                run: Some(Duration::from_millis(3)),
                batch_size: Some(2),
                job_rows: 1,
                replica: None,
                reconstruction: None,
            },
        );
        let trace = Sampler::new(1.0).decide(None, None);
        // ingress → 1 (model) → fan-out part → 2 and 3 → gather 4 joins both.
        let lineage = vec![
            entry(CLIENT, 7, INGRESS, 0),
            entry(INGRESS, 0, 1, 4),
            LineageEntry::part(1, 4, 0, 2),
            entry(1, 4, 2, 9),
            entry(2, 9, 4, 1),
            entry(1, 4, 3, 9),
            entry(3, 9, 4, 1),
        ];
        let spans = request_spans(
            &book,
            &empty_plan(),
            &trace,
            7,
            &lineage,
            (t0, t0 + Duration::from_millis(9)),
        );
        assert_eq!(spans.len(), 5, "ingress, 1, 2, 3, and the gather once");
        let id = |n, s| hop_span_id(&trace.span.trace_id, n, s);
        assert_eq!(spans[0].parent, Some(trace.span.span_id));
        assert_eq!(spans[0].end, t0 + Duration::from_millis(1), "to its child");
        assert_eq!(spans[1].parent, Some(id(INGRESS, 0)));
        assert!(spans[1]
            .attributes
            .contains(&("weir.batch_size", AttributeValue::Int(2))));
        assert_eq!(spans[2].parent, Some(id(1, 4)));
        assert!(spans[2]
            .attributes
            .contains(&("weir.part_count", AttributeValue::Int(2))));
        assert_eq!(spans[3].context.span_id, id(4, 1));
        assert!(spans[3]
            .attributes
            .contains(&("weir.inputs", AttributeValue::Int(2))));
        assert_eq!(spans[3].end, t0 + Duration::from_millis(9), "to the answer");
    }

    fn attr<'a>(span: &'a SpanRecord, key: &str) -> Option<&'a AttributeValue> {
        span.attributes
            .iter()
            .find_map(|(k, v)| (*k == key).then_some(v))
    }

    #[test]
    fn a_gathered_row_s_parts_keep_their_index_and_count() {
        let book = TraceBook::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let trace = Sampler::new(1.0).decide(None, None);
        // ingress → fan-out 1 → part 0 through 2 (batch 3), part 1 through 2 (batch 4) → gather 5.
        let lineage = vec![
            entry(CLIENT, 7, INGRESS, 0),
            entry(INGRESS, 0, 1, 4),
            LineageEntry::part(1, 4, 0, 2).gathered(),
            entry(1, 4, 2, 3),
            LineageEntry::part(1, 4, 1, 2).gathered(),
            entry(1, 4, 2, 4),
            entry(2, 4, 5, 1),
            entry(1, 4, 5, 1),
        ];
        let spans = request_spans(&book, &empty_plan(), &trace, 7, &lineage, (t0, t0));
        let parts: Vec<(Option<&AttributeValue>, Option<&AttributeValue>)> = spans
            .iter()
            .map(|s| (attr(s, "weir.part_index"), attr(s, "weir.part_count")))
            .collect();
        let (zero, one, two) = (
            AttributeValue::Int(0),
            AttributeValue::Int(1),
            AttributeValue::Int(2),
        );
        assert_eq!(
            parts,
            vec![
                (None, None),
                (None, None),
                (Some(&zero), Some(&two)),
                (Some(&one), Some(&two)),
                (None, None),
            ],
            "each part's hop, and only it"
        );
        assert_eq!(attr(&spans[4], "weir.inputs"), Some(&two), "the gather");
    }

    #[test]
    fn a_reconstructed_job_and_a_held_reply_get_spans_of_their_own() {
        let book = TraceBook::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let ms = |n| t0 + Duration::from_millis(n);
        let trace = Sampler::new(1.0).decide(None, None);
        assert!(book.begin(7, trace.span.trace_id));
        book.record(
            1,
            4,
            HopRecord {
                requests: vec![7],
                start: ms(1),
                end: ms(6),
                queue_wait: None,
                run: None,
                batch_size: None,
                job_rows: 1,
                replica: None,
                reconstruction: Some(Reconstruction {
                    group: 3,
                    k: 2,
                    reason: "late",
                    unavailable_at: ms(4),
                    decoded_at: ms(5),
                }),
            },
        );
        book.hold(7, &[(1, 4)]);
        book.released(7);
        let wait = book.release_wait(7).unwrap();
        let lineage = vec![entry(CLIENT, 7, INGRESS, 0), entry(INGRESS, 0, 1, 4)];
        let answered = wait.end.unwrap() + Duration::from_millis(1);
        let spans = request_spans(&book, &empty_plan(), &trace, 7, &lineage, (t0, answered));
        assert_eq!(spans.len(), 4, "{spans:#?}");
        let hop = &spans[1];
        assert_eq!(hop.kind, SpanKind::Internal, "decoded here, not remote");
        assert_eq!(attr(hop, "weir.remote"), None);
        let rebuilt = &spans[2];
        assert_eq!(rebuilt.name, "reconstruct node");
        assert_eq!(rebuilt.parent, Some(hop.context.span_id));
        assert_eq!((rebuilt.start, rebuilt.end), (ms(4), ms(5)));
        assert_eq!(
            attr(rebuilt, "weir.parity.k"),
            Some(&AttributeValue::Int(2))
        );
        assert_eq!(
            attr(rebuilt, "weir.parity.group"),
            Some(&AttributeValue::Int(3))
        );
        assert_eq!(
            attr(rebuilt, "weir.parity.reason"),
            Some(&AttributeValue::Str("late".into()))
        );
        let held = &spans[3];
        assert_eq!(held.name, "release wait");
        assert_eq!(held.parent, Some(trace.span.span_id));
        assert_eq!((held.start, held.end), (wait.start, wait.end.unwrap()));
        assert_eq!(
            attr(held, "weir.state_version"),
            Some(&AttributeValue::Int(4))
        );
        let again = request_spans(&book, &empty_plan(), &trace, 7, &lineage, (t0, answered));
        assert_eq!(
            again.iter().map(|s| s.context.span_id).collect::<Vec<_>>(),
            spans.iter().map(|s| s.context.span_id).collect::<Vec<_>>(),
            "another row of the request names the same spans"
        );
    }
}
