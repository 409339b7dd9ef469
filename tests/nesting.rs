//! Objects nested as deep as kube-apiserver accepts (10,000 levels of objects and arrays, JSON
//! or YAML) go through the server binary whole: create, get, list, watch, every patch type and
//! apply, and a restart that reads them back from the store; one level more is refused with
//! kube-apiserver's texts. The server's threads must have the stack for it (`core::nesting`):
//! a stack overflow aborts the process and every later request fails.
//!
//! Bodies are built and checked as text: a `serde_json::Value` this deep would overflow the
//! test's own thread when parsed or dropped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use support::TestServer;
use support::http::{Client, Response};

const DEEP_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: deeps.nesting.example.com
spec:
  group: nesting.example.com
  names: {kind: Deep, plural: deeps, singular: deep, listKind: DeepList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

const COLLECTION: &str = "/apis/nesting.example.com/v1/namespaces/default/deeps";

/// A value `levels` deep: objects and arrays in turn, `{"x":[{"x":[…"leaf"…]}]}`.
fn nested(levels: usize, leaf: &str) -> String {
    let mut text = String::new();
    for level in 0..levels {
        text.push_str(if level % 2 == 0 { "{\"x\":" } else { "[" });
    }
    text.push_str(&format!("\"{leaf}\""));
    for level in (0..levels).rev() {
        text.push(if level % 2 == 0 { '}' } else { ']' });
    }
    text
}

/// A Deep named `name` whose body is `depth` levels deep (the object itself and `spec` are two).
fn deep(name: &str, depth: usize, leaf: &str) -> String {
    format!(
        r#"{{"apiVersion":"nesting.example.com/v1","kind":"Deep","metadata":{{"name":"{name}"}},"spec":{{"x":{}}}}}"#,
        nested(depth - 2, leaf)
    )
}

/// The deepest nesting of objects and arrays in a JSON text.
fn depth_of(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for c in text.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') | (false, _, '"') => in_string = !in_string,
            (false, _, '{' | '[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, '}' | ']') => depth -= 1,
            _ => {}
        }
    }
    deepest
}

/// The answer holds the value `levels` deep ending in `leaf`, byte for byte.
fn holds(response: &Response, levels: usize, leaf: &str) {
    let text = response.text();
    assert!(
        text.contains(&nested(levels, leaf)),
        "{} answered without the deep value: {}",
        response.status,
        text.get(..300).unwrap_or(&text)
    );
}

fn refused(response: &Response, code: u16, message: &str) {
    let text = response.text();
    assert_eq!(response.status, code, "{}", text.get(..500).unwrap_or(&text));
    // Only the Status is parsed: it is shallow.
    let status: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(status["message"], message, "{status}");
}

#[test]
fn objects_ten_thousand_deep_go_through_every_verb_and_one_more_level_is_refused() {
    let mut server = TestServer::start(&[DEEP_CRD]);
    let client = Client::admin(&server);
    let json = "application/json";

    // Create, as JSON and as YAML (flow style): 10,000 levels in all.
    let created = client.send("POST", COLLECTION, json, deep("d1", 10_000, "json")).unwrap();
    assert_eq!(created.status, 201, "{}", created.text().get(..500).unwrap_or_default());
    holds(&created, 9_998, "json");
    let created = client.send("POST", COLLECTION, "application/yaml", deep("d2", 10_000, "yaml")).unwrap();
    assert_eq!(created.status, 201, "{}", created.text().get(..500).unwrap_or_default());
    holds(&created, 9_998, "yaml");

    // One level more: Go's scanner and go-yaml stop there, and the create handler wraps them.
    let unrecognized = "the object provided is unrecognized (must be of type Deep): ";
    refused(
        &client.send("POST", COLLECTION, json, deep("d3", 10_001, "json")).unwrap(),
        400,
        &format!(
            "{unrecognized}couldn't get version/kind; json parse error: invalid character '{{' exceeded max depth ({{\"apiVersion\":\"nesting.example ...)"
        ),
    );
    refused(
        &client.send("POST", COLLECTION, "application/yaml", deep("d3", 10_001, "yaml")).unwrap(),
        400,
        &format!("{unrecognized}yaml: exceeded max depth of 10000 ({{\"apiVersion\":\"nesting.example ...)"),
    );

    // Reads: the object, the list (two levels deeper) and a watch's events (one deeper).
    holds(&client.get(&format!("{COLLECTION}/d1")).unwrap(), 9_998, "json");
    let list = client.get(COLLECTION).unwrap();
    assert_eq!(list.status, 200);
    holds(&list, 9_998, "json");
    holds(&list, 9_998, "yaml");
    assert_eq!(depth_of(&list.text()), 10_002);
    let watched = client.get(&format!("{COLLECTION}?watch=1&timeoutSeconds=1")).unwrap();
    assert_eq!(watched.status, 200);
    let events: Vec<&str> = std::str::from_utf8(&watched.body).unwrap().lines().collect();
    assert_eq!(events.len(), 2, "two ADDED events");
    for event in events {
        let added = event.starts_with(r#"{"type":"ADDED","#) || event.ends_with(r#","type":"ADDED"}"#);
        assert!(added, "{}", event.get(..200).unwrap_or(event));
        assert_eq!(depth_of(event), 10_001);
    }

    // Patches whose documents are 10,000 deep replace the value; one level more is refused.
    let object = format!("{COLLECTION}/d1");
    let json_patch = format!(r#"[{{"op":"replace","path":"/spec/x","value":{}}}]"#, nested(9_998, "json-patch"));
    let patched = client.send("PATCH", &object, "application/json-patch+json", json_patch).unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text().get(..500).unwrap_or_default());
    holds(&patched, 9_998, "json-patch");
    let merge_patch = format!(r#"{{"spec":{{"x":{}}}}}"#, nested(9_998, "merge-patch"));
    let patched = client.send("PATCH", &object, "application/merge-patch+json", merge_patch).unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text().get(..500).unwrap_or_default());
    holds(&patched, 9_998, "merge-patch");
    for (content_type, patch) in [
        (
            "application/json-patch+json",
            format!(r#"[{{"op":"replace","path":"/spec/x","value":{}}}]"#, nested(9_999, "no")),
        ),
        ("application/merge-patch+json", format!(r#"{{"spec":{{"x":{}}}}}"#, nested(9_999, "no"))),
    ] {
        refused(
            &client.send("PATCH", &object, content_type, patch).unwrap(),
            400,
            "error decoding patch: invalid character '{' exceeded max depth",
        );
    }

    // Server-side apply: creates, then takes the deep field over from another manager.
    let applied = client
        .send(
            "PATCH",
            &format!("{COLLECTION}/d4?fieldManager=a"),
            "application/apply-patch+yaml",
            deep("d4", 10_000, "apply"),
        )
        .unwrap();
    assert_eq!(applied.status, 201, "{}", applied.text().get(..500).unwrap_or_default());
    holds(&applied, 9_998, "apply");
    let forced = client
        .send(
            "PATCH",
            &format!("{object}?fieldManager=b&force=true"),
            "application/apply-patch+yaml",
            deep("d1", 10_000, "forced"),
        )
        .unwrap();
    assert_eq!(forced.status, 200, "{}", forced.text().get(..500).unwrap_or_default());
    holds(&forced, 9_998, "forced");
    refused(
        &client
            .send(
                "PATCH",
                &format!("{COLLECTION}/d5?fieldManager=a"),
                "application/apply-patch+yaml",
                deep("d5", 10_001, "no"),
            )
            .unwrap(),
        400,
        "error decoding YAML: error converting YAML to JSON: yaml: exceeded max depth of 10000",
    );

    // Read back from the store after a restart, and deleted.
    server.stop();
    server.spawn(&[]);
    holds(&client.get(&object).unwrap(), 9_998, "forced");
    holds(&client.get(&format!("{COLLECTION}/d4")).unwrap(), 9_998, "apply");
    let deleted = client.request("DELETE", &object, None, None).unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.text().get(..500).unwrap_or_default());
    assert_eq!(client.get(&object).unwrap().status, 404);
}
