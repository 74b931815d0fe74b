//! The unit of data in a weir dataflow: a batch of requests as Arrow columns.
//!
//! A [`Batch`] holds one row per request: the `request_id` column, the `lineage` column (see
//! [`crate::lineage`]), the `parameters` column and one [`TensorColumn`] per tensor (its layouts
//! are [`mod@column`]'s, its element storage [`storage`]'s). Column names are the graph's tensor
//! names: a graph input's name, or `node.tensor` for a node's output.
//!
//! The typed form keeps the two fixed columns apart so operators never look them up by name;
//! [`Batch::to_record_batch`] gives the plain `RecordBatch` (for Arrow IPC on the wire) and
//! [`Batch::try_from_record_batch`] reads one back.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, ListArray, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::lineage::lineage_data_type;

mod column;
mod storage;

pub use column::{TensorColumn, DTYPE_METADATA_KEY, SHAPE_METADATA_KEY};
pub use storage::NativeElement;

/// Name of the request id column.
pub const REQUEST_ID: &str = "request_id";
/// Name of the lineage column.
pub const LINEAGE: &str = "lineage";
/// Name of the request parameters column: per request, the client's parameters as JSON object text
/// (null when none were sent). The engine carries it untouched through every hop; stages that act
/// on per-request requirements (a latency SLO, a minimum accuracy) read it.
pub const PARAMETERS: &str = "parameters";

/// Errors building or reading batches.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// An Arrow operation failed.
    #[error("arrow: {0}")]
    Arrow(#[from] ArrowError),
    /// A column was not what a weir batch holds.
    #[error("column `{column}`: {problem}")]
    BadColumn {
        /// The column.
        column: String,
        /// What is wrong with it.
        problem: String,
    },
    /// Element count does not match shape × rows.
    #[error("tensor `{column}`: {elements} elements do not fill {rows} rows of shape {shape:?}")]
    Length {
        /// The column.
        column: String,
        /// Elements given.
        elements: usize,
        /// Rows expected.
        rows: usize,
        /// Per-row shape.
        shape: Vec<usize>,
    },
}

/// A batch of requests flowing between operators.
#[derive(Debug, Clone)]
pub struct Batch {
    request_ids: UInt64Array,
    lineage: ListArray,
    parameters: StringArray,
    tensors: Vec<(Arc<str>, TensorColumn)>,
}

impl Batch {
    /// A batch from its columns.
    ///
    /// # Errors
    /// When the columns do not all have the same number of rows.
    pub fn new(
        request_ids: UInt64Array,
        lineage: ListArray,
        tensors: Vec<(Arc<str>, TensorColumn)>,
    ) -> Result<Self, BatchError> {
        let rows = request_ids.len();
        if lineage.len() != rows {
            return Err(BatchError::BadColumn {
                column: LINEAGE.into(),
                problem: format!("{} rows, request ids have {rows}", lineage.len()),
            });
        }
        for (name, col) in &tensors {
            if col.len() != rows {
                return Err(BatchError::BadColumn {
                    column: name.to_string(),
                    problem: format!("{} rows, request ids have {rows}", col.len()),
                });
            }
        }
        Ok(Batch {
            parameters: StringArray::new_null(rows),
            request_ids,
            lineage,
            tensors,
        })
    }

    /// The same batch with `parameters` as its parameters column.
    ///
    /// # Errors
    /// When `parameters` does not have one entry per row.
    pub fn with_parameters(mut self, parameters: StringArray) -> Result<Self, BatchError> {
        if parameters.len() != self.num_rows() {
            return Err(BatchError::BadColumn {
                column: PARAMETERS.into(),
                problem: format!(
                    "{} rows, request ids have {}",
                    parameters.len(),
                    self.num_rows()
                ),
            });
        }
        self.parameters = parameters;
        Ok(self)
    }

    /// A batch of the same requests (ids and parameters kept) with new lineage and tensors: what an
    /// operator emits after its hop.
    ///
    /// # Errors
    /// When the new columns do not have this batch's number of rows.
    pub fn derive(
        &self,
        lineage: ListArray,
        tensors: Vec<(Arc<str>, TensorColumn)>,
    ) -> Result<Self, BatchError> {
        Batch::new(self.request_ids.clone(), lineage, tensors)?
            .with_parameters(self.parameters.clone())
    }

    /// The same rows under other request ids (a kept output answering a newer attempt).
    ///
    /// # Errors
    /// When `ids` does not have one entry per row.
    pub fn with_request_ids(mut self, ids: UInt64Array) -> Result<Self, BatchError> {
        if ids.len() != self.num_rows() {
            return Err(BatchError::BadColumn {
                column: "request_id".into(),
                problem: format!("{} ids for {} rows", ids.len(), self.num_rows()),
            });
        }
        self.request_ids = ids;
        Ok(self)
    }

    /// The parameters column.
    pub fn parameters(&self) -> &StringArray {
        &self.parameters
    }

    /// Row `row`'s parameters (JSON object text), if the client sent any.
    pub fn row_parameters(&self, row: usize) -> Option<&str> {
        self.parameters
            .is_valid(row)
            .then(|| self.parameters.value(row))
    }

    /// Number of requests.
    pub fn num_rows(&self) -> usize {
        self.request_ids.len()
    }

    /// The request ids, one per row.
    pub fn request_ids(&self) -> &[u64] {
        self.request_ids.values()
    }

    /// The lineage column.
    pub fn lineage(&self) -> &ListArray {
        &self.lineage
    }

    /// The tensor column named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorColumn> {
        self.tensors
            .iter()
            .find(|(n, _)| n.as_ref() == name)
            .map(|(_, c)| c)
    }

    /// All tensor columns with their names.
    pub fn tensors(&self) -> &[(Arc<str>, TensorColumn)] {
        &self.tensors
    }

    /// Rows `offset..offset + len` (no copy).
    pub fn slice(&self, offset: usize, len: usize) -> Batch {
        Batch {
            request_ids: self.request_ids.slice(offset, len),
            lineage: self.lineage.slice(offset, len),
            parameters: self.parameters.slice(offset, len),
            tensors: self
                .tensors
                .iter()
                .map(|(n, c)| (n.clone(), c.slice(offset, len)))
                .collect(),
        }
    }

    /// The rows at `rows`, in that order.
    ///
    /// # Errors
    /// When a row index is out of range.
    pub fn take(&self, rows: &[u32]) -> Result<Batch, BatchError> {
        let indices = arrow_array::UInt32Array::from(rows.to_vec());
        let rb = arrow_select::take::take_record_batch(&self.to_record_batch()?, &indices)?;
        Batch::try_from_record_batch(&rb)
    }

    /// The batch as a plain Arrow `RecordBatch`: `request_id`, `lineage`, `parameters`, then the
    /// tensors.
    ///
    /// # Errors
    /// Only if Arrow rejects the schema, which weir's own batches never cause.
    pub fn to_record_batch(&self) -> Result<RecordBatch, BatchError> {
        let mut fields = vec![
            Field::new(REQUEST_ID, DataType::UInt64, false),
            Field::new(LINEAGE, lineage_data_type(), false),
            Field::new(PARAMETERS, DataType::Utf8, true),
        ];
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.request_ids.clone()),
            Arc::new(self.lineage.clone()),
            Arc::new(self.parameters.clone()),
        ];
        for (name, col) in &self.tensors {
            fields.push(col.field(name));
            columns.push(col.to_arrow());
        }
        Ok(RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            columns,
        )?)
    }

    /// Reads a `RecordBatch` laid out as [`Batch::to_record_batch`] writes it.
    ///
    /// # Errors
    /// When a fixed column is missing or mistyped, or a tensor column lacks its shape.
    pub fn try_from_record_batch(rb: &RecordBatch) -> Result<Self, BatchError> {
        let bad = |column: &str, problem: &str| BatchError::BadColumn {
            column: column.to_string(),
            problem: problem.to_string(),
        };
        let ids = rb
            .column_by_name(REQUEST_ID)
            .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
            .ok_or_else(|| bad(REQUEST_ID, "missing or not u64"))?
            .clone();
        let lineage = rb
            .column_by_name(LINEAGE)
            .and_then(|c| c.as_any().downcast_ref::<ListArray>())
            .ok_or_else(|| bad(LINEAGE, "missing or not a list"))?
            .clone();
        let mut tensors = Vec::new();
        for (field, column) in rb.schema().fields().iter().zip(rb.columns()) {
            if field.name() == REQUEST_ID || field.name() == LINEAGE || field.name() == PARAMETERS {
                continue;
            }
            tensors.push((
                Arc::from(field.name().as_str()),
                TensorColumn::from_arrow(field, column)?,
            ));
        }
        let batch = Batch::new(ids, lineage, tensors)?;
        match rb.column_by_name(PARAMETERS) {
            None => Ok(batch),
            Some(c) => {
                let p = c
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .ok_or_else(|| bad(PARAMETERS, "not utf8"))?;
                batch.with_parameters(p.clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage;
    use crate::tensor::{DType, Tensor, TensorData};
    use half::{bf16, f16};

    fn sample() -> Batch {
        let col = TensorColumn::from_data(
            "x",
            vec![2, 2],
            2,
            TensorData::F32((0..8).map(|v| v as f32).collect()),
        )
        .unwrap();
        Batch::new(
            UInt64Array::from(vec![5, 6]),
            lineage::from_clients(&[5, 6], 0),
            vec![(Arc::from("x"), col)],
        )
        .unwrap()
    }

    #[test]
    fn rows_and_slices_read_back() {
        let b = sample();
        assert_eq!(b.request_ids(), &[5, 6]);
        let row = b.tensor("x").unwrap().row(1);
        assert_eq!(row, Tensor::f32(vec![2, 2], vec![4.0, 5.0, 6.0, 7.0]));
        let s = b.slice(1, 1);
        assert_eq!(s.request_ids(), &[6]);
        assert_eq!(
            s.tensor("x").unwrap().f32_values().unwrap(),
            &[4.0, 5.0, 6.0, 7.0]
        );
    }

    #[test]
    fn record_batch_round_trip_keeps_shapes() {
        let b = sample()
            .with_parameters(StringArray::from(vec![Some("{\"slo_ms\":5}"), None]))
            .unwrap();
        let rb = b.to_record_batch().unwrap();
        assert_eq!(rb.num_columns(), 4);
        let back = Batch::try_from_record_batch(&rb).unwrap();
        assert_eq!(back.row_parameters(0), Some("{\"slo_ms\":5}"));
        assert_eq!(back.row_parameters(1), None);
        assert_eq!(back.tensor("x").unwrap().uniform_shape(), Some(&[2, 2][..]));
        assert_eq!(back.request_ids(), b.request_ids());
    }

    #[test]
    fn wrong_element_count_is_an_error() {
        let err = TensorColumn::from_data("x", vec![3], 2, TensorData::F32(vec![0.0; 5]));
        assert!(matches!(err, Err(BatchError::Length { elements: 5, .. })));
    }

    /// One sample tensor of every element type, with values that tell the types apart.
    fn every_dtype(shape: Vec<usize>) -> Vec<Tensor> {
        let n = crate::tensor::element_count(&shape).unwrap();
        DType::ALL
            .into_iter()
            .map(|dtype| {
                let data = match dtype {
                    DType::Bool => TensorData::Bool((0..n).map(|i| i % 3 == 0).collect()),
                    DType::U8 => TensorData::U8((0..n).map(|i| 250 + i as u8 % 5).collect()),
                    DType::U16 => TensorData::U16((0..n).map(|i| 65_000 + i as u16).collect()),
                    DType::U32 => TensorData::U32((0..n).map(|i| u32::MAX - i as u32).collect()),
                    DType::U64 => TensorData::U64((0..n).map(|i| u64::MAX - i as u64).collect()),
                    DType::I8 => TensorData::I8((0..n).map(|i| -128 + i as i8).collect()),
                    DType::I16 => TensorData::I16((0..n).map(|i| -30_000 - i as i16).collect()),
                    DType::I32 => TensorData::I32((0..n).map(|i| i32::MIN + i as i32).collect()),
                    DType::I64 => TensorData::I64((0..n).map(|i| i64::MIN + i as i64).collect()),
                    DType::F16 => {
                        TensorData::F16((0..n).map(|i| f16::from_f32(i as f32 / 3.0)).collect())
                    }
                    DType::F32 => TensorData::F32((0..n).map(|i| i as f32 / 7.0).collect()),
                    DType::F64 => TensorData::F64((0..n).map(|i| i as f64 / 11.0).collect()),
                    DType::Bf16 => {
                        TensorData::Bf16((0..n).map(|i| bf16::from_f32(-(i as f32))).collect())
                    }
                    DType::Bytes => TensorData::Bytes((0..n).map(|i| vec![b'a'; i]).collect()),
                };
                Tensor {
                    shape: shape.clone(),
                    data,
                }
            })
            .collect()
    }

    /// Every element type survives a batch's trip through Arrow (as the wire and the timely
    /// exchange carry it), in the uniform layout and the ragged one.
    #[test]
    fn every_dtype_round_trips_uniform_and_ragged() {
        let short = every_dtype(vec![2, 1]);
        let long = every_dtype(vec![2, 3]);
        for (a, b) in short.iter().zip(&long) {
            let uniform = TensorColumn::from_rows("t", a.dtype(), &[a, a]).unwrap();
            let ragged = TensorColumn::from_rows("t", a.dtype(), &[a, b, a]).unwrap();
            assert_eq!(uniform.uniform_shape(), Some(&[2, 1][..]), "{}", a.dtype());
            assert_eq!(ragged.uniform_shape(), None, "{}", a.dtype());
            let batch = Batch::new(
                UInt64Array::from(vec![1, 2, 3]),
                lineage::from_clients(&[1, 2, 3], 0),
                vec![(Arc::from("t"), ragged)],
            )
            .unwrap();
            let back = Batch::try_from_record_batch(&batch.to_record_batch().unwrap()).unwrap();
            let col = back.tensor("t").unwrap();
            assert_eq!(col.dtype(), a.dtype());
            assert_eq!(&col.row(0), a);
            assert_eq!(&col.row(1), b);
            assert_eq!(&col.slice(1, 2).row(0), b, "{}", a.dtype());
            let rb = RecordBatch::try_new(
                Arc::new(Schema::new(vec![uniform.field("t")])),
                vec![uniform.to_arrow()],
            )
            .unwrap();
            let back = TensorColumn::from_arrow(rb.schema().field(0), rb.column(0)).unwrap();
            assert_eq!(&back.row(1), a, "{}", a.dtype());
        }
    }

    /// Joining columns keeps the zero-copy uniform layout when shapes agree and becomes ragged
    /// when they do not; scalars (rank 0) are one element per row.
    #[test]
    fn concat_picks_the_layout_and_scalars_are_one_element() {
        let x = Tensor::f32(vec![2], vec![1.0, 2.0]);
        let y = Tensor::f32(vec![3], vec![3.0, 4.0, 5.0]);
        let a = TensorColumn::from_rows("t", DType::F32, &[&x]).unwrap();
        let b = TensorColumn::from_rows("t", DType::F32, &[&x, &x]).unwrap();
        let c = TensorColumn::from_rows("t", DType::F32, &[&y]).unwrap();
        let same = TensorColumn::concat("t", &[&a, &b]).unwrap();
        assert_eq!(same.uniform_shape(), Some(&[2][..]));
        assert_eq!(same.f32_values().unwrap(), &[1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
        let mixed = TensorColumn::concat("t", &[&a, &c, &b]).unwrap();
        assert_eq!(mixed.uniform_shape(), None);
        assert_eq!(mixed.row(1), y);
        assert_eq!(mixed.row_range(2), 5..7);
        assert_eq!(mixed.f32_values().unwrap().len(), 9);
        let s = Tensor::i64(vec![], vec![16_000]);
        let scalars = TensorColumn::from_rows("sr", DType::I64, &[&s, &s]).unwrap();
        assert_eq!(scalars.uniform_shape(), Some(&[][..]));
        assert_eq!(scalars.i64_values().unwrap(), &[16_000, 16_000]);
        assert_eq!(scalars.row(1), s);
    }

    /// A ragged column from another process is checked row by row: a shape that does not match
    /// its row's element count is refused, not trusted.
    #[test]
    fn a_ragged_column_whose_shapes_lie_is_refused() {
        let x = Tensor::f32(vec![2], vec![1.0, 2.0]);
        let y = Tensor::f32(vec![3], vec![3.0, 4.0, 5.0]);
        let good = TensorColumn::from_rows("t", DType::F32, &[&x, &y]).unwrap();
        let liar =
            TensorColumn::from_ragged("t", vec![vec![3], vec![2]], TensorData::F32(vec![0.0; 5]))
                .unwrap();
        // Swap the shape child of one for the other's: same types, lying sizes.
        let good_arrow = good.to_arrow();
        let liar_arrow = liar.to_arrow();
        let good_struct = good_arrow
            .as_any()
            .downcast_ref::<arrow_array::StructArray>()
            .unwrap();
        let liar_struct = liar_arrow
            .as_any()
            .downcast_ref::<arrow_array::StructArray>()
            .unwrap();
        let forged = arrow_array::StructArray::new(
            good_struct.fields().clone(),
            vec![good_struct.column(0).clone(), liar_struct.column(1).clone()],
            None,
        );
        let err = TensorColumn::from_arrow(&good.field("t"), &(Arc::new(forged) as ArrayRef))
            .unwrap_err()
            .to_string();
        assert!(err.contains("row 0"), "{err}");
    }
}
