//! The checks Kubernetes makes when a CustomResourceDefinition is *updated*, beyond those of
//! create (`validate`): what `ValidateCustomResourceDefinitionUpdate` refuses of an established
//! definition (scope and kind, group and plural are immutable) and what
//! `ValidateCustomResourceDefinitionStoredVersions` refuses (a version objects may still be
//! stored in dropped from `spec.versions`), with Kubernetes' field paths and messages.
//!
//! Pure: it compares two manifests and a list of stored versions; it never reads the store
//! (the caller brings `status.storedVersions`) and never decides what is served.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::core::field::{FieldError, Path};

/// What Kubernetes refuses in an update of `old` to `new` (both defaulted, both passed the
/// create checks), given the versions objects may be stored in (`status.storedVersions`).
pub fn check(
    old: &CustomResourceDefinition,
    new: &CustomResourceDefinition,
    stored_versions: &[String],
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let spec = Path::new("spec");
    // A served definition is Established, so Kubernetes' requireImmutableNames holds: these
    // decide how objects are stored and addressed.
    if new.spec.scope != old.spec.scope {
        errs.push(immutable(spec.child("scope"), &new.spec.scope));
    }
    if new.spec.names.kind != old.spec.names.kind {
        errs.push(immutable(spec.child("names").child("kind"), &new.spec.names.kind));
    }
    // These make the definition's name, so a file that changes them names another definition;
    // they are checked all the same, as Kubernetes does.
    if new.spec.group != old.spec.group {
        errs.push(immutable(spec.child("group"), &new.spec.group));
    }
    if new.spec.names.plural != old.spec.names.plural {
        errs.push(immutable(spec.child("names").child("plural"), &new.spec.names.plural));
    }
    errs.extend(stored_versions_check(new, stored_versions));
    errs
}

/// `field is immutable`, as apimachinery's `ValidateImmutableField` words it.
fn immutable(path: Path, value: &str) -> FieldError {
    FieldError::invalid(path, value, "field is immutable")
}

/// `ValidateCustomResourceDefinitionStoredVersions` over the stored versions as the update
/// would leave them: the record plus the new storage version, which Kubernetes' update
/// strategy appends before validating.
pub fn stored_versions_check(new: &CustomResourceDefinition, recorded: &[String]) -> Vec<FieldError> {
    let mut stored: Vec<String> = recorded.to_vec();
    if let Some(storage) = new.spec.versions.iter().find(|v| v.storage)
        && !stored.contains(&storage.name)
    {
        stored.push(storage.name.clone());
    }
    let path = Path::new("status").child("storedVersions");
    stored
        .iter()
        .enumerate()
        .filter(|(_, name)| !new.spec.versions.iter().any(|v| &v.name == *name))
        .map(|(i, name)| {
            FieldError::invalid(
                path.index(i),
                name.as_str(),
                format!(
                    "missing from spec.versions; {name} was previously a storage version, and must remain in \
                     spec.versions until a storage migration ensures no data remains persisted in {name} and \
                     removes {name} from status.storedVersions"
                ),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::validate::tests::crontab;
    use serde_json::json;

    fn crd(edit: impl FnOnce(&mut serde_json::Value)) -> CustomResourceDefinition {
        let mut raw = crontab();
        edit(&mut raw);
        let mut crd: CustomResourceDefinition = serde_json::from_value(raw).unwrap();
        crate::definitions::validate::apply_defaults(&mut crd);
        crd
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn scope_and_kind_are_immutable() {
        let old = crd(|_| {});
        let new = crd(|raw| {
            raw["spec"]["scope"] = json!("Cluster");
            raw["spec"]["names"]["kind"] = json!("Tab");
        });
        assert_eq!(
            messages(&check(&old, &new, &["v1".into()])),
            [
                r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
                r#"spec.names.kind: Invalid value: "Tab": field is immutable"#,
            ]
        );
    }

    #[test]
    fn a_stored_version_must_stay_in_spec_versions() {
        let old = crd(|_| {});
        let storage = old.spec.versions.iter().find(|v| v.storage).unwrap().name.clone();
        let new = crd(|raw| {
            raw["spec"]["versions"][0]["name"] = json!("v9");
            raw["spec"]["versions"].as_array_mut().unwrap().truncate(1);
            raw["spec"]["versions"][0]["storage"] = json!(true);
        });
        let errs = messages(&check(&old, &new, std::slice::from_ref(&storage)));
        assert_eq!(
            errs,
            [format!(
                "status.storedVersions[0]: Invalid value: \"{storage}\": missing from spec.versions; {storage} was \
                 previously a storage version, and must remain in spec.versions until a storage migration ensures \
                 no data remains persisted in {storage} and removes {storage} from status.storedVersions"
            )]
        );
        // The same change is fine once the version left the stored versions.
        assert!(check(&old, &new, &[]).is_empty());
    }

    #[test]
    fn an_unchanged_definition_passes() {
        let old = crd(|_| {});
        assert!(check(&old, &old, &["v1".into()]).is_empty());
    }
}
