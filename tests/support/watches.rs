//! Watch behaviour both backends must show, checked over raw HTTPS: what a watch with a label
//! or field selector reports as an object enters and leaves its selection (kube-apiserver's
//! cache watcher: ADDED with the new content on entering, DELETED with the previous content
//! at the event's resourceVersion on leaving).

use serde_json::{Value, json};

use super::http::Client;

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";
const SHIRTS: &str = "/apis/stable.example.com/v1/namespaces/default/shirts";

/// The events of a raw watch as (type, object), read until the watch's timeout ends it.
pub fn events(client: &Client, path: &str) -> Vec<(String, Value)> {
    let response = client.get(path).unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    response
        .text()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|mut e| (e["type"].as_str().unwrap().to_string(), e["object"].take()))
        .collect()
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().unwrap().to_string()
}

/// Writes `body` to `path` with `method` and returns the object answered.
fn write(client: &Client, method: &str, path: &str, content_type: &str, body: &Value) -> Value {
    let response = client.send(method, path, content_type, body.to_string()).unwrap();
    assert!(response.status == 200 || response.status == 201, "{} {}", response.status, response.text());
    response.json()
}

/// The list's resourceVersion now: a watch from it replays every later write.
fn now(client: &Client, collection: &str) -> String {
    resource_version(&client.get(collection).unwrap().json())
}

/// A CronTab labelled `tier=gold` leaves a `tier=gold` watch (label and image changed in one
/// patch), comes back, and is deleted; a Shirt leaves a `spec.color=teal` watch (color to
/// olive). Needs the CronTab and Shirt definitions of `manifests/examples`.
pub fn check_objects_leaving_a_selection(client: &Client) {
    let merge = "application/merge-patch+json";
    // A write first, so that the watch's resourceVersion is not "0" (any state).
    let other = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "other", "labels": {"tier": "bronze"}}, "spec": {"image": "x"}});
    write(client, "POST", CRONTABS, "application/json", &other);
    let from = now(client, CRONTABS);
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "c", "labels": {"tier": "gold"}}, "spec": {"image": "x"}});
    write(client, "POST", CRONTABS, "application/json", &crontab);
    let change = |tier: &str, image: &str| {
        let patch = json!({"metadata": {"labels": {"tier": tier}}, "spec": {"image": image}});
        resource_version(&write(client, "PATCH", &format!("{CRONTABS}/c"), merge, &patch))
    };
    let left_at = change("silver", "y");
    change("gold", "z");
    write(client, "DELETE", &format!("{CRONTABS}/c"), "application/json", &json!({}));
    let path = format!("{CRONTABS}?watch=1&labelSelector=tier%3Dgold&resourceVersion={from}&timeoutSeconds=2");
    let seen: Vec<(String, String, String, String)> = events(client, &path)
        .into_iter()
        .map(|(kind, object)| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let tier = text(&object["metadata"]["labels"]["tier"]);
            (kind, tier, text(&object["spec"]["image"]), resource_version(&object))
        })
        .collect();
    let event =
        |kind: &str, image: &str, at: &str| (kind.to_string(), "gold".to_string(), image.to_string(), at.to_string());
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!((seen[0].0.as_str(), seen[0].2.as_str()), ("ADDED", "x"), "{seen:?}");
    // Leaving: the object as the watcher last saw it (gold, x), at the leaving change's
    // resourceVersion.
    assert_eq!(seen[1], event("DELETED", "x", &left_at), "{seen:?}");
    assert_eq!((seen[2].0.as_str(), seen[2].2.as_str()), ("ADDED", "z"), "{seen:?}");
    assert_eq!((seen[3].0.as_str(), seen[3].1.as_str(), seen[3].2.as_str()), ("DELETED", "gold", "z"), "{seen:?}");

    // The same through a field selector.
    let from = now(client, SHIRTS);
    let shirt = json!({"apiVersion": "stable.example.com/v1", "kind": "Shirt",
        "metadata": {"name": "s"}, "spec": {"color": "teal", "size": "M"}});
    write(client, "POST", SHIRTS, "application/json", &shirt);
    let patch = json!({"spec": {"color": "olive", "size": "L"}});
    let left_at = resource_version(&write(client, "PATCH", &format!("{SHIRTS}/s"), merge, &patch));
    let path = format!("{SHIRTS}?watch=1&fieldSelector=spec.color%3Dteal&resourceVersion={from}&timeoutSeconds=2");
    let seen: Vec<(String, Value, Value, String)> = events(client, &path)
        .into_iter()
        .map(|(kind, object)| {
            let at = resource_version(&object);
            (kind, object["spec"]["color"].clone(), object["spec"]["size"].clone(), at)
        })
        .collect();
    let expected = [
        ("ADDED".to_string(), json!("teal"), json!("M"), seen.first().map(|e| e.3.clone()).unwrap_or_default()),
        ("DELETED".to_string(), json!("teal"), json!("M"), left_at),
    ];
    assert_eq!(seen, expected);
}
