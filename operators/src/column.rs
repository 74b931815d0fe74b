//! Output columns shaped like an input column: what the inline ops (tensor, text and image) write
//! when each output row has its input row's shape, uniform or ragged alike.

use weir_engine::batch::TensorColumn;
use weir_engine::tensor::TensorData;

/// A column of `data` whose rows have the shapes of `like`'s rows.
///
/// # Errors
/// A message when `data` does not hold exactly the elements those shapes need.
pub(crate) fn shaped_like(
    like: &TensorColumn,
    name: &str,
    data: TensorData,
) -> Result<TensorColumn, String> {
    let made = match like.uniform_shape() {
        Some(shape) => TensorColumn::from_data(name, shape.to_vec(), like.len(), data),
        None => {
            let shapes = (0..like.len()).map(|r| like.row_shape(r)).collect();
            TensorColumn::from_ragged(name, shapes, data)
        }
    };
    made.map_err(|e| e.to_string())
}
