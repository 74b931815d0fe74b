//! Tensor-op nodes: normalize, argmax, top-k and concat, computed column-wise on the worker.
//!
//! These are cheap (microseconds per batch), so they run inline in their operator rather than on an
//! executor. The pure functions here take and return whole columns; [`operator`] is the timely glue.
//! Semantics are those documented on the spec types in `weir_engine::spec`.

pub mod operator;

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;
use weir_engine::validate::{NodeKind, TensorOp as PlannedOp};

/// A tensor op as planned ([`PlannedOp`], which validation checked), with the code that computes it.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorOp(pub PlannedOp);

impl TensorOp {
    /// The op for a planned node kind, or `None` for a model.
    pub fn from_kind(kind: &NodeKind) -> Option<TensorOp> {
        match kind {
            NodeKind::Model(_) => None,
            NodeKind::Op(op) => Some(TensorOp(op.clone())),
        }
    }

    /// Applies the op to `inputs` (in the node's port order); returns the output columns in the
    /// node's output order.
    ///
    /// # Errors
    /// A message when the data does not fit the op (validation prevents this for typed graphs).
    pub fn apply(&self, inputs: &[&TensorColumn]) -> Result<Vec<TensorColumn>, String> {
        let first = *inputs.first().ok_or("no input")?;
        let rows = first.len();
        fn f32s(c: &TensorColumn) -> Result<&[f32], String> {
            c.f32_values()
                .ok_or_else(|| format!("expected f32, got {}", c.dtype()))
        }
        let n = first.row_len().ok_or_else(|| shapes_differ(first))?;
        match &self.0 {
            PlannedOp::Normalize { mean, std } => {
                let x = f32s(first)?;
                let channels = mean.len().max(std.len());
                let per_channel = if channels > 1 { n / channels } else { n.max(1) };
                let pick = |v: &[f32], c: usize| if v.len() == 1 { v[0] } else { v[c] };
                let out: Vec<f32> = x
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| {
                        let c =
                            ((i % n.max(1)) / per_channel.max(1)).min(channels.saturating_sub(1));
                        (v - pick(mean, c)) / pick(std, c)
                    })
                    .collect();
                Ok(vec![column(
                    "output",
                    first.row_shape(0),
                    rows,
                    TensorData::F32(out),
                )?])
            }
            PlannedOp::Argmax => {
                let x = f32s(first)?;
                let out = (0..rows)
                    .map(|r| top_indices(&x[r * n..(r + 1) * n], 1)[0] as i64)
                    .collect();
                Ok(vec![column("index", vec![1], rows, TensorData::I64(out))?])
            }
            PlannedOp::TopK { k } => {
                let x = f32s(first)?;
                if *k > n {
                    return Err(format!("k = {k} but the tensor has {n} elements"));
                }
                let mut values = Vec::with_capacity(rows * k);
                let mut indices = Vec::with_capacity(rows * k);
                for r in 0..rows {
                    let row = &x[r * n..(r + 1) * n];
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
        }
    }
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

/// The refusal of a column whose rows have shapes of their own: tensor ops work on one shape per
/// column.
fn shapes_differ(c: &TensorColumn) -> String {
    format!(
        "rows of one batch have different {} shapes; this op needs one shape per batch",
        c.dtype()
    )
}

fn concat(inputs: &[&TensorColumn], axis: usize) -> Result<Vec<TensorColumn>, String> {
    let first = inputs[0];
    let rows = first.len();
    let shapes: Vec<&[usize]> = inputs
        .iter()
        .map(|c| c.uniform_shape().ok_or_else(|| shapes_differ(c)))
        .collect::<Result<_, _>>()?;
    let outer: usize = shapes[0][..axis].iter().product();
    let inner: Vec<usize> = shapes.iter().map(|s| s[axis..].iter().product()).collect();
    let mut shape = shapes[0].to_vec();
    shape[axis] = shapes.iter().map(|s| s[axis]).sum();
    let parts: Vec<TensorData> = inputs.iter().map(|c| c.data()).collect();
    let mut data = TensorData::empty(first.dtype());
    for r in 0..rows {
        for o in 0..outer {
            for (part, &l) in parts.iter().zip(&inner) {
                let start = r * l * outer + o * l;
                data.extend(part.slice(start..start + l))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(vec![column("output", shape, rows, data)?])
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
