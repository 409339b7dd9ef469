//! Bad input never breaks the server: random bodies sent to create, update and every patch
//! type of the seed CronTab answer a 2xx or a 4xx `Status`, never a 5xx or a panic; and
//! regression tests for what fuzzing (hack/fuzz.sh) found, named after what they guard.
//! Runs the API in process through the library (`robustness/in_process.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod robustness {
    pub mod in_process;
    pub mod random;
}

use http::Method;
use serde_json::{Value, json};

use robustness::in_process::InProcess;
use robustness::random::{self, Rng};

const CRONTAB_CRD: &str = include_str!("../manifests/examples/crontabs.yaml");
const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name, "labels": {"app": "a"}},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 1}
    })
}

/// Ways to write a CronTab, with a valid body of each.
fn writes(name: &str) -> Vec<(Method, String, &'static str, Value)> {
    let object = format!("{COLLECTION}/{name}");
    vec![
        (Method::POST, COLLECTION.to_string(), "application/json", crontab(name)),
        (Method::POST, COLLECTION.to_string(), "application/yaml", crontab(name)),
        (Method::PUT, object.clone(), "application/json", crontab(name)),
        (Method::PATCH, object.clone(), "application/merge-patch+json", json!({"spec": {"replicas": 2}})),
        (
            Method::PATCH,
            object.clone(),
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
        ),
        (Method::PATCH, object.clone(), "application/apply-patch+yaml", crontab(name)),
        (Method::PATCH, object, "application/strategic-merge-patch+json", json!({"spec": {"replicas": 2}})),
    ]
}

#[test]
fn random_bodies_to_crontab_writes_answer_2xx_or_4xx_status() {
    let server = InProcess::new(&[CRONTAB_CRD]);
    let created = server.send_json(Method::POST, COLLECTION, "application/json", &crontab("stored"));
    assert_eq!(created.code, 201, "{}", created.text);
    let mut rng = Rng::new(0x5eed_c0de);
    let mut codes = std::collections::BTreeMap::new();
    for round in 0..400 {
        for (method, path, content_type, base) in writes("stored") {
            let body = random::body(&mut rng, &base);
            // Mostly dry runs, so that each round starts from the same stored object; some
            // real writes, so that what a write stores is read back by the next.
            let options = if round % 10 == 0 { "?fieldManager=t" } else { "?dryRun=All&fieldManager=t" };
            let answer = server.send(method, &format!("{path}{options}"), content_type, body);
            *codes.entry(answer.code).or_insert(0) += 1;
        }
    }
    // The bodies reach past decoding: some writes succeed, most are refused as invalid.
    assert!(codes.keys().any(|c| (200..300).contains(c)), "{codes:?}");
    assert!(codes.contains_key(&422) && codes.contains_key(&400), "{codes:?}");
}

#[test]
fn deeply_nested_bodies_are_refused_or_stored_never_crash() {
    // On a thread with the stack the server gives its own (the API runs on this thread).
    let stack = crd_apiserver::core::nesting::THREAD_STACK_BYTES;
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(|| {
            // Each request runs on a thread with the server's stack (`InProcess::send`); this one
            // builds and drops the bodies.
            let server = InProcess::new(&[CRONTAB_CRD]);
            for depth in [100, 127, 128, 129, 200, 1_000, 9_998, 10_000, 10_002, 100_000] {
                // Built as text: `serde_json::json!` and its drop recurse on the caller's stack.
                let mut object = crontab("deep");
                object["spec"]["image"] = json!("HOLE");
                let (open, close) = ("[{\"x\":".repeat(depth / 2), "}]".repeat(depth / 2));
                let text = object.to_string().replace("\"HOLE\"", &format!("{open}\"x\"{close}"));
                for (method, path, content_type, _) in writes("deep") {
                    // `send` checks the answer: a 2xx, a 4xx, or a 5xx kube-apiserver answers too.
                    server.send(method, &format!("{path}?dryRun=All&fieldManager=t"), content_type, text.clone());
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}

/// A definition whose v2 preserves unknown fields at its root while v1 (the storage version)
/// declares its fields: an apply in v2 carries a field v1 does not have.
const TWO_VERSIONS_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.fuzz.example.com}
spec:
  group: fuzz.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {color: {type: string}}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

#[test]
fn apply_in_a_version_that_preserves_a_field_the_storage_version_lacks_is_not_a_500() {
    let server = InProcess::new(&[TWO_VERSIONS_CRD]);
    let v1 = "/apis/fuzz.example.com/v1/namespaces/default/gadgets";
    let gadget = json!({"apiVersion": "fuzz.example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"color": "red"}});
    assert_eq!(server.send_json(Method::POST, v1, "application/json", &gadget).code, 201);
    let applied = json!({"apiVersion": "fuzz.example.com/v2", "kind": "Gadget", "metadata": {"name": "g"},
                         "extra": null, "spec": {"color": "blue"}});
    let answer = server.send_json(
        Method::PATCH,
        "/apis/fuzz.example.com/v2/namespaces/default/gadgets/g?fieldManager=t&force=true",
        "application/apply-patch+yaml",
        &applied,
    );
    assert_eq!(answer.code, 200, "{}", answer.text);
    assert_eq!(answer.body["spec"]["color"], "blue");
    // The storage version pruned the field v1 does not declare.
    assert!(answer.body.get("extra").is_none(), "{}", answer.text);
}

#[test]
fn watch_timeouts_past_what_an_instant_holds_or_below_zero_are_served() {
    let server = InProcess::new(&[CRONTAB_CRD]);
    // A negative timeout ends the watch at once (its body is complete); a huge one is capped.
    let ended = server.send(Method::GET, &format!("{COLLECTION}?watch=1&timeoutSeconds=-1"), "", "");
    assert_eq!(ended.code, 200, "{}", ended.text);
    for seconds in ["9223372036854775807", "18446744073709551"] {
        let code = server.status_of_stream(&format!("{COLLECTION}?watch=1&timeoutSeconds={seconds}"));
        assert_eq!(code, 200, "timeoutSeconds={seconds}");
    }
    let refused =
        server.send(Method::GET, &format!("{COLLECTION}?watch=1&timeoutSeconds=18446744073709551616"), "", "");
    assert_eq!(refused.code, 400, "{}", refused.text);
}

/// Patches that grow without bound (issue: a 2 KB patch copying an array into itself forty
/// times was OOM-killed at 23.6 GB) are refused before memory is spent, as Kubernetes refuses
/// them, and leave the object as it was.
#[test]
fn amplifying_patches_are_refused_and_change_nothing() {
    let server = InProcess::new(&[CRONTAB_CRD]);
    let created = server.send_json(Method::POST, COLLECTION, "application/json", &crontab("grow"));
    assert_eq!(created.code, 201, "{}", created.text);
    let object = format!("{COLLECTION}/grow");

    // A copy of an array into itself, doubling it each time.
    let mut doubling = vec![json!({"op": "add", "path": "/metadata/annotations", "value": {}})];
    doubling.push(json!({"op": "add", "path": "/spec/x", "value": vec!["0123456789abcdef"; 16]}));
    doubling.extend((0..40).map(|_| json!({"op": "copy", "from": "/spec/x", "path": "/spec/x/-"})));
    let answer = server.send_json(Method::PATCH, &object, "application/json-patch+json", &Value::Array(doubling));
    assert_eq!(answer.code, 422, "{}", answer.text);
    assert_eq!(answer.body["message"], "the server rejected our request due to an error in our request");

    // Many copies of a large field into new places: each is small, together they are not.
    let big = "z".repeat(200_000);
    let seed = json!([{"op": "replace", "path": "/spec/image", "value": big}]);
    let seeded = server.send_json(Method::PATCH, &object, "application/json-patch+json", &seed);
    assert_eq!(seeded.code, 200, "{}", seeded.text);
    let fan_out: Vec<Value> = (0..30)
        .map(|i| json!({"op": "copy", "from": "/spec/image", "path": format!("/metadata/labels/c{i}")}))
        .collect();
    let answer = server.send_json(Method::PATCH, &object, "application/json-patch+json", &Value::Array(fan_out));
    assert_eq!(answer.code, 422, "{}", answer.text);

    // More operations than Kubernetes allows.
    let many: Vec<Value> = (0..10_001).map(|_| json!({"op": "test", "path": "/kind", "value": "CronTab"})).collect();
    let answer = server.send_json(Method::PATCH, &object, "application/json-patch+json", &Value::Array(many));
    assert_eq!(answer.code, 413, "{}", answer.text);
    assert_eq!(answer.body["message"], "The allowed maximum operations in a JSON patch is 10000, got 10001");
    assert_eq!(answer.body["reason"], "RequestEntityTooLarge");

    // A YAML apply configuration repeating a large string through aliases.
    let mut laughs = format!(
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: grow\nspec:\n  a: &a \"{}\"\n",
        "y".repeat(500_000)
    );
    for (name, from) in [("b", "a"), ("c", "b"), ("d", "c")] {
        laughs.push_str(&format!("  {name}: &{name} [{}]\n", vec![format!("*{from}"); 10].join(",")));
    }
    let answer =
        server.send(Method::PATCH, &format!("{object}?fieldManager=t"), "application/apply-patch+yaml", laughs);
    assert!((400..500).contains(&answer.code), "{} {}", answer.code, answer.text);

    let after = server.send(Method::GET, &object, "", "").body;
    assert_eq!(after["spec"]["image"].as_str().map(str::len), Some(200_000));
    assert_eq!(after["metadata"]["labels"], json!({"app": "a"}));
    assert!(after["spec"].get("x").is_none() && after["spec"].get("a").is_none());
}

/// Paths are split as Kubernetes splits them: an empty segment is a segment, so
/// `namespaces/bad//crontabs` names no collection (it once deleted the whole collection).
#[test]
fn paths_with_empty_segments_reach_nothing() {
    let server = InProcess::new(&[CRONTAB_CRD]);
    let bad = "/apis/stable.example.com/v1/namespaces/bad/crontabs";
    for name in ["one", "two"] {
        let created = server.send_json(Method::POST, bad, "application/json", &crontab(name));
        assert_eq!(created.code, 201, "{}", created.text);
    }
    for path in [
        "/apis/stable.example.com/v1/namespaces/bad//crontabs",
        "/apis/stable.example.com/v1/namespaces//crontabs",
        "/apis/stable.example.com/v1//namespaces/bad/crontabs",
        "/apis/stable.example.com//v1/namespaces/bad/crontabs",
        "/apis//stable.example.com/v1/namespaces/bad/crontabs",
        "/apis/stable.example.com/v1/namespaces/bad/crontabs//one",
    ] {
        let answer = server.send(Method::DELETE, path, "", "");
        assert!(matches!(answer.code, 404 | 405), "{path}: {} {}", answer.code, answer.text);
        assert_eq!(answer.body["kind"], "Status", "{path}: {}", answer.text);
    }
    let listed = server.send(Method::GET, bad, "", "");
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(2), "{}", listed.text);
    let trailing = server.send(Method::GET, "/apis/stable.example.com/v1/namespaces/bad/crontabs/", "", "");
    assert_eq!(trailing.body["items"].as_array().map(Vec::len), Some(2), "{}", trailing.text);
}

/// Continue tokens are client input: whatever a client crafts is answered as Kubernetes
/// answers it (400 for a malformed token, 410 for one older than the retained history), and a
/// page ends where the token says, never outside the resource.
#[test]
fn crafted_continue_tokens_get_kubernetes_answers() {
    use base64::Engine as _;
    let server = InProcess::new(&[CRONTAB_CRD]);
    for name in ["a", "b", "c"] {
        let created = server.send_json(Method::POST, COLLECTION, "application/json", &crontab(name));
        assert_eq!(created.code, 201, "{}", created.text);
    }
    let first = server.send(Method::GET, &format!("{COLLECTION}?limit=1"), "", "");
    let issued = first.body["metadata"]["continue"].as_str().unwrap().to_string();
    let page = |token: &str| server.send(Method::GET, &format!("{COLLECTION}?limit=5&continue={token}"), "", "");
    let names = |answer: &robustness::in_process::Answer| -> Vec<String> {
        let items = answer.body["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|i| i["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect()
    };
    assert_eq!(names(&page(&issued)), ["b", "c"]);

    let craft = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    for (token, code) in [
        (craft(r#"{"v":"meta.k8s.io/v1","rv":18446744073709551615,"start":"default/a"}"#), 400),
        (craft(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"default/a"}"#), 400),
        (craft(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../../"}"#), 400),
        (craft(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"default/a"}"#), 400),
        ("%%%".to_string(), 400),
        (format!("{issued}="), 400),
    ] {
        let answer = page(&token);
        assert_eq!(answer.code, code, "{token}: {}", answer.text);
        assert_eq!(answer.body["kind"], "Status", "{}", answer.text);
        assert_eq!(answer.body["reason"], "BadRequest", "{}", answer.text);
    }
    // A negative revision asks for the newest state, from the given key on.
    let newest = page(&craft(r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"default/b"}"#));
    assert_eq!((newest.code, names(&newest)), (200, vec!["c".to_string()]), "{}", newest.text);
}
