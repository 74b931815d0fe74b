//! A fused `cast → transpose → normalize` chain ([`PreprocessOp`], made by planning): one pass
//! from the image (u8 or f32, channels last) to the model's normalised, channels-first f32 input.
//!
//! The common case, u8 or f32 rows of rank 3 turned channels first (`perm [2, 0, 1]`) or left as
//! they are, is computed directly: each output channel plane is written once, in order, from a
//! strided read of the row. For u8 input the value of every possible byte is worked out once per
//! channel, `(f32(x) - mean) / std` exactly as the unfused chain computes it, and looked up, so
//! the result is bit-equal to the chain's and the per-element division is gone. Any other input
//! (another dtype, permutation or rank, a channel count the means do not fit) runs the three ops
//! one after the other, which gives the chain's values and its errors by construction.

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::{DType, TensorData};
use weir_engine::validate::PreprocessOp;

use crate::tensor::normalize;

/// Every row of `input` through the chain `op` stands for.
///
/// # Errors
/// The message the unfused chain would give: a row of the wrong rank for the permutation, a
/// channel count the means and standard deviations do not fit, a dtype the cast refuses.
pub fn apply(op: &PreprocessOp, input: &TensorColumn) -> Result<TensorColumn, String> {
    if let Some(out) = direct(op, input) {
        return out;
    }
    let cast;
    let mut x = input;
    if let Some(to) = op.cast {
        cast = super::cast(x, to)?;
        x = &cast;
    }
    let moved;
    if let Some(perm) = &op.perm {
        moved = super::transpose(x, perm)?;
        x = &moved;
    }
    normalize(x, &op.mean, &op.std)
}

/// The one-pass computation, or `None` when `input` is not of the common case.
fn direct(op: &PreprocessOp, input: &TensorColumn) -> Option<Result<TensorColumn, String>> {
    let channels_first = match op.perm.as_deref() {
        None => false,
        Some([2, 0, 1]) => true,
        Some(_) => return None,
    };
    let dtype = input.dtype();
    let cast_fits = match op.cast {
        None => dtype == DType::F32,
        Some(to) => to == DType::F32 && matches!(dtype, DType::U8 | DType::F32),
    };
    if !cast_fits {
        return None;
    }
    let channels = op.mean.len().max(op.std.len());
    let mut shapes = Vec::with_capacity(input.len());
    for r in 0..input.len() {
        let shape = input.row_shape(r);
        let shape = if channels_first {
            let [h, w, c] = shape[..] else {
                return None;
            };
            vec![c, h, w]
        } else {
            shape
        };
        // What normalize reads as the channel count: the (output's) first dimension.
        if channels > 1 && shape.first() != Some(&channels) {
            return None;
        }
        shapes.push(shape);
    }
    let pick = |v: &[f32], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    let scale: Vec<(f32, f32)> = (0..channels)
        .map(|c| (pick(&op.mean, c), pick(&op.std, c)))
        .collect();
    let bytes = input.values::<u8>();
    let tables: Vec<[f32; 256]> = match bytes {
        Some(_) => scale.iter().map(|&(m, s)| table(m, s)).collect(),
        None => Vec::new(),
    };
    let mut out: Vec<f32> =
        Vec::with_capacity(shapes.iter().map(|s| s.iter().product::<usize>()).sum());
    for (r, shape) in shapes.iter().enumerate() {
        let range = input.row_range(r);
        // (planes, plane length): channels first, the row is [c, h, w]; otherwise normalize's
        // chunks of the first dimension (or the whole row for one mean).
        let n: usize = shape.iter().product();
        let planes = if channels_first || channels > 1 {
            shape[0]
        } else {
            1
        };
        let plane = n.checked_div(planes).unwrap_or(0);
        if let Some(v) = bytes {
            let v = &v[range];
            for k in 0..planes {
                let t = &tables[k.min(tables.len() - 1)];
                if channels_first {
                    out.extend(v.chunks_exact(planes).map(|px| t[usize::from(px[k])]));
                } else {
                    let chunk = &v[k * plane..(k + 1) * plane];
                    out.extend(chunk.iter().map(|&x| t[usize::from(x)]));
                }
            }
        } else {
            let v = &input.f32_values()?[range];
            for k in 0..planes {
                let (m, s) = scale[k.min(scale.len() - 1)];
                if channels_first {
                    out.extend(v.chunks_exact(planes).map(|px| (px[k] - m) / s));
                } else {
                    let chunk = &v[k * plane..(k + 1) * plane];
                    out.extend(chunk.iter().map(|&x| (x - m) / s));
                }
            }
        }
    }
    Some(
        TensorColumn::from_shapes("output", shapes, TensorData::F32(out))
            .map_err(|e| e.to_string()),
    )
}

/// `(f32(x) - mean) / std` for every byte `x`.
fn table(mean: f32, std: f32) -> [f32; 256] {
    let mut t = [0.0; 256];
    for (x, slot) in t.iter_mut().enumerate() {
        *slot = (f32::from(x as u8) - mean) / std;
    }
    t
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn op(
        cast: Option<DType>,
        perm: Option<Vec<usize>>,
        mean: Vec<f32>,
        std: Vec<f32>,
    ) -> PreprocessOp {
        PreprocessOp {
            cast,
            perm,
            mean,
            std,
            fused: Vec::new(),
        }
    }

    /// The chain as its three nodes compute it, one after the other.
    fn unfused(op: &PreprocessOp, input: &TensorColumn) -> Result<TensorColumn, String> {
        let mut x = input.clone();
        if let Some(to) = op.cast {
            x = super::super::cast(&x, to)?;
        }
        if let Some(perm) = &op.perm {
            x = super::super::transpose(&x, perm)?;
        }
        normalize(&x, &op.mean, &op.std)
    }

    fn bits(c: &TensorColumn) -> Vec<u32> {
        c.f32_values()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    fn images(sizes: &[(usize, usize)], channels: usize, seed: u32) -> TensorColumn {
        let mut shapes = Vec::new();
        let mut data = Vec::new();
        for &(h, w) in sizes {
            shapes.push(vec![h, w, channels]);
            data.extend(
                (0..h * w * channels)
                    .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed).to_le_bytes()[1]),
            );
        }
        TensorColumn::from_shapes("x", shapes, TensorData::U8(data)).unwrap()
    }

    #[test]
    fn the_ocr_chain_is_bit_equal_to_its_three_nodes_on_images_of_their_own_sizes() {
        let chain = op(
            Some(DType::F32),
            Some(vec![2, 0, 1]),
            vec![127.5],
            vec![127.5],
        );
        let x = images(&[(48, 320), (7, 5), (48, 320)], 3, 9);
        let fused = apply(&chain, &x).unwrap();
        let want = unfused(&chain, &x).unwrap();
        assert_eq!(fused.row_shape(1), vec![3, 7, 5]);
        assert_eq!(
            (0..3).map(|r| fused.row_shape(r)).collect::<Vec<_>>(),
            (0..3).map(|r| want.row_shape(r)).collect::<Vec<_>>()
        );
        assert_eq!(bits(&fused), bits(&want));
    }

    #[test]
    fn per_channel_means_and_f32_input_match_the_chain() {
        let chain = op(
            None,
            Some(vec![2, 0, 1]),
            vec![0.485, 0.456, 0.406],
            vec![0.229, 0.224, 0.225],
        );
        let x = images(&[(6, 4)], 3, 1);
        let x = super::super::cast(&x, DType::F32).unwrap();
        assert_eq!(
            bits(&apply(&chain, &x).unwrap()),
            bits(&unfused(&chain, &x).unwrap())
        );
    }

    #[test]
    fn a_channel_count_the_means_do_not_fit_fails_as_the_chain_does() {
        let chain = op(
            Some(DType::F32),
            Some(vec![2, 0, 1]),
            vec![1.0, 2.0],
            vec![1.0, 1.0],
        );
        let x = images(&[(2, 2)], 3, 1);
        assert_eq!(
            apply(&chain, &x).unwrap_err(),
            unfused(&chain, &x).unwrap_err()
        );
    }

    proptest! {
        /// Any permutation, cast or not, one mean or one per channel: the fused op gives the
        /// chain's bits (the direct path where it applies, the composed one elsewhere).
        #[test]
        fn fused_is_bit_equal_to_unfused(
            h in 1usize..9, w in 1usize..9, c in 1usize..5, seed in any::<u32>(),
            perm in prop::sample::select(vec![vec![2, 0, 1], vec![0, 1, 2], vec![1, 0, 2]]),
            transpose in any::<bool>(), per_channel in any::<bool>(), from_f32 in any::<bool>(),
        ) {
            let x = images(&[(h, w), (w, h)], c, seed);
            let x = if from_f32 { super::super::cast(&x, DType::F32).unwrap() } else { x };
            let first = if transpose { x.row_shape(0)[perm[0]] } else { h };
            let n = if per_channel { first } else { 1 };
            let mean: Vec<f32> = (0..n).map(|i| 100.0 + i as f32 * 7.3).collect();
            let std: Vec<f32> = (0..n).map(|i| 58.1 - i as f32 * 3.1).collect();
            let chain = op(Some(DType::F32), transpose.then_some(perm), mean, std);
            match (apply(&chain, &x), unfused(&chain, &x)) {
                (Ok(a), Ok(b)) => prop_assert_eq!(bits(&a), bits(&b)),
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (a, b) => prop_assert!(false, "fused {:?} vs unfused {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }
}
