//! The local worker's load, reported to the metadata store every second: each local instance's
//! served rate, mean ONNX Runtime call time and requests in flight, and the machine's CPU
//! utilisation, so the store's instance states (Overloaded, Interfered) follow the load. Remote
//! executors report their own.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_infaas::dispatch::Dispatcher;
use weir_infaas::state::Event;

use crate::{ModelLessServer, LOCAL_WORKER};

/// How often instance load is reported to the store.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// The executor's counts at the last report, per local variant: rows, calls, time inside ONNX
/// Runtime.
type Reported = HashMap<String, (u64, u64, Duration)>;

impl ModelLessServer {
    /// Reports every local instance's load, and the machine's utilisation, every second, until
    /// the server is dropped.
    pub fn spawn_reports(self: &Arc<Self>, cpu: Arc<weir_connectors::offline::CpuUtilisation>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut last: Reported = HashMap::new();
            let mut at = Instant::now();
            loop {
                tokio::time::sleep(REPORT_EVERY).await;
                let Some(me) = weak.upgrade() else { return };
                let now = Instant::now();
                me.report(&mut last, now.duration_since(at).as_secs_f64(), cpu.busy());
                at = now;
            }
        });
    }

    fn report(&self, last: &mut Reported, seconds: f64, busy: Option<f64>) {
        if let Some(utilisation) = busy {
            self.store.record(Event::WorkerLoad {
                worker: LOCAL_WORKER.to_string(),
                utilisation,
            });
        }
        for ((variant, worker), instance) in self.instances.loaded() {
            // Executors report their own instances.
            if worker != LOCAL_WORKER {
                continue;
            }
            let Some(graph) = instance.graph() else {
                continue;
            };
            // The model node's own counts: a call's time is ONNX Runtime's, comparable with the
            // profile (a request's end-to-end time also holds batching waits and the dataflow).
            let Some((_, now)) = graph.executor_stats().into_iter().next() else {
                continue;
            };
            let (r0, c0, b0) = last
                .insert(variant.clone(), (now.rows, now.runs, now.busy))
                .unwrap_or((0, 0, Duration::ZERO));
            let (rows, calls) = (now.rows.saturating_sub(r0), now.runs.saturating_sub(c0));
            let busy = now.busy.saturating_sub(b0);
            self.store.record(Event::InstanceLoad {
                variant,
                worker,
                qps: rows as f64 / seconds.max(1e-3),
                mean_latency_ms: if calls == 0 {
                    0.0
                } else {
                    busy.as_secs_f64() * 1e3 / calls as f64
                },
                outstanding: instance.in_flight.load(Ordering::Relaxed),
            });
        }
    }
}
