//! What kubectl and controllers read: discovery (plain and aggregated), OpenAPI (explain),
//! tables (wide, categories), metadata-only views, field selectors, watches.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use serde_json::{Value, json};
use support::http::Client;
use support::{CRONTAB_CRD, SHIRT_CRD, TestServer, stderr, table};

/// Two definitions and the OpenAPI v3 `paths` kube-apiserver 1.36.2 published for them.
const PARTS_CRDS: &str = include_str!("fixtures/kube-apiserver-1.36/parts-crds.yaml");
const PARTS_OPENAPI_V3_PATHS: &str = include_str!("fixtures/kube-apiserver-1.36/openapi-v3-paths.json");

/// A namespaced resource with categories, printer columns of several priorities, and the
/// status and scale subresources.
const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.apps.example.com
spec:
  group: apps.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all, gadgets]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
    - {name: Ready, type: boolean, jsonPath: .status.ready}
    schema:
      openAPIV3Schema:
        type: object
        description: A widget of the test suite.
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              replicas: {type: integer, description: How many copies., minimum: 0, maximum: 50}
              color: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              ready: {type: boolean}
"#;

fn widget(name: &str, replicas: i64, color: &str) -> String {
    format!(
        "apiVersion: apps.example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  labels: {{app: demo}}\nspec:\n  replicas: {replicas}\n  color: {color}\n"
    )
}

#[test]
fn tables_categories_scale_and_explain() {
    let server = TestServer::start(&[CRONTAB_CRD, WIDGET_CRD]);
    let out = server.kubectl_stdin(&["apply", "-f", "-"], &widget("w1", 2, "blue"));
    assert!(out.status.success(), "{}", stderr(&out));

    let rows = table(&server.kubectl_ok(&["get", "widgets"]));
    assert_eq!(rows[0], ["NAME", "REPLICAS", "READY"]);
    // A missing value is an empty cell, as kubectl prints a null cell.
    assert_eq!(rows[1], ["w1", "2"]);
    let wide = table(&server.kubectl_ok(&["get", "wd", "-o", "wide"]));
    assert_eq!(wide[0], ["NAME", "REPLICAS", "COLOR", "READY"]);
    assert_eq!(wide[1], ["w1", "2", "blue"]);

    // `kubectl get all` finds resources in the "all" category.
    let all = table(&server.kubectl_ok(&["get", "all"]));
    assert_eq!(all[1][0], "w1", "{all:?}");
    assert!(server.kubectl_ok(&["get", "gadgets"]).contains("w1"));

    // Scale through the scale subresource.
    assert_eq!(
        server.kubectl_ok(&["scale", "widget", "w1", "--replicas=5"]).trim(),
        "widget.apps.example.com/w1 scaled"
    );
    assert_eq!(server.kubectl_ok(&["get", "widget", "w1", "-o", "jsonpath={.spec.replicas}"]), "5");
    let client = Client::admin(&server);
    let scale = client.get("/apis/apps.example.com/v1/namespaces/default/widgets/w1/scale").unwrap().json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["replicas"], 0);

    // Status writes change only status; main writes keep status.
    let status = json!({"apiVersion": "apps.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"replicas": 99}, "status": {"ready": true, "replicas": 5}});
    let path = "/apis/apps.example.com/v1/namespaces/default/widgets/w1/status";
    let patched =
        client.send("PATCH", path, "application/merge-patch+json", serde_json::to_vec(&status).unwrap()).unwrap();
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(patched.json()["spec"]["replicas"], 5);
    assert_eq!(patched.json()["status"]["ready"], true);
    let generation = patched.json()["metadata"]["generation"].clone();
    let rows = table(&server.kubectl_ok(&["get", "widgets", "--no-headers"]));
    assert_eq!(rows[0], ["w1", "5", "true"]);
    let main = client
        .send(
            "PATCH",
            "/apis/apps.example.com/v1/namespaces/default/widgets/w1",
            "application/merge-patch+json",
            r#"{"status":{"ready":false}}"#,
        )
        .unwrap();
    assert_eq!(main.json()["status"]["ready"], true, "the main resource ignores status");
    assert_eq!(main.json()["metadata"]["generation"], generation, "nothing outside status/metadata changed");

    // kubectl explain reads the OpenAPI v3 document.
    let explain = server.kubectl_ok(&["explain", "widget.spec"]);
    assert!(explain.contains("What the widget should be."), "{explain}");
    assert!(explain.contains("replicas") && explain.contains("How many copies."), "{explain}");
    let explain = server.kubectl_ok(&["explain", "crontabs.spec.cronSpec"]);
    assert!(explain.contains("cronSpec") && explain.contains("<string>"), "{explain}");
}

#[test]
fn field_selectors_on_shirts() {
    let server = TestServer::start(&[SHIRT_CRD]);
    let shirts = "apiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example1\nspec:\n  color: blue\n  size: S\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example2\nspec:\n  color: blue\n  size: M\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example3\nspec:\n  color: green\n  size: M\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], shirts);
    assert!(out.status.success(), "{}", stderr(&out));
    let names = |selector: &str| -> Vec<String> {
        table(&server.kubectl_ok(&["get", "shirts", "--field-selector", selector, "--no-headers"]))
            .into_iter()
            .map(|r| r[0].clone())
            .collect()
    };
    assert_eq!(names("spec.color=blue"), ["example1", "example2"]);
    assert_eq!(names("spec.color=blue,spec.size=M"), ["example2"]);
    assert_eq!(names("spec.size!=M"), ["example1"]);
    assert_eq!(names("metadata.name=example3"), ["example3"]);
    let bad = server.kubectl(&["get", "shirts", "--field-selector", "spec.nosuchfield=xyz"]);
    assert!(stderr(&bad).contains("field label not supported: spec.nosuchfield"), "{}", stderr(&bad));
}

#[test]
fn version_and_development_address() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let version = Client::admin(&server).get("/version").unwrap().json();
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    // The commit the binary was built from: this checkout's, unless it moved on since.
    let commit = version["gitCommit"].as_str().unwrap();
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => {
            assert_eq!(commit.len(), 40, "{version}");
            assert!(git(&["cat-file", "-e", &format!("{commit}^{{commit}}")]).is_some(), "{version}");
            assert!(["clean", "dirty"].contains(&version["gitTreeState"].as_str().unwrap()), "{version} (HEAD {head})");
        }
        None => assert_eq!((commit, version["gitTreeState"].as_str().unwrap()), ("", "")),
    }
    let date = version["buildDate"].as_str().unwrap();
    assert!(jiff::Timestamp::from_str(date).is_ok() && date.ends_with('Z'), "{version}");
    assert!(version["gitVersion"].as_str().unwrap().starts_with("v1."), "{version}");
    // Development mode listens on the loopback address unless told otherwise.
    assert!(server.log().contains(&format!("address=\"127.0.0.1:{}\"", server.port)), "{}", server.log());
}

/// kube-apiserver ends every JSON document its serializer encodes with a newline (Go's
/// `json.Encoder`): objects, lists, Tables, Status errors, a DELETE's answer, discovery (plain
/// and aggregated), each watch event. The documents it writes as raw text do not end with one:
/// OpenAPI, and `/version`, indented.
#[test]
fn json_documents_end_with_a_newline_as_kube_apiserver_writes_them() {
    let server = TestServer::start(&[CRONTAB_CRD, WIDGET_CRD]);
    let client = Client::admin(&server);
    let coll = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "nl"}, "spec": {"image": "x"}});
    let created = client.send_json("POST", coll, &crontab);
    assert_eq!(created.status, 201, "{}", created.text());
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let ends_with_newline = |accept: &str, path: &str| {
        let response = Client::admin(&server).header("accept", accept).get(path).unwrap();
        let text = response.text();
        assert!(response.status < 500, "{path}: {text}");
        assert!(text.starts_with('{'), "{path}: {text}");
        // One newline, after the document's last byte.
        text.strip_suffix('\n').is_some_and(|document| document.ends_with('}'))
    };
    for (accept, path) in [
        ("application/json", format!("{coll}/nl")),
        ("application/json", coll.to_string()),
        (table, coll.to_string()),
        ("application/json", format!("{coll}/missing")),
        ("application/json", "/apis".to_string()),
        (aggregated, "/apis".to_string()),
        ("application/json", "/apis/stable.example.com".to_string()),
        ("application/json", "/apis/stable.example.com/v1".to_string()),
        ("application/json", "/apis/apps.example.com/v1/namespaces/default/widgets/none/scale".to_string()),
    ] {
        assert!(ends_with_newline(accept, &path), "{accept} {path}");
    }
    for path in ["/openapi/v2", "/openapi/v3", "/openapi/v3/apis/stable.example.com/v1"] {
        assert!(!ends_with_newline("application/json", path), "{path}");
    }
    let version = client.get("/version").unwrap().text();
    assert!(version.starts_with("{\n  \"") && version.ends_with("\"\n}"), "{version}");
    let watched = client.get(&format!("{coll}?watch=1&resourceVersion=0&timeoutSeconds=1")).unwrap().text();
    assert!(watched.ends_with("}\n") && !watched.contains("}{"), "{watched}");
    let deleted = client.request("DELETE", &format!("{coll}/nl"), None, None).unwrap();
    assert!(deleted.text().ends_with("}\n"), "{}", deleted.text());
}

/// kube-apiserver indents JSON for `?pretty=true` and for curl, Wget and browsers, with no
/// newline after it; a 404's Status as the real v1.36.2 wrote it for the same request.
#[test]
fn pretty_output_is_kube_apiservers() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let coll = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    let crontab = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "pp"}, "spec": {"image": "x", "replicas": 1}});
    assert_eq!(client.send_json("POST", coll, &crontab).status, 201);
    let missing = "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"crontabs.stable.example.com \\\"nope\\\" not found\",\n  \"reason\": \"NotFound\",\n  \"details\": {\n    \"name\": \"nope\",\n    \"group\": \"stable.example.com\",\n    \"kind\": \"crontabs\"\n  },\n  \"code\": 404\n}";
    let as_curl = Client::admin(&server).header("user-agent", "curl/8.5.0").get(&format!("{coll}/nope")).unwrap();
    assert_eq!(as_curl.status, 404);
    assert_eq!(as_curl.text(), missing);
    let asked = client.get(&format!("{coll}/nope?pretty=true")).unwrap();
    assert_eq!(asked.text(), missing);
    // The object and the list: the compact document, indented, in the same order.
    for path in [format!("{coll}/pp"), coll.to_string()] {
        let compact = client.get(&path).unwrap().text();
        let pretty = Client::admin(&server).header("user-agent", "Wget/1.21").get(&path).unwrap().text();
        assert!(pretty.starts_with("{\n  \"") && pretty.ends_with("\n}"), "{pretty}");
        // Without the whitespace between tokens it is the compact document, byte for byte.
        let (mut squeezed, mut in_string, mut escaped) = (String::new(), false, false);
        for c in pretty.chars() {
            if in_string {
                (escaped, in_string) = (!escaped && c == '\\', escaped || c != '"');
            } else if c == '"' {
                in_string = true;
            } else if c.is_ascii_whitespace() {
                continue;
            }
            squeezed.push(c);
        }
        assert_eq!(squeezed + "\n", compact);
        assert!(
            pretty.contains("\n    \"name\": \"pp\",\n") || pretty.contains("\n        \"name\": \"pp\",\n"),
            "{pretty}"
        );
    }
    // Not pretty: kubectl's agent, pretty=false even for curl, and a watch stream.
    let plain =
        Client::admin(&server).header("user-agent", "curl/8.5.0").get(&format!("{coll}/pp?pretty=false")).unwrap();
    assert!(plain.text().starts_with("{\"") && plain.text().ends_with("}\n"), "{}", plain.text());
    let kubectl = Client::admin(&server)
        .header("user-agent", "kubectl/v1.32.0 (linux/amd64)")
        .get(&format!("{coll}/pp"))
        .unwrap();
    assert!(kubectl.text().starts_with("{\"apiVersion\""), "{}", kubectl.text());
    let watched = Client::admin(&server)
        .header("user-agent", "curl/8.5.0")
        .get(&format!("{coll}?watch=1&resourceVersion=0&timeoutSeconds=1"))
        .unwrap()
        .text();
    assert!(watched.starts_with("{\"type\":\"ADDED\"") && watched.ends_with("}\n"), "{watched}");
}

#[test]
fn discovery_documents() {
    let server = TestServer::start(&[CRONTAB_CRD, WIDGET_CRD]);
    let client = Client::admin(&server);
    let groups = client.get("/apis").unwrap();
    assert_eq!(groups.headers["content-type"], "application/json");
    let groups = groups.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let names: Vec<&str> = groups["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    // The server's own group (serveddefinitions) is always there.
    assert_eq!(names, ["apps.example.com", "crd-apiserver.io", "stable.example.com"]);

    let resources = client.get("/apis/apps.example.com/v1").unwrap().json();
    let entries = resources["resources"].as_array().unwrap();
    let names: Vec<&str> = entries.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["widgets", "widgets/status", "widgets/scale"]);
    assert_eq!(entries[0]["categories"], json!(["all", "gadgets"]));
    assert_eq!(
        entries[0]["verbs"],
        json!(["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"])
    );
    assert_eq!(entries[2]["group"], "autoscaling");
    assert_eq!(entries[2]["kind"], "Scale");

    for version in ["v2", "v2beta1"] {
        let accept =
            format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList,application/json");
        let first = Client::admin(&server).header("accept", &accept).get("/apis").unwrap();
        assert_eq!(first.status, 200);
        assert_eq!(
            first.headers["content-type"],
            format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList")
        );
        assert_eq!(first.headers["vary"], "Accept");
        let body = first.json();
        assert_eq!(body["apiVersion"], format!("apidiscovery.k8s.io/{version}"));
        let apps = &body["items"][0];
        assert_eq!(apps["metadata"]["name"], "apps.example.com");
        let widgets = &apps["versions"][0]["resources"][0];
        assert_eq!(widgets["resource"], "widgets");
        assert_eq!(widgets["scope"], "Namespaced");
        assert_eq!(widgets["responseKind"], json!({"group": "apps.example.com", "version": "v1", "kind": "Widget"}));
        assert_eq!(widgets["subresources"][1]["responseKind"]["kind"], "Scale");
        let etag = first.headers["etag"].to_str().unwrap().to_string();
        let again =
            Client::admin(&server).header("accept", &accept).header("if-none-match", &etag).get("/apis").unwrap();
        assert_eq!(again.status, 304);
        assert!(again.body.is_empty());
    }

    let openapi = client.get("/openapi/v2").unwrap();
    assert_eq!(openapi.status, 200);
    let v2 = openapi.json();
    assert_eq!(v2["swagger"], "2.0");
    assert!(v2["definitions"]["com.example.apps.v1.Widget"]["x-kubernetes-group-version-kind"].is_array());
    assert!(
        v2["paths"]["/apis/apps.example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]["consumes"].is_array()
    );
    let etag = openapi.headers["etag"].to_str().unwrap().to_string();
    assert_eq!(Client::admin(&server).header("if-none-match", &etag).get("/openapi/v2").unwrap().status, 304);
    let proto = Client::admin(&server)
        .header("accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
        .get("/openapi/v2")
        .unwrap();
    // Older kubectl releases read only this protobuf form.
    assert_eq!(proto.status, 200);
    assert_eq!(proto.headers["content-type"], "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    assert!(proto.body.windows(b"com.example.apps.v1.Widget".len()).any(|w| w == b"com.example.apps.v1.Widget"));
    let index = client.get("/openapi/v3").unwrap().json();
    let url = index["paths"]["apis/apps.example.com/v1"]["serverRelativeURL"].as_str().unwrap().to_string();
    let doc = client.get(&url).unwrap();
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["openapi"], "3.0.0");
    // Integer-valued keywords are written as integers, as Go writes float64 values.
    let v3 = doc.text();
    assert!(v3.contains(r#""maximum":50"#) && v3.contains(r#""minimum":0"#), "{v3}");
    let v2 = client.get("/openapi/v2").unwrap().text();
    assert!(v2.contains(r#""maximum":50"#) && !v2.contains(r#""maximum":50.0"#), "{v2}");
    // Each group version's document holds the schemas kube-apiserver's CRD builder publishes:
    // the resource, its list and the meta types its routes refer to; the Scale types only
    // where a resource has the scale subresource.
    let meta = [
        "DeleteOptions",
        "FieldsV1",
        "ListMeta",
        "ManagedFieldsEntry",
        "ObjectMeta",
        "OwnerReference",
        "Patch",
        "Preconditions",
        "ShardInfo",
        "Status",
        "StatusCause",
        "StatusDetails",
        "Time",
    ]
    .map(|t| format!("io.k8s.apimachinery.pkg.apis.meta.v1.{t}"));
    let scale = ["Scale", "ScaleSpec", "ScaleStatus"].map(|t| format!("io.k8s.api.autoscaling.v1.{t}"));
    let schemas = |path: &str| -> Vec<String> {
        let url = index["paths"][path]["serverRelativeURL"].as_str().unwrap().to_string();
        let mut names: Vec<String> =
            client.get(&url).unwrap().json()["components"]["schemas"].as_object().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    let mut widgets: Vec<String> = meta.iter().chain(&scale).cloned().collect();
    widgets.extend(["com.example.apps.v1.Widget".to_string(), "com.example.apps.v1.WidgetList".to_string()]);
    widgets.sort();
    assert_eq!(schemas("apis/apps.example.com/v1"), widgets);
    let mut crontabs: Vec<String> = meta.to_vec();
    crontabs.extend(["com.example.stable.v1.CronTab".to_string(), "com.example.stable.v1.CronTabList".to_string()]);
    crontabs.sort();
    assert_eq!(schemas("apis/stable.example.com/v1"), crontabs);
}

/// A group version's OpenAPI v3 `paths` are kube-apiserver 1.36.2's for the same definitions,
/// field by field: the full parameter descriptions (`shardSelector` among them), `uniqueItems`
/// inside each parameter's schema, the list parameters of the list across namespaces on its
/// path, every operation's 401, a patch's 200 alone, operation IDs, request bodies.
#[test]
fn openapi_v3_paths_are_kube_apiservers() {
    let crds: Vec<&str> = PARTS_CRDS.split("\n---\n").collect();
    let server = TestServer::start(&crds);
    let doc = Client::admin(&server).get("/openapi/v3/apis/parts.example.com/v1").unwrap();
    assert_eq!(doc.status, 200);
    let ours = doc.json()["paths"].clone();
    let theirs: Value = serde_json::from_str(PARTS_OPENAPI_V3_PATHS).unwrap();
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ours), keys(&theirs));
    for (path, expected) in theirs.as_object().unwrap() {
        for (operation, expected) in expected.as_object().unwrap() {
            if let Some(fields) = expected.as_object() {
                for (field, expected) in fields {
                    assert_eq!(&ours[path][operation][field], expected, "{operation} {path}: {field}");
                }
            }
            assert_eq!(&ours[path][operation], expected, "{operation} {path}");
        }
        assert_eq!(&ours[path], expected, "{path}");
    }
}

/// Issue 15 item 10: list metadata as kube-apiserver writes an unstructured list's, and the
/// field order of discovery documents and Scales as Kubernetes' Go types write them.
#[test]
fn list_metadata_and_field_order_as_kubernetes_writes_them() {
    let server = TestServer::start(&[CRONTAB_CRD, WIDGET_CRD]);
    let client = Client::admin(&server);
    let coll = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    for i in 0..5 {
        let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("c{i}"), "labels": {"even": (i % 2 == 0).to_string()}}, "spec": {"image": "x"}});
        assert_eq!(client.send_json("POST", coll, &body).status, 201);
    }
    // The raw text of a list's metadata, which ends the body (before the newline that ends
    // every JSON document Kubernetes writes).
    let metadata = |text: &str| text[text.rfind("\"metadata\":").unwrap()..].to_string();
    let first = client.get(&format!("{coll}?limit=2")).unwrap().text();
    let first_list: Value = serde_json::from_str(&first).unwrap();
    let rv = first_list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let token = first_list["metadata"]["continue"].as_str().unwrap().to_string();
    assert!(!token.is_empty());
    // An unstructured list is a map: its keys are sorted, and the count of what the limit
    // left out is there because no selector filtered the list.
    assert_eq!(
        metadata(&first),
        format!(r#""metadata":{{"continue":"{token}","remainingItemCount":3,"resourceVersion":"{rv}"}}}}"#) + "\n"
    );
    let second = client.get(&format!("{coll}?limit=2&continue={token}")).unwrap().json();
    assert_eq!(second["metadata"]["remainingItemCount"], 1);
    let token = second["metadata"]["continue"].as_str().unwrap();
    let last = client.get(&format!("{coll}?limit=2&continue={token}")).unwrap().text();
    // The last page: the storage layer always sets continue, so it is there and empty.
    assert_eq!(metadata(&last), format!(r#""metadata":{{"continue":"","resourceVersion":"{rv}"}}}}"#) + "\n");
    let whole = client.get(coll).unwrap().json();
    assert_eq!(whole["metadata"]["continue"], "");
    assert!(whole["metadata"].get("remainingItemCount").is_none());
    // A selector makes the count unknown: Kubernetes leaves it out rather than guess.
    let selected = client.get(&format!("{coll}?limit=1&labelSelector=even%3Dtrue")).unwrap().json();
    assert_eq!(selected["items"].as_array().unwrap().len(), 1);
    assert!(!selected["metadata"]["continue"].as_str().unwrap().is_empty());
    assert!(selected["metadata"].get("remainingItemCount").is_none(), "{selected}");
    let selected = client.get(&format!("{coll}?limit=1&fieldSelector=metadata.name%21%3Dc0")).unwrap().json();
    assert!(selected["metadata"].get("remainingItemCount").is_none(), "{selected}");
    // A Table's ListMeta is typed: it carries the count, and omits an empty continue.
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let table = Client::admin(&server).header("accept", table_accept).get(&format!("{coll}?limit=4")).unwrap().json();
    assert_eq!(table["metadata"]["remainingItemCount"], 1);
    let table = Client::admin(&server).header("accept", table_accept).get(coll).unwrap().json();
    assert!(table["metadata"].get("continue").is_none(), "{}", table["metadata"]);
    // kubectl pages through with the continue tokens.
    let out = server.kubectl_ok(&["get", "crontabs", "--chunk-size=2", "-o", "name"]);
    assert_eq!(out.lines().count(), 5, "{out}");

    // Discovery and Scale objects are Go structs: their fields come in declaration order.
    let groups = client.get("/apis").unwrap().text();
    assert!(groups.starts_with(r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"#), "{groups}");
    let resources = client.get("/apis/apps.example.com/v1").unwrap().text();
    assert!(
        resources.starts_with(concat!(
            r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps.example.com/v1","#,
            r#""resources":[{"name":"widgets","singularName":"widget","namespaced":true,"kind":"Widget","#
        )),
        "{resources}"
    );
    let aggregated = Client::admin(&server)
        .header("accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        .get("/apis")
        .unwrap()
        .text();
    assert!(
        aggregated.starts_with(concat!(
            r#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"#,
            r#""items":[{"metadata":{"name":"apps.example.com"},"versions":[{"version":"v1","resources":[{"resource":"widgets","#
        )),
        "{aggregated}"
    );
    let widgets = "/apis/apps.example.com/v1/namespaces/default/widgets";
    let body = json!({"apiVersion": "apps.example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"replicas": 0}});
    assert_eq!(client.send_json("POST", widgets, &body).status, 201);
    let scale = client.get(&format!("{widgets}/w/scale")).unwrap().text();
    let object = client.get(&format!("{widgets}/w")).unwrap().json();
    let meta = &object["metadata"];
    assert_eq!(
        scale,
        format!(
            r#"{{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{{"name":"w","namespace":"default","uid":"{}","resourceVersion":"{}","creationTimestamp":"{}"}},"spec":{{}},"status":{{"replicas":0}}}}
"#,
            meta["uid"].as_str().unwrap(),
            meta["resourceVersion"].as_str().unwrap(),
            meta["creationTimestamp"].as_str().unwrap()
        )
    );
}

#[test]
fn metadata_only_views() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = Client::admin(&server);
    let coll = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    for i in 0..3 {
        let body = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": format!("c{i}")}, "spec": {"image": "x"}});
        assert_eq!(client.send_json("POST", coll, &body).status, 201);
    }
    let accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let list = Client::admin(&server).header("accept", accept).get(&format!("{coll}?limit=2")).unwrap().json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert!(list["items"][0].get("spec").is_none());
    let token = list["metadata"]["continue"].as_str().unwrap();
    let rest = Client::admin(&server)
        .header("accept", accept)
        .get(&format!("{coll}?limit=2&continue={token}"))
        .unwrap()
        .json();
    assert_eq!(rest["items"].as_array().unwrap().len(), 1);
    // A typed ListMeta omits the empty continue of the last page.
    assert!(rest["metadata"].get("continue").is_none());
    assert_eq!(list["metadata"]["remainingItemCount"], 1);
    let one = Client::admin(&server)
        .header("accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
        .get(&format!("{coll}/c0"))
        .unwrap()
        .json();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["name"], "c0");
}

#[test]
fn kubectl_watch_and_wait() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    server.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: w\nspec:\n  image: one\n",
    );
    let mut watch = Command::new("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .args(["get", "crontabs", "-w", "-o", "jsonpath={.metadata.name}={.spec.image}{\"\\n\"}"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    // The current state comes first, then the change.
    assert_eq!(lines.next().unwrap().unwrap(), "w=one");
    server.kubectl_ok(&["patch", "crontab", "w", "--type=merge", "-p", r#"{"spec":{"image":"two"}}"#]);
    assert_eq!(lines.next().unwrap().unwrap(), "w=two");
    let _ = watch.kill();
    let _ = watch.wait();

    // kubectl wait sees a later change.
    let waiter = std::thread::spawn({
        let kubeconfig = server.kubeconfig();
        move || {
            Command::new("kubectl")
                .env("KUBECONFIG", kubeconfig)
                .args(["wait", "crontab/w", "--for=jsonpath={.spec.image}=three", "--timeout=30s"])
                .output()
                .unwrap()
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    server.kubectl_ok(&["patch", "crontab", "w", "--type=merge", "-p", r#"{"spec":{"image":"three"}}"#]);
    let out = waiter.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));
    let _: Value = serde_json::from_str(&server.kubectl_ok(&["get", "crontab", "w", "-o", "json"])).unwrap();
}

const DEPRECATED_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: deps.tests.example.com
spec:
  group: tests.example.com
  scope: Namespaced
  names: {plural: deps, kind: Dep}
  versions:
  - {name: v1alpha1, served: true, storage: false, deprecated: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1alpha2, served: true, storage: false, deprecated: true, deprecationWarning: custom deprecation warning, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1beta2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1beta3, served: true, storage: false, schema: {openAPIV3Schema: {type: object}}}
"#;

#[test]
fn deprecated_versions_warn_on_every_request() {
    let server = TestServer::start(&[DEPRECATED_CRD]);
    let client = Client::admin(&server);
    let warnings = |version: &str| -> Vec<String> {
        let response = client.get(&format!("/apis/tests.example.com/{version}/namespaces/default/deps")).unwrap();
        assert_eq!(response.status, 200);
        response.headers.get_all("warning").iter().map(|v| v.to_str().unwrap().to_string()).collect()
    };
    assert_eq!(
        warnings("v1alpha1"),
        [r#"299 - "tests.example.com/v1alpha1 Dep is deprecated; use tests.example.com/v1beta3 Dep""#]
    );
    assert_eq!(warnings("v1alpha2"), [r#"299 - "custom deprecation warning""#]);
    assert!(warnings("v1beta2").is_empty());
    assert!(warnings("v1beta3").is_empty());
    let out = server.kubectl(&["get", "deps.v1alpha1.tests.example.com"]);
    assert!(
        stderr(&out)
            .contains("Warning: tests.example.com/v1alpha1 Dep is deprecated; use tests.example.com/v1beta3 Dep"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn kubectl_1_27_directly() {
    // kubectl 1.27 reads OpenAPI v2 in protobuf (explain, patch types) and aggregated discovery
    // v2beta1: served without any aggregator in front.
    let server = TestServer::start(&[WIDGET_CRD]);
    let binary = support::kubectl::release("1.27");
    let run = |args: &[&str], stdin: &str| {
        use std::io::Write;
        let mut child = Command::new(&binary)
            .env("KUBECONFIG", server.kubeconfig())
            .env("HOME", server.dir.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "kubectl 1.27 {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(run(&["apply", "-f", "-"], &widget("old", 1, "red")).trim(), "widget.apps.example.com/old created");
    assert_eq!(run(&["apply", "-f", "-"], &widget("old", 2, "red")).trim(), "widget.apps.example.com/old configured");
    assert!(run(&["explain", "widget.spec"], "").contains("What the widget should be."));
    assert_eq!(table(&run(&["get", "widgets", "--no-headers"], ""))[0][..2], ["old", "2"]);
}

/// A resource holding whole objects: `x-kubernetes-embedded-resource` with and without
/// unknown fields.
const DEPLOYER_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: deployers.apps.example.com
spec:
  group: apps.example.com
  scope: Namespaced
  names: {plural: deployers, singular: deployer, kind: Deployer}
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
            properties:
              template:
                type: object
                x-kubernetes-embedded-resource: true
                properties:
                  spec: {type: object, description: What the object asks for.}
              extra:
                type: object
                x-kubernetes-embedded-resource: true
                x-kubernetes-preserve-unknown-fields: true
"#;

#[test]
fn explain_shows_the_type_and_metadata_of_embedded_resources() {
    let server = TestServer::start(&[DEPLOYER_CRD]);
    let explained = server.kubectl_ok(&["explain", "deployer.spec.template"]);
    for expected in [
        "  apiVersion\t<string> -required-",
        "    apiVersion defines the versioned schema of this representation of an object.",
        "  kind\t<string> -required-",
        "  metadata\t<ObjectMeta>",
        "  spec\t<Object>",
    ] {
        assert!(explained.lines().any(|l| l == expected), "no line {expected:?} in\n{explained}");
    }
    let meta = server.kubectl_ok(&["explain", "deployer.spec.template.metadata.labels"]);
    assert!(meta.contains("FIELD: labels <map[string]string>"), "{meta}");
    // OpenAPI v2 publishes the same for nodes without unknown fields, and leaves the others
    // untouched (kubectl would refuse their unknown fields otherwise).
    let v2: Value = serde_json::from_str(&server.kubectl_ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    let spec = &v2["definitions"]["com.example.apps.v1.Deployer"]["properties"]["spec"]["properties"];
    assert_eq!(spec["template"]["required"], serde_json::json!(["kind", "apiVersion"]));
    assert_eq!(
        spec["template"]["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert!(spec["extra"].get("properties").is_none(), "{}", spec["extra"]);
}
