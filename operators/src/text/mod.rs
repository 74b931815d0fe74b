//! Text and post-processing ops: `tokenize` (a text into token ids, in [`tokenize`]),
//! `detokenize` (token ids into a text, in [`detokenize`]), `softmax` (scores into
//! probabilities), `labels` (class indices into names) and `ctc_decode` (a recogniser's scores
//! into a text, in [`ctc`]), computed column-wise on the worker like the tensor ops, through the
//! same operator.
//!
//! Softmax is the numerically stable form (Goodfellow, Bengio and Courville, *Deep Learning*,
//! §4.1): the row's maximum is subtracted before `exp`, so large scores never overflow and the
//! result equals ONNX's `Softmax` along the last axis. Each row is computed on its own shape, so a
//! free last dimension works. A label lookup copies names the validator read from the file; an
//! index outside them is an error naming the row and the index, which the operator turns into a
//! failure of that request alone.

pub mod ctc;
pub mod detokenize;
pub mod tokenize;

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::validate::TextOp;

use crate::column::shaped_like;

/// Applies `op` to `input`; returns the output column (named as the op's output).
///
/// # Errors
/// A message naming the row: the input is not of the op's dtype, or an index has no label.
pub fn apply(op: &TextOp, input: &TensorColumn) -> Result<Vec<TensorColumn>, String> {
    match op {
        TextOp::Tokenize {
            tokenizer,
            max_length,
        } => tokenize::tokenize(tokenizer, *max_length, input),
        TextOp::Detokenize {
            tokenizer,
            skip_special_tokens,
        } => detokenize::detokenize(tokenizer, *skip_special_tokens, input),
        TextOp::CtcDecode { names, blank } => ctc::ctc_decode(names, *blank, input),
        TextOp::Softmax => {
            let x = input
                .f32_values()
                .ok_or_else(|| format!("softmax needs f32, got {}", input.dtype()))?;
            let mut out = Vec::with_capacity(x.len());
            for r in 0..input.len() {
                let axis = input.row_shape(r).last().copied().unwrap_or(1);
                softmax_rows(&x[input.row_range(r)], axis, &mut out);
            }
            Ok(vec![shaped_like(input, "output", TensorData::F32(out))?])
        }
        TextOp::Labels { names } => {
            let x = input
                .i64_values()
                .ok_or_else(|| format!("labels needs i64 indices, got {}", input.dtype()))?;
            let mut out = Vec::with_capacity(x.len());
            for r in 0..input.len() {
                for &i in &x[input.row_range(r)] {
                    let name = usize::try_from(i)
                        .ok()
                        .and_then(|i| names.get(i))
                        .ok_or_else(|| {
                            format!(
                                "row {r}: index {i} has no label (the file holds {})",
                                names.len()
                            )
                        })?;
                    out.push(name.as_bytes().to_vec());
                }
            }
            Ok(vec![shaped_like(input, "labels", TensorData::Bytes(out))?])
        }
    }
}

/// Whether `op` refuses only what the client wrote: a text over `max_length` tokens, or not
/// UTF-8. A label lookup fails on a model's index, which is the graph's fault, not the client's.
pub fn blames_request(op: &TextOp) -> bool {
    matches!(op, TextOp::Tokenize { .. })
}

/// Softmax of each consecutive run of `axis` values of `x`, appended to `out`.
fn softmax_rows(x: &[f32], axis: usize, out: &mut Vec<f32>) {
    if axis == 0 {
        return;
    }
    for run in x.chunks(axis) {
        let max = run.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let start = out.len();
        out.extend(run.iter().map(|&v| (v - max).exp()));
        let sum: f32 = out[start..].iter().sum();
        for v in &mut out[start..] {
            *v /= sum;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn softmax_is_stable_and_sums_to_one_per_run() {
        let c = TensorColumn::from_data(
            "x",
            vec![2, 3],
            1,
            TensorData::F32(vec![1000.0, 1001.0, 1002.0, 0.0, 0.0, 0.0]),
        )
        .unwrap();
        let out = apply(&TextOp::Softmax, &c).unwrap();
        let y = out[0].f32_values().unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
        assert!((y[..3].iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((y[3] - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(out[0].uniform_shape(), Some(&[2, 3][..]));
    }

    #[test]
    fn softmax_of_rows_with_their_own_lengths() {
        let c = TensorColumn::from_ragged(
            "x",
            vec![vec![1], vec![2], vec![0]],
            TensorData::F32(vec![5.0, 0.0, 0.0]),
        )
        .unwrap();
        let out = apply(&TextOp::Softmax, &c).unwrap();
        assert_eq!(out[0].f32_values().unwrap(), &[1.0, 0.5, 0.5]);
        assert_eq!(out[0].row_shape(2), vec![0]);
    }

    #[test]
    fn labels_name_each_index_and_refuse_one_out_of_range() {
        let names: Arc<[String]> = vec!["cat".to_string(), "dog".to_string()].into();
        let op = TextOp::Labels { names };
        let c = TensorColumn::from_data("i", vec![1], 2, TensorData::I64(vec![1, 0])).unwrap();
        let out = apply(&op, &c).unwrap();
        let TensorData::Bytes(v) = out[0].data() else {
            panic!("not bytes")
        };
        assert_eq!(v, vec![b"dog".to_vec(), b"cat".to_vec()]);
        for bad in [2, -1] {
            let c = TensorColumn::from_data("i", vec![1], 1, TensorData::I64(vec![bad])).unwrap();
            let e = apply(&op, &c).unwrap_err();
            assert!(e.contains(&format!("index {bad} has no label")), "{e}");
        }
    }
}
