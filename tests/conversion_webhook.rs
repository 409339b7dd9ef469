//! Conversion webhooks: objects stored in one version are read, listed, selected, watched and
//! written in another through a ConversionReview webhook, as Kubernetes' CRD server does; a
//! failing webhook is a 500 naming the webhook, and nothing is stored.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use support::http::Client;
use support::webhook::Webhook;
use support::{TestServer, stderr, table};

const V1: &str = "/apis/tests.example.com/v1/shirts";
const V1BETA1: &str = "/apis/tests.example.com/v1beta1/shirts";

fn shirt(version: &str, name: &str, field: &str, color: &str, size: &str) -> Value {
    json!({"apiVersion": format!("tests.example.com/{version}"), "kind": "Shirt", "metadata": {"name": name},
        "spec": {field: color, "size": size}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

#[test]
fn objects_convert_through_the_webhook() {
    let webhook = Webhook::start();
    let server = TestServer::start(&[&webhook.shirt_definition()]);
    let client = Client::admin(&server);
    assert_eq!(client.send_json("POST", V1, &shirt("v1", "shirt1", "color", "blue", "S")).status, 201);
    // Written in v1beta1, stored in v1: the webhook converts on the way in and back.
    let created = client.send_json("POST", V1BETA1, &shirt("v1beta1", "shirt2", "hue", "blue", "M"));
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.json()["spec"]["hue"], "blue");
    assert_eq!(created.json()["apiVersion"], "tests.example.com/v1beta1");
    assert_eq!(client.send_json("POST", V1, &shirt("v1", "shirt3", "color", "green", "M")).status, 201);
    let stored = client.get(&format!("{V1}/shirt2")).unwrap().json();
    assert_eq!(stored["spec"], json!({"color": "blue", "size": "M"}), "stored in the storage version");

    let read = client.get(&format!("{V1BETA1}/shirt1")).unwrap().json();
    assert_eq!(read["apiVersion"], "tests.example.com/v1beta1");
    assert_eq!(read["spec"], json!({"hue": "blue", "size": "S"}));
    assert!(read["metadata"]["uid"].is_string(), "metadata comes from the stored object");

    // Field selectors apply to the converted objects, as Kubernetes' selectable-fields test shows.
    let calls = webhook.counters.calls.load(Ordering::SeqCst);
    let blue = client.get(&format!("{V1BETA1}?fieldSelector=spec.hue%3Dblue")).unwrap().json();
    assert_eq!(names(&blue), ["shirt1", "shirt2"]);
    assert_eq!(webhook.counters.calls.load(Ordering::SeqCst), calls + 1, "one review converts the whole page");
    let bad = client.get(&format!("{V1BETA1}?fieldSelector=spec.color%3Dblue")).unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["message"], "field label not supported: spec.color");
    assert_eq!(
        names(&client.get(&format!("{V1}?fieldSelector=spec.color%3Dblue")).unwrap().json()),
        ["shirt1", "shirt2"]
    );

    // Updates and patches through the other version.
    let patched = client
        .send("PATCH", &format!("{V1BETA1}/shirt3"), "application/merge-patch+json", r#"{"spec":{"hue":"red"}}"#)
        .unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(patched.json()["spec"]["hue"], "red");
    assert_eq!(client.get(&format!("{V1}/shirt3")).unwrap().json()["spec"]["color"], "red");

    // kubectl reads either version.
    let rows = table(&server.kubectl_ok(&[
        "get",
        "shirts.v1beta1.tests.example.com",
        "-o",
        "custom-columns=NAME:.metadata.name,HUE:.spec.hue",
        "--no-headers",
    ]));
    assert_eq!(rows, [["shirt1", "blue"], ["shirt2", "blue"], ["shirt3", "red"]]);

    // A failing webhook: reads that need it are 500s naming it; writes store nothing.
    webhook.counters.failing.store(true, Ordering::SeqCst);
    let failed = client.get(&format!("{V1BETA1}/shirt1")).unwrap();
    assert_eq!(failed.status, 500);
    let message = failed.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains(
            "conversion webhook for tests.example.com/v1, Kind=Shirt failed: the converter is down for maintenance"
        ),
        "{message}"
    );
    // The admin sees every 5xx in the log, with its cause, at the default verbosity.
    let logged = server.log();
    assert!(
        logged.contains("request failed: ") && logged.contains("the converter is down for maintenance"),
        "{logged}"
    );
    let refused = client.send_json("POST", V1BETA1, &shirt("v1beta1", "shirt4", "hue", "pink", "L"));
    assert_eq!(refused.status, 500, "{}", refused.text());
    // A watch in the other version ends when an event cannot be converted, rather than
    // skipping it (the watcher resumes from its last resourceVersion, as against Kubernetes).
    let revision = client.get(V1).unwrap().json()["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watcher = Client::admin(&server);
    let (ended, watch_ended) = std::sync::mpsc::channel();
    let path = format!("{V1BETA1}?watch=1&resourceVersion={revision}&timeoutSeconds=300");
    std::thread::spawn(move || ended.send(watcher.get(&path).unwrap()).unwrap());
    assert_eq!(client.send_json("POST", V1, &shirt("v1", "shirt5", "color", "teal", "S")).status, 201);
    let watched = watch_ended
        .recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the watch ends\n{}", server.log()));
    assert_eq!(watched.status, 200);
    assert!(!watched.text().contains("shirt5"), "no event without conversion: {}", watched.text());
    webhook.counters.failing.store(false, Ordering::SeqCst);
    assert_eq!(client.get(&format!("{V1}/shirt4")).unwrap().status, 404);
    // A webhook answering as an HTTP/1.0 server (no Content-Length; the body ends with the
    // connection) works as with kube-apiserver. Connections already open stay HTTP/1.1 or
    // HTTP/2, so the server is restarted to reach the webhook afresh.
    webhook.counters.http10.store(true, Ordering::SeqCst);
    let mut server = server;
    server.stop();
    server.spawn(&[]);
    let client = Client::admin(&server);
    let calls = webhook.counters.calls.load(Ordering::SeqCst);
    let converted = client.get(&format!("{V1BETA1}/shirt1")).unwrap();
    assert_eq!(converted.status, 200, "{}", converted.text());
    assert_eq!(converted.json()["spec"]["hue"], "blue");
    assert!(webhook.counters.calls.load(Ordering::SeqCst) > calls);
    assert!(webhook.counters.http10_answers.load(Ordering::SeqCst) > 0);
    webhook.counters.http10.store(false, Ordering::SeqCst);
    // Reads in the storage version never call the webhook.
    let calls = webhook.counters.calls.load(Ordering::SeqCst);
    assert_eq!(client.get(&format!("{V1}/shirt1")).unwrap().status, 200);
    assert_eq!(client.get(V1).unwrap().status, 200);
    assert_eq!(webhook.counters.calls.load(Ordering::SeqCst), calls);
    let out = server.kubectl(&["get", "shirts.v1.tests.example.com", "shirt1"]);
    assert!(out.status.success(), "{}", stderr(&out));
}
