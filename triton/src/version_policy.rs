//! `version_policy`: which of a model's version folders are served.
//!
//! As Triton's `VersionsToLoad` (`model_lifecycle.cc`): `latest { num_versions: n }` serves the
//! `n` highest versions present (a policy left out is `latest { num_versions: 1 }`, filled in
//! by normalisation), `all` serves every one, and `specific { versions: [...] }` serves those
//! listed that have a folder; a listed version without one is reported, not fatal. A policy that
//! selects nothing is an error: Triton refuses a model with no version to serve.

use std::collections::BTreeSet;

use crate::error::LoadError;
use crate::proto::inference::model_version_policy::PolicyChoice;
use crate::proto::inference::ModelVersionPolicy;

/// The versions `policy` serves out of `present`, and a note for each listed version that has
/// no folder.
///
/// # Errors
/// [`LoadError::NoVersions`] when the policy selects no version.
pub fn served_versions(
    policy: &ModelVersionPolicy,
    present: &BTreeSet<u64>,
) -> Result<(BTreeSet<u64>, Vec<String>), LoadError> {
    let mut notes = Vec::new();
    let served: BTreeSet<u64> = match &policy.policy_choice {
        None => present.iter().next_back().copied().into_iter().collect(),
        Some(PolicyChoice::Latest(latest)) => {
            let n = usize::try_from(latest.num_versions).unwrap_or(usize::MAX);
            present.iter().rev().take(n).copied().collect()
        }
        Some(PolicyChoice::All(_)) => present.clone(),
        Some(PolicyChoice::Specific(specific)) => {
            let mut chosen = BTreeSet::new();
            for &v in &specific.versions {
                match u64::try_from(v).ok().filter(|v| present.contains(v)) {
                    Some(v) => {
                        chosen.insert(v);
                    }
                    None => notes.push(format!(
                        "version_policy.specific.versions lists {v}, but there is no version folder {v}"
                    )),
                }
            }
            chosen
        }
    };
    if served.is_empty() {
        let reason = if present.is_empty() {
            "the model folder has no numbered version folder".to_string()
        } else {
            let shown: Vec<String> = present.iter().map(u64::to_string).collect();
            format!(
                "version_policy selects none of the version folders present ({})",
                shown.join(", ")
            )
        };
        return Err(LoadError::NoVersions { reason });
    }
    Ok((served, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::inference::model_version_policy::{All, Latest, Specific};

    fn policy(choice: PolicyChoice) -> ModelVersionPolicy {
        ModelVersionPolicy {
            policy_choice: Some(choice),
        }
    }

    fn set(v: &[u64]) -> BTreeSet<u64> {
        v.iter().copied().collect()
    }

    #[test]
    fn latest_all_and_specific_select_as_triton_does() {
        let present = set(&[1, 2, 7, 10]);
        let latest2 = policy(PolicyChoice::Latest(Latest { num_versions: 2 }));
        assert_eq!(
            served_versions(&latest2, &present).unwrap().0,
            set(&[7, 10])
        );
        let default = ModelVersionPolicy::default();
        assert_eq!(served_versions(&default, &present).unwrap().0, set(&[10]));
        let all = policy(PolicyChoice::All(All {}));
        assert_eq!(served_versions(&all, &present).unwrap().0, present);
        let specific = policy(PolicyChoice::Specific(Specific {
            versions: vec![2, 3, -1],
        }));
        let (served, notes) = served_versions(&specific, &present).unwrap();
        assert_eq!(served, set(&[2]));
        assert_eq!(notes.len(), 2, "{notes:?}");
    }

    #[test]
    fn a_policy_selecting_nothing_is_an_error() {
        let latest0 = policy(PolicyChoice::Latest(Latest { num_versions: 0 }));
        assert!(served_versions(&latest0, &set(&[1])).is_err());
        let none = policy(PolicyChoice::Specific(Specific { versions: vec![5] }));
        let e = served_versions(&none, &set(&[1, 2])).unwrap_err();
        assert!(e.to_string().contains("(1, 2)"), "{e}");
        assert!(served_versions(&ModelVersionPolicy::default(), &set(&[])).is_err());
    }
}
