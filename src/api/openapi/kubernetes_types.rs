//! What kube-apiserver 1.36 publishes for the Kubernetes types a definition's documents refer
//! to (ObjectMeta, ListMeta, Status, DeleteOptions, Scale...), beyond what k8s-openapi's
//! schemas give: k8s-openapi is generated from an older release's swagger and its schemas carry
//! none of Kubernetes' `x-kubernetes-*` extensions, defaults or group-version-kinds. Compared
//! entry by entry with the `components.schemas` a real kube-apiserver v1.36.2 serves for a
//! CustomResourceDefinition (`/openapi/v3/apis/<group>/<version>`) and with its `/openapi/v2`
//! `definitions`; the v2 form has the same extensions without the defaults, and its references
//! beside a description are bare (`v2_form`, also for a definition's list schema).
//!
//! Owns those differences only; the rest of the schemas comes from k8s-openapi.

use serde_json::{Map, Value, json};

use super::{META, reference};

/// The group versions whose scheme registers `DeleteOptions`, as kube-apiserver 1.36 lists them
/// in its CustomResourceDefinitions' documents (its built-in API groups, in that order).
const DELETE_OPTIONS_GROUP_VERSIONS: &[(&str, &str)] = &[
    ("", "v1"),
    ("admissionregistration.k8s.io", "v1"),
    ("admissionregistration.k8s.io", "v1alpha1"),
    ("admissionregistration.k8s.io", "v1beta1"),
    ("apps", "v1"),
    ("apps", "v1beta1"),
    ("apps", "v1beta2"),
    ("authentication.k8s.io", "v1"),
    ("authentication.k8s.io", "v1alpha1"),
    ("authentication.k8s.io", "v1beta1"),
    ("authorization.k8s.io", "v1"),
    ("authorization.k8s.io", "v1beta1"),
    ("autoscaling", "v1"),
    ("autoscaling", "v2"),
    ("batch", "v1"),
    ("batch", "v1beta1"),
    ("certificates.k8s.io", "v1"),
    ("certificates.k8s.io", "v1alpha1"),
    ("certificates.k8s.io", "v1beta1"),
    ("coordination.k8s.io", "v1"),
    ("coordination.k8s.io", "v1alpha2"),
    ("coordination.k8s.io", "v1beta1"),
    ("discovery.k8s.io", "v1"),
    ("discovery.k8s.io", "v1beta1"),
    ("events.k8s.io", "v1"),
    ("events.k8s.io", "v1beta1"),
    ("extensions", "v1beta1"),
    ("flowcontrol.apiserver.k8s.io", "v1"),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"),
    ("internal.apiserver.k8s.io", "v1alpha1"),
    ("networking.k8s.io", "v1"),
    ("networking.k8s.io", "v1beta1"),
    ("node.k8s.io", "v1"),
    ("node.k8s.io", "v1alpha1"),
    ("node.k8s.io", "v1beta1"),
    ("policy", "v1"),
    ("policy", "v1beta1"),
    ("rbac.authorization.k8s.io", "v1"),
    ("rbac.authorization.k8s.io", "v1alpha1"),
    ("rbac.authorization.k8s.io", "v1beta1"),
    ("resource.k8s.io", "v1"),
    ("resource.k8s.io", "v1alpha3"),
    ("resource.k8s.io", "v1beta1"),
    ("resource.k8s.io", "v1beta2"),
    ("scheduling.k8s.io", "v1"),
    ("scheduling.k8s.io", "v1alpha2"),
    ("scheduling.k8s.io", "v1beta1"),
    ("storage.k8s.io", "v1"),
    ("storage.k8s.io", "v1alpha1"),
    ("storage.k8s.io", "v1beta1"),
    ("storagemigration.k8s.io", "v1beta1"),
];

const SHARD_INFO_DESCRIPTION: &str = "shardInfo is set when the list is a filtered subset of the full \
    collection, as selected by a shard selector on the request. It echoes back the selector so clients can \
    verify which shard they received and merge sharded responses. Clients should not cache sharded list \
    responses as a full representation of the collection.\n\nThis is an alpha field and requires enabling \
    the ShardedListAndWatch feature gate.";

/// ListMeta's `shardInfo` (new in 1.36) and the ShardInfo it refers to.
fn shard_info() -> Value {
    json!({
        "description": "ShardInfo describes the shard selector that was applied to produce a list response. \
            Its presence on a list response indicates the list is a filtered subset.",
        "type": "object",
        "required": ["selector"],
        "properties": {"selector": {
            "description": "selector is the shard selector string from the request, echoed back so clients can \
                verify which shard they received and merge responses from multiple shards.",
            "type": "string",
            "default": "",
        }},
    })
}

/// Sets `key` of the object at `pointer` (below `definitions`), if there is one.
fn set(definitions: &mut Map<String, Value>, name: &str, pointer: &str, key: &str, value: Value) {
    let node = definitions.get_mut(name).and_then(|d| d.pointer_mut(pointer));
    if let Some(Value::Object(node)) = node {
        node.insert(key.to_string(), value);
    }
}

/// Brings k8s-openapi's schemas (`#/components/schemas/` references) to what kube-apiserver
/// 1.36 publishes in v3 documents.
pub fn amend_v3(definitions: &mut Map<String, Value>) {
    let meta = |kind: &str| format!("{META}.{kind}");
    let (object_meta, list_meta, status, delete_options) =
        (meta("ObjectMeta"), meta("ListMeta"), meta("Status"), meta("DeleteOptions"));
    definitions.insert(meta("ShardInfo"), shard_info());
    let shard = json!({"description": SHARD_INFO_DESCRIPTION, "allOf": [reference(&meta("ShardInfo"))]});
    set(definitions, &list_meta, "/properties", "shardInfo", shard);

    set(definitions, &object_meta, "/properties/finalizers", "x-kubernetes-list-type", json!("set"));
    set(definitions, &object_meta, "/properties/finalizers", "x-kubernetes-patch-strategy", json!("merge"));
    set(definitions, &object_meta, "/properties/managedFields", "x-kubernetes-list-type", json!("atomic"));
    let owners = "/properties/ownerReferences";
    set(definitions, &object_meta, owners, "x-kubernetes-list-type", json!("map"));
    set(definitions, &object_meta, owners, "x-kubernetes-list-map-keys", json!(["uid"]));
    set(definitions, &object_meta, owners, "x-kubernetes-patch-merge-key", json!("uid"));
    set(definitions, &object_meta, owners, "x-kubernetes-patch-strategy", json!("merge"));
    let owner = meta("OwnerReference");
    set(definitions, &owner, "", "x-kubernetes-map-type", json!("atomic"));
    for field in ["apiVersion", "kind", "name", "uid"] {
        set(definitions, &owner, &format!("/properties/{field}"), "default", json!(""));
    }

    set(definitions, &delete_options, "/properties/dryRun", "x-kubernetes-list-type", json!("atomic"));
    let kinds: Vec<Value> = DELETE_OPTIONS_GROUP_VERSIONS
        .iter()
        .map(|(group, version)| json!({"group": group, "kind": "DeleteOptions", "version": version}))
        .collect();
    set(definitions, &delete_options, "", "x-kubernetes-group-version-kind", Value::Array(kinds));
    set(definitions, &meta("StatusDetails"), "/properties/causes", "x-kubernetes-list-type", json!("atomic"));
    set(definitions, &status, "/properties/metadata", "default", json!({}));
    set(
        definitions,
        &status,
        "",
        "x-kubernetes-group-version-kind",
        json!([{"group": "", "kind": "Status", "version": "v1"}]),
    );

    // k8s-openapi marks a non-optional struct field required; Kubernetes defaults it instead.
    let scale = "io.k8s.api.autoscaling.v1.Scale";
    for name in [status.as_str(), scale] {
        if let Some(Value::Object(definition)) = definitions.get_mut(name) {
            definition.remove("required");
        }
    }
    for field in ["metadata", "spec", "status"] {
        set(definitions, scale, &format!("/properties/{field}"), "default", json!({}));
    }
    set(
        definitions,
        scale,
        "",
        "x-kubernetes-group-version-kind",
        json!([{"group": "autoscaling", "kind": "Scale", "version": "v1"}]),
    );
    for part in ["ScaleSpec", "ScaleStatus"] {
        set(definitions, &format!("io.k8s.api.autoscaling.v1.{part}"), "/properties/replicas", "default", json!(0));
    }
}

/// Brings k8s-openapi's APIResourceList and APIResource (the schemas of a group version's
/// discovery path, which only v2 documents without resource paths have) to what kube-apiserver
/// 1.36 publishes in v2: kube-aggregator keeps one definition of a name only if every APIService's
/// is deeply equal to it, lists' order included.
pub fn amend_discovery(definitions: &mut Map<String, Value>) {
    let meta = |kind: &str| format!("{META}.{kind}");
    let (list, resource) = (meta("APIResourceList"), meta("APIResource"));
    set(definitions, &list, "/properties/resources", "x-kubernetes-list-type", json!("atomic"));
    let kind = json!([{"group": "", "kind": "APIResourceList", "version": "v1"}]);
    set(definitions, &list, "", "x-kubernetes-group-version-kind", kind);
    set(definitions, &list, "", "required", json!(["groupVersion", "resources"]));
    for field in ["categories", "shortNames"] {
        set(definitions, &resource, &format!("/properties/{field}"), "x-kubernetes-list-type", json!("atomic"));
    }
    let required = json!(["name", "singularName", "namespaced", "kind", "verbs"]);
    set(definitions, &resource, "", "required", required);
}

/// The v2 form of an amended schema: kube-apiserver's v2 definitions carry no defaults, and a
/// reference with a description is a `$ref` beside it rather than v3's one-element `allOf`.
pub fn v2_form(schema: &Value) -> Value {
    let Value::Object(map) = schema else { return schema.clone() };
    let mut out = Map::new();
    for (key, child) in map {
        match (key.as_str(), child) {
            ("default", _) => {}
            ("properties", Value::Object(properties)) => {
                let properties = properties.iter().map(|(name, p)| (name.clone(), v2_form(p))).collect();
                out.insert(key.clone(), Value::Object(properties));
            }
            ("allOf", Value::Array(items))
                if let [only] = items.as_slice()
                    && let Some(target) = only.get("$ref") =>
            {
                out.insert("$ref".into(), target.clone());
            }
            ("items" | "additionalProperties", _) => {
                out.insert(key.clone(), v2_form(child));
            }
            _ => {
                out.insert(key.clone(), child.clone());
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::super::Documents;
    use crate::definitions::Registry;
    use crate::definitions::load::definition_from_value;
    use serde_json::{Value, json};

    /// The v3 document of a definition with status and scale, as served.
    fn document() -> Value {
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "scaleds.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "scaleds", "kind": "Scaled"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                    "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
        let (registry, _) = Registry::build(vec![definition_from_value(raw, "test").unwrap()]);
        let documents = Documents::build(&registry);
        serde_json::from_slice(&documents.v3("example.com", "v1").unwrap().body).unwrap()
    }

    fn references(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get("$ref") {
                    found.push(target.clone());
                }
                map.values().for_each(|child| references(child, found));
            }
            Value::Array(items) => items.iter().for_each(|child| references(child, found)),
            _ => {}
        }
    }

    #[test]
    fn the_components_are_kube_apiserver_1_36s() {
        let document = document();
        let schemas = document["components"]["schemas"].as_object().unwrap();
        let names: Vec<&str> = schemas.keys().map(String::as_str).collect();
        // What kube-apiserver v1.36.2 serves for such a definition.
        let meta = [
            "DeleteOptions",
            "FieldsV1",
            "ListMeta",
            "ManagedFieldsEntry",
            "ObjectMeta",
            "OwnerReference",
            "Patch",
            "Preconditions",
            "ShardInfo",
            "Status",
            "StatusCause",
            "StatusDetails",
            "Time",
        ];
        let mut expected = vec!["com.example.v1.Scaled", "com.example.v1.ScaledList"];
        let autoscaling = ["Scale", "ScaleSpec", "ScaleStatus"].map(|k| format!("io.k8s.api.autoscaling.v1.{k}"));
        let meta = meta.map(|k| format!("io.k8s.apimachinery.pkg.apis.meta.v1.{k}"));
        expected.extend(autoscaling.iter().map(String::as_str));
        expected.extend(meta.iter().map(String::as_str));
        expected.sort_unstable();
        assert_eq!(names, expected);
        let mut targets = Vec::new();
        references(&document, &mut targets);
        for target in &targets {
            let name = target.strip_prefix("#/components/schemas/").unwrap();
            assert!(schemas.contains_key(name), "{target} refers to no component");
        }
        let at = |name: &str, pointer: &str| schemas[name].pointer(pointer).cloned().unwrap_or(Value::Null);
        let m = |kind: &str| format!("io.k8s.apimachinery.pkg.apis.meta.v1.{kind}");
        let cases = [
            (
                m("ListMeta"),
                "/properties/shardInfo/allOf/0/$ref",
                json!("#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo"),
            ),
            (m("ShardInfo"), "/required", json!(["selector"])),
            (m("ShardInfo"), "/properties/selector/default", json!("")),
            (m("ObjectMeta"), "/properties/finalizers/x-kubernetes-list-type", json!("set")),
            (m("ObjectMeta"), "/properties/managedFields/x-kubernetes-list-type", json!("atomic")),
            (m("ObjectMeta"), "/properties/ownerReferences/x-kubernetes-list-map-keys", json!(["uid"])),
            (m("OwnerReference"), "/x-kubernetes-map-type", json!("atomic")),
            (m("OwnerReference"), "/properties/uid/default", json!("")),
            (m("DeleteOptions"), "/properties/dryRun/x-kubernetes-list-type", json!("atomic")),
            (
                m("DeleteOptions"),
                "/x-kubernetes-group-version-kind/0",
                json!({"group": "", "kind": "DeleteOptions", "version": "v1"}),
            ),
            (m("StatusDetails"), "/properties/causes/x-kubernetes-list-type", json!("atomic")),
            (m("Status"), "/required", Value::Null),
            (m("Status"), "/properties/metadata/default", json!({})),
            ("io.k8s.api.autoscaling.v1.Scale".into(), "/required", Value::Null),
            ("io.k8s.api.autoscaling.v1.ScaleSpec".into(), "/properties/replicas/default", json!(0)),
        ];
        for (name, pointer, expected) in cases {
            assert_eq!(at(&name, pointer), expected, "{name}{pointer}");
        }
        assert_eq!(schemas[&m("DeleteOptions")]["x-kubernetes-group-version-kind"].as_array().unwrap().len(), 53);
    }

    #[test]
    fn v2_definitions_have_the_extensions_and_bare_references_without_the_defaults() {
        let shared = super::super::shared();
        let v2 = |name: &str| super::v2_form(&shared.definitions[name]);
        let owner = &v2("io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference");
        assert_eq!(owner["x-kubernetes-map-type"], "atomic");
        assert_eq!(owner["properties"]["uid"].get("default"), None);
        let list_meta = &v2("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta");
        assert_eq!(
            list_meta["properties"]["shardInfo"]["$ref"],
            "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo"
        );
        assert!(list_meta["properties"]["shardInfo"]["description"].is_string());
        assert!(shared.definitions.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ShardInfo"));
        let members: Vec<&str> = shared.v2_members.iter().map(|m| m.key()).collect();
        let names: Vec<&str> = shared.definitions.keys().map(String::as_str).collect();
        assert_eq!(members, names, "every shared type in the v2 documents");
    }

    /// Read from a real kube-apiserver v1.36.2's `/openapi/v2`: kube-aggregator merges a
    /// definition of the same name only when it is deeply equal (lists' order included).
    #[test]
    fn discovery_definitions_are_kube_apiserver_1_36s() {
        let shared = super::super::shared();
        let members: std::collections::BTreeMap<&str, Value> =
            shared.v2_discovery_members.iter().map(|m| (m.key(), serde_json::from_slice(m.value()).unwrap())).collect();
        let m = |kind: &str| format!("io.k8s.apimachinery.pkg.apis.meta.v1.{kind}");
        let (list, resource) = (&members[m("APIResourceList").as_str()], &members[m("APIResource").as_str()]);
        assert_eq!(members.len(), 2, "{:?}", members.keys());
        assert_eq!(list["required"], json!(["groupVersion", "resources"]));
        assert_eq!(
            list["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "APIResourceList", "version": "v1"}])
        );
        assert_eq!(
            list["properties"]["resources"]["items"]["$ref"],
            json!(format!("#/definitions/{}", m("APIResource")))
        );
        assert_eq!(list["properties"]["resources"]["x-kubernetes-list-type"], "atomic");
        let keys: Vec<&String> = list["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["apiVersion", "groupVersion", "kind", "resources"]);
        assert_eq!(resource["required"], json!(["name", "singularName", "namespaced", "kind", "verbs"]));
        for field in ["categories", "shortNames"] {
            assert_eq!(resource["properties"][field]["x-kubernetes-list-type"], "atomic", "{field}");
        }
        assert_eq!(resource["properties"]["verbs"].get("x-kubernetes-list-type"), None);
        let keys: Vec<&String> = resource["properties"].as_object().unwrap().keys().collect();
        let expected = [
            "categories",
            "group",
            "kind",
            "name",
            "namespaced",
            "shortNames",
            "singularName",
            "storageVersionHash",
            "verbs",
            "version",
        ];
        assert_eq!(keys, expected);
        assert!(resource["description"].as_str().unwrap().starts_with("APIResource specifies the name"));
    }
}
