//! An ONNX model whose float initializers are trainable candle [`Var`]s: load a `.onnx` file (or a
//! graph built by [`crate::architecture`]), evaluate the graph with candle-onnx, train the `Var`s,
//! and write them back into a copy of the file.
//!
//! candle-onnx's `simple_eval` inserts a graph's initializers into its value table *after* the
//! caller's inputs, so an initializer would shadow a `Var` of the same name. The evaluated copy of
//! the graph therefore has its float initializers removed, and the `Var`s are passed as inputs
//! instead; gradients then flow through every op that candle differentiates (checked in the tests
//! for Gemm, MatMul, Add, Relu, Conv, MaxPool, Flatten and Reshape).

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var};
use candle_onnx::onnx::{self, tensor_proto::DataType, ModelProto};
use prost::Message;
use rand::Rng;
use rand_distr::{Distribution, Normal};

use crate::error::{Result, TrainError};

/// How [`OnnxModel::reinitialize`] draws weight matrices (rank 2); biases are always zero and
/// convolution kernels always Xavier-uniform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// The paper's parity-model scheme (§5.1): N(0, 0.01²). The paper's "N(0, 0.01)" does not say
    /// variance or standard deviation; 0.01 is taken as the standard deviation, as
    /// PyTorch's `normal_(0, 0.01)` means.
    Paper,
    /// Xavier-uniform, U(±√(6 / (fan_in + fan_out))): what the deployed classifiers start from
    /// (with N(0, 0.01²) a three-layer head learns several times slower).
    Xavier,
}

/// An ONNX classifier/regressor graph with one input and one output, its float initializers held
/// as trainable `Var`s. (Not `Clone`: a copy would share the `Var`s; build an independent one with
/// `OnnxModel::from_proto(model.to_proto()?)`.)
#[derive(Debug)]
pub struct OnnxModel {
    /// The model as written: float initializers are refreshed from `params` on [`Self::save`].
    proto: ModelProto,
    /// The graph that is evaluated: `proto` without its float initializers.
    eval: ModelProto,
    /// `eval` without a trailing Softmax (same as `eval` when there is none).
    eval_scores: ModelProto,
    params: Vec<(String, Var)>,
    input: String,
    output: String,
    softmax_tail: bool,
}

impl OnnxModel {
    /// Reads an ONNX file.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let proto = ModelProto::decode(bytes.as_slice()).map_err(|source| TrainError::Decode {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_proto(proto)
    }

    /// Takes an in-memory ONNX model: every FLOAT initializer becomes a trainable `Var` (others,
    /// such as a Reshape's int64 shape, stay constant).
    pub fn from_proto(proto: ModelProto) -> Result<Self> {
        let graph = proto
            .graph
            .as_ref()
            .ok_or_else(|| TrainError::Graph("the model has no graph".into()))?;
        let inits: Vec<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
        let inputs: Vec<&str> = graph
            .input
            .iter()
            .map(|i| i.name.as_str())
            .filter(|n| !inits.contains(n))
            .collect();
        let [input] = inputs.as_slice() else {
            return Err(TrainError::Graph(format!(
                "expected one graph input, found {inputs:?}"
            )));
        };
        let [output] = graph.output.as_slice() else {
            return Err(TrainError::Graph(format!(
                "expected one graph output, found {}",
                graph.output.len()
            )));
        };
        let mut params = Vec::new();
        for t in &graph.initializer {
            if t.data_type == DataType::Float as i32 {
                let value = candle_onnx::eval::get_tensor(t, &t.name)?;
                params.push((t.name.clone(), Var::from_tensor(&value)?));
            }
        }
        let mut eval = proto.clone();
        if let Some(g) = eval.graph.as_mut() {
            g.initializer
                .retain(|t| t.data_type != DataType::Float as i32);
            // IR < 4 lists initializers as graph inputs too; candle-onnx would demand them.
            let names: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
            g.input.retain(|i| !names.contains(&i.name));
        }
        let eval_scores = without_softmax_tail(&eval);
        let softmax_tail = eval_scores.graph != eval.graph;
        Ok(Self {
            softmax_tail,
            input: (*input).to_string(),
            output: output.name.clone(),
            proto,
            eval,
            eval_scores,
            params,
        })
    }

    /// Name of the graph input.
    pub fn input_name(&self) -> &str {
        &self.input
    }

    /// Name of the graph output.
    pub fn output_name(&self) -> &str {
        &self.output
    }

    /// The trainable parameters, in initializer order.
    pub fn params(&self) -> &[(String, Var)] {
        &self.params
    }

    /// The trainable `Var`s (for an optimizer).
    pub fn vars(&self) -> Vec<Var> {
        self.params.iter().map(|(_, v)| v.clone()).collect()
    }

    /// Number of trainable scalars.
    pub fn parameter_count(&self) -> usize {
        self.params.iter().map(|(_, v)| v.elem_count()).sum()
    }

    /// The op type of every node, in graph order.
    pub fn node_ops(&self) -> Vec<String> {
        self.proto
            .graph
            .iter()
            .flat_map(|g| g.node.iter().map(|n| n.op_type.clone()))
            .collect()
    }

    /// The name and shape of every trainable initializer.
    pub fn param_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.params
            .iter()
            .map(|(n, v)| (n.clone(), v.dims().to_vec()))
            .collect()
    }

    /// Whether the graph ends in a Softmax producing its output.
    pub fn ends_in_softmax(&self) -> bool {
        self.softmax_tail
    }

    /// Evaluates the graph as served (its output, Softmax included when it has one).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.run(&self.eval, x)
    }

    /// Evaluates the graph up to a trailing Softmax: the logits a cross-entropy loss wants.
    pub fn scores(&self, x: &Tensor) -> Result<Tensor> {
        self.run(&self.eval_scores, x)
    }

    fn run(&self, graph: &ModelProto, x: &Tensor) -> Result<Tensor> {
        let mut inputs: HashMap<String, Tensor> = self
            .params
            .iter()
            .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
            .collect();
        inputs.insert(self.input.clone(), x.clone());
        let mut out = candle_onnx::simple_eval(graph, inputs)?;
        let name = graph
            .graph
            .as_ref()
            .and_then(|g| g.output.first())
            .map(|o| o.name.clone())
            .unwrap_or_default();
        out.remove(&name)
            .ok_or_else(|| TrainError::Graph(format!("evaluation produced no output {name}")))
    }

    /// The same architecture for a ParM parity model: the graph without a trailing Softmax (its
    /// output keeps the name and shape of the deployed output), the same initializer names and
    /// shapes, and fresh weights drawn by [`Self::reinitialize`] with [`Init::Paper`].
    ///
    /// Decision (paper §4.3 asks for the deployed model's architecture): the parity model's target
    /// Σ F(X_i) is a sum of k outputs, which a Softmax (outputs summing to 1) cannot produce, so
    /// the parity graph is the deployed graph minus its final Softmax, and nothing else.
    pub fn parity_copy(&self, rng: &mut impl Rng) -> Result<Self> {
        let mut proto = without_softmax_tail(&self.proto);
        if let Some(g) = proto.graph.as_mut() {
            g.name = format!("{}_parity", g.name);
        }
        let model = Self::from_proto(proto)?;
        model.reinitialize(Init::Paper, rng)?;
        Ok(model)
    }

    /// Redraws every trainable initializer: biases (rank 1) are zero, convolution kernels
    /// (rank ≥ 3) Xavier-uniform, and other weights as `init` says.
    pub fn reinitialize(&self, init: Init, rng: &mut impl Rng) -> Result<()> {
        let normal = Normal::new(0.0f32, 0.01).map_err(|e| TrainError::Options(e.to_string()))?;
        for (_, var) in &self.params {
            let dims = var.dims().to_vec();
            let n = var.elem_count();
            let xavier = |rng: &mut _, fan_in: usize, fan_out: usize| -> Vec<f32> {
                let limit = (6.0 / (fan_in + fan_out) as f32).sqrt();
                (0..n)
                    .map(|_| Rng::random_range(rng, -limit..limit))
                    .collect()
            };
            let values: Vec<f32> = match (dims.as_slice(), init) {
                ([_], _) => vec![0.0; n],
                ([out_c, in_c, rest @ ..], _) if !rest.is_empty() => {
                    let field: usize = rest.iter().product();
                    xavier(rng, in_c * field, out_c * field)
                }
                ([out, inp], Init::Xavier) => xavier(rng, *inp, *out),
                _ => (0..n).map(|_| normal.sample(rng)).collect(),
            };
            var.set(&Tensor::from_vec(values, dims.as_slice(), &Device::Cpu)?)?;
        }
        Ok(())
    }

    /// The model with the current parameter values written into its float initializers.
    pub fn to_proto(&self) -> Result<ModelProto> {
        let mut proto = self.proto.clone();
        let values: HashMap<&str, &Var> =
            self.params.iter().map(|(n, v)| (n.as_str(), v)).collect();
        if let Some(g) = proto.graph.as_mut() {
            for t in g.initializer.iter_mut() {
                if let Some(var) = values.get(t.name.as_str()) {
                    let data = var
                        .as_tensor()
                        .to_dtype(DType::F32)?
                        .flatten_all()?
                        .to_vec1::<f32>()?;
                    t.float_data.clear();
                    t.raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                    t.dims = var.dims().iter().map(|&d| d as i64).collect();
                }
            }
        }
        Ok(proto)
    }

    /// Writes the model with its current parameters to `path` (via a temporary file and a rename,
    /// so a reader never sees half a model).
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_proto()?.encode_to_vec();
        let io = |source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let tmp = path.with_extension("onnx.tmp");
        std::fs::write(&tmp, bytes).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }
}

/// `model` without a final Softmax node that produces the graph output; the node before it then
/// produces the output under the output's name. Unchanged when there is no such Softmax.
pub(crate) fn without_softmax_tail(model: &ModelProto) -> ModelProto {
    let mut model = model.clone();
    let Some(g) = model.graph.as_mut() else {
        return model;
    };
    let Some(out) = g.output.first().map(|o| o.name.clone()) else {
        return model;
    };
    let is_tail = g
        .node
        .last()
        .is_some_and(|n| n.op_type == "Softmax" && n.output.first() == Some(&out));
    if !is_tail {
        return model;
    }
    let Some(softmax) = g.node.pop() else {
        return model;
    };
    let Some(scores) = softmax.input.first().cloned() else {
        return model;
    };
    // a shape annotation of the old logits tensor would now describe nothing
    g.value_info.retain(|v| v.name != scores);
    for n in g.node.iter_mut() {
        for name in n.output.iter_mut().chain(n.input.iter_mut()) {
            if *name == scores {
                name.clone_from(&out);
            }
        }
    }
    model
}

/// An ONNX `TensorProto` holding f32 `values` of shape `dims` (little-endian raw data).
pub(crate) fn f32_initializer(name: &str, dims: &[usize], values: &[f32]) -> onnx::TensorProto {
    onnx::TensorProto {
        name: name.to_string(),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: DataType::Float as i32,
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::architecture::Architecture;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn model(arch: &Architecture, seed: u64) -> OnnxModel {
        let m = OnnxModel::from_proto(arch.build(64, 10).unwrap()).unwrap();
        m.reinitialize(Init::Paper, &mut StdRng::seed_from_u64(seed))
            .unwrap();
        m
    }

    fn input(rows: usize) -> Tensor {
        let v: Vec<f32> = (0..rows * 64)
            .map(|i| ((i * 37) % 17) as f32 / 16.0)
            .collect();
        Tensor::from_vec(v, (rows, 64), &Device::Cpu).unwrap()
    }

    /// The claim, checked: candle-onnx carries gradients through Reshape, Conv, Relu,
    /// MaxPool, Flatten and Gemm when `Var`s stand in for the initializers (and MatMul/Add, which
    /// Gemm is built from) — every parameter of both architectures gets a non-zero gradient.
    #[test]
    fn every_parameter_gets_a_gradient() {
        for arch in [Architecture::digits_mlp(), Architecture::LeNet] {
            let m = model(&arch, 1);
            let loss = m
                .scores(&input(4))
                .unwrap()
                .sqr()
                .unwrap()
                .sum_all()
                .unwrap();
            let grads = loss.backward().unwrap();
            for (name, var) in m.params() {
                let g = grads
                    .get(var.as_tensor())
                    .unwrap_or_else(|| panic!("{name}: no gradient"));
                let norm = g
                    .abs()
                    .unwrap()
                    .sum_all()
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                assert!(norm > 0.0, "{} {name}: zero gradient", arch.name());
            }
        }
    }

    /// The plain ONNX MatMul and Add ops (not only Gemm) carry gradients to their `Var`s too.
    #[test]
    fn matmul_and_add_nodes_train() {
        use crate::architecture::tensor_info;
        let node = |op: &str, inputs: [&str; 2], out: &str| onnx::NodeProto {
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.into()],
            ..Default::default()
        };
        let graph = onnx::GraphProto {
            node: vec![
                node("MatMul", ["x", "w"], "h"),
                node("Add", ["h", "b"], "y"),
            ],
            initializer: vec![
                f32_initializer("w", &[64, 3], &[0.5; 192]),
                f32_initializer("b", &[3], &[1.0, 2.0, 3.0]),
            ],
            input: vec![tensor_info("x", 64)],
            output: vec![tensor_info("y", 3)],
            ..Default::default()
        };
        let m = OnnxModel::from_proto(ModelProto {
            graph: Some(graph),
            ..Default::default()
        })
        .unwrap();
        let y = m.forward(&input(2)).unwrap();
        let loss = y.sum_all().unwrap();
        let grads = loss.backward().unwrap();
        // d(Σy)/db = number of rows; d(Σy)/dw[i][j] = Σ_rows x[i]
        let gb = grads.get(m.params()[1].1.as_tensor()).unwrap();
        assert_eq!(gb.to_vec1::<f32>().unwrap(), [2.0, 2.0, 2.0]);
        let gw = grads
            .get(m.params()[0].1.as_tensor())
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let col: Vec<f32> = input(2).sum(0).unwrap().to_vec1::<f32>().unwrap();
        for (row, want) in gw.iter().zip(&col) {
            assert_eq!(row, &[*want; 3]);
        }
    }

    #[test]
    fn written_onnx_reloads_with_the_same_outputs() {
        let dir = std::env::temp_dir().join(format!("weir-training-model-{}", std::process::id()));
        for arch in [Architecture::digits_mlp(), Architecture::LeNet] {
            let m = model(&arch, 2);
            let path = dir.join(format!("{}.onnx", arch.name()));
            m.save(&path).unwrap();
            let back = OnnxModel::load(&path).unwrap();
            let (a, b) = (
                m.forward(&input(5)).unwrap(),
                back.forward(&input(5)).unwrap(),
            );
            assert_eq!(a.dims(), &[5, 10]);
            assert_eq!(a.to_vec2::<f32>().unwrap(), b.to_vec2::<f32>().unwrap());
            assert_eq!(back.param_shapes(), m.param_shapes());
            // softmax rows sum to 1; the scores are the pre-softmax logits
            let s = a.sum(1).unwrap().to_vec1::<f32>().unwrap();
            assert!(s.iter().all(|v| (v - 1.0).abs() < 1e-5), "{s:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn parity_copy_keeps_the_architecture_but_the_softmax() {
        for arch in [Architecture::digits_mlp(), Architecture::LeNet] {
            let deployed = model(&arch, 3);
            let parity = deployed.parity_copy(&mut StdRng::seed_from_u64(4)).unwrap();
            let mut ops = deployed.node_ops();
            assert_eq!(ops.pop().as_deref(), Some("Softmax"));
            assert_eq!(parity.node_ops(), ops);
            assert!(deployed.ends_in_softmax() && !parity.ends_in_softmax());
            assert_eq!(parity.param_shapes(), deployed.param_shapes());
            assert_eq!((parity.input_name(), parity.output_name()), ("x", "probs"));
            // the parity output is the deployed graph's logits under fresh weights
            let fresh = OnnxModel::from_proto(deployed.to_proto().unwrap()).unwrap();
            for ((_, a), (_, b)) in fresh.params().iter().zip(parity.params()) {
                a.set(b.as_tensor()).unwrap();
            }
            assert_eq!(
                parity.forward(&input(3)).unwrap().to_vec2::<f32>().unwrap(),
                fresh.scores(&input(3)).unwrap().to_vec2::<f32>().unwrap()
            );
        }
    }

    #[test]
    fn initialization_follows_the_paper() {
        let m = model(&Architecture::LeNet, 5);
        for (name, var) in m.params() {
            let v = var.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            if name.ends_with("bias") {
                assert!(v.iter().all(|&x| x == 0.0), "{name}");
            } else if name.starts_with("conv1") {
                // Xavier-uniform: |w| < sqrt(6 / ((1 + 6) * 9))
                let limit = (6.0f32 / 63.0).sqrt();
                assert!(
                    v.iter().all(|x| x.abs() < limit) && v.iter().any(|x| x.abs() > limit / 2.0)
                );
            } else if name.starts_with("fc") {
                let std = (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
                assert!((std - 0.01).abs() < 0.002, "{name}: std {std}");
            }
        }
    }
}
