//! Ensembles: `ensemble_scheduling` steps, each running a model on named ensemble tensors
//! (`input_map`: model input → tensor, `output_map`: model output → tensor), checked as a
//! dataflow and put in an order in which every step runs after the steps it reads from.
//!
//! Two passes, as in Triton. [`order`] needs only the ensemble's configuration
//! (`model_config_utils.cc`, `ValidateEnsembleSchedulingConfig`, `BuildEnsembleGraph`): every step
//! names a model and maps inputs and outputs; no tensor is written twice (by two steps, or by a
//! step and the ensemble's inputs); every tensor a step reads is an ensemble input or some step's
//! output; every ensemble output is written by a step; nothing written goes unread; and the
//! steps have no cycle. [`check_steps`] needs the step models' effective configurations
//! (`ensemble_utils.cc`, `ValidateEnsembleConfig`, `ValidateTensorMapping`): the maps name real
//! inputs and outputs, every required input is mapped, a batching ensemble allows no larger batch
//! than a step, and each tensor has one data type and compatible dims wherever it appears.
//!
//! Errors name the step by its position and model, and the tensor.

use std::collections::{BTreeMap, BTreeSet};

use crate::datatype;
use crate::error::{EnsembleError, LoadError};
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_ensembling::Step;
use crate::proto::inference::ModelConfig;
use crate::signature::shape_text;

/// The steps of an ensemble's configuration (empty for a model that is not one).
pub fn steps(config: &ModelConfig) -> &[Step] {
    match &config.scheduling_choice {
        Some(SchedulingChoice::EnsembleScheduling(e)) => &e.step,
        _ => &[],
    }
}

fn step_name(i: usize, step: &Step) -> String {
    format!("step[{i}] (model `{}`)", step.model_name)
}

/// Who writes a tensor.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    Input,
    Step(usize),
}

/// The steps of the ensemble `config` in an order that runs each after those it reads from
/// (ties kept in the order written).
///
/// # Errors
/// [`LoadError::Invalid`] for a step missing its model or maps; [`LoadError::Ensemble`] for a
/// dataflow Triton would not run.
pub fn order(config: &ModelConfig) -> Result<Vec<usize>, LoadError> {
    let steps = steps(config);
    if steps.is_empty() {
        return Err(LoadError::invalid(
            "ensemble_scheduling.step",
            "an ensemble has at least one step",
        ));
    }
    for (i, step) in steps.iter().enumerate() {
        for (field, empty) in [
            ("model_name", step.model_name.is_empty()),
            ("input_map", step.input_map.is_empty()),
            ("output_map", step.output_map.is_empty()),
        ] {
            if empty {
                return Err(LoadError::invalid(
                    format!("ensemble_scheduling.step[{i}].{field}"),
                    "must be given",
                ));
            }
        }
    }
    let mut writers: BTreeMap<&str, Writer> = config
        .input
        .iter()
        .map(|t| (t.name.as_str(), Writer::Input))
        .collect();
    for (i, step) in steps.iter().enumerate() {
        for tensor in sorted_values(&step.output_map) {
            if let Some(first) = writers.insert(tensor, Writer::Step(i)) {
                return Err(EnsembleError::WrittenTwice {
                    tensor: tensor.to_string(),
                    first: match first {
                        Writer::Input => "the ensemble's inputs".into(),
                        Writer::Step(j) => step_name(j, &steps[j]),
                    },
                    step: i,
                    model: step.model_name.clone(),
                }
                .into());
            }
        }
    }
    // Predecessors of each step, with the tensor that links them.
    let mut reads: Vec<Vec<(usize, &str)>> = vec![Vec::new(); steps.len()];
    let mut read: BTreeSet<&str> = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        for tensor in sorted_values(&step.input_map) {
            read.insert(tensor);
            match writers.get(tensor) {
                None => {
                    return Err(EnsembleError::NoProducer {
                        step: i,
                        model: step.model_name.clone(),
                        tensor: tensor.to_string(),
                    }
                    .into())
                }
                Some(Writer::Step(j)) => reads[i].push((*j, tensor)),
                Some(Writer::Input) => {}
            }
        }
    }
    for output in &config.output {
        if !matches!(writers.get(output.name.as_str()), Some(Writer::Step(_))) {
            return Err(EnsembleError::OutputNotWritten {
                tensor: output.name.clone(),
            }
            .into());
        }
    }
    for (tensor, writer) in &writers {
        let is_output = config.output.iter().any(|o| o.name == *tensor);
        if !read.contains(tensor) && !is_output {
            return Err(EnsembleError::Unused {
                tensor: tensor.to_string(),
                what: match writer {
                    Writer::Input => "an ensemble input".into(),
                    Writer::Step(j) => format!("written by {}", step_name(*j, &steps[*j])),
                },
            }
            .into());
        }
    }
    topological(steps, &reads)
}

fn sorted_values(map: &std::collections::HashMap<String, String>) -> Vec<&str> {
    let mut entries: Vec<(&String, &String)> = map.iter().collect();
    entries.sort();
    entries.into_iter().map(|(_, v)| v.as_str()).collect()
}

/// Kahn's order over the steps; a cycle is reported through the steps it passes.
fn topological(steps: &[Step], reads: &[Vec<(usize, &str)>]) -> Result<Vec<usize>, LoadError> {
    let mut waiting: Vec<usize> = reads
        .iter()
        .map(|r| r.iter().map(|(j, _)| *j).collect::<BTreeSet<_>>().len())
        .collect();
    let mut ready: BTreeSet<usize> = (0..steps.len()).filter(|&i| waiting[i] == 0).collect();
    let mut done = vec![false; steps.len()];
    let mut out = Vec::with_capacity(steps.len());
    while let Some(i) = ready.pop_first() {
        done[i] = true;
        out.push(i);
        for (k, r) in reads.iter().enumerate() {
            if !done[k] && r.iter().any(|(j, _)| *j == i) {
                waiting[k] -= 1;
                if waiting[k] == 0 {
                    ready.insert(k);
                }
            }
        }
    }
    if out.len() == steps.len() {
        return Ok(out);
    }
    // Walk back from a step left over along predecessors that are left over too: each has one,
    // or it would have run, so the walk meets a step twice.
    let Some(start) = (0..steps.len()).find(|&i| !done[i]) else {
        return Ok(out);
    };
    let mut path: Vec<(usize, &str)> = Vec::new();
    let mut at = start;
    while !path.iter().any(|(s, _)| *s == at) {
        let Some(&(prev, tensor)) = reads[at].iter().find(|(j, _)| !done[*j]) else {
            break;
        };
        path.push((at, tensor));
        at = prev;
    }
    let from = path.iter().position(|(s, _)| *s == at).unwrap_or(0);
    let cycle = &path[from..];
    let links = cycle
        .iter()
        .enumerate()
        .map(|(n, (s, tensor))| {
            let next = cycle.get(n + 1).map_or(at, |(p, _)| *p);
            let subject = if n == 0 {
                format!("{} reads", step_name(*s, &steps[*s]))
            } else {
                "reads".into()
            };
            format!(
                "{subject} `{tensor}` from {}",
                step_name(next, &steps[next])
            )
        })
        .collect();
    Err(EnsembleError::Cycle { links }.into())
}

/// Dims of a tensor where it appears, for the consistency check.
struct Appearance {
    origin: String,
    data_type: i32,
    dims: Vec<i64>,
    full: Vec<i64>,
}

impl Appearance {
    fn new(origin: String, data_type: i32, dims: &[i64], batching: bool) -> Self {
        let full = if batching {
            std::iter::once(-1).chain(dims.iter().copied()).collect()
        } else {
            dims.to_vec()
        };
        Appearance {
            origin,
            data_type,
            dims: dims.to_vec(),
            full,
        }
    }
}

fn wildcard_equal(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(&x, &y)| x == y || x == -1 || y == -1)
}

/// Checks the ensemble `config` against the effective configurations of its steps' models,
/// `models[i]` for step `i`.
///
/// # Errors
/// [`LoadError::Ensemble`] for a map naming what the model lacks, an unmapped input or a tensor
/// seen with two types or shapes; [`LoadError::Invalid`] for a step allowing a smaller batch.
pub fn check_steps(config: &ModelConfig, models: &[&ModelConfig]) -> Result<(), LoadError> {
    let batching = config.max_batch_size > 0;
    let mut seen: BTreeMap<String, Appearance> = BTreeMap::new();
    let mut note = |tensor: &str, a: Appearance| -> Result<(), LoadError> {
        match seen.get(tensor) {
            None => {
                seen.insert(tensor.to_string(), a);
                Ok(())
            }
            Some(first) => {
                let shown = |x: &Appearance| {
                    format!(
                        "{} {} from {}",
                        datatype::name(x.data_type),
                        shape_text(&x.full),
                        x.origin
                    )
                };
                if first.data_type != a.data_type {
                    return Err(EnsembleError::Inconsistent {
                        tensor: tensor.to_string(),
                        message: format!("data types differ: {} but {}", shown(first), shown(&a)),
                    }
                    .into());
                }
                if !wildcard_equal(&first.dims, &a.dims) && !wildcard_equal(&first.full, &a.full) {
                    return Err(EnsembleError::Inconsistent {
                        tensor: tensor.to_string(),
                        message: format!("shapes differ: {} but {}", shown(first), shown(&a)),
                    }
                    .into());
                }
                Ok(())
            }
        }
    };
    for t in &config.input {
        let dims = t.reshape.as_ref().map_or(&t.dims, |r| &r.shape);
        note(
            &t.name,
            Appearance::new("the ensemble's inputs".into(), t.data_type, dims, batching),
        )?;
    }
    for t in &config.output {
        let dims = t.reshape.as_ref().map_or(&t.dims, |r| &r.shape);
        note(
            &t.name,
            Appearance::new("the ensemble's outputs".into(), t.data_type, dims, batching),
        )?;
    }
    for (i, (step, model)) in steps(config).iter().zip(models).enumerate() {
        let mapping = |map: &'static str, message: String| -> LoadError {
            EnsembleError::Mapping {
                step: i,
                map,
                model: step.model_name.clone(),
                message,
            }
            .into()
        };
        if model.max_batch_size != 0 && model.max_batch_size < config.max_batch_size {
            return Err(LoadError::invalid(
                format!("ensemble_scheduling.step[{i}]"),
                format!(
                    "the ensemble allows batches of {}, but model `{}` only {}",
                    config.max_batch_size, step.model_name, model.max_batch_size
                ),
            ));
        }
        let step_batching = model.max_batch_size > 0;
        let mut keys: Vec<&String> = step.input_map.keys().collect();
        keys.sort();
        for key in keys {
            if !model.input.iter().any(|t| &t.name == key) {
                let names: Vec<&str> = model.input.iter().map(|t| t.name.as_str()).collect();
                return Err(mapping(
                    "input_map",
                    format!(
                        "`{key}` is not an input of the model (its inputs: {})",
                        names.join(", ")
                    ),
                ));
            }
        }
        for t in &model.input {
            match step.input_map.get(&t.name) {
                Some(tensor) => note(
                    tensor,
                    Appearance::new(
                        format!("{} input `{}`", step_name(i, step), t.name),
                        t.data_type,
                        &t.dims,
                        step_batching,
                    ),
                )?,
                None if t.optional => {}
                None => {
                    return Err(mapping(
                        "input_map",
                        format!(
                            "input `{}` of the model is not mapped to any tensor",
                            t.name
                        ),
                    ))
                }
            }
        }
        let mut outputs: Vec<(&String, &String)> = step.output_map.iter().collect();
        outputs.sort();
        for (key, tensor) in outputs {
            let Some(t) = model.output.iter().find(|t| &t.name == key) else {
                let names: Vec<&str> = model.output.iter().map(|t| t.name.as_str()).collect();
                return Err(mapping(
                    "output_map",
                    format!(
                        "`{key}` is not an output of the model (its outputs: {})",
                        names.join(", ")
                    ),
                ));
            };
            note(
                tensor,
                Appearance::new(
                    format!("{} output `{}`", step_name(i, step), t.name),
                    t.data_type,
                    &t.dims,
                    step_batching,
                ),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::{ModelEnsembling, ModelInput, ModelOutput};

    fn step(model: &str, inputs: &[(&str, &str)], outputs: &[(&str, &str)]) -> Step {
        Step {
            model_name: model.into(),
            model_version: -1,
            input_map: inputs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            output_map: outputs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Step::default()
        }
    }

    fn ensemble(inputs: &[&str], outputs: &[&str], steps: Vec<Step>) -> ModelConfig {
        ModelConfig {
            name: "ens".into(),
            platform: "ensemble".into(),
            input: inputs
                .iter()
                .map(|n| ModelInput {
                    name: n.to_string(),
                    ..ModelInput::default()
                })
                .collect(),
            output: outputs
                .iter()
                .map(|n| ModelOutput {
                    name: n.to_string(),
                    ..ModelOutput::default()
                })
                .collect(),
            scheduling_choice: Some(SchedulingChoice::EnsembleScheduling(ModelEnsembling {
                step: steps,
                ..ModelEnsembling::default()
            })),
            ..ModelConfig::default()
        }
    }

    #[test]
    fn steps_are_ordered_by_what_they_read() {
        let c = ensemble(
            &["raw"],
            &["label"],
            vec![
                step("classify", &[("x", "features")], &[("y", "label")]),
                step("prep", &[("in", "raw")], &[("out", "features")]),
            ],
        );
        assert_eq!(order(&c).unwrap(), vec![1, 0]);
    }

    #[test]
    fn a_cycle_is_refused_through_its_steps_and_tensors() {
        let c = ensemble(
            &["raw"],
            &["out"],
            vec![
                step("a", &[("x", "raw"), ("y", "t2")], &[("o", "t1")]),
                step("b", &[("x", "t1")], &[("o", "t2")]),
                step("c", &[("x", "t1")], &[("o", "out")]),
            ],
        );
        let e = order(&c).unwrap_err().to_string();
        assert!(
            e.contains("step[0] (model `a`) reads `t2` from step[1] (model `b`), which reads `t1` from step[0] (model `a`)"),
            "{e}"
        );
    }

    #[test]
    fn missing_producers_double_writers_and_unused_tensors_are_refused() {
        let no_producer = ensemble(
            &["raw"],
            &["out"],
            vec![step("a", &[("x", "nope")], &[("o", "out")])],
        );
        let e = order(&no_producer).unwrap_err().to_string();
        assert!(e.contains("step[0] (model `a`) reads tensor `nope`"), "{e}");
        let twice = ensemble(
            &["raw"],
            &["out"],
            vec![
                step("a", &[("x", "raw")], &[("o", "out")]),
                step("b", &[("x", "raw")], &[("o", "out")]),
            ],
        );
        let e = order(&twice).unwrap_err().to_string();
        assert!(e.contains("`out` is written twice: by step[0] (model `a`) and by ensemble_scheduling.step[1] (model `b`)"), "{e}");
        let unused = ensemble(
            &["raw", "extra"],
            &["out"],
            vec![step("a", &[("x", "raw")], &[("o", "out")])],
        );
        assert!(order(&unused)
            .unwrap_err()
            .to_string()
            .contains("`extra` is an ensemble input"));
        let unwritten = ensemble(
            &["raw"],
            &["out", "more"],
            vec![step("a", &[("x", "raw")], &[("o", "out")])],
        );
        assert!(order(&unwritten)
            .unwrap_err()
            .to_string()
            .contains("`more`"));
    }
}
