//! Routing rows between timely workers of a cluster: by request id to spread work over every
//! process, and back to the process a request entered at so its reply goes out there.
//!
//! Used only when the graph runs on a timely cluster (several processes); in one process every
//! stream stays on its worker (Pipeline) and none of this is built. A batch whose rows go to
//! different workers is split by row first (so a request's rows always travel together and every
//! later join still sees all of a request's rows on one worker), then each part crosses the
//! exchange as its Arrow IPC payload ([`crate::wire`]), with what a sampled request's trace needs
//! on the other side ([`TraceCarry`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use timely::dataflow::channels::pact::{Exchange, Pipeline};
use timely::dataflow::operators::generic::operator::Operator;
use tracing::error;

use super::egress::RequestLog;
use super::{BatchStream, ErrorStream};
use crate::batch::Batch;
use crate::request::RowError;
use crate::trace::TraceCarry;

/// This process's request log (whose trace book sampled rows are registered and recorded in) and
/// its index in the cluster.
#[derive(Clone)]
pub struct ClusterTraces {
    /// The log.
    pub log: Arc<RequestLog>,
    /// This process.
    pub process: u64,
}

/// Bits of a request id that hold the per-process counter; the bits above hold the process index
/// the request entered at.
pub const PROCESS_SHIFT: u32 = 48;

/// The process a request id was issued by.
pub fn origin_process(request_id: u64) -> u64 {
    request_id >> PROCESS_SHIFT
}

/// A worker for request `id` that runs on its origin process (`threads` workers per process).
pub fn origin_worker(id: u64, threads: u64) -> u64 {
    origin_process(id) * threads + (id & ((1 << PROCESS_SHIFT) - 1)) % threads.max(1)
}

/// A well-mixed worker for request `id` among `peers` (spreads consecutive ids).
pub fn spread_worker(id: u64, peers: u64) -> u64 {
    // SplitMix64's finaliser: consecutive ids land on different workers.
    let mut z = id.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % peers.max(1)
}

/// Sends every row of `stream` to worker `dest(request_id)`, sampled rows with their traces when
/// `traces` is given.
pub fn route_rows<'s>(
    stream: BatchStream<'s>,
    name: &str,
    dest: impl Fn(u64) -> u64 + 'static,
    traces: Option<ClusterTraces>,
) -> BatchStream<'s> {
    let out = traces.clone();
    let carry = move |b: &Batch| match &out {
        Some(t) => TraceCarry::outbound(t.log.traces(), b, t.process),
        None => TraceCarry::default(),
    };
    let split = stream
        .unary::<timely::container::CapacityContainerBuilder<Vec<(u64, Batch, TraceCarry)>>, _, _, _>(
            Pipeline,
            &format!("split/{name}"),
            move |_, _| {
                move |input, output| {
                    input.for_each(|time, data| {
                        let mut session = output.session(&time);
                        for batch in data.drain(..) {
                            let mut parts: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
                            for (row, &id) in batch.request_ids().iter().enumerate() {
                                parts.entry(dest(id)).or_default().push(row as u32);
                            }
                            if parts.len() == 1 {
                                if let Some((d, _)) = parts.into_iter().next() {
                                    let carried = carry(&batch);
                                    session.give((d, batch, carried));
                                }
                                continue;
                            }
                            for (d, rows) in parts {
                                match batch.take(&rows) {
                                    Ok(part) => {
                                        let carried = carry(&part);
                                        session.give((d, part, carried))
                                    }
                                    Err(e) => {
                                        error!(error = %e, "Could not split a batch by worker.")
                                    }
                                }
                            }
                        }
                    });
                }
            },
        );
    split.unary::<timely::container::CapacityContainerBuilder<Vec<Batch>>, _, _, _>(
        Exchange::new(|(d, _, _): &(u64, Batch, TraceCarry)| *d),
        &format!("route/{name}"),
        move |_, _| {
            move |input, output| {
                input.for_each(|time, data| {
                    let mut session = output.session(&time);
                    for (_, batch, carried) in data.drain(..) {
                        if let (false, Some(t)) = (carried.is_empty(), &traces) {
                            carried.inbound(t.log.traces(), t.process);
                        }
                        session.give(batch);
                    }
                });
            }
        },
    )
}

/// Sends every error to worker `dest(request_id)`; a sampled request admitted elsewhere is no
/// longer traced here once its error leaves.
pub fn route_errors<'s>(
    errors: ErrorStream<'s>,
    dest: impl Fn(u64) -> u64 + 'static,
    traces: ClusterTraces,
) -> ErrorStream<'s> {
    let released = errors
        .unary::<timely::container::CapacityContainerBuilder<Vec<RowError>>, _, _, _>(
            Pipeline,
            "release/errors",
            move |_, _| {
                move |input, output| {
                    input.for_each(|time, data| {
                        for e in data.iter() {
                            TraceCarry::release(traces.log.traces(), e.request_id, traces.process);
                        }
                        output.session(&time).give_iterator(data.drain(..));
                    });
                }
            },
        );
    released.unary::<timely::container::CapacityContainerBuilder<Vec<RowError>>, _, _, _>(
        Exchange::new(move |e: &RowError| dest(e.request_id)),
        "route/errors",
        |_, _| {
            move |input, output| {
                input.for_each(|time, data| {
                    output.session(&time).give_iterator(data.drain(..));
                });
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_route_home_and_spread_evenly() {
        let id = (3u64 << PROCESS_SHIFT) | 17;
        assert_eq!(origin_process(id), 3);
        assert_eq!(origin_worker(id, 2), 7);
        let mut counts = [0u32; 4];
        for i in 0..4000u64 {
            counts[spread_worker(i, 4) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
    }
}
