//! The installable manifests: what `kubectl apply -f manifests/` creates must be what the
//! server needs (RBAC, non-root pod, probes, a Service on 443), and the generated files (the
//! definitions ConfigMap and one APIService per served group version) must match
//! `manifests/examples`. `UPDATE_MANIFESTS=1 cargo test --test manifests` regenerates them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crd_apiserver::definitions::load::parse_documents;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn examples() -> Vec<(String, String)> {
    let mut files: Vec<_> = std::fs::read_dir(root().join("manifests/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_string(), std::fs::read_to_string(p).unwrap()))
        .collect()
}

fn served_group_versions(texts: &[(String, String)]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (_, text) in texts {
        for doc in parse_documents(text).unwrap() {
            let group = doc["spec"]["group"].as_str().unwrap().to_string();
            for v in doc["spec"]["versions"].as_array().unwrap() {
                if v["served"] == true {
                    out.insert((group.clone(), v["name"].as_str().unwrap().to_string()));
                }
            }
        }
    }
    out
}

fn definitions_configmap() -> String {
    let mut text = String::from(
        "# Generated from manifests/examples by `UPDATE_MANIFESTS=1 cargo test --test manifests`: the\n\
         # definitions the server serves, mounted at /etc/crd-apiserver/definitions.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: crd-apiserver-definitions\n  namespace: crd-apiserver\n  \
         labels:\n    app.kubernetes.io/name: crd-apiserver\ndata:\n",
    );
    for (name, body) in examples() {
        text.push_str(&format!("  {name}: |\n"));
        for line in body.lines() {
            if line.is_empty() {
                text.push('\n');
            } else {
                text.push_str(&format!("    {line}\n"));
            }
        }
    }
    text
}

fn apiservices() -> String {
    let mut docs = vec![String::from(
        "# Generated from manifests/examples by `UPDATE_MANIFESTS=1 cargo test --test manifests`: one\n\
         # APIService per served group version. Its caBundle (the serving certificate's CA) is filled in\n\
         # by cert-manager's CA injector (manifests/cert-manager/), or by hack/serving-cert.sh.",
    )];
    for (group, version) in served_group_versions(&examples()) {
        docs.push(format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {version}.{group}\n  labels:\n    \
             app.kubernetes.io/name: crd-apiserver\n  annotations:\n    cert-manager.io/inject-ca-from: crd-apiserver/crd-apiserver-serving\n\
             spec:\n  group: {group}\n  version: {version}\n  groupPriorityMinimum: 1000\n  versionPriority: 15\n  service:\n    \
             name: crd-apiserver\n    namespace: crd-apiserver\n    port: 443\n"
        ));
    }
    docs.join("\n---\n")
}

fn check_generated(path: &Path, expected: &str) {
    if std::env::var_os("UPDATE_MANIFESTS").is_some() {
        std::fs::write(path, expected).unwrap();
    }
    let actual = std::fs::read_to_string(path).unwrap_or_default();
    assert!(actual == expected, "{} is stale: run UPDATE_MANIFESTS=1 cargo test --test manifests", path.display());
}

fn objects() -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(root().join("manifests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files.iter().flat_map(|p| parse_documents(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn generated_manifests_are_current() {
    check_generated(&root().join("manifests/20-definitions.yaml"), &definitions_configmap());
    check_generated(&root().join("manifests/40-apiservices.yaml"), &apiservices());
    // The ConfigMap holds each example exactly.
    let objects = objects();
    let map = find(&objects, "ConfigMap", "crd-apiserver-definitions");
    for (name, body) in examples() {
        assert_eq!(map["data"][&name], body.as_str(), "{name}");
    }
}

#[test]
fn manifests_give_the_server_what_it_needs() {
    let objects = objects();
    let subject =
        serde_json::json!([{"kind": "ServiceAccount", "name": "crd-apiserver", "namespace": "crd-apiserver"}]);
    find(&objects, "Namespace", "crd-apiserver");
    find(&objects, "ServiceAccount", "crd-apiserver");
    let delegator = find(&objects, "ClusterRoleBinding", "crd-apiserver:system:auth-delegator");
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(delegator["subjects"], subject);
    let reader = find(&objects, "RoleBinding", "crd-apiserver:extension-apiserver-authentication-reader");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    assert_eq!(
        (reader["roleRef"]["kind"].as_str(), reader["roleRef"]["name"].as_str()),
        (Some("Role"), Some("extension-apiserver-authentication-reader"))
    );
    assert_eq!(reader["subjects"], subject);
    let namespaces = find(&objects, "ClusterRole", "crd-apiserver:namespace-reader");
    assert_eq!(namespaces["rules"][0]["resources"], serde_json::json!(["namespaces"]));
    assert_eq!(find(&objects, "ClusterRoleBinding", "crd-apiserver:namespace-reader")["subjects"], subject);
    let admission = find(&objects, "ClusterRole", "crd-apiserver:admission");
    assert_eq!(admission["rules"][0]["apiGroups"], serde_json::json!(["admissionregistration.k8s.io"]));
    assert!(admission["rules"][0]["resources"].as_array().unwrap().contains(&"validatingwebhookconfigurations".into()));
    assert_eq!(admission["rules"][2]["resources"], serde_json::json!(["resourcequotas/status"]));
    assert_eq!(find(&objects, "ClusterRoleBinding", "crd-apiserver:admission")["subjects"], subject);

    let set = find(&objects, "StatefulSet", "crd-apiserver");
    let pod = &set["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "crd-apiserver");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(container["securityContext"]["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(set["spec"]["volumeClaimTemplates"][0]["metadata"]["name"], "data");
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.contains(&"--storage=/var/lib/crd-apiserver"));
    assert!(args.contains(&"--definitions=/etc/crd-apiserver/definitions"));
    let service = find(&objects, "Service", "crd-apiserver");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");

    let registered: BTreeSet<(String, String)> = objects
        .iter()
        .filter(|o| o["kind"] == "APIService")
        .map(|o| {
            assert_eq!(
                o["spec"]["service"],
                serde_json::json!({"name": "crd-apiserver", "namespace": "crd-apiserver", "port": 443})
            );
            assert_eq!(
                o["metadata"]["name"].as_str().unwrap(),
                format!("{}.{}", o["spec"]["version"].as_str().unwrap(), o["spec"]["group"].as_str().unwrap())
            );
            (o["spec"]["group"].as_str().unwrap().to_string(), o["spec"]["version"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(registered, served_group_versions(&examples()));
}
