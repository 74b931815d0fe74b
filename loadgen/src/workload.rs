//! Requests for a graph: random tensors shaped by its inputs, or rows of a labelled CSV data set.
//!
//! A [`Workload`] holds a pool of ready requests and hands out clones, so making a request costs a
//! copy, not random-number generation, while a load test runs. Random pools are seeded.

use std::io::Read;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_engine::plan::Plan;
use weir_engine::tensor::{DType, Dim, NamedTensor, Tensor, TensorData};

/// One request and, when the data set has one, its label.
#[derive(Debug, Clone)]
pub struct WorkItem {
    /// Tensors, one per graph input.
    pub inputs: Vec<NamedTensor>,
    /// The expected class.
    pub label: Option<i64>,
}

/// A pool of requests to cycle through.
#[derive(Debug, Clone)]
pub struct Workload {
    items: Vec<WorkItem>,
}

/// Errors making a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The data set could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The data set does not fit the graph.
    #[error("{path} line {line}: {message}")]
    Format {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The graph cannot take this workload.
    #[error("{0}")]
    Graph(String),
}

fn fixed_shape(dims: &[Dim]) -> Vec<usize> {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n,
            Dim::Dynamic => 1,
        })
        .collect()
}

/// The rows of a CSV file (optionally gzipped): `width` f32 features for input `input`, then an
/// integer label last (blank lines skipped).
///
/// # Errors
/// When the file cannot be read, or a row has another number of fields or a field that is not a
/// number (naming the line).
pub fn read_labelled_rows(
    path: &Path,
    input: &str,
    width: usize,
) -> Result<Vec<(Vec<f32>, i64)>, WorkloadError> {
    let shown = path.display().to_string();
    let mut bytes = Vec::new();
    let read = |e| WorkloadError::Read {
        path: shown.clone(),
        source: e,
    };
    let mut file = std::fs::File::open(path).map_err(read)?;
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file)
            .read_to_end(&mut bytes)
            .map_err(read)?;
    } else {
        file.read_to_end(&mut bytes).map_err(read)?;
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let format = |message: String| WorkloadError::Format {
            path: shown.clone(),
            line: i + 1,
            message,
        };
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        if fields.len() != width + 1 {
            return Err(format(format!(
                "{} fields; input `{input}` needs {width} features and a label",
                fields.len()
            )));
        }
        let features = fields[..width]
            .iter()
            .map(|f| {
                f.parse::<f32>()
                    .map_err(|e| format(format!("feature `{f}`: {e}")))
            })
            .collect::<Result<Vec<f32>, _>>()?;
        let label = fields[width]
            .parse::<f64>()
            .map_err(|e| format(format!("label `{}`: {e}", fields[width])))?
            as i64;
        rows.push((features, label));
    }
    Ok(rows)
}

/// `n` random elements of `dtype`: floats uniform in [0, 1), integers in [0, 10), booleans fair,
/// byte strings of 1–8 lowercase letters.
fn random_data(dtype: DType, n: usize, rng: &mut StdRng) -> TensorData {
    let small = |rng: &mut StdRng| rng.random_range(0u8..10);
    match dtype {
        DType::Bool => TensorData::Bool((0..n).map(|_| rng.random()).collect()),
        DType::U8 => TensorData::U8((0..n).map(|_| small(rng)).collect()),
        DType::U16 => TensorData::U16((0..n).map(|_| small(rng).into()).collect()),
        DType::U32 => TensorData::U32((0..n).map(|_| small(rng).into()).collect()),
        DType::U64 => TensorData::U64((0..n).map(|_| small(rng).into()).collect()),
        DType::I8 => TensorData::I8((0..n).map(|_| small(rng) as i8).collect()),
        DType::I16 => TensorData::I16((0..n).map(|_| small(rng).into()).collect()),
        DType::I32 => TensorData::I32((0..n).map(|_| small(rng).into()).collect()),
        DType::I64 => TensorData::I64((0..n).map(|_| small(rng).into()).collect()),
        DType::F16 => TensorData::F16((0..n).map(|_| half::f16::from_f32(rng.random())).collect()),
        DType::F32 => TensorData::F32((0..n).map(|_| rng.random()).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| rng.random()).collect()),
        DType::Bf16 => {
            TensorData::Bf16((0..n).map(|_| half::bf16::from_f32(rng.random())).collect())
        }
        DType::Bytes => TensorData::Bytes(
            (0..n)
                .map(|_| {
                    let len = rng.random_range(1..=8);
                    (0..len).map(|_| rng.random_range(b'a'..=b'z')).collect()
                })
                .collect(),
        ),
    }
}

impl Workload {
    /// `distinct` random requests for `plan` from `seed` (values as [`random_data`] draws them).
    pub fn random(plan: &Plan, distinct: usize, seed: u64) -> Workload {
        let mut rng = StdRng::seed_from_u64(seed);
        let items = (0..distinct.max(1))
            .map(|_| WorkItem {
                inputs: plan
                    .inputs
                    .iter()
                    .map(|i| {
                        let shape = fixed_shape(&i.ty.shape);
                        let n: usize = shape.iter().product();
                        let tensor = Tensor {
                            shape,
                            data: random_data(i.ty.dtype, n, &mut rng),
                        };
                        NamedTensor {
                            name: i.name.clone(),
                            tensor,
                        }
                    })
                    .collect(),
                label: None,
            })
            .collect();
        Workload { items }
    }

    /// Rows of a CSV file (optionally gzipped): features, then an integer label last. The graph must
    /// have one f32 input with as many elements as there are features.
    ///
    /// # Errors
    /// When the file cannot be read or a row does not fit the graph input.
    pub fn labelled_csv(plan: &Plan, path: &Path) -> Result<Workload, WorkloadError> {
        let shown = path.display().to_string();
        let [input] = plan.inputs.as_slice() else {
            return Err(WorkloadError::Graph(format!(
                "a CSV data set feeds a graph with one input; `{}` has {}",
                plan.name,
                plan.inputs.len()
            )));
        };
        if input.ty.dtype != DType::F32 {
            return Err(WorkloadError::Graph(format!(
                "input `{}` is {}; CSV features are f32",
                input.name, input.ty.dtype
            )));
        }
        let shape = fixed_shape(&input.ty.shape);
        let width: usize = shape.iter().product();
        let items: Vec<WorkItem> = read_labelled_rows(path, &input.name, width)?
            .into_iter()
            .map(|(features, label)| WorkItem {
                inputs: vec![NamedTensor {
                    name: input.name.clone(),
                    tensor: Tensor::f32(shape.clone(), features),
                }],
                label: Some(label),
            })
            .collect();
        if items.is_empty() {
            return Err(WorkloadError::Graph(format!("{shown} holds no rows")));
        }
        Ok(Workload { items })
    }

    /// A pool of `items`, in order; `None` when there are none.
    pub fn from_items(items: Vec<WorkItem>) -> Option<Workload> {
        (!items.is_empty()).then_some(Workload { items })
    }

    /// Request `i` (cycling through the pool).
    pub fn item(&self, i: usize) -> WorkItem {
        self.items[i % self.items.len()].clone()
    }

    /// Distinct requests in the pool.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the pool is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}
