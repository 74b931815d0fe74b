//! A model node's `warmup:`: its counts, where its values come from, and a concrete per-request
//! shape for every model input (from `shape:` where the model leaves a dimension free), resolved
//! into the [`WarmupSample`] the node's executor runs. A warm-up file is only located here (a
//! regular file within the graph's file rules); the graph's loader reads it against the model.

use super::{node_path, CallShape, Validator};
use crate::diagnostic::Location;
use crate::onnx::{ElementType, ModelMetadata};
use crate::paths::resolve_input;
use crate::spec::{ModelSpec, WarmupData, WarmupSpec};
use crate::warmup::{
    fixed_request_shape, request_shape, WarmupInput, WarmupInputs, WarmupSample, WarmupValues,
    MAX_WARMUP_RUNS,
};

impl Validator<'_, '_> {
    /// The node's warm-up sample (none without `warmup:`, or when a rule fails).
    pub(super) fn check_warmup(
        &mut self,
        id: &str,
        m: &ModelSpec,
        meta: &ModelMetadata,
        call: CallShape,
    ) -> Vec<WarmupSample> {
        let Some(w) = &m.warmup else {
            return Vec::new();
        };
        let before = self.diags.len();
        let field = |f: &str| node_path(id, &format!("warmup.{f}"));
        if m.state.is_some() {
            self.error(
                node_path(id, "warmup"),
                w.location,
                format!("node `{id}`: `warmup` is not supported on a stateful node (its state inputs have no warm-up values)"),
            );
            return Vec::new();
        }
        if !(1..=MAX_WARMUP_RUNS).contains(&w.runs.value) {
            self.error(
                field("runs"),
                w.runs.location,
                format!(
                    "node `{id}`: `warmup.runs` is {}; it takes 1 to {MAX_WARMUP_RUNS} calls per session",
                    w.runs.value
                ),
            );
        }
        let most_rows = call.call_rows(m.batching.max_size);
        let rows = w.batch_size.value;
        if rows == 0 || rows as usize > most_rows {
            self.error(
                field("batch_size"),
                w.batch_size.location,
                format!("node `{id}`: `warmup.batch_size` is {rows}; a call of this node holds 1 to {most_rows} rows"),
            );
        }
        let inputs = match &w.file {
            Some(file) => self.warmup_file(id, w, file),
            None => self.generated_inputs(id, w, w.location, meta, call),
        };
        let Some(inputs) = inputs.filter(|_| self.diags.len() == before) else {
            return Vec::new();
        };
        vec![WarmupSample {
            name: "warmup".into(),
            runs: w.runs.value,
            rows,
            inputs,
        }]
    }

    /// `file:`, alone: located under the graph's folder and file rules.
    fn warmup_file(
        &mut self,
        id: &str,
        w: &WarmupSpec,
        file: &crate::spec::Spanned<std::path::PathBuf>,
    ) -> Option<WarmupInputs> {
        let field = |f: &str| node_path(id, &format!("warmup.{f}"));
        let clashes = [
            ("data", w.data.as_ref().map(|d| d.location)),
            ("seed", w.seed.as_ref().map(|s| s.location)),
            ("shape", w.shape.values().next().map(|s| s.location)),
        ];
        for (name, location) in clashes {
            if let Some(location) = location {
                self.error(
                    field(name),
                    location,
                    format!("node `{id}`: `warmup.{name}` describes generated values, and `warmup.file` gives the values (with their shapes)"),
                )
                .help = Some(format!("remove `{name}` or `file`"));
            }
        }
        let path = self.base_dir.join(&file.value);
        match resolve_input(&path, self.files) {
            Ok(resolved) => Some(WarmupInputs::File(resolved)),
            Err(e) => {
                self.error(
                    field("file"),
                    file.location,
                    format!("node `{id}`: `warmup.file`: {e}"),
                );
                None
            }
        }
    }

    /// Zeros or random values for every model input, each of its `shape:` or the model's own.
    fn generated_inputs(
        &mut self,
        id: &str,
        w: &WarmupSpec,
        at: Location,
        meta: &ModelMetadata,
        call: CallShape,
    ) -> Option<WarmupInputs> {
        let field = |f: &str| node_path(id, &format!("warmup.{f}"));
        let data = w.data.as_ref().map_or(WarmupData::Zeros, |d| d.value);
        let values = match (data, &w.seed) {
            (WarmupData::Random, seed) => WarmupValues::Random {
                seed: seed.as_ref().map_or(0, |s| s.value),
            },
            (WarmupData::Zeros, None) => WarmupValues::Zeros,
            (WarmupData::Zeros, Some(seed)) => {
                self.error(
                    field("seed"),
                    seed.location,
                    format!(
                        "node `{id}`: `warmup.seed` seeds `data: random`, and the values are zeros"
                    ),
                );
                return None;
            }
        };
        for (name, shape) in &w.shape {
            if !meta.inputs.iter().any(|i| &i.name == name) {
                let known: Vec<&str> = meta.inputs.iter().map(|i| i.name.as_str()).collect();
                self.error(
                    field(&format!("shape.{name}")),
                    shape.location,
                    format!("node `{id}`: `warmup.shape` names `{name}`, which is not an input of the model (its inputs: {})", known.join(", ")),
                );
            }
        }
        let batch_dim = call.has_batch_dim();
        let mut inputs = Vec::with_capacity(meta.inputs.len());
        for info in &meta.inputs {
            let ElementType::Supported(dtype) = info.element else {
                // The model's own check refuses the file.
                return None;
            };
            let shape = match w.shape.get(&info.name) {
                Some(given) => {
                    match request_shape(info, batch_dim, &given.value, w.batch_size.value) {
                        Ok(shape) => shape,
                        Err(e) => {
                            self.error(
                                field(&format!("shape.{}", info.name)),
                                given.location,
                                format!("node `{id}`: `warmup.shape.{}` {e}", info.name),
                            );
                            continue;
                        }
                    }
                }
                None => match fixed_request_shape(info, batch_dim) {
                    Some(shape) => match request_shape(
                        info,
                        batch_dim,
                        &as_written(&shape),
                        w.batch_size.value,
                    ) {
                        Ok(shape) => shape,
                        Err(e) => {
                            self.error(
                                field("batch_size"),
                                w.batch_size.location,
                                format!("node `{id}`: model input `{}` {e}", info.name),
                            );
                            continue;
                        }
                    },
                    None => {
                        self.error(
                            field(&format!("shape.{}", info.name)),
                            at,
                            format!("node `{id}`: model input `{}` has free dimensions, so its warm-up shape must be given", info.name),
                        )
                        .help = Some(format!(
                            "add `shape: {{{}: [...]}}` under `warmup` with one size per dimension of a request",
                            info.name
                        ));
                        continue;
                    }
                },
            };
            inputs.push(WarmupInput {
                name: info.name.clone(),
                dtype,
                shape,
                values: values.clone(),
            });
        }
        Some(WarmupInputs::Tensors(inputs))
    }
}

/// `shape` as a spec writes it.
fn as_written(shape: &[usize]) -> Vec<i64> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect()
}
