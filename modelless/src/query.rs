//! What a request asks of the store: its target (a task, or a variant named as the model or by the
//! `variant` parameter), its requirements from `parameters` (`latency_ms`, `min_accuracy`,
//! `max_cost`) and its rows, each refused with the field that is wrong.

use serde_json::{Map, Value};
use weir_connectors::oip::{InferRequest, OipError};
use weir_infaas::query::{Query, Requirements, Target};

use crate::{bad, ModelLessServer};

/// The parameter naming a variant explicitly on a task.
const VARIANT_PARAMETER: &str = "variant";

impl ModelLessServer {
    /// What `request` for `name` asks for.
    pub(crate) fn query(
        &self,
        name: &str,
        request: &InferRequest,
    ) -> Result<(String, Query), OipError> {
        let parameters: Map<String, Value> = match request.parameters.as_deref() {
            Some(text) => {
                serde_json::from_str(text).map_err(|_| bad("parameters", "not a JSON object"))?
            }
            None => Map::new(),
        };
        let requirements =
            Requirements::from_parameters(&parameters).map_err(|e| bad(e.field, e.message))?;
        let (task, target) = match (
            self.repository.variant(name),
            parameters.get(VARIANT_PARAMETER),
        ) {
            (Some(v), _) => (v.task.clone(), Target::Variant(name.to_string())),
            (None, Some(Value::String(v))) => match self.repository.variant(v) {
                Some(found) if found.task == name && self.served(found) => {
                    (name.to_string(), Target::Variant(v.clone()))
                }
                _ => {
                    return Err(bad(
                        "parameters.variant",
                        format!(
                            "task `{name}` has no variant `{}` served here",
                            weir_connectors::echo::quote(v)
                        ),
                    ))
                }
            },
            (None, Some(_)) => return Err(bad("parameters.variant", "must be a variant's name")),
            (None, None) => (name.to_string(), Target::Task(name.to_string())),
        };
        let rows = self.rows(&task, request)?;
        Ok((
            task,
            Query {
                target,
                requirements,
                batch: rows,
            },
        ))
    }

    /// Rows the request holds: the leading dimension when its first input carries a batch
    /// dimension beyond the task's per-row shape.
    pub(crate) fn rows(&self, task: &str, request: &InferRequest) -> Result<u32, OipError> {
        let Some(sig) = self.repository.task_signature(task) else {
            return Ok(1);
        };
        let Some(first) = request.inputs.first() else {
            return Err(bad("inputs", "no inputs"));
        };
        let per_row = sig
            .inputs
            .iter()
            .find(|i| i.name == first.name)
            .map(|i| i.dims.len().saturating_sub(1));
        let rows = match per_row {
            Some(rank) if first.shape.len() == rank + 1 => first.shape[0],
            _ => 1,
        };
        u32::try_from(rows).map_err(|_| bad("inputs[0].shape", "too many rows"))
    }
}
