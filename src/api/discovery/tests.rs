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
