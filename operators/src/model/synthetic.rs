//! Synthetic requests made from a model file alone: every input of the model filled with seeded
//! random data of its shape (dynamic dimensions taken as 1), and one timed call on a session.
//!
//! Two users, one recipe: SERF's profiler (`weir profile`) measures service times with them, and a
//! switchable executor ([`super::executor::ModelExecutor::start_switchable`]) warms every session it
//! pre-creates with them, so that the first requests after a switch to another thread count do not
//! pay ONNX Runtime's first-call costs (arena growth, memory planning) on a cold session. Every
//! datatype has a form: floats are uniform in `[0, 1)`, integers are 0 or 1 (valid for index and
//! mask inputs of any size), booleans are fair coins, and BYTES elements are one lower-case ASCII
//! letter (ONNX strings are text).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use half::{bf16, f16};
use ort::session::{Session, SessionInputValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_engine::onnx::{read_metadata, ElementType, OnnxError};
use weir_engine::tensor::{DType, TensorData};

use super::ort_values::{input_value, CallInput};

/// Why synthetic inputs could not be made for a model.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// The model's signature could not be read.
    #[error(transparent)]
    Metadata(#[from] OnnxError),
    /// An input that is not a tensor of an Open Inference Protocol datatype.
    #[error("{path}: input `{input}` is not a tensor of an Open Inference Protocol datatype")]
    Input {
        /// The model.
        path: PathBuf,
        /// The input.
        input: String,
    },
}

#[derive(Debug, Clone)]
struct SyntheticInput {
    name: String,
    shape: Vec<usize>,
    data: CallInput<'static>,
}

/// `n` random elements of `dtype` (see the module docs for each type's range).
pub(crate) fn random_data(dtype: DType, n: usize, rng: &mut StdRng) -> TensorData {
    macro_rules! bits {
        ($t:ty) => {
            (0..n)
                .map(|_| rng.random_range(0..2) as $t)
                .collect::<Vec<$t>>()
                .into()
        };
    }
    match dtype {
        DType::Bool => TensorData::Bool((0..n).map(|_| rng.random()).collect()),
        DType::U8 => bits!(u8),
        DType::U16 => bits!(u16),
        DType::U32 => bits!(u32),
        DType::U64 => bits!(u64),
        DType::I8 => bits!(i8),
        DType::I16 => bits!(i16),
        DType::I32 => bits!(i32),
        DType::I64 => bits!(i64),
        DType::F16 => TensorData::F16((0..n).map(|_| f16::from_f32(rng.random())).collect()),
        DType::F32 => TensorData::F32((0..n).map(|_| rng.random()).collect()),
        DType::F64 => TensorData::F64((0..n).map(|_| rng.random()).collect()),
        DType::Bf16 => TensorData::Bf16((0..n).map(|_| bf16::from_f32(rng.random())).collect()),
        DType::Bytes => TensorData::Bytes(
            (0..n)
                .map(|_| vec![b'a' + rng.random_range(0..26u8)])
                .collect(),
        ),
    }
}

/// One request's worth of random inputs for a model, in the model's input order.
#[derive(Debug, Clone)]
pub struct SyntheticInputs(Vec<SyntheticInput>);

impl SyntheticInputs {
    /// Random inputs for the model at `path`, the same for the same `seed`.
    ///
    /// # Errors
    /// When the model cannot be read or has an input that is neither f32 nor i64.
    pub fn random(path: &Path, seed: u64) -> Result<Self, SyntheticError> {
        let meta = read_metadata(path)?;
        let mut rng = StdRng::seed_from_u64(seed);
        meta.inputs
            .iter()
            .map(|info| {
                // The whole shape (a batch of 1 where the model has a batch dimension).
                let shape = info.synthetic_shape(false);
                let n = shape.iter().product();
                let ElementType::Supported(dtype) = info.element else {
                    return Err(SyntheticError::Input {
                        path: path.to_path_buf(),
                        input: info.name.clone(),
                    });
                };
                Ok(SyntheticInput {
                    name: info.name.clone(),
                    shape,
                    data: CallInput::Owned(random_data(dtype, n, &mut rng)),
                })
            })
            .collect::<Result<_, _>>()
            .map(SyntheticInputs)
    }

    /// Runs one `Session::run` on these inputs and returns how long it took (building the input
    /// views included, the outputs dropped).
    ///
    /// # Errors
    /// ONNX Runtime's error when the call fails.
    pub fn timed_call(&self, session: &mut Session) -> Result<Duration, ort::Error> {
        let started = Instant::now();
        let mut values: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
            Vec::with_capacity(self.0.len());
        for input in &self.0 {
            let value = input_value(&input.data, input.shape.clone()).map_err(ort::Error::new)?;
            values.push((input.name.as_str().into(), value));
        }
        drop(session.run(values)?);
        Ok(started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{test_model as model, OrtRuntime};

    #[test]
    fn a_random_request_has_the_model_s_shape_and_runs() {
        let path = model("mlp_a.onnx");
        let inputs = SyntheticInputs::random(&path, 3).unwrap();
        // Dynamic batch dimension taken as 1; the same seed gives the same data.
        assert!(!inputs.0.is_empty());
        assert!(inputs.0.iter().all(|i| i.shape.first() == Some(&1)));
        let again = SyntheticInputs::random(&path, 3).unwrap();
        let first = |x: &SyntheticInputs| match &x.0[0].data {
            CallInput::Owned(d) => d.to_f64_lossy().unwrap(),
            CallInput::Column(..) => unreachable!("synthetic inputs are owned"),
        };
        assert_eq!(first(&inputs), first(&again));
        assert_ne!(
            first(&inputs),
            first(&SyntheticInputs::random(&path, 4).unwrap())
        );
        let runtime = OrtRuntime::get().unwrap();
        let mut session = runtime.session("mlp", &path, 1, false).unwrap();
        assert!(inputs.timed_call(&mut session).unwrap() > Duration::ZERO);
    }

    /// A model per datatype (`dtypes/<t>.onnx`, BYTES as ONNX strings) runs on its random request.
    #[test]
    fn every_datatype_has_a_random_request_that_runs() {
        let runtime = OrtRuntime::get().unwrap();
        for dtype in DType::ALL {
            let path = model(&format!("dtypes/{}.onnx", file_stem(dtype)));
            let inputs = SyntheticInputs::random(&path, 1).unwrap();
            let mut session = runtime.session("dtype", &path, 1, false).unwrap();
            inputs
                .timed_call(&mut session)
                .unwrap_or_else(|e| panic!("{dtype}: {e}"));
        }
    }

    /// The set-up's file name for `dtype`'s model.
    fn file_stem(dtype: DType) -> &'static str {
        match dtype {
            DType::Bytes => "string",
            other => other.name(),
        }
    }

    #[test]
    fn a_model_that_cannot_be_read_is_an_error_naming_it() {
        let path = model("no_such_model.onnx");
        let err = SyntheticInputs::random(&path, 0).unwrap_err();
        assert!(matches!(err, SyntheticError::Metadata(_)));
        assert!(err.to_string().contains("no_such_model.onnx"), "{err}");
    }
}
