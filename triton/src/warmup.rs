//! `model_warmup`: the requests Triton runs through every instance before it calls a model
//! ready (`backend_model_instance.cc`, `GenerateWarmupData`), checked here and handed to the
//! caller typed; the server maps each sample onto the model node's own warm-up
//! ([`weir_engine::warmup`]), which runs it on every session.
//!
//! As in Triton: a sample with `batch_size: 0` is skipped; each sample is `batch_size` requests
//! of one row, run `count` times; every input's dims are fixed (no `-1`); its data are zeros,
//! random bytes (zeros for `TYPE_STRING`), or the file `input_data_file` in the model's `warmup/`
//! folder. weir adds what hostile input needs: the input names one of the model's inputs with the
//! same data type, the file stays inside `warmup/` and is a regular file, and the bytes a sample
//! needs are counted with checked arithmetic and capped at [`MAX_WARMUP_BYTES`].

use std::path::{Path, PathBuf};

use weir_engine::paths::{resolve_input, FileRules};
use weir_engine::tensor::DType;

use crate::datatype;
use crate::error::LoadError;
use crate::proto::inference::model_warmup::input::InputDataType;
use crate::proto::inference::{DataType, ModelConfig};

/// Most bytes one warm-up input may hold (per request).
pub const MAX_WARMUP_BYTES: u64 = weir_engine::warmup::MAX_WARMUP_BYTES;

/// The folder in a model folder that holds warm-up data files.
pub const WARMUP_FOLDER: &str = "warmup";

/// One warm-up sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Warmup {
    /// Its name.
    pub name: String,
    /// Requests in the sample, one row each.
    pub batch_size: u32,
    /// How many times it is run.
    pub count: u32,
    /// Its inputs, sorted by name.
    pub inputs: Vec<WarmupInput>,
}

/// One input of a warm-up request.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupInput {
    /// The model input.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape per request (without the batch dimension).
    pub dims: Vec<usize>,
    /// Where its values come from.
    pub data: WarmupData,
}

/// The values of a warm-up input.
#[derive(Debug, Clone, PartialEq)]
pub enum WarmupData {
    /// Every byte zero.
    Zeros,
    /// Random bytes (zeros for strings).
    Random,
    /// The raw bytes of this file (resolved, inside the model's `warmup/` folder).
    File(PathBuf),
}

/// The warm-up samples of `config`, a model in folder `model_dir`.
///
/// # Errors
/// [`LoadError::Invalid`] naming the sample's field that breaks a rule, or [`LoadError::File`]
/// for a data file that cannot be used.
pub fn warmups(config: &ModelConfig, model_dir: &Path) -> Result<Vec<Warmup>, LoadError> {
    let mut out = Vec::new();
    for (i, sample) in config.model_warmup.iter().enumerate() {
        if sample.batch_size == 0 {
            continue;
        }
        if config.max_batch_size == 0 && sample.batch_size > 1 {
            return Err(LoadError::invalid(
                format!("model_warmup[{i}].batch_size"),
                format!(
                    "{}: a model that does not batch takes one request per call",
                    sample.batch_size
                ),
            ));
        }
        let mut names: Vec<&String> = sample.inputs.keys().collect();
        names.sort();
        let mut inputs = Vec::new();
        for name in names {
            let Some(input) = sample.inputs.get(name) else {
                continue;
            };
            let field = format!("model_warmup[{i}].inputs[{name:?}]");
            let declared = config
                .input
                .iter()
                .find(|t| &t.name == name)
                .map(|t| t.data_type)
                .ok_or_else(|| LoadError::invalid(field.clone(), "names no input of the model"))?;
            if input.data_type != declared {
                return Err(LoadError::invalid(
                    format!("{field}.data_type"),
                    format!(
                        "{}, but the input is {}",
                        datatype::name(input.data_type),
                        datatype::name(declared)
                    ),
                ));
            }
            let dtype = DataType::try_from(input.data_type)
                .ok()
                .and_then(datatype::dtype)
                .ok_or_else(|| LoadError::invalid(format!("{field}.data_type"), "must be given"))?;
            let dims: Vec<usize> = input
                .dims
                .iter()
                .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
                .collect::<Option<_>>()
                .ok_or_else(|| {
                    LoadError::invalid(
                        format!("{field}.dims"),
                        "a warm-up input's dims are all fixed sizes (no -1)",
                    )
                })?;
            let width = dtype.byte_width().unwrap_or(4) as u64;
            let bytes = dims
                .iter()
                .try_fold(width, |acc, &d| acc.checked_mul(d as u64))
                .filter(|&b| b <= MAX_WARMUP_BYTES)
                .ok_or_else(|| {
                    LoadError::invalid(
                        format!("{field}.dims"),
                        format!("the input would hold more than {MAX_WARMUP_BYTES} bytes"),
                    )
                })?;
            let data = match &input.input_data_type {
                Some(InputDataType::ZeroData(true)) => WarmupData::Zeros,
                Some(InputDataType::RandomData(true)) => WarmupData::Random,
                Some(InputDataType::InputDataFile(file)) => {
                    WarmupData::File(data_file(model_dir, file, bytes)?)
                }
                _ => {
                    return Err(LoadError::invalid(
                        field,
                        "a warm-up input sets zero_data, random_data or input_data_file",
                    ))
                }
            };
            inputs.push(WarmupInput {
                name: name.clone(),
                dtype,
                dims,
                data,
            });
        }
        out.push(Warmup {
            name: sample.name.clone(),
            batch_size: sample.batch_size,
            count: sample.count,
            inputs,
        });
    }
    Ok(out)
}

/// Resolves `file` inside `<model_dir>/warmup/`: a regular file of at least `bytes` bytes (the
/// sample reads that many) and at most [`MAX_WARMUP_BYTES`].
fn data_file(model_dir: &Path, file: &str, bytes: u64) -> Result<PathBuf, LoadError> {
    let folder = model_dir.join(WARMUP_FOLDER);
    let rules = FileRules::under(&folder)?;
    let path = resolve_input(&folder.join(file), &rules)?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size < bytes || size > MAX_WARMUP_BYTES {
        return Err(LoadError::invalid(
            "model_warmup.inputs.input_data_file",
            format!(
                "{} holds {size} bytes; the input takes {bytes} (at most {MAX_WARMUP_BYTES})",
                path.display()
            ),
        ));
    }
    Ok(path)
}
