//! The models an executor serves now: each one's ONNX Runtime executor and the queryable that
//! feeds it, in a registry shared by the server, its load reporter and the variant loader; and
//! how a model is started (the executor's flags, a variant's threads and batch) and put on the
//! network. Models given at start and variants loaded on command go through the same two steps,
//! so they are served alike.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use weir_engine::onnx::{read_metadata, ElementType};
use weir_engine::plan::PadPlan;
use weir_engine::spec::Device;
use weir_operators::model::{ExecutorConfig, ModelExecutor, OrtRuntime, Padding};
use zenoh::query::Queryable;
use zenoh::{Session, Wait};

use weir_engine::trace::SpanSink;

use crate::emulation::Emulation;
use crate::options::{zenoh_err, ExecutorOptions, ServeError};
use crate::query::{call_shape, handle_query};
use crate::variants::ResolvedVariant;

/// One served model: its executor and the queryable that feeds it.
pub(crate) struct ServedModel {
    pub(crate) executor: Arc<ModelExecutor>,
    pub(crate) queryable: Queryable<()>,
}

impl ServedModel {
    /// Stops serving: no new jobs (the queryable goes first), then the queued ones are answered
    /// and the sessions dropped (the executor's drop drains its queue and joins its threads,
    /// once the last in-flight query callback has let go of it).
    pub(crate) fn retire(self) {
        let _ = self.queryable.undeclare().wait();
        drop(self.executor);
    }
}

/// The models served now, by name; shared by the server, its load reporter and the variant
/// loader.
pub(crate) type Registry = Arc<Mutex<BTreeMap<String, ServedModel>>>;

/// What every model an executor serves is started with.
#[derive(Clone)]
pub(crate) struct ModelDefaults {
    pub(crate) runtime: OrtRuntime,
    pub(crate) options: ExecutorOptions,
}

impl ModelDefaults {
    /// Starts an ONNX Runtime executor for the model `name` run as `model` says: its file, its
    /// intra-op threads per session, at most its max batch of rows per call, its fixed batch
    /// when it is a batch-specialised build, its graph-optimisation level.
    pub(crate) fn start_model(
        &self,
        name: &str,
        model: &ResolvedVariant,
    ) -> Result<Arc<ModelExecutor>, ServeError> {
        let ResolvedVariant {
            path,
            intra_threads: threads,
            max_batch,
            fixed_batch,
            graph_level,
        } = model;
        let (threads, max_batch, fixed_batch) = (*threads, *max_batch, *fixed_batch);
        let options = &self.options;
        let bad = |message: String| ServeError::Model {
            model: name.to_string(),
            message,
        };
        let meta = read_metadata(path).map_err(|e| bad(e.to_string()))?;
        let call = call_shape(
            &meta,
            options.unbatched.iter().any(|u| u == name),
            fixed_batch,
        );
        let outputs = meta
            .outputs
            .iter()
            .map(|o| match o.element {
                ElementType::Supported(d) => Ok((o.name.clone(), d)),
                _ => Err(bad(format!(
                    "output `{}` is not a tensor of an Open Inference Protocol datatype",
                    o.name
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let inputs: Vec<String> = meta.inputs.iter().map(|i| i.name.clone()).collect();
        let pad = match options.pad.iter().find(|(model, _, _)| model == name) {
            None => None,
            Some((_, dim, _)) if !call.has_batch_dim() => {
                return Err(bad(format!(
                    "--pad {name}={dim}: padding joins requests into one call, and this model is called without a batch dimension"
                )));
            }
            Some((_, dim, value)) => {
                let plan = PadPlan::for_model(dim, *value, &meta).ok_or_else(|| {
                    bad(format!(
                        "--pad {name}={dim}: no input of the model has a dimension named `{dim}`"
                    ))
                })?;
                Some(Padding::resolve(&plan, &inputs, &outputs))
            }
        };
        let config = ExecutorConfig {
            node: name.to_string(),
            path: path.to_path_buf(),
            call,
            // A latency profile is per call of the job's rows: one job per call.
            max_batch: match options.emulation {
                Emulation::Latency(_) => 1,
                _ => call.call_rows(max_batch),
            },
            max_delay: options.max_delay,
            wait: options.wait,
            grow: options.grow,
            instances: options.instances.max(1),
            intra_op_threads: threads.max(1),
            queue_capacity: options.queue_capacity.max(1),
            spinning: false,
            pin_cores_from: None,
            inputs,
            outputs,
            pad,
            timeout: None,
            device: options.device,
            graph_level: *graph_level,
            warmup: weir_engine::warmup::synthetic_sample(
                &meta,
                call.has_batch_dim(),
                options.warmup_runs,
            )
            .into_iter()
            .collect(),
        };
        let executor = ModelExecutor::start(&self.runtime, config).map_err(|e| {
            let hint = if options.device == Device::Cuda {
                " (--device cuda needs the CUDA build of ONNX Runtime, the onnxruntime-gpu \
                 wheel's library, given with WEIR_ORT_DYLIB)"
            } else {
                ""
            };
            bad(format!("{e}{hint}"))
        })?;
        Ok(Arc::new(executor))
    }
}

/// Serves `executor` as the model `name` under `<prefix>/model/<name>`.
pub(crate) fn serve_model(
    session: &Session,
    prefix: &str,
    name: &str,
    executor: Arc<ModelExecutor>,
    (emulation, spans): (Emulation, Option<Arc<dyn SpanSink>>),
) -> Result<ServedModel, ServeError> {
    let key = format!("{prefix}/model/{name}");
    let feed = Arc::clone(&executor);
    let queryable = session
        .declare_queryable(&key)
        .callback(move |query| handle_query(&feed, emulation, spans.as_ref(), query))
        .wait()
        .map_err(zenoh_err)?;
    Ok(ServedModel {
        executor,
        queryable,
    })
}
