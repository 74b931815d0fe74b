//! The builder of a `model` node: the ONNX file and its inputs, then batching, the executor and
//! parallelism, state, replication, parity and routing, each as its YAML key sets it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::s;
use crate::spec::{BatchingSpec, ExecutorSpec, ModelSpec};

/// Builds a `model` node.
#[derive(Debug, Clone)]
pub struct ModelBuilder {
    spec: ModelSpec,
}

impl ModelBuilder {
    /// A model node `id` running the ONNX file at `path`.
    pub fn new(id: &str, path: impl Into<PathBuf>) -> Self {
        ModelBuilder {
            spec: ModelSpec {
                id: s(id.to_string()),
                path: s(path.into()),
                task: None,
                repository: None,
                inputs: BTreeMap::new(),
                batch: s(true),
                batching: BatchingSpec::default(),
                executor: ExecutorSpec::default(),
                replicas: None,
                routing: None,
                resilience: None,
                parallelism: None,
                state: None,
                replication: None,
                constants: BTreeMap::new(),
                warmup: None,
            },
        }
    }

    /// Warms every in-process session of the node with `warmup` before the graph is ready.
    pub fn warmup(mut self, warmup: crate::spec::WarmupSpec) -> Self {
        self.spec.warmup = Some(s(warmup));
        self
    }

    /// The node as built.
    pub fn into_spec(self) -> ModelSpec {
        self.spec
    }

    /// Binds model input `name` to tensor reference `from`.
    pub fn input(mut self, name: &str, from: &str) -> Self {
        self.spec
            .inputs
            .insert(name.to_string(), s(from.to_string()));
        self
    }

    /// Sets dynamic batching.
    pub fn batching(mut self, max_size: usize, max_delay_us: u64) -> Self {
        self.spec.batching = BatchingSpec {
            max_size,
            max_delay_us,
            wait: self.spec.batching.wait,
            grow: self.spec.batching.grow,
            pad: self.spec.batching.pad.take(),
            fixed_size: self.spec.batching.fixed_size.take(),
        };
        self
    }

    /// Sets when a batch waits `max_delay_us` for company (`batching.wait`).
    pub fn batch_wait(mut self, wait: crate::spec::BatchWait) -> Self {
        self.spec.batching.wait = wait;
        self
    }

    /// Sets how large a call's batch may grow (`batching.grow`).
    pub fn batch_grow(mut self, grow: crate::spec::BatchGrow) -> Self {
        self.spec.batching.grow = grow;
        self
    }

    /// Pads every call to exactly `size` rows: for a model whose file fixes its batch dimension
    /// (`batching.fixed_size`).
    pub fn fixed_batch(mut self, size: usize) -> Self {
        self.spec.batching.fixed_size = Some(s(size));
        self
    }

    /// Pads requests along the model's dimension named `dim` with `value`, so that requests of
    /// different lengths join one call (see [`crate::spec::PadSpec`]).
    pub fn pad(mut self, dim: &str, value: f64) -> Self {
        self.spec.batching.pad = Some(s(crate::spec::PadSpec {
            dim: s(dim.to_string()),
            value: s(value),
            when: crate::spec::PadWhen::default(),
        }));
        self
    }

    /// Sets when a padded node joins requests of different lengths into one call (after
    /// [`ModelBuilder::pad`]; see [`crate::spec::PadWhen`]). Without `pad` it does nothing.
    pub fn pad_when(mut self, when: crate::spec::PadWhen) -> Self {
        if let Some(pad) = self.spec.batching.pad.as_mut() {
            pad.value.when = when;
        }
        self
    }

    /// Declares that the model has no batch dimension (`batch: false`): each request is one call
    /// with its tensors as they are.
    pub fn unbatched(mut self) -> Self {
        self.spec.batch = s(false);
        self
    }

    /// Sets the executor.
    pub fn executor(mut self, executor: ExecutorSpec) -> Self {
        self.spec.executor = executor;
        self
    }

    /// Sets SERF parallelism: `auto`, or a fixed concurrency × threads.
    pub fn parallelism(mut self, parallelism: crate::spec::ParallelismSpec) -> Self {
        self.spec.parallelism = Some(s(parallelism));
        self
    }

    /// Makes the node stateful: model input `inputs[i]` is fed by output `outputs[i]` of the
    /// previous call (HAMS).
    pub fn state(mut self, inputs: &[&str], outputs: &[&str]) -> Self {
        self.spec.state = Some(Box::new(s(crate::spec::StateSpec {
            inputs: inputs.iter().map(|n| s(n.to_string())).collect(),
            outputs: outputs.iter().map(|n| s(n.to_string())).collect(),
            per_sequence: None,
        })));
        self
    }

    /// Keeps the node's state per client sequence (call after [`Self::state`]): sequences stack
    /// along `batch_axis` of the state tensors, start at zeros, time out after `idle_timeout_ms`,
    /// at most `max_sequences` at once.
    pub fn per_sequence(
        mut self,
        batch_axis: usize,
        idle_timeout_ms: u64,
        max_sequences: usize,
    ) -> Self {
        if let Some(state) = self.spec.state.as_mut() {
            state.value.per_sequence = Some(s(crate::spec::PerSequenceSpec {
                batch_axis: s(batch_axis),
                initial: s(crate::spec::InitialState::Zeros),
                idle_timeout_ms: s(idle_timeout_ms),
                max_sequences: s(max_sequences),
            }));
        }
        self
    }

    /// Protects the node's state with `mode`, declaring a primary failed after `detect_ms`.
    pub fn replication(mut self, mode: crate::spec::ReplicationMode, detect_ms: u64) -> Self {
        self.spec.replication = Some(Box::new(s(crate::spec::ReplicationSpec {
            mode: s(mode),
            detect_ms,
            ..crate::spec::ReplicationSpec::unreplicated()
        })));
        self
    }

    /// Adds ParM parity coding: groups of `k`, the parity model at `parity_model`, sum encoder.
    pub fn parity(mut self, k: usize, parity_model: impl Into<PathBuf>) -> Self {
        self.spec.resilience = Some(crate::spec::ResilienceSpec {
            parity: Some(s(crate::spec::ParitySpec {
                k: s(k),
                parity_model: Some(s(parity_model.into())),
                parity_models: None,
                encoder: s(crate::spec::ParityEncoder::Sum),
                decode: s(crate::spec::DecodeSpec::default()),
                replicas: None,
                batching: None,
                executor: None,
            })),
        });
        self
    }

    /// Sets when the node's parity coding decodes (after [`Self::parity`]; default `p99`): a
    /// missing prediction counts as unavailable after `after`, never sooner than `floor_ms` for a
    /// quantile. Without parity coding it does nothing.
    pub fn parity_decode(mut self, after: crate::spec::DecodeAfter, floor_ms: u64) -> Self {
        if let Some(p) = self
            .spec
            .resilience
            .as_mut()
            .and_then(|r| r.parity.as_mut())
        {
            p.value.decode = s(crate::spec::DecodeSpec {
                after: s(after),
                floor_ms,
            });
        }
        self
    }

    /// Runs the node on these replicas: remote executor names or
    /// [`LOCAL_REPLICA`](crate::spec::LOCAL_REPLICA).
    pub fn replicas(mut self, names: &[&str]) -> Self {
        self.spec.replicas = Some(s(names.iter().map(|n| s(n.to_string())).collect()));
        self
    }

    /// Sets how jobs are spread over the replicas (default least outstanding).
    pub fn routing(mut self, routing: crate::spec::RoutingSpec) -> Self {
        self.spec.routing = Some(s(routing));
        self
    }
}
