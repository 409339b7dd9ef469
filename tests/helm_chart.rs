//! The Helm chart, rendered by the real helm (installed by hack/install-helm.sh): it lints,
//! and renders one APIService per served group version pointing at the chart's Service with
//! the caBundle of the serving certificate it makes, both RBAC bindings, and the definitions;
//! its monitoring (ServiceMonitor, metrics RBAC, Grafana dashboard) in `helm_chart/monitoring.rs`;
//! definitions from the cluster and takeovers in `helm_chart/cluster_definitions.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod helm_chart {
    pub mod cluster_definitions;
    pub mod high_availability;
    pub mod monitoring;
    pub mod upgrade;
}
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use crd_apiserver::definitions::load::parse_documents;
use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> String {
    root().join("manifests/helm/crd-apiserver").to_str().unwrap().to_string()
}

fn run_helm(args: &[&str]) -> std::process::Output {
    let binary = std::env::var_os("HELM").map(PathBuf::from).unwrap_or_else(|| root().join(".tools/bin/helm"));
    Command::new(&binary)
        .args(args)
        .env("HELM_CACHE_HOME", std::env::temp_dir().join("crd-apiserver-helm-cache"))
        .env("HELM_CONFIG_HOME", std::env::temp_dir().join("crd-apiserver-helm-config"))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {} ({e}): run hack/install-helm.sh (hack/test.sh does)", binary.display())
        })
}

/// What helm printed when it refused; panics if it succeeded.
fn helm_refuses(args: &[&str]) -> String {
    let out = run_helm(args);
    assert!(!out.status.success(), "helm {args:?} succeeded:\n{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).to_string()
}

fn helm(args: &[&str]) -> String {
    let out = run_helm(args);
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn example(name: &str) -> String {
    root().join("manifests/examples").join(name).to_str().unwrap().to_string()
}

/// Renders the chart as release `demo` in namespace `crd-apiserver` with two example files.
fn render(extra: &[&str]) -> Vec<Value> {
    let crontabs = format!("definitions.inline.crontabs\\.yaml={}", example("crontabs.yaml"));
    let tenants = format!("definitions.inline.tenants\\.yaml={}", example("tenants.yaml"));
    let chart = chart();
    let mut args = vec![
        "template",
        "demo",
        chart.as_str(),
        "--namespace",
        "crd-apiserver",
        "--set-file",
        &crontabs,
        "--set-file",
        &tenants,
    ];
    args.extend_from_slice(extra);
    parse_documents(&helm(&args)).unwrap()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn apiservices(objects: &[Value]) -> Vec<&Value> {
    objects.iter().filter(|o| o["kind"] == "APIService").collect()
}

#[test]
fn the_chart_lints() {
    let crontabs = format!("definitions.inline.crontabs\\.yaml={}", example("crontabs.yaml"));
    helm(&["lint", &chart(), "--set-file", &crontabs]);
    helm(&[
        "lint",
        &chart(),
        "--set-file",
        &crontabs,
        "--set",
        "servingCertificate.mode=certManager",
        "--set",
        "persistence.enabled=false",
    ]);
}

#[test]
fn values_that_cannot_work_do_not_render() {
    // No definitions: an upgrade like this would stop serving every resource of the release.
    let refused = helm_refuses(&["template", "demo", &chart()]);
    assert!(refused.contains("no definitions to serve"), "{refused}");
    // values.schema.json: misspelled or mistyped values are named.
    let refused = render_refused(&["--set", "servingCertificate.mode=selfSigned"]);
    assert!(
        refused.contains("at '/servingCertificate/mode': value must be one of 'generate', 'given', 'certManager'"),
        "{refused}"
    );
    let refused = render_refused(&["--set", "securePort=none"]);
    assert!(refused.contains("at '/securePort'"), "{refused}");
    let refused = render_refused(&["--set", "persistence.enable=false"]);
    assert!(refused.contains("at '/persistence'") && refused.contains("'enable'"), "{refused}");
    // At the top level too: `replica` for `replicas` would leave one replica without a word.
    let refused = render_refused(&["--set", "replica=3"]);
    assert!(refused.contains("additional properties 'replica' not allowed"), "{refused}");
    // A parent chart's `global` values are no typo.
    let crontabs = format!("definitions.inline.crontabs\\.yaml={}", example("crontabs.yaml"));
    helm(&["template", "demo", &chart(), "--set-file", &crontabs, "--set", "global.imageRegistry=example.com"]);
}

/// helm's refusal to render the chart with the two example files and `extra`.
fn render_refused(extra: &[&str]) -> String {
    let crontabs = format!("definitions.inline.crontabs\\.yaml={}", example("crontabs.yaml"));
    let chart = chart();
    let mut args = vec!["template", "demo", chart.as_str(), "--set-file", &crontabs];
    args.extend_from_slice(extra);
    helm_refuses(&args)
}

#[test]
fn apiservices_trust_the_generated_serving_certificate() {
    let objects = render(&[]);
    let secret = find(&objects, "Secret", "demo-crd-apiserver-serving");
    let ca = secret["data"]["ca.crt"].as_str().unwrap();
    let names: Vec<&str> = apiservices(&objects).iter().map(|a| a["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["v1.platform.example.com", "v1.stable.example.com", "v1alpha1.crd-apiserver.io"]);
    for api in apiservices(&objects) {
        assert_eq!(
            api["spec"]["service"],
            json!({"name": "demo-crd-apiserver", "namespace": "crd-apiserver", "port": 443})
        );
        assert_eq!(api["spec"]["caBundle"], ca, "the APIService trusts the CA that signed the serving certificate");
        assert_eq!(api["spec"]["groupPriorityMinimum"], 1000);
    }
    let find_group = |g: &str| {
        apiservices(&objects).into_iter().find(|a| a["spec"]["group"] == g).unwrap()["spec"]["version"].clone()
    };
    assert_eq!(find_group("stable.example.com"), "v1");

    // The serving certificate names the Service as the aggregator dials it.
    let pem = base64::engine::general_purpose::STANDARD.decode(secret["data"]["tls.crt"].as_str().unwrap()).unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    let cert = block.parse_x509().unwrap();
    let names: Vec<String> =
        cert.subject_alternative_name().unwrap().unwrap().value.general_names.iter().map(|n| n.to_string()).collect();
    assert!(names.iter().any(|n| n.contains("demo-crd-apiserver.crd-apiserver.svc")), "{names:?}");

    // The service exposes 443 and selects the pod.
    let service = find(&objects, "Service", "demo-crd-apiserver");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    assert_eq!(service["spec"]["selector"], set["spec"]["template"]["metadata"]["labels"]);
}

#[test]
fn openapi_slices_give_each_group_version_its_own_service() {
    let objects = render(&["--set", "apiService.openAPISlices=true"]);
    let main = find(&objects, "Service", "demo-crd-apiserver");
    let apis = apiservices(&objects);
    for api in &apis {
        let group = api["spec"]["group"].as_str().unwrap();
        let version = api["spec"]["version"].as_str().unwrap();
        // The name the server reads the group version's slice from (api::openapi::slices).
        let name =
            format!("demo-crd-apiserver-{}", crd_apiserver::api::openapi::slices::version_suffix(group, version));
        assert_eq!(api["spec"]["service"], json!({"name": name, "namespace": "crd-apiserver", "port": 443}));
        let service = find(&objects, "Service", &name);
        assert_eq!(service["spec"]["selector"], main["spec"]["selector"], "{group}/{version}: the same pods");
        assert_eq!(service["spec"]["ports"], main["spec"]["ports"]);
        assert_eq!(
            service["metadata"]["annotations"]["crd-apiserver.io/openapi-slice-of"],
            format!("{group}/{version}")
        );
    }
    assert_eq!(objects.iter().filter(|o| o["kind"] == "Service").count(), apis.len() + 1, "one per APIService");
    // The serving certificate is valid for every Service of the namespace.
    let secret = find(&objects, "Secret", "demo-crd-apiserver-serving");
    let pem = base64::engine::general_purpose::STANDARD.decode(secret["data"]["tls.crt"].as_str().unwrap()).unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    let cert = block.parse_x509().unwrap();
    let names: Vec<String> =
        cert.subject_alternative_name().unwrap().unwrap().value.general_names.iter().map(|n| n.to_string()).collect();
    assert!(names.iter().any(|n| n.contains("*.crd-apiserver.svc")), "{names:?}");
    let objects = render(&["--set", "apiService.openAPISlices=true", "--set", "servingCertificate.mode=certManager"]);
    let certificate = find(&objects, "Certificate", "demo-crd-apiserver-serving");
    assert!(certificate["spec"]["dnsNames"].as_array().unwrap().iter().any(|n| n == "*.crd-apiserver.svc"));
    // Off by default: one Service, no wildcard.
    let objects = render(&[]);
    assert_eq!(objects.iter().filter(|o| o["kind"] == "Service").count(), 1);
}

/// The pod's arguments of a render with `extra`.
fn pod_args(extra: &[&str]) -> Vec<String> {
    let objects = render(extra);
    let container = &find(&objects, "StatefulSet", "demo-crd-apiserver")["spec"]["template"]["spec"]["containers"][0];
    container["args"].as_array().unwrap().iter().filter_map(Value::as_str).map(String::from).collect()
}

#[test]
fn the_openapi_v2_content_is_a_value() {
    let flag = |args: &[String]| args.iter().filter(|a| a.starts_with("--openapi-v2")).cloned().collect::<Vec<_>>();
    assert_eq!(flag(&pod_args(&[])), Vec::<String>::new(), "the server's default (full)");
    assert_eq!(flag(&pod_args(&["--set", "apiService.openAPIV2=empty"])), ["--openapi-v2=empty"]);
    assert_eq!(flag(&pod_args(&["--set", "apiService.openAPIV2=definitions"])), ["--openapi-v2=definitions"]);
    let refused = render_refused(&["--set", "apiService.openAPIV2=none"]);
    assert!(refused.contains("openAPIV2"), "{refused}");
}

#[test]
fn rbac_definitions_and_the_pod() {
    let objects = render(&["--set", "image.tag=1.2.3", "--set", "persistence.size=5Gi"]);
    let subject = json!([{"kind": "ServiceAccount", "name": "demo-crd-apiserver", "namespace": "crd-apiserver"}]);
    let delegator = find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:system:auth-delegator");
    assert_eq!(
        delegator["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"})
    );
    assert_eq!(delegator["subjects"], subject);
    let reader = find(&objects, "RoleBinding", "demo-crd-apiserver:extension-apiserver-authentication-reader");
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    assert_eq!(
        reader["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"})
    );
    assert_eq!(reader["subjects"], subject);
    assert_eq!(find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:namespace-reader")["subjects"], subject);
    let admission = find(&objects, "ClusterRole", "demo-crd-apiserver:admission");
    assert_eq!(admission["rules"], serde_json::from_str::<Value>(&rules_of_manifest_admission_role()).unwrap());
    assert_eq!(find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:admission")["subjects"], subject);
    find(&objects, "ServiceAccount", "demo-crd-apiserver");

    let definitions = find(&objects, "ConfigMap", "demo-crd-apiserver-definitions");
    assert_eq!(
        definitions["data"]["crontabs.yaml"],
        std::fs::read_to_string(example("crontabs.yaml")).unwrap().as_str()
    );
    assert_eq!(definitions["data"]["tenants.yaml"], std::fs::read_to_string(example("tenants.yaml")).unwrap().as_str());

    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    let pod = &set["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "crd-apiserver:1.2.3");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(container["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(set["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "5Gi");
    // Graceful shutdown: serve on for the delay after SIGTERM, and a grace period that covers
    // the delay and the drain (--request-timeout + 2 s).
    let args: Vec<&str> = container["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(args.contains(&"--shutdown-delay-duration=5s"), "{args:?}");
    assert_eq!(pod["terminationGracePeriodSeconds"], 75);
    assert!(
        helm_refuses(&["template", "demo", &chart(), "--set", "shutdown.delay=5d"]).contains("/shutdown/delay"),
        "a delay that is no Go duration is refused"
    );
}

#[test]
fn certificate_modes() {
    // cert-manager: a Certificate for the Service, and the CA injected into the APIServices.
    let objects = render(&["--set", "servingCertificate.mode=certManager"]);
    let certificate = find(&objects, "Certificate", "demo-crd-apiserver-serving");
    assert_eq!(certificate["spec"]["dnsNames"][0], "demo-crd-apiserver.crd-apiserver.svc");
    assert!(!objects.iter().any(|o| o["kind"] == "Secret"));
    for api in apiservices(&objects) {
        assert_eq!(
            api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "crd-apiserver/demo-crd-apiserver-serving"
        );
        assert!(api["spec"].get("caBundle").is_none());
    }
    // Given: the caBundle is the given CA.
    let objects = render(&[
        "--set",
        "servingCertificate.mode=given",
        "--set",
        "servingCertificate.cert=CERT",
        "--set",
        "servingCertificate.key=KEY",
        "--set",
        "servingCertificate.caBundle=CA",
    ]);
    let encoded = base64::engine::general_purpose::STANDARD.encode("CA");
    for api in apiservices(&objects) {
        assert_eq!(api["spec"]["caBundle"], encoded.as_str());
    }
    // Without persistence the store is an emptyDir.
    let objects = render(&["--set", "persistence.enabled=false"]);
    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    assert!(set["spec"].get("volumeClaimTemplates").is_none());
    assert!(
        set["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "data" && v.get("emptyDir").is_some())
    );
}

/// The rules of the plain manifests' admission ClusterRole: the chart grants the same.
fn rules_of_manifest_admission_role() -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/10-rbac.yaml")).unwrap();
    let role = text
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str::<Value>(doc).unwrap())
        .find(|doc| doc["kind"] == "ClusterRole" && doc["metadata"]["name"] == "crd-apiserver:admission")
        .unwrap();
    role["rules"].to_string()
}

#[test]
fn changed_definitions_do_not_roll_the_pod() {
    // The server follows its ConfigMap volume and serves a change live: an upgrade that only
    // changes definitions changes the ConfigMap, never the pod template.
    let before = render(&[]);
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("crontabs.yaml");
    let text = std::fs::read_to_string(example("crontabs.yaml")).unwrap();
    std::fs::write(&changed, format!("{text}\n# changed\n")).unwrap();
    let crontabs = format!("definitions.inline.crontabs\\.yaml={}", changed.display());
    let after = render(&["--set-file", &crontabs]);
    let config = |objects: &[Value]| find(objects, "ConfigMap", "demo-crd-apiserver-definitions")["data"].clone();
    assert_ne!(config(&before), config(&after), "the ConfigMap carries the change");
    let set = |objects: &[Value]| find(objects, "StatefulSet", "demo-crd-apiserver").clone();
    assert_eq!(set(&before), set(&after), "the StatefulSet does not change, so the pod is not rolled");
    assert!(set(&after)["spec"]["template"]["metadata"].get("annotations").is_none());
}
