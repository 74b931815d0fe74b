//! The `model` node: an ONNX file run by ONNX Runtime, with its batching and executor settings.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::Spanned;

/// An ONNX model node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Node id, unique in the graph.
    pub id: Spanned<String>,
    /// The `.onnx` file; relative paths are relative to the graph file's folder. Left out when
    /// `task:` names a task or `repository:` a repository model instead.
    #[serde(default)]
    pub path: Spanned<PathBuf>,
    /// A model-less node ("INFaaS", §3.1): the task (registered in a model repository with
    /// `weir model register`) and the requirements its variant must meet; the graph's loader
    /// picks the variant and fills in `path` and the executor settings it was profiled with.
    #[serde(default)]
    pub task: Option<Spanned<TaskSpec>>,
    /// A model of a Triton model repository served beside the graph (`weir serve
    /// --model-repository DIR`), by name (`repository: resnet`) or by name and version
    /// (`repository: {name: resnet, version: 2}`; the highest version served when left out). The
    /// graph's loader fills in its file, and the batching and executor settings its
    /// configuration gives, so a service graph and Triton's clients share one repository.
    #[serde(default)]
    pub repository: Option<Spanned<RepositoryModel>>,
    /// Model input name → tensor reference feeding it. Every model input must be bound.
    pub inputs: BTreeMap<String, Spanned<String>>,
    /// Whether the model's first dimension is a batch dimension (default `true`). `batch: false`
    /// is Triton's `max_batch_size: 0`: each request is one call with its tensors exactly as they
    /// are (no batch dimension added, rank-0 tensors allowed), and the node's outputs are the
    /// model's outputs with their full shapes.
    #[serde(default = "batch_default")]
    pub batch: Spanned<bool>,
    /// Dynamic batching. Only used by models whose first dimension is dynamic; a model whose first
    /// dimension is fixed to 1 runs one request per call.
    #[serde(default)]
    pub batching: BatchingSpec,
    /// The ONNX Runtime executor serving this node.
    #[serde(default)]
    pub executor: ExecutorSpec,
    /// Where the node runs: names of the graph's `executors:` (remote processes serving this
    /// node's model under the node id) and/or `local` (an executor in this process). Jobs go to the
    /// live replica with the fewest outstanding; a replica that dies or times out has its jobs
    /// re-dispatched to the others. Default: one local replica.
    #[serde(default)]
    pub replicas: Option<Spanned<Vec<Spanned<String>>>>,
    /// How jobs are spread over the replicas: `least_outstanding` (default), `round_robin`, or
    /// `{kairos: {qos_ms: ..., profiles: ...}}` for a pool of different instance types.
    #[serde(default)]
    pub routing: Option<Spanned<super::RoutingSpec>>,
    /// State carried from one call to the next (HAMS stateful node; see [`super::StateSpec`]).
    #[serde(default)]
    pub state: Option<Box<Spanned<super::StateSpec>>>,
    /// How a stateful node's state is protected (default: no replication).
    #[serde(default)]
    pub replication: Option<Box<Spanned<super::ReplicationSpec>>>,
    /// Resilience mechanisms around the node (ParM parity coding).
    #[serde(default)]
    pub resilience: Option<ResilienceSpec>,
    /// SERF parallelism: `auto` (the scheduler picks concurrency × threads from the node's profile
    /// and switches live with the load) or fixed `{concurrency: C, threads: T}`. Replaces
    /// `executor.instances` / `executor.intra_op_threads`, which must then stay unset (1).
    #[serde(default)]
    pub parallelism: Option<Spanned<ParallelismSpec>>,
    /// Model inputs fed the same value on every call, by name: a model's per-call setting such
    /// as a streaming model's sample rate (`constants: {sr: 16000}`). Each names a model input of
    /// one element (a scalar, or every dimension 1), not bound under `inputs`, and holds a number
    /// of its type. Fed by stateful nodes (whose calls carry no per-request scalar).
    #[serde(default)]
    pub constants: BTreeMap<String, Spanned<f64>>,
    /// Requests run on every in-process session of the node before the graph reports ready
    /// (see [`super::WarmupSpec`]).
    #[serde(default)]
    pub warmup: Option<Spanned<super::WarmupSpec>>,
}

/// What a model-less node asks for: a task's name (`task: digits`), or the name and the
/// requirements (`task: {name: digits, min_accuracy: 0.95, latency_ms: 5}`) with the meaning of
/// a model-less request's `parameters`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum TaskSpec {
    /// Any variant of the task.
    Name(String),
    /// A variant meeting these.
    Requirements(TaskRequirements),
}

/// A task and its requirements.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequirements {
    /// The task.
    pub name: String,
    /// Latency of one call, in milliseconds, at most.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// Accuracy (0–1) at least.
    #[serde(default)]
    pub min_accuracy: Option<f64>,
    /// Price per second of the instance at most.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

impl TaskSpec {
    /// The task's name.
    pub fn name(&self) -> &str {
        match self {
            TaskSpec::Name(n) => n,
            TaskSpec::Requirements(r) => &r.name,
        }
    }
}

/// A model of a Triton repository a node runs: its name, or its name and version.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum RepositoryModel {
    /// The highest version served.
    Name(String),
    /// One version.
    Versioned(VersionedModel),
}

/// A repository model's name and version.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionedModel {
    /// The model's folder name.
    pub name: String,
    /// Its version folder's number.
    pub version: u64,
}

impl RepositoryModel {
    /// The model's name.
    pub fn name(&self) -> &str {
        match self {
            RepositoryModel::Name(n) => n,
            RepositoryModel::Versioned(v) => &v.name,
        }
    }

    /// The version asked for; `None` for the highest served.
    pub fn version(&self) -> Option<u64> {
        match self {
            RepositoryModel::Name(_) => None,
            RepositoryModel::Versioned(v) => Some(v.version),
        }
    }
}

fn batch_default() -> Spanned<bool> {
    Spanned::unlocated(true)
}

impl ModelSpec {
    /// The state tensor names `state:` declares: (inputs, outputs), both empty for a stateless node.
    pub fn state_tensors(&self) -> (Vec<&str>, Vec<&str>) {
        match &self.state {
            Some(s) => (
                s.inputs.iter().map(|n| n.value.as_str()).collect(),
                s.outputs.iter().map(|n| n.value.as_str()).collect(),
            ),
            None => (Vec::new(), Vec::new()),
        }
    }

    /// The replication settings that apply: `replication:` as written, or, without it, no backup
    /// with the default timings.
    pub fn replication_settings(&self) -> super::ReplicationSpec {
        self.replication
            .as_ref()
            .map_or_else(super::ReplicationSpec::unreplicated, |r| r.value.clone())
    }
}

/// How many requests a model node runs at once and with how many intra-op threads each (SERF).
///
/// Written `parallelism: auto`, `parallelism: {auto: {max_utilisation: 0.6}}` or
/// `parallelism: {concurrency: 2, threads: 1}`. The YAML shape picks the variant explicitly (the
/// string `auto`, a map with the one key `auto`, or a map with exactly `concurrency` and
/// `threads`); nothing is guessed from optional fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParallelismSpec {
    /// The SERF scheduler chooses `(concurrency, threads)` among the configurations of the node's
    /// profile (`<node>.serf.json` next to the graph, written by `weir profile`) and switches live.
    Auto(AutoSpec),
    /// A fixed configuration, the same as `executor: {instances: C, intra_op_threads: T}`.
    Fixed(FixedParallelism),
}

/// Settings of `parallelism: auto`; every one left out takes the scheduler's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutoSpec {
    /// One utilisation cap for every configuration: the scheduler chooses only among
    /// configurations predicted at most this busy at the planned load (`0 < U ≤ 1`). Left out,
    /// the cap is earned per configuration: 0.6 for one whose calls measured near the load held
    /// within 1.3 × its profiled time, 0.5 for any other (`weir_serf::scheduler` docs, *Earned
    /// headroom*, say why). Higher lets a faster configuration with less headroom be chosen at
    /// moderate load.
    #[serde(default)]
    pub max_utilisation: Option<f64>,
}

impl AutoSpec {
    /// Whether `u` is a utilisation cap the scheduler can plan for: above 0 and at most 1.
    pub fn accepts_max_utilisation(u: f64) -> bool {
        u > 0.0 && u <= 1.0
    }
}

/// A fixed parallelism configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedParallelism {
    /// Requests running at once (sessions, each on its own thread).
    pub concurrency: usize,
    /// Intra-op threads per request.
    pub threads: usize,
}

/// What `parallelism` expects, for errors.
const PARALLELISM_SHAPES: &str =
    "`auto`, `{auto: {max_utilisation: U}}` or `{concurrency: C, threads: T}`";

/// The map forms of `parallelism`, read before the variant is picked from the keys present.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ParallelismMap {
    #[serde(default)]
    auto: Option<AutoSpec>,
    #[serde(default)]
    concurrency: Option<usize>,
    #[serde(default)]
    threads: Option<usize>,
}

impl<'de> Deserialize<'de> for ParallelismSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ParallelismSpec;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(PARALLELISM_SHAPES)
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ParallelismSpec, E> {
                if v == "auto" {
                    Ok(ParallelismSpec::Auto(AutoSpec::default()))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Str(v), &self))
                }
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<ParallelismSpec, A::Error> {
                use serde::de::Error;
                let m =
                    ParallelismMap::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                match (m.auto, m.concurrency, m.threads) {
                    (Some(auto), None, None) => Ok(ParallelismSpec::Auto(auto)),
                    (None, Some(concurrency), Some(threads)) => {
                        Ok(ParallelismSpec::Fixed(FixedParallelism {
                            concurrency,
                            threads,
                        }))
                    }
                    (None, Some(_), None) => Err(A::Error::missing_field("threads")),
                    (None, None, Some(_)) => Err(A::Error::missing_field("concurrency")),
                    (None, None, None) => Err(A::Error::custom(format!(
                        "an empty map; expected {PARALLELISM_SHAPES}"
                    ))),
                    (Some(_), _, _) => Err(A::Error::custom(
                        "`auto` lets the scheduler choose concurrency and threads; give either `auto` or `concurrency` and `threads`, not both",
                    )),
                }
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Resilience around a model node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResilienceSpec {
    /// ParM: every `k` consecutively dispatched jobs form a coding group whose parity job runs on a
    /// parity model; a straggler's output is reconstructed from the others and the parity output.
    #[serde(default)]
    pub parity: Option<Spanned<ParitySpec>>,
}

/// ParM parity coding for one model node.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParitySpec {
    /// Coding-group size (≥ 2).
    pub k: Spanned<usize>,
    /// The parity model (r = 1): same inputs and outputs as the deployed one (`weir parity
    /// train`). Give this or `parity_models`.
    #[serde(default)]
    pub parity_model: Option<Spanned<PathBuf>>,
    /// r ≥ 1 parity models over the same coding group (ParM, §7): parity model `t` (0-based)
    /// answers the query coded with coefficients `(i + 1)^t` (`weir parity train --index t`), and
    /// any r missing predictions of a group are decoded. Give this or `parity_model`.
    #[serde(default)]
    pub parity_models: Option<Spanned<Vec<Spanned<PathBuf>>>>,
    /// How the k queries become the parity query.
    #[serde(default)]
    pub encoder: Spanned<ParityEncoder>,
    /// When a missing prediction counts as unavailable and is reconstructed (default: later than
    /// the node's p99 latency, or its replica failed).
    #[serde(default)]
    pub decode: Spanned<super::DecodeSpec>,
    /// Where the parity model node's replicas run: `local` and/or names from `executors:` (which
    /// serve it under `<node>.parity`, `<node>.parity1`, ...). Default: one local replica.
    #[serde(default)]
    pub replicas: Option<Spanned<Vec<Spanned<String>>>>,
    /// The parity model node's batching (default: the deployed node's; `pad` and `fixed_size`
    /// do not apply).
    #[serde(default)]
    pub batching: Option<BatchingSpec>,
    /// The parity model node's executor (default: the deployed node's, with `instances` divided
    /// by k, at least 1: the paper's m/k parity instances for m deployed ones).
    #[serde(default)]
    pub executor: Option<ExecutorSpec>,
}

impl ParitySpec {
    /// The parity models, in index order (`parity_model` alone, or `parity_models`).
    pub fn models(&self) -> Vec<&Spanned<PathBuf>> {
        match (&self.parity_model, &self.parity_models) {
            (Some(one), _) => vec![one],
            (None, Some(list)) => list.value.iter().collect(),
            (None, None) => Vec::new(),
        }
    }
}

/// A parity encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParityEncoder {
    /// P = Σ X_i, feature-wise.
    #[default]
    Sum,
    /// Downsampled images tiled into one (k = 2 or 4, a square single-channel image with an
    /// even side).
    Concat,
}

/// Dynamic batching: gather up to `max_size` requests; a call takes what is queued when a session
/// is free (by default its share of it among the node's sessions), and waits up to
/// `max_delay_us` for more only as `wait` says (by default only while every session is running a
/// call).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchingSpec {
    /// Most requests in one inference call (≥ 1; 1 turns batching off).
    #[serde(default = "default_max_size")]
    pub max_size: usize,
    /// Longest a request waits for others to join its batch, in microseconds.
    #[serde(default)]
    pub max_delay_us: u64,
    /// When a batch waits up to `max_delay_us` for more requests.
    #[serde(default)]
    pub wait: BatchWait,
    /// How large a call's batch may grow: only while the node has measured rows to cost less in
    /// larger calls (the default), or always up to `max_size`.
    #[serde(default)]
    pub grow: BatchGrow,
    /// Padded batching: requests whose inputs differ only along the dimension this names join one
    /// call, each padded to the longest; without it only requests of one shape join.
    #[serde(default)]
    pub pad: Option<Spanned<PadSpec>>,
    /// The batch size the model's first dimension is fixed to (a batch-specialised build, as
    /// `weir model register --batches` makes): calls hold up to this many rows (and `max_size`)
    /// and are padded with zero rows to it. Stated, never inferred from the file, since a first
    /// dimension fixed to 3 may as well be an image's channels.
    #[serde(default)]
    pub fixed_size: Option<Spanned<usize>>,
}

/// When a batch's first request waits up to `max_delay_us` for company (`batching.wait`).
///
/// A session that is free takes requests already queued (up to `max_size`) at once; this
/// decides how many, and whether it then waits for more to arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum BatchWait {
    /// Only while every session of the node is running a call, and each free session takes its
    /// share of the queue (`⌈queued / sessions⌉`), leaving the rest to the others: a node with a
    /// free session runs a lone request at once, and batches form from what queued while earlier
    /// calls ran (dynamic batching without a fixed timer).
    #[default]
    WhenBusy,
    /// Always, the fixed timer: a free session takes the whole queue, and every call waits for
    /// company until `max_size` requests or `max_delay_us` after its first was queued, busy or
    /// not.
    Always,
}

impl TryFrom<String> for BatchWait {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.as_str() {
            "when_busy" => Ok(BatchWait::WhenBusy),
            "always" => Ok(BatchWait::Always),
            other => Err(format!(
                "`batching.wait` is `{other}`; it takes `when_busy` (wait for company only while \
                 every session runs a call, the default) or `always` (a fixed timer)"
            )),
        }
    }
}

/// How large a call's batch may grow (`batching.grow`).
///
/// On a CPU session of one intra-op thread the rows of a call are computed one after another by
/// that thread, so a larger batch saves only the per-call work and can cost more per row once its
/// activations no longer fit in the caches; the node measures its own cost per row by batch size
/// and stops growing batches where they stop paying (`row_cost.rs` in the executor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum BatchGrow {
    /// Up to the batch size the node's calls have measured cheapest per row, when a larger
    /// size has measured dearer (up to `max_size` until then, and on sessions whose cost per
    /// row it does not measure: a GPU, several intra-op threads, padded or fixed-size calls).
    #[default]
    WhileCheaper,
    /// Always up to `max_size` rows.
    ToMaxSize,
}

impl TryFrom<String> for BatchGrow {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.as_str() {
            "while_cheaper" => Ok(BatchGrow::WhileCheaper),
            "to_max_size" => Ok(BatchGrow::ToMaxSize),
            other => Err(format!(
                "`batching.grow` is `{other}`; it takes `while_cheaper` (batches grow only while \
                 the node has measured rows cheaper in larger calls, the default) or \
                 `to_max_size` (always up to `max_size`)"
            )),
        }
    }
}

/// Padding along one named dimension of a model's inputs (`pad: {dim: seq, value: 0}`).
///
/// Every input axis whose ONNX `dim_param` is `dim` is padded with `value` (cast to the input's
/// element type; BYTES inputs pad with empty strings) to the longest request of the call; every
/// output axis with the same name is sliced back to each request's own length, and outputs
/// without it are returned whole.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PadSpec {
    /// The ONNX dimension name (`dim_param`) to pad along.
    pub dim: Spanned<String>,
    /// The padding value (default 0).
    #[serde(default)]
    pub value: Spanned<f64>,
    /// When requests of different lengths are padded into one call: `always` (the default) pads
    /// every batch into one call; `cheaper` pads only when the node's measured cost of calls
    /// predicts the padded call cheaper than calls of nearer lengths (not the default: end to end
    /// it has not yet paid at every load, `benchmarks/variable_length`).
    #[serde(default)]
    pub when: PadWhen,
}

/// When a padded node joins requests of different lengths into one call (`batching.pad.when`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "String")]
pub enum PadWhen {
    /// When the node's own cost model (its measured call times by rows and padded length)
    /// predicts one padded call cheaper than splitting the batch into calls of nearer lengths.
    Cheaper,
    /// Every batch, into one call padded to its longest request.
    #[default]
    Always,
}

impl TryFrom<String> for PadWhen {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.as_str() {
            "cheaper" => Ok(PadWhen::Cheaper),
            "always" => Ok(PadWhen::Always),
            other => Err(format!(
                "`batching.pad.when` is `{other}`; it takes `always` (every batch padded into one \
                 call, the default) or `cheaper` (pad only when the padded call is predicted \
                 cheaper than split calls)"
            )),
        }
    }
}

fn default_max_size() -> usize {
    1
}

impl Default for BatchingSpec {
    fn default() -> Self {
        BatchingSpec {
            max_size: default_max_size(),
            max_delay_us: 0,
            wait: BatchWait::default(),
            grow: BatchGrow::default(),
            pad: None,
            fixed_size: None,
        }
    }
}

/// How ONNX Runtime runs this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSpec {
    /// Sessions running at once (inter-request parallelism), each on its own thread.
    #[serde(default = "one")]
    pub instances: usize,
    /// Intra-op threads per session (intra-request parallelism).
    #[serde(default = "one")]
    pub intra_op_threads: usize,
    /// Most batches waiting for a session; a full queue holds work back in the dataflow.
    #[serde(default = "default_queue_capacity")]
    pub queue_capacity: usize,
    /// Let ONNX Runtime's intra-op threads spin while idle (lower latency, burns cores).
    #[serde(default)]
    pub spinning: bool,
    /// Pin each session thread and intra-op worker to a core of its own, from this index of the
    /// process's CPUs on (`None`, the default: the OS places them). Session thread `i` with `t`
    /// intra-op threads runs on core `first + i·t`, its workers on the next `t − 1`.
    #[serde(default)]
    pub pin_cores_from: Option<usize>,
    /// How long a remote replica may take to answer one job before the job is re-dispatched to
    /// another replica, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// ONNX Runtime's graph-optimisation level for the node's sessions (default `all`).
    #[serde(default)]
    pub graph_optimization: GraphLevel,
    /// Where the node's in-process sessions run: `cpu` (default), or `cuda` for ONNX Runtime's
    /// CUDA execution provider on device 0, which needs the `onnxruntime-gpu` build of the
    /// library (`WEIR_ORT_DYLIB`); a session that cannot get it fails to start, never falls back.
    #[serde(default)]
    pub device: super::Device,
}

/// ONNX Runtime's graph-optimisation level: how much the session rewrites the model's graph
/// before running it. Higher levels load slower and usually run faster; model-less serving's
/// variants differ by it.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum GraphLevel {
    /// No graph optimisation.
    Disabled,
    /// Constant folding, redundant-node elimination.
    Basic,
    /// Basic plus node fusions.
    Extended,
    /// Everything, including layout optimisations.
    #[default]
    All,
}

impl GraphLevel {
    /// Every level, lowest first.
    pub const ALL: [GraphLevel; 4] = [
        GraphLevel::Disabled,
        GraphLevel::Basic,
        GraphLevel::Extended,
        GraphLevel::All,
    ];

    /// `disabled`, `basic`, `extended` or `all`, as YAML writes it.
    pub fn name(self) -> &'static str {
        match self {
            GraphLevel::Disabled => "disabled",
            GraphLevel::Basic => "basic",
            GraphLevel::Extended => "extended",
            GraphLevel::All => "all",
        }
    }

    /// The level [`GraphLevel::name`] gives `name`.
    pub fn parse(name: &str) -> Option<GraphLevel> {
        GraphLevel::ALL.into_iter().find(|l| l.name() == name)
    }
}

fn default_timeout_ms() -> u64 {
    5_000
}

fn one() -> usize {
    1
}

fn default_queue_capacity() -> usize {
    64
}

impl Default for ExecutorSpec {
    fn default() -> Self {
        ExecutorSpec {
            instances: 1,
            intra_op_threads: 1,
            queue_capacity: default_queue_capacity(),
            spinning: false,
            pin_cores_from: None,
            timeout_ms: default_timeout_ms(),
            graph_optimization: GraphLevel::All,
            device: super::Device::Cpu,
        }
    }
}
