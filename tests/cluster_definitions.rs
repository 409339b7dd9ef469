//! Definitions from the cluster (`--cluster-definitions-selector`, `--cluster-definitions`):
//! the main apiserver's CustomResourceDefinitions (the control-plane double's) served beside
//! the files, through kube-aggregator with real kubectl. Selected by label and by name; a
//! definition labelled later, a version added (`helm upgrade`), a definition deleted or
//! unlabelled; a name both a file and the cluster define (reported, the file's served); an
//! invalid definition (reported, not served, served once fixed); the main apiserver's
//! CustomResourceDefinition API unreachable at start and while serving.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::control_plane::{ControlPlane, rbac};
use support::http::Client;
use support::kubectl::Kubectl;

const SELECT: &str = "--cluster-definitions-selector=crd-apiserver.io/serve=true";

/// A namespaced definition of `example.com` with `versions` (the last one stored) and labels.
fn definition(plural: &str, kind: &str, versions: &[&str], labels: Value) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| {
            json!({"name": v, "served": true, "storage": i == 0, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "string"}}}},
            }}})
        })
        .collect();
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com"), "labels": labels},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": plural, "kind": kind}, "versions": versions},
    })
}

fn selected() -> Value {
    json!({"crd-apiserver.io/serve": "true"})
}

/// Runs `probe` until it returns `Some`, for at most `seconds`.
fn eventually<T>(what: &str, seconds: u64, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} did not happen in {seconds} seconds");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Cluster {
    cluster: TestCluster,
    admin: Kubectl,
    raw: Client,
}

impl Cluster {
    fn on(plane: ControlPlane, files: &[&str], extra: &[&str], live: bool) -> Cluster {
        plane.add_rule(rbac::definitions_reader());
        let cluster = if live {
            TestCluster::start_live_on(plane, files, extra)
        } else {
            TestCluster::start_on(plane, files, extra)
        };
        for version in ["v1", "v2"] {
            cluster.plane.register("example.com", version);
        }
        let kubeconfig = cluster.user("admin", &["system:masters"]);
        let admin = Kubectl::new("kubectl", &kubeconfig, &cluster.server.dir.path().join("admin"));
        let raw = Client::to_plane(&cluster.plane, "admin-token");
        Cluster { cluster, admin, raw }
    }

    /// The status of a GET through the double.
    fn status(&self, path: &str) -> u16 {
        self.raw.get(path).unwrap().status
    }

    fn served(&self, what: &str, path: &str, seconds: u64) {
        eventually(&format!("{what} served"), seconds, || (self.status(path) == 200).then_some(()));
    }

    /// Waits until the server asked the CustomResourceDefinition API again (refused, during an
    /// outage): what it was told meanwhile, it has seen.
    fn asks_again(&self) {
        let crds = |plane: &ControlPlane| plane.requests(&http::Method::GET, "customresourcedefinitions");
        let before = crds(&self.cluster.plane);
        eventually("a request to the CustomResourceDefinition API", 60, || {
            (crds(&self.cluster.plane) > before).then_some(())
        });
    }

    fn gone(&self, what: &str, path: &str) {
        eventually(&format!("{what} no longer served"), 10, || (self.status(path) == 404).then_some(()));
    }
}

const GADGETS: &str = "/apis/example.com/v1/namespaces/default/gadgets";
const GADGETS_V2: &str = "/apis/example.com/v2/namespaces/default/gadgets";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";
const THINGS: &str = "/apis/example.com/v1/namespaces/default/things";
const OTHERS: &str = "/apis/example.com/v1/namespaces/default/others";

#[test]
fn selected_definitions_are_served_and_followed() {
    let plane = ControlPlane::start();
    plane.create_crd(definition("gadgets", "Gadget", &["v1"], selected())).unwrap();
    plane.create_crd(definition("widgets", "Widget", &["v1"], json!({}))).unwrap();
    plane.create_crd(definition("things", "Thing", &["v1"], json!({}))).unwrap();
    plane.create_crd(definition("others", "Other", &["v1"], json!({"crd-apiserver.io/serve": "false"}))).unwrap();
    let c = Cluster::on(plane, &[support::CRONTAB_CRD], &[SELECT, "--cluster-definitions=things.example.com"], false);

    // Ready means listed: the selected and the named definitions are served with the files'.
    assert_eq!(c.status(GADGETS), 200);
    assert_eq!(c.status(THINGS), 200);
    assert_eq!(c.status(WIDGETS), 404);
    assert_eq!(c.status(OTHERS), 404);
    let resources = c.admin.ok(&["api-resources", "--api-group=example.com", "--no-headers"]);
    assert!(
        resources.contains("gadgets") && resources.contains("things") && !resources.contains("widgets"),
        "{resources}"
    );
    c.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: XL}\n",
    );
    assert_eq!(c.admin.ok(&["get", "gadget", "g1", "-o", "jsonpath={.spec.size}"]), "XL");
    let status = eventually("the status of the served definition", 10, || {
        let status = c.raw.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/gadgets.example.com").unwrap();
        (status.status == 200).then(|| status.json())
    });
    assert_eq!(status["status"]["storedVersions"], json!(["v1"]), "{status}");

    // Labelled later (kubectl label on the main apiserver): served.
    let label_kubeconfig = c.cluster.plane.cert_kubeconfig("cluster-admin", &["system:masters"]);
    let labelled =
        c.cluster.kubectl(&label_kubeconfig, &["label", "crd", "widgets.example.com", "crd-apiserver.io/serve=true"]);
    assert!(labelled.status.success(), "{}", support::stderr(&labelled));
    c.served("the labelled widgets", WIDGETS, 10);

    // A version added, as a chart upgrade does: served, the object readable in it.
    c.cluster
        .plane
        .update_crd("gadgets.example.com", |crd| {
            crd["spec"]["versions"] =
                definition("gadgets", "Gadget", &["v1", "v2"], json!({}))["spec"]["versions"].clone();
        })
        .unwrap();
    c.served("gadgets v2", GADGETS_V2, 10);
    let g1 = c.raw.get(&format!("{GADGETS_V2}/g1")).unwrap().json();
    assert_eq!((g1["apiVersion"].as_str(), g1["spec"]["size"].as_str()), (Some("example.com/v2"), Some("XL")));

    // Deleted from the cluster, or out of the selection: no longer served; the objects stay.
    c.cluster.plane.delete_crd("things.example.com").unwrap();
    c.gone("the deleted things", THINGS);
    c.cluster.plane.update_crd("gadgets.example.com", |crd| crd["metadata"]["labels"] = json!({})).unwrap();
    c.gone("the unlabelled gadgets", GADGETS);
    let log = c.cluster.server.log();
    assert!(log.contains("no longer serving the definition; its objects stay in the store"), "{log}");
    c.cluster.plane.update_crd("gadgets.example.com", |crd| crd["metadata"]["labels"] = selected()).unwrap();
    c.served("the relabelled gadgets", GADGETS, 10);
    assert_eq!(c.admin.ok(&["get", "gadget", "g1", "-o", "jsonpath={.spec.size}"]), "XL");
    // The files' definition was served throughout.
    assert_eq!(c.status("/apis/stable.example.com/v1/namespaces/default/crontabs"), 200);
}

/// A status object's conditions: type, status and reason.
fn conditions(status: &Value) -> Vec<(&str, &str, &str)> {
    let all = status["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
    fn text<'a>(c: &'a Value, field: &str) -> &'a str {
        c[field].as_str().unwrap_or_default()
    }
    all.iter().map(|c| (text(c, "type"), text(c, "status"), text(c, "reason"))).collect()
}

#[test]
fn conflicts_and_invalid_definitions_are_reported_and_not_served() {
    let plane = ControlPlane::start();
    // The seed's CronTab, in the cluster too, with another short name.
    let mut crontab: Value = serde_saphyr::from_str(support::CRONTAB_CRD).unwrap();
    crontab["metadata"]["labels"] = selected();
    crontab["spec"]["names"]["shortNames"] = json!(["cluster-ct"]);
    plane.create_crd(crontab).unwrap();
    // Two storage versions: refused by our checks (stored as an older release accepted it).
    let mut broken = definition("gadgets", "Gadget", &["v1", "v2"], selected());
    broken["spec"]["versions"][1]["storage"] = json!(true);
    plane.put_crd_unchecked(broken);
    plane.create_crd(definition("widgets", "Widget", &["v1"], selected())).unwrap();
    let c = Cluster::on(plane, &[support::CRONTAB_CRD], &[SELECT], false);

    assert_eq!(c.status(WIDGETS), 200);
    assert_eq!(c.status(GADGETS), 404, "an invalid definition is not served");
    let log = c.cluster.server.log();
    assert!(
        log.contains("cluster:customresourcedefinitions/gadgets.example.com: CustomResourceDefinition \\\"gadgets.example.com\\\" is invalid")
            || log.contains("cluster:customresourcedefinitions/gadgets.example.com: CustomResourceDefinition \"gadgets.example.com\" is invalid"),
        "{log}"
    );
    assert!(log.contains("must have exactly one version marked as storage version"), "{log}");
    // The file's CronTab is served (its short name, not the cluster's), the conflict shown in
    // its status and the log.
    let resources = c.admin.ok(&["api-resources", "--api-group=stable.example.com", "--no-headers"]);
    assert!(resources.contains("ct ") && !resources.contains("cluster-ct"), "{resources}");
    // The status object is written by the lifecycle controller after the reload: wait for it.
    let expected = "cluster:customresourcedefinitions/crontabs.stable.example.com: CustomResourceDefinition \"crontabs.stable.example.com\" is invalid: also defined in ";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let status =
            c.raw.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com").unwrap().json();
        let error = status["status"]["lastReloadError"].as_str().unwrap_or_default().to_string();
        if error.starts_with(expected) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(log.contains("also defined in"), "{log}");
    let status =
        c.raw.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com").unwrap().json();
    assert_eq!(
        conditions(&status),
        [
            ("NamesAccepted", "True", "NoConflicts"),
            ("Established", "True", "InitialNamesAccepted"),
            ("SourceRefused", "True", "Duplicate")
        ]
    );
    // The invalid cluster definition, served by nothing, has a status object of its own: not
    // established, its source refused with the field's path.
    let gadgets = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/gadgets.example.com";
    let refused = eventually("the invalid definition's status", 10, || {
        let status = c.raw.get(gadgets).unwrap();
        (status.status == 200).then(|| status.json())
    });
    assert_eq!(conditions(&refused), [("Established", "False", "SourceRefused"), ("SourceRefused", "True", "Invalid")]);
    assert_eq!(refused["status"]["source"], "cluster:customresourcedefinitions/gadgets.example.com");
    let message = refused["status"]["conditions"][1]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.versions: Invalid value:")
            && message.contains("must have exactly one version marked as storage version"),
        "{message}"
    );

    // Fixed in the cluster: served, and its status says so.
    c.cluster
        .plane
        .update_crd("gadgets.example.com", |crd| crd["spec"]["versions"][1]["storage"] = json!(false))
        .unwrap();
    c.served("the fixed gadgets", GADGETS, 10);
    eventually("the served definition's status", 10, || {
        let status = c.raw.get(gadgets).unwrap().json();
        (conditions(&status)
            == [("NamesAccepted", "True", "NoConflicts"), ("Established", "True", "InitialNamesAccepted")])
        .then_some(())
    });
    // The conflict ends when the cluster's copy leaves the selection.
    c.cluster.plane.update_crd("crontabs.stable.example.com", |crd| crd["metadata"]["labels"] = json!({})).unwrap();
    eventually("the conflict cleared", 10, || {
        let status =
            c.raw.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com").unwrap().json();
        status["status"].get("lastReloadError").is_none_or(Value::is_null).then_some(())
    });
}

#[test]
fn an_unreachable_main_apiserver_keeps_what_is_served() {
    let plane = ControlPlane::start();
    plane.create_crd(definition("gadgets", "Gadget", &["v1"], selected())).unwrap();
    plane.set_crd_outage(true);
    let c = Cluster::on(plane, &[support::CRONTAB_CRD], &[SELECT], true);

    // The files are served; the cluster's definitions wait, and /readyz says why.
    let crontabs = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    c.served("the files' crontabs", crontabs, 10);
    assert_eq!(c.status(GADGETS), 404);
    let readyz = Client::new(&c.cluster.server, None).get("/readyz?verbose").unwrap();
    assert_eq!(readyz.status, 500, "{}", readyz.text());
    assert!(readyz.text().contains("[-]informer-sync failed"), "{}", readyz.text());
    c.asks_again();
    c.cluster.plane.set_crd_outage(false);
    c.served("gadgets once the apiserver answers", GADGETS, 40);
    eventually("ready", 10, || {
        (Client::new(&c.cluster.server, None).get("/readyz").unwrap().status == 200).then_some(())
    });

    // Unreachable while serving: what is served stays served, writes included.
    c.cluster.plane.set_crd_outage(true);
    c.asks_again();
    c.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: S}\n",
    );
    // A change made meanwhile is seen once the apiserver answers again.
    c.cluster
        .plane
        .update_crd("gadgets.example.com", |crd| {
            crd["spec"]["versions"] =
                definition("gadgets", "Gadget", &["v1", "v2"], json!({}))["spec"]["versions"].clone();
        })
        .unwrap();
    c.asks_again();
    assert_eq!(c.status(GADGETS_V2), 404);
    assert_eq!(c.status(GADGETS), 200);
    c.cluster.plane.set_crd_outage(false);
    c.served("gadgets v2 after the outage", GADGETS_V2, 40);
    // The outage was seen (the client's own retries of 503s, or the follower's).
    let log = c.cluster.server.log();
    assert!(
        log.contains("failed with status 503 Service Unavailable")
            || log.contains(
                "following customresourcedefinitions selected by crd-apiserver.io/serve=true failed; retrying"
            ),
        "{log}"
    );
}

#[test]
fn a_missing_permission_is_named_and_granting_it_serves() {
    let plane = ControlPlane::start();
    plane.create_crd(definition("gadgets", "Gadget", &["v1"], selected())).unwrap();
    let cluster = TestCluster::start_live_on(plane, &[support::CRONTAB_CRD], &[SELECT]);
    cluster.plane.register("example.com", "v1");
    let raw = {
        cluster.user("admin", &["system:masters"]);
        Client::to_plane(&cluster.plane, "admin-token")
    };
    let forbidden = "customresourcedefinitions.apiextensions.k8s.io is forbidden: User \\\"system:serviceaccount:crd-apiserver:crd-apiserver\\\" cannot list resource \\\"customresourcedefinitions\\\" in API group \\\"apiextensions.k8s.io\\\" at the cluster scope";
    eventually("the refusal logged", 10, || cluster.server.log().contains(forbidden).then_some(()));
    assert_eq!(raw.get(GADGETS).unwrap().status, 404);
    cluster.plane.add_rule(rbac::definitions_reader());
    eventually("gadgets served once granted", 40, || (raw.get(GADGETS).unwrap().status == 200).then_some(()));
}

#[test]
fn a_definition_named_by_flag_needs_a_grant_on_that_name_only() {
    let plane = ControlPlane::start();
    plane.create_crd(definition("things", "Thing", &["v1"], json!({}))).unwrap();
    plane.create_crd(definition("others", "Other", &["v1"], json!({}))).unwrap();
    // RBAC grants reading the one definition by its name (resourceNames), nothing else.
    plane.add_rule(rbac::definitions_reader().named(&["things.example.com"]));
    let cluster = TestCluster::start_on(plane, &[], &["--cluster-definitions=things.example.com"]);
    cluster.plane.register("example.com", "v1");
    cluster.user("admin", &["system:masters"]);
    let raw = Client::to_plane(&cluster.plane, "admin-token");
    assert_eq!(raw.get(THINGS).unwrap().status, 200);
    assert_eq!(raw.get(OTHERS).unwrap().status, 404);
    assert!(!cluster.server.log().contains("forbidden"), "{}", cluster.server.log());
}

#[test]
fn a_cluster_definition_changed_while_stopped_is_refused_as_a_live_update_would_be() {
    let plane = ControlPlane::start();
    plane.create_crd(definition("gadgets", "Gadget", &["v1"], selected())).unwrap();
    let mut c = Cluster::on(plane, &[], &[SELECT], false);
    c.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g1, namespace: default}\nspec: {size: S}\n",
    );
    c.cluster.server.stop();
    // Only v2 now (the main apiserver's own storedVersions edited to allow it: its objects are
    // ours), which would drop the version g1 is stored in.
    c.cluster.plane.put_crd_unchecked(definition("gadgets", "Gadget", &["v2"], selected()));
    c.cluster.server.spawn(&[SELECT]);
    let refusal = "cluster:customresourcedefinitions/gadgets.example.com: CustomResourceDefinition \\\"gadgets.example.com\\\" is invalid: status.storedVersions[0]: Invalid value: \\\"v1\\\": missing from spec.versions";
    let log = c.cluster.server.log();
    assert!(log.contains(refusal), "{log}");
    let g1 = c.raw.get(&format!("{GADGETS}/g1")).unwrap();
    assert_eq!(g1.json()["spec"]["size"], "S", "{} {}", g1.text(), c.cluster.server.log());
    assert_eq!(c.status(GADGETS_V2), 404);
}
