//! The check of a remote executor's reply against the node it answers for: each output column
//! with the node's element type, one row per row sent, and rows of the shape the model file
//! declares where its dimensions are fixed. A reply is hostile until it passes: a mismatch is
//! the job's error, never a panic or a wrong answer, and what an executor says is cut to a
//! bounded length before it reaches an error document.

use weir_engine::batch::TensorColumn;
use weir_engine::onnx::read_metadata;
use weir_engine::tensor::{DType, Dim};
use weir_operators::model::ExecutorConfig;

/// What a reply's column must be: name, element type, per-row dimensions (`None` when unknown).
#[derive(Debug, Clone)]
pub(crate) struct OutputCheck {
    pub(crate) name: String,
    dtype: DType,
    row_dims: Option<Vec<Dim>>,
}

/// The node's outputs, with per-row dimensions from the model file where it can be read (the
/// dimensions after the batch one, or all of them for a model called without one).
pub(crate) fn output_checks(config: &ExecutorConfig) -> Vec<OutputCheck> {
    let meta = read_metadata(&config.path).ok();
    config
        .outputs
        .iter()
        .map(|(name, dtype)| OutputCheck {
            name: name.clone(),
            dtype: *dtype,
            row_dims: meta
                .as_ref()
                .and_then(|m| m.outputs.iter().find(|o| &o.name == name))
                .filter(|o| !o.dims.is_empty() || !config.call.has_batch_dim())
                .map(|o| o.request_dims(config.call.has_batch_dim()).to_vec()),
        })
        .collect()
}

/// Checks reply columns (already in output order) against `checks` and the rows sent.
pub(crate) fn check_columns(
    columns: &[TensorColumn],
    checks: &[OutputCheck],
    rows: usize,
) -> Result<(), String> {
    for (column, check) in columns.iter().zip(checks) {
        let name = &check.name;
        if column.dtype() != check.dtype {
            return Err(format!(
                "output `{name}` as {} (the model's is {})",
                column.dtype(),
                check.dtype
            ));
        }
        if column.len() != rows {
            return Err(format!(
                "output `{name}` with {} rows for {rows} sent",
                column.len()
            ));
        }
        if let Some(dims) = &check.row_dims {
            let fits_row = |shape: &[usize]| {
                dims.len() == shape.len()
                    && dims.iter().zip(shape).all(|(d, &n)| match d {
                        Dim::Fixed(f) => *f == n,
                        Dim::Dynamic => true,
                    })
            };
            let misfit = match column.uniform_shape() {
                Some(shape) => (!fits_row(shape)).then(|| shape.to_vec()),
                None => (0..column.len())
                    .map(|r| column.row_shape(r))
                    .find(|s| !fits_row(s)),
            };
            if let Some(shape) = misfit {
                let shown: Vec<usize> = shape.iter().take(8).copied().collect();
                return Err(format!(
                    "output `{name}` with rows of shape {shown:?} (the model's are {dims:?})"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_engine::tensor::TensorData;

    fn column(shape: Vec<usize>, rows: usize) -> TensorColumn {
        let n = shape.iter().product::<usize>() * rows;
        TensorColumn::from_data("y", shape, rows, TensorData::F32(vec![0.0; n])).unwrap()
    }

    fn check(row_dims: Option<Vec<Dim>>) -> Vec<OutputCheck> {
        vec![OutputCheck {
            name: "y".into(),
            dtype: DType::F32,
            row_dims,
        }]
    }

    #[test]
    fn replies_fitting_the_outputs_pass() {
        let dims = Some(vec![Dim::Fixed(3), Dim::Dynamic]);
        assert_eq!(
            check_columns(&[column(vec![3, 5], 2)], &check(dims), 2),
            Ok(())
        );
        assert_eq!(
            check_columns(&[column(vec![7], 2)], &check(None), 2),
            Ok(())
        );
    }

    #[test]
    fn wrong_rows_shape_or_type_is_the_jobs_error_naming_the_output() {
        let dims = Some(vec![Dim::Fixed(3)]);
        let e = check_columns(&[column(vec![3], 1)], &check(dims.clone()), 2).unwrap_err();
        assert!(e.contains("`y`") && e.contains("1 rows for 2"), "{e}");
        let e = check_columns(&[column(vec![4], 2)], &check(dims.clone()), 2).unwrap_err();
        assert!(e.contains("`y`") && e.contains("[4]"), "{e}");
        let e = check_columns(&[column(vec![3, 1], 2)], &check(dims), 2).unwrap_err();
        assert!(e.contains("`y`"), "{e}");
        let ints = TensorColumn::from_data("y", vec![1], 2, TensorData::I64(vec![1, 2])).unwrap();
        let e = check_columns(&[ints], &check(None), 2).unwrap_err();
        assert!(e.contains("`y`") && e.contains("i64"), "{e}");
    }
}
