//! The server's own resources, served beside the definitions of the files: `serveddefinitions`
//! in `crd-apiserver.io/v1alpha1`, the status of every served definition as Kubernetes keeps it
//! in a CustomResourceDefinition's status (the `lifecycle` module writes the objects).
//!
//! Owns the built-in definitions' manifests; they take the same load path as any file, so
//! discovery, OpenAPI, Tables and `kubectl explain` treat them like any other. Read-only.

use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::model::Definition;

/// The API group of the server's own resources.
pub const GROUP: &str = "crd-apiserver.io";
/// Its only version.
pub const VERSION: &str = "v1alpha1";
/// The plural of the definitions' status resource.
pub const SERVED_DEFINITIONS: &str = "serveddefinitions";
/// Its kind.
pub const SERVED_DEFINITION_KIND: &str = "ServedDefinition";
/// The subresource of `serveddefinitions` that asks for a storage-version migration: it takes
/// `create` only, as Kubernetes' `pods/eviction` does, and answers a `Status`.
pub const MIGRATE: &str = "migrate";
/// The subresource of `serveddefinitions` that analyses what a candidate definition (the body
/// of a `create`) would do to the stored objects; `delete` cancels the analysis under way.
pub const IMPACT: &str = "impact";

/// The action subresources of a definition (those that take `create`, beside status and
/// scale): `migrate` and `impact` for the server's own `serveddefinitions`, none for any other.
pub fn action_subresources(definition: &Definition) -> &'static [&'static str] {
    if definition.read_only && definition.group == GROUP && definition.plural == SERVED_DEFINITIONS {
        &[MIGRATE, IMPACT]
    } else {
        &[]
    }
}

/// The verbs of an action subresource: `create`, and `delete` for `impact` (a cancellation).
pub fn action_verbs(action: &str) -> &'static [&'static str] {
    if action == IMPACT { &["create", "delete"] } else { &["create"] }
}

/// Where built-in definitions say they come from (in logs and problems).
const SOURCE: &str = "built-in";

fn column(name: &str, kind: &str, path: &str, description: &str) -> Value {
    json!({"name": name, "type": kind, "jsonPath": path, "description": description})
}

/// A column `kubectl get -o wide` shows, not `kubectl get`.
fn wide(mut column: Value) -> Value {
    if let Value::Object(fields) = &mut column {
        fields.insert("priority".into(), json!(1));
    }
    column
}

/// The manifest of `serveddefinitions.crd-apiserver.io`.
pub fn served_definitions_manifest() -> Value {
    let open_object = |description: &str| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": description});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{SERVED_DEFINITIONS}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": SERVED_DEFINITIONS, "singular": "serveddefinition", "kind": SERVED_DEFINITION_KIND,
                      "listKind": "ServedDefinitionList", "shortNames": ["sdef"], "categories": ["crd-apiserver"]},
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A CustomResourceDefinition as this server serves it, with its status (read-only).",
                    "properties": {
                        "spec": open_object("The definition's spec as served (CustomResourceDefinitionSpec)."),
                        "status": open_object("CustomResourceDefinitionStatus (conditions, acceptedNames, \
                            storedVersions), plus source, storageVersion, objectsPerVersion, migration, \
                            lastReloadError and impact. A SourceRefused condition says why the definition's \
                            source was last refused; a source refused with no definition served has an object \
                            with no spec."),
                    },
                }},
                "additionalPrinterColumns": [
                    column("Established", "string", r#".status.conditions[?(@.type=="Established")].status"#,
                        "Whether the definition is served."),
                    column("Names Accepted", "string", r#".status.conditions[?(@.type=="NamesAccepted")].status"#,
                        "Whether the names the definition asks for are its own."),
                    column("Storage", "string", ".status.storageVersion", "The version objects are written in."),
                    wide(column("Stored", "string", ".status.storedVersions", "Versions objects may still be stored in.")),
                    column("Migration", "string", ".status.migration.state", "Storage-version migration."),
                    column("Last Error", "string", r#".status.conditions[?(@.type=="SourceRefused")].reason"#,
                        "Why the definition's source (file or cluster definition) was last refused, in a word; \
                         `kubectl describe` shows the message."),
                    column("Age", "date", ".metadata.creationTimestamp", ""),
                ],
            }],
        },
    })
}

/// Every built-in definition, loaded once per process: the same `Arc`s in every registry, so
/// that a reload of the files leaves them (and their watches) as they are.
pub fn shared() -> &'static [Arc<Definition>] {
    static SHARED: OnceLock<Vec<Arc<Definition>>> = OnceLock::new();
    SHARED.get_or_init(|| definitions().into_iter().map(Arc::new).collect())
}

/// Every built-in definition, served read-only.
pub fn definitions() -> Vec<Definition> {
    match super::load::definition_from_value(served_definitions_manifest(), SOURCE) {
        Ok(mut definition) => {
            definition.read_only = true;
            vec![definition]
        }
        Err(problem) => {
            // The manifest is ours and its test loads it; this would be a bug, not bad input.
            tracing::error!("{problem}");
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_definitions_manifest_loads_read_only() {
        let definitions = definitions();
        assert_eq!(definitions.len(), 1);
        let definition = &definitions[0];
        assert!(definition.read_only);
        assert_eq!(definition.name, "serveddefinitions.crd-apiserver.io");
        assert_eq!(definition.short_names, ["sdef"]);
        assert_eq!(definition.versions[0].printer_columns.len(), 7);
        assert!(definition.warnings.is_empty(), "{:?}", definition.warnings);
    }
}
