//! Tensor-op nodes: normalize, argmax, top-k, concat and reshape, computed column-wise on the worker (the
//! image ops and fused pre-processing chains are dispatched from here to [`crate::image`]).
//!
//! These are cheap (microseconds per batch), so they run inline in their operator rather than on an
//! executor. The pure functions here take and return whole columns, computing each row on its own
//! shape (rows of a free dimension may differ); [`operator`] is the timely glue.
//! Semantics are those documented on the spec types in `weir_engine::spec`.

pub mod operator;

use weir_engine::batch::TensorColumn;
use weir_engine::plan::NodeKind;
use weir_engine::tensor::TensorData;
use weir_engine::validate::{ReshapeOp, TensorOp as PlannedOp};

use crate::column::shaped_like;
use crate::image;

/// A tensor op as planned ([`PlannedOp`], which validation checked), with the code that computes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorOp(pub PlannedOp);

impl TensorOp {
    /// The op for a planned node kind, or `None` for a model or a gather (which the compiler builds).
    pub fn from_kind(kind: &NodeKind) -> Option<TensorOp> {
        match kind {
            NodeKind::Model(_) | NodeKind::Gather(_) => None,
            NodeKind::Op(op) => Some(TensorOp(op.clone())),
        }
    }

    /// Whether a refusal is the request's fault (a text the tokenizer will not take, an image
    /// that cannot be decoded), so the
    /// client hears an invalid request rather than a node failure.
    pub fn blames_request(&self) -> bool {
        match &self.0 {
            PlannedOp::Text(op) => crate::text::blames_request(op),
            // Decoding reads only the client's bytes: a corrupt, oversized or foreign image.
            PlannedOp::DecodeImage { .. } => true,
            // Boxes a client sent that do not fit (scores of another count, a wrong shape).
            PlannedOp::CropBoxes(c) => c.client_boxes,
            // A request too small for a crop or too large for a pad: its tensor's shape.
            PlannedOp::Window(_) => true,
            // A request whose element count the new shape cannot hold.
            PlannedOp::Reshape(_) => true,
            _ => false,
        }
    }

    /// The input (port index) a refusal the request is blamed for names: the boxes of
    /// `crop_boxes`, the only input of every other op.
    pub fn blamed_input(&self) -> usize {
        match &self.0 {
            PlannedOp::CropBoxes(_) => 1,
            _ => 0,
        }
    }

    /// Applies the op to `inputs` (in the node's port order); returns the output columns in the
    /// node's output order. Each row is computed on its own shape, so columns whose rows have
    /// shapes of their own (free dimensions) work as uniform ones do.
    ///
    /// # Errors
    /// A message when the data does not fit the op: validation prevents this for fixed shapes;
    /// along free dimensions it is found here (a row with fewer than `k` elements, a row whose
    /// channels are not the op's, rows that cannot be concatenated).
    pub fn apply(&self, inputs: &[&TensorColumn]) -> Result<Vec<TensorColumn>, String> {
        let first = *inputs.first().ok_or("no input")?;
        let rows = first.len();
        fn f32s(c: &TensorColumn) -> Result<&[f32], String> {
            c.f32_values()
                .ok_or_else(|| format!("expected f32, got {}", c.dtype()))
        }
        match &self.0 {
            PlannedOp::Normalize { mean, std } => Ok(vec![normalize(first, mean, std)?]),
            PlannedOp::Preprocess(op) => Ok(vec![image::preprocess::apply(op, first)?]),
            PlannedOp::Argmax => {
                let x = f32s(first)?;
                let out = (0..rows)
                    .map(|r| {
                        let row = &x[first.row_range(r)];
                        top_indices(row, 1)
                            .first()
                            .map(|&i| i as i64)
                            .ok_or_else(|| format!("row {r} has no elements"))
                    })
                    .collect::<Result<_, _>>()?;
                Ok(vec![column("index", vec![1], rows, TensorData::I64(out))?])
            }
            PlannedOp::TopK { k } => {
                let x = f32s(first)?;
                let mut values = Vec::with_capacity(rows * k);
                let mut indices = Vec::with_capacity(rows * k);
                for r in 0..rows {
                    let row = &x[first.row_range(r)];
                    if *k > row.len() {
                        return Err(format!("k = {k} but row {r} has {} elements", row.len()));
                    }
                    for i in top_indices(row, *k) {
                        values.push(row[i]);
                        indices.push(i as i64);
                    }
                }
                Ok(vec![
                    column("values", vec![*k], rows, TensorData::F32(values))?,
                    column("indices", vec![*k], rows, TensorData::I64(indices))?,
                ])
            }
            PlannedOp::Concat { axis } => concat(inputs, *axis),
            PlannedOp::DecodeImage { max_pixels, draft } => {
                Ok(vec![image::decode(first, *max_pixels, *draft)?])
            }
            PlannedOp::Resize {
                height,
                width,
                interpolation,
            } => Ok(vec![image::resize(first, *height, *width, *interpolation)?]),
            PlannedOp::Cast { to } => Ok(vec![image::cast(first, *to)?]),
            PlannedOp::Transpose { perm } => Ok(vec![image::transpose(first, perm)?]),
            PlannedOp::Text(op) => crate::text::apply(op, first),
            PlannedOp::CropBoxes(op) => image::crop_boxes::apply(op, inputs),
            PlannedOp::Regions(op) => image::regions::apply(op, first),
            PlannedOp::Window(op) => Ok(vec![image::window::apply(op, first)?]),
            PlannedOp::Reshape(op) => Ok(vec![reshape(op, first)?]),
        }
    }
}

/// Row by row: `(x - mean) / std`, with one mean and std per channel (the first dimension) or
/// one for every element.
pub(crate) fn normalize(
    first: &TensorColumn,
    mean: &[f32],
    std: &[f32],
) -> Result<TensorColumn, String> {
    let x = first
        .f32_values()
        .ok_or_else(|| format!("expected f32, got {}", first.dtype()))?;
    let channels = mean.len().max(std.len());
    let pick = |v: &[f32], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    let mut out = Vec::with_capacity(x.len());
    for r in 0..first.len() {
        let row = &x[first.row_range(r)];
        let n = row.len();
        if channels > 1 && first.row_shape(r).first() != Some(&channels) {
            return Err(format!(
                "row {r} has shape {:?}, but the op has {channels} channels (the first dimension)",
                first.row_shape(r)
            ));
        }
        let per_channel = if channels > 1 { n / channels } else { n.max(1) };
        for (c, chunk) in row.chunks(per_channel.max(1)).enumerate() {
            let c = c.min(channels.saturating_sub(1));
            let (m, s) = (pick(mean, c), pick(std, c));
            out.extend(chunk.iter().map(|&v| (v - m) / s));
        }
    }
    shaped_like(first, "output", TensorData::F32(out))
}

/// Row by row: the row's elements, untouched, under the shape `op` gives its element count.
fn reshape(op: &ReshapeOp, first: &TensorColumn) -> Result<TensorColumn, String> {
    let shapes = (0..first.len())
        .map(|r| {
            op.row_shape(first.row_range(r).len())
                .map_err(|e| format!("row {r} (shape {:?}): {e}", first.row_shape(r)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    TensorColumn::from_shapes("output", shapes, first.data()).map_err(|e| e.to_string())
}

fn column(
    name: &str,
    shape: Vec<usize>,
    rows: usize,
    data: TensorData,
) -> Result<TensorColumn, String> {
    TensorColumn::from_data(name, shape, rows, data).map_err(|e| e.to_string())
}

/// Indices of the `k` largest values, largest first; ties go to the lower index.
fn top_indices(row: &[f32], k: usize) -> Vec<usize> {
    let order = |a: &usize, b: &usize| row[*b].total_cmp(&row[*a]).then(a.cmp(b));
    let mut idx: Vec<usize> = (0..row.len()).collect();
    if k < idx.len() {
        idx.select_nth_unstable_by(k, order);
        idx.truncate(k);
    }
    idx.sort_unstable_by(order);
    idx
}

/// Row by row: each row's inputs joined along `axis`, every other dimension agreeing.
fn concat(inputs: &[&TensorColumn], axis: usize) -> Result<Vec<TensorColumn>, String> {
    let first = inputs[0];
    let mut rows = Vec::with_capacity(first.len());
    for r in 0..first.len() {
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|c| c.row_shape(r)).collect();
        let fits = shapes.iter().all(|s| {
            s.len() == shapes[0].len()
                && axis < s.len()
                && s.iter()
                    .zip(&shapes[0])
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b)
        });
        if !fits {
            return Err(format!(
                "row {r}: cannot concat shapes {shapes:?} along axis {axis}"
            ));
        }
        let outer: usize = shapes[0][..axis].iter().product();
        let inner: Vec<usize> = shapes.iter().map(|s| s[axis..].iter().product()).collect();
        let parts: Vec<TensorData> = inputs
            .iter()
            .map(|c| {
                c.data_range(c.row_range(r))
                    .ok_or_else(|| format!("row {r} without its elements"))
            })
            .collect::<Result<_, _>>()?;
        let mut data = TensorData::empty(first.dtype());
        for o in 0..outer {
            for (part, &l) in parts.iter().zip(&inner) {
                data.extend(part.slice(o * l..(o + 1) * l))
                    .map_err(|e| e.to_string())?;
            }
        }
        let mut shape = shapes[0].clone();
        shape[axis] = shapes.iter().map(|s| s[axis]).sum();
        rows.push(weir_engine::tensor::Tensor { shape, data });
    }
    let refs: Vec<&weir_engine::tensor::Tensor> = rows.iter().collect();
    let output =
        TensorColumn::from_rows("output", first.dtype(), &refs).map_err(|e| e.to_string())?;
    Ok(vec![output])
}

/// Compares two `f32` slices for the tests' tolerance checks.
#[cfg(test)]
fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-6 || x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_col(shape: Vec<usize>, rows: usize, v: Vec<f32>) -> TensorColumn {
        TensorColumn::from_data("x", shape, rows, TensorData::F32(v)).unwrap()
    }

    #[test]
    fn top_k_orders_by_value_then_index() {
        let c = f32_col(
            vec![5],
            2,
            vec![0.1, 0.9, 0.5, 0.9, 0.0, 3.0, 2.0, 1.0, 0.0, -1.0],
        );
        let out = TensorOp(PlannedOp::TopK { k: 3 }).apply(&[&c]).unwrap();
        assert_eq!(out[1].i64_values().unwrap(), &[1, 3, 2, 0, 1, 2]);
        assert!(close(
            out[0].f32_values().unwrap(),
            &[0.9, 0.9, 0.5, 3.0, 2.0, 1.0]
        ));
    }

    #[test]
    fn argmax_per_row() {
        let c = f32_col(vec![3, 1, 1], 2, vec![1.0, 5.0, 2.0, 7.0, 0.0, 7.0]);
        let out = TensorOp(PlannedOp::Argmax).apply(&[&c]).unwrap();
        assert_eq!(out[0].i64_values().unwrap(), &[1, 0]);
    }

    #[test]
    fn rows_of_their_own_lengths_are_computed_each_on_its_own() {
        let x = TensorColumn::from_ragged(
            "x",
            vec![vec![2], vec![4]],
            TensorData::F32(vec![1.0, 0.5, 0.0, 3.0, 9.0, -1.0]),
        )
        .unwrap();
        let argmax = TensorOp(PlannedOp::Argmax).apply(&[&x]).unwrap();
        assert_eq!(argmax[0].i64_values().unwrap(), &[0, 2]);
        let top = TensorOp(PlannedOp::TopK { k: 2 }).apply(&[&x]).unwrap();
        assert_eq!(top[1].i64_values().unwrap(), &[0, 1, 2, 1]);
        let e = TensorOp(PlannedOp::TopK { k: 3 }).apply(&[&x]).unwrap_err();
        assert!(e.contains("row 0 has 2 elements"), "{e}");
        let joined = TensorOp(PlannedOp::Concat { axis: 0 })
            .apply(&[&x, &x])
            .unwrap();
        assert_eq!(joined[0].row_shape(0), vec![4]);
        assert_eq!(joined[0].row_shape(1), vec![8]);
        let normal = TensorOp(PlannedOp::Normalize {
            mean: vec![1.0],
            std: vec![2.0],
        })
        .apply(&[&x])
        .unwrap();
        assert_eq!(normal[0].row_shape(1), vec![4]);
        assert!(close(
            normal[0].f32_values().unwrap(),
            &[0.0, -0.25, -0.5, 1.0, 4.0, -1.0]
        ));
    }

    #[test]
    fn normalize_per_channel() {
        let c = f32_col(vec![2, 2], 1, vec![1.0, 3.0, 10.0, 20.0]);
        let op = TensorOp(PlannedOp::Normalize {
            mean: vec![1.0, 10.0],
            std: vec![2.0, 10.0],
        });
        let out = op.apply(&[&c]).unwrap();
        assert!(close(out[0].f32_values().unwrap(), &[0.0, 1.0, 0.0, 1.0]));
    }

    #[test]
    fn concat_along_last_and_first_axis() {
        let cases = [
            (
                1,
                f32_col(vec![2, 1], 1, vec![1.0, 2.0]),
                f32_col(vec![2, 2], 1, vec![3.0, 4.0, 5.0, 6.0]),
                [2, 3],
                vec![1.0, 3.0, 4.0, 2.0, 5.0, 6.0],
            ),
            (
                0,
                f32_col(vec![1, 2], 2, vec![1.0, 2.0, 3.0, 4.0]),
                f32_col(vec![1, 2], 2, vec![5.0, 6.0, 7.0, 8.0]),
                [2, 2],
                vec![1.0, 2.0, 5.0, 6.0, 3.0, 4.0, 7.0, 8.0],
            ),
        ];
        for (axis, a, b, shape, expected) in cases {
            let out = TensorOp(PlannedOp::Concat { axis })
                .apply(&[&a, &b])
                .unwrap();
            assert_eq!(out[0].uniform_shape(), Some(&shape[..]), "axis {axis}");
            assert!(
                close(out[0].f32_values().unwrap(), &expected),
                "axis {axis}"
            );
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    fn column(rows: usize, width: usize, values: &[f32]) -> TensorColumn {
        TensorColumn::from_data(
            "x",
            vec![width],
            rows,
            TensorData::F32(values[..rows * width].to_vec()),
        )
        .unwrap()
    }

    proptest! {
        /// top_k agrees with a full sort (value descending, index ascending) on every row.
        #[test]
        fn top_k_matches_a_full_sort(rows in 1usize..4, width in 1usize..40, k_frac in 0.0f64..1.0, values in proptest::collection::vec(-5i8..5, 160)) {
            let values: Vec<f32> = values.iter().map(|&v| f32::from(v) / 2.0).collect();
            let k = ((width as f64 * k_frac) as usize).clamp(1, width);
            let c = column(rows, width, &values);
            let out = TensorOp(PlannedOp::TopK { k }).apply(&[&c]).unwrap();
            let indices = out[1].i64_values().unwrap();
            for r in 0..rows {
                let row = &values[r * width..(r + 1) * width];
                let mut order: Vec<usize> = (0..width).collect();
                order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
                let want: Vec<i64> = order[..k].iter().map(|&i| i as i64).collect();
                prop_assert_eq!(&indices[r * k..(r + 1) * k], &want[..]);
            }
        }

        /// Concatenating then cutting along the axis gives the inputs back.
        #[test]
        fn concat_then_split_is_identity(rows in 1usize..3, outer in 1usize..4, left in 1usize..4, right in 1usize..4, seed in any::<u32>()) {
            let make = |inner: usize, salt: u32| {
                let n = rows * outer * inner;
                let v: Vec<f32> = (0..n).map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed ^ salt) as f32).collect();
                (TensorColumn::from_data("x", vec![outer, inner], rows, TensorData::F32(v.clone())).unwrap(), v)
            };
            let (a, av) = make(left, 1);
            let (b, bv) = make(right, 2);
            let out = TensorOp(PlannedOp::Concat { axis: 1 }).apply(&[&a, &b]).unwrap();
            prop_assert_eq!(out[0].uniform_shape(), Some(&[outer, left + right][..]));
            let joined = out[0].f32_values().unwrap();
            for r in 0..rows {
                for o in 0..outer {
                    let base = (r * outer + o) * (left + right);
                    prop_assert_eq!(&joined[base..base + left], &av[(r * outer + o) * left..(r * outer + o + 1) * left]);
                    prop_assert_eq!(&joined[base + left..base + left + right], &bv[(r * outer + o) * right..(r * outer + o + 1) * right]);
                }
            }
        }
    }
}
