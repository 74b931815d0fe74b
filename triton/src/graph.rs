//! A served version as a weir graph, built with the engine's builder API: an ONNX model is one
//! model node, an ensemble one node per step with its tensors wired along `input_map` and
//! `output_map`.
//!
//! How a configuration becomes a node:
//! - `max_batch_size > 0`: the node batches (`batch: true`); with `dynamic_batching` it gathers
//!   up to `max_batch_size` requests, waiting at most `max_queue_delay_microseconds`; with
//!   `sequence_batching` up to `max_batch_size` rows without waiting; with neither, as Triton's
//!   default scheduler, one request per call. `max_batch_size: 0` is `batch: false` (`unbatched`):
//!   each request is one call with its tensors as they are.
//! - The request shape of each graph input is the input's `dims` (without the batch dimension,
//!   which weir adds when it batches), `-1` staying free.
//! - `instance_group`: the groups' counts add up to the executor's `instances`; KIND_GPU groups
//!   run on ONNX Runtime's CUDA execution provider on device 0 (`gpus` empty or `[0]`; another
//!   device is [`GraphError::GpuInstances`]), and a model's groups are all of one kind, since
//!   one node's executor runs on one device.
//! - `parameters.intra_op_thread_count` above 0 is `intra_op_threads` (weir's default, 1,
//!   otherwise); `optimization.graph.level` is ONNX Runtime's optimisation level as the backend
//!   maps it (-1 basic, 1 extended, 2 none, otherwise all).
//! - `sequence_batching.state` is per-sequence state (the HAMS stateful node) stacked along the
//!   batch axis 0, idle after `max_sequence_idle_microseconds`.
//! - `sequence_batching.control_input` are graph inputs weir fills from each request's sequence
//!   parameters ([`crate::sequence_controls`]), bound to the model's inputs of the same names.
//!
//! - `reshape` (and a scalar in the file written as `dims: [1]`) is a `reshape` op node between
//!   the client's tensor and the model's ([`crate::reshape`]).
//!
//! - `optional: true` is an optional graph input ([`weir_engine::spec::InputSpec::optional`]):
//!   a request leaving it out is filled with the value the file holds for it; an ensemble step
//!   whose optional input no tensor feeds runs on the file's value.
//!
//! What the engine has no counterpart for is refused by field ([`GraphError::Unsupported`]):
//! sequence state without batching, sequence control inputs of an ensemble's step, an ensemble
//! mixing batching and non-batching steps.

use weir_engine::spec::{
    Device, DimSpec, ExecutorSpec, GraphBuilder, GraphLevel, GraphSpec, ModelBuilder,
};

use crate::autocomplete::ModelKind;
use crate::datatype;
use crate::ensemble;
use crate::error::GraphError;
use crate::load::{Repository, ServedVersion};
use crate::names::{identifier, Names};
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_instance_group::Kind as GroupKind;
use crate::proto::inference::{DataType, ModelConfig};
use crate::reshape::reshapes;
use crate::sequence_controls::control_inputs;

/// Most sequences a per-sequence node holds at once (weir's default; Triton bounds sequences by
/// its batcher's slots instead).
pub const MAX_SEQUENCES: usize = 1024;

/// A served version as a graph, with the names it had to change.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedGraph {
    /// The graph (not yet validated: `weir_engine::validate` opens the ONNX files).
    pub spec: GraphSpec,
    /// Triton input name → graph input name, for every input (equal where Triton's name is
    /// already a weir identifier).
    pub inputs: Vec<(String, String)>,
}

/// The graph of `model` at `version` (its latest served version when `None`).
///
/// # Errors
/// [`GraphError::NotServed`] when the version did not load; [`GraphError::GpuInstances`] and
/// [`GraphError::Unsupported`] for configurations the engine cannot run.
pub fn graph(
    repo: &Repository,
    model: &str,
    version: Option<u64>,
) -> Result<ServedGraph, GraphError> {
    let served = served(repo, model, version)?;
    let loaded = repo.model(model).map(|m| m.kind);
    let mut names = Names::default();
    let mut builder = GraphBuilder::new(&identifier(model)).description(&format!(
        "Triton model `{model}` version {}",
        served.version
    ));
    let mut inputs = Vec::new();
    for t in &served.config.input {
        let graph_name = names.take(&t.name);
        builder = builder.input_dims(
            &graph_name,
            input_dtype(model, &t.name, t.data_type)?,
            dims(&t.dims),
        );
        if graph_name != t.name {
            builder = builder.client_name(&graph_name, &t.name);
        }
        if t.optional {
            builder = builder.optional(&graph_name);
        }
        inputs.push((t.name.clone(), graph_name));
    }
    if loaded == Some(ModelKind::Ensemble) {
        return ensemble_graph(repo, model, served, builder, names, inputs);
    }
    let mut bound = inputs.clone();
    let controls =
        control_inputs(&served.config).map_err(|(field, reason)| GraphError::Unsupported {
            model: model.to_string(),
            field,
            reason,
        })?;
    for c in controls {
        let graph_name = names.take(&c.name);
        builder = builder.sequence_input(&graph_name, c.dtype, c.control, c.false_true);
        bound.push((c.name, graph_name));
    }
    let graph_name_of = |tensor: &str| {
        bound
            .iter()
            .find(|(t, _)| t == tensor)
            .map(|(_, g)| g.clone())
    };
    let (mut builder, outputs) = add_model(builder, &mut names, model, served, |input| {
        graph_name_of(input)
    })?;
    for t in &served.config.output {
        let from = reference(&outputs, &t.name).unwrap_or_default();
        builder = builder.output(&t.name, &from);
    }
    Ok(ServedGraph {
        spec: builder.build(),
        inputs,
    })
}

/// The reference carrying `tensor` in `refs` (tensor name → reference).
fn reference(refs: &[(String, String)], tensor: &str) -> Option<String> {
    refs.iter()
        .find(|(t, _)| t == tensor)
        .map(|(_, r)| r.clone())
}

/// Adds the node of `served` (a version of `model`) to `builder`, with a `reshape` node before
/// each input and after each output its configuration reshapes ([`crate::reshape`]). Returns the
/// builder and, per model output, the reference that carries it shaped as the configuration's
/// `dims`.
fn add_model(
    mut builder: GraphBuilder,
    names: &mut Names,
    model: &str,
    served: &ServedVersion,
    bind: impl Fn(&str) -> Option<String>,
) -> Result<(GraphBuilder, Vec<(String, String)>), GraphError> {
    let id = names.take(model);
    let (into, out_of) = reshapes(model, served)?;
    let mut reshaped = Vec::new();
    for r in &into {
        let Some(from) = bind(&r.tensor) else {
            continue;
        };
        let node = names.take(&format!("{id}_{}_reshape", r.tensor));
        builder = builder.reshape(&node, &from, &r.to);
        reshaped.push((r.tensor.clone(), format!("{node}.output")));
    }
    let node = model_node(model, &id, served, |input| {
        reference(&reshaped, input).or_else(|| bind(input))
    })?;
    builder = builder.model(node);
    let mut outputs = Vec::new();
    for t in &served.config.output {
        let mut from = format!("{id}.{}", t.name);
        if let Some(r) = out_of.iter().find(|r| r.tensor == t.name) {
            let node = names.take(&format!("{id}_{}_reshape", t.name));
            builder = builder.reshape(&node, &from, &r.to);
            from = format!("{node}.output");
        }
        outputs.push((t.name.clone(), from));
    }
    Ok((builder, outputs))
}

pub(crate) fn served<'a>(
    repo: &'a Repository,
    model: &str,
    version: Option<u64>,
) -> Result<&'a ServedVersion, GraphError> {
    let not_served = |reason: String| GraphError::NotServed {
        model: model.to_string(),
        version,
        reason,
    };
    let entry = repo
        .models
        .get(model)
        .ok_or_else(|| not_served("no such model in the repository".into()))?;
    let loaded = entry
        .outcome
        .as_ref()
        .map_err(|e| not_served(e.kind.to_string()))?;
    match version {
        None => loaded
            .latest()
            .ok_or_else(|| not_served("no version loaded".into())),
        Some(v) => match loaded.versions.get(&v) {
            None => Err(not_served("the version policy does not serve it".into())),
            Some(Err(e)) => Err(not_served(e.kind.to_string())),
            Some(Ok(s)) => Ok(s),
        },
    }
}

fn input_dtype(
    model: &str,
    name: &str,
    raw: i32,
) -> Result<weir_engine::tensor::DType, GraphError> {
    DataType::try_from(raw)
        .ok()
        .and_then(datatype::dtype)
        .ok_or_else(|| GraphError::Unsupported {
            model: model.to_string(),
            field: format!("input `{name}`"),
            reason: format!("data type {} has no weir counterpart", datatype::name(raw)),
        })
}

fn dims(d: &[i64]) -> Vec<DimSpec> {
    d.iter().map(|&n| DimSpec::Size(n)).collect()
}

/// The model node `id` of `served` (a version of `model`), each model input bound to the
/// reference `bind` gives.
pub(crate) fn model_node(
    model: &str,
    id: &str,
    served: &ServedVersion,
    bind: impl Fn(&str) -> Option<String>,
) -> Result<ModelBuilder, GraphError> {
    let unsupported = |field: String, reason: &str| GraphError::Unsupported {
        model: model.to_string(),
        field,
        reason: reason.to_string(),
    };
    let config = &served.config;
    let file = served
        .model_file
        .clone()
        .ok_or_else(|| unsupported("platform".into(), "not an ONNX model"))?;
    let mut node = ModelBuilder::new(id, file);
    for (i, t) in config.input.iter().enumerate() {
        match bind(&t.name) {
            Some(from) => node = node.input(&t.name, &from),
            // ONNX Runtime runs the call on the file's value (an ensemble step's unmapped input).
            None if t.optional => {}
            None => {
                return Err(unsupported(
                    format!("input[{i}]"),
                    "no tensor feeds this input",
                ))
            }
        }
    }
    let mbs = usize::try_from(config.max_batch_size).unwrap_or(0);
    node = match &config.scheduling_choice {
        _ if mbs == 0 => node.unbatched(),
        Some(SchedulingChoice::DynamicBatching(db)) => {
            node.batching(mbs, db.max_queue_delay_microseconds)
        }
        Some(SchedulingChoice::SequenceBatching(_)) => node.batching(mbs, 0),
        _ => node.batching(1, 0),
    };
    if let Some(SchedulingChoice::SequenceBatching(seq)) = &config.scheduling_choice {
        for (i, c) in seq.control_input.iter().enumerate() {
            let from = bind(&c.name).ok_or_else(|| {
                unsupported(
                    format!("sequence_batching.control_input[{i}]"),
                    "no tensor feeds this control input (an ensemble's step cannot take sequence controls)",
                )
            })?;
            node = node.input(&c.name, &from);
        }
        if !seq.state.is_empty() {
            if mbs == 0 {
                return Err(unsupported(
                    "sequence_batching.state".into(),
                    "per-sequence state stacks sequences along the batch dimension: it needs max_batch_size > 0",
                ));
            }
            let ins: Vec<&str> = seq.state.iter().map(|s| s.input_name.as_str()).collect();
            let outs: Vec<&str> = seq.state.iter().map(|s| s.output_name.as_str()).collect();
            let idle_ms = seq.max_sequence_idle_microseconds.div_ceil(1000).max(1);
            node = node
                .state(&ins, &outs)
                .per_sequence(0, idle_ms, MAX_SEQUENCES);
        }
    }
    Ok(node.executor(executor(model, config)?))
}

fn executor(model: &str, config: &ModelConfig) -> Result<ExecutorSpec, GraphError> {
    let mut instances = 0usize;
    let mut device = None;
    for (i, group) in config.instance_group.iter().enumerate() {
        let kind = if group.kind() == GroupKind::Gpu {
            if group.gpus.iter().any(|&g| g != 0) {
                return Err(GraphError::GpuInstances {
                    model: model.to_string(),
                    group: i,
                });
            }
            Device::Cuda
        } else {
            Device::Cpu
        };
        if device.is_some_and(|d| d != kind) {
            return Err(GraphError::Unsupported {
                model: model.to_string(),
                field: format!("instance_group[{i}].kind"),
                reason: "a model's instance groups are all KIND_CPU or all KIND_GPU: its executor runs on one device".into(),
            });
        }
        device = Some(kind);
        instances += usize::try_from(group.count).unwrap_or(0).max(1);
    }
    let intra = config
        .parameters
        .get("intra_op_thread_count")
        .and_then(|p| p.string_value.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1);
    let level = match config
        .optimization
        .as_ref()
        .and_then(|o| o.graph.as_ref())
        .map(|g| g.level)
    {
        Some(-1) => GraphLevel::Basic,
        Some(1) => GraphLevel::Extended,
        Some(2) => GraphLevel::Disabled,
        _ => GraphLevel::All,
    };
    Ok(ExecutorSpec {
        instances: instances.max(1),
        intra_op_threads: intra,
        graph_optimization: level,
        device: device.unwrap_or_default(),
        ..ExecutorSpec::default()
    })
}

fn ensemble_graph(
    repo: &Repository,
    model: &str,
    served: &ServedVersion,
    mut builder: GraphBuilder,
    mut names: Names,
    inputs: Vec<(String, String)>,
) -> Result<ServedGraph, GraphError> {
    let steps = ensemble::steps(&served.config);
    // Ensemble tensor → the reference that carries it.
    let mut refs: Vec<(String, String)> = inputs.clone();
    let batching = served.config.max_batch_size > 0;
    for (i, step_model, step_version) in &served.steps {
        let step = &steps[*i];
        let step_served = self::served(repo, step_model, Some(*step_version))?;
        if (step_served.config.max_batch_size > 0) != batching {
            return Err(GraphError::Unsupported {
                model: model.to_string(),
                field: format!("ensemble_scheduling.step[{i}]"),
                reason: format!(
                    "model `{step_model}` {} but the ensemble {}: the engine passes each request's tensors to a step as they are, so the two must agree",
                    if batching { "does not batch" } else { "batches" },
                    if batching { "does" } else { "does not" }
                ),
            });
        }
        let (next, outputs) = add_model(builder, &mut names, step_model, step_served, |input| {
            reference(&refs, step.input_map.get(input)?)
        })?;
        builder = next;
        for (output, tensor) in &step.output_map {
            if let Some(from) = reference(&outputs, output) {
                refs.push((tensor.clone(), from));
            }
        }
    }
    for t in &served.config.output {
        let from = reference(&refs, &t.name).ok_or_else(|| GraphError::Unsupported {
            model: model.to_string(),
            field: format!("output `{}`", t.name),
            reason: "no step writes it".into(),
        })?;
        builder = builder.output(&t.name, &from);
    }
    Ok(ServedGraph {
        spec: builder.build(),
        inputs,
    })
}
