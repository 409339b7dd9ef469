//! The installable manifests: what `kubectl apply -f manifests/` creates must be what the
//! server needs (RBAC, non-root pod, probes, a Service on 443), and the generated files (the
//! definitions ConfigMap and one APIService per served group version) must match
//! `manifests/examples` as `crd-apiserver manifests` writes them (which regenerates them:
//! `cargo run -- manifests --definitions manifests/examples --output-dir manifests`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::path::PathBuf;

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

/// The served group versions of definition texts, plus the server's own (`serveddefinitions`).
fn served_group_versions(texts: &[(String, String)]) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::from([("crd-apiserver.io".to_string(), "v1alpha1".to_string())]);
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

/// Runs `crd-apiserver manifests` with `args`; returns (success, stdout, stderr).
fn manifests(args: &[&str]) -> (bool, String, String) {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_crd-apiserver")).arg("manifests").args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
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
    let dir = tempfile::tempdir().unwrap();
    let examples_dir = root().join("manifests/examples");
    let (ok, _, err) =
        manifests(&["--definitions", examples_dir.to_str().unwrap(), "--output-dir", dir.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    for file in ["20-definitions.yaml", "40-apiservices.yaml"] {
        let expected = std::fs::read_to_string(dir.path().join(file)).unwrap();
        let actual = std::fs::read_to_string(root().join("manifests").join(file)).unwrap_or_default();
        assert!(
            actual == expected,
            "manifests/{file} is stale: run cargo run -- manifests --definitions manifests/examples --output-dir manifests"
        );
    }
    // The ConfigMap holds each example exactly.
    let objects = objects();
    let map = find(&objects, "ConfigMap", "crd-apiserver-definitions");
    for (name, body) in examples() {
        assert_eq!(map["data"][&name], body.as_str(), "{name}");
    }
}

#[test]
fn the_manifests_command_prints_what_an_install_needs() {
    let dir = tempfile::tempdir().unwrap();
    let examples_dir = root().join("manifests/examples");
    let ca = crd_apiserver::cli::pki::Authority::new("install-ca").unwrap();
    let ca_file = dir.path().join("ca.crt");
    std::fs::write(&ca_file, &ca.pem.cert).unwrap();
    let (ok, printed, err) = manifests(&[
        "--definitions",
        examples_dir.to_str().unwrap(),
        "--namespace",
        "platform",
        "--ca-bundle",
        ca_file.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let objects = parse_documents(&printed).unwrap();
    let map = find(&objects, "ConfigMap", "crd-apiserver-definitions");
    assert_eq!(map["metadata"]["namespace"], "platform");
    for (name, body) in examples() {
        assert_eq!(map["data"][&name], body.as_str(), "{name}");
    }
    use base64::Engine;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca.pem.cert);
    let services: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "APIService").collect();
    assert_eq!(services.len(), served_group_versions(&examples()).len(), "{printed}");
    for service in services {
        assert_eq!(service["spec"]["caBundle"], bundle.as_str());
        assert_eq!(service["spec"]["service"]["namespace"], "platform");
        assert!(service["metadata"].get("annotations").is_none(), "no CA injection asked for");
    }
    // Broken definitions are reported, not installed.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        std::fs::read_to_string(examples_dir.join("crontabs.yaml")).unwrap().replace("served: true", "servd: true"),
    )
    .unwrap();
    let (ok, printed, err) = manifests(&["--definitions", broken.to_str().unwrap()]);
    assert!(!ok && printed.is_empty(), "{printed}");
    assert!(err.contains(r#"unknown field "spec.versions[0].servd""#), "{err}");
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

#[test]
fn serving_cert_script_issues_a_one_year_certificate_under_a_kept_ca() {
    let dir = tempfile::tempdir().unwrap();
    let run = |binary: &str| {
        let out = std::process::Command::new(root().join("hack/serving-cert.sh"))
            .args(["platform", dir.path().to_str().unwrap()])
            .env("CRD_APISERVER", binary)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    run(env!("CARGO_BIN_EXE_crd-apiserver"));
    let (ca, first) = (read("ca.crt"), read("serving.crt"));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["apiservices.yaml", "ca.crt", "ca.key", "serving-secret.yaml", "serving.crt", "serving.key"]);

    // The certificate: one year, for the Service's names, signed by the CA; the server loads it.
    let (_, pem) = x509_parser::pem::parse_x509_pem(first.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let days = (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()) / 86_400;
    assert_eq!(days, 365);
    let sans: Vec<String> =
        cert.subject_alternative_name().unwrap().unwrap().value.general_names.iter().map(|n| n.to_string()).collect();
    assert!(sans.iter().any(|n| n == "DNSName(crd-apiserver.platform.svc)"), "{sans:?}");
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(ca.as_bytes()).unwrap();
    assert!(cert.verify_signature(Some(ca_pem.parse_x509().unwrap().public_key())).is_ok());
    let provider = crd_apiserver::server::tls::provider();
    crd_apiserver::server::tls::load_certified_key(
        &dir.path().join("serving.crt"),
        &dir.path().join("serving.key"),
        &provider,
    )
    .unwrap();

    // The APIServices trust that CA, whichever tool wrote them; the Secret carries the pair.
    use base64::Engine;
    let bundle = base64::engine::general_purpose::STANDARD.encode(&ca);
    let check_apiservices = || {
        let services = parse_documents(&read("apiservices.yaml")).unwrap();
        assert_eq!(services.len(), served_group_versions(&examples()).len());
        for service in services {
            assert_eq!(service["kind"], "APIService");
            assert_eq!(service["spec"]["caBundle"], bundle.as_str());
            assert_eq!(service["spec"]["service"]["namespace"], "platform");
            assert!(service["metadata"].get("annotations").is_none());
        }
    };
    check_apiservices();
    let secret = &parse_documents(&read("serving-secret.yaml")).unwrap()[0];
    assert_eq!(secret["metadata"]["namespace"], "platform");
    assert_eq!(secret["data"]["ca.crt"], bundle.as_str());

    // Again, without the binary (openssl only): a new certificate under the same CA.
    run("");
    assert_eq!(read("ca.crt"), ca);
    assert_ne!(read("serving.crt"), first);
    check_apiservices();
}

/// manifests/ha: the etcd mode replaces the StatefulSet with a Deployment of three replicas
/// (same pod but for the storage flags and volumes), a PodDisruptionBudget and the same Service.
#[test]
fn the_high_availability_manifests_differ_from_the_statefulset_only_in_storage_and_placement() {
    let plain = objects();
    let ha: Vec<Value> =
        parse_documents(&std::fs::read_to_string(root().join("manifests/ha/30-deployment.yaml")).unwrap()).unwrap();
    assert_eq!(find(&ha, "Service", "crd-apiserver"), find(&plain, "Service", "crd-apiserver"));
    let deployment = find(&ha, "Deployment", "crd-apiserver");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let selector = serde_json::json!({"matchLabels": {"app.kubernetes.io/name": "crd-apiserver"}});
    assert_eq!(deployment["spec"]["selector"], selector);
    assert_eq!(
        find(&ha, "PodDisruptionBudget", "crd-apiserver")["spec"],
        serde_json::json!({"maxUnavailable": 1, "selector": selector})
    );

    let mut ha_pod = deployment["spec"]["template"]["spec"].clone();
    let mut sled_pod = find(&plain, "StatefulSet", "crd-apiserver")["spec"]["template"]["spec"].clone();
    let storage_flag = |a: &Value| {
        let a = a.as_str().unwrap();
        a.starts_with("--storage") || a.starts_with("--etcd-")
    };
    let ha_args: Vec<String> = ha_pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| storage_flag(a))
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ha_args,
        [
            "--storage-backend=etcd3",
            "--etcd-servers=https://etcd-0.etcd:2379,https://etcd-1.etcd:2379,https://etcd-2.etcd:2379",
            "--etcd-prefix=/crd-apiserver",
            "--etcd-cafile=/etc/crd-apiserver/etcd/ca.crt",
            "--etcd-certfile=/etc/crd-apiserver/etcd/tls.crt",
            "--etcd-keyfile=/etc/crd-apiserver/etcd/tls.key",
        ]
    );
    assert_eq!(
        ha_pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
            ["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(ha_pod["topologySpreadConstraints"][0]["topologyKey"], "topology.kubernetes.io/zone");
    // The rest of the pod is the StatefulSet's: the same image, probes, security and mounts.
    for pod in [&mut ha_pod, &mut sled_pod] {
        let object = pod.as_object_mut().unwrap();
        object.remove("affinity");
        object.remove("topologySpreadConstraints");
        object.insert(
            "volumes".into(),
            serde_json::json!(
                object["volumes"].as_array().unwrap().iter().filter(|v| v["name"] != "etcd-client").collect::<Vec<_>>()
            ),
        );
        let container = &mut pod["containers"][0];
        let args: Vec<Value> =
            container["args"].as_array().unwrap().iter().filter(|a| !storage_flag(a)).cloned().collect();
        container["args"] = Value::Array(args);
        let mounts: Vec<Value> = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["name"] != "data" && m["name"] != "etcd-client")
            .cloned()
            .collect();
        container["volumeMounts"] = Value::Array(mounts);
    }
    assert_eq!(ha_pod, sled_pod);
}

/// `--openapi-slices`: one Service per group version selecting the server's pods, as the
/// chart's `apiService.openAPISlices` makes them, and each APIService through its own.
#[test]
fn the_manifests_command_can_give_each_group_version_its_own_service() {
    let examples_dir = root().join("manifests/examples");
    let (ok, printed, err) = manifests(&["--definitions", examples_dir.to_str().unwrap(), "--openapi-slices"]);
    assert!(ok, "{err}");
    let objects = parse_documents(&printed).unwrap();
    let apiservices: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "APIService").collect();
    assert_eq!(apiservices.len(), served_group_versions(&examples()).len(), "{printed}");
    let services: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Service").collect();
    for apiservice in &apiservices {
        let group = apiservice["spec"]["group"].as_str().unwrap();
        let version = apiservice["spec"]["version"].as_str().unwrap();
        let name = format!("crd-apiserver-{}", crd_apiserver::api::openapi::slices::version_suffix(group, version));
        assert_eq!(apiservice["spec"]["service"]["name"], name.as_str(), "{apiservice}");
        let service =
            services.iter().find(|s| s["metadata"]["name"] == name.as_str()).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(service["metadata"]["namespace"], "crd-apiserver");
        assert_eq!(
            service["metadata"]["annotations"]["crd-apiserver.io/openapi-slice-of"],
            format!("{group}/{version}")
        );
        assert_eq!(service["spec"]["selector"]["app.kubernetes.io/name"], "crd-apiserver");
        assert_eq!(service["spec"]["ports"][0]["port"], 443);
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    }
    assert_eq!(services.len(), apiservices.len(), "one Service per group version");
    // Without the flag, every APIService goes through the server's own Service.
    let (ok, printed, err) = manifests(&["--definitions", examples_dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let objects = parse_documents(&printed).unwrap();
    assert!(objects.iter().all(|o| o["kind"] != "Service"));
    assert!(
        objects.iter().filter(|o| o["kind"] == "APIService").all(|a| a["spec"]["service"]["name"] == "crd-apiserver")
    );
}
