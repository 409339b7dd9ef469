//! The served model of a valid definition: versions with their schema (compiled, with its CEL
//! rules and field-manager types, on first use), deprecation warnings naming the newer version,
//! the storage version.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::model::{Definition, Scale, Scope, Version, VersionFields};
use super::validate::version_schema;
use super::version_order;

/// The served model of a definition that passed [`super::validate::check`].
pub fn build(crd: CustomResourceDefinition, source: String) -> Definition {
    let schemas = crd
        .spec
        .versions
        .iter()
        .map(|v| version_schema(v).and_then(|raw| serde_json::to_string(&raw).ok()).map(Arc::from))
        .collect();
    build_with_schemas(&crd, source, schemas)
}

/// [`build`] with each version's `openAPIV3Schema` as compact JSON text (in version order), as
/// the loader made it once for the checks. Nothing is compiled here: each version compiles its
/// schema, CEL rules and field-manager types on first use; versions with the same schema text
/// share the text and what it compiles to.
pub fn build_with_schemas(
    crd: &CustomResourceDefinition,
    source: String,
    schemas: Vec<Option<Arc<str>>>,
) -> Definition {
    let spec = &crd.spec;
    let kind = spec.names.kind.clone();
    let mut schemas = schemas.into_iter();
    let mut versions: Vec<Arc<Version>> = Vec::with_capacity(spec.versions.len());
    for v in &spec.versions {
        let subresources = v.subresources.as_ref();
        let version = Version::new(VersionFields {
            name: v.name.clone(),
            served: v.served,
            storage: v.storage,
            deprecated: v.deprecated.unwrap_or(false),
            deprecation_warning: None,
            openapi_schema: schemas.next().flatten(),
            printer_columns: v.additional_printer_columns.clone().unwrap_or_default(),
            status_subresource: subresources.is_some_and(|s| s.status.is_some()),
            scale: subresources.and_then(|s| s.scale.as_ref()).map(|s| Scale {
                spec_replicas_path: s.spec_replicas_path.clone(),
                status_replicas_path: s.status_replicas_path.clone(),
                label_selector_path: s.label_selector_path.clone().filter(|p| !p.is_empty()),
            }),
            selectable_fields: v
                .selectable_fields
                .iter()
                .flatten()
                .map(|f| f.json_path.trim_start_matches('.').to_string())
                .collect(),
        });
        let version = match versions.iter().find(|earlier| earlier.same_schema(&version)) {
            Some(earlier) => version.sharing_compiled_with(earlier),
            None => version,
        };
        versions.push(Arc::new(version));
    }
    // Deprecation warnings name the newest non-deprecated served version, if any is newer.
    let warnings: Vec<Option<String>> = spec
        .versions
        .iter()
        .map(|v| {
            if v.deprecated != Some(true) {
                return None;
            }
            if let Some(custom) = &v.deprecation_warning {
                return Some(custom.clone());
            }
            let mut text = format!("{}/{} {} is deprecated", spec.group, v.name, kind);
            let replacement = spec
                .versions
                .iter()
                .filter(|o| o.served && o.deprecated != Some(true))
                .filter(|o| version_order::by_priority(&o.name, &v.name).is_lt())
                .min_by(|a, b| version_order::by_priority(&a.name, &b.name));
            if let Some(r) = replacement {
                text.push_str(&format!("; use {}/{} {}", spec.group, r.name, kind));
            }
            Some(text)
        })
        .collect();
    for (version, warning) in versions.iter_mut().zip(warnings) {
        if warning.is_some() {
            Arc::make_mut(version).deprecation_warning = warning;
        }
    }
    let storage = versions
        .iter()
        .find(|v| v.storage)
        .or(versions.first())
        .cloned()
        .unwrap_or_else(|| Arc::new(Version::new(VersionFields { storage: true, ..VersionFields::default() })));
    Definition {
        conversion: super::conversion::build(crd.spec.conversion.as_ref()),
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
        group: spec.group.clone(),
        plural: spec.names.plural.clone(),
        singular: spec.names.singular.clone().unwrap_or_default(),
        kind,
        list_kind: spec.names.list_kind.clone().unwrap_or_default(),
        short_names: spec.names.short_names.clone().unwrap_or_default(),
        categories: spec.names.categories.clone().unwrap_or_default(),
        scope: if spec.scope == "Cluster" { Scope::Cluster } else { Scope::Namespaced },
        versions,
        storage,
        warnings: Vec::new(),
        read_only: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::validate::tests::crontab;
    use serde_json::json;

    #[test]
    fn deprecation_warnings_name_the_newer_version() {
        let mut raw = crontab();
        raw["spec"]["versions"] = json!([
            {"name": "v1alpha1", "served": true, "storage": false, "deprecated": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1beta2", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1beta3", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
        ]);
        let mut crd: CustomResourceDefinition = serde_json::from_value(raw).unwrap();
        super::super::validate::apply_defaults(&mut crd);
        let def = build(crd, "test".into());
        assert_eq!(
            def.version("v1alpha1").unwrap().deprecation_warning.as_deref(),
            Some("stable.example.com/v1alpha1 CronTab is deprecated; use stable.example.com/v1beta3 CronTab")
        );
        assert_eq!(def.storage.name, "v1beta2");
        assert_eq!(def.list_kind, "CronTabList");
        assert_eq!(def.singular, "crontab");
    }
}
