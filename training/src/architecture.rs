//! The deployed-model architectures weir trains itself, written as ONNX graphs: an MLP and a
//! LeNet-style CNN for the 8×8 digits.
//!
//! Both graphs have the same interface as `.weir/models/digits_mlp.onnx`, so one serving graph
//! fits either: input `x`, f32 `[N, 64]` (the 8×8 image row-major, pixels scaled to [0, 1]; `N`
//! is a dynamic batch dimension), output `probs`, f32 `[N, classes]` (a Softmax over the logits).
//! The CNN reshapes `x` to `[N, 1, 8, 8]` inside the graph. ONNX IR version 8, opset 13, which
//! ONNX Runtime 1.31 loads.

use candle_onnx::onnx::{
    self, attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto::dimension,
    type_proto, ModelProto,
};

use crate::error::{Result, TrainError};
use crate::model::f32_initializer;

/// ONNX IR version of the written models.
pub const IR_VERSION: i64 = 8;
/// ONNX opset of the written models.
pub const OPSET: i64 = 13;
/// Name of the graph input.
pub const INPUT: &str = "x";
/// Name of the graph output.
pub const OUTPUT: &str = "probs";

/// Which network to train.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Architecture {
    /// Fully connected: `features → hidden[0] → … → classes`, ReLU between layers (Gemm nodes).
    Mlp {
        /// Widths of the hidden layers.
        hidden: Vec<usize>,
    },
    /// LeNet-5 style for a square single-channel image of `features` pixels (side divisible by
    /// 4): conv 3×3 (6) → ReLU → maxpool 2 → conv 3×3 (16) → ReLU → maxpool 2 → flatten →
    /// 120 → ReLU → 84 → ReLU → classes.
    LeNet,
}

impl Architecture {
    /// The MLP used for digits by default: 64 → 128 → 64 → 10 (a scaled-down version of the
    /// paper's 784-200-100-10 MNIST MLP).
    pub fn digits_mlp() -> Self {
        Self::Mlp {
            hidden: vec![128, 64],
        }
    }

    /// A short name (`mlp`, `lenet`) for file names and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Mlp { .. } => "mlp",
            Self::LeNet => "lenet",
        }
    }

    /// The ONNX graph of this architecture for `features` inputs and `classes` outputs, with all
    /// weights zero (draw them with [`crate::OnnxModel::reinitialize`]).
    pub fn build(&self, features: usize, classes: usize) -> Result<ModelProto> {
        let mut g = GraphBuilder::default();
        let mut x = INPUT.to_string();
        match self {
            Self::Mlp { hidden } => {
                let mut width = features;
                for (i, &h) in hidden.iter().enumerate() {
                    x = g.gemm(&format!("fc{}", i + 1), &x, width, h);
                    x = g.relu(&x);
                    width = h;
                }
                x = g.gemm(&format!("fc{}", hidden.len() + 1), &x, width, classes);
            }
            Self::LeNet => {
                let side = (features as f64).sqrt().round() as usize;
                if side * side != features || !side.is_multiple_of(4) {
                    return Err(TrainError::Options(format!(
                        "LeNet needs a square image with a side divisible by 4, not {features} pixels"
                    )));
                }
                g.int_initializer("image_shape", &[-1, 1, side as i64, side as i64]);
                x = g.node("Reshape", "reshape", &[&x, "image_shape"], vec![]);
                x = g.conv("conv1", &x, 1, 6);
                x = g.relu(&x);
                x = g.max_pool(&x);
                x = g.conv("conv2", &x, 6, 16);
                x = g.relu(&x);
                x = g.max_pool(&x);
                x = g.node("Flatten", "flatten", &[&x], vec![int_attr("axis", 1)]);
                let flat = 16 * (side / 4) * (side / 4);
                x = g.gemm("fc1", &x, flat, 120);
                x = g.relu(&x);
                x = g.gemm("fc2", &x, 120, 84);
                x = g.relu(&x);
                x = g.gemm("fc3", &x, 84, classes);
            }
        }
        g.nodes.push(onnx::NodeProto {
            op_type: "Softmax".into(),
            name: "softmax".into(),
            input: vec![x],
            output: vec![OUTPUT.into()],
            attribute: vec![int_attr("axis", -1)],
            ..Default::default()
        });
        let graph = onnx::GraphProto {
            name: format!("digits_{}", self.name()),
            node: g.nodes,
            initializer: g.initializers,
            input: vec![tensor_info(INPUT, features)],
            output: vec![tensor_info(OUTPUT, classes)],
            ..Default::default()
        };
        Ok(ModelProto {
            ir_version: IR_VERSION,
            opset_import: vec![onnx::OperatorSetIdProto {
                domain: String::new(),
                version: OPSET,
            }],
            producer_name: "weir-training".into(),
            graph: Some(graph),
            ..Default::default()
        })
    }
}

/// Collects nodes and initializers; each helper returns the name of the tensor it produced.
#[derive(Default)]
struct GraphBuilder {
    nodes: Vec<onnx::NodeProto>,
    initializers: Vec<onnx::TensorProto>,
}

impl GraphBuilder {
    fn node(
        &mut self,
        op: &str,
        name: &str,
        inputs: &[&str],
        attrs: Vec<onnx::AttributeProto>,
    ) -> String {
        let out = format!("{name}_out");
        self.nodes.push(onnx::NodeProto {
            op_type: op.into(),
            name: name.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.clone()],
            attribute: attrs,
            ..Default::default()
        });
        out
    }

    fn weight(&mut self, name: &str, dims: &[usize]) -> String {
        let n = dims.iter().product::<usize>();
        self.initializers
            .push(f32_initializer(name, dims, &vec![0.0; n]));
        name.to_string()
    }

    fn int_initializer(&mut self, name: &str, values: &[i64]) {
        self.initializers.push(onnx::TensorProto {
            name: name.into(),
            dims: vec![values.len() as i64],
            data_type: DataType::Int64 as i32,
            int64_data: values.to_vec(),
            ..Default::default()
        });
    }

    /// Gemm with weight `[out, in]` and `transB = 1` (PyTorch's Linear layout).
    fn gemm(&mut self, layer: &str, x: &str, inputs: usize, outputs: usize) -> String {
        let w = self.weight(&format!("{layer}.weight"), &[outputs, inputs]);
        let b = self.weight(&format!("{layer}.bias"), &[outputs]);
        self.node("Gemm", layer, &[x, &w, &b], vec![int_attr("transB", 1)])
    }

    /// 3×3 convolution, stride 1, zero padding 1 (keeps height and width).
    fn conv(&mut self, layer: &str, x: &str, in_c: usize, out_c: usize) -> String {
        let w = self.weight(&format!("{layer}.weight"), &[out_c, in_c, 3, 3]);
        let b = self.weight(&format!("{layer}.bias"), &[out_c]);
        let attrs = vec![
            ints_attr("kernel_shape", &[3, 3]),
            ints_attr("pads", &[1, 1, 1, 1]),
            ints_attr("strides", &[1, 1]),
        ];
        self.node("Conv", layer, &[x, &w, &b], attrs)
    }

    fn relu(&mut self, x: &str) -> String {
        let name = format!("relu{}", self.nodes.len());
        self.node("Relu", &name, &[x], vec![])
    }

    /// 2×2 max pooling, stride 2.
    fn max_pool(&mut self, x: &str) -> String {
        let name = format!("pool{}", self.nodes.len());
        let attrs = vec![
            ints_attr("kernel_shape", &[2, 2]),
            ints_attr("strides", &[2, 2]),
        ];
        self.node("MaxPool", &name, &[x], attrs)
    }
}

fn int_attr(name: &str, value: i64) -> onnx::AttributeProto {
    onnx::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: value,
        ..Default::default()
    }
}

fn ints_attr(name: &str, values: &[i64]) -> onnx::AttributeProto {
    onnx::AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: values.to_vec(),
        ..Default::default()
    }
}

/// A `[N, width]` f32 value info with a dynamic batch dimension `N`.
pub(crate) fn tensor_info(name: &str, width: usize) -> onnx::ValueInfoProto {
    let dim = |value| onnx::tensor_shape_proto::Dimension {
        value: Some(value),
        ..Default::default()
    };
    onnx::ValueInfoProto {
        name: name.into(),
        r#type: Some(onnx::TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(onnx::TensorShapeProto {
                    dim: vec![
                        dim(dimension::Value::DimParam("N".into())),
                        dim(dimension::Value::DimValue(width as i64)),
                    ],
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}
