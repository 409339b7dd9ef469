//! Impact analyses end to end (issue 31): `crd-apiserver impact` offline over a stopped
//! server's store and through a running server (`--server`, as the user a token names), the
//! `serveddefinitions/<name>/impact` subresource through the control-plane double with kubectl
//! (RBAC by SubjectAccessReview, 404, 422, cancellation), the analysis a live reload runs
//! (the change served all the same, its impact in the status and the log), and the dry run of
//! a conversion webhook that refuses some objects or never answers. Every analysis leaves the
//! stored objects byte for byte as they were.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::{CRONTAB_CRD, TestServer, stderr, stdout};

/// The README's candidate: the CronTab with `maximum: 5` on replicas.
const MAXIMUM_5: &str = include_str!("../hack/impact/crontabs-maximum-5.yaml");
const NAME: &str = "crontabs.stable.example.com";
const IMPACT: &str = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com/impact";
const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

/// Polls `probe` until it gives a value, for at most 60 seconds (a hang guard only).
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `count` CronTabs named `ct-NN`; every `every`-th (from the 3rd) has 7 replicas, the others 3.
fn create_crontabs(client: &support::http::Client, count: usize, every: usize) -> usize {
    let mut exceeding = 0;
    for i in 0..count {
        let replicas = if i % every == 2 { 7 } else { 3 };
        exceeding += usize::from(replicas == 7);
        let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": format!("ct-{i:02}")},
            "spec": {"cronSpec": "* * * * */5", "image": "cron", "replicas": replicas}});
        let response = client.send_json("POST", CRONTABS, &object);
        assert_eq!(response.status, 201, "{}", response.text());
    }
    exceeding
}

/// `crd-apiserver impact` with `args`.
fn impact(args: &[&str]) -> Output {
    std::process::Command::new(support::binary()).arg("impact").args(args).output().unwrap()
}

/// A backup of the stopped server's store, its time stamp (and the checksum over it) left out:
/// the store's every key, revision and byte.
fn store_contents(server: &TestServer, name: &str) -> Vec<String> {
    let file = server.dir.path().join(name);
    let out = std::process::Command::new(support::binary())
        .args(["backup", "--storage", server.data_dir().to_str().unwrap(), "-o", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut header: Value = serde_json::from_str(&lines[0]).unwrap();
    header.as_object_mut().unwrap().remove("created");
    lines[0] = header.to_string();
    // The trailer's checksum covers the time stamp too.
    let last = lines.len() - 1;
    let mut trailer: Value = serde_json::from_str(&lines[last]).unwrap();
    trailer.as_object_mut().unwrap().remove("sha256");
    lines[last] = trailer.to_string();
    lines
}

#[test]
fn an_offline_analysis_reads_a_stopped_servers_store_and_changes_nothing() {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    let client = support::http::Client::admin(&server);
    let exceeding = create_crontabs(&client, 40, 9);
    assert_eq!(exceeding, 5);
    let candidate = server.write("maximum-5.yaml", MAXIMUM_5);
    let storage = server.data_dir();
    let definitions = server.definitions_dir();
    let offline = |candidate: &Path, output: &str| {
        impact(&[
            candidate.to_str().unwrap(),
            "--storage",
            storage.to_str().unwrap(),
            "--definitions",
            definitions.to_str().unwrap(),
            "-o",
            output,
        ])
    };
    // A running server holds its sled store: the command says so.
    let held = offline(&candidate, "json");
    assert_eq!(held.status.code(), Some(3), "{}", stderr(&held));
    assert!(stderr(&held).contains("a running server holds it"), "{}", stderr(&held));
    server.stop();
    let before = store_contents(&server, "before.backup");

    let out = offline(&candidate, "json");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["definition"], NAME);
    assert_eq!(report["change"]["accepted"], true);
    assert_eq!(report["objects"], 40);
    let v1 = &report["versions"][0];
    assert_eq!(
        (v1["name"].as_str(), v1["failing"].as_u64(), v1["newlyFailing"].as_u64()),
        (Some("v1"), Some(5), Some(5))
    );
    assert_eq!(v1["failingUnchanged"], 0);
    assert_eq!(
        v1["errors"],
        json!([{"field": "spec.replicas", "reason": "FieldValueInvalid",
            "message": "Invalid value: spec.replicas in body should be less than or equal to 5",
            "objects": 5, "toleratedByRatcheting": 5,
            "examples": ["default/ct-02", "default/ct-11", "default/ct-20", "default/ct-29", "default/ct-38"],
            "firstError": "spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5"}])
    );
    assert_eq!(
        report["storage"],
        json!({"currentVersion": "v1", "version": "v1", "objectsPerVersion": {"v1": 40}, "toMigrate": 0})
    );

    let wide = offline(&candidate, "wide");
    assert_eq!(wide.status.code(), Some(1));
    let table = stdout(&wide);
    assert!(table.starts_with(&format!("DEFINITION: {NAME}  (40 stored objects)  OBJECTS WOULD FAIL\n")), "{table}");
    let row = table.lines().find(|l| l.starts_with("v1        spec.replicas")).unwrap_or_default();
    let cells: Vec<&str> = row.split("   ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(
        cells,
        [
            "v1",
            "spec.replicas",
            "Invalid value: spec.replicas in body should be less than or equal to 5",
            "5",
            "5",
            "default/ct-02,default/ct-11,default/ct-20,default/ct-29,default/ct-38"
        ],
        "{table}"
    );
    assert!(!stdout(&offline(&candidate, "table")).contains("default/ct-02"));

    // The definition as it is: nothing breaks.
    let same = offline(&definitions.join("00.yaml"), "json");
    assert_eq!(same.status.code(), Some(0), "{}", stdout(&same));
    // A change Kubernetes refuses, in its words.
    let cluster_scoped = server.write("cluster.yaml", &CRONTAB_CRD.replace("scope: Namespaced", "scope: Cluster"));
    let refused = offline(&cluster_scoped, "table");
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    assert!(
        stdout(&refused).contains(&format!(
            "CHANGE: refused: CustomResourceDefinition.apiextensions.k8s.io \"{NAME}\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable"
        )),
        "{}",
        stdout(&refused)
    );
    // The files no longer name it: the store's record of what the server last accepted is
    // what it served at its stop, and what the change is checked against.
    let no_files = server.dir.path().join("no-definitions");
    std::fs::create_dir(&no_files).unwrap();
    let args = |file: &Path| {
        impact(&[
            file.to_str().unwrap(),
            "--storage",
            storage.to_str().unwrap(),
            "--definitions",
            no_files.to_str().unwrap(),
            "-o",
            "json",
        ])
    };
    let refused = args(&cluster_scoped);
    assert_eq!(refused.status.code(), Some(2), "{}", stdout(&refused));
    let report: Value = serde_json::from_str(&stdout(&refused)).unwrap();
    assert_eq!(report["change"]["errors"], json!(["spec.scope: Invalid value: \"Cluster\": field is immutable"]));
    let tightened = args(&candidate);
    assert_eq!(tightened.status.code(), Some(1), "{}", stdout(&tightened));
    let report: Value = serde_json::from_str(&stdout(&tightened)).unwrap();
    assert_eq!(
        (report["versions"][0]["failing"].as_u64(), report["versions"][0]["newlyFailing"].as_u64()),
        (Some(5), Some(5))
    );
    // Not a valid definition: Kubernetes' field errors.
    let sideways = server.write("sideways.yaml", &CRONTAB_CRD.replace("scope: Namespaced", "scope: Sideways"));
    let invalid = offline(&sideways, "json");
    assert_eq!(invalid.status.code(), Some(2));
    assert_eq!(
        stderr(&invalid).trim(),
        format!(
            "The CustomResourceDefinition.apiextensions.k8s.io \"{NAME}\" is invalid: spec.scope: Unsupported value: \"Sideways\": supported values: \"Cluster\", \"Namespaced\""
        )
    );
    assert_eq!(stdout(&invalid), "");
    // No store there.
    let nowhere = impact(&[
        candidate.to_str().unwrap(),
        "--storage",
        "/nonexistent/store",
        "--definitions",
        definitions.to_str().unwrap(),
    ]);
    assert_eq!(nowhere.status.code(), Some(3));
    assert!(stderr(&nowhere).contains("/nonexistent/store: no store there"), "{}", stderr(&nowhere));

    // Nothing was written: every key, revision and byte as before.
    let after = store_contents(&server, "after.backup");
    let differing: Vec<(&String, &String)> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
    assert_eq!((differing, before.len()), (vec![], after.len()));
}

/// `crd-apiserver impact --server` as the user whose token is `token`.
fn through_server(cluster: &TestCluster, token: &str, candidate: &Path, output: &str) -> Output {
    let token_file = cluster.server.dir.path().join(format!("{token}.txt"));
    std::fs::write(&token_file, token).unwrap();
    impact(&[
        candidate.to_str().unwrap(),
        "--server",
        &format!("https://127.0.0.1:{}", cluster.server.port),
        "--certificate-authority",
        cluster.server.pki.serving_ca().to_str().unwrap(),
        "--token-file",
        token_file.to_str().unwrap(),
        "-o",
        output,
    ])
}

/// The status object's analysis once it is no longer running.
fn finished_impact(cluster: &TestCluster, user: &Path, id: Option<&str>) -> Value {
    eventually("the impact analysis to finish", || {
        let out = cluster.kubectl(user, &["get", "serveddefinitions", NAME, "-o", "json"]);
        let object: Value = serde_json::from_str(&stdout(&out)).ok()?;
        let impact = object["status"]["impact"].clone();
        let ours = id.is_none_or(|id| impact["id"] == id);
        (ours && impact["state"].as_str().is_some_and(|s| s != "Running")).then_some(impact)
    })
}

#[test]
fn the_api_and_the_command_through_a_running_server_analyse_as_rbac_allows() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("olga", &["get"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.grant("olga", &["create", "delete"], "crd-apiserver.io", &["serveddefinitions/impact"], None);
    let olga = cluster.user("olga", &[]);
    let dave = cluster.user("dave", &[]);
    let carol = cluster.user("carol", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    assert_eq!(create_crontabs(&client, 30, 10), 3);
    let objects_before = cluster.kubectl_ok(&carol, &["get", "crontabs", "-o", "json"]);

    let ask =
        |user: &Path, path: &str, body: &str| cluster.kubectl_stdin(user, &["create", "--raw", path, "-f", "-"], body);
    let candidate: Value = serde_saphyr::from_str(MAXIMUM_5).unwrap();
    let out = ask(&olga, IMPACT, &candidate.to_string());
    assert!(out.status.success(), "{}", stderr(&out));
    let started: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!((started["status"].as_str(), started["code"].as_u64()), (Some("Success"), Some(202)));
    assert_eq!(
        started["message"],
        format!("impact analysis of {NAME} started; it shows in the status of serveddefinitions/{NAME}")
    );
    let id = started["details"]["uid"].as_str().unwrap().to_string();
    let done = finished_impact(&cluster, &olga, Some(&id));
    assert_eq!(
        (done["state"].as_str(), done["trigger"].as_str(), done["exitCode"].as_i64()),
        (Some("Done"), Some("Request"), Some(1))
    );
    assert_eq!(done["scannedObjects"], 30);
    assert_eq!(done["report"]["versions"][0]["failing"], 3);
    assert_eq!(
        done["report"]["versions"][0]["errors"][0]["examples"],
        json!(["default/ct-02", "default/ct-12", "default/ct-22"])
    );
    assert_eq!(done["summary"], "3 of 30 objects would fail validation in v1 (3 newly, 0 even on an unchanged update)");

    // RBAC decides, by SubjectAccessReview, on the subresource.
    let denied = ask(&dave, IMPACT, &candidate.to_string());
    assert!(
        stderr(&denied).contains(
            "User \"dave\" cannot create resource \"serveddefinitions/impact\" in API group \"crd-apiserver.io\""
        ),
        "{}",
        stderr(&denied)
    );
    // A definition that is not served.
    let unknown = ask(
        &olga,
        "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/nothing.example.com/impact",
        &candidate.to_string(),
    );
    assert_eq!(
        stderr(&unknown).trim(),
        "Error from server (NotFound): serveddefinitions.crd-apiserver.io \"nothing.example.com\" not found"
    );
    // A candidate that is not a valid definition: Kubernetes' 422 with field paths.
    let mut sideways = candidate.clone();
    sideways["spec"]["scope"] = json!("Sideways");
    let invalid = ask(&olga, IMPACT, &sideways.to_string());
    assert!(!invalid.status.success());
    assert!(
        stderr(&invalid)
            .contains("spec.scope: Unsupported value: \"Sideways\": supported values: \"Cluster\", \"Namespaced\""),
        "{}",
        stderr(&invalid)
    );
    let raw = support::http::Client::to_plane(&cluster.plane, "olga-token");
    let response = raw.send_json("POST", IMPACT, &sideways);
    assert_eq!(response.status, 422, "{}", response.text());
    let status = response.json();
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.scope");
    // Another definition than the URL names.
    let mut renamed = candidate.clone();
    renamed["metadata"]["name"] = json!("crontabz.stable.example.com");
    renamed["spec"]["names"] = json!({"plural": "crontabz", "singular": "crontabz", "kind": "CronTabZ"});
    let response = raw.send_json("POST", IMPACT, &renamed);
    assert_eq!(response.status, 400, "{}", response.text());
    assert_eq!(
        response.json()["message"],
        format!("the name of the object (crontabz.stable.example.com) does not match the name on the URL ({NAME})")
    );
    // Nothing under way: a cancellation says so.
    let cancel = cluster.kubectl(&olga, &["delete", "--raw", IMPACT]);
    assert!(cancel.status.success(), "{}", stderr(&cancel));
    assert!(stdout(&cancel).contains(&format!("no impact analysis of {NAME} is under way")), "{}", stdout(&cancel));

    // The command asks the server, follows the analysis and prints its report.
    let file = cluster.server.write("maximum-5.yaml", MAXIMUM_5);
    let out = through_server(&cluster, "olga-token", &file, "wide");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("default/ct-02,default/ct-12,default/ct-22"), "{}", stdout(&out));
    let out = through_server(&cluster, "dave-token", &file, "json");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("403 Forbidden"), "{}", stderr(&out));
    let sideways_file =
        cluster.server.write("sideways.yaml", &MAXIMUM_5.replace("scope: Namespaced", "scope: Sideways"));
    let out = through_server(&cluster, "olga-token", &sideways_file, "json");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("spec.scope: Unsupported value"), "{}", stderr(&out));

    // The objects were read, never written.
    assert_eq!(cluster.kubectl_ok(&carol, &["get", "crontabs", "-o", "json"]), objects_before);
}

#[test]
fn a_live_reload_that_makes_objects_invalid_applies_and_the_status_tells() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let client = support::http::Client::admin(&server);
    assert_eq!(create_crontabs(&client, 25, 8), 3);
    std::fs::write(server.definitions_dir().join("00.yaml"), MAXIMUM_5).unwrap();
    let impact = eventually("the reload's impact analysis", || {
        let out = server.kubectl(&["get", "serveddefinitions", NAME, "-o", "json"]);
        let object: Value = serde_json::from_str(&stdout(&out)).ok()?;
        let impact = object["status"]["impact"].clone();
        (impact["trigger"] == "Reload" && impact["state"] == "Done").then_some(impact)
    });
    assert_eq!(
        impact["summary"],
        "3 of 25 objects would fail validation in v1 (3 newly, 0 even on an unchanged update)"
    );
    assert_eq!(impact["report"]["change"]["accepted"], true);
    assert_eq!(impact["report"]["versions"][0]["errors"][0]["objects"], 3);
    assert!(server.log().contains("the reloaded definition makes stored objects invalid"), "{}", server.log());
    // The change is served all the same: a new object above the maximum is refused, the stored
    // ones are there.
    let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": "new"},
        "spec": {"replicas": 9}});
    assert_eq!(client.send_json("POST", CRONTABS, &object).status, 422);
    assert_eq!(client.get(CRONTABS).unwrap().json()["items"].as_array().unwrap().len(), 25);
}

/// The Shirt served through the test webhook, with `spec.color` limited to `colors` in v1beta1
/// (where it is `hue`).
fn shirt_candidate(webhook: &support::webhook::Webhook, colors: &str) -> String {
    webhook.shirt_definition().replacen("hue: {type: string}", &format!("hue: {{type: string, enum: [{colors}]}}"), 1)
}

#[test]
fn a_conversion_webhook_is_called_in_dry_run_and_its_failures_told_per_object() {
    let webhook = support::webhook::Webhook::start();
    let mut server = TestServer::start(&[&webhook.shirt_definition()]);
    let client = support::http::Client::admin(&server);
    for (name, color) in [("a", "red"), ("b", "green"), ("c", "broken"), ("d", "red"), ("e", "broken")] {
        let shirt = json!({"apiVersion": "tests.example.com/v1", "kind": "Shirt", "metadata": {"name": name},
            "spec": {"color": color, "size": "M"}});
        assert_eq!(client.send_json("POST", "/apis/tests.example.com/v1/shirts", &shirt).status, 201);
    }
    server.stop();
    let candidate = server.write("shirts.yaml", &shirt_candidate(&webhook, "red, blue"));
    let definitions = server.definitions_dir();
    let storage = server.data_dir();
    let offline = |extra: &[&str]| {
        let mut args = vec![candidate.to_str().unwrap(), "--storage", storage.to_str().unwrap()];
        args.extend(["--definitions", definitions.to_str().unwrap(), "-o", "json"]);
        args.extend(extra);
        impact(&args)
    };
    *webhook.counters.refused_color.lock().unwrap() = Some("broken".into());
    let out = offline(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let conversion = &report["conversion"];
    assert_eq!(conversion["webhook"], webhook.url);
    assert_eq!(conversion["failed"], 2);
    assert_eq!(conversion["errors"][0]["examples"], json!(["c", "e"]));
    assert!(
        conversion["errors"][0]["firstError"].as_str().unwrap().contains("cannot convert the color broken"),
        "{conversion}"
    );
    // The objects it converted are validated in v1beta1: green is not among the hues.
    let v1beta1 = report["versions"].as_array().unwrap().iter().find(|v| v["name"] == "v1beta1").unwrap().clone();
    assert_eq!(v1beta1["failing"], 1);
    assert_eq!(v1beta1["errors"][0]["examples"], json!(["b"]));
    assert_eq!(v1beta1["errors"][0]["field"], "spec.hue");

    // A webhook that never answers: each call gives up after the timeout, each object is told,
    // and no call is made again: one for the batch, then one per object.
    *webhook.counters.refused_color.lock().unwrap() = None;
    webhook.counters.hold();
    let calls_before = webhook.counters.held.load(std::sync::atomic::Ordering::SeqCst);
    let out = offline(&["--webhook-timeout", "1s"]);
    webhook.counters.release();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["conversion"]["failed"], 5);
    assert!(
        report["conversion"]["errors"][0]["firstError"].as_str().unwrap().contains("context deadline exceeded"),
        "{report}"
    );
    assert_eq!(webhook.counters.held.load(std::sync::atomic::Ordering::SeqCst) - calls_before, 6);
}

#[test]
fn an_analysis_under_way_is_cancelled_through_the_subresource() {
    let webhook = support::webhook::Webhook::start();
    let server = TestServer::start(&[&webhook.shirt_definition()]);
    let client = support::http::Client::admin(&server);
    let shirt = json!({"apiVersion": "tests.example.com/v1", "kind": "Shirt", "metadata": {"name": "a"},
        "spec": {"color": "red", "size": "M"}});
    assert_eq!(client.send_json("POST", "/apis/tests.example.com/v1/shirts", &shirt).status, 201);
    // The analysis waits on the webhook, held, until the test releases it.
    webhook.counters.hold();
    let candidate: Value = serde_saphyr::from_str(&shirt_candidate(&webhook, "red")).unwrap();
    let path = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/shirts.tests.example.com/impact";
    let response = client.send_json("POST", path, &candidate);
    assert_eq!(response.status, 202, "{}", response.text());
    let id = response.json()["details"]["uid"].as_str().unwrap().to_string();
    eventually("the analysis to call the webhook", || {
        (webhook.counters.held.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(())
    });
    let impact_of = || {
        let object =
            client.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/shirts.tests.example.com").unwrap().json();
        object["status"]["impact"].clone()
    };
    assert_eq!((impact_of()["id"].as_str(), impact_of()["state"].as_str()), (Some(id.as_str()), Some("Running")));
    let cancelled = client.request("DELETE", path, None, None).unwrap();
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    assert_eq!(cancelled.json()["message"], "impact analysis of shirts.tests.example.com cancelled");
    assert_eq!(impact_of()["state"], "Cancelled");
    webhook.counters.release();
    eventually("the analysis to stop", || server.log().contains("impact analysis stopped").then_some(()));
    let impact = impact_of();
    assert_eq!((impact["id"].as_str(), impact["state"].as_str()), (Some(id.as_str()), Some("Cancelled")));
    assert!(impact.get("report").is_none(), "{impact}");
}
