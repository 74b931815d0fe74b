//! The metadata store's differential dataflow, on its own timely worker thread.
//!
//! Inputs (see [`super::inputs`]): the registry's variants, the workers that are up, their
//! utilisation, each instance's lifecycle phase, each instance's newest load report. Derived,
//! incrementally, with arranged joins and reduces:
//!
//! - per instance: live instances are those whose worker is up (a join with the workers, so a
//!   worker going down takes its instances with it); each is reduced with its newest report into
//!   its state by [`StateRule`];
//! - per worker: its utilisation, instance count, whether it holds an Overloaded instance and how
//!   many Interfered ones (a reduce over the worker's facts and its instances' states);
//! - per hardware: workers, min and mean utilisation, workers holding an Overloaded instance, and
//!   whether every instance on it is Interfered (a reduce over its workers' rows).
//!
//! Each batch of events taken from the channel (at most [`MAX_BATCH`] messages) is one timestamp. After feeding a batch the thread
//! steps the worker until the probe's frontier passes that timestamp, applies the outputs' changes
//! to its output tables, and publishes a new [`Snapshot`]; so an event is visible to `select` once
//! the batch it arrived in has been published, and a sync request queued behind it is answered.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use differential_dataflow::VecCollection;
use serde::{Deserialize, Serialize};
use timely::dataflow::operators::probe::Handle;

use super::inputs::{Facts, Inputs, InstanceKey, ReportRow};
use super::rule::StateRule;
use super::Shared;
use crate::snapshot::{HardwareView, InstanceView, Registry, Snapshot, WorkerView};
use crate::state::{Event, InstanceState};

/// The most messages fed in as one timestamp.
pub(super) const MAX_BATCH: usize = 4096;

/// A message to the dataflow thread.
pub(super) enum Message {
    /// An event to feed in.
    Event(Event),
    /// Answer once every message before this one is visible in the snapshot.
    Sync(Sender<()>),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum InstanceSide {
    Instance { loaded: bool, facts: Facts },
    Report(ReportRow),
}

/// An instance's derived row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(super) struct InstanceRow {
    state: InstanceState,
    loading: bool,
    report: Option<ReportRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
enum WorkerSide {
    Up(String),
    Utilisation(u64),
    Instance(InstanceState),
}

/// A worker's derived row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(super) struct WorkerRow {
    hardware: String,
    utilisation_bits: u64,
    instances: u32,
    overloaded: bool,
    interfered: u32,
}

/// A hardware type's derived row.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(super) struct HardwareRow {
    workers: u32,
    min_bits: u64,
    mean_bits: u64,
    overloaded_workers: u32,
    instances: u32,
    interfered: u32,
}

/// A multiset of a collection's current records, kept from its output changes.
type Table<D> = Rc<RefCell<BTreeMap<D, isize>>>;

fn collect<D: differential_dataflow::Data>(
    collection: VecCollection<'_, u64, D, isize>,
    table: &Table<D>,
    probe: &Handle<u64>,
) {
    let table = table.clone();
    collection
        .inspect(move |(d, _t, r)| {
            let mut t = table.borrow_mut();
            let n = t.entry(d.clone()).or_insert(0);
            *n += *r;
            if *n == 0 {
                t.remove(d);
            }
        })
        .probe_with(probe);
}

fn count(r: isize) -> u32 {
    u32::try_from(r.max(0)).unwrap_or(u32::MAX)
}

/// Runs the store's dataflow until the channel closes.
pub(super) fn run(
    registry: Arc<Registry>,
    rule: StateRule,
    messages: Receiver<Message>,
    shared: Arc<Shared>,
) {
    // `execute_directly` wants a closure it could share; only this one thread ever takes it.
    let messages = std::sync::Mutex::new(messages);
    timely::execute_directly(move |worker| {
        let Ok(messages) = messages.lock() else {
            return;
        };
        let mut inputs = Inputs::new(registry.clone());
        let instances: Table<(InstanceKey, InstanceRow)> = Rc::default();
        let workers: Table<(String, WorkerRow)> = Rc::default();
        let hardware: Table<(String, HardwareRow)> = Rc::default();
        let probe = Handle::new();
        worker.dataflow::<u64, _, _>(|scope| {
            let variants = inputs.variants.to_collection(scope);
            let up = inputs.workers.to_collection(scope);
            let utilisation = inputs.utilisation.to_collection(scope);
            let lifecycle = inputs.lifecycle.to_collection(scope);
            let reports = inputs.reports.to_collection(scope);

            let live = lifecycle
                .map(|((v, w), loaded)| (w, (v, loaded)))
                .join_map(up.clone(), |w, (v, loaded), _hw| (*v, (w.clone(), *loaded)))
                .join_map(variants, |v, (w, loaded), facts| {
                    (
                        (*v, w.clone()),
                        InstanceSide::Instance {
                            loaded: *loaded,
                            facts: facts.clone(),
                        },
                    )
                });
            let states = live
                .concat(reports.map(|(k, r)| (k, InstanceSide::Report(r))))
                .reduce(move |_key, sides, out| {
                    let mut instance = None;
                    let mut report = None;
                    for (side, _) in sides {
                        match side {
                            InstanceSide::Instance { loaded, facts } => {
                                instance = Some((*loaded, facts))
                            }
                            InstanceSide::Report(r) => report = Some(*r),
                        }
                    }
                    let Some((loaded, facts)) = instance else {
                        return;
                    };
                    let state = if loaded {
                        rule.state(
                            f64::from_bits(facts.saturation_bits),
                            f64::from_bits(facts.profiled_bits),
                            report.map(|r| r.report()),
                        )
                        .0
                    } else {
                        InstanceState::Inactive
                    };
                    out.push((
                        InstanceRow {
                            state,
                            loading: !loaded,
                            report,
                        },
                        1,
                    ));
                });
            let per_worker = up
                .map(|(w, hw)| (w, WorkerSide::Up(hw)))
                .concat(utilisation.map(|(w, u)| (w, WorkerSide::Utilisation(u))))
                .concat(
                    states
                        .clone()
                        .map(|((_, w), row)| (w, WorkerSide::Instance(row.state))),
                )
                .reduce(|_worker, sides, out| {
                    let mut row = WorkerRow {
                        hardware: String::new(),
                        utilisation_bits: 0f64.to_bits(),
                        instances: 0,
                        overloaded: false,
                        interfered: 0,
                    };
                    let mut up = false;
                    for (side, n) in sides {
                        match side {
                            WorkerSide::Up(hw) => {
                                up = true;
                                row.hardware = hw.clone();
                            }
                            WorkerSide::Utilisation(u) => row.utilisation_bits = *u,
                            WorkerSide::Instance(state) => {
                                row.instances = row.instances.saturating_add(count(*n));
                                match state {
                                    InstanceState::Overloaded => row.overloaded = true,
                                    InstanceState::Interfered => {
                                        row.interfered = row.interfered.saturating_add(count(*n))
                                    }
                                    _ => {}
                                }
                            }
                        }
                    }
                    if up {
                        out.push((row, 1));
                    }
                });
            let per_hardware = per_worker
                .clone()
                .map(|(w, row)| (row.hardware.clone(), (w, row)))
                .reduce(|_hw, rows, out| {
                    let mut agg = HardwareRow {
                        workers: 0,
                        min_bits: f64::INFINITY.to_bits(),
                        mean_bits: 0,
                        overloaded_workers: 0,
                        instances: 0,
                        interfered: 0,
                    };
                    let mut sum = 0.0;
                    for ((_, row), _) in rows {
                        agg.workers += 1;
                        let u = f64::from_bits(row.utilisation_bits);
                        agg.min_bits = agg.min_bits.min(u.to_bits());
                        sum += u;
                        agg.overloaded_workers += u32::from(row.overloaded);
                        agg.instances = agg.instances.saturating_add(row.instances);
                        agg.interfered = agg.interfered.saturating_add(row.interfered);
                    }
                    agg.mean_bits = (sum / f64::from(agg.workers.max(1))).to_bits();
                    out.push((agg, 1));
                });
            collect(states, &instances, &probe);
            collect(per_worker, &workers, &probe);
            collect(per_hardware, &hardware, &probe);
        });

        let mut time = 0u64;
        let mut events = 0u64;
        let mut publisher = Publisher::new(registry.clone(), rule);
        loop {
            let Ok(first) = messages.recv() else { break };
            let mut waiting = Vec::new();
            let mut next = Some(first);
            let mut taken = 0;
            while let Some(message) = next {
                taken += 1;
                match message {
                    Message::Event(event) => {
                        events += 1;
                        inputs.apply(event);
                    }
                    Message::Sync(reply) => waiting.push(reply),
                }
                next = if taken < MAX_BATCH {
                    messages.try_recv().ok()
                } else {
                    None
                };
            }
            time += 1;
            inputs.advance_to(time);
            while probe.less_than(&time) {
                worker.step_or_park(Some(Duration::from_millis(1)));
            }
            let snapshot = publisher.publish(
                &instances.borrow(),
                &workers.borrow(),
                &hardware.borrow(),
                events,
                &shared,
            );
            if let Ok(mut slot) = shared.snapshot.write() {
                *slot = Arc::new(snapshot);
            }
            for reply in waiting {
                let _ = reply.send(());
            }
        }
    });
}

/// Turns the output tables into snapshots, logging and counting each instance's state changes.
struct Publisher {
    registry: Arc<Registry>,
    rule: StateRule,
    previous: BTreeMap<InstanceKey, InstanceState>,
}

impl Publisher {
    fn new(registry: Arc<Registry>, rule: StateRule) -> Self {
        Publisher {
            registry,
            rule,
            previous: BTreeMap::new(),
        }
    }

    fn publish(
        &mut self,
        instances: &BTreeMap<(InstanceKey, InstanceRow), isize>,
        workers: &BTreeMap<(String, WorkerRow), isize>,
        hardware: &BTreeMap<(String, HardwareRow), isize>,
        events: u64,
        shared: &Shared,
    ) -> Snapshot {
        let mut views = Vec::with_capacity(instances.len());
        let mut now = BTreeMap::new();
        for ((key, row), _) in instances.iter().filter(|(_, n)| **n > 0) {
            let report = row.report.map(|r| r.report());
            views.push(InstanceView {
                variant: key.0,
                worker: key.1.clone(),
                state: row.state,
                loading: row.loading,
                qps: report.map_or(0.0, |r| r.qps),
                mean_latency_ms: report.map_or(0.0, |r| r.mean_latency_ms),
                outstanding: report.map_or(0, |r| r.outstanding),
            });
            now.insert(key.clone(), (row.state, row.loading, report));
        }
        for (key, (state, loading, report)) in &now {
            let before = self
                .previous
                .get(key)
                .copied()
                .unwrap_or(InstanceState::Inactive);
            if before == *state && self.previous.contains_key(key) {
                continue;
            }
            let name = self.registry.get(key.0).map_or("?", |v| v.name.as_str());
            let reason = if *loading {
                "loading"
            } else {
                self.registry.get(key.0).map_or("", |v| {
                    self.rule
                        .state(
                            v.profile.saturation_qps,
                            v.profile.inference_ms(1).unwrap_or(0.0),
                            *report,
                        )
                        .1
                })
            };
            if before != *state {
                tracing::info!(variant = name, worker = %key.1, from = ?before, to = ?state, reason, "instance state");
                shared.metrics.transition(before, *state);
            }
        }
        for (key, before) in &self.previous {
            if !now.contains_key(key) && *before != InstanceState::Inactive {
                let name = self.registry.get(key.0).map_or("?", |v| v.name.as_str());
                tracing::info!(variant = name, worker = %key.1, from = ?before, to = ?InstanceState::Inactive, reason = "unloaded or worker down", "instance state");
                shared.metrics.transition(*before, InstanceState::Inactive);
            }
        }
        self.previous = now.into_iter().map(|(k, (s, _, _))| (k, s)).collect();
        let workers = workers
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|((id, row), _)| WorkerView {
                id: id.clone(),
                hardware: row.hardware.clone(),
                utilisation: f64::from_bits(row.utilisation_bits),
                instances: row.instances,
                overloaded: row.overloaded,
                interfered: row.interfered,
            })
            .collect();
        let hardware = hardware
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|((hw, row), _)| {
                let view = HardwareView {
                    workers: row.workers,
                    min_utilisation: f64::from_bits(row.min_bits),
                    mean_utilisation: f64::from_bits(row.mean_bits),
                    overloaded_fraction: f64::from(row.overloaded_workers)
                        / f64::from(row.workers.max(1)),
                    all_interfered: row.instances > 0 && row.interfered == row.instances,
                };
                (hw.clone(), view)
            })
            .collect();
        let snapshot = Snapshot::build(self.registry.clone(), views, workers, hardware, events);
        shared.metrics.set_states(&snapshot);
        snapshot
    }
}
