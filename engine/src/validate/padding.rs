//! Padded batching (`batching: {pad: {dim: seq, value: 0}}`): requests whose inputs differ only
//! along one named dimension join one call, each padded to the longest.
//!
//! The dimension is named as the model names it (an ONNX `dim_param`), since a name is how a model
//! says that dimensions of several tensors have one size in a call (`input_ids: [batch, seq]`,
//! `attention_mask: [batch, seq]`, `tokens: [batch, seq, 4]`). Rules: the node calls its model in
//! batches (a dynamic batch dimension; padding a one-request call joins nothing); at least one
//! input has a dimension of that name after its batch dimension (the batch dimension itself is
//! never padded); and the value fits the element type of every input padded with it (a whole
//! number in range for integers, 0 or 1 for booleans, 0 for BYTES, whose padding is the empty
//! string). What the plan makes of it is [`crate::plan::PadPlan`].

use std::collections::BTreeSet;

use super::{node_path, CallShape, Validator};
use crate::diagnostic::did_you_mean;
use crate::onnx::{ElementType, ModelMetadata};
use crate::spec::ModelSpec;
use crate::tensor::DType;

/// Whether `value` stands for an element of `dtype` exactly as written (the cast the executor
/// makes loses nothing but float rounding).
fn fits(value: f64, dtype: DType) -> bool {
    let whole_within = |min: f64, max: f64| value.fract() == 0.0 && value >= min && value <= max;
    match dtype {
        DType::Bool => value == 0.0 || value == 1.0,
        DType::U8 => whole_within(0.0, f64::from(u8::MAX)),
        DType::U16 => whole_within(0.0, f64::from(u16::MAX)),
        DType::U32 => whole_within(0.0, f64::from(u32::MAX)),
        // 2^64 itself is not a u64; every whole f64 below it is.
        DType::U64 => whole_within(0.0, 18_446_744_073_709_549_568.0),
        DType::I8 => whole_within(f64::from(i8::MIN), f64::from(i8::MAX)),
        DType::I16 => whole_within(f64::from(i16::MIN), f64::from(i16::MAX)),
        DType::I32 => whole_within(f64::from(i32::MIN), f64::from(i32::MAX)),
        DType::I64 => whole_within(-9_223_372_036_854_775_808.0, 9_223_372_036_854_774_784.0),
        DType::F16 => value.is_finite() && value.abs() <= f64::from(half::f16::MAX),
        DType::Bf16 => value.is_finite() && value.abs() <= f64::from(half::bf16::MAX),
        DType::F32 => value.is_finite() && value.abs() <= f64::from(f32::MAX),
        DType::F64 => value.is_finite(),
        DType::Bytes => value == 0.0,
    }
}

impl Validator<'_, '_> {
    /// Checks node `id`'s `batching.pad` against its model `meta`, called as `call`.
    pub(super) fn check_padding(
        &mut self,
        id: &str,
        m: &ModelSpec,
        meta: &ModelMetadata,
        call: CallShape,
    ) {
        let Some(pad) = &m.batching.pad else {
            return;
        };
        if call != CallShape::Batched {
            let why = match call {
                CallShape::Unbatched => "has `batch: false`",
                _ => "has its batch dimension fixed to 1",
            };
            self.error(
                node_path(id, "batching.pad"),
                pad.location,
                format!("node `{id}`: padding joins requests into one call, but the model {why}, so each request is a call of its own"),
            );
            return;
        }
        let dim = pad.dim.value.as_str();
        let (state_inputs, _) = m.state_tensors();
        let inputs = || {
            meta.inputs
                .iter()
                .filter(|i| !state_inputs.contains(&i.name.as_str()))
        };
        if let Some(i) = inputs().find(|i| i.names.first().and_then(Option::as_deref) == Some(dim))
        {
            self.error(
                node_path(id, "batching.pad.dim"),
                pad.dim.location,
                format!("node `{id}`: `{dim}` names the batch dimension of model input `{}`; padding is along a dimension of each request", i.name),
            );
            return;
        }
        let padded: Vec<_> = inputs()
            .filter(|i| !i.axes_named(dim, true).is_empty())
            .collect();
        if padded.is_empty() {
            let names: BTreeSet<&str> = inputs()
                .flat_map(|i| i.names.iter().skip(1).flatten().map(String::as_str))
                .collect();
            let help = match did_you_mean(dim, names.iter().copied()) {
                Some(s) => format!("did you mean `{s}`?"),
                None if names.is_empty() => {
                    "the model names none of its inputs' dimensions, so none can be padded".into()
                }
                None => format!(
                    "its inputs' named dimensions are: {}",
                    names.into_iter().collect::<Vec<_>>().join(", ")
                ),
            };
            self.error(
                node_path(id, "batching.pad.dim"),
                pad.dim.location,
                format!("node `{id}`: no input of the model has a dimension named `{dim}`"),
            )
            .help = Some(help);
            return;
        }
        let value = &pad.value.value;
        for input in padded {
            let ElementType::Supported(dtype) = input.element else {
                continue;
            };
            if !fits(value.value, dtype) {
                self.error(
                    node_path(id, "batching.pad.value"),
                    value.location,
                    format!("node `{id}`: padding value {} does not fit model input `{}` of type {dtype}", value.value, input.name),
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_padding_value_fits_a_type_only_exactly() {
        let cases = [
            (0.0, DType::Bytes, true),
            (1.0, DType::Bytes, false),
            (1.0, DType::Bool, true),
            (2.0, DType::Bool, false),
            (255.0, DType::U8, true),
            (256.0, DType::U8, false),
            (-1.0, DType::U32, false),
            (-128.0, DType::I8, true),
            (0.5, DType::I64, false),
            (0.5, DType::F16, true),
            (1e6, DType::F16, false),
            (1e6, DType::Bf16, true),
            (f64::NAN, DType::F32, false),
        ];
        for (value, dtype, want) in cases {
            assert_eq!(fits(value, dtype), want, "{value} as {dtype}");
        }
    }
}
