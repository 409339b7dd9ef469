//! The served model of a valid definition: versions with their compiled schema, CEL rules
//! and field-manager types, deprecation warnings naming the newer version, the storage version.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use super::model::{Definition, Scale, Scope, Version};
use super::validate::{CompiledRules, version_schema};
use super::version_order;
use crate::core::field::Path;

/// The CEL rules of a version, compiled (errors were reported by `check`).
fn compiled_rules(
    v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion,
) -> Option<Arc<crate::cel::Rules>> {
    let (rules, _) = crate::cel::Rules::compile(&version_schema(v)?, &Path::nil());
    (!rules.is_empty()).then(|| Arc::new(rules))
}

/// The served model of a definition that passed [`super::validate::check`].
pub fn build(crd: CustomResourceDefinition, source: String) -> Definition {
    let rules = crd.spec.versions.iter().map(compiled_rules).collect();
    build_compiled(crd, source, rules)
}

/// [`build`] with the CEL rules [`super::validate::check_and_compile`] compiled: compiling
/// them is most of the cost of loading a definition, and is done once.
pub fn build_compiled(crd: CustomResourceDefinition, source: String, mut rules: CompiledRules) -> Definition {
    let spec = &crd.spec;
    let kind = spec.names.kind.clone();
    rules.resize(spec.versions.len(), None);
    let mut versions: Vec<Arc<Version>> = spec
        .versions
        .iter()
        .zip(rules)
        .map(|(v, cel_rules)| {
            let subresources = v.subresources.as_ref();
            let openapi_schema = version_schema(v);
            let schema = openapi_schema.as_ref().map(|raw| Arc::new(crate::schema::compile(raw)));
            let openapi_schema = openapi_schema.and_then(|raw| serde_json::to_string(&raw).ok()).map(Arc::from);
            Arc::new(Version {
                name: v.name.clone(),
                served: v.served,
                storage: v.storage,
                deprecated: v.deprecated.unwrap_or(false),
                deprecation_warning: None,
                openapi_schema,
                schema,
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
                // --- CEL (issue 5)
                cel_rules,
                // --- end CEL
                field_schema: crate::fieldmanager::Schema::of_version(v),
            })
        })
        .collect();
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
    let storage = versions.iter().find(|v| v.storage).or(versions.first()).cloned().unwrap_or_else(|| {
        Arc::new(Version {
            name: String::new(),
            served: false,
            storage: true,
            deprecated: false,
            deprecation_warning: None,
            openapi_schema: None,
            schema: None,
            printer_columns: Vec::new(),
            status_subresource: false,
            scale: None,
            selectable_fields: Vec::new(),
            cel_rules: None, // CEL (issue 5)
            field_schema: Default::default(),
        })
    });
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
