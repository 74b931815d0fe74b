//! The ONNX Runtime side of profiling a variant: sessions built by weir's one session builder
//! ([`OrtRuntime::session_on`]), at the variant's graph-optimisation level, intra-op
//! threads and device, fed float32 rows.

use std::path::Path;

use ort::session::Session as OrtSession;
use ort::value::Tensor;
use weir_engine::spec::Device;
use weir_infaas::repository::profile::{Loader, Session};
use weir_infaas::repository::Signature;
use weir_infaas::variant::VariantConfig;
use weir_operators::model::ort_env::OrtRuntime;
use weir_operators::model::{ExecError, SessionSettings};

/// Builds sessions for the variants of one model.
pub(crate) struct OrtLoader {
    runtime: OrtRuntime,
    inputs: Vec<(String, Vec<usize>)>,
    output: String,
    device: Device,
}

impl OrtLoader {
    /// A loader for models with `signature` on `device`.
    pub(crate) fn new(signature: &Signature, device: Device) -> Result<Self, ExecError> {
        let runtime = OrtRuntime::get()?;
        let inputs = signature
            .inputs
            .iter()
            .map(|t| {
                let row = t.dims.iter().skip(1).map(|d| d.unwrap_or(1) as usize);
                (t.name.clone(), row.collect())
            })
            .collect();
        let output = signature
            .outputs
            .first()
            .map(|t| t.name.clone())
            .unwrap_or_default();
        Ok(Self {
            runtime,
            inputs,
            output,
            device,
        })
    }
}

/// Whether this ONNX Runtime library has the CUDA execution provider.
pub fn cuda_available() -> bool {
    use ort::ep::ExecutionProvider;
    OrtRuntime::get().is_ok() && ort::ep::CUDA::is_available().unwrap_or(false)
}

/// A loaded variant.
pub(crate) struct OrtVariant {
    session: OrtSession,
    inputs: Vec<(String, Vec<usize>)>,
    output: String,
}

impl Loader for OrtLoader {
    type Session = OrtVariant;

    fn load(&self, path: &Path, config: &VariantConfig) -> Result<OrtVariant, String> {
        let session = self
            .runtime
            .session_on(
                "profile",
                path,
                &SessionSettings {
                    intra_op_threads: config.intra_threads as usize,
                    device: self.device,
                    level: config.graph_level,
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
        Ok(OrtVariant {
            session,
            inputs: self.inputs.clone(),
            output: self.output.clone(),
        })
    }
}

impl Session for OrtVariant {
    fn run(&mut self, inputs: &[Vec<f32>], rows: usize) -> Result<Vec<f32>, String> {
        let mut feed = Vec::with_capacity(inputs.len());
        for ((name, row), data) in self.inputs.iter().zip(inputs) {
            let shape: Vec<usize> = std::iter::once(rows).chain(row.iter().copied()).collect();
            let value = Tensor::from_array((shape, data.clone())).map_err(|e| e.to_string())?;
            feed.push((name.as_str(), value));
        }
        let outputs = self.session.run(feed).map_err(|e| e.to_string())?;
        let value = outputs
            .get(&self.output)
            .ok_or_else(|| format!("the model returned no output `{}`", self.output))?;
        let (_, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        Ok(data.to_vec())
    }
}
