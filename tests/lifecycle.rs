//! The version lifecycle with real kubectl through the control-plane double: the
//! `serveddefinitions` status resource (Table, short name, YAML, RBAC by SubjectAccessReview,
//! read-only), the seeds' five-step storage-version walkthrough followed by the built-in
//! migration and the removal of the old version, and every version behaviour of the seeds
//! (served: false, deprecated with and without a warning, version priority).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::kubectl::rows;
use support::{stderr, stdout};

/// The seeds' CronTab in the given versions: `(name, served, storage, deprecated, warning)`.
fn crontab(versions: &[(&str, bool, bool, bool, Option<&str>)]) -> String {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(name, served, storage, deprecated, warning)| {
            let mut v = json!({"name": name, "served": served, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
                    "properties": {"cronSpec": {"type": "string"}, "image": {"type": "string"},
                                   "replicas": {"type": "integer"}}}}}}});
            if *deprecated {
                v["deprecated"] = json!(true);
            }
            if let Some(w) = warning {
                v["deprecationWarning"] = json!(w);
            }
            v
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {"group": "stable.example.com", "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": versions}})
    .to_string()
}

fn my_crontab(version: &str, name: &str) -> String {
    format!(
        "apiVersion: stable.example.com/{version}\nkind: CronTab\nmetadata:\n  name: {name}\n\
         spec:\n  cronSpec: '* * * * */5'\n  image: my-awesome-cron-image\n"
    )
}

/// Polls `probe` until it gives a value, for at most 20 seconds.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status object of the CronTab's definition, once its migration says `Done` with
/// `stored` as storedVersions.
fn settled_status(cluster: &TestCluster, user: &Path, stored: &[&str]) -> Value {
    eventually("the migration to be done", || {
        let out = cluster.kubectl(user, &["get", "serveddefinitions", "crontabs.stable.example.com", "-o", "json"]);
        let status: Value = serde_json::from_str(&stdout(&out)).ok()?;
        (status["status"]["migration"]["state"] == "Done" && status["status"]["storedVersions"] == json!(stored))
            .then_some(status)
    })
}

/// Restarts the server on the same store with one definition file replaced.
fn restart_with(cluster: &mut TestCluster, definition: &str) {
    cluster.server.stop();
    std::fs::write(cluster.server.definitions_dir().join("00.yaml"), definition).unwrap();
    cluster.server.spawn(&[]);
}

#[test]
fn served_definitions_are_read_through_the_aggregator_as_rbac_allows() {
    let cluster = TestCluster::start(&[&crontab(&[("v1", true, true, false, None)])]);
    cluster.grant("sam", &["get", "list", "watch", "delete"], "crd-apiserver.io", &["serveddefinitions"], None);
    let sam = cluster.user("sam", &[]);
    let dave = cluster.user("dave", &[]);

    let status = settled_status(&cluster, &sam, &["v1"]);
    let table = rows(&cluster.kubectl_ok(&sam, &["get", "serveddefinitions"]));
    assert_eq!(table[0], ["NAME", "ESTABLISHED", "NAMES ACCEPTED", "STORAGE", "MIGRATION", "LAST ERROR", "AGE"]);
    // No error: that cell is blank.
    assert_eq!(table[1][..5], ["crontabs.stable.example.com", "True", "True", "v1", "Done"]);
    assert_eq!(table[1].len(), 6, "{table:?}");
    assert_eq!(table.len(), 2, "the server's own resource has no status object: {table:?}");
    // The short name, as discovery gives it.
    assert_eq!(rows(&cluster.kubectl_ok(&sam, &["get", "sdef", "--no-headers"]))[0][0], "crontabs.stable.example.com");

    let conditions: Vec<(&str, &str, &str, &str)> = status["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
                c["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        conditions,
        [
            ("NamesAccepted", "True", "NoConflicts", "no conflicts found"),
            ("Established", "True", "InitialNamesAccepted", "the initial names have been accepted")
        ]
    );
    assert_eq!(
        status["status"]["acceptedNames"],
        json!({"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"]})
    );
    assert_eq!(status["spec"]["versions"][0]["name"], "v1");
    assert_eq!(status["spec"]["conversion"], json!({"strategy": "None"}));

    let denied = cluster.kubectl(&dave, &["get", "serveddefinitions"]);
    assert_eq!(
        stderr(&denied).trim(),
        "Error from server (Forbidden): serveddefinitions.crd-apiserver.io is forbidden: User \"dave\" cannot list \
         resource \"serveddefinitions\" in API group \"crd-apiserver.io\" at the cluster scope"
    );
    let refused = cluster.kubectl(&sam, &["delete", "serveddefinitions", "crontabs.stable.example.com"]);
    assert_eq!(
        stderr(&refused).trim(),
        "Error from server (MethodNotAllowed): the server does not allow this method on the requested resource"
    );
    // Discovery says what it allows.
    let discovery: Value =
        serde_json::from_str(&cluster.kubectl_ok(&sam, &["get", "--raw", "/apis/crd-apiserver.io/v1alpha1"])).unwrap();
    assert_eq!(discovery["resources"][0]["verbs"], json!(["get", "list", "watch"]));
    let explained = cluster.kubectl_ok(&sam, &["explain", "serveddefinitions"]);
    assert!(explained.contains("KIND:       ServedDefinition"), "{explained}");
}

/// Strips what differs between two reads of one object in two versions by design.
fn without(mut object: Value, fields: &[&str]) -> Value {
    for field in fields {
        object.as_object_mut().unwrap().remove(*field);
    }
    object["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    object
}

#[test]
fn the_seeds_walkthrough_then_the_built_in_migration_and_removing_the_old_version() {
    let v1beta1_only = crontab(&[("v1beta1", true, true, false, None)]);
    let mut cluster = TestCluster::start(&[&v1beta1_only]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    let carol = cluster.user("carol", &[]);

    // 1. The storage version is v1beta1; an object is created and stored in it.
    cluster.kubectl_stdin_ok(&carol, &["apply", "-f", "-"], &my_crontab("v1beta1", "first"));
    let status = settled_status(&cluster, &carol, &["v1beta1"]);
    assert_eq!(status["status"]["storageVersion"], "v1beta1");

    // 2. v1 is added, as the storage version (identical schemas); v1beta1 stays served.
    let both = crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]);
    restart_with(&mut cluster, &both);
    cluster.plane.register("stable.example.com", "v1");
    // storedVersions holds both until no object is left in v1beta1, as the log says.
    let started = |log: &str| {
        log.lines().any(|l| {
            l.contains("storage-version migration: rewriting")
                && l.contains(r#"storedVersions="[\"v1beta1\", \"v1\"]""#)
        })
    };
    eventually("the migration's start in the log", || started(&cluster.server.log()).then_some(()));

    // 3. Read in v1beta1, then in v1: identical but for apiVersion.
    let read = |version: &str, name: &str| -> Value {
        let resource = format!("crontabs.{version}.stable.example.com");
        serde_json::from_str(&cluster.kubectl_ok(&carol, &["get", &resource, name, "-o", "json"])).unwrap()
    };
    let (in_v1beta1, in_v1) = (read("v1beta1", "first"), read("v1", "first"));
    assert_eq!(in_v1beta1["apiVersion"], "stable.example.com/v1beta1");
    assert_eq!(in_v1["apiVersion"], "stable.example.com/v1");
    assert_eq!(without(in_v1beta1.clone(), &["apiVersion"]), without(in_v1.clone(), &["apiVersion"]));

    // 4. A new object is stored in v1.
    cluster.kubectl_stdin_ok(&carol, &["apply", "-f", "-"], &my_crontab("v1", "second"));
    // 5. The first object is updated: it is written in v1.
    cluster.kubectl_ok(&carol, &["label", "crontab", "first", "step=5"]);

    // The built-in migration leaves nothing in v1beta1, and v1beta1 leaves storedVersions.
    let status = settled_status(&cluster, &carol, &["v1"]);
    assert!(status["status"]["migration"]["migratedObjects"].as_u64().unwrap() <= 1, "{status}");
    let table = rows(&cluster.kubectl_ok(&carol, &["get", "sdef", "--no-headers"]));
    assert_eq!(table[0][1..5], ["True", "True", "v1", "Done"]);
    // Reading the migrated object again shows the same content (generation and managed fields
    // included), in both versions.
    let after = read("v1", "first");
    assert_eq!(after["metadata"]["generation"], in_v1["metadata"]["generation"]);
    assert_eq!(after["metadata"]["labels"], json!({"step": "5"}));
    assert_eq!(without(after.clone(), &[]).pointer("/spec"), without(read("v1beta1", "first"), &[]).pointer("/spec"));

    // Only now may v1beta1 leave the file; the objects are served as before.
    restart_with(&mut cluster, &crontab(&[("v1", true, true, false, None)]));
    let names = rows(&cluster.kubectl_ok(&carol, &["get", "crontabs", "--no-headers"]));
    assert_eq!(names.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["first", "second"]);
    let status = settled_status(&cluster, &carol, &["v1"]);
    assert_eq!(status["status"]["objectsPerVersion"], json!({"v1": 2}));
}

#[test]
fn every_version_behaviour_of_the_seeds_with_kubectl() {
    let definition = crontab(&[
        (
            "v1alpha1",
            true,
            false,
            true,
            Some("example.com/v1alpha1 CronTab is deprecated; see http://example.com/v1alpha1-v1"),
        ),
        ("v1beta1", true, false, true, None),
        ("v1", true, true, false, None),
        ("v2", false, false, false, None),
    ]);
    let cluster = TestCluster::start(&[&definition]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    let carol = cluster.user("carol", &[]);
    cluster.kubectl_stdin_ok(&carol, &["apply", "-f", "-"], &my_crontab("v1", "cron"));

    // Discovery lists the served versions by priority, v1 preferred; v2 is not served.
    let group: Value =
        serde_json::from_str(&cluster.kubectl_ok(&carol, &["get", "--raw", "/apis/stable.example.com"])).unwrap();
    let versions: Vec<&str> =
        group["versions"].as_array().unwrap().iter().map(|v| v["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["v1", "v1beta1", "v1alpha1"]);
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let api_versions = cluster.kubectl_ok(&carol, &["api-versions"]);
    assert!(api_versions.lines().any(|l| l == "stable.example.com/v1beta1"), "{api_versions}");
    assert!(!api_versions.lines().any(|l| l == "stable.example.com/v2"), "{api_versions}");
    // kubectl get without a version reads the preferred one, and warns of nothing.
    let plain = cluster.kubectl(&carol, &["get", "crontabs", "cron", "-o", "jsonpath={.apiVersion}"]);
    assert_eq!(stdout(&plain), "stable.example.com/v1");
    assert!(!stderr(&plain).contains("Warning"), "{}", stderr(&plain));

    // A deprecated version with its own warning, and one with Kubernetes' default text.
    let alpha = cluster.kubectl(&carol, &["get", "crontabs.v1alpha1.stable.example.com", "cron"]);
    assert!(alpha.status.success(), "{}", stderr(&alpha));
    assert_eq!(
        stderr(&alpha).trim(),
        "Warning: example.com/v1alpha1 CronTab is deprecated; see http://example.com/v1alpha1-v1"
    );
    let beta = cluster.kubectl(&carol, &["get", "crontabs.v1beta1.stable.example.com", "cron", "-o", "name"]);
    assert_eq!(stdout(&beta).trim(), "crontab.stable.example.com/cron");
    assert_eq!(
        stderr(&beta).trim(),
        "Warning: stable.example.com/v1beta1 CronTab is deprecated; use stable.example.com/v1 CronTab"
    );

    // served: false — the version's paths are not found; the object stays readable elsewhere.
    let unserved =
        cluster.kubectl(&carol, &["get", "--raw", "/apis/stable.example.com/v2/namespaces/default/crontabs/cron"]);
    assert_eq!(
        stderr(&unserved).trim(),
        "Error from server (NotFound): the server could not find the requested resource"
    );
    let by_resource = cluster.kubectl(&carol, &["get", "crontabs.v2.stable.example.com"]);
    assert!(!by_resource.status.success());
    assert!(stderr(&by_resource).contains("the server doesn't have a resource type"), "{}", stderr(&by_resource));
}

/// Creates `count` CronTabs named `c0000`... in `version`, on a few threads, through the double.
fn create_many(client: &support::http::Client, version: &str, count: usize) {
    let path = format!("/apis/stable.example.com/{version}/namespaces/default/crontabs");
    std::thread::scope(|scope| {
        for worker in 0..8 {
            let (client, path) = (client.clone(), path.clone());
            scope.spawn(move || {
                for i in (worker..count).step_by(8) {
                    let object = json!({"apiVersion": format!("stable.example.com/{version}"), "kind": "CronTab",
                        "metadata": {"name": format!("c{i:04}")}, "spec": {"cronSpec": "* * * * */5", "image": "original"}});
                    let response = client.send_json("POST", &path, &object);
                    assert_eq!(response.status, 201, "{}", response.text());
                }
            });
        }
    });
}

/// The migration's progress as the status resource shows it.
fn migration(client: &support::http::Client) -> Value {
    let response = client.get("/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com");
    response.ok().filter(|r| r.status == 200).map(|r| r.json()["status"].clone()).unwrap_or(Value::Null)
}

#[test]
fn a_migration_killed_halfway_resumes_and_every_concurrent_write_wins() {
    const OBJECTS: usize = 1500;
    let mut cluster = TestCluster::start(&[&crontab(&[("v1beta1", true, true, false, None)])]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.user("carol", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    create_many(&client, "v1beta1", OBJECTS);

    // v1 becomes the storage version; the migration is slowed down so that it can be killed.
    cluster.server.stop();
    let both = crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]);
    std::fs::write(cluster.server.definitions_dir().join("00.yaml"), &both).unwrap();
    cluster.server.spawn(&["--storage-migration-rate=400"]);
    cluster.plane.register("stable.example.com", "v1");

    // A user keeps writing the first objects (in v1beta1, as an old client would) meanwhile.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let acknowledged = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            // Per object: the round of the last acknowledged write, and of the last attempted.
            let mut rounds = std::collections::BTreeMap::new();
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                round += 1;
                for i in 0..20 {
                    let path = format!("/apis/stable.example.com/v1beta1/namespaces/default/crontabs/c{i:04}");
                    let patch = json!({"spec": {"image": format!("user-{round}")}});
                    let sent = client.send(
                        "PATCH",
                        &path,
                        "application/merge-patch+json",
                        serde_json::to_vec(&patch).unwrap(),
                    );
                    let entry = rounds.entry(i).or_insert((0, 0));
                    entry.1 = round;
                    // A write cut short by the kill may or may not have happened; answers count.
                    if let Ok(response) = sent
                        && response.status == 200
                    {
                        entry.0 = round;
                    }
                }
            }
            rounds
        });
        // Kill -9 once part of the objects, not all, were rewritten.
        let migrated = eventually("the migration to be under way", || {
            let n = migration(&client)["migration"]["migratedObjects"].as_u64()?;
            (n >= 300).then_some(n)
        });
        assert!(migrated < OBJECTS as u64, "the migration ended before the kill: {migrated}");
        cluster.server.kill();
        cluster.server.spawn(&[]);
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        writer.join().unwrap()
    });

    // The pass resumed where the killed server left it, and ended with v1beta1 dropped.
    let status = eventually("the migration to be done", || {
        let status = migration(&client);
        (status["migration"]["state"] == "Done" && status["storedVersions"] == json!(["v1"])).then_some(status)
    });
    assert_eq!(status["objectsPerVersion"], json!({"v1": OBJECTS}));
    let log = cluster.server.log();
    assert!(log.contains("storage-version migration: resuming after"), "{log}");
    // Every acknowledged user write is there: the migrator never overwrote one.
    assert!(acknowledged.values().any(|(acked, _)| *acked > 0));
    for (i, (acked, attempted)) in &acknowledged {
        let path = format!("/apis/stable.example.com/v1/namespaces/default/crontabs/c{i:04}");
        let object = client.get(&path).unwrap().json();
        let image = object["spec"]["image"].as_str().unwrap();
        let round: u64 = image.strip_prefix("user-").map_or(0, |r| r.parse().unwrap());
        assert!(*acked <= round && round <= *attempted, "c{i:04}: {image}, acknowledged round {acked}");
    }
    let list = client.get("/apis/stable.example.com/v1beta1/namespaces/default/crontabs").unwrap().json();
    assert_eq!(list["items"].as_array().unwrap().len(), OBJECTS);
}

#[test]
fn objects_rewritten_by_a_migration_reach_watchers_as_modified_events() {
    const OBJECTS: usize = 300;
    let cluster = TestCluster::start_with(
        &[&crontab(&[("v1beta1", true, true, false, None)])],
        &["--storage-migration-rate=200"],
    );
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.user("carol", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    create_many(&client, "v1beta1", OBJECTS);

    // Live, v1 becomes the storage version: the migration rewrites every object.
    replace(
        &cluster.server.definitions_dir().join("00.yaml"),
        &crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]),
    );
    cluster.plane.register("stable.example.com", "v1");
    let collection = "/apis/stable.example.com/v1/namespaces/default/crontabs";
    eventually("v1 served", || (client.get(collection).ok()?.status == 200).then_some(()));
    let by_name = |list: &Value| -> std::collections::BTreeMap<String, Value> {
        let items = list["items"].as_array().unwrap();
        items.iter().map(|o| (o["metadata"]["name"].as_str().unwrap().to_string(), o.clone())).collect()
    };
    let listed = client.get(collection).unwrap().json();
    let before = by_name(&listed);
    assert_eq!(before.len(), OBJECTS);
    let from = listed["metadata"]["resourceVersion"].as_str().unwrap();
    // Watched from the list until well after the migration ended.
    let watch = std::thread::scope(|scope| {
        let watching =
            scope.spawn(|| client.get(&format!("{collection}?watch=1&resourceVersion={from}&timeoutSeconds=20")));
        eventually("the migration to be done", || (migration(&client)["migration"]["state"] == "Done").then_some(()));
        watching.join().unwrap().unwrap()
    });
    assert_eq!(watch.status, 200);
    let after = by_name(&client.get(collection).unwrap().json());

    // Every object the migration rewrote after the list came as one MODIFIED event, with its
    // new resourceVersion and nothing else changed; no other event came.
    let mut events = std::collections::BTreeMap::new();
    for line in watch.text().lines().filter(|l| !l.trim().is_empty()) {
        let event: Value = serde_json::from_str(line).unwrap();
        assert_eq!(event["type"], "MODIFIED", "{event}");
        let object = &event["object"];
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        assert!(events.insert(name.clone(), object.clone()).is_none(), "{name} rewritten twice");
    }
    let rewritten: Vec<&String> = after
        .iter()
        .filter(|(name, o)| o["metadata"]["resourceVersion"] != before[*name]["metadata"]["resourceVersion"])
        .map(|(name, _)| name)
        .collect();
    assert!(!rewritten.is_empty(), "nothing was left to migrate when the watch began");
    assert_eq!(events.keys().collect::<Vec<_>>(), rewritten);
    for (name, object) in &events {
        assert_eq!(object, &after[name], "the event shows the object as it is now");
        assert_eq!(
            without(object.clone(), &[]),
            without(before[name].clone(), &[]),
            "only the resourceVersion changed"
        );
    }
}

/// Replaces a file at once, as editors do: written beside it, renamed over it.
fn replace(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

#[test]
fn removing_an_old_version_is_refused_until_the_migration_took_it_out_of_stored_versions() {
    const OBJECTS: usize = 1200;
    // Slow enough that the file is edited again long before the migration ends.
    let cluster = TestCluster::start_with(
        &[&crontab(&[("v1beta1", true, true, false, None)])],
        &["--storage-migration-rate=200"],
    );
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    let carol = cluster.user("carol", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    create_many(&client, "v1beta1", OBJECTS);
    let file = cluster.server.definitions_dir().join("00.yaml");
    let served = |version: &str| {
        let path = format!("/apis/stable.example.com/{version}/namespaces/default/crontabs/c0000");
        client.get(&path).unwrap().status
    };

    // Live, without a restart: v1 becomes the storage version...
    replace(&file, &crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]));
    cluster.plane.register("stable.example.com", "v1");
    eventually("v1 served", || (served("v1") == 200).then_some(()));
    // ...and at once v1beta1 is dropped from the file: refused while objects may be in it.
    replace(&file, &crontab(&[("v1", true, true, false, None)]));
    let refusal = format!(
        "{}: CustomResourceDefinition \"crontabs.stable.example.com\" is invalid: status.storedVersions[0]: \
         Invalid value: \"v1beta1\": missing from spec.versions; v1beta1 was previously a storage version, and \
         must remain in spec.versions until a storage migration ensures no data remains persisted in v1beta1 \
         and removes v1beta1 from status.storedVersions",
        file.display()
    );
    let shown = eventually("the refusal in the status", || {
        let out = cluster.kubectl(
            &carol,
            &["get", "sdef", "crontabs.stable.example.com", "-o", "jsonpath={.status.lastReloadError}"],
        );
        let text = stdout(&out);
        (!text.is_empty()).then_some(text)
    });
    assert_eq!(shown, refusal);
    let status = migration(&client);
    assert_eq!(status["storedVersions"], json!(["v1beta1", "v1"]), "{status}");
    assert_ne!(status["migration"]["state"], "Done", "the migration ended too soon for this test: {status}");
    let log = cluster.server.log();
    let logged = refusal.replace('"', "\\\"");
    assert!(log.contains(&logged), "{log}");
    assert!(log.contains("(the definition goes on being served as it was)"), "{log}");
    // The previous definition goes on being served: v1beta1 answers.
    assert_eq!(served("v1beta1"), 200);

    // Once the migration took v1beta1 out of storedVersions, the same file is served: no
    // second edit is needed.
    eventually("v1beta1 no longer served", || (served("v1beta1") == 404).then_some(()));
    let status = eventually("the status to settle", || {
        let status = migration(&client);
        (status["migration"]["state"] == "Done" && status.get("lastReloadError").is_none()).then_some(status)
    });
    assert_eq!(status["storedVersions"], json!(["v1"]));
    assert_eq!(status["objectsPerVersion"], json!({"v1": OBJECTS}));
    let log = cluster.server.log();
    assert!(
        log.lines().any(|l| l.contains("serving the changed definition") && l.contains("crontabs.stable.example.com")),
        "{log}"
    );
    let list = client.get("/apis/stable.example.com/v1/namespaces/default/crontabs").unwrap().json();
    assert_eq!(list["items"].as_array().unwrap().len(), OBJECTS);
    let definition = cluster
        .kubectl_ok(&carol, &["get", "sdef", "crontabs.stable.example.com", "-o", "jsonpath={.spec.versions[*].name}"]);
    assert_eq!(definition, "v1");
}

#[test]
fn migrate_storage_finishes_the_migration_on_a_stopped_servers_store() {
    const OBJECTS: usize = 40;
    let mut cluster = TestCluster::start(&[&crontab(&[("v1beta1", true, true, false, None)])]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.user("carol", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    create_many(&client, "v1beta1", OBJECTS);
    cluster.server.stop();
    let both = crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]);
    let definitions = cluster.server.definitions_dir();
    std::fs::write(definitions.join("00.yaml"), &both).unwrap();

    let out = std::process::Command::new(support::binary())
        .args(["migrate-storage", "--storage", cluster.server.data_dir().to_str().unwrap()])
        .args(["--definitions", definitions.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let printed = stdout(&out);
    assert_eq!(printed.lines().last(), Some("crontabs.stable.example.com: done; storedVersions [\"v1\"]"), "{printed}");
    assert!(printed.contains(&format!("crontabs.stable.example.com: {OBJECTS} objects migrated")), "{printed}");

    // The server started on that store has nothing left to do, and says so.
    cluster.server.spawn(&[]);
    cluster.plane.register("stable.example.com", "v1");
    // Until the new process rewrites it, the status object is the one the first wrote (Done,
    // storedVersions [v1beta1]): wait for the new one.
    let status = eventually("the status of the restarted server", || {
        let status = migration(&client);
        (status["migration"]["state"] == "Done" && status["storedVersions"] == json!(["v1"])).then_some(status)
    });
    assert_eq!(status["objectsPerVersion"], json!({"v1": OBJECTS}));
    assert!(!cluster.server.log().contains("storage-version migration: rewriting"));
}

const MIGRATE: &str = "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/crontabs.stable.example.com/migrate";

#[test]
fn a_migration_is_asked_for_through_the_migrate_subresource_as_rbac_allows() {
    const OBJECTS: usize = 5;
    let mut cluster = TestCluster::start(&[&crontab(&[("v1beta1", true, true, false, None)])]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["get", "list", "watch"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.grant("olga", &["get"], "crd-apiserver.io", &["serveddefinitions"], None);
    cluster.grant("olga", &["create"], "crd-apiserver.io", &["serveddefinitions/migrate"], None);
    let carol = cluster.user("carol", &[]);
    let olga = cluster.user("olga", &[]);
    let dave = cluster.user("dave", &[]);
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    create_many(&client, "v1beta1", OBJECTS);
    restart_with(&mut cluster, &crontab(&[("v1beta1", true, false, false, None), ("v1", true, true, false, None)]));
    cluster.plane.register("stable.example.com", "v1");
    // The storage version's own migration rewrote every object.
    let status = settled_status(&cluster, &carol, &["v1"]);
    assert_eq!(status["status"]["migration"]["migratedObjects"], OBJECTS);

    let ask =
        |user: &Path, path: &str, body: &str| cluster.kubectl_stdin(user, &["create", "--raw", path, "-f", "-"], body);
    // A dry run says what would happen and does nothing.
    let out = ask(&olga, &format!("{MIGRATE}?dryRun=All"), "{}");
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(answer["message"], "storage-version migration of crontabs.stable.example.com into v1 would start");
    assert_eq!(settled_status(&cluster, &carol, &["v1"])["status"]["migration"]["migratedObjects"], OBJECTS);

    let out = ask(&olga, MIGRATE, "{}");
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (answer["kind"].as_str(), answer["status"].as_str(), answer["code"].as_u64()),
        (Some("Status"), Some("Success"), Some(202))
    );
    assert_eq!(answer["message"], "storage-version migration of crontabs.stable.example.com into v1 started");
    // The requested pass found every object in the storage version already: none rewritten.
    let status = eventually("the requested pass", || {
        let status = settled_status(&cluster, &carol, &["v1"]);
        (status["status"]["migration"]["migratedObjects"] == 0).then_some(status)
    });
    assert_eq!(status["status"]["objectsPerVersion"], json!({"v1": OBJECTS}));
    assert!(cluster.server.log().contains("storage-version migration requested"));

    // RBAC decides, by SubjectAccessReview, on the subresource.
    let denied = ask(&dave, MIGRATE, "{}");
    assert!(!denied.status.success());
    assert!(
        stderr(&denied).contains(
            "User \"dave\" cannot create resource \"serveddefinitions/migrate\" in API group \"crd-apiserver.io\""
        ),
        "{}",
        stderr(&denied)
    );
    let denied = ask(&carol, MIGRATE, "{}");
    assert!(stderr(&denied).contains("(Forbidden)"), "{}", stderr(&denied));
    // Bad input is a 4xx Status.
    let unknown = ask(&olga, "/apis/crd-apiserver.io/v1alpha1/serveddefinitions/nothing.example.com/migrate", "{}");
    assert_eq!(
        stderr(&unknown).trim(),
        "Error from server (NotFound): serveddefinitions.crd-apiserver.io \"nothing.example.com\" not found"
    );
    let not_an_object = ask(&olga, MIGRATE, "[1]");
    assert!(stderr(&not_an_object).contains("(BadRequest)"), "{}", stderr(&not_an_object));
    let bad_dry_run = ask(&olga, &format!("{MIGRATE}?dryRun=Some"), "{}");
    assert!(stderr(&bad_dry_run).contains("Invalid dryRun value"), "{}", stderr(&bad_dry_run));
}

/// A cluster-scoped definition of its own group, beside the CronTab.
const GADGET: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "gadgets.gadgets.example.com"},
  "spec": {"group": "gadgets.example.com", "scope": "Cluster",
    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#;
const GADGETS: &str = "/apis/gadgets.example.com/v1/gadgets";

/// `crd-apiserver delete-objects NAME --server ...` as the user whose token is `token`.
fn delete_through_server(cluster: &TestCluster, token: &str, name: &str, extra: &[&str]) -> (Option<i32>, String) {
    let token_file = cluster.server.dir.path().join(format!("{token}.txt"));
    std::fs::write(&token_file, token).unwrap();
    let out = std::process::Command::new(support::binary())
        .args(["delete-objects", name, "--server", &format!("https://127.0.0.1:{}", cluster.server.port)])
        .args(["--certificate-authority", cluster.server.pki.serving_ca().to_str().unwrap()])
        .args(["--token-file", token_file.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    (out.status.code(), format!("{}{}", stdout(&out), stderr(&out)))
}

#[test]
fn a_removed_definitions_objects_are_deleted_through_the_running_server_as_rbac_allows() {
    let cluster = TestCluster::start(&[&crontab(&[("v1", true, true, false, None)]), GADGET]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.grant("carol", &["*"], "gadgets.example.com", &["*"], None);
    cluster.user("carol", &[]);
    cluster.user("ops", &[]);
    cluster.user("dave", &[]);
    cluster.plane.add_rule(support::control_plane::rbac::Rule::paths(
        "ops-binding",
        vec![support::control_plane::rbac::Subject::User("ops".into())],
        &["post"],
        &["/delete-objects"],
    ));
    let client = support::http::Client::to_plane(&cluster.plane, "carol-token");
    for name in ["g1", "g2", "g3"] {
        let gadget = json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget", "metadata": {"name": name}});
        assert_eq!(client.send_json("POST", GADGETS, &gadget).status, 201);
    }
    create_many(&client, "v1", 2);

    // Still served: refused, nothing deleted.
    let (code, text) = delete_through_server(&cluster, "ops-token", "gadgets.gadgets.example.com", &["--confirm"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "the server answered 409 Conflict: gadgets.gadgets.example.com is served: remove it from the definitions"
        ),
        "{text}"
    );
    let gadget_file = cluster.server.definitions_dir().join("01.yaml");
    std::fs::remove_file(&gadget_file).unwrap();
    eventually("gadgets no longer served", || (client.get(GADGETS).unwrap().status == 404).then_some(()));

    // Not allowed by RBAC: refused by SubjectAccessReview.
    let (code, text) = delete_through_server(&cluster, "dave-token", "gadgets.gadgets.example.com", &["--confirm"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("403 Forbidden"), "{text}");
    // Bad input.
    let (code, text) = delete_through_server(&cluster, "ops-token", "gadgets", &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("400 Bad Request: name: \"gadgets\" is not a definition name"), "{text}");
    // A name the store knows nothing of (mistyped): said, and a failure.
    let (code, text) = delete_through_server(&cluster, "ops-token", "gadget.gadgets.example.com", &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "404 Not Found: no definition named gadget.gadgets.example.com is known here: the store holds no object \
             and no record of it"
        ),
        "{text}"
    );
    // Counted without --confirm, deleted with it.
    let (code, text) = delete_through_server(&cluster, "ops-token", "gadgets.gadgets.example.com", &[]);
    assert_eq!(
        (code, text.trim()),
        (Some(0), "3 objects of gadgets.gadgets.example.com would be deleted; add --confirm to delete them")
    );
    let (code, text) = delete_through_server(&cluster, "ops-token", "gadgets.gadgets.example.com", &["--confirm"]);
    assert_eq!((code, text.trim()), (Some(0), "deleted 3 objects of gadgets.gadgets.example.com"));
    assert!(cluster.server.log().contains("deleted the objects of a definition no longer served"));

    // Served again, the definition has no objects; the CronTabs were not touched.
    std::fs::write(&gadget_file, GADGET).unwrap();
    let items = eventually("gadgets served again", || {
        let response = client.get(GADGETS).ok().filter(|r| r.status == 200)?;
        Some(response.json()["items"].clone())
    });
    assert_eq!(items, json!([]));
    let crontabs = client.get("/apis/stable.example.com/v1/namespaces/default/crontabs").unwrap().json();
    assert_eq!(crontabs["items"].as_array().map(Vec::len), Some(2));
}
