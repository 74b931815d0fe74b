//! The unit of data in a weir dataflow: a batch of requests as Arrow columns.
//!
//! A [`Batch`] holds one row per request: the `request_id` column, the `lineage` column (see
//! [`crate::lineage`]) and one column per tensor. A tensor column is an Arrow
//! `FixedSizeList<Float32 | Int64>` whose list size is the tensor's element count; its per-request
//! shape rides in the field metadata under [`SHAPE_METADATA_KEY`] (`"3,224,224"`). Column names are
//! the graph's tensor names: a graph input's name, or `node.tensor` for a node's output.
//!
//! The typed form keeps the two fixed columns apart so operators never look them up by name;
//! [`Batch::to_record_batch`] gives the plain `RecordBatch` (for Arrow IPC on the wire) and
//! [`Batch::try_from_record_batch`] reads one back.

use std::sync::Arc;

use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, ArrowPrimitiveType, FixedSizeListArray, Float32Array, Int64Array, ListArray,
    PrimitiveArray, RecordBatch, StringArray, UInt64Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use crate::lineage::lineage_data_type;
use crate::tensor::{DType, Tensor, TensorData};

/// Name of the request id column.
pub const REQUEST_ID: &str = "request_id";
/// Name of the lineage column.
pub const LINEAGE: &str = "lineage";
/// Name of the request parameters column: per request, the client's parameters as JSON object text
/// (null when none were sent). The engine carries it untouched through every hop; stages that act
/// on per-request requirements (a latency SLO, a minimum accuracy) read it.
pub const PARAMETERS: &str = "parameters";
/// Field metadata key holding a tensor column's per-request shape, as comma-separated sizes.
pub const SHAPE_METADATA_KEY: &str = "weir.shape";

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

/// One tensor column: every row holds a tensor of the same dtype and shape.
#[derive(Debug, Clone)]
pub struct TensorColumn {
    dtype: DType,
    shape: Vec<usize>,
    array: FixedSizeListArray,
}

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

fn item_field(dtype: DType) -> Arc<Field> {
    let dt = match dtype {
        DType::F32 => DataType::Float32,
        DType::I64 => DataType::Int64,
    };
    Arc::new(Field::new("item", dt, false))
}

impl TensorColumn {
    /// A column of `rows` tensors of `shape` from row-major `data` holding all rows back to back.
    ///
    /// # Errors
    /// [`BatchError::Length`] when `data` does not hold exactly `rows` tensors of `shape`.
    pub fn from_data(
        name: &str,
        shape: Vec<usize>,
        rows: usize,
        data: TensorData,
    ) -> Result<Self, BatchError> {
        let size = element_count(&shape);
        if data.len() != size * rows {
            return Err(BatchError::Length {
                column: name.to_string(),
                elements: data.len(),
                rows,
                shape,
            });
        }
        let dtype = data.dtype();
        let values: ArrayRef = match data {
            TensorData::F32(v) => Arc::new(Float32Array::from(v)),
            TensorData::I64(v) => Arc::new(Int64Array::from(v)),
        };
        let array = FixedSizeListArray::try_new(item_field(dtype), size as i32, values, None)?;
        Ok(TensorColumn {
            dtype,
            shape,
            array,
        })
    }

    /// A column from an existing Arrow array and the per-row shape.
    ///
    /// # Errors
    /// When the array's element type is not one weir moves or its list size does not match `shape`.
    pub fn from_array(
        name: &str,
        shape: Vec<usize>,
        array: FixedSizeListArray,
    ) -> Result<Self, BatchError> {
        let dtype = match array.value_type() {
            DataType::Float32 => DType::F32,
            DataType::Int64 => DType::I64,
            other => {
                return Err(BatchError::BadColumn {
                    column: name.to_string(),
                    problem: format!("element type {other} is not f32 or i64"),
                })
            }
        };
        let size = crate::tensor::element_count(&shape);
        if usize::try_from(array.value_length()).ok() != size {
            return Err(BatchError::BadColumn {
                column: name.to_string(),
                problem: format!(
                    "list size {} does not match shape {shape:?}",
                    array.value_length()
                ),
            });
        }
        Ok(TensorColumn {
            dtype,
            shape,
            array,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Per-row shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.array.value_length() as usize
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.array.len()
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.array.is_empty()
    }

    /// The Arrow array.
    pub fn array(&self) -> &FixedSizeListArray {
        &self.array
    }

    /// Every row's `f32` elements back to back (no copy), if this is an `f32` column.
    pub fn f32_values(&self) -> Option<&[f32]> {
        self.values::<Float32Type>()
    }

    /// Every row's `i64` elements back to back (no copy), if this is an `i64` column.
    pub fn i64_values(&self) -> Option<&[i64]> {
        self.values::<Int64Type>()
    }

    /// Every row's elements back to back (no copy), if the column holds `T`.
    fn values<T: ArrowPrimitiveType>(&self) -> Option<&[T::Native]> {
        self.array
            .values()
            .as_any()
            .downcast_ref::<PrimitiveArray<T>>()
            .map(|a| a.values().as_ref())
    }

    /// Row `row` as an owned tensor.
    pub fn row(&self, row: usize) -> Tensor {
        let n = self.row_len();
        let range = row * n..(row + 1) * n;
        let data = match self.dtype {
            DType::F32 => TensorData::F32(self.f32_values().unwrap_or(&[])[range].to_vec()),
            DType::I64 => TensorData::I64(self.i64_values().unwrap_or(&[])[range].to_vec()),
        };
        Tensor {
            shape: self.shape.clone(),
            data,
        }
    }

    /// Rows `offset..offset + len` (no copy).
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        TensorColumn {
            dtype: self.dtype,
            shape: self.shape.clone(),
            array: self.array.slice(offset, len),
        }
    }

    /// Reads a column written as [`TensorColumn::field`] describes: a fixed-size list with the
    /// per-row shape in the field's metadata.
    ///
    /// # Errors
    /// When the shape metadata is missing or the array is not a fixed-size list of f32 or i64.
    pub fn from_arrow(field: &Field, column: &ArrayRef) -> Result<Self, BatchError> {
        let bad = |problem: &str| BatchError::BadColumn {
            column: field.name().to_string(),
            problem: problem.to_string(),
        };
        let shape = parse_shape(field.metadata().get(SHAPE_METADATA_KEY))
            .ok_or_else(|| bad("no valid weir.shape metadata"))?;
        let array = column
            .as_any()
            .downcast_ref::<FixedSizeListArray>()
            .ok_or_else(|| bad("not a fixed-size list"))?
            .clone();
        TensorColumn::from_array(field.name(), shape, array)
    }

    /// The Arrow field for this column under `name`, with the shape in its metadata.
    pub fn field(&self, name: &str) -> Field {
        let shape = self
            .shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",");
        Field::new(name, self.array.data_type().clone(), false)
            .with_metadata([(SHAPE_METADATA_KEY.to_string(), shape)].into())
    }
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
            columns.push(Arc::new(col.array.clone()));
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

fn parse_shape(s: Option<&String>) -> Option<Vec<usize>> {
    let s = s?;
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',').map(|d| d.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineage;

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
        assert_eq!(back.tensor("x").unwrap().shape(), &[2, 2]);
        assert_eq!(back.request_ids(), b.request_ids());
    }

    #[test]
    fn wrong_element_count_is_an_error() {
        let err = TensorColumn::from_data("x", vec![3], 2, TensorData::F32(vec![0.0; 5]));
        assert!(matches!(err, Err(BatchError::Length { elements: 5, .. })));
    }
}
