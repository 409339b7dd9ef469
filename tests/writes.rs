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
    assert_eq!(
        response.json()["message"],
        format!(
            "Operation cannot be fulfilled on crontabs.stable.example.com \"p\": Precondition failed: UID in precondition: not-it, UID in object meta: {uid}"
        )
    );
    let wrong_rv = json!({"preconditions": {"resourceVersion": "999"}});
    assert_eq!(client.send_json("DELETE", &format!("{COLL}/p"), &wrong_rv).status, 409);
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
    assert_eq!(client.send("POST", &format!("{COLL}?dryRun=Some"), "application/json", "{}").unwrap().status, 400);
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
