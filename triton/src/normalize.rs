//! The defaults Triton's server writes into every effective configuration, so that weir's
//! `/config` shows what Triton's would (`model_config_utils.cc`, `NormalizeModelConfig` and
//! `NormalizeInstanceGroup`, `SetDefaultInstanceCount`):
//!
//! - `version_policy` left out is `latest { num_versions: 1 }` ([`version_policy_default`],
//!   applied before versions are chosen);
//! - `dynamic_batching` without `preferred_batch_size` gets `[max_batch_size]` (when it is
//!   above 0);
//! - `sequence_batching` without `max_sequence_idle_microseconds` gets one second;
//! - a model that is not an ensemble gets `optimization { input_pinned_memory { enable: true }
//!   output_pinned_memory { enable: true } }` unless it says otherwise;
//! - instance groups: none given is one group named after the model; a group without a name is
//!   `<model>_<position>`; `KIND_AUTO` becomes `KIND_CPU` when there is no GPU, which is always
//!   so in-process; a count below 1 becomes 2 for a `KIND_CPU` group of the ONNX Runtime backend
//!   (Triton's `default_cpu_instance_count`) and 1 otherwise;
//! - an ensemble gets `model_transaction_policy { decoupled: false }`, as Triton's ensemble
//!   validation sets it (no step of a weir ensemble is decoupled).

use crate::autocomplete::{ModelKind, ONNX_BACKEND};
use crate::proto::inference::model_config::SchedulingChoice;
use crate::proto::inference::model_instance_group::Kind as GroupKind;
use crate::proto::inference::model_optimization_policy::PinnedMemoryBuffer;
use crate::proto::inference::model_version_policy::{Latest, PolicyChoice};
use crate::proto::inference::{
    ModelConfig, ModelInstanceGroup, ModelOptimizationPolicy, ModelTransactionPolicy,
    ModelVersionPolicy,
};

/// Triton's idle time of a sequence when the configuration gives none (one second).
pub const SEQUENCE_IDLE_DEFAULT_MICROSECONDS: u64 = 1_000_000;

/// Instances of a KIND_CPU group of the ONNX Runtime backend when the count is left out.
pub const DEFAULT_CPU_INSTANCE_COUNT: i32 = 2;

/// Fills `version_policy` when left out.
pub fn version_policy_default(config: &mut ModelConfig) {
    if config.version_policy.is_none() {
        config.version_policy = Some(ModelVersionPolicy {
            policy_choice: Some(PolicyChoice::Latest(Latest { num_versions: 1 })),
        });
    }
}

/// Writes Triton's defaults into `config`, a model of `kind`.
pub fn normalize(config: &mut ModelConfig, kind: ModelKind) {
    version_policy_default(config);
    let max_batch_size = config.max_batch_size;
    match &mut config.scheduling_choice {
        Some(SchedulingChoice::DynamicBatching(db))
            if db.preferred_batch_size.is_empty() && max_batch_size > 0 =>
        {
            db.preferred_batch_size.push(max_batch_size);
        }
        Some(SchedulingChoice::SequenceBatching(seq))
            if seq.max_sequence_idle_microseconds == 0 =>
        {
            seq.max_sequence_idle_microseconds = SEQUENCE_IDLE_DEFAULT_MICROSECONDS;
        }
        _ => {}
    }
    match kind {
        ModelKind::Ensemble => {
            config.model_transaction_policy = Some(ModelTransactionPolicy { decoupled: false });
        }
        ModelKind::Onnx => {
            let optimization = config
                .optimization
                .get_or_insert_with(ModelOptimizationPolicy::default);
            for pinned in [
                &mut optimization.input_pinned_memory,
                &mut optimization.output_pinned_memory,
            ] {
                pinned.get_or_insert(PinnedMemoryBuffer { enable: true });
            }
            instance_groups(config);
        }
    }
}

fn instance_groups(config: &mut ModelConfig) {
    if config.instance_group.is_empty() {
        config.instance_group.push(ModelInstanceGroup {
            name: config.name.clone(),
            ..ModelInstanceGroup::default()
        });
    }
    let onnx = config.backend == ONNX_BACKEND;
    for (i, group) in config.instance_group.iter_mut().enumerate() {
        if group.name.is_empty() {
            group.name = format!("{}_{i}", config.name);
        }
        if group.kind() == GroupKind::Auto {
            group.set_kind(GroupKind::Cpu);
        }
        if group.count < 1 {
            group.count = if onnx && group.kind() == GroupKind::Cpu {
                DEFAULT_CPU_INSTANCE_COUNT
            } else {
                1
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::ModelDynamicBatching;

    #[test]
    fn an_onnx_model_gets_triton_defaults() {
        let mut c = ModelConfig {
            name: "m".into(),
            backend: ONNX_BACKEND.into(),
            max_batch_size: 8,
            scheduling_choice: Some(SchedulingChoice::DynamicBatching(
                ModelDynamicBatching::default(),
            )),
            instance_group: vec![
                ModelInstanceGroup::default(),
                ModelInstanceGroup {
                    name: "big".into(),
                    count: 3,
                    ..ModelInstanceGroup::default()
                },
            ],
            ..ModelConfig::default()
        };
        normalize(&mut c, ModelKind::Onnx);
        let Some(SchedulingChoice::DynamicBatching(db)) = &c.scheduling_choice else {
            panic!("dynamic batching kept");
        };
        assert_eq!(db.preferred_batch_size, vec![8]);
        assert_eq!(c.instance_group[0].name, "m_0");
        assert_eq!(c.instance_group[0].count, 2);
        assert_eq!(c.instance_group[0].kind(), GroupKind::Cpu);
        assert_eq!(
            (c.instance_group[1].name.as_str(), c.instance_group[1].count),
            ("big", 3)
        );
        let opt = c.optimization.unwrap();
        assert_eq!(
            opt.input_pinned_memory,
            Some(PinnedMemoryBuffer { enable: true })
        );
        let Some(PolicyChoice::Latest(l)) = c.version_policy.unwrap().policy_choice else {
            panic!("latest");
        };
        assert_eq!(l.num_versions, 1);
    }

    #[test]
    fn an_ensemble_gets_no_instance_groups_or_optimization() {
        let mut c = ModelConfig {
            name: "e".into(),
            ..ModelConfig::default()
        };
        normalize(&mut c, ModelKind::Ensemble);
        assert!(c.instance_group.is_empty());
        assert!(c.optimization.is_none());
        assert_eq!(
            c.model_transaction_policy,
            Some(ModelTransactionPolicy { decoupled: false })
        );
    }
}
