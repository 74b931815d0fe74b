//! `crop`, `pad` and `slice`: each output element is one input element (or, padding, the pad
//! value), so the three are one routine over a per-dimension map.
//!
//! Along each dimension, output index `i` reads input index `offset + i × step` while
//! `i < kept`, and the pad value from `kept` to the output's length. A crop keeps a contiguous
//! window, a slice a strided one, a pad everything and then fills. The row's elements are then
//! picked in output order, so every dtype but bytes (refused by validation) moves unchanged. A
//! crop and a slice never produce more elements than they read; a pad's output per request is
//! bounded by [`MAX_PAD_ELEMENTS`]. Semantics are documented on the spec types in
//! `weir_engine::spec`.

use weir_engine::batch::TensorColumn;
use weir_engine::spec::MAX_PAD_ELEMENTS;
use weir_engine::stateful::constant_data;
use weir_engine::tensor::{element_count, TensorData};
use weir_engine::validate::WindowOp;

use super::gather;

/// What one output dimension reads of its input dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Axis {
    /// The input index output index 0 reads.
    offset: usize,
    /// Input indices between consecutive output indices.
    step: usize,
    /// Output indices that read the input; the rest are padding.
    kept: usize,
    /// The output dimension's length.
    len: usize,
}

impl Axis {
    fn whole(n: usize) -> Axis {
        Axis {
            offset: 0,
            step: 1,
            kept: n,
            len: n,
        }
    }
}

/// Row by row: the window `op` describes of each row.
///
/// # Errors
/// A message naming the row when its shape cannot give the window (smaller than a crop, larger
/// than a pad's target, of another rank), or a pad's output would exceed its bound.
pub fn apply(op: &WindowOp, input: &TensorColumn) -> Result<TensorColumn, String> {
    let fill = match op {
        WindowOp::Pad { value, .. } => Some(constant_data(input.dtype(), *value)?),
        _ => None,
    };
    let mut shapes = Vec::with_capacity(input.len());
    let mut data = TensorData::empty(input.dtype());
    for r in 0..input.len() {
        let shape = input.row_shape(r);
        let axes = axes(op, &shape).map_err(|e| format!("row {r}: {e}"))?;
        let out_shape: Vec<usize> = axes.iter().map(|a| a.len).collect();
        let n = element_count(&out_shape).ok_or_else(|| format!("row {r}: output too large"))?;
        if fill.is_some() && n > MAX_PAD_ELEMENTS {
            return Err(format!(
                "row {r}: padding {shape:?} to {out_shape:?} makes more than {MAX_PAD_ELEMENTS} elements"
            ));
        }
        let mut src = input
            .data_range(input.row_range(r))
            .ok_or_else(|| format!("row {r} without its elements"))?;
        let pad_index = src.len();
        if let Some(fill) = &fill {
            src.extend(fill.clone()).map_err(|e| e.to_string())?;
        }
        let order = order(&axes, &shape, pad_index, n);
        data.extend(gather(&src, &order))
            .map_err(|e| e.to_string())?;
        shapes.push(out_shape);
    }
    TensorColumn::from_shapes("output", shapes, data).map_err(|e| e.to_string())
}

/// What each output dimension reads of a row of `shape`, or why the row cannot give the window.
fn axes(op: &WindowOp, shape: &[usize]) -> Result<Vec<Axis>, String> {
    let mut axes: Vec<Axis> = shape.iter().map(|&n| Axis::whole(n)).collect();
    match op {
        WindowOp::Crop { height, width, .. } => {
            let [h, w, ..] = shape[..] else {
                return Err(format!("shape {shape:?} has no height and width"));
            };
            let (top, left) = op.crop_origin(h, w).ok_or_else(|| {
                format!("a {h}×{w} input is too small for the {height}×{width} window")
            })?;
            for (axis, (offset, len)) in [(top, *height), (left, *width)].into_iter().enumerate() {
                axes[axis] = Axis {
                    offset,
                    step: 1,
                    kept: len,
                    len,
                };
            }
        }
        WindowOp::Pad { shape: target, .. } => {
            if target.len() != shape.len() {
                return Err(format!("shape {shape:?} is not of rank {}", target.len()));
            }
            for (axis, (&n, t)) in shape.iter().zip(target).enumerate() {
                let len = t.unwrap_or(n);
                if n > len {
                    return Err(format!(
                        "shape {shape:?} is larger than the target {len} along dimension {axis}"
                    ));
                }
                axes[axis].len = len;
            }
        }
        WindowOp::Slice {
            axis,
            start,
            end,
            step,
        } => {
            let n = *shape
                .get(*axis)
                .ok_or_else(|| format!("shape {shape:?} has no dimension {axis}"))?;
            let (offset, count) = WindowOp::slice_range(*start, *end, *step, n);
            axes[*axis] = Axis {
                offset,
                step: *step,
                kept: count,
                len: count,
            };
        }
    }
    Ok(axes)
}

/// For each of the `n` output elements (row-major), the input element it reads in a row of
/// `shape`, or `pad_index` when it is padding.
fn order(axes: &[Axis], shape: &[usize], pad_index: usize, n: usize) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let mut index = vec![0usize; axes.len()];
    let mut order = Vec::with_capacity(n);
    for _ in 0..n {
        let mut at = 0;
        let mut padding = false;
        for ((a, &i), s) in axes.iter().zip(&index).zip(&strides) {
            padding |= i >= a.kept;
            at += (a.offset + i * a.step) * s;
        }
        order.push(if padding { pad_index } else { at });
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < axes[d].len {
                break;
            }
            index[d] = 0;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(shape: Vec<usize>, data: TensorData) -> TensorColumn {
        TensorColumn::from_data("x", shape, 1, data).unwrap()
    }

    #[test]
    fn a_pad_fills_the_end_of_each_dimension() {
        let x = column(vec![2, 2], TensorData::U8(vec![1, 2, 3, 4]));
        let op = WindowOp::Pad {
            shape: vec![Some(3), None],
            value: 9.0,
        };
        let out = apply(&op, &x).unwrap();
        assert_eq!(out.row_shape(0), vec![3, 2]);
        assert_eq!(out.data(), TensorData::U8(vec![1, 2, 3, 4, 9, 9]));
    }

    #[test]
    fn a_crop_too_large_for_the_row_is_refused() {
        let x = column(vec![2, 2], TensorData::Bool(vec![true; 4]));
        let op = WindowOp::Crop {
            top: 1,
            left: 0,
            height: 2,
            width: 1,
            center: false,
        };
        let err = apply(&op, &x).unwrap_err();
        assert!(err.contains("too small"), "{err}");
    }

    #[test]
    fn a_pad_beyond_its_bound_is_refused_before_it_is_built() {
        // The target's fixed part is small, but the kept dimension makes the output too large.
        let wide = MAX_PAD_ELEMENTS / 2 + 1;
        let x = column(vec![1, wide], TensorData::U8(vec![0; wide]));
        let op = WindowOp::Pad {
            shape: vec![Some(2), None],
            value: 0.0,
        };
        let err = apply(&op, &x).unwrap_err();
        assert!(err.contains("more than"), "{err}");
    }
}
