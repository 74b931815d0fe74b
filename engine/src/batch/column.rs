//! One tensor column of a batch: a tensor per row, every row of one element type.
//!
//! Two Arrow layouts, chosen per column by what its rows hold:
//! - **uniform** — every row has the same shape (every fixed-shape input, and every output of one
//!   model call): a `FixedSizeList<T>` whose list size is the element count, the shape in the
//!   field metadata under `weir.shape`. A call's inputs are one contiguous slice that ONNX Runtime
//!   reads in place, and a reply's rows are zero-copy slices of the call's output.
//! - **ragged** — rows of one rank but their own sizes (a graph input declared with `-1` or a
//!   symbolic dimension): Arrow's canonical variable-shape tensor layout
//!   (`arrow.variable_shape_tensor`), a `Struct{data: List<T>, shape: FixedSizeList<Int32>[rank]}`.
//!   Each row carries its shape beside its elements, so the row travels through the dataflow, the
//!   timely exchange and the zenoh wire as itself, with no side table; the elements of all rows
//!   stay one contiguous values array.
//!
//! A column is uniform whenever its rows agree, so the fixed-shape path never pays for the ragged
//! one. Storage per element type is [`super::storage`]'s.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, FixedSizeListArray, Int32Array, ListArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields};

use super::storage::{
    dtype_of_storage, native_values, read_values, storage_type, values_array, NativeElement,
};
use super::BatchError;
use crate::tensor::{element_count, DType, Tensor, TensorData};

/// Field metadata key holding a uniform tensor column's per-request shape, as comma-separated sizes.
pub const SHAPE_METADATA_KEY: &str = "weir.shape";
/// Field metadata key naming a tensor column's element type (`f32`, `bool`, `bf16`, ...).
pub const DTYPE_METADATA_KEY: &str = "weir.dtype";
/// Arrow's extension-name metadata key, and the canonical name of the ragged layout.
const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
const VARIABLE_SHAPE_TENSOR: &str = "arrow.variable_shape_tensor";

/// One tensor column: every row holds a tensor of the same element type.
#[derive(Debug, Clone)]
pub struct TensorColumn {
    dtype: DType,
    layout: Layout,
}

#[derive(Debug, Clone)]
enum Layout {
    /// Every row has `shape`.
    Uniform {
        shape: Vec<usize>,
        array: FixedSizeListArray,
    },
    /// Each row has its own shape of `rank` dimensions.
    Ragged {
        rank: usize,
        data: ListArray,
        shapes: FixedSizeListArray,
    },
}

fn item_field(dtype: DType) -> Arc<Field> {
    Arc::new(Field::new("item", storage_type(dtype), false))
}

fn shape_item_field() -> Arc<Field> {
    Arc::new(Field::new("item", DataType::Int32, false))
}

fn ragged_fields(dtype: DType, rank: usize) -> Fields {
    Fields::from(vec![
        Field::new("data", DataType::List(item_field(dtype)), false),
        Field::new(
            "shape",
            DataType::FixedSizeList(shape_item_field(), rank as i32),
            false,
        ),
    ])
}

impl TensorColumn {
    /// A uniform column of `rows` tensors of `shape` from row-major `data` holding all rows back
    /// to back.
    ///
    /// # Errors
    /// [`BatchError::Length`] when `data` does not hold exactly `rows` tensors of `shape`.
    pub fn from_data(
        name: &str,
        shape: Vec<usize>,
        rows: usize,
        data: TensorData,
    ) -> Result<Self, BatchError> {
        let length = || BatchError::Length {
            column: name.to_string(),
            elements: data.len(),
            rows,
            shape: shape.clone(),
        };
        let size = element_count(&shape).ok_or_else(length)?;
        if size.checked_mul(rows) != Some(data.len()) {
            return Err(length());
        }
        let list_size = i32::try_from(size).map_err(|_| length())?;
        let dtype = data.dtype();
        let values = values_array(data).ok_or_else(|| too_large(name))?;
        let array = FixedSizeListArray::try_new_with_length(
            item_field(dtype),
            list_size,
            values,
            None,
            rows,
        )?;
        Ok(TensorColumn {
            dtype,
            layout: Layout::Uniform { shape, array },
        })
    }

    /// A column of one row per tensor of `rows` (all of type `dtype`): uniform when their shapes
    /// agree, ragged otherwise.
    ///
    /// # Errors
    /// When a tensor is not of `dtype`, the ranks differ, or a size does not fit the layout.
    pub fn from_rows(name: &str, dtype: DType, rows: &[&Tensor]) -> Result<Self, BatchError> {
        let mut data = TensorData::empty(dtype);
        for t in rows {
            data.extend(t.data.clone())
                .map_err(|e| BatchError::BadColumn {
                    column: name.to_string(),
                    problem: e.to_string(),
                })?;
        }
        let shapes = rows.iter().map(|t| t.shape.clone()).collect();
        TensorColumn::from_shapes(name, shapes, data)
    }

    /// A column whose row `i` has shape `shapes[i]`, `data` holding every row's elements back to
    /// back: uniform (the zero-copy layout) when the shapes agree, ragged otherwise.
    ///
    /// # Errors
    /// As [`TensorColumn::from_data`] and [`TensorColumn::from_ragged`].
    pub fn from_shapes(
        name: &str,
        mut shapes: Vec<Vec<usize>>,
        data: TensorData,
    ) -> Result<Self, BatchError> {
        if shapes.windows(2).all(|w| w[0] == w[1]) {
            let rows = shapes.len();
            let shape = shapes.pop().unwrap_or_default();
            TensorColumn::from_data(name, shape, rows, data)
        } else {
            TensorColumn::from_ragged(name, shapes, data)
        }
    }

    /// A ragged column: row `i` has shape `shapes[i]` (all of one rank) and `data` holds every
    /// row's elements back to back.
    ///
    /// # Errors
    /// When the ranks differ, the element counts do not add up to `data`, or a size does not fit
    /// Arrow's 32-bit offsets.
    pub fn from_ragged(
        name: &str,
        shapes: Vec<Vec<usize>>,
        data: TensorData,
    ) -> Result<Self, BatchError> {
        let bad = |problem: String| BatchError::BadColumn {
            column: name.to_string(),
            problem,
        };
        let rank = shapes.first().map_or(0, Vec::len);
        let mut lengths = Vec::with_capacity(shapes.len());
        let mut dims = Vec::with_capacity(shapes.len() * rank);
        let mut total = 0usize;
        for s in &shapes {
            if s.len() != rank {
                return Err(bad(format!(
                    "rows of rank {} and {rank} in one column",
                    s.len()
                )));
            }
            let n = element_count(s).ok_or_else(|| bad(format!("shape {s:?} overflows")))?;
            total = total
                .checked_add(n)
                .filter(|&t| i32::try_from(t).is_ok())
                .ok_or_else(|| too_large(name))?;
            lengths.push(n);
            for &d in s {
                dims.push(i32::try_from(d).map_err(|_| bad(format!("dimension {d} too large")))?);
            }
        }
        if total != data.len() {
            return Err(BatchError::Length {
                column: name.to_string(),
                elements: data.len(),
                rows: shapes.len(),
                shape: shapes.first().cloned().unwrap_or_default(),
            });
        }
        let dtype = data.dtype();
        let values = values_array(data).ok_or_else(|| too_large(name))?;
        let data = ListArray::try_new(
            item_field(dtype),
            OffsetBuffer::from_lengths(lengths),
            values,
            None,
        )?;
        let rank_i32 = i32::try_from(rank).map_err(|_| bad(format!("rank {rank} too large")))?;
        let shapes = FixedSizeListArray::try_new_with_length(
            shape_item_field(),
            rank_i32,
            Arc::new(Int32Array::from(dims)),
            None,
            shapes.len(),
        )?;
        Ok(TensorColumn {
            dtype,
            layout: Layout::Ragged { rank, data, shapes },
        })
    }

    /// The rows of `columns` one after another, under `name`: zero-copy concatenation of the
    /// arrays when all are uniform with one shape, a ragged column otherwise.
    ///
    /// # Errors
    /// When the element types or ranks differ.
    pub fn concat(name: &str, columns: &[&TensorColumn]) -> Result<Self, BatchError> {
        let Some(first) = columns.first() else {
            return Err(BatchError::BadColumn {
                column: name.to_string(),
                problem: "no columns to join".into(),
            });
        };
        if let Some(c) = columns.iter().find(|c| c.dtype != first.dtype) {
            return Err(BatchError::BadColumn {
                column: name.to_string(),
                problem: format!(
                    "element types {} and {} in one column",
                    first.dtype, c.dtype
                ),
            });
        }
        if let Some(shape) = first.uniform_shape() {
            if columns.iter().all(|c| c.uniform_shape() == Some(shape)) {
                let arrays: Vec<&dyn Array> = columns
                    .iter()
                    .map(|c| match &c.layout {
                        Layout::Uniform { array, .. } => array as &dyn Array,
                        Layout::Ragged { data, .. } => data as &dyn Array,
                    })
                    .collect();
                let merged = arrow_select::concat::concat(&arrays)?;
                let array = merged
                    .as_any()
                    .downcast_ref::<FixedSizeListArray>()
                    .ok_or_else(|| BatchError::BadColumn {
                        column: name.to_string(),
                        problem: "joined array is not a fixed-size list".into(),
                    })?
                    .clone();
                return Ok(TensorColumn {
                    dtype: first.dtype,
                    layout: Layout::Uniform {
                        shape: shape.to_vec(),
                        array,
                    },
                });
            }
        }
        let mut shapes = Vec::new();
        let mut data = TensorData::empty(first.dtype);
        for c in columns {
            for row in 0..c.len() {
                shapes.push(c.row_shape(row));
            }
            data.extend(c.data()).map_err(|e| BatchError::BadColumn {
                column: name.to_string(),
                problem: e.to_string(),
            })?;
        }
        TensorColumn::from_ragged(name, shapes, data)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape every row has, for a uniform column; `None` when rows have their own shapes.
    pub fn uniform_shape(&self) -> Option<&[usize]> {
        match &self.layout {
            Layout::Uniform { shape, .. } => Some(shape),
            Layout::Ragged { .. } => None,
        }
    }

    /// Number of dimensions of every row.
    pub fn rank(&self) -> usize {
        match &self.layout {
            Layout::Uniform { shape, .. } => shape.len(),
            Layout::Ragged { rank, .. } => *rank,
        }
    }

    /// Row `row`'s shape.
    ///
    /// # Panics
    /// When `row` is out of range.
    pub fn row_shape(&self, row: usize) -> Vec<usize> {
        match &self.layout {
            Layout::Uniform { shape, .. } => shape.clone(),
            Layout::Ragged { rank, shapes, .. } => {
                let dims = shapes.value(row);
                let dims = dims
                    .as_any()
                    .downcast_ref::<Int32Array>()
                    .map(|a| a.values().to_vec())
                    .unwrap_or_default();
                // Ragged shapes are checked non-negative where a column is built or read.
                dims.iter()
                    .take(*rank)
                    .map(|&d| d.max(0) as usize)
                    .collect()
            }
        }
    }

    /// Elements per row, for a uniform column.
    pub fn row_len(&self) -> Option<usize> {
        match &self.layout {
            Layout::Uniform { array, .. } => Some(array.value_length() as usize),
            Layout::Ragged { .. } => None,
        }
    }

    /// Row `row`'s elements as positions in [`TensorColumn::values`] (and [`TensorColumn::data`]).
    ///
    /// # Panics
    /// When `row` is out of range.
    pub fn row_range(&self, row: usize) -> Range<usize> {
        match &self.layout {
            Layout::Uniform { array, .. } => {
                let n = array.value_length() as usize;
                row * n..(row + 1) * n
            }
            Layout::Ragged { data, .. } => {
                let offsets = data.value_offsets();
                let base = offsets[0] as usize;
                offsets[row] as usize - base..offsets[row + 1] as usize - base
            }
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Uniform { array, .. } => array.len(),
            Layout::Ragged { data, .. } => data.len(),
        }
    }

    /// Whether the column has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The storage values array and the range of it this column's rows cover.
    fn storage(&self) -> (&ArrayRef, Range<usize>) {
        match &self.layout {
            Layout::Uniform { array, .. } => (array.values(), 0..array.values().len()),
            Layout::Ragged { data, .. } => {
                let offsets = data.value_offsets();
                let (start, end) = (offsets[0] as usize, offsets[data.len()] as usize);
                (data.values(), start..end)
            }
        }
    }

    /// Every row's elements back to back (no copy), if the column holds `T`.
    pub fn values<T: NativeElement>(&self) -> Option<&[T]> {
        if self.dtype != T::DTYPE {
            return None;
        }
        self.storage_values()
    }

    /// Every row's elements back to back (no copy) as stored: `u8` for BOOL, `u16` for BF16, the
    /// element type itself otherwise; `None` for BYTES or a `T` of another width.
    pub fn storage_values<T: NativeElement>(&self) -> Option<&[T]> {
        let (array, range) = self.storage();
        native_values::<T>(array.as_ref())?.get(range)
    }

    /// Every row's `f32` elements back to back (no copy), if this is an `f32` column.
    pub fn f32_values(&self) -> Option<&[f32]> {
        self.values()
    }

    /// Every row's `i64` elements back to back (no copy), if this is an `i64` column.
    pub fn i64_values(&self) -> Option<&[i64]> {
        self.values()
    }

    /// Every row's elements back to back, copied out.
    pub fn data(&self) -> TensorData {
        let (array, range) = self.storage();
        read_values(self.dtype, array.as_ref(), range)
            .unwrap_or_else(|| TensorData::empty(self.dtype))
    }

    /// Elements `range` (positions as [`TensorColumn::row_range`] gives them), copied out.
    pub fn data_range(&self, range: Range<usize>) -> Option<TensorData> {
        let (array, all) = self.storage();
        let start = all.start.checked_add(range.start)?;
        let end = all.start.checked_add(range.end)?;
        if end > all.end {
            return None;
        }
        read_values(self.dtype, array.as_ref(), start..end)
    }

    /// Row `row` as an owned tensor.
    ///
    /// # Panics
    /// When `row` is out of range.
    pub fn row(&self, row: usize) -> Tensor {
        Tensor {
            shape: self.row_shape(row),
            data: self
                .data_range(self.row_range(row))
                .unwrap_or_else(|| TensorData::empty(self.dtype)),
        }
    }

    /// Rows `offset..offset + len` (no copy).
    pub fn slice(&self, offset: usize, len: usize) -> Self {
        let layout = match &self.layout {
            Layout::Uniform { shape, array } => Layout::Uniform {
                shape: shape.clone(),
                array: array.slice(offset, len),
            },
            Layout::Ragged { rank, data, shapes } => Layout::Ragged {
                rank: *rank,
                data: data.slice(offset, len),
                shapes: shapes.slice(offset, len),
            },
        };
        TensorColumn {
            dtype: self.dtype,
            layout,
        }
    }

    /// Reads a column written as [`TensorColumn::field`] and [`TensorColumn::to_arrow`] describe.
    /// The column may come from another process: every size is checked before it is trusted.
    ///
    /// # Errors
    /// When the metadata is missing or wrong, or the array is not a layout weir writes.
    pub fn from_arrow(field: &Field, column: &ArrayRef) -> Result<Self, BatchError> {
        let bad = |problem: String| BatchError::BadColumn {
            column: field.name().to_string(),
            problem,
        };
        let named = field.metadata().get(DTYPE_METADATA_KEY);
        let dtype_from = |storage: &DataType| -> Result<DType, BatchError> {
            let dtype = match named {
                Some(n) => DType::ALL
                    .into_iter()
                    .find(|d| d.name() == n.as_str())
                    .ok_or_else(|| bad(format!("unknown element type `{n}`")))?,
                None => dtype_of_storage(storage)
                    .ok_or_else(|| bad(format!("element type {storage} is not a tensor type")))?,
            };
            if &storage_type(dtype) != storage {
                return Err(bad(format!("{dtype} elements stored as {storage}")));
            }
            Ok(dtype)
        };
        if let Some(array) = column.as_any().downcast_ref::<FixedSizeListArray>() {
            let shape = parse_shape(field.metadata().get(SHAPE_METADATA_KEY))
                .ok_or_else(|| bad("no valid weir.shape metadata".into()))?;
            let dtype = dtype_from(&array.value_type())?;
            let size = element_count(&shape);
            if usize::try_from(array.value_length()).ok() != size {
                return Err(bad(format!(
                    "list size {} does not match shape {shape:?}",
                    array.value_length()
                )));
            }
            return Ok(TensorColumn {
                dtype,
                layout: Layout::Uniform {
                    shape,
                    array: array.clone(),
                },
            });
        }
        let array = column
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| bad("not a fixed-size list or a variable-shape tensor".into()))?;
        let data = array
            .column_by_name("data")
            .and_then(|c| c.as_any().downcast_ref::<ListArray>())
            .ok_or_else(|| bad("variable-shape tensor without a `data` list".into()))?
            .clone();
        let shapes = array
            .column_by_name("shape")
            .and_then(|c| c.as_any().downcast_ref::<FixedSizeListArray>())
            .ok_or_else(|| bad("variable-shape tensor without a `shape` list".into()))?
            .clone();
        let dtype = dtype_from(&data.value_type())?;
        let rank =
            usize::try_from(shapes.value_length()).map_err(|_| bad("negative rank".into()))?;
        let dims = shapes
            .values()
            .as_any()
            .downcast_ref::<Int32Array>()
            .ok_or_else(|| bad("shapes are not i32".into()))?;
        if shapes.len() != data.len() || dims.len() != data.len() * rank {
            return Err(bad("shapes do not cover the rows".into()));
        }
        for row in 0..data.len() {
            let row_dims = &dims.values()[row * rank..(row + 1) * rank];
            let mut n = 1usize;
            for &d in row_dims {
                let d = usize::try_from(d).map_err(|_| bad(format!("row {row}: dimension {d}")))?;
                n = n
                    .checked_mul(d)
                    .ok_or_else(|| bad(format!("row {row}: shape overflows")))?;
            }
            if n != data.value_length(row) as usize {
                return Err(bad(format!(
                    "row {row}: {} elements for shape {row_dims:?}",
                    data.value_length(row)
                )));
            }
        }
        Ok(TensorColumn {
            dtype,
            layout: Layout::Ragged { rank, data, shapes },
        })
    }

    /// The Arrow field for this column under `name`, with its element type (and, for a uniform
    /// column, its shape) in the metadata.
    pub fn field(&self, name: &str) -> Field {
        let mut metadata = std::collections::HashMap::from([(
            DTYPE_METADATA_KEY.to_string(),
            self.dtype.name().to_string(),
        )]);
        match &self.layout {
            Layout::Uniform { shape, .. } => {
                let shape = shape
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                metadata.insert(SHAPE_METADATA_KEY.to_string(), shape);
            }
            Layout::Ragged { .. } => {
                metadata.insert(
                    EXTENSION_NAME_KEY.to_string(),
                    VARIABLE_SHAPE_TENSOR.to_string(),
                );
            }
        }
        Field::new(name, self.arrow_type(), false).with_metadata(metadata)
    }

    fn arrow_type(&self) -> DataType {
        match &self.layout {
            Layout::Uniform { array, .. } => array.data_type().clone(),
            Layout::Ragged { rank, .. } => DataType::Struct(ragged_fields(self.dtype, *rank)),
        }
    }

    /// The column as one Arrow array (the layout [`TensorColumn::field`] describes).
    pub fn to_arrow(&self) -> ArrayRef {
        match &self.layout {
            Layout::Uniform { array, .. } => Arc::new(array.clone()),
            Layout::Ragged { rank, data, shapes } => Arc::new(StructArray::new(
                ragged_fields(self.dtype, *rank),
                vec![Arc::new(data.clone()), Arc::new(shapes.clone())],
                None,
            )),
        }
    }

    /// Bytes of memory the column's buffers hold.
    pub fn memory_size(&self) -> usize {
        match &self.layout {
            Layout::Uniform { array, .. } => array.get_array_memory_size(),
            Layout::Ragged { data, shapes, .. } => {
                data.get_array_memory_size() + shapes.get_array_memory_size()
            }
        }
    }
}

fn too_large(name: &str) -> BatchError {
    BatchError::BadColumn {
        column: name.to_string(),
        problem: "more elements or bytes than one column holds (2^31)".into(),
    }
}

fn parse_shape(s: Option<&String>) -> Option<Vec<usize>> {
    let s = s?;
    if s.is_empty() {
        return Some(Vec::new());
    }
    s.split(',').map(|d| d.trim().parse().ok()).collect()
}
