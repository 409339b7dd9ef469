//! A definition file that a running server refuses is refused after a restart too, and by
//! `crd-apiserver migrate-storage` (issue 30 §1): the store keeps the last accepted definition,
//! a start checks the files as updates of it, the last accepted one goes on being served, the
//! refusal is reported (log, metrics, `serveddefinitions`), and no object is touched. On sled
//! and on a real etcd, driven with real kubectl. Every refused source is shown by `kubectl get
//! serveddefinitions` and `kubectl describe` (issue 30 §2).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::etcd::TestEtcd;
use support::http::Client;
use support::{TestServer, printed, stdout};

/// `widgets` with one version, the storage version, whose schema has `spec.<field>`.
fn widgets(version: &str, field: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {{plural: widgets, kind: Widget}}
  versions:
  - name: {version}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              {field}: {{type: string}}
"
    )
}

const W1: &str = "/apis/stable.example.com/v1beta1/namespaces/default/widgets/w1";
const V1_WIDGETS: &str = "/apis/stable.example.com/v1/namespaces/default/widgets";
const STATUS: &str = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/widgets.stable.example.com";
const REFUSAL: &str = "status.storedVersions[0]: Invalid value: \\\"v1beta1\\\": missing from spec.versions; \
                       v1beta1 was previously a storage version";

/// Waits for `probe` (a condition, polled; the bound only guards against a hang).
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replaces the definition file at once (written beside it, renamed over it).
fn replace_definition(server: &TestServer, text: &str) {
    let path = server.definitions_dir().join("00.yaml");
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, &path).unwrap();
}

/// The server serving only `v1beta1`, with `w1` holding `spec.foo: keep-me`.
fn serving_w1(extra: &[&str]) -> TestServer {
    let mut server = TestServer::prepare(&[&widgets("v1beta1", "foo")], None);
    server.spawn(extra);
    let object = "apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n\
                  spec: {foo: keep-me}\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], object);
    assert!(out.status.success(), "{}", printed(&out));
    server
}

/// `w1` is intact and served in v1beta1, v1 is not served, and the definition's status says
/// why, once the lifecycle controller looked at it (its migration pass is done).
fn assert_w1_intact_and_refusal_reported(server: &TestServer) {
    let client = Client::admin(server);
    let status = eventually("the definition's status with its refusal and a finished pass", || {
        let status = client.get(STATUS).ok().filter(|r| r.status == 200)?.json()["status"].clone();
        let done = status["migration"]["state"] == "Done";
        (done && status["lastReloadError"].is_string()).then_some(status)
    });
    let error = status["lastReloadError"].as_str().unwrap();
    assert!(error.contains(&REFUSAL.replace("\\\"", "\"")), "{error}");
    assert_eq!(status["storedVersions"], serde_json::json!(["v1beta1"]), "{status}");
    assert_eq!(status["objectsPerVersion"], serde_json::json!({"v1beta1": 1}), "{status}");
    let w1 = server.kubectl_ok(&["get", "widgets.v1beta1.stable.example.com", "w1", "-n", "default", "-o", "json"]);
    let w1: Value = serde_json::from_str(&w1).unwrap();
    assert_eq!(
        (w1["apiVersion"].as_str(), w1["spec"]["foo"].as_str()),
        (Some("stable.example.com/v1beta1"), Some("keep-me"))
    );
    assert_eq!(client.get(W1).unwrap().status, 200);
    assert_eq!(client.get(V1_WIDGETS).unwrap().status, 404);
    let metrics = client.get("/metrics").unwrap().text();
    let errors = metrics.lines().find(|l| l.starts_with("crd_apiserver_definition_load_errors_total ")).unwrap();
    assert_ne!(errors, "crd_apiserver_definition_load_errors_total 0", "{metrics}");
}

/// The reproduction of issue 30 §1: the file that the running server refused, then a SIGTERM
/// and a start with the same files.
fn a_refused_file_stays_refused_across_a_restart(extra: &[&str]) {
    let mut server = serving_w1(extra);
    replace_definition(&server, &widgets("v1", "bar"));
    eventually("the running server's refusal", || server.log().contains(REFUSAL).then_some(()));
    assert_w1_intact_and_refusal_reported(&server);
    server.stop();
    let before = server.log().len();
    server.spawn(extra);
    let log = server.log();
    let started = &log[before..];
    assert!(started.contains(REFUSAL), "{started}");
    assert!(started.contains("the definition goes on being served as it was"), "{started}");
    assert_w1_intact_and_refusal_reported(&server);
    // Fixed, the file is served again as it says, with its object.
    replace_definition(&server, &widgets("v1beta1", "foo"));
    let client = Client::admin(&server);
    eventually("the error gone", || {
        let status = client.get(STATUS).ok()?.json()["status"].clone();
        status.get("lastReloadError").is_none().then_some(())
    });
    assert_eq!(client.get(W1).unwrap().json()["spec"]["foo"], "keep-me");
}

#[test]
fn a_refused_file_stays_refused_across_a_restart_on_sled() {
    a_refused_file_stays_refused_across_a_restart(&[]);
}

#[test]
fn a_refused_file_stays_refused_across_a_restart_on_etcd() {
    let etcd = TestEtcd::start();
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    a_refused_file_stays_refused_across_a_restart(&["--storage-backend=etcd3", &servers]);
}

#[test]
fn migrate_storage_refuses_what_the_server_would_refuse() {
    let mut server = serving_w1(&[]);
    server.stop();
    replace_definition(&server, &widgets("v1", "bar"));
    let out = std::process::Command::new(support::binary())
        .args(["migrate-storage", "--storage", server.data_dir().to_str().unwrap()])
        .args(["--definitions", server.definitions_dir().to_str().unwrap()])
        .output()
        .unwrap();
    let text = printed(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(&REFUSAL.replace("\\\"", "\"")), "{text}");
    assert!(stdout(&out).contains("widgets.stable.example.com: not migrated: its definition was refused"), "{text}");
    assert!(!text.contains("objects migrated"), "{text}");
    server.spawn(&[]);
    assert_w1_intact_and_refusal_reported(&server);
}

#[test]
fn a_definition_added_back_is_checked_against_its_last_accepted_form() {
    let server = serving_w1(&[]);
    let file = server.definitions_dir().join("00.yaml");
    std::fs::remove_file(&file).unwrap();
    let client = Client::admin(&server);
    eventually("widgets no longer served", || (client.get(W1).unwrap().status == 404).then_some(()));
    // Its objects stayed: a form that would drop the version they are stored in is refused.
    replace_definition(&server, &widgets("v1", "bar"));
    eventually("the refusal", || server.log().contains(REFUSAL).then_some(()));
    assert_eq!(client.get(V1_WIDGETS).unwrap().status, 404);
    assert_eq!(client.get(W1).unwrap().status, 404);
    replace_definition(&server, &widgets("v1beta1", "foo"));
    eventually("widgets served again", || (client.get(W1).unwrap().status == 200).then_some(()));
    assert_eq!(client.get(W1).unwrap().json()["spec"]["foo"], "keep-me");
}

/// A definition in `stable.example.com` with one version, `v1`, whose spec has `fields` (YAML
/// flow mappings, one per line).
fn definition(plural: &str, kind: &str, fields: &[&str]) -> String {
    let fields: String = fields.iter().map(|f| format!("              {f}\n")).collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names: {{plural: {plural}, kind: {kind}}}
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
{fields}"
    )
}

/// The `serveddefinitions` object named `name`, once `done` accepts it.
fn status_when(client: &Client, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/{name}");
    eventually(what, || client.get(&path).ok().filter(|r| r.status == 200).map(|r| r.json()).filter(&done))
}

/// A kubectl table's cells, cut where the header's columns start (kubectl leaves a cell with no
/// value blank).
fn cells(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or_default();
    let mut starts = vec![0];
    let bytes = header.as_bytes();
    for i in 1..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && i >= 2 && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    let cut = |line: &str| -> Vec<String> {
        (0..starts.len())
            .map(|c| {
                let end = starts.get(c + 1).copied().unwrap_or(line.len()).min(line.len());
                line.get(starts[c].min(end)..end).unwrap_or_default().trim().to_string()
            })
            .collect()
    };
    std::iter::once(header).chain(lines).map(cut).collect()
}

/// The reason of an object's `SourceRefused` condition, if it has one.
fn refused_because(object: &Value) -> Option<&str> {
    let conditions = object["status"]["conditions"].as_array()?;
    let refused = conditions.iter().find(|c| c["type"] == "SourceRefused")?;
    refused["reason"].as_str()
}

/// Issue 30 §2: every definition source the server refuses (a refused change, a file that is
/// not YAML, a new invalid definition, a new one whose kinds are taken, a file of no
/// definition) is shown by `kubectl get serveddefinitions` at a glance and by `kubectl
/// describe` in full; a file that cannot be parsed no longer clears what the status says;
/// object counts are current after a reload; the generation moves with the definition.
#[test]
fn every_refused_source_is_shown_by_kubectl_get_and_describe() {
    let mut server = TestServer::prepare(&[&widgets("v1beta1", "foo")], None);
    server.spawn(&[]);
    let client = Client::admin(&server);
    let widgets_name = "widgets.stable.example.com";
    // The first pass counted no object; w1 comes after it.
    status_when(&client, widgets_name, "the first pass", |s| s["status"]["objectsPerVersion"] == json!({"v1beta1": 0}));
    let object = "apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n\
                  spec: {foo: keep-me}\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], object);
    assert!(out.status.success(), "{}", printed(&out));

    // A refused change, then a file that is not YAML: each is what the status shows.
    replace_definition(&server, &widgets("v1", "bar"));
    let refused = status_when(&client, widgets_name, "the refusal", |s| refused_because(s) == Some("UpdateRefused"));
    assert!(
        refused["status"]["lastReloadError"].as_str().unwrap().contains(&REFUSAL.replace("\\\"", "\"")),
        "{refused}"
    );
    replace_definition(&server, "spec: [not, closed\n");
    let broken = status_when(&client, widgets_name, "the parse error", |s| refused_because(s) == Some("Unparsable"));
    let error = broken["status"]["lastReloadError"].as_str().unwrap();
    assert!(error.contains("00.yaml: not a usable CustomResourceDefinition: cannot parse"), "{broken}");
    // Counted again after the reload, w1 included.
    assert_eq!(broken["status"]["objectsPerVersion"], json!({"v1beta1": 1}), "{broken}");
    assert_eq!(broken["metadata"]["generation"], 1);

    // New sources that cannot be served.
    let dir = server.definitions_dir();
    let invalid = definition("gadgets", "Gadget", &["size: {type: integer, minimum: \"a\"}", "name: {type: strng}"]);
    std::fs::write(dir.join("10-gadgets.yaml"), invalid).unwrap();
    std::fs::write(dir.join("20-sprockets.yaml"), definition("sprockets", "Widget", &["x: {type: string}"])).unwrap();
    std::fs::write(dir.join("30-notes.yaml"), "{not: [yaml\n").unwrap();
    let expected = |notes: &str| {
        [
            vec!["NAME", "ESTABLISHED", "NAMES ACCEPTED", "STORAGE", "MIGRATION", "LAST ERROR"],
            vec![notes, "False", "", "", "", "Unparsable"],
            vec!["gadgets.stable.example.com", "False", "", "", "", "Invalid"],
            vec!["sprockets.stable.example.com", "False", "False", "", "", "ListKindConflict"],
            vec![widgets_name, "True", "True", "v1beta1", "Done", "Unparsable"],
        ]
        .map(|row| row.into_iter().map(str::to_string).collect::<Vec<_>>())
    };
    let table = eventually("every refused source in the table", || {
        let table = cells(&server.kubectl_ok(&["get", "serveddefinitions"]));
        (table.len() == 5).then_some(table)
    });
    assert!(table.iter().all(|row| row.len() == 7), "{table:?}");
    let notes = table[1][0].clone();
    assert!(notes.starts_with("file-30-notes-yaml-"), "{table:?}");
    let shown: Vec<Vec<String>> = table.iter().map(|row| row[..6].to_vec()).collect();
    assert_eq!(shown, expected(&notes));
    assert_eq!(table[0][6], "AGE");
    let wide = cells(&server.kubectl_ok(&["get", "sdef", widgets_name, "-o", "wide"]));
    assert_eq!(wide[0][4], "STORED");
    assert_eq!(wide[1][4], "[\"v1beta1\"]");

    // `describe` shows each message whole: the file, and every field error by its path.
    // (spaces collapsed: describe aligns values by the longest key of each block)
    let describe = |name: &str| {
        let text = server.kubectl_ok(&["describe", "sdef", name]);
        text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n")
    };
    let described = describe("gadgets.stable.example.com");
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties";
    for expected in [
        "10-gadgets.yaml: CustomResourceDefinition \"gadgets.stable.example.com\" is invalid:".to_string(),
        format!("{at}[size].minimum: Invalid value: \"a\": must be of type number"),
        format!("{at}[name].type: Unsupported value: \"strng\""),
        "Reason: Invalid\nStatus: True\nType: SourceRefused".to_string(),
    ] {
        assert!(described.contains(&expected), "{expected}\nnot in\n{described}");
    }
    let described = describe("sprockets.stable.example.com");
    assert!(described.contains("Message: \"WidgetList\" is already in use\nReason: ListKindConflict"), "{described}");
    let described = describe(&notes);
    assert!(described.contains("30-notes.yaml: not a usable CustomResourceDefinition: cannot parse"), "{described}");

    // All fixed, with a change: the entries go, the status is clear, the generation moves.
    for file in ["10-gadgets.yaml", "20-sprockets.yaml", "30-notes.yaml"] {
        std::fs::remove_file(dir.join(file)).unwrap();
    }
    replace_definition(&server, &widgets("v1beta1", "baz"));
    let fixed = status_when(&client, widgets_name, "the fixed definition", |s| {
        refused_because(s).is_none()
            && s["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["baz"]
                .is_object()
    });
    assert_eq!(fixed["metadata"]["generation"], 2, "{fixed}");
    assert!(fixed["status"].get("lastReloadError").is_none(), "{fixed}");
    let table = eventually("only the served definition left", || {
        let table = cells(&server.kubectl_ok(&["get", "sdef"]));
        (table.len() == 2).then_some(table)
    });
    assert_eq!(table[1][..6], [widgets_name, "True", "True", "v1beta1", "Done", ""]);
}

/// `gadgets` and `sprockets`, cluster-scoped, as one file's two documents.
const GADGETS_AND_SPROCKETS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.stable.example.com}
spec:
  group: stable.example.com
  scope: Cluster
  names: {plural: gadgets, kind: Gadget}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.stable.example.com}
spec:
  group: stable.example.com
  scope: Cluster
  names: {plural: sprockets, kind: Sprocket}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
";

/// Stops the server, starts it again, and returns what it logged in that start.
fn restarted(server: &mut TestServer) -> String {
    server.stop();
    let before = server.log().len();
    server.spawn(&[]);
    server.log()[before..].to_string()
}

/// A restart takes the definitions of the files unchanged since the store recorded what their
/// bytes gave from those records, without parsing them (issue 32: upjet's YAML is most of a
/// restart's work), and parses a file changed while the server was stopped: its new form is
/// served, and recorded for the next start.
#[test]
fn a_restart_parses_only_the_files_changed_while_stopped() {
    let mut server = TestServer::prepare(&[&widgets("v1beta1", "foo"), GADGETS_AND_SPROCKETS], None);
    server.spawn(&[]);
    assert!(server.log().contains("parsed=2 from_records=0"), "{}", server.log());
    let object = "apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w1, namespace: default}\n\
                  spec: {foo: keep-me}\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], object);
    assert!(out.status.success(), "{}", printed(&out));

    let started = restarted(&mut server);
    assert!(started.contains("parsed=0 from_records=2"), "{started}");
    let client = Client::admin(&server);
    assert_eq!(client.get(W1).unwrap().json()["spec"]["foo"], "keep-me");
    for plural in ["gadgets", "sprockets"] {
        let listed = server.kubectl_ok(&["get", &format!("{plural}.stable.example.com"), "-o", "json"]);
        assert!(listed.contains("\"items\": []"), "{listed}");
    }

    // Changed while stopped: parsed, and served as it now says (`spec.bar` kept, not pruned).
    std::fs::write(server.definitions_dir().join("00.yaml"), widgets("v1beta1", "bar")).unwrap();
    let started = restarted(&mut server);
    assert!(started.contains("parsed=1 from_records=1"), "{started}");
    let object = "apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w2, namespace: default}\n\
                  spec: {bar: new-field}\n";
    let out = server.kubectl_stdin(&["apply", "-f", "-"], object);
    assert!(out.status.success(), "{}", printed(&out));
    let w2 = client.get("/apis/stable.example.com/v1beta1/namespaces/default/widgets/w2").unwrap().json();
    assert_eq!(w2["spec"]["bar"], "new-field", "{w2}");
    let started = restarted(&mut server);
    assert!(started.contains("parsed=0 from_records=2"), "{started}");
    let w2 = client.get("/apis/stable.example.com/v1beta1/namespaces/default/widgets/w2").unwrap().json();
    assert_eq!(w2["spec"]["bar"], "new-field", "{w2}");
}
