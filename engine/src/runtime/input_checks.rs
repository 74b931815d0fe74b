//! Admission's check of a request's tensors against the graph inputs: every name is a graph input,
//! each input is given once, with its dtype, a shape its declared one accepts (any size where it
//! declares `-1`; one size per symbolic name across all inputs of the request), and as many
//! elements as that shape holds. A wrong request is refused here, naming the field that is wrong,
//! so nothing malformed reaches the dataflow.
//!
//! An optional input the client leaves out is filled with its default (the value its model file
//! holds, which validation read), so the request carries it from the ingress on and a batch
//! never mixes rows with and without it.
//!
//! A graph input filled from the sequence parameters (Triton's control tensors) is never sent by
//! the client: it is made here from the request's `parameters` (`sequence_id`, `sequence_start`,
//! `sequence_end`, read as the per-sequence node reads them), so it is in the batch from the
//! ingress on, as any other input.

use weir_hams::sequence_params::row_control;
use weir_hams::sequences::RowControl;

use crate::plan::Plan;
use crate::request::RequestError;
use crate::spec::{SequenceControl, SequenceInputSpec};
use crate::stateful::constant_data;
use crate::tensor::{DType, Dim, NamedTensor, ShapeDisplay, Tensor, TensorData};

/// Checks `inputs` against `plan`'s graph inputs and returns them in the graph's order, the
/// sequence control inputs made from `parameters` (the request's, as JSON object text).
///
/// # Errors
/// [`RequestError::Invalid`] naming the first wrong field.
pub(super) fn check_inputs(
    plan: &Plan,
    mut inputs: Vec<NamedTensor>,
    parameters: Option<&str>,
) -> Result<Vec<Tensor>, RequestError> {
    let invalid = |field: String, message: String| RequestError::Invalid { field, message };
    for t in &inputs {
        if plan
            .inputs
            .iter()
            .any(|g| g.client() == t.name && g.sequence.is_some())
        {
            return Err(invalid(
                format!("inputs.{}", t.name),
                format!(
                    "`{}` is a sequence control input: weir fills it from `parameters.sequence_id`, `sequence_start` and `sequence_end`; do not send it",
                    t.name
                ),
            ));
        }
        if !plan.inputs.iter().any(|g| g.client() == t.name) {
            let known: Vec<&str> = plan.inputs.iter().map(|g| g.client()).collect();
            return Err(invalid(
                format!("inputs.{}", t.name),
                format!(
                    "graph `{}` has no input `{}` (its inputs: {})",
                    plan.name,
                    t.name,
                    known.join(", ")
                ),
            ));
        }
    }
    let mut ordered = Vec::with_capacity(plan.inputs.len());
    // Symbolic dimension name -> (size in this request, the input that fixed it).
    let mut symbols: Vec<(&str, usize, &str)> = Vec::new();
    let mut control: Option<RowControl> = None;
    for g in &plan.inputs {
        if let Some(spec) = &g.sequence {
            // Read once per request, on its first control input.
            let c = match control.take() {
                Some(c) => c,
                None => row_control(parameters).map_err(|e| RequestError::Invalid {
                    field: e.field.to_string(),
                    message: format!(
                        "{} (graph `{}` feeds its sequence control inputs from them)",
                        e.message, plan.name
                    ),
                })?,
            };
            ordered.push(control_tensor(&g.name, g.ty.dtype, spec, &c)?);
            control = Some(c);
            continue;
        }
        let Some(pos) = inputs.iter().position(|t| t.name == g.client()) else {
            // An optional input left out: the model's own value, as ONNX Runtime would use.
            if let Some(default) = &g.default {
                ordered.push(default.clone());
                continue;
            }
            return Err(invalid(
                format!("inputs.{}", g.client()),
                format!("missing input `{}` ({})", g.client(), g.ty),
            ));
        };
        let t = inputs.swap_remove(pos);
        if inputs.iter().any(|o| o.name == g.client()) {
            return Err(invalid(
                format!("inputs.{}", g.client()),
                "given more than once".into(),
            ));
        }
        let tensor = t.tensor;
        if tensor.dtype() != g.ty.dtype {
            return Err(invalid(
                format!("inputs.{}.datatype", g.client()),
                format!("expected {}, got {}", g.ty.dtype, tensor.dtype()),
            ));
        }
        let shape_ok = tensor.shape.len() == g.ty.shape.len()
            && tensor
                .shape
                .iter()
                .zip(&g.ty.shape)
                .all(|(&a, b)| Dim::Fixed(a).compatible(*b));
        if !shape_ok {
            return Err(invalid(
                format!("inputs.{}.shape", g.client()),
                format!(
                    "expected {}, got {:?}",
                    ShapeDisplay(&g.ty.shape),
                    tensor.shape
                ),
            ));
        }
        let expected: usize = tensor.shape.iter().product();
        if tensor.data.len() != expected {
            return Err(invalid(
                format!("inputs.{}.data", g.client()),
                format!(
                    "shape {:?} needs {expected} elements, got {}",
                    tensor.shape,
                    tensor.data.len()
                ),
            ));
        }
        for (symbol, &size) in g.symbols.iter().zip(&tensor.shape) {
            let Some(symbol) = symbol.as_deref() else {
                continue;
            };
            match symbols.iter().find(|(s, _, _)| *s == symbol) {
                Some(&(_, agreed, first)) if agreed != size => {
                    return Err(invalid(
                        format!("inputs.{}.shape", g.client()),
                        format!(
                            "dimension `{symbol}` is {size} here but {agreed} in `{first}`; inputs sharing `{symbol}` must agree"
                        ),
                    ));
                }
                Some(_) => {}
                None => symbols.push((symbol, size, g.client())),
            }
        }
        ordered.push(tensor);
    }
    Ok(ordered)
}

/// The `[1]` tensor of sequence control input `name` (of `dtype`, as `spec` says) for a request
/// whose parameters gave `c`.
fn control_tensor(
    name: &str,
    dtype: DType,
    spec: &SequenceInputSpec,
    c: &RowControl,
) -> Result<Tensor, RequestError> {
    let flag = |on: bool| {
        let [off_value, on_value] = spec.false_true.unwrap_or([0.0, 1.0]);
        constant_data(dtype, if on { on_value } else { off_value })
    };
    let data = match spec.control {
        SequenceControl::Start => flag(c.start),
        SequenceControl::End => flag(c.end),
        SequenceControl::Ready => flag(true),
        SequenceControl::Id if dtype == DType::Bytes => {
            Ok(TensorData::Bytes(vec![c.id.as_bytes().to_vec()]))
        }
        SequenceControl::Id => {
            c.id.parse::<u64>()
                .ok()
                .and_then(|n| integer_data(dtype, n))
                .ok_or_else(|| {
                    format!(
                        "must be a number that input `{name}` ({dtype}) holds, not `{}`",
                        c.id
                    )
                })
        }
    };
    // Validation proved the flags fit the input's type; only an id can fail here.
    data.map(|d| Tensor::new(vec![1], d))
        .map_err(|message| RequestError::Invalid {
            field: "parameters.sequence_id".into(),
            message,
        })
}

/// `n` as one element of integer type `dtype`, when it fits.
fn integer_data(dtype: DType, n: u64) -> Option<TensorData> {
    Some(match dtype {
        DType::U8 => TensorData::U8(vec![u8::try_from(n).ok()?]),
        DType::U16 => TensorData::U16(vec![u16::try_from(n).ok()?]),
        DType::U32 => TensorData::U32(vec![u32::try_from(n).ok()?]),
        DType::U64 => TensorData::U64(vec![n]),
        DType::I8 => TensorData::I8(vec![i8::try_from(n).ok()?]),
        DType::I16 => TensorData::I16(vec![i16::try_from(n).ok()?]),
        DType::I32 => TensorData::I32(vec![i32::try_from(n).ok()?]),
        DType::I64 => TensorData::I64(vec![i64::try_from(n).ok()?]),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control(id: &str, start: bool, end: bool) -> RowControl {
        RowControl {
            id: id.into(),
            start,
            end,
        }
    }

    fn spec(control: SequenceControl, false_true: Option<[f64; 2]>) -> SequenceInputSpec {
        SequenceInputSpec {
            control,
            false_true,
        }
    }

    #[test]
    fn flags_take_their_false_and_true_values_in_the_input_type() {
        let start = spec(SequenceControl::Start, Some([0.0, 1.0]));
        let t = control_tensor("START", DType::F32, &start, &control("7", true, false)).unwrap();
        assert_eq!((t.shape, t.data), (vec![1], TensorData::F32(vec![1.0])));
        let end = spec(SequenceControl::End, Some([-1.0, 5.0]));
        let t = control_tensor("END", DType::I32, &end, &control("7", true, false)).unwrap();
        assert_eq!(t.data, TensorData::I32(vec![-1]));
        let ready = spec(SequenceControl::Ready, None);
        let t = control_tensor("READY", DType::Bool, &ready, &control("7", false, false)).unwrap();
        assert_eq!(t.data, TensorData::Bool(vec![true]));
    }

    #[test]
    fn the_id_is_a_number_of_the_input_type_or_the_bytes_of_any_id() {
        let id = spec(SequenceControl::Id, None);
        let t = control_tensor("CORRID", DType::U64, &id, &control("42", false, false)).unwrap();
        assert_eq!(t.data, TensorData::U64(vec![42]));
        let t = control_tensor("CORRID", DType::Bytes, &id, &control("abc", false, false)).unwrap();
        assert_eq!(t.data, TensorData::Bytes(vec![b"abc".to_vec()]));
        for (dtype, text) in [(DType::U64, "abc"), (DType::I32, "4294967296")] {
            match control_tensor("CORRID", dtype, &id, &control(text, false, false)) {
                Err(RequestError::Invalid { field, .. }) => {
                    assert_eq!(field, "parameters.sequence_id");
                }
                other => panic!("{dtype} {text}: {other:?}"),
            }
        }
    }
}
