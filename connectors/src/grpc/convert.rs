//! Protobuf messages to protocol requests, and protocol answers to protobuf messages.
//!
//! A request's inputs carry their elements either all as `raw_input_contents` (one entry per
//! input, the binary extension's little-endian form) or each in the one typed field of
//! `contents` its datatype uses (FP16 and BF16 have none and must be raw); anything else is
//! refused naming the field, before a byte is converted. `parameters` become the same JSON object
//! text an HTTP request's parameters are (`parameters.rs`). A reply carries every output raw, as Triton answers, unless every
//! output the request named asked for `binary_data: false` and each has a typed field: then
//! typed `contents` (the specification forbids mixing the two in one reply).

use std::collections::{HashMap, HashSet};

use weir_engine::tensor::{DType, TensorData};

use super::parameters::{parameter_of, parameters_text};
use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_infer_request::InferInputTensor;
use super::proto::model_infer_response::InferOutputTensor;
use super::proto::{InferParameter, InferTensorContents, ModelInferRequest, ModelInferResponse};
use crate::echo::quote;
use crate::oip::{
    input_from_parts, parameter_slice, shared_input_from_parts, InferOutputs, InferRequest,
    InputContents, OipError, Placement, ProtocolError, RegionParameter, RegionSlice, ReplyError,
    ReplyTensor, RequestedOutput, TypedValues,
};

fn perr(field: impl Into<String>, message: impl Into<String>) -> ProtocolError {
    ProtocolError {
        field: field.into(),
        message: message.into(),
    }
}

/// The typed `contents` field a datatype's elements travel in; `None` for FP16 and BF16.
fn typed_field(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::Bool => "bool_contents",
        DType::I8 | DType::I16 | DType::I32 => "int_contents",
        DType::I64 => "int64_contents",
        DType::U8 | DType::U16 | DType::U32 => "uint_contents",
        DType::U64 => "uint64_contents",
        DType::F32 => "fp32_contents",
        DType::F64 => "fp64_contents",
        DType::Bytes => "bytes_contents",
        DType::F16 | DType::Bf16 => return None,
    })
}

/// The typed fields of `c` that hold values, by name.
fn filled(c: &InferTensorContents) -> Vec<(&'static str, TypedValues<'_>)> {
    let all = [
        ("bool_contents", TypedValues::Bool(&c.bool_contents)),
        ("int_contents", TypedValues::Int32(&c.int_contents)),
        ("int64_contents", TypedValues::Int64(&c.int64_contents)),
        ("uint_contents", TypedValues::Uint32(&c.uint_contents)),
        ("uint64_contents", TypedValues::Uint64(&c.uint64_contents)),
        ("fp32_contents", TypedValues::Fp32(&c.fp32_contents)),
        ("fp64_contents", TypedValues::Fp64(&c.fp64_contents)),
        ("bytes_contents", TypedValues::Bytes(&c.bytes_contents)),
    ];
    all.into_iter().filter(|(_, v)| !v.is_empty()).collect()
}

/// Refuses `input` (named `field`) with `why` when it fills a typed contents field.
fn no_typed_contents(
    input: &InferInputTensor,
    field: &str,
    why: &str,
) -> Result<(), ProtocolError> {
    match input
        .contents
        .as_ref()
        .map(filled)
        .unwrap_or_default()
        .first()
    {
        Some((name, _)) => Err(perr(format!("{field}.contents.{name}"), why)),
        None => Ok(()),
    }
}

/// Picks the typed values of an input of `datatype`: the one filled field, which must be the
/// datatype's (an input of zero elements may fill none).
fn typed_contents<'a>(
    field: &str,
    datatype: &str,
    contents: Option<&'a InferTensorContents>,
) -> Result<InputContents<'a>, ProtocolError> {
    let Some(dtype) = DType::from_oip_name(datatype) else {
        // The datatype is refused by name in `input_from_parts`.
        return Ok(InputContents::Raw(&[]));
    };
    let filled = contents.map(filled).unwrap_or_default();
    let Some(expected) = typed_field(dtype) else {
        return match filled.first() {
            None => Ok(InputContents::Raw(&[])),
            Some((name, _)) => Err(perr(
                format!("{field}.contents.{name}"),
                format!("{datatype} has no typed contents: send it in raw_input_contents"),
            )),
        };
    };
    match filled.as_slice() {
        [] => Ok(InputContents::Typed(TypedValues::Bytes(&[]))),
        [(name, values)] if *name == expected => Ok(InputContents::Typed(*values)),
        [(name, _)] => Err(perr(
            format!("{field}.contents.{name}"),
            format!("{datatype} elements travel in contents.{expected}"),
        )),
        [(a, _), (b, _), ..] => Err(perr(
            format!("{field}.contents"),
            format!("both {a} and {b} hold values; an input fills one field"),
        )),
    }
}

/// The shared memory slice an input's or output's `parameters` name, if any.
fn region_of(
    parameters: &HashMap<String, InferParameter>,
    field: &str,
) -> Result<Option<RegionSlice>, ProtocolError> {
    let get = |key: &str| {
        parameters.get(key).map(|p| match &p.parameter_choice {
            Some(ParameterChoice::StringParam(s)) => RegionParameter::Text(s.into()),
            Some(ParameterChoice::Int64Param(n)) => RegionParameter::Number(i128::from(*n)),
            Some(ParameterChoice::Uint64Param(n)) => RegionParameter::Number(i128::from(*n)),
            _ => RegionParameter::Other,
        })
    };
    parameter_slice(get, &format!("{field}.parameters"))
}

fn is_false(parameters: &HashMap<String, InferParameter>, key: &str) -> bool {
    matches!(
        parameters
            .get(key)
            .and_then(|p| p.parameter_choice.as_ref()),
        Some(ParameterChoice::BoolParam(false))
    )
}

/// A protocol request from a gRPC one of `request_len` encoded bytes.
///
/// # Errors
/// A [`ProtocolError`] naming the field at fault.
pub(super) fn infer_request(
    request: &ModelInferRequest,
    request_len: usize,
) -> Result<InferRequest, ProtocolError> {
    let raw = &request.raw_input_contents;
    // Inputs in shared memory carry no contents: the raw entries are the other inputs', in order
    // (as Triton's clients send them).
    let mut regions = Vec::with_capacity(request.inputs.len());
    for (i, input) in request.inputs.iter().enumerate() {
        let field = format!("inputs[{i}] ({})", quote(&input.name));
        regions.push(region_of(&input.parameters, &field)?);
    }
    let carried = regions.iter().filter(|r| r.is_none()).count();
    if !raw.is_empty() && raw.len() != carried {
        return Err(perr(
            "raw_input_contents",
            format!(
                "{} entries for {carried} inputs not in shared memory: give one per such input, \
                 in input order, or none",
                raw.len(),
            ),
        ));
    }
    let mut inputs = Vec::with_capacity(request.inputs.len());
    let mut placement = Placement::default();
    let mut raw_entries = raw.iter();
    for ((i, input), region) in request.inputs.iter().enumerate().zip(regions) {
        let field = format!("inputs[{i}] ({})", quote(&input.name));
        if let Some(slice) = region {
            no_typed_contents(
                input,
                &field,
                "an input in shared memory carries no contents",
            )?;
            let (tensor, shared) = shared_input_from_parts(
                i,
                &field,
                &input.name,
                &input.datatype,
                &input.shape,
                slice,
                request_len,
            )?;
            inputs.push(tensor);
            placement.inputs.push(shared);
            continue;
        }
        let contents = match raw_entries.next() {
            Some(bytes) => {
                no_typed_contents(
                    input,
                    &field,
                    "give raw_input_contents or typed contents, not both",
                )?;
                InputContents::Raw(bytes)
            }
            None => typed_contents(&field, &input.datatype, input.contents.as_ref())?,
        };
        inputs.push(input_from_parts(
            &field,
            &input.name,
            &input.datatype,
            &input.shape,
            contents,
            request_len,
        )?);
    }
    let mut seen = HashSet::with_capacity(request.outputs.len());
    let mut outputs = Vec::with_capacity(request.outputs.len());
    for (i, o) in request.outputs.iter().enumerate() {
        if !seen.insert(o.name.as_str()) {
            return Err(perr(
                format!("outputs[{i}] ({})", quote(&o.name)),
                "asked for twice",
            ));
        }
        let field = format!("outputs[{i}] ({})", quote(&o.name));
        if let Some(slice) = region_of(&o.parameters, &field)? {
            placement
                .outputs
                .push((o.name.clone(), format!("{field}.parameters"), slice));
        }
        outputs.push(RequestedOutput {
            name: o.name.clone(),
            binary: !is_false(&o.parameters, "binary_data"),
        });
    }
    Ok(InferRequest {
        id: (!request.id.is_empty()).then(|| request.id.clone()),
        parameters: parameters_text(&request.parameters)?,
        inputs,
        outputs: (!outputs.is_empty()).then_some(outputs),
        binary_by_default: true,
        body_bytes: request_len,
        trace: None,
        placement,
    })
}

/// The gRPC reply of a protocol answer.
///
/// # Errors
/// [`ReplyError::TooLong`] for a BYTES element longer than a 4-byte length states.
pub(super) fn infer_response(answer: InferOutputs) -> Result<ModelInferResponse, OipError> {
    // Outputs written to shared memory carry nothing either way; the others decide.
    let mut carried = answer.outputs.iter().filter(|o| o.region.is_none());
    let typed = carried.clone().next().is_some()
        && carried.all(|o| !o.binary && typed_field(o.tensor.dtype()).is_some());
    let mut outputs = Vec::with_capacity(answer.outputs.len());
    let mut raw = Vec::with_capacity(if typed { 0 } else { answer.outputs.len() });
    for ReplyTensor {
        name,
        tensor,
        region,
        ..
    } in answer.outputs
    {
        if let Some(slice) = region {
            // Written to its region: the reply says where, with no contents of its own. Among
            // raw outputs it keeps its place with an empty entry: Triton's clients read the raw
            // entries by output position.
            if !typed {
                raw.push(bytes::Bytes::new());
            }
            outputs.push(InferOutputTensor {
                name,
                datatype: tensor.dtype().oip_name().to_string(),
                shape: reply_shape(&tensor.shape),
                parameters: region_parameters(slice),
                contents: None,
            });
            continue;
        }
        if let TensorData::Bytes(v) = &tensor.data {
            if let Some((element, e)) = v
                .iter()
                .enumerate()
                .find(|(_, e)| u32::try_from(e.len()).is_err())
            {
                return Err(ReplyError::TooLong {
                    output: name,
                    element,
                    len: e.len(),
                }
                .into());
            }
        }
        let datatype = tensor.dtype().oip_name().to_string();
        let shape = reply_shape(&tensor.shape);
        let contents = if typed {
            Some(typed_of(tensor.data))
        } else {
            let mut bytes = Vec::new();
            tensor.data.write_le(&mut bytes);
            raw.push(bytes.into());
            None
        };
        outputs.push(InferOutputTensor {
            name,
            datatype,
            shape,
            parameters: HashMap::new(),
            contents,
        });
    }
    Ok(ModelInferResponse {
        model_name: answer.model,
        model_version: "1".into(),
        id: answer.id.unwrap_or_default(),
        parameters: answer
            .parameters
            .into_iter()
            .map(|(k, v)| (k, parameter_of(v)))
            .collect(),
        outputs,
        raw_output_contents: raw,
    })
}

/// A reply's shape as protobuf carries it.
fn reply_shape(shape: &[usize]) -> Vec<i64> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect()
}

/// The parameters of an output written to a shared memory region.
fn region_parameters(slice: RegionSlice) -> HashMap<String, InferParameter> {
    let int = |n: u64| InferParameter {
        parameter_choice: Some(ParameterChoice::Int64Param(
            i64::try_from(n).unwrap_or(i64::MAX),
        )),
    };
    let mut parameters = HashMap::from([
        (
            "shared_memory_region".to_string(),
            InferParameter {
                parameter_choice: Some(ParameterChoice::StringParam(slice.region)),
            },
        ),
        ("shared_memory_byte_size".to_string(), int(slice.byte_size)),
    ]);
    if slice.offset != 0 {
        parameters.insert("shared_memory_offset".to_string(), int(slice.offset));
    }
    parameters
}

/// Elements in their typed field (callers checked the datatype has one).
fn typed_of(data: TensorData) -> InferTensorContents {
    let mut c = InferTensorContents::default();
    match data {
        TensorData::Bool(v) => c.bool_contents = v,
        TensorData::I8(v) => c.int_contents = v.into_iter().map(i32::from).collect(),
        TensorData::I16(v) => c.int_contents = v.into_iter().map(i32::from).collect(),
        TensorData::I32(v) => c.int_contents = v,
        TensorData::I64(v) => c.int64_contents = v,
        TensorData::U8(v) => c.uint_contents = v.into_iter().map(u32::from).collect(),
        TensorData::U16(v) => c.uint_contents = v.into_iter().map(u32::from).collect(),
        TensorData::U32(v) => c.uint_contents = v,
        TensorData::U64(v) => c.uint64_contents = v,
        TensorData::F32(v) => c.fp32_contents = v,
        TensorData::F64(v) => c.fp64_contents = v,
        TensorData::Bytes(v) => c.bytes_contents = v,
        TensorData::F16(_) | TensorData::Bf16(_) => {}
    }
    c
}

#[cfg(test)]
mod tests {
    use super::super::proto::model_infer_request::InferInputTensor;
    use super::*;
    use serde_json::{Map, Value};
    use weir_engine::tensor::Tensor;

    fn input(
        name: &str,
        datatype: &str,
        shape: Vec<i64>,
        contents: InferTensorContents,
    ) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape,
            parameters: HashMap::new(),
            contents: Some(contents),
        }
    }

    #[test]
    fn typed_and_raw_requests_parse_to_the_same_tensors() {
        let typed = ModelInferRequest {
            inputs: vec![input(
                "x",
                "INT16",
                vec![2],
                InferTensorContents {
                    int_contents: vec![-3, 7],
                    ..Default::default()
                },
            )],
            ..Default::default()
        };
        let mut raw = typed.clone();
        raw.inputs[0].contents = None;
        raw.raw_input_contents = vec![[(-3i16).to_le_bytes(), 7i16.to_le_bytes()].concat().into()];
        let a = infer_request(&typed, 64).unwrap();
        let b = infer_request(&raw, 64).unwrap();
        assert_eq!(a.inputs, b.inputs);
        assert_eq!(a.inputs[0].data, TensorData::I16(vec![-3, 7]));
    }

    #[test]
    fn misplaced_contents_are_refused_by_field() {
        let wrong_field = ModelInferRequest {
            inputs: vec![input(
                "x",
                "INT64",
                vec![1],
                InferTensorContents {
                    fp32_contents: vec![1.0],
                    ..Default::default()
                },
            )],
            ..Default::default()
        };
        let e = infer_request(&wrong_field, 64).unwrap_err();
        assert_eq!(e.field, "inputs[0] (x).contents.fp32_contents");
        let mut half = wrong_field.clone();
        half.inputs[0].datatype = "FP16".into();
        let e = infer_request(&half, 64).unwrap_err();
        assert!(e.message.contains("raw_input_contents"), "{e}");
        let mut short = wrong_field;
        short.raw_input_contents = vec![vec![0; 8].into(), vec![0; 8].into()];
        assert_eq!(
            infer_request(&short, 64).unwrap_err().field,
            "raw_input_contents"
        );
    }

    #[test]
    fn replies_are_raw_unless_every_output_asks_for_typed() {
        let answer = |binary: bool| InferOutputs {
            model: "g".into(),
            id: Some("7".into()),
            parameters: Map::from_iter([("sequence_id".to_string(), Value::from(3))]),
            outputs: vec![ReplyTensor {
                name: "y".into(),
                tensor: Tensor::f32(vec![1, 2], vec![0.5, -2.0]),
                binary,
                region: None,
            }],
        };
        let raw = infer_response(answer(true)).unwrap();
        assert_eq!(raw.id, "7");
        assert_eq!(
            raw.raw_output_contents,
            vec![[0.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()]
        );
        assert_eq!(raw.outputs[0].shape, vec![1, 2]);
        assert_eq!(
            raw.parameters["sequence_id"].parameter_choice,
            Some(ParameterChoice::Int64Param(3))
        );
        let typed = infer_response(answer(false)).unwrap();
        assert!(typed.raw_output_contents.is_empty());
        assert_eq!(
            typed.outputs[0].contents.as_ref().unwrap().fp32_contents,
            vec![0.5, -2.0]
        );
    }
}
