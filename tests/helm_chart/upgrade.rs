//! What `helm upgrade` renders for a release that is installed already: with the serving
//! certificate in mode `generate`, the chart's `lookup` finds the Secret of the installed
//! release and keeps its CA, certificate and key, so the APIServices' caBundle does not change
//! and nothing has to be re-trusted. Rendered by the real helm against the control-plane
//! double with `--dry-run=server`, which renders as an upgrade does (lookups answered by the
//! cluster); a render with no cluster (`helm template`, GitOps tools) makes a new CA each time.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::control_plane::ControlPlane;
use crate::support::kubectl::Kubectl;
use crate::support::{stderr, stdout};
use crate::{apiservices, find, render};

const SECRET: &str = "demo-crd-apiserver-serving";

fn ca_of(objects: &[Value]) -> (String, String) {
    let secret = find(objects, "Secret", SECRET);
    (secret["data"]["ca.crt"].as_str().unwrap().to_string(), secret["data"]["tls.crt"].as_str().unwrap().to_string())
}

fn render_against(kubeconfig: &Path) -> Vec<Value> {
    render(&["--dry-run=server", "--kubeconfig", kubeconfig.to_str().unwrap()])
}

#[test]
fn the_generated_ca_is_kept_when_the_release_is_upgraded() {
    let plane = ControlPlane::start();
    let admin = plane.cert_kubeconfig("admin", &["system:masters"]);

    // First install: no Secret in the cluster yet, so the chart generates a CA.
    let installed = render_against(&admin);
    let (ca, cert) = ca_of(&installed);
    for service in apiservices(&installed) {
        assert!(service["spec"]["caBundle"] == ca.as_str(), "{} trusts another CA", service["metadata"]["name"]);
    }

    // The install creates the Secret as rendered, with the ownership marks helm adds to what
    // it installs (an upgrade refuses to adopt objects without them).
    let mut secret = find(&installed, "Secret", SECRET).clone();
    secret["metadata"]["annotations"] =
        json!({"meta.helm.sh/release-name": "demo", "meta.helm.sh/release-namespace": "crd-apiserver"});
    secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    let secret = serde_json::to_string(&secret).unwrap();
    let home = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::new("kubectl", &admin, home.path());
    let created = kubectl.run(&["create", "-f", "-"], &secret, &[]);
    assert!(created.status.success(), "{}", stderr(&created));
    assert_eq!(stdout(&created).trim(), format!("secret/{SECRET} created"));

    // The upgrade's render reads it back and keeps CA, certificate and key.
    let upgraded = render_against(&admin);
    assert!(ca_of(&upgraded) == (ca.clone(), cert), "the upgrade's render made a new CA or certificate");
    assert!(
        find(&upgraded, "Secret", SECRET)["data"]["tls.key"] == find(&installed, "Secret", SECRET)["data"]["tls.key"],
        "the upgrade's render made a new key"
    );
    for service in apiservices(&upgraded) {
        assert!(service["spec"]["caBundle"] == ca.as_str(), "{} trusts another CA", service["metadata"]["name"]);
    }

    // Rendered with no cluster to ask, every render is a new CA: the README sends GitOps users
    // to mode `given` or cert-manager for that reason.
    let offline = render(&[]);
    assert!(ca_of(&offline).0 != ca, "a render with no cluster found the CA");
}
