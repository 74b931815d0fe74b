//! Reads an ONNX model's input and output signatures without starting ONNX Runtime.
//!
//! Validation needs each model's tensor names, element types and shapes to check the edges of a
//! graph before anything runs (`weir validate` works on a machine without the runtime). The ONNX
//! file is a protobuf `ModelProto`; the few messages below declare only the fields weir reads, so
//! prost skips the weights without allocating them. Field numbers are those of `onnx/onnx.proto`.
//!
//! Each dimension keeps its ONNX `dim_param` name beside its size: a name is how a model says two
//! dimensions have one size in a call (`input_ids: [batch, seq]`, `tokens: [batch, seq, 4]`), which
//! is what padded batching pads the inputs along and slices the outputs back by.
//!
//! A graph's real inputs are `graph.input` minus initializers minus node outputs: IR-3 models (the
//! zoo's) also list their weights there. This is the rule ONNX Runtime applies too. From IR 4 on,
//! an initializer listed among the inputs is an *overridable initializer*: a call may give it or
//! leave it out, ONNX Runtime then using the file's value ([`defaults`] reads it).

mod defaults;

use std::collections::HashSet;
use std::path::Path;

use prost::bytes::Bytes;
use prost::Message;

use crate::paths::{read_capped, FileError, FileRules};
use crate::tensor::{DType, Dim, Tensor};

#[derive(Clone, PartialEq, Message)]
struct ModelProto {
    #[prost(int64, tag = "1")]
    ir_version: i64,
    #[prost(message, optional, tag = "7")]
    graph: Option<GraphProto>,
}

#[derive(Clone, PartialEq, Message)]
struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    node: Vec<NodeProto>,
    #[prost(message, repeated, tag = "5")]
    initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    output: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeProto {
    #[prost(string, repeated, tag = "2")]
    output: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct TensorProto {
    #[prost(string, tag = "8")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct ValueInfoProto {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    r#type: Option<TypeProto>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeProto {
    #[prost(message, optional, tag = "1")]
    tensor_type: Option<TensorTypeProto>,
}

#[derive(Clone, PartialEq, Message)]
struct TensorTypeProto {
    #[prost(int32, tag = "1")]
    elem_type: i32,
    #[prost(message, optional, tag = "2")]
    shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    dim: Vec<DimensionProto>,
}

#[derive(Clone, PartialEq, Message)]
struct DimensionProto {
    #[prost(int64, optional, tag = "1")]
    dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    dim_param: Option<String>,
}

/// An ONNX element type as weir sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementType {
    /// One weir moves.
    Supported(DType),
    /// Any other ONNX `TensorProto.DataType` code (e.g. 10 = float16).
    Unsupported(i32),
    /// Not a tensor (a sequence or map).
    NotATensor,
}

/// A model input or output.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    /// ONNX name.
    pub name: String,
    /// Element type.
    pub element: ElementType,
    /// Full shape, the batch dimension included when the model has one.
    pub dims: Vec<Dim>,
    /// Per dimension of `dims`, the ONNX `dim_param` naming it (`seq`, `batch_size`), if any.
    /// Dimensions sharing a name have one size in a call, which is what padded batching pads
    /// and slices along.
    pub names: Vec<Option<String>>,
}

impl TensorInfo {
    /// The dimensions of one request's tensor: those after the batch dimension when `batch_dim`,
    /// all of them otherwise (a model without a batch dimension takes a request's tensors as
    /// they are). Dynamic dimensions stay dynamic.
    pub fn request_dims(&self, batch_dim: bool) -> &[Dim] {
        let skip = usize::from(batch_dim).min(self.dims.len());
        &self.dims[skip..]
    }

    /// The positions in [`TensorInfo::request_dims`] of the dimensions named `name`.
    pub fn axes_named(&self, name: &str, batch_dim: bool) -> Vec<usize> {
        let skip = usize::from(batch_dim);
        self.names
            .iter()
            .enumerate()
            .skip(skip)
            .filter(|(_, n)| n.as_deref() == Some(name))
            .map(|(i, _)| i - skip)
            .collect()
    }

    /// A concrete shape for a synthetic request (profiling, warm-up): the request's dimensions
    /// with every dynamic one taken as 1.
    pub fn synthetic_shape(&self, batch_dim: bool) -> Vec<usize> {
        self.request_dims(batch_dim)
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Dynamic => 1,
            })
            .collect()
    }
}

/// What weir needs to know about a model file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMetadata {
    /// Real inputs (weights excluded), in the model's order.
    pub inputs: Vec<TensorInfo>,
    /// Outputs, in the model's order.
    pub outputs: Vec<TensorInfo>,
    /// Inputs a call may leave out (overridable initializers), in the model's order.
    pub overridable: Vec<Overridable>,
}

/// A graph input that also has an initializer, in a model of IR 4 or later: ONNX Runtime runs a
/// call without it on the file's value, and a call that gives it on the call's.
#[derive(Debug, Clone, PartialEq)]
pub struct Overridable {
    /// Its signature as the graph input declares it.
    pub info: TensorInfo,
    /// Its value in the file, or why weir cannot read it (stored outside the file, an element
    /// type with no protocol datatype, lengths that disagree with its dims).
    pub default: Result<Tensor, String>,
}

impl ModelMetadata {
    /// The overridable initializer `name`, if the model has one.
    pub fn overridable(&self, name: &str) -> Option<&Overridable> {
        self.overridable.iter().find(|o| o.info.name == name)
    }
}

/// Errors reading a model's metadata.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// The file could not be read (missing, not a regular file, over the size cap).
    #[error(transparent)]
    Read(#[from] FileError),
    /// The file is not an ONNX model.
    #[error("{path} is not an ONNX model: {reason}")]
    Decode {
        /// File.
        path: String,
        /// Why.
        reason: String,
    },
}

/// ONNX's `TensorProto.DataType` codes for the types weir moves.
fn element_type(code: i32) -> ElementType {
    let dtype = match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        8 => DType::Bytes,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::Bf16,
        other => return ElementType::Unsupported(other),
    };
    ElementType::Supported(dtype)
}

fn tensor_info(v: &ValueInfoProto) -> TensorInfo {
    let (element, shape) = match v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref()) {
        Some(t) => (
            element_type(t.elem_type),
            t.shape
                .as_ref()
                .map(|s| s.dim.as_slice())
                .unwrap_or_default(),
        ),
        None => (ElementType::NotATensor, &[][..]),
    };
    let dims = shape
        .iter()
        .map(|d| match d.dim_value {
            Some(n) if n > 0 => Dim::Fixed(n as usize),
            _ => Dim::Dynamic,
        })
        .collect();
    // A name only on a dimension without a size; an empty name is no name.
    let names = shape
        .iter()
        .map(|d| {
            d.dim_param
                .clone()
                .filter(|p| !p.is_empty() && !matches!(d.dim_value, Some(n) if n > 0))
        })
        .collect();
    TensorInfo {
        name: v.name.clone(),
        element,
        dims,
        names,
    }
}

/// Reads the signature of the model at `path`.
///
/// # Errors
/// When the file cannot be read or is not an ONNX `ModelProto` with a graph.
pub fn read_metadata(path: &Path) -> Result<ModelMetadata, OnnxError> {
    read_metadata_under(path, &FileRules::default())
}

/// Reads the signature of the model at `path`, a regular file within `rules`.
///
/// # Errors
/// As [`read_metadata`], and when the file breaks `rules`.
pub fn read_metadata_under(path: &Path, rules: &FileRules) -> Result<ModelMetadata, OnnxError> {
    let bytes = read_capped(path, rules.max_model_bytes, rules)?;
    metadata_from_bytes(Bytes::from(bytes)).map_err(|reason| OnnxError::Decode {
        path: path.display().to_string(),
        reason,
    })
}

/// The signature in `bytes` (the whole file; decoding slices it rather than copying weights).
fn metadata_from_bytes(bytes: Bytes) -> Result<ModelMetadata, String> {
    let model = ModelProto::decode(bytes.clone()).map_err(|e| e.to_string())?;
    let graph = model.graph.ok_or("the model has no graph")?;
    let initializers: HashSet<&str> = graph.initializer.iter().map(|t| t.name.as_str()).collect();
    let made: HashSet<&str> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    let listed = || {
        graph
            .input
            .iter()
            .filter(|i| !made.contains(i.name.as_str()))
    };
    let inputs = listed()
        .filter(|i| !initializers.contains(i.name.as_str()))
        .map(tensor_info)
        .collect();
    // Before IR 4 every weight is listed among the inputs, and none is overridable.
    let overridable: Vec<TensorInfo> = if model.ir_version >= 4 {
        listed()
            .filter(|i| initializers.contains(i.name.as_str()))
            .map(tensor_info)
            .collect()
    } else {
        Vec::new()
    };
    let outputs = graph.output.iter().map(tensor_info).collect();
    let overridable = if overridable.is_empty() {
        Vec::new()
    } else {
        let names: Vec<&str> = overridable.iter().map(|t| t.name.as_str()).collect();
        let values = defaults::initializer_values(bytes, &names)?;
        overridable
            .into_iter()
            .zip(values)
            .map(|(info, default)| Overridable { info, default })
            .collect()
    };
    Ok(ModelMetadata {
        inputs,
        outputs,
        overridable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_dims_keep_dynamic_ones_and_name_their_axes() {
        let info = TensorInfo {
            name: "x".into(),
            element: ElementType::Supported(DType::F32),
            dims: vec![Dim::Dynamic, Dim::Fixed(3), Dim::Dynamic, Dim::Fixed(7)],
            names: vec![Some("N".into()), None, Some("seq".into()), None],
        };
        assert_eq!(
            info.request_dims(true),
            &[Dim::Fixed(3), Dim::Dynamic, Dim::Fixed(7)]
        );
        assert_eq!(info.request_dims(false).len(), 4);
        assert_eq!(info.axes_named("seq", true), vec![1]);
        assert_eq!(info.axes_named("seq", false), vec![2]);
        assert_eq!(info.axes_named("N", true), Vec::<usize>::new());
        assert_eq!(info.synthetic_shape(true), vec![3, 1, 7]);
        let scalar = TensorInfo {
            dims: Vec::new(),
            names: Vec::new(),
            ..info
        };
        assert!(scalar.request_dims(true).is_empty());
    }

    fn value(name: &str, elem: i32, dims: &[Option<i64>]) -> ValueInfoProto {
        ValueInfoProto {
            name: name.into(),
            r#type: Some(TypeProto {
                tensor_type: Some(TensorTypeProto {
                    elem_type: elem,
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|d| DimensionProto {
                                dim_value: *d,
                                dim_param: d.is_none().then(|| "N".to_string()),
                            })
                            .collect(),
                    }),
                }),
            }),
        }
    }

    #[test]
    fn weights_listed_as_inputs_are_not_inputs() {
        let model = ModelProto {
            ir_version: 3,
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    output: vec!["w_made".into()],
                }],
                initializer: vec![TensorProto { name: "w".into() }],
                input: vec![
                    value("x", 1, &[None, Some(64)]),
                    value("w", 1, &[Some(64)]),
                    value("w_made", 1, &[Some(64)]),
                ],
                output: vec![value("y", 7, &[None, Some(1)])],
            }),
        };
        let meta = metadata_from_bytes(model.encode_to_vec().into()).unwrap();
        assert_eq!(meta.inputs.len(), 1);
        assert!(
            meta.overridable.is_empty(),
            "IR 3 weights are not overridable"
        );
        assert_eq!(meta.inputs[0].dims, vec![Dim::Dynamic, Dim::Fixed(64)]);
        assert_eq!(meta.inputs[0].names, vec![Some("N".into()), None]);
        assert_eq!(meta.outputs[0].element, ElementType::Supported(DType::I64));
    }

    #[test]
    fn from_ir_4_an_initializer_listed_as_an_input_may_be_overridden() {
        let model = ModelProto {
            ir_version: 8,
            graph: Some(GraphProto {
                node: Vec::new(),
                initializer: vec![TensorProto { name: "w".into() }],
                input: vec![value("x", 1, &[None]), value("w", 1, &[Some(2)])],
                output: vec![value("y", 1, &[None])],
            }),
        };
        let meta = metadata_from_bytes(model.encode_to_vec().into()).unwrap();
        assert_eq!(meta.inputs.len(), 1);
        let w = meta.overridable("w").expect("`w` is overridable");
        assert_eq!(w.info.dims, vec![Dim::Fixed(2)]);
        // This initializer carries a name only: no element type, so no value.
        assert!(w.default.is_err());
    }

    #[test]
    fn garbage_is_a_decode_error() {
        assert!(metadata_from_bytes(Bytes::from_static(b"\xff\xff\xff not onnx")).is_err());
    }
}
