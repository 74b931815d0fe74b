//! Parity coding of a model node (`resilience: {parity: ...}`), after "Parity Models:
//! Erasure-Coded Resilience for Prediction Serving Systems" (ParM, §3).
//!
//! A coding group of `k` queries is encoded into one parity query, which a parity model answers so
//! that one lost reply in the group can be reconstructed from the others. Rules: `k ≥ 2` (a single
//! query has no group to reconstruct from); the parity model takes and returns the deployed model's
//! tensors (same names, types and shapes), since its output is decoded together with the deployed
//! model's; the `concat` encoder (downsample each query and tile them into one image) needs `k` = 2
//! or 4 and one input holding a square single-channel image with an even side, the layouts it
//! tiles exactly. One parity model (`parity_model`) or r of them (`parity_models`, ParM §7), with
//! 1 ≤ r ≤ k; the parity model node's own `batching` and `executor` sizes are at least 1, and
//! its `replicas` follow the node rules (checked with them, in `placement.rs`).

use super::types::fixed_shape;
use super::{node_path, Validator};
use crate::onnx::{read_metadata_under, ModelMetadata};
use crate::spec::{ModelSpec, ParityEncoder, ParitySpec};

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
        let mut ok = self.check_parity_node(id, p);
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
                format!("node `{id}`: the `concat` encoder needs k = 2 or 4 and one input holding a square single-channel image with an even side (H = W, both even)"),
            );
            return false;
        }
        let (field, models) = match (&p.parity_model, &p.parity_models) {
            (Some(_), Some(list)) => {
                self.error(
                    node_path(id, "resilience.parity.parity_models"),
                    list.location,
                    format!("node `{id}`: give `parity_model` (one) or `parity_models` (r of them), not both"),
                );
                return false;
            }
            (None, None) => {
                self.error(
                    node_path(id, "resilience.parity"),
                    p.k.location,
                    format!("node `{id}`: parity coding needs `parity_model` or `parity_models`"),
                )
                .help = Some(
                    "train one from the deployed model: `weir parity train --deployed ...`".into(),
                );
                return false;
            }
            (Some(_), None) => ("resilience.parity.parity_model", p.models()),
            (None, Some(list)) => {
                let r = list.value.len();
                if r == 0 || r > p.k.value {
                    self.error(
                        node_path(id, "resilience.parity.parity_models"),
                        list.location,
                        format!(
                            "node `{id}`: `parity_models` lists {r} parity models; r must be between 1 and k = {}",
                            p.k.value
                        ),
                    );
                    return false;
                }
                ("resilience.parity.parity_models", p.models())
            }
        };
        for (t, model) in models.into_iter().enumerate() {
            let path_field = node_path(id, field);
            let path = self.base_dir.join(&model.value);
            let meta = match read_metadata_under(&path, self.files) {
                Ok(meta) => meta,
                Err(e) => {
                    self.error(
                        path_field,
                        model.location,
                        match p.parity_models {
                            None => format!("node `{id}`: parity model: {e}"),
                            Some(_) => format!("node `{id}`: parity model {t}: {e}"),
                        },
                    );
                    ok = false;
                    continue;
                }
            };
            if meta.inputs != deployed.inputs || meta.outputs != deployed.outputs {
                self.error(
                    path_field,
                    model.location,
                    format!(
                        "node `{id}`: the parity model {} must take and return the deployed model's tensors (same names, types and shapes)",
                        path.display()
                    ),
                )
                .help = Some(format!(
                    "train it from the deployed model: `weir parity train --deployed ... --index {t}`"
                ));
                ok = false;
            }
        }
        ok
    }

    /// The parity model node's own settings: batching and executor sizes at least 1, and no
    /// padded or fixed-size batching (a parity query is coded row position by row position).
    fn check_parity_node(&mut self, id: &str, p: &ParitySpec) -> bool {
        let mut ok = true;
        let mut sizes = Vec::new();
        if let Some(b) = &p.batching {
            sizes.push((b.max_size, "batching.max_size"));
            if b.pad.is_some() || b.fixed_size.is_some() {
                self.error(
                    node_path(id, "resilience.parity.batching"),
                    p.k.location,
                    format!("node `{id}`: the parity model node's batching takes `max_size`, `max_delay_us` and `wait`; `pad` and `fixed_size` do not apply"),
                );
                ok = false;
            }
        }
        if let Some(e) = &p.executor {
            sizes.extend([
                (e.instances, "executor.instances"),
                (e.intra_op_threads, "executor.intra_op_threads"),
                (e.queue_capacity, "executor.queue_capacity"),
            ]);
        }
        for (value, field) in sizes {
            if value == 0 {
                self.error(
                    node_path(id, &format!("resilience.parity.{field}")),
                    p.k.location,
                    format!("node `{id}`: the parity model node's `{field}` must be at least 1"),
                );
                ok = false;
            }
        }
        ok
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
