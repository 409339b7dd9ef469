//! The discovery documents' exact bytes: fields in the order of Kubernetes' Go types, with
//! their `omitempty` rules.

use serde_json::json;

use super::*;
use crate::definitions::load::definition_from_value;

fn registry() -> Registry {
    let crontabs = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"],
                "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}}}]}});
    let (registry, problems) = Registry::build(vec![definition_from_value(crontabs, "test").unwrap()]);
    assert!(problems.is_empty(), "{problems:?}");
    registry
}

fn text(document: &Document) -> String {
    String::from_utf8(document.body.to_vec()).unwrap()
}

#[test]
fn documents_are_written_in_the_order_of_kubernetes_types() {
    let discovery = Discovery::build(&registry());
    assert_eq!(
        text(&discovery.api_versions),
        r#"{"kind":"APIVersions","versions":[],"serverAddressByClientCIDRs":null}"#
    );
    let group = r#""name":"stable.example.com","versions":[{"groupVersion":"stable.example.com/v1","version":"v1"}],"preferredVersion":{"groupVersion":"stable.example.com/v1","version":"v1"}"#;
    assert_eq!(
        text(&discovery.group_list),
        format!(r#"{{"kind":"APIGroupList","apiVersion":"v1","groups":[{{{group}}}]}}"#)
    );
    assert_eq!(
        text(discovery.group("stable.example.com").unwrap()),
        format!(r#"{{"kind":"APIGroup","apiVersion":"v1",{group}}}"#)
    );
    let hash = registry().definitions()[0].storage_version_hash();
    assert_eq!(
        text(discovery.group_version("stable.example.com", "v1").unwrap()),
        format!(
            concat!(
                r#"{{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"stable.example.com/v1","resources":["#,
                r#"{{"name":"crontabs","singularName":"crontab","namespaced":true,"kind":"CronTab","#,
                r#""verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"#,
                r#""shortNames":["ct"],"categories":["all"],"storageVersionHash":"{}"}},"#,
                r#"{{"name":"crontabs/status","singularName":"","namespaced":true,"kind":"CronTab","verbs":["get","patch","update"]}},"#,
                r#"{{"name":"crontabs/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get","patch","update"]}}]}}"#
            ),
            hash
        )
    );
    let kind = r#"{"group":"stable.example.com","version":"v1","kind":"CronTab"}"#;
    let item = format!(
        concat!(
            r#"{{"metadata":{{"name":"stable.example.com"}},"versions":[{{"version":"v1","resources":["#,
            r#"{{"resource":"crontabs","responseKind":{kind},"scope":"Namespaced","singularResource":"crontab","#,
            r#""verbs":["delete","deletecollection","get","list","patch","create","update","watch"],"#,
            r#""shortNames":["ct"],"categories":["all"],"subresources":["#,
            r#"{{"subresource":"status","responseKind":{kind},"verbs":["get","patch","update"]}},"#,
            r#"{{"subresource":"scale","responseKind":{{"group":"autoscaling","version":"v1","kind":"Scale"}},"verbs":["get","patch","update"]}}]}}],"#,
            r#""freshness":"Current"}}]}}"#
        ),
        kind = kind
    );
    for (version, document) in [("v2", &discovery.aggregated_v2), ("v2beta1", &discovery.aggregated_v2beta1)] {
        assert_eq!(
            text(document),
            format!(
                r#"{{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/{version}","metadata":{{}},"items":[{item}]}}"#
            )
        );
    }
    assert_eq!(
        text(&discovery.api_aggregated_v2),
        r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[]}"#
    );
}

/// A definition `<plural>.<group>` with one version.
fn definition(plural: &str, group: &str, kind: &str, version: &str) -> crate::definitions::Definition {
    let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced", "names": {"plural": plural, "kind": kind},
            "versions": [{"name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    definition_from_value(raw, "test").unwrap()
}

fn every_document(discovery: &Discovery, registry: &Registry) -> Vec<String> {
    let mut texts: Vec<String> = [
        &discovery.api_versions,
        &discovery.group_list,
        &discovery.aggregated_v2,
        &discovery.aggregated_v2beta1,
        &discovery.api_aggregated_v2,
    ]
    .into_iter()
    .map(|d| format!("{} {}", d.etag, text(d)))
    .collect();
    for (group, versions) in registry.groups() {
        texts.push(text(discovery.group(group).unwrap()));
        for version in versions {
            texts.push(text(discovery.group_version(group, version).unwrap()));
        }
    }
    texts
}

#[test]
fn a_rebuild_keeps_the_documents_of_unchanged_groups_and_equals_a_full_build() {
    use std::sync::Arc;
    let foos = Arc::new(definition("foos", "a.example.com", "Foo", "v1"));
    let bars = Arc::new(definition("bars", "b.example.com", "Bar", "v1"));
    let (before, _) = Registry::build_shared(vec![foos.clone(), bars.clone()]);
    let previous = Discovery::build(&before);
    // bars gains a version: only its group changes.
    let bars2 = Arc::new(definition("bars", "b.example.com", "Bar", "v2"));
    let (after, _) = Registry::build_shared(vec![foos, bars2]);
    let rebuilt = Discovery::build_from(&after, Some(&previous));
    assert_eq!(every_document(&rebuilt, &after), every_document(&Discovery::build(&after), &after));
    let kept = |d: &Discovery| d.group_version("a.example.com", "v1").unwrap().body.as_ptr();
    assert_eq!(kept(&rebuilt), kept(&previous), "the unchanged group's documents are reused");
    assert!(rebuilt.group_version("b.example.com", "v2").is_some());
    assert!(rebuilt.group_version("b.example.com", "v1").is_none());
    assert_ne!(rebuilt.aggregated_v2.etag, previous.aggregated_v2.etag);
    // A group that is gone is gone.
    let (only_foos, _) = Registry::build_shared(vec![after.definitions()[0].clone()]);
    let shrunk = Discovery::build_from(&only_foos, Some(&rebuilt));
    assert!(shrunk.group("b.example.com").is_none());
    assert_eq!(every_document(&shrunk, &only_foos), every_document(&Discovery::build(&only_foos), &only_foos));
}

#[test]
fn served_definitions_list_their_migrate_and_impact_subresources_with_their_verbs() {
    let (registry, problems) = Registry::build_shared(crate::definitions::builtin::shared().to_vec());
    assert!(problems.is_empty(), "{problems:?}");
    let discovery = Discovery::build(&registry);
    let list: serde_json::Value =
        serde_json::from_slice(&discovery.group_version("crd-apiserver.io", "v1alpha1").unwrap().body).unwrap();
    let migrate = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "serveddefinitions/migrate");
    assert_eq!(
        migrate.map(|r| (r["verbs"].clone(), r["kind"].clone(), r["version"].clone())),
        Some((json!(["create"]), json!("Status"), json!("v1")))
    );
    let impact = list["resources"].as_array().unwrap().iter().find(|r| r["name"] == "serveddefinitions/impact");
    assert_eq!(impact.map(|r| r["verbs"].clone()), Some(json!(["create", "delete"])));
    let aggregated: serde_json::Value = serde_json::from_slice(&discovery.aggregated_v2.body).unwrap();
    let resource = &aggregated["items"][0]["versions"][0]["resources"][0];
    assert_eq!(resource["resource"], "serveddefinitions");
    assert_eq!(
        resource["subresources"],
        json!([{"subresource": "migrate", "responseKind": {"group": "", "version": "v1", "kind": "Status"},
            "verbs": ["create"]},
            {"subresource": "impact", "responseKind": {"group": "", "version": "v1", "kind": "Status"},
            "verbs": ["create", "delete"]}])
    );
}

#[test]
fn a_custom_resource_has_no_action_subresource() {
    let discovery = Discovery::build(&registry());
    let list = text(discovery.group_version("stable.example.com", "v1").unwrap());
    assert!(!list.contains("migrate"), "{list}");
}

#[test]
fn a_groups_service_name_gets_the_aggregated_document_of_that_group_alone() {
    let tenants = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "tenants.platform.example.com"},
        "spec": {"group": "platform.example.com", "scope": "Cluster",
            "names": {"plural": "tenants", "singular": "tenant", "kind": "Tenant"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    let mut definitions: Vec<_> = registry().definitions().to_vec();
    definitions.push(Arc::new(definition_from_value(tenants, "test").unwrap()));
    let (registry, problems) = Registry::build_shared(definitions);
    assert!(problems.is_empty(), "{problems:?}");
    let discovery = Discovery::build(&registry);
    let name = |group: &str| format!("crd-apiserver-{}.crd-apiserver.svc", crate::api::openapi::slices::suffix(group));
    let groups = |document: &Document| -> Vec<String> {
        let value: serde_json::Value = serde_json::from_slice(&document.body).unwrap();
        value["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap().to_string()).collect()
    };
    for version in ["v2", "v2beta1"] {
        let alone = discovery.aggregated_for(version, Some(&name("platform.example.com")));
        assert_eq!(groups(alone), ["platform.example.com"]);
        assert!(text(alone).contains(&format!("\"apiVersion\":\"apidiscovery.k8s.io/{version}\"")));
        let whole = discovery.aggregated_for(version, Some("crd-apiserver.crd-apiserver.svc"));
        assert_eq!(groups(whole), ["platform.example.com", "stable.example.com"]);
        assert_eq!(whole.etag, discovery.aggregated_for(version, None).etag);
        assert_ne!(alone.etag, whole.etag);
    }
    assert_eq!(groups(discovery.aggregated_for("v2", Some(&name("stable.example.com")))), ["stable.example.com"]);
}

#[test]
fn a_group_versions_service_name_gets_that_version_of_its_group_alone() {
    use crate::api::openapi::slices::{suffix, version_suffix};
    let widgets = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.shop.example.com"},
        "spec": {"group": "shop.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
    let mut definitions: Vec<_> = registry().definitions().to_vec();
    definitions.push(Arc::new(definition_from_value(widgets, "test").unwrap()));
    let (registry, problems) = Registry::build_shared(definitions);
    assert!(problems.is_empty(), "{problems:?}");
    let discovery = Discovery::build(&registry);
    let service = |suffix: String| format!("crd-apiserver-{suffix}.crd-apiserver.svc");
    // (group, its versions) of each item.
    let items = |document: &Document| -> Vec<(String, Vec<String>)> {
        let value: serde_json::Value = serde_json::from_slice(&document.body).unwrap();
        value["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let versions = i["versions"].as_array().unwrap().iter();
                (
                    i["metadata"]["name"].as_str().unwrap().to_string(),
                    versions.map(|v| v["version"].as_str().unwrap().to_string()).collect(),
                )
            })
            .collect()
    };
    let shop =
        |versions: &[&str]| vec![("shop.example.com".to_string(), versions.iter().map(|v| v.to_string()).collect())];
    for version in ["v2", "v2beta1"] {
        let v1 = discovery.aggregated_for(version, Some(&service(version_suffix("shop.example.com", "v1"))));
        assert_eq!(items(v1), shop(&["v1"]));
        assert!(text(v1).contains(r#""resource":"widgets""#), "{}", text(v1));
        assert!(text(v1).contains(&format!("\"apiVersion\":\"apidiscovery.k8s.io/{version}\"")));
        let v2 = discovery.aggregated_for(version, Some(&service(version_suffix("shop.example.com", "v2"))));
        assert_eq!(items(v2), shop(&["v2"]));
        assert_ne!(v1.etag, v2.etag);
        // The group's own name (installs made with a Service per group) still gets every version,
        // in priority order.
        let group = discovery.aggregated_for(version, Some(&service(suffix("shop.example.com"))));
        assert_eq!(items(group), shop(&["v2", "v1"]));
        // A group of one version: its version's name gets the group alone.
        let stable = discovery.aggregated_for(version, Some(&service(version_suffix("stable.example.com", "v1"))));
        assert_eq!(items(stable), vec![("stable.example.com".to_string(), vec!["v1".to_string()])]);
        let unserved = discovery.aggregated_for(version, Some(&service(version_suffix("shop.example.com", "v3"))));
        assert_eq!(unserved.etag, discovery.aggregated_for(version, None).etag, "not served: the whole document");
    }
}
