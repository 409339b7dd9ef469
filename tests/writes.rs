//! Deletion semantics (preconditions, finalizers, propagation, collections), dry runs and
//! generation rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::{Value, json};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer, stderr, table};

const COLL: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name, "labels": labels}, "spec": {"image": "x"}})
}

fn exists(client: &Client, name: &str) -> bool {
    client.get(&format!("{COLL}/{name}")).unwrap().status == 200
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let mut object = crontab("held", json!({}));
    object["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    assert_eq!(client.send_json("POST", COLL, &object).status, 201);
    let deleted = client.request("DELETE", &format!("{COLL}/held"), None, None).unwrap();
    assert_eq!(deleted.status, 200);
    let body = deleted.json();
    assert_eq!(body["kind"], "CronTab", "a pending deletion returns the object");
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 0);
    assert!(exists(&client, "held"));
    // No new finalizers while deleting; other changes are allowed.
    let added = client
        .send(
            "PATCH",
            &format!("{COLL}/held"),
            "application/merge-patch+json",
            r#"{"metadata":{"finalizers":["example.com/cleanup","example.com/more"]}}"#,
        )
        .unwrap();
    assert_eq!(added.status, 422, "{}", added.text());
    assert!(added.json()["message"].as_str().unwrap().contains(
        "no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/more\"}"
    ));
    // Removing the last finalizer completes the deletion.
    let removed = client
        .send(
            "PATCH",
            &format!("{COLL}/held"),
            "application/json-patch+json",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        )
        .unwrap();
    assert_eq!(removed.status, 200, "{}", removed.text());
    assert!(!exists(&client, "held"));
}

#[test]
fn preconditions_and_policies() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let created = client.send_json("POST", COLL, &crontab("p", json!({}))).json();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "not-it"}});
    let response = client.send_json("DELETE", &format!("{COLL}/p"), &wrong_uid);
    assert_eq!(response.status, 409);
    // Worded as `rest.BeforeDelete` words it, on the kind.
    assert_eq!(
        response.json()["message"],
        format!(
            "Operation cannot be fulfilled on CronTab.stable.example.com \"p\": the UID in the precondition (not-it) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    assert_eq!(response.json()["details"], json!({"name": "p", "group": "stable.example.com", "kind": "CronTab"}));
    let wrong_rv = json!({"preconditions": {"resourceVersion": "999"}});
    let response = client.send_json("DELETE", &format!("{COLL}/p"), &wrong_rv);
    assert_eq!(response.status, 409);
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();
    assert_eq!(
        response.json()["message"],
        format!(
            "Operation cannot be fulfilled on CronTab.stable.example.com \"p\": the ResourceVersion in the precondition (999) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    assert!(exists(&client, "p"));
    let bad_policy = client.request("DELETE", &format!("{COLL}/p?propagationPolicy=Sometimes"), None, None).unwrap();
    assert_eq!(bad_policy.status, 422);
    // Dry run deletes nothing.
    assert_eq!(client.request("DELETE", &format!("{COLL}/p?dryRun=All"), None, None).unwrap().status, 200);
    assert!(exists(&client, "p"));
    let right = json!({"preconditions": {"uid": uid}, "propagationPolicy": "Background"});
    let done = client.send_json("DELETE", &format!("{COLL}/p"), &right);
    assert_eq!(done.status, 200);
    let status = done.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    assert_eq!(status["details"]["uid"], uid);
    assert!(!exists(&client, "p"));
    let again = client.request("DELETE", &format!("{COLL}/p"), None, None).unwrap();
    assert_eq!(again.status, 404);
}

#[test]
fn delete_collection_with_selectors() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        assert_eq!(client.send_json("POST", COLL, &crontab(name, json!({"tier": tier}))).status, 201);
    }
    let other = "/apis/stable.example.com/v1/namespaces/other/crontabs";
    assert_eq!(client.send_json("POST", other, &crontab("a", json!({"tier": "web"}))).status, 201);
    let gone = client.request("DELETE", &format!("{COLL}?labelSelector=tier%3Dweb"), None, None).unwrap();
    assert_eq!(gone.status, 200);
    let body = gone.json();
    let names: Vec<&str> =
        body["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(!exists(&client, "a") && !exists(&client, "b") && exists(&client, "c"));
    assert_eq!(client.get(&format!("{other}/a")).unwrap().status, 200, "other namespaces are untouched");
    // kubectl delete --all uses the same path.
    assert!(server.kubectl_ok(&["delete", "crontabs", "--all", "-n", "other"]).contains("deleted"));
    assert_eq!(client.get(other).unwrap().json()["items"].as_array().unwrap().len(), 0);
}

#[test]
fn dry_run_writes_store_nothing() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let created = client
        .send(
            "POST",
            &format!("{COLL}?dryRun=All"),
            "application/json",
            serde_json::to_vec(&crontab("dry", json!({}))).unwrap(),
        )
        .unwrap();
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["metadata"]["name"], "dry");
    assert!(!exists(&client, "dry"));
    client.send_json("POST", COLL, &crontab("real", json!({})));
    let patched = client
        .send("PATCH", &format!("{COLL}/real?dryRun=All"), "application/merge-patch+json", r#"{"spec":{"image":"y"}}"#)
        .unwrap();
    assert_eq!(patched.json()["spec"]["image"], "y");
    assert_eq!(client.get(&format!("{COLL}/real")).unwrap().json()["spec"]["image"], "x");
    let out = server.kubectl(&["label", "crontab", "real", "dry=run", "--dry-run=server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(table(&server.kubectl_ok(&["get", "ct", "-l", "dry=run", "--no-headers"])).is_empty());
}

#[test]
fn annotate_label_and_edit() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    client.send_json("POST", COLL, &crontab("e", json!({})));
    server.kubectl_ok(&["annotate", "crontab", "e", "note=hello"]);
    server.kubectl_ok(&["label", "crontab", "e", "tier=web"]);
    let object = client.get(&format!("{COLL}/e")).unwrap().json();
    assert_eq!(object["metadata"]["annotations"]["note"], "hello");
    assert_eq!(object["metadata"]["labels"]["tier"], "web");
    assert_eq!(object["metadata"]["generation"], 1, "metadata changes keep the generation");
    // kubectl edit with an editor that rewrites the image.
    let editor = server.write("editor.sh", "#!/bin/sh\nsed -i 's/image: x/image: edited/' \"$1\"\n");
    std::process::Command::new("chmod").args(["+x", editor.to_str().unwrap()]).status().unwrap();
    let out = std::process::Command::new("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .env("KUBE_EDITOR", editor.to_str().unwrap())
        .args(["edit", "crontab", "e"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let edited = client.get(&format!("{COLL}/e")).unwrap().json();
    assert_eq!(edited["spec"]["image"], "edited");
    assert_eq!(edited["metadata"]["generation"], 2);
}

#[test]
fn invalid_options_are_invalid_on_the_options_kind() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    client.send_json("POST", COLL, &crontab("o", json!({})));
    let body = serde_json::to_vec(&crontab("n", json!({}))).unwrap();
    let cases = [
        (
            "POST",
            format!("{COLL}?fieldValidation=Bogus"),
            "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"",
        ),
        (
            "POST",
            format!("{COLL}?dryRun=Some&fieldValidation=Bogus"),
            "CreateOptions.meta.k8s.io \"\" is invalid: [dryRun: Unsupported value: [\"Some\"]: supported values: \"All\", fieldValidation: Unsupported value: \"Bogus\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"]",
        ),
        (
            "PUT",
            format!("{COLL}/o?dryRun=Some"),
            "UpdateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\"",
        ),
        (
            "DELETE",
            format!("{COLL}/o?dryRun=Some"),
            "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Some\"]: supported values: \"All\"",
        ),
        (
            "GET",
            format!("{COLL}?resourceVersion=1&resourceVersionMatch=Bogus"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
        ),
    ];
    for (method, path, message) in cases {
        // A delete reads its options from the query only when it has no body.
        let body = if method == "DELETE" { Vec::new() } else { body.clone() };
        let response = client.send(method, &path, "application/json", body).unwrap();
        assert_eq!(response.status, 422, "{method} {path}: {}", response.text());
        assert_eq!(response.json()["message"], message, "{method} {path}");
        assert_eq!(response.json()["details"]["group"], "meta.k8s.io");
    }
    let patch =
        client.send("PATCH", &format!("{COLL}/o?fieldValidation=Bogus"), "application/merge-patch+json", "{}").unwrap();
    assert_eq!(patch.status, 422);
    assert!(
        patch.json()["message"]
            .as_str()
            .unwrap()
            .starts_with("PatchOptions.meta.k8s.io \"\" is invalid: fieldValidation: ")
    );
    assert!(exists(&client, "o"), "nothing was deleted");
}

#[test]
fn updates_of_missing_objects_are_not_found() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    // With or without a resourceVersion: the object is looked up first.
    for rv in [None, Some("5")] {
        let mut object = crontab("missing", json!({}));
        if let Some(rv) = rv {
            object["metadata"]["resourceVersion"] = json!(rv);
        }
        let response = client.send_json("PUT", &format!("{COLL}/missing"), &object);
        assert_eq!(response.status, 404, "{}", response.text());
        assert_eq!(response.json()["message"], "crontabs.stable.example.com \"missing\" not found");
    }
    // An existing object without a resourceVersion is still refused as Invalid.
    client.send_json("POST", COLL, &crontab("present", json!({})));
    let response = client.send_json("PUT", &format!("{COLL}/present"), &crontab("present", json!({})));
    assert_eq!(response.status, 422, "{}", response.text());
}

#[test]
fn owner_reference_errors_name_the_field() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let mut object = crontab("owned", json!({}));
    object["metadata"]["ownerReferences"] = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "", "uid": "6a0a1b52-0000-4000-8000-000000000001"},
        {"apiVersion": "apps/v1/x", "kind": "Deployment", "name": "d", "uid": "6a0a1b52-0000-4000-8000-000000000002"}
    ]);
    let response = client.send_json("POST", COLL, &object);
    assert_eq!(response.status, 422, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        "CronTab.stable.example.com \"owned\" is invalid: [metadata.ownerReferences.name: Invalid value: \"\": must not be empty, \
         metadata.ownerReferences.apiVersion: Invalid value: \"apps/v1/x\": version must not be empty]"
    );
    assert!(!exists(&client, "owned"));
}

#[test]
fn generation_tracks_the_desired_state_only() {
    let server = TestServer::start(&[support::TENANT_CRD]);
    let client = Client::admin(&server);
    let tenants = "/apis/platform.example.com/v1/tenants";
    let tenant = json!({"apiVersion": "platform.example.com/v1", "kind": "Tenant",
        "metadata": {"name": "t", "finalizers": ["example.com/keep"]}, "spec": {"owner": "a", "quotaGiB": 1}});
    let created = client.send_json("POST", tenants, &tenant);
    assert_eq!(created.status, 201, "{}", created.text());
    let generation =
        |client: &Client| client.get(&format!("{tenants}/t")).unwrap().json()["metadata"]["generation"].clone();
    assert_eq!(generation(&client), 1);
    // Status writes (update, merge patch, apply) never change it.
    let mut current = client.get(&format!("{tenants}/t")).unwrap().json();
    current["status"] = json!({"phase": "Ready"});
    let updated = client.send_json("PUT", &format!("{tenants}/t/status"), &current);
    assert_eq!(updated.status, 200, "{}", updated.text());
    let patched = client
        .send("PATCH", &format!("{tenants}/t/status"), "application/merge-patch+json", r#"{"status":{"phase":"Busy"}}"#)
        .unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text());
    let applied = client
        .send(
            "PATCH",
            &format!("{tenants}/t/status?fieldManager=ctl&force=true"),
            "application/apply-patch+yaml",
            r#"{"apiVersion":"platform.example.com/v1","kind":"Tenant","metadata":{"name":"t"},"status":{"phase":"Done"}}"#,
        )
        .unwrap();
    assert_eq!(applied.status, 200, "{}", applied.text());
    assert_eq!(applied.json()["status"]["phase"], "Done");
    assert_eq!(generation(&client), 1);
    // A spec change does.
    let patched = client
        .send("PATCH", &format!("{tenants}/t"), "application/merge-patch+json", r#"{"spec":{"quotaGiB":2}}"#)
        .unwrap();
    assert_eq!(patched.json()["metadata"]["generation"], 2);
    // So does marking it deleted while a finalizer holds it, once.
    let deleting = client.request("DELETE", &format!("{tenants}/t"), None, None).unwrap();
    assert_eq!(deleting.status, 200, "{}", deleting.text());
    assert_eq!(generation(&client), 3);
    client.request("DELETE", &format!("{tenants}/t"), None, None).unwrap();
    assert_eq!(generation(&client), 3);
}
