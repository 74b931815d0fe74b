//! `ctc_decode`: greedy (best-path) decoding of a recogniser's per-step class scores, as in Graves
//! et al., *Connectionist Temporal Classification*, §3.2: the most likely class at each step,
//! repeats collapsed, blanks dropped.
//!
//! Each request's `[T, C]` scores are decoded on their own shape, so recognisers whose step count
//! follows the image width batch as ragged rows. A step's best class is the first of its maxima
//! (ties go to the lower index, as `numpy.argmax` does), so the text never depends on the order
//! of equal floats. A class past the label file, or a NaN score, fails that request: both come
//! from the model, and a guessed character would be a silent wrong answer.

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

/// One request's decoded text and its confidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The class texts of the kept steps, joined.
    pub text: String,
    /// The mean best score of the kept steps; 0 when none is kept.
    pub confidence: f32,
}

/// Greedy CTC decoding of `scores`, `steps` rows of `classes` values, naming class `i` by
/// `names[i]`.
///
/// # Errors
/// A step whose best class has no name, or a NaN score.
pub fn decode(
    scores: &[f32],
    classes: usize,
    names: &[String],
    blank: usize,
) -> Result<Decoded, String> {
    let mut text = String::new();
    let mut kept = 0usize;
    let mut sum = 0f64;
    let mut previous = None;
    if classes == 0 {
        return Ok(Decoded {
            text,
            confidence: 0.0,
        });
    }
    for (step, run) in scores.chunks(classes).enumerate() {
        let mut best = 0;
        for (c, &v) in run.iter().enumerate() {
            if v.is_nan() {
                return Err(format!("step {step}: class {c} scores NaN"));
            }
            if v > run[best] {
                best = c;
            }
        }
        if previous != Some(best) && best != blank {
            let name = names.get(best).ok_or_else(|| {
                format!(
                    "step {step}: class {best} has no label (the file holds {})",
                    names.len()
                )
            })?;
            text.push_str(name);
            kept += 1;
            sum += f64::from(run[best]);
        }
        previous = Some(best);
    }
    let confidence = if kept == 0 {
        0.0
    } else {
        (sum / kept as f64) as f32
    };
    Ok(Decoded { text, confidence })
}

/// The `text` and `confidence` columns of every row of `input` (`f32 [T, C]` per row).
///
/// # Errors
/// A message naming the row: not f32 of rank 2, or [`decode`]'s errors.
pub fn ctc_decode(
    names: &[String],
    blank: usize,
    input: &TensorColumn,
) -> Result<Vec<TensorColumn>, String> {
    let x = input
        .f32_values()
        .ok_or_else(|| format!("ctc_decode needs f32, got {}", input.dtype()))?;
    let rows = input.len();
    let mut texts = Vec::with_capacity(rows);
    let mut confidences = Vec::with_capacity(rows);
    for r in 0..rows {
        let shape = input.row_shape(r);
        let [_, classes] = shape[..] else {
            return Err(format!(
                "row {r}: scores of shape {shape:?}, expected [steps, classes]"
            ));
        };
        let decoded = decode(&x[input.row_range(r)], classes, names, blank)
            .map_err(|e| format!("row {r}: {e}"))?;
        texts.push(decoded.text.into_bytes());
        confidences.push(decoded.confidence);
    }
    let column = |name: &str, data: TensorData| {
        TensorColumn::from_data(name, vec![], rows, data).map_err(|e| e.to_string())
    };
    Ok(vec![
        column("text", TensorData::Bytes(texts))?,
        column("confidence", TensorData::F32(confidences))?,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        ["<blank>", "a", "b", "c"].map(String::from).to_vec()
    }

    #[test]
    fn repeats_collapse_and_blanks_separate_them() {
        // Steps' best classes: a a <blank> a b b <blank> → "aab".
        let best = [1, 1, 0, 1, 2, 2, 0];
        let mut scores = Vec::new();
        for &b in &best {
            let mut row = vec![0.1f32; 4];
            row[b] = 0.5 + b as f32 / 10.0;
            scores.extend(row);
        }
        let d = decode(&scores, 4, &names(), 0).unwrap();
        assert_eq!(d.text, "aab");
        assert!((d.confidence - (0.6 + 0.6 + 0.7) / 3.0).abs() < 1e-6);
    }

    #[test]
    fn ties_go_to_the_lower_class_and_nothing_kept_is_confidence_zero() {
        let d = decode(&[0.5, 0.5, 0.0, 0.0], 4, &names(), 0).unwrap();
        assert_eq!(
            d,
            Decoded {
                text: String::new(),
                confidence: 0.0
            }
        );
        let d = decode(&[], 4, &names(), 0).unwrap();
        assert_eq!(d.confidence, 0.0);
    }

    #[test]
    fn a_class_without_a_label_or_a_nan_is_refused() {
        let e = decode(&[0.0, 0.0, 0.0, 0.0, 1.0], 5, &names(), 0).unwrap_err();
        assert!(e.contains("class 4 has no label"), "{e}");
        let e = decode(&[0.0, f32::NAN, 0.0, 0.0], 4, &names(), 0).unwrap_err();
        assert!(e.contains("NaN"), "{e}");
    }
}
