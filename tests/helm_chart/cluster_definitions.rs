//! The chart's values for definitions from the cluster and takeovers: `clusterDefinitions`
//! sets `--cluster-definitions-selector`/`--cluster-definitions` and grants list+watch of
//! CustomResourceDefinitions; `takeover.rbac` grants the takeover permissions and sets
//! `--takeover-service`/`--takeover-ca-file`; `takeover.automatic` sets
//! `--takeover-cluster-definitions`. Each appears exactly when its value says so (none by
//! default), and the rendered arguments are parsed by the server's own flag parser.

use clap::Parser;
use crd_apiserver::cli::{Cli, Command, ServeArgs};
use serde_json::{Value, json};

use crate::{chart, find, helm, helm_refuses, render, render_refused};

const SELECTOR: [&str; 2] = ["--set-string", "clusterDefinitions.selector=crd-apiserver.io/serve in (true\\,yes)"];
const NAMES: [&str; 2] = ["--set", "clusterDefinitions.names={workflows.argoproj.io,cronworkflows.argoproj.io}"];
const TAKEOVER: [&str; 4] = ["--set", "takeover.rbac=true", "--set", "takeover.groups={argoproj.io}"];
const AUTOMATIC: [&str; 2] = ["--set", "takeover.automatic=true"];

fn with(parts: &[&[&'static str]]) -> Vec<&'static str> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// The server's container arguments, in the StatefulSet (sled) or the Deployment (etcd3).
fn args(objects: &[Value]) -> Vec<String> {
    let workload = objects
        .iter()
        .find(|o| o["kind"] == "StatefulSet" || o["kind"] == "Deployment")
        .expect("a workload for the server");
    let args = workload["spec"]["template"]["spec"]["containers"][0]["args"].as_array().unwrap();
    args.iter().map(|a| a.as_str().unwrap().to_string()).collect()
}

/// The rendered arguments as the server parses them.
fn serve_args(objects: &[Value]) -> ServeArgs {
    let args = args(objects);
    let cli = Cli::try_parse_from(std::iter::once("crd-apiserver".to_string()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("the server refuses the chart's arguments {args:?}: {e}"));
    match cli.command {
        Command::Serve(serve) => *serve,
        other => panic!("not serve: {other:?}"),
    }
}

fn cluster_roles(objects: &[Value]) -> Vec<&str> {
    objects.iter().filter(|o| o["kind"] == "ClusterRole").map(|o| o["metadata"]["name"].as_str().unwrap()).collect()
}

/// Whether any ClusterRole of the release grants `verb` (any verb: `None`) on `resource`.
fn granted(objects: &[Value], resource: &str, verb: Option<&str>) -> bool {
    objects.iter().filter(|o| o["kind"] == "ClusterRole").any(|role| {
        role["rules"].as_array().into_iter().flatten().any(|rule| {
            rule["resources"].as_array().into_iter().flatten().any(|r| r == resource || r == "*")
                && verb.is_none_or(|verb| rule["verbs"].as_array().into_iter().flatten().any(|v| v == verb || v == "*"))
        })
    })
}

/// The release's service account, as every binding names it.
fn subject() -> Value {
    json!([{"kind": "ServiceAccount", "name": "demo-crd-apiserver", "namespace": "crd-apiserver"}])
}

#[test]
fn nothing_of_it_by_default() {
    let objects = render(&[]);
    let serve = serve_args(&objects);
    assert_eq!(serve.cluster_definitions_selector, None);
    assert!(serve.cluster_definitions.is_empty());
    assert!(serve.takeover_ca_file.is_none() && !serve.takeover_cluster_definitions);
    assert!(!args(&objects).iter().any(|a| a.starts_with("--cluster-definitions") || a.starts_with("--takeover")));
    assert_eq!(
        cluster_roles(&objects),
        ["demo-crd-apiserver:metrics-reader", "demo-crd-apiserver:namespace-reader", "demo-crd-apiserver:admission"]
    );
    for resource in ["customresourcedefinitions", "apiservices"] {
        assert!(!granted(&objects, resource, None), "{resource} granted by default");
    }
    // The admission role reads policies and bindings, never writes them.
    for resource in ["validatingadmissionpolicies", "validatingadmissionpolicybindings"] {
        assert!(granted(&objects, resource, Some("watch")));
        assert!(!granted(&objects, resource, Some("create")), "{resource} written by default");
    }
}

#[test]
fn cluster_definitions_set_their_flags_and_read_definitions_only() {
    let objects = render(&with(&[&SELECTOR, &NAMES]));
    let serve = serve_args(&objects);
    assert_eq!(serve.cluster_definitions_selector.as_deref(), Some("crd-apiserver.io/serve in (true,yes)"));
    assert_eq!(serve.cluster_definitions, ["workflows.argoproj.io", "cronworkflows.argoproj.io"]);
    assert!(serve.takeover_ca_file.is_none() && !serve.takeover_cluster_definitions, "no takeover without the opt-in");
    assert_eq!(
        find(&objects, "ClusterRole", "demo-crd-apiserver:cluster-definitions")["rules"],
        json!([{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                "verbs": ["get", "list", "watch"]}])
    );
    let binding = find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:cluster-definitions");
    assert_eq!(binding["roleRef"]["name"], "demo-crd-apiserver:cluster-definitions");
    assert_eq!(binding["subjects"], subject());
    assert!(!cluster_roles(&objects).contains(&"demo-crd-apiserver:takeover"));
    assert!(!granted(&objects, "apiservices", None));
    assert!(!granted(&objects, "validatingadmissionpolicybindings", Some("create")));

    // Either value alone is enough for the role.
    for values in [&SELECTOR[..], &NAMES[..]] {
        let objects = render(values);
        find(&objects, "ClusterRole", "demo-crd-apiserver:cluster-definitions");
        let serve = serve_args(&objects);
        assert_eq!(serve.cluster_definitions_selector.is_some(), values == SELECTOR);
        assert_eq!(serve.cluster_definitions.is_empty(), values == SELECTOR);
    }
}

#[test]
fn cluster_definitions_alone_are_something_to_serve() {
    // No file: only the cluster's definitions, so no APIService of the chart's (kube-aggregator's
    // own keep the requests until a takeover switches them).
    let chart = chart();
    let rendered = helm(&["template", "demo", &chart, "--namespace", "crd-apiserver", NAMES[0], NAMES[1]]);
    let objects = crd_apiserver::definitions::load::parse_documents(&rendered).unwrap();
    let apiservices: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "APIService").collect();
    assert_eq!(apiservices.len(), 1, "{apiservices:?}");
    assert_eq!(apiservices[0]["metadata"]["name"], "v1alpha1.crd-apiserver.io", "only the server's own group");
    find(&objects, "ConfigMap", "demo-crd-apiserver-definitions");
    assert_eq!(serve_args(&objects).cluster_definitions.len(), 2);
    // Without either, an empty release is still refused.
    assert!(helm_refuses(&["template", "demo", &chart]).contains("no definitions to serve"));
}

#[test]
fn takeover_permissions_and_flags_only_by_the_opt_in() {
    let objects = render(&with(&[&NAMES, &TAKEOVER]));
    let serve = serve_args(&objects);
    assert_eq!(serve.takeover_service, "crd-apiserver/demo-crd-apiserver");
    assert_eq!(serve.takeover_ca_file.as_deref(), Some(std::path::Path::new("/etc/crd-apiserver/tls/ca.crt")));
    assert!(!serve.takeover_cluster_definitions, "automatic takeovers are their own opt-in");
    let role = find(&objects, "ClusterRole", "demo-crd-apiserver:takeover");
    let rules = role["rules"].as_array().unwrap();
    let rule_for = |group: &str, resource: &str| {
        rules
            .iter()
            .find(|r| {
                r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == group))
                    && r["resources"].as_array().is_some_and(|rs| rs.iter().any(|r| r == resource))
            })
            .unwrap_or_else(|| panic!("no rule for {resource}.{group} in {rules:?}"))
    };
    assert_eq!(rule_for("apiextensions.k8s.io", "customresourcedefinitions")["verbs"], json!(["get", "list", "watch"]));
    assert_eq!(rule_for("argoproj.io", "*")["verbs"], json!(["get", "list", "create", "update", "delete"]));
    assert_eq!(
        rule_for("apiregistration.k8s.io", "apiservices")["verbs"],
        json!(["get", "list", "create", "update", "delete"])
    );
    for resource in ["validatingadmissionpolicies", "validatingadmissionpolicybindings"] {
        assert_eq!(rule_for("admissionregistration.k8s.io", resource)["verbs"], json!(["get", "create", "delete"]));
    }
    assert_eq!(find(&objects, "ClusterRoleBinding", "demo-crd-apiserver:takeover")["subjects"], subject());

    // The takeover role without definitions from the cluster: takeovers of definitions served
    // from files still read the CRD, but no list+watch role for following them.
    let objects = render(&TAKEOVER);
    find(&objects, "ClusterRole", "demo-crd-apiserver:takeover");
    assert!(!cluster_roles(&objects).contains(&"demo-crd-apiserver:cluster-definitions"));
    assert!(serve_args(&objects).cluster_definitions.is_empty());
}

#[test]
fn automatic_takeovers() {
    let objects = render(&with(&[&SELECTOR, &TAKEOVER, &AUTOMATIC]));
    let serve = serve_args(&objects);
    assert!(serve.takeover_cluster_definitions && serve.takeover_ca_file.is_some());
    assert!(serve.cluster_definitions_selector.is_some());
    find(&objects, "ClusterRole", "demo-crd-apiserver:takeover");
    find(&objects, "ClusterRole", "demo-crd-apiserver:cluster-definitions");
    // The same arguments on the etcd Deployment (the pod template is shared).
    let etcd = with(&[
        &SELECTOR,
        &TAKEOVER,
        &AUTOMATIC,
        &["--set", "storage.backend=etcd3", "--set", "storage.etcd.servers={https://etcd:2379}", "--set", "replicas=2"],
    ]);
    let objects = render(&etcd);
    find(&objects, "Deployment", "demo-crd-apiserver");
    let serve = serve_args(&objects);
    assert!(serve.takeover_cluster_definitions && serve.cluster_definitions_selector.is_some());
    assert!(serve.takeover_ca_file.is_some());

    // Values the server would refuse at start are refused at render time.
    let refused = render_refused(&with(&[&SELECTOR, &AUTOMATIC]));
    assert!(refused.contains("takeover.automatic needs takeover.rbac=true"), "{refused}");
    let refused = render_refused(&with(&[&TAKEOVER, &AUTOMATIC]));
    assert!(refused.contains("set clusterDefinitions.selector or clusterDefinitions.names"), "{refused}");
    let refused = render_refused(&["--set", "takeover.rbac=true"]);
    assert!(refused.contains("takeover.rbac needs takeover.groups"), "{refused}");
    let refused = render_refused(&["--set", "clusterDefinitions.names={workflows}"]);
    assert!(refused.contains("/clusterDefinitions/names/0"), "{refused}");
    let refused = render_refused(&["--set", "takeover.automatc=true"]);
    assert!(refused.contains("'automatc'"), "{refused}");
}

#[test]
fn the_chart_lints_with_everything_on() {
    let chart = chart();
    let mut args = vec!["lint", chart.as_str()];
    args.extend(with(&[&SELECTOR, &NAMES, &TAKEOVER, &AUTOMATIC]));
    helm(&args);
}
