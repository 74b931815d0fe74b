//! Synthetic requests made from a model file alone: every input of the model filled with seeded
//! random data of its shape (dynamic dimensions taken as 1), and one timed call on a session.
//!
//! Two users, one recipe: SERF's profiler (`weir profile`) measures service times with them, and a
//! switchable executor ([`super::executor::ModelExecutor::start_switchable`]) warms every session it
//! pre-creates with them, so that the first requests after a switch to another thread count do not
//! pay ONNX Runtime's first-call costs (arena growth, memory planning) on a cold session. `f32`
//! inputs are uniform in `[0, 1)`, `i64` inputs are 0 or 1 (valid for index and mask inputs of any
//! size).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ort::session::{Session, SessionInputValue};
use ort::value::TensorRef;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use weir_engine::onnx::{read_metadata, ElementType, OnnxError};
use weir_engine::tensor::{DType, Dim};

/// Why synthetic inputs could not be made for a model.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// The model's signature could not be read.
    #[error(transparent)]
    Metadata(#[from] OnnxError),
    /// An input of a type weir has no random data for.
    #[error("{path}: input `{input}` is not f32 or i64")]
    Input {
        /// The model.
        path: PathBuf,
        /// The input.
        input: String,
    },
}

#[derive(Debug, Clone)]
enum InputData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

#[derive(Debug, Clone)]
struct SyntheticInput {
    name: String,
    shape: Vec<usize>,
    data: InputData,
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
                let shape: Vec<usize> = info
                    .dims
                    .iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => *n,
                        Dim::Dynamic => 1,
                    })
                    .collect();
                let n = shape.iter().product();
                let data = match info.element {
                    ElementType::Supported(DType::F32) => {
                        InputData::F32((0..n).map(|_| rng.random::<f32>()).collect())
                    }
                    ElementType::Supported(DType::I64) => {
                        InputData::I64((0..n).map(|_| rng.random_range(0..2)).collect())
                    }
                    _ => {
                        return Err(SyntheticError::Input {
                            path: path.to_path_buf(),
                            input: info.name.clone(),
                        })
                    }
                };
                Ok(SyntheticInput {
                    name: info.name.clone(),
                    shape,
                    data,
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
            let shape = input.shape.clone();
            let value: SessionInputValue<'_> = match &input.data {
                InputData::F32(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
                InputData::I64(v) => TensorRef::from_array_view((shape, v.as_slice()))?.into(),
            };
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
            InputData::F32(v) => v.clone(),
            InputData::I64(v) => v.iter().map(|&i| i as f32).collect(),
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

    #[test]
    fn a_model_that_cannot_be_read_is_an_error_naming_it() {
        let path = model("no_such_model.onnx");
        let err = SyntheticInputs::random(&path, 0).unwrap_err();
        assert!(matches!(err, SyntheticError::Metadata(_)));
        assert!(err.to_string().contains("no_such_model.onnx"), "{err}");
    }
}
