//! The `weir executor` server: models loaded into ONNX Runtime, served as zenoh queryables.
//!
//! Each model gets a [`ModelExecutor`] (the same one a graph runs in-process) and a queryable on
//! `<prefix>/model/<name>`. A query's payload is decoded, reordered into the model's input order
//! and queued; the executor thread that finishes it sends the reply, so zenoh's threads never wait
//! on inference. A full queue answers at once with an `overloaded` error (the client retries
//! another replica). The liveliness token is declared last, once every model is loaded and served,
//! so a graph never sees a replica that cannot answer yet.
//!
//! How one query is checked, queued and answered is [`crate::query`]'s; the options and start-up
//! errors are [`crate::options`]'s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tracing::{info, warn};
use weir_engine::spec::Device;
use weir_operators::model::{ModelExecutor, OrtRuntime};
use zenoh::liveliness::LivelinessToken;
use zenoh::query::Queryable;
use zenoh::{Session, Wait};

use crate::options::zenoh_err;
pub use crate::options::{ExecutorOptions, ServeError};
use crate::protocol::{LoadReport, ModelLoad};
pub use crate::query::{BUDGET_PARAMETER, TRACE_PARAMETER, UNBATCHED_PARAMETER};
use crate::served::{serve_model, ModelDefaults, Registry, ServedModel};
use weir_connectors::zenoh_peer::open_peer;

/// How often an executor publishes its load report (its heartbeat, too).
pub(crate) const LOAD_REPORT_EVERY: Duration = Duration::from_millis(500);

/// A running executor. Dropping it stops serving (undeclaring its token) and drains its queues.
pub struct ExecutorServer {
    prefix: String,
    stop: Arc<AtomicBool>,
    reporter: Option<JoinHandle<()>>,
    token: Option<LivelinessToken>,
    /// `<prefix>/zid/<zid>`: which zenoh session is this executor (graphs take replies only
    /// from it).
    zid_token: Option<LivelinessToken>,
    models: Registry,
    /// `<prefix>/control/variants`, with a repository.
    control: Option<Queryable<()>>,
    members: Vec<crate::stateful::StatefulMember>,
    session: Session,
}

impl std::fmt::Debug for ExecutorServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorServer")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ExecutorServer {
    /// Loads every model, opens the zenoh session, serves, and declares liveliness.
    ///
    /// # Errors
    /// When a model cannot be loaded, the device is not available, or zenoh cannot start.
    pub fn start(options: &ExecutorOptions) -> Result<ExecutorServer, ServeError> {
        if options.models.is_empty() && options.stateful.is_empty() && options.variants.is_none() {
            return Err(ServeError::Options(
                "no model to serve (give --model or --stateful NAME=PATH, or --repository)".into(),
            ));
        }
        options
            .emulation
            .check()
            .map_err(|e| ServeError::Options(e.to_string()))?;
        let runtime = OrtRuntime::get().map_err(|e| ServeError::Model {
            model: "*".into(),
            message: e.to_string(),
        })?;
        let defaults = ModelDefaults {
            runtime,
            options: options.clone(),
        };
        let mut loaded = Vec::new();
        for (name, path) in &options.models {
            let model = crate::variants::ResolvedVariant {
                path: path.clone(),
                intra_threads: options.threads,
                max_batch: options.max_batch,
                fixed_batch: None,
                graph_level: weir_engine::spec::GraphLevel::All,
            };
            let executor = defaults.start_model(name, &model)?;
            loaded.push((name.clone(), executor));
        }
        let session = open_peer(&options.listen, &options.connect)?;
        let prefix = options.key_prefix();
        let models: Registry = Arc::default();
        for (name, executor) in loaded {
            let served = serve_model(
                &session,
                &prefix,
                &name,
                executor,
                (options.emulation, options.spans.clone()),
            )?;
            models
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name, served);
        }
        let control = match &options.variants {
            Some(source) => Some(crate::variant_loader::serve_commands(
                &session,
                &prefix,
                Arc::clone(source),
                defaults,
                Arc::clone(&models),
            )?),
            None => None,
        };
        let mut members = Vec::with_capacity(options.stateful.len());
        for (name, path) in &options.stateful {
            let member = crate::stateful::StatefulMember::start(
                &session,
                &options.name,
                &prefix,
                name,
                path.clone(),
                crate::stateful::StatefulOptions {
                    threads: options.threads.max(1),
                    ..options.stateful_options.clone()
                },
            )
            .map_err(|e| ServeError::Model {
                model: name.clone(),
                message: e.message,
            })?;
            members.push(member);
        }
        let zid_token = session
            .liveliness()
            .declare_token(format!("{prefix}/zid/{}", session.zid()))
            .wait()
            .map_err(zenoh_err)?;
        let token = session
            .liveliness()
            .declare_token(format!("{prefix}/alive"))
            .wait()
            .map_err(zenoh_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reporter = spawn_reporter(
            session.clone(),
            format!("{prefix}/load"),
            options.name.clone(),
            options.device,
            Arc::clone(&models),
            Arc::clone(&stop),
        );
        let count = models.lock().map_or(0, |m| m.len());
        info!(executor = %options.name, %prefix, models = count, "Executor serving.");
        Ok(ExecutorServer {
            prefix,
            stop,
            reporter: Some(reporter),
            token: Some(token),
            zid_token: Some(zid_token),
            models,
            control,
            members,
            session,
        })
    }

    /// The key-expression prefix served under.
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// The models served now, by name (stateful ones too).
    pub fn models(&self) -> Vec<String> {
        let served: Vec<String> = self
            .models
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        served
            .into_iter()
            .chain(self.members.iter().map(|m| m.model().to_string()))
            .collect()
    }

    /// Stops serving: liveliness first (graphs stop sending), then the queryables; queued jobs
    /// still finish and are answered.
    pub fn shutdown(mut self) {
        self.stop_serving();
    }

    fn stop_serving(&mut self) {
        if let Some(token) = self.token.take() {
            let _ = token.undeclare().wait();
        }
        if let Some(token) = self.zid_token.take() {
            let _ = token.undeclare().wait();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(r) = self.reporter.take() {
            let _ = r.join();
        }
        if let Some(q) = self.control.take() {
            let _ = q.undeclare().wait();
        }
        // Retiring a model drains its queue (each job replies) and joins its threads.
        let served = std::mem::take(&mut *self.models.lock().unwrap_or_else(|p| p.into_inner()));
        served.into_values().for_each(ServedModel::retire);
        self.members.clear();
        let _ = self.session.close().wait();
    }
}

impl Drop for ExecutorServer {
    fn drop(&mut self) {
        self.stop_serving();
    }
}

fn spawn_reporter(
    session: Session,
    key: String,
    name: String,
    device: Device,
    models: Registry,
    stop: Arc<AtomicBool>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let publisher = match session.declare_publisher(key).wait() {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %e, "No load reports: cannot declare the publisher.");
                return;
            }
        };
        while !stop.load(Ordering::Acquire) {
            let executors: Vec<(String, Arc<ModelExecutor>)> = models
                .lock()
                .map(|m| {
                    m.iter()
                        .map(|(n, s)| (n.clone(), Arc::clone(&s.executor)))
                        .collect()
                })
                .unwrap_or_default();
            let report = LoadReport {
                executor: name.clone(),
                device: device.to_string(),
                models: executors
                    .iter()
                    .map(|(n, e)| {
                        let s = e.stats();
                        (
                            n.clone(),
                            ModelLoad {
                                queue_depth: s.queue_depth(),
                                runs: s.runs,
                                rows: s.rows,
                                busy_ms: s.busy.as_secs_f64() * 1e3,
                                held_ms: s.held.as_secs_f64() * 1e3,
                                sessions: u32::try_from(e.config().instances).unwrap_or(u32::MAX),
                                in_flight: Some(s.enqueued.saturating_sub(s.jobs_answered)),
                                served: Some(s.jobs_answered),
                                errors: Some(s.errors),
                                preferred_batch: s
                                    .row_cost
                                    .and_then(|c| c.preferred)
                                    .and_then(|p| u64::try_from(p).ok()),
                            },
                        )
                    })
                    .collect(),
            };
            if let Ok(body) = serde_json::to_vec(&report) {
                let _ = publisher.put(body).wait();
            }
            let until = Instant::now() + LOAD_REPORT_EVERY;
            while Instant::now() < until && !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    })
}
