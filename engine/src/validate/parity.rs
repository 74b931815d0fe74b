//! Parity coding of a model node (`resilience: {parity: ...}`), after "Parity Models:
//! Erasure-Coded Resilience for Prediction Serving Systems" (ParM, §3).
//!
//! A coding group of `k` queries is encoded into one parity query, which a parity model answers so
//! that one lost reply in the group can be reconstructed from the others. Rules: `k ≥ 2` (a single
//! query has no group to reconstruct from); the parity model takes and returns the deployed model's
//! tensors (same names, types and shapes), since its output is decoded together with the deployed
//! model's; the `concat` encoder (downsample each query and tile them into one image) needs `k` = 2
//! or 4 and one input holding a square single-channel image with an even side, the layouts it
//! tiles exactly.

use super::types::fixed_shape;
use super::{node_path, Validator};
use crate::onnx::{read_metadata_under, ModelMetadata};
use crate::spec::{ModelSpec, ParityEncoder};

/// The output a parity-coded model node adds: 1 for a reconstructed row, 0 for a real one.
pub const RECONSTRUCTED_OUTPUT: &str = "reconstructed";

impl Validator<'_, '_> {
    /// Checks node `id`'s parity coding against the deployed model's signature `deployed`. True
    /// when the node is parity-coded and every rule holds.
    pub(super) fn check_parity(
        &mut self,
        id: &str,
        m: &ModelSpec,
        deployed: &ModelMetadata,
    ) -> bool {
        let Some(p) = m.resilience.as_ref().and_then(|r| r.parity.as_ref()) else {
            return false;
        };
        let path_field = node_path(id, "resilience.parity.parity_model");
        if p.k.value < 2 {
            self.error(
                node_path(id, "resilience.parity.k"),
                p.k.location,
                format!(
                    "node `{id}`: a coding group needs `k` ≥ 2, got {}",
                    p.k.value
                ),
            );
            return false;
        }
        if p.encoder.value == ParityEncoder::Concat && !concat_fits(p.k.value, deployed) {
            self.error(
                node_path(id, "resilience.parity.encoder"),
                p.encoder.location,
                format!("node `{id}`: the `concat` encoder needs k = 2 or 4 and one input holding a square single-channel image with an even side"),
            );
            return false;
        }
        let path = self.base_dir.join(&p.parity_model.value);
        let meta = match read_metadata_under(&path, self.files) {
            Ok(meta) => meta,
            Err(e) => {
                self.error(
                    path_field,
                    p.parity_model.location,
                    format!("node `{id}`: parity model: {e}"),
                );
                return false;
            }
        };
        if meta.inputs != deployed.inputs || meta.outputs != deployed.outputs {
            self.error(
                path_field,
                p.parity_model.location,
                format!(
                    "node `{id}`: the parity model {} must take and return the deployed model's tensors (same names, types and shapes)",
                    path.display()
                ),
            )
            .help = Some("train it from the deployed model: `weir parity train --deployed ...`".into());
            return false;
        }
        true
    }
}

/// Whether the downsample-and-tile encoder fits groups of `k` queries of `deployed`: `k` = 2 or 4
/// and one input holding a square single-channel image with an even side.
fn concat_fits(k: usize, deployed: &ModelMetadata) -> bool {
    let features: Option<usize> = match deployed.inputs.as_slice() {
        [only] => fixed_shape(&only.dims[1..]).map(|dims| dims.iter().product()),
        _ => None,
    };
    let side = features.map(|f| ((f as f64).sqrt().round() as usize, f));
    matches!(k, 2 | 4) && side.is_some_and(|(s, f)| s * s == f && s % 2 == 0)
}

#[cfg(test)]
mod tests {
    use super::concat_fits;
    use crate::onnx::{ElementType, ModelMetadata, TensorInfo};
    use crate::tensor::{DType, Dim};

    fn image(features: usize) -> ModelMetadata {
        ModelMetadata {
            inputs: vec![TensorInfo {
                name: "x".into(),
                element: ElementType::Supported(DType::F32),
                dims: vec![Dim::Dynamic, Dim::Fixed(features)],
                names: vec![None, None],
            }],
            outputs: Vec::new(),
            overridable: Vec::new(),
        }
    }

    #[test]
    fn the_concat_encoder_tiles_two_or_four_square_images_with_an_even_side() {
        assert!(concat_fits(2, &image(28 * 28)));
        assert!(concat_fits(4, &image(8 * 8)));
        assert!(!concat_fits(3, &image(28 * 28)));
        assert!(!concat_fits(2, &image(7 * 7)));
        assert!(!concat_fits(2, &image(28 * 27)));
    }
}
