//! The control-plane double's CustomResourceDefinition API, checked against what clients of
//! kube-apiserver rely on: kube-rs' typed client and watcher (list+watch and watch-list, label
//! selectors seeing a definition leave and join the selection), the Status texts of refusals,
//! compare-and-swap updates and the status subresource, deletion through the cleanup
//! finalizer, and kubectl (`get crds`, `apply`, `label`, `delete`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use support::control_plane::{ControlPlane, rbac};
use support::http::Client;

const PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn widget(plural: &str, labels: Value) -> Value {
    let kind = format!("{}{}", plural[..1].to_uppercase(), &plural[1..plural.len() - 1]);
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com"), "labels": labels},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    })
}

fn admin(plane: &ControlPlane) -> Client {
    plane.add_user("admin-token", rbac::User::new("admin", &["system:masters"]));
    Client::to_plane(plane, "admin-token")
}

#[test]
fn writes_answer_as_kube_apiserver() {
    let plane = ControlPlane::start();
    let client = admin(&plane);
    let created = client.send_json("POST", PATH, &widget("gadgets", json!({"serve": "true"})));
    assert_eq!(created.status, 201, "{}", created.text());
    let created = created.json();
    // The create answers before the controllers ran: the first storage version only.
    assert_eq!(created["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(created["status"]["acceptedNames"], json!({"plural": "", "kind": ""}));
    assert_eq!(created["spec"]["names"]["singular"], "gadget");
    assert_eq!(created["spec"]["names"]["listKind"], "GadgetList");
    assert_eq!(created["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(created["metadata"]["generation"], 1);
    let read = client.get(&format!("{PATH}/gadgets.example.com")).unwrap().json();
    let conditions: Vec<&str> =
        read["status"]["conditions"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(conditions, ["NamesAccepted", "Established"]);
    assert_eq!(read["status"]["acceptedNames"]["kind"], "Gadget");

    let again = client.send_json("POST", PATH, &widget("gadgets", json!({})));
    assert_eq!(again.status, 409);
    assert_eq!(
        again.json()["message"],
        "customresourcedefinitions.apiextensions.k8s.io \"gadgets.example.com\" already exists"
    );

    let mut misnamed = widget("gizmos", json!({}));
    misnamed["metadata"]["name"] = json!("gizmo.example.com");
    misnamed["spec"]["scope"] = json!("Global");
    let refused = client.send_json("POST", PATH, &misnamed);
    assert_eq!(refused.status, 422);
    assert_eq!(
        refused.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"gizmo.example.com\" is invalid: [metadata.name: Invalid value: \"gizmo.example.com\": must be spec.names.plural+\".\"+spec.group, spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"]"
    );

    // Updates must carry the resourceVersion, and a stale one conflicts.
    let mut update = read.clone();
    update["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    let unconditional = client.send_json("PUT", &format!("{PATH}/gadgets.example.com"), &update);
    assert_eq!(unconditional.status, 422);
    assert_eq!(
        unconditional.json()["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"
    );
    let mut v2 = read.clone();
    v2["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v2", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
    ]);
    let updated = client.send_json("PUT", &format!("{PATH}/gadgets.example.com"), &v2);
    assert_eq!(updated.status, 200, "{}", updated.text());
    let updated = updated.json();
    assert_eq!(updated["metadata"]["generation"], 2);
    assert_eq!(updated["status"]["storedVersions"], json!(["v1", "v2"]));
    let stale = client.send_json("PUT", &format!("{PATH}/gadgets.example.com"), &v2);
    assert_eq!(stale.status, 409);
    assert_eq!(
        stale.json()["message"],
        "Operation cannot be fulfilled on customresourcedefinitions.apiextensions.k8s.io \"gadgets.example.com\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Dropping a stored version is refused until the status no longer lists it.
    let current = client.get(&format!("{PATH}/gadgets.example.com")).unwrap().json();
    let mut only_v2 = current.clone();
    only_v2["spec"]["versions"] =
        json!([{"name": "v2", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]);
    let dropped = client.send_json("PUT", &format!("{PATH}/gadgets.example.com"), &only_v2);
    assert_eq!(dropped.status, 422);
    assert!(dropped.json()["message"].as_str().unwrap().contains("status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions; v1 was previously a storage version"), "{}", dropped.text());
    let mut status = current.clone();
    status["status"]["storedVersions"] = json!(["v2"]);
    status["spec"]["group"] = json!("ignored.example.com");
    let status_update = client.send_json("PUT", &format!("{PATH}/gadgets.example.com/status"), &status);
    assert_eq!(status_update.status, 200, "{}", status_update.text());
    assert_eq!(status_update.json()["spec"]["group"], "example.com", "a status update changes only the status");
    only_v2["metadata"]["resourceVersion"] = status_update.json()["metadata"]["resourceVersion"].clone();
    let dropped = client.send_json("PUT", &format!("{PATH}/gadgets.example.com"), &only_v2);
    assert_eq!(dropped.status, 200, "{}", dropped.text());

    // A merge patch of the labels.
    let patched = client
        .send(
            "PATCH",
            &format!("{PATH}/gadgets.example.com"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"serve":null,"tier":"gold"}}}"#,
        )
        .unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(patched.json()["metadata"]["labels"], json!({"tier": "gold"}));
    assert_eq!(patched.json()["metadata"]["generation"], 3, "labels do not move the generation");

    // Delete: the finalizer controller's pass removes it at once (it has no objects).
    let deleted = client.send("DELETE", &format!("{PATH}/gadgets.example.com"), "application/json", "").unwrap();
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.json()["metadata"]["finalizers"], json!(["customresourcecleanup.apiextensions.k8s.io"]));
    let gone = client.get(&format!("{PATH}/gadgets.example.com")).unwrap();
    assert_eq!(gone.status, 404);
    assert_eq!(
        gone.json()["message"],
        "customresourcedefinitions.apiextensions.k8s.io \"gadgets.example.com\" not found"
    );
}

#[test]
fn lists_page_and_select() {
    let plane = ControlPlane::start();
    let client = admin(&plane);
    for (plural, serve) in [("alphas", "true"), ("betas", "false"), ("gammas", "true"), ("deltas", "true")] {
        plane.create_crd(widget(plural, json!({"crd-apiserver.io/serve": serve}))).unwrap();
    }
    let selected = client.get(&format!("{PATH}?labelSelector=crd-apiserver.io%2Fserve%3Dtrue")).unwrap().json();
    let names: Vec<&str> =
        selected["items"].as_array().unwrap().iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alphas.example.com", "deltas.example.com", "gammas.example.com"]);
    let first = client.get(&format!("{PATH}?limit=3")).unwrap().json();
    assert_eq!(first["items"].as_array().unwrap().len(), 3);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    // A page after a change still reads the list's revision.
    plane.delete_crd("gammas.example.com").unwrap();
    let token = first["metadata"]["continue"].as_str().unwrap();
    let next = client.get(&format!("{PATH}?limit=3&continue={token}")).unwrap().json();
    let names: Vec<&str> =
        next["items"].as_array().unwrap().iter().map(|c| c["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["gammas.example.com"]);
    assert_eq!(next["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
    let bad = client.get(&format!("{PATH}?labelSelector=a%20in%20(")).unwrap();
    assert_eq!(bad.status, 400, "{}", bad.text());
    let forbidden = Client::to_plane(&plane, support::control_plane::SERVER_TOKEN).get(PATH).unwrap();
    assert_eq!(forbidden.status, 403);
    assert_eq!(
        forbidden.json()["message"],
        "customresourcedefinitions.apiextensions.k8s.io is forbidden: User \"system:serviceaccount:crd-apiserver:crd-apiserver\" cannot list resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope"
    );
    let invalid_watch = client.get(&format!("{PATH}?watch=1&sendInitialEvents=true")).unwrap();
    assert_eq!(invalid_watch.status, 422);
    assert_eq!(
        invalid_watch.json()["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
}

/// The names a kube-rs watcher's store holds once it settles on `expected`.
async fn settle(store: &kube::runtime::reflector::Store<CustomResourceDefinition>, expected: &[&str]) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut names: Vec<String> = store.state().iter().map(|c| c.metadata.name.clone().unwrap()).collect();
        names.sort();
        if names == expected {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "the watcher holds {names:?}, not {expected:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn kube_rs_watchers_follow_a_selection() {
    let plane = ControlPlane::start();
    plane.add_rule(rbac::definitions_reader());
    plane.set_crd_bookmark_interval(Duration::from_millis(200));
    plane.create_crd(widget("alphas", json!({"crd-apiserver.io/serve": "true"}))).unwrap();
    plane.create_crd(widget("betas", json!({}))).unwrap();
    let kubeconfig = plane.server_kubeconfig();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = crd_apiserver::kube::connect(Some(&kubeconfig)).await.unwrap().unwrap();
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let listed = api.list(&ListParams::default().labels("crd-apiserver.io/serve=true")).await.unwrap();
        assert_eq!(listed.items.len(), 1);
        for strategy in [watcher::InitialListStrategy::ListWatch, watcher::InitialListStrategy::StreamingList] {
            let mut config = watcher::Config::default().labels("crd-apiserver.io/serve=true");
            config.initial_list_strategy = strategy;
            let (store, writer) = kube::runtime::reflector::store();
            let stream = kube::runtime::reflector(writer, watcher(api.clone(), config));
            let task = tokio::spawn(stream.for_each(|_| async {}));
            settle(&store, &["alphas.example.com"]).await;
            // Labelled into the selection, labelled out of it, deleted.
            let label = |name: &str, value: Option<&str>| {
                plane
                    .update_crd(name, |crd| crd["metadata"]["labels"]["crd-apiserver.io/serve"] = json!(value))
                    .unwrap();
            };
            label("betas.example.com", Some("true"));
            settle(&store, &["alphas.example.com", "betas.example.com"]).await;
            label("alphas.example.com", None);
            settle(&store, &["betas.example.com"]).await;
            plane.delete_crd("betas.example.com").unwrap();
            settle(&store, &[]).await;
            // Put back for the next strategy.
            label("alphas.example.com", Some("true"));
            plane.create_crd(widget("betas", json!({}))).unwrap();
            settle(&store, &["alphas.example.com"]).await;
            task.abort();
        }
        // A typed create through the client is defaulted and established.
        let mut crd: CustomResourceDefinition = serde_json::from_value(widget("omegas", json!({}))).unwrap();
        crd.spec.names.singular = None;
        let mut admin_config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(plane.cert_kubeconfig("admin", &["system:masters"])).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap();
        admin_config.read_timeout = Some(Duration::from_secs(5));
        let admin_api: Api<CustomResourceDefinition> = Api::all(kube::Client::try_from(admin_config).unwrap());
        let created = admin_api.create(&PostParams::default(), &crd).await.unwrap();
        assert_eq!(created.spec.names.singular.as_deref(), Some("omega"));
    });
}

#[test]
fn watches_resume_and_bookmark() {
    let plane = ControlPlane::start();
    plane.set_crd_bookmark_interval(Duration::from_millis(100));
    let client = admin(&plane);
    let listed = client.get(PATH).unwrap().json();
    let from = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    plane.create_crd(widget("alphas", json!({}))).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let body = runtime.block_on(async {
        let mut stream = client
            .raw_get(&format!("{PATH}?watch=1&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=1"))
            .await;
        let mut text = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(3), tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut text))
                .await;
        String::from_utf8_lossy(&text).into_owned()
    });
    let types: Vec<String> = body
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter_map(|e| e["type"].as_str().map(str::to_string))
        .collect();
    // The create, then the controllers' status, then bookmarks.
    assert!(types.len() >= 3 && types[0] == "ADDED" && types[1] == "MODIFIED", "{types:?}\n{body}");
    assert!(types[2..].iter().all(|t| t == "BOOKMARK"), "{types:?}");
}

#[test]
fn kubectl_manages_definitions() {
    let plane = ControlPlane::start();
    let kubeconfig = plane.cert_kubeconfig("admin", &["system:masters"]);
    let dir = tempfile::tempdir().unwrap();
    let kubectl = |args: &[&str], stdin: Option<&str>| support::kubectl_with(&kubeconfig, dir.path(), args, stdin);
    let manifest = serde_json::to_string(&widget("gadgets", json!({}))).unwrap();
    let applied = kubectl(&["apply", "-f", "-"], Some(&manifest));
    assert!(applied.status.success(), "{}", support::stderr(&applied));
    assert_eq!(
        support::stdout(&applied).trim(),
        "customresourcedefinition.apiextensions.k8s.io/gadgets.example.com created"
    );
    let labelled = kubectl(&["label", "crd", "gadgets.example.com", "crd-apiserver.io/serve=true"], None);
    assert!(labelled.status.success(), "{}", support::stderr(&labelled));
    let got = kubectl(&["get", "crds", "-l", "crd-apiserver.io/serve=true"], None);
    assert!(got.status.success(), "{}", support::stderr(&got));
    let text = support::stdout(&got);
    assert!(text.starts_with("NAME") && text.contains("CREATED AT") && text.contains("gadgets.example.com"), "{text}");
    let one = kubectl(&["get", "crd", "gadgets.example.com"], None);
    let text = support::stdout(&one);
    assert!(
        text.starts_with("NAME") && text.lines().nth(1).is_some_and(|l| l.starts_with("gadgets.example.com ")),
        "{text}"
    );
    let yaml = kubectl(
        &[
            "get",
            "crd",
            "gadgets.example.com",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ],
        None,
    );
    assert_eq!(support::stdout(&yaml), "True", "{}", support::stderr(&yaml));
    let deleted = kubectl(&["delete", "crd", "gadgets.example.com"], None);
    assert!(deleted.status.success(), "{}", support::stderr(&deleted));
    assert!(plane.crd("gadgets.example.com").is_none());
}

#[test]
fn compacted_history_expires_and_watchers_list_again() {
    let plane = ControlPlane::start();
    plane.add_rule(rbac::definitions_reader());
    plane.create_crd(widget("alphas", json!({}))).unwrap();
    plane.create_crd(widget("betas", json!({}))).unwrap();
    let client = admin(&plane);
    let listed = client.get(&format!("{PATH}?limit=1")).unwrap().json();
    let old = listed["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    plane.update_crd("betas.example.com", |crd| crd["metadata"]["labels"] = json!({"a": "b"})).unwrap();
    plane.compact_crds();
    let token = listed["metadata"]["continue"].as_str().unwrap();
    let expired = client.get(&format!("{PATH}?limit=1&continue={token}")).unwrap();
    assert_eq!(expired.status, 410);
    assert!(expired.json()["message"].as_str().unwrap().starts_with("The provided continue parameter is too old"));
    let watched = client.get(&format!("{PATH}?watch=1&resourceVersion={old}")).unwrap();
    let event: Value = serde_json::from_str(watched.text().lines().next().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    assert!(event["object"]["message"].as_str().unwrap().starts_with(&format!("too old resource version: {old} (")));

    // A kube-rs watcher whose resourceVersion expired while the apiserver was away lists again.
    let kubeconfig = plane.server_kubeconfig();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let client = crd_apiserver::kube::connect(Some(&kubeconfig)).await.unwrap().unwrap();
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let (store, writer) = kube::runtime::reflector::store();
        let stream = kube::runtime::reflector(writer, watcher(api, watcher::Config::default()));
        let task = tokio::spawn(stream.for_each(|_| async {}));
        settle(&store, &["alphas.example.com", "betas.example.com"]).await;
        let asked = plane.requests(&http::Method::GET, "customresourcedefinitions");
        plane.set_crd_outage(true);
        plane.delete_crd("alphas.example.com").unwrap();
        plane.create_crd(widget("gammas", json!({}))).unwrap();
        plane.compact_crds();
        // The watcher asked again during the outage (and was refused) before it ends.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while plane.requests(&http::Method::GET, "customresourcedefinitions") == asked {
            assert!(tokio::time::Instant::now() < deadline, "the watcher never asked during the outage");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        plane.set_crd_outage(false);
        settle(&store, &["betas.example.com", "gammas.example.com"]).await;
        task.abort();
    });
}
