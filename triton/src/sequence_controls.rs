//! `sequence_batching.control_input` as weir graph inputs filled from each request's sequence
//! parameters (`weir_engine::spec::SequenceInputSpec`): Triton's sequence batcher hands a model
//! START, END, READY and CORRID tensors it makes from the request's `sequence_id`,
//! `sequence_start` and `sequence_end`; weir's admission makes the same tensors from the same
//! parameters, so the model node takes them as ordinary inputs.
//!
//! A flag takes the type its `*_false_true` pair says (`int32` → INT32, `fp32` → FP32, `bool` →
//! BOOL) and those two values; CORRID takes its `data_type`. READY is always its true value: every
//! row weir runs is a real request (Triton's batcher pads slots with not-ready rows; weir's
//! batches hold only requests). Each is one element per request (`[1]`), so a batching model
//! sees `[batch, 1]`, as Triton gives it. The configuration's fields were checked at load
//! (`crate::validate`): one control per input, one pair of values per flag.

use weir_engine::spec::SequenceControl;
use weir_engine::tensor::DType;

use crate::datatype;
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_sequence_batching::control::Kind;
use crate::proto::inference::{DataType, ModelConfig};

/// One control input of a configuration, as a graph input.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlInput {
    /// The model's input name.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// What it holds.
    pub control: SequenceControl,
    /// A flag's false and true values.
    pub false_true: Option<[f64; 2]>,
}

/// The control inputs of `config`, in order; `Err` names the field that has no weir counterpart.
pub fn control_inputs(config: &ModelConfig) -> Result<Vec<ControlInput>, (String, String)> {
    let Some(SchedulingChoice::SequenceBatching(seq)) = &config.scheduling_choice else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(seq.control_input.len());
    for (i, input) in seq.control_input.iter().enumerate() {
        let field = format!("sequence_batching.control_input[{i}].control");
        let Some(c) = input.control.first() else {
            return Err((field, "no control".into()));
        };
        let control = match Kind::try_from(c.kind) {
            Ok(Kind::ControlSequenceStart) => SequenceControl::Start,
            Ok(Kind::ControlSequenceEnd) => SequenceControl::End,
            Ok(Kind::ControlSequenceReady) => SequenceControl::Ready,
            Ok(Kind::ControlSequenceCorrid) => SequenceControl::Id,
            Err(_) => return Err((field, format!("unknown kind {}", c.kind))),
        };
        let pair = |v: &[f64]| match v {
            [f, t] => Some([*f, *t]),
            _ => None,
        };
        let ints: Vec<f64> = c.int32_false_true.iter().map(|&v| f64::from(v)).collect();
        let floats: Vec<f64> = c.fp32_false_true.iter().map(|&v| f64::from(v)).collect();
        let bools: Vec<f64> = c
            .bool_false_true
            .iter()
            .map(|&v| if v { 1.0 } else { 0.0 })
            .collect();
        let (dtype, false_true) = if control == SequenceControl::Id {
            let dtype = DataType::try_from(c.data_type)
                .ok()
                .and_then(datatype::dtype)
                .ok_or_else(|| {
                    (
                        format!("{field}.data_type"),
                        format!("{} has no weir counterpart", datatype::name(c.data_type)),
                    )
                })?;
            (dtype, None)
        } else if let Some(p) = pair(&ints) {
            (DType::I32, Some(p))
        } else if let Some(p) = pair(&floats) {
            (DType::F32, Some(p))
        } else if let Some(p) = pair(&bools) {
            (DType::Bool, Some(p))
        } else {
            return Err((field, "a flag takes one pair of false/true values".into()));
        };
        out.push(ControlInput {
            name: input.name.clone(),
            dtype,
            control,
            false_true,
        });
    }
    Ok(out)
}
