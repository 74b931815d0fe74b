//! A sampled request's trace across a timely cluster's exchange: its rows carry its trace id to
//! the process that runs them, and carry back the records of the batches that process ran them
//! in, so the process the request entered at (which answers it and builds its spans from its own
//! [`TraceBook`]) has every hop's figures, and a model node abroad knows the row is sampled (its
//! remote executor's span included).
//!
//! Rows cross at two places ([`crate::dataflow::exchange`]): from the ingress to the worker
//! that runs them, and back home before the egress. Leaving home, a sampled row carries its trace
//! id; arriving abroad, the request is registered in that process's book. Leaving a process that
//! is not its home, the row carries the records that book kept of its lineage's hops, and the
//! registration ends there; arriving home, the records join the home book. A row of an
//! unsampled request carries nothing, and nothing is looked up while no sampled request is
//! pending ([`TraceBook::is_active`]). A request whose rows fail abroad ends its registration
//! when its error leaves ([`TraceCarry::release`]).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::book::{HopRecord, TraceBook};
use crate::batch::Batch;
use crate::dataflow::exchange::origin_process;
use crate::lineage::LineageView;
use crate::request::original_id;

/// What one part of a batch carries across the exchange: per sampled request among its rows, its
/// trace id and, going home, its hops' records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceCarry(Vec<CarriedRequest>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CarriedRequest {
    id: u64,
    trace: [u8; 16],
    hops: Vec<CarriedHop>,
}

/// A [`HopRecord`] of one request (a ParM reconstruction stays with the process that decoded it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct CarriedHop {
    node: u32,
    seq: u64,
    start: SystemTime,
    end: SystemTime,
    queue_wait: Option<Duration>,
    run: Option<Duration>,
    batch_size: Option<usize>,
    job_rows: usize,
    replica: Option<String>,
}

impl TraceCarry {
    /// What `batch`'s rows carry as they leave process `me`; nothing when none is sampled.
    pub fn outbound(book: &TraceBook, batch: &Batch, me: u64) -> TraceCarry {
        if !book.is_active() {
            return TraceCarry::default();
        }
        let ids = batch.request_ids();
        let Some((_, sampled)) = book.sampled(ids) else {
            return TraceCarry::default();
        };
        let lineage = LineageView::new(batch.lineage());
        let mut out: Vec<CarriedRequest> = Vec::with_capacity(sampled.len());
        for (row, &id) in ids.iter().enumerate() {
            let id = original_id(id);
            if !sampled.contains(&id) || out.iter().any(|c| c.id == id) {
                continue;
            }
            let Some((trace, _)) = book.sampled(&[id]) else {
                continue;
            };
            let hops = if origin_process(id) == me {
                Vec::new()
            } else {
                let hops = lineage
                    .row(row)
                    .filter_map(|e| {
                        let r = book.hop(e.node, e.seq, id)?;
                        Some(CarriedHop {
                            node: e.node,
                            seq: e.seq,
                            start: r.start,
                            end: r.end,
                            queue_wait: r.queue_wait,
                            run: r.run,
                            batch_size: r.batch_size,
                            job_rows: r.job_rows,
                            replica: r.replica,
                        })
                    })
                    .collect();
                book.end(id);
                hops
            };
            out.push(CarriedRequest { id, trace, hops });
        }
        TraceCarry(out)
    }

    /// Takes what arrived at process `me`: a request from elsewhere is registered as sampled
    /// here, a request back home gets its hops' records.
    pub fn inbound(self, book: &TraceBook, me: u64) {
        for c in self.0 {
            if origin_process(c.id) != me {
                book.begin(c.id, c.trace);
                continue;
            }
            for h in c.hops {
                book.record(
                    h.node,
                    h.seq,
                    HopRecord {
                        requests: vec![c.id],
                        start: h.start,
                        end: h.end,
                        queue_wait: h.queue_wait,
                        run: h.run,
                        batch_size: h.batch_size,
                        job_rows: h.job_rows,
                        replica: h.replica,
                        reconstruction: None,
                    },
                );
            }
        }
    }

    /// Ends the registration here of request `id`, admitted elsewhere, whose error leaves
    /// process `me` for home.
    pub fn release(book: &TraceBook, id: u64, me: u64) {
        if book.is_active() && origin_process(id) != me {
            book.end(id);
        }
    }

    /// Whether it carries nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataflow::exchange::PROCESS_SHIFT;
    use crate::lineage::{append_hop, from_clients, INGRESS};
    use arrow_array::UInt64Array;

    fn batch(ids: &[u64], hop: Option<(u32, u64)>) -> Batch {
        let mut lineage = from_clients(ids, 0);
        if let Some((node, seq)) = hop {
            lineage = append_hop(&lineage, &[INGRESS], node, seq);
        }
        Batch::new(UInt64Array::from(ids.to_vec()), lineage, Vec::new()).expect("a batch")
    }

    #[test]
    fn a_sampled_row_takes_its_trace_abroad_and_brings_its_hops_home() {
        let (home, abroad) = (TraceBook::default(), TraceBook::default());
        let sampled = (1 << PROCESS_SHIFT) | 5;
        let other = (1 << PROCESS_SHIFT) | 6;
        let trace = [7u8; 16];
        assert!(home.begin(sampled, trace));
        // Leaving home: the trace id only, for the sampled row only.
        let out = TraceCarry::outbound(&home, &batch(&[sampled, other], None), 1);
        assert_eq!(out.0.len(), 1);
        assert!(out.0[0].hops.is_empty());
        // Abroad, the request is sampled; the node there records its call.
        out.inbound(&abroad, 0);
        assert_eq!(
            abroad.sampled(&[other, sampled]),
            Some((trace, vec![sampled]))
        );
        let now = SystemTime::now();
        abroad.record(
            3,
            9,
            HopRecord {
                requests: vec![sampled],
                start: now,
                end: now,
                queue_wait: Some(Duration::from_micros(5)),
                run: Some(Duration::from_micros(40)),
                batch_size: Some(2),
                job_rows: 1,
                replica: None,
                reconstruction: None,
            },
        );
        // Going home: the records of its lineage's hops, and it is no longer sampled abroad.
        let back = TraceCarry::outbound(&abroad, &batch(&[sampled], Some((3, 9))), 0);
        assert_eq!(back.0[0].hops.len(), 1);
        assert!(!abroad.is_active());
        back.inbound(&home, 1);
        let record = home.hop(3, 9, sampled).expect("the hop's record, home");
        assert_eq!(record.batch_size, Some(2));
        assert_eq!(record.run, Some(Duration::from_micros(40)));
    }

    #[test]
    fn nothing_is_carried_while_nothing_is_sampled() {
        let book = TraceBook::default();
        let id = (1 << PROCESS_SHIFT) | 5;
        assert!(TraceCarry::outbound(&book, &batch(&[id], None), 1).is_empty());
        // An error leaving for home ends a registration made here.
        assert!(book.begin(id, [1; 16]));
        TraceCarry::release(&book, id, 0);
        assert!(!book.is_active());
    }
}
