//! The chart's monitoring: the optional ServiceMonitor (the secure port over HTTPS, the serving
//! certificate's CA and the Service's name for TLS, the scraper's bearer token), the
//! metrics-reader ClusterRole and its optional binding, and the Grafana dashboard ConfigMap; and
//! the plain manifests of manifests/monitoring and manifests/grafana say the same.

use base64::Engine;
use crd_apiserver::definitions::load::parse_documents;
use serde_json::{Value, json};

use crate::{find, helm, render, render_refused, root};

fn service_monitors(objects: &[Value]) -> Vec<&Value> {
    objects.iter().filter(|o| o["kind"] == "ServiceMonitor").collect()
}

fn dashboard_file() -> String {
    std::fs::read_to_string(root().join("manifests/grafana/crd-apiserver.json")).unwrap()
}

#[test]
fn monitoring_is_off_by_default_but_the_reader_role() {
    let objects = render(&[]);
    assert!(service_monitors(&objects).is_empty());
    assert!(
        !objects.iter().any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "demo-crd-apiserver-dashboard")
    );
    let role = find(&objects, "ClusterRole", "demo-crd-apiserver:metrics-reader");
    assert_eq!(role["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
    assert!(
        !objects.iter().any(|o| o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == role["metadata"]["name"])
    );

    let objects = render(&["--set", "metrics.readerRole.create=false"]);
    assert!(!objects.iter().any(|o| o["metadata"]["name"] == "demo-crd-apiserver:metrics-reader"));
}

#[test]
fn the_reader_role_binds_a_scrapers_service_account() {
    let objects = render(&[
        "--set",
        "metrics.readerRole.bindServiceAccount.name=prometheus-k8s",
        "--set",
        "metrics.readerRole.bindServiceAccount.namespace=monitoring",
    ]);
    let binding = find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:metrics-reader");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "demo-crd-apiserver:metrics-reader"})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}])
    );

    let refused = render_refused(&["--set", "metrics.readerRole.bindServiceAccount.name=prometheus-k8s"]);
    assert!(refused.contains("metrics.readerRole.bindServiceAccount.namespace is required"), "{refused}");
    let refused = render_refused(&[
        "--set",
        "metrics.readerRole.create=false",
        "--set",
        "metrics.readerRole.bindServiceAccount.name=prometheus-k8s",
        "--set",
        "metrics.readerRole.bindServiceAccount.namespace=monitoring",
    ]);
    assert!(refused.contains("needs metrics.readerRole.create"), "{refused}");
    let refused = render_refused(&["--set", "metrics.serviceMonitor.interval=30 seconds"]);
    assert!(refused.contains("at '/metrics/serviceMonitor/interval'"), "{refused}");
    let refused = render_refused(&["--set", "metrics.serviceMonitor.enable=true"]);
    assert!(refused.contains("at '/metrics/serviceMonitor'") && refused.contains("'enable'"), "{refused}");
}

const ENABLED: [&str; 8] = [
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    "--set",
    "metrics.serviceMonitor.interval=15s",
    "--set",
    "metrics.serviceMonitor.scrapeTimeout=5s",
];

fn the_endpoint(objects: &[Value]) -> &Value {
    let monitors = service_monitors(objects);
    assert_eq!(monitors.len(), 1);
    let endpoints = monitors[0]["spec"]["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 1);
    &endpoints[0]
}

#[test]
fn the_service_monitor_scrapes_the_secure_port_with_the_scrapers_token() {
    let objects = render(&ENABLED);
    let monitor = find(&objects, "ServiceMonitor", "demo-crd-apiserver");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["namespace"], "crd-apiserver");
    assert_eq!(monitor["metadata"]["labels"]["release"], "kube-prometheus-stack");
    assert_eq!(monitor["spec"]["namespaceSelector"], json!({"matchNames": ["crd-apiserver"]}));

    // It selects the chart's Service, whose port of that name leads to the server's secure port.
    let service = find(&objects, "Service", "demo-crd-apiserver");
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&service["metadata"]["labels"][key], value, "the Service lacks the label {key}");
    }
    let endpoint = the_endpoint(&objects);
    let port = service["spec"]["ports"].as_array().unwrap().iter().find(|p| p["name"] == endpoint["port"]).unwrap();
    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    let container = &set["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["name"], port["targetPort"]);
    assert!(
        container["args"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("--secure-port={}", container["ports"][0]["containerPort"])))
    );

    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!((endpoint["interval"].as_str(), endpoint["scrapeTimeout"].as_str()), (Some("15s"), Some("5s")));
    assert_eq!(endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token");
    assert!(endpoint.get("authorization").is_none());
    assert_eq!(endpoint["tlsConfig"].as_object().unwrap().len(), 2, "{}", endpoint["tlsConfig"]);
    assert!(endpoint["tlsConfig"].get("insecureSkipVerify").is_none());
}

/// The name and CA the ServiceMonitor verifies the server with are those of the certificate
/// the server presents: the CA signed it and it names the Service.
#[test]
fn the_service_monitor_trusts_the_serving_certificate() {
    let objects = render(&ENABLED);
    let tls = &the_endpoint(&objects)["tlsConfig"];
    assert_eq!(tls["serverName"], "demo-crd-apiserver.crd-apiserver.svc");
    let secret = find(&objects, "Secret", tls["ca"]["secret"]["name"].as_str().unwrap());
    let decode =
        |key: &str| base64::engine::general_purpose::STANDARD.decode(secret["data"][key].as_str().unwrap()).unwrap();
    let (_, ca_pem) = x509_parser::pem::parse_x509_pem(&decode(tls["ca"]["secret"]["key"].as_str().unwrap())).unwrap();
    let (_, cert_pem) = x509_parser::pem::parse_x509_pem(&decode("tls.crt")).unwrap();
    let cert = cert_pem.parse_x509().unwrap();
    assert!(cert.verify_signature(Some(ca_pem.parse_x509().unwrap().public_key())).is_ok());
    let names: Vec<String> =
        cert.subject_alternative_name().unwrap().unwrap().value.general_names.iter().map(|n| n.to_string()).collect();
    assert!(names.contains(&format!("DNSName({})", tls["serverName"].as_str().unwrap())), "{names:?}");
    // The pod mounts that Secret as its serving certificate.
    let set = find(&objects, "StatefulSet", "demo-crd-apiserver");
    let volumes = set["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["secret"]["secretName"] == tls["ca"]["secret"]["name"]));

    // cert-manager writes the same Secret (its CA issuers fill ca.crt), for the same name.
    let mut certificate_mode = ENABLED.to_vec();
    certificate_mode.extend(["--set", "servingCertificate.mode=certManager"]);
    let objects = render(&certificate_mode);
    let certificate = find(&objects, "Certificate", "demo-crd-apiserver-serving");
    let tls = &the_endpoint(&objects)["tlsConfig"];
    assert_eq!(certificate["spec"]["secretName"], tls["ca"]["secret"]["name"]);
    assert_eq!(tls["ca"]["secret"]["key"], "ca.crt");
    assert!(certificate["spec"]["dnsNames"].as_array().unwrap().contains(&tls["serverName"]));
    assert_eq!(find(&objects, "Issuer", "demo-crd-apiserver-ca")["spec"]["ca"]["secretName"], "demo-crd-apiserver-ca");

    // Given: the Secret holds the given CA.
    let mut given = ENABLED.to_vec();
    given.extend([
        "--set",
        "servingCertificate.mode=given",
        "--set",
        "servingCertificate.cert=CERT",
        "--set",
        "servingCertificate.key=KEY",
        "--set",
        "servingCertificate.caBundle=CA",
    ]);
    let objects = render(&given);
    let tls = &the_endpoint(&objects)["tlsConfig"];
    let secret = find(&objects, "Secret", tls["ca"]["secret"]["name"].as_str().unwrap());
    assert_eq!(secret["data"][tls["ca"]["secret"]["key"].as_str().unwrap()], "Q0E=");
}

#[test]
fn the_service_monitor_takes_other_credentials_and_tls() {
    let mut args = ENABLED.to_vec();
    args.extend([
        "--set",
        "metrics.serviceMonitor.authorization.type=Bearer",
        "--set",
        "metrics.serviceMonitor.authorization.credentials.name=scraper-token",
        "--set",
        "metrics.serviceMonitor.authorization.credentials.key=token",
        "--set",
        "metrics.serviceMonitor.tlsConfig.ca.configMap.name=cluster-ca",
        "--set",
        "metrics.serviceMonitor.tlsConfig.ca.configMap.key=ca.crt",
        "--set",
        "metrics.serviceMonitor.tlsConfig.serverName=metrics.example.com",
        "--set",
        "metrics.serviceMonitor.metricRelabelings[0].action=drop",
        "--set",
        "metrics.serviceMonitor.metricRelabelings[0].sourceLabels[0]=__name__",
        "--set",
        "metrics.serviceMonitor.metricRelabelings[0].regex=apiserver_response_sizes_bucket",
    ]);
    let objects = render(&args);
    let endpoint = the_endpoint(&objects);
    assert_eq!(
        endpoint["authorization"],
        json!({"type": "Bearer", "credentials": {"name": "scraper-token", "key": "token"}})
    );
    assert!(endpoint.get("bearerTokenFile").is_none());
    assert_eq!(
        endpoint["tlsConfig"],
        json!({"ca": {"configMap": {"name": "cluster-ca", "key": "ca.crt"}}, "serverName": "metrics.example.com"})
    );
    assert_eq!(endpoint["metricRelabelings"][0]["sourceLabels"], json!(["__name__"]));
    assert!(endpoint.get("relabelings").is_none());
}

#[test]
fn the_dashboard_config_map_holds_the_dashboard() {
    let objects = render(&[
        "--set",
        "metrics.grafanaDashboard.enabled=true",
        "--set",
        "metrics.grafanaDashboard.namespace=monitoring",
        "--set",
        "metrics.grafanaDashboard.annotations.grafana_folder=Kubernetes",
    ]);
    let config_map = find(&objects, "ConfigMap", "demo-crd-apiserver-dashboard");
    assert_eq!(config_map["metadata"]["namespace"], "monitoring");
    assert_eq!(config_map["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(config_map["metadata"]["annotations"], json!({"grafana_folder": "Kubernetes"}));
    let text = config_map["data"]["crd-apiserver.json"].as_str().unwrap();
    assert_eq!(text, dashboard_file(), "the chart's dashboards/crd-apiserver.json differs from manifests/grafana's");
    let dashboard: Value = serde_json::from_str(text).unwrap();
    assert_eq!(dashboard["uid"], "crd-apiserver");

    let objects = render(&["--set", "metrics.grafanaDashboard.enabled=true"]);
    assert_eq!(find(&objects, "ConfigMap", "demo-crd-apiserver-dashboard")["metadata"]["namespace"], "crd-apiserver");
}

#[test]
fn the_chart_ships_the_dashboard_of_manifests_grafana() {
    let chart_copy =
        std::fs::read_to_string(root().join("manifests/helm/crd-apiserver/dashboards/crd-apiserver.json")).unwrap();
    assert!(
        chart_copy == dashboard_file(),
        "copy manifests/grafana/crd-apiserver.json to manifests/helm/crd-apiserver/dashboards/ (the chart cannot read files outside itself)"
    );
}

/// The plain manifests (kubectl apply -f manifests/monitoring/) scrape and grant as the chart
/// does when installed as release crd-apiserver in namespace crd-apiserver.
#[test]
fn the_plain_monitoring_manifests_match_the_chart() {
    let crontabs =
        format!("definitions.inline.crontabs\\.yaml={}", root().join("manifests/examples/crontabs.yaml").display());
    let chart = root().join("manifests/helm/crd-apiserver");
    let rendered = helm(&[
        "template",
        "crd-apiserver",
        chart.to_str().unwrap(),
        "--namespace",
        "crd-apiserver",
        "--set-file",
        &crontabs,
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "metrics.readerRole.bindServiceAccount.name=prometheus-k8s",
        "--set",
        "metrics.readerRole.bindServiceAccount.namespace=monitoring",
    ]);
    let chart_objects = parse_documents(&rendered).unwrap();
    let mut plain = Vec::new();
    for file in ["metrics-reader.yaml", "servicemonitor.yaml"] {
        let text = std::fs::read_to_string(root().join("manifests/monitoring").join(file)).unwrap();
        plain.extend(parse_documents(&text).unwrap());
    }
    assert_eq!(plain.len(), 3);
    for kind in ["ClusterRole", "ClusterRoleBinding", "ServiceMonitor"] {
        let ours = plain.iter().find(|o| o["kind"] == kind).unwrap();
        let name = ours["metadata"]["name"].as_str().unwrap();
        let charted = find(&chart_objects, kind, name);
        for field in ["rules", "roleRef", "subjects"] {
            assert_eq!(ours[field], charted[field], "{kind} {name}: {field}");
        }
        assert_eq!(ours["spec"]["endpoints"], charted["spec"]["endpoints"], "{kind} {name}");
        assert_eq!(ours["spec"]["namespaceSelector"], charted["spec"]["namespaceSelector"]);
    }
    // The plain ServiceMonitor selects the plain Service.
    let service_text = std::fs::read_to_string(root().join("manifests/30-statefulset.yaml")).unwrap();
    let service = parse_documents(&service_text).unwrap().into_iter().find(|o| o["kind"] == "Service").unwrap();
    let monitor = plain.iter().find(|o| o["kind"] == "ServiceMonitor").unwrap();
    assert_eq!(monitor["metadata"]["namespace"], service["metadata"]["namespace"]);
    for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&service["metadata"]["labels"][key], value);
    }
}

#[test]
fn the_chart_lints_with_monitoring_on() {
    let crontabs =
        format!("definitions.inline.crontabs\\.yaml={}", root().join("manifests/examples/crontabs.yaml").display());
    let chart = root().join("manifests/helm/crd-apiserver");
    let mut args = vec!["lint", chart.to_str().unwrap(), "--set-file", &crontabs];
    args.extend(ENABLED);
    args.extend(["--set", "metrics.grafanaDashboard.enabled=true"]);
    helm(&args);
}
