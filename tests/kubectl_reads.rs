//! Reading through kube-aggregator with real kubectl, as a user authorized by
//! SubjectAccessReview: tables (wide, YAML, pages), categories (`get all`), label and field
//! selectors on the seeds' Shirts, `explain` from the aggregated OpenAPI, `get -w` and `wait`
//! seeing changes, the garbage collector's metadata-only list and watch, and older and newer
//! kubectl releases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::time::Duration;

use serde_json::Value;
use support::control_plane::rbac::User;
use support::http::Client;
use support::kubectl::{Kubectl, MY_CRONTAB, SHIRTS, release, rows, setup};
use support::{stderr, table};

#[test]
fn tables_yaml_categories_and_selectors() {
    let setup = setup().seeded();
    let carol = &setup.carol;

    let crontabs = rows(&carol.ok(&["get", "crontabs"]));
    assert_eq!(crontabs[0], ["NAME", "SPEC", "REPLICAS", "AGE"]);
    assert_eq!(crontabs[1][..3], ["my-new-cron-object", "* * * * */5", "3"]);
    assert!(crontabs[1][3].ends_with('s'), "an age in seconds: {:?}", crontabs[1]);
    let wide = rows(&carol.ok(&["get", "ct", "-o", "wide"]));
    assert_eq!(wide[0], ["NAME", "SPEC", "REPLICAS", "AGE", "IMAGE"]);
    assert_eq!(wide[1][4], "my-awesome-cron-image");

    let yaml = carol.ok(&["get", "crontab", "my-new-cron-object", "-o", "yaml"]);
    for line in [
        "apiVersion: stable.example.com/v1",
        "kind: CronTab",
        "  name: my-new-cron-object",
        "  namespace: default",
        "  generation: 1",
        "  cronSpec: '* * * * */5'",
        "  image: my-awesome-cron-image",
        "  replicas: 3",
    ] {
        assert!(yaml.lines().any(|l| l == line), "no line {line:?} in\n{yaml}");
    }
    assert!(!yaml.contains("managedFields"), "kubectl hides managedFields:\n{yaml}");

    // The seeds' categories example: `kubectl get all` lists the CronTab and nothing else
    // (shirts are in no category; kubectl names kinds only when several are listed).
    let all = rows(&carol.ok(&["get", "all"]));
    assert_eq!(all[0], ["NAME", "SPEC", "REPLICAS", "AGE"]);
    assert_eq!(all[1][..3], ["my-new-cron-object", "* * * * */5", "3"]);
    assert_eq!(all.len(), 2, "{all:?}");
    let named = carol.ok(&["get", "all", "-o", "name"]);
    assert_eq!(named.trim(), "crontab.stable.example.com/my-new-cron-object");

    // The seeds' field selector example.
    let shirts = rows(&carol.ok(&["get", "shirts.stable.example.com"]));
    assert_eq!(
        shirts,
        [["NAME", "COLOR", "SIZE"], ["example1", "blue", "S"], ["example2", "blue", "M"], ["example3", "green", "M"]]
    );
    let blue = rows(&carol.ok(&["get", "shirts.stable.example.com", "--field-selector", "spec.color=blue"]));
    assert_eq!(blue, [["NAME", "COLOR", "SIZE"], ["example1", "blue", "S"], ["example2", "blue", "M"]]);
    let green_m =
        rows(&carol.ok(&["get", "shirts.stable.example.com", "--field-selector", "spec.color=green,spec.size=M"]));
    assert_eq!(green_m, [["NAME", "COLOR", "SIZE"], ["example3", "green", "M"]]);
    // Pages, as kubectl asks for them with --chunk-size.
    let paged = rows(&carol.ok(&["get", "shirts", "--chunk-size=1", "--no-headers"]));
    assert_eq!(paged.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["example1", "example2", "example3"]);
    let not_blue = rows(&carol.ok(&["get", "shirts", "--field-selector", "spec.color!=blue", "--no-headers"]));
    assert_eq!(not_blue, [["example3", "green", "M"]]);
    assert_eq!(
        carol.fails(&["get", "shirts", "--field-selector", "spec.fabric=cotton"]),
        "Error from server (BadRequest): Unable to find \"stable.example.com/v1, Resource=shirts\" that match label \
         selector \"\", field selector \"spec.fabric=cotton\": field label not supported: spec.fabric"
    );
    let none = carol.out(&["get", "shirts", "--field-selector", "metadata.name=example9"]);
    assert_eq!(stderr(&none).trim(), "No resources found in default namespace.");

    // Label selectors, full syntax.
    carol.ok(&["label", "shirts", "example1", "example2", "season=summer"]);
    carol.ok(&["label", "shirt", "example3", "season=winter", "sale=true"]);
    let names = |selector: &str| -> Vec<String> {
        table(&carol.ok(&["get", "shirts", "-l", selector, "--no-headers"])).into_iter().map(|r| r[0].clone()).collect()
    };
    assert_eq!(names("season=summer"), ["example1", "example2"]);
    assert_eq!(names("season in (winter),sale"), ["example3"]);
    assert_eq!(names("season notin (winter)"), ["example1", "example2"]);
    assert_eq!(names("!sale"), ["example1", "example2"]);
    assert_eq!(names("season!=summer"), ["example3"]);
    // The empty set is the empty value: nothing has season="", so every shirt matches.
    assert_eq!(names("season notin ()"), ["example1", "example2", "example3"]);
    // kubectl wraps a selector's refusal in its "Unable to find" sentence.
    let refused = |selector: &str, why: &str| {
        assert_eq!(
            carol.fails(&["get", "shirts", "-l", selector]),
            format!(
                "Error from server (BadRequest): Unable to find \"stable.example.com/v1, Resource=shirts\" that match \
                 label selector \"{selector}\", field selector \"\": {why}"
            )
        );
    };
    refused("season in summer", "unable to parse requirement: found 'summer' expected: '('");
    refused("season=summer,", "found '', expected: identifier after ','");
    setup.assert_reviewed();
}

#[test]
fn explain_reads_the_aggregated_openapi() {
    let setup = setup();
    let carol = &setup.carol;
    let explained = carol.ok(&["explain", "crontab"]);
    for expected in [
        "GROUP:      stable.example.com",
        "KIND:       CronTab",
        "VERSION:    v1",
        "    A job run on a cron schedule.",
        "  metadata\t<ObjectMeta>",
        "  spec\t<Object>",
        "    When and what to run.",
        "  status\t<Object>",
    ] {
        assert!(explained.lines().any(|l| l == expected), "no line {expected:?} in\n{explained}");
    }
    let field = carol.ok(&["explain", "crontab.spec.replicas"]);
    assert!(field.contains("FIELD: replicas <integer>"), "{field}");
    assert!(field.contains("    How many jobs run at once."), "{field}");
    // The documents kubectl read came through the double: its merged index names them.
    let index: Value = serde_json::from_str(&carol.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    let url = index["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"].as_str().unwrap();
    assert!(url.starts_with("/openapi/v3/apis/stable.example.com/v1?hash="), "{url}");
    // kube-aggregator proxies the document kubectl asked for as kubectl's user, hash and all.
    let proxied = setup.cluster.plane.proxied_headers();
    let fetched = proxied
        .iter()
        .find(|h| h.iter().any(|(k, v)| k == "x-forwarded-uri" && v.starts_with(url)))
        .expect("the document was proxied");
    assert!(fetched.iter().any(|(k, v)| k == "x-remote-user" && v == "carol"), "{fetched:?}");
    assert_eq!(carol.fails(&["explain", "crontab.spec.schedule"]), "error: field \"schedule\" does not exist");
}

#[test]
fn get_watch_receives_changes_and_wait_sees_a_scale() {
    let setup = setup().seeded();
    let carol = &setup.carol;

    let mut watch = carol.stream(&["get", "shirts", "-w"]);
    watch.expect("the header", |l| l.starts_with("NAME"));
    watch.expect("example3 as it is", |l| l.starts_with("example3 ") && l.contains("green"));
    // Selected watches: an object that leaves the selection is DELETED with the content it
    // had while selected, as kube-apiserver sends it.
    let green = ["get", "shirts", "--field-selector", "spec.color=green", "-w", "--output-watch-events"];
    let mut green = carol.stream(&green);
    green.expect("example3 selected", |l| l.starts_with("ADDED ") && l.contains("example3"));
    carol.ok(&["patch", "shirt", "example3", "--type=merge", "-p", r#"{"spec":{"color":"red"}}"#]);
    let changed = watch.expect("example3 changed", |l| l.starts_with("example3 ") && l.contains("red"));
    assert_eq!(table(&changed), [["example3", "red", "M"]]);
    let left = green.expect("example3 leaving", |l| l.starts_with("DELETED "));
    assert_eq!(table(&left), [["DELETED", "example3", "green", "M"]]);
    drop(green);
    carol.ok(&["label", "shirt", "example2", "watch=yes"]);
    let mut labelled =
        carol.stream(&["get", "shirts", "-l", "watch=yes", "-L", "watch", "-w", "--output-watch-events"]);
    labelled.expect("example2 selected", |l| l.starts_with("ADDED ") && l.contains("example2"));
    carol.ok(&["label", "shirt", "example2", "watch=no", "--overwrite"]);
    let left = labelled.expect("example2 leaving", |l| l.starts_with("DELETED "));
    assert_eq!(table(&left), [["DELETED", "example2", "blue", "M", "yes"]]);
    drop(labelled);
    carol.ok_stdin(&["apply", "-f", "-"], &SHIRTS.replace("example1", "example4").replace("size: S", "size: XL"));
    watch.expect("the new shirt", |l| l.starts_with("example4 ") && l.contains("XL"));
    drop(watch);

    // Watch events of one object, by name.
    let mut events =
        carol.stream(&["get", "crontab", "my-new-cron-object", "-w", "--output-watch-events", "-o", "name"]);
    events.expect("the object", |l| l == "crontab.stable.example.com/my-new-cron-object");
    carol.ok(&["annotate", "crontab", "my-new-cron-object", "reviewed=yes"]);
    assert_eq!(events.expect("the change", |_| true), "crontab.stable.example.com/my-new-cron-object");
    drop(events);

    // `kubectl wait` until the scale shows.
    let mut wait =
        carol.stream(&["wait", "crontab/my-new-cron-object", "--for=jsonpath={.spec.replicas}=5", "--timeout=20s"]);
    assert_eq!(
        carol.ok(&["scale", "crontab", "my-new-cron-object", "--replicas=5"]).trim(),
        "crontab.stable.example.com/my-new-cron-object scaled"
    );
    assert_eq!(wait.expect("the condition", |_| true), "crontab.stable.example.com/my-new-cron-object condition met");
    let (status, _) = wait.finish();
    assert!(status.success());
    let out = carol.out(&["wait", "crontab/my-new-cron-object", "--for=jsonpath={.spec.replicas}=6", "--timeout=1s"]);
    assert!(!out.status.success());
    assert_eq!(stderr(&out).trim(), "error: timed out waiting for the condition on crontabs/my-new-cron-object");
}

/// What client-go's metadata client asks for (the garbage collector and the namespace
/// controller use it).
const METADATA_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

#[test]
fn the_garbage_collectors_metadata_list() {
    let setup = setup().seeded();
    setup.cluster.plane.add_user(
        "gc-token",
        User::new(
            "system:serviceaccount:kube-system:generic-garbage-collector",
            &["system:serviceaccounts", "system:serviceaccounts:kube-system"],
        ),
    );
    setup.cluster.grant(
        "system:serviceaccount:kube-system:generic-garbage-collector",
        &["get", "list", "watch", "patch", "update", "delete"],
        "*",
        &["*"],
        None,
    );
    let gc = Client::to_plane(&setup.cluster.plane, "gc-token").header("Accept", METADATA_ACCEPT);
    let list = gc.get("/apis/stable.example.com/v1/shirts?limit=500&resourceVersion=0").unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    // As kube-apiserver writes it: the media type without the transformation parameters.
    assert_eq!(list.headers["content-type"], "application/json");
    let list = list.json();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().is_ok());
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for item in items {
        assert_eq!(item["kind"], "PartialObjectMetadata");
        assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(item["metadata"]["namespace"], "default");
        assert!(item.get("spec").is_none(), "metadata only: {item}");
    }
    // The metadata informer's watch: events carry PartialObjectMetadata.
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watcher = Client::to_plane(&setup.cluster.plane, "gc-token")
        .header("Accept", &METADATA_ACCEPT.replace("PartialObjectMetadataList", "PartialObjectMetadata"));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let stream = runtime.block_on(watcher.raw_get(&format!(
        "/apis/stable.example.com/v1/shirts?allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=30&watch=true"
    )));
    setup.carol.ok(&["label", "shirt", "example2", "owner=nobody"]);
    let event = runtime.block_on(async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stream).lines();
        loop {
            let line =
                tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.unwrap().unwrap().unwrap();
            // Chunk sizes come between the events on an HTTP/1.1 stream.
            if let Ok(event @ Value::Object(_)) = serde_json::from_str::<Value>(&line) {
                break event;
            }
        }
    });
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(event["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(event["object"]["metadata"]["labels"], serde_json::json!({"owner": "nobody"}));
    assert!(event["object"].get("spec").is_none(), "{event}");

    // One object's metadata, and a deletion with the UID precondition the collector sends.
    let one = Client::to_plane(&setup.cluster.plane, "gc-token")
        .header("Accept", &METADATA_ACCEPT.replace("PartialObjectMetadataList", "PartialObjectMetadata"))
        .get("/apis/stable.example.com/v1/namespaces/default/shirts/example1")
        .unwrap()
        .json();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    let uid = one["metadata"]["uid"].as_str().unwrap();
    let gc = Client::to_plane(&setup.cluster.plane, "gc-token");
    let path = "/apis/stable.example.com/v1/namespaces/default/shirts/example1";
    let stale = gc
        .send(
            "DELETE",
            path,
            "application/json",
            r#"{"preconditions":{"uid":"0000"},"propagationPolicy":"Background"}"#,
        )
        .unwrap();
    assert_eq!(stale.status, 409, "{}", stale.text());
    assert_eq!(
        stale.json()["message"],
        format!(
            "Operation cannot be fulfilled on Shirt.stable.example.com \"example1\": the UID in the precondition \
             (0000) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let deleted = gc
        .send(
            "DELETE",
            path,
            "application/json",
            format!(r#"{{"preconditions":{{"uid":"{uid}"}},"propagationPolicy":"Background"}}"#),
        )
        .unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.text());
}

#[test]
fn older_and_newer_kubectl_releases() {
    let setup = setup();
    for version in ["1.27", "1.33"] {
        let kubectl = Kubectl::new(release(version), &setup.carol.kubeconfig, &setup.carol.home.join(version));
        let client = kubectl.ok(&["version", "--client", "-o", "json"]);
        assert!(client.contains(&format!("\"gitVersion\": \"v{version}.")), "{client}");
        let name = format!("skew-{}", version.replace('.', "-"));
        let object = MY_CRONTAB.replace("my-new-cron-object", &name);
        assert_eq!(
            kubectl.ok_stdin(&["apply", "-f", "-"], &object).trim(),
            format!("crontab.stable.example.com/{name} created"),
            "kubectl {version}"
        );
        // explain: kubectl 1.27 reads OpenAPI v2 in protobuf, 1.33 reads v3.
        let explained = kubectl.ok(&["explain", "crontab.spec.replicas"]);
        assert!(explained.contains("How many jobs run at once."), "kubectl {version}: {explained}");
        let listed = rows(&kubectl.ok(&["get", "crontabs", name.as_str()]));
        assert_eq!(listed[0], ["NAME", "SPEC", "REPLICAS", "AGE"], "kubectl {version}");
        assert_eq!(listed[1][..3], [name.as_str(), "* * * * */5", "3"], "kubectl {version}");

        let mut watch = kubectl.stream(&["get", "crontab", &name, "-w", "--no-headers"]);
        watch.expect("the object", |l| l.starts_with(&format!("{name} ")));
        assert_eq!(
            kubectl
                .ok_stdin(&["apply", "--server-side", "-f", "-"], &object.replace("replicas: 3", "replicas: 7"))
                .trim(),
            format!("crontab.stable.example.com/{name} serverside-applied"),
            "kubectl {version}"
        );
        let changed = watch.expect("the server-side apply", |l| l.starts_with(&format!("{name} ")));
        assert_eq!(rows(&changed)[0][..3], [name.as_str(), "* * * * */5", "7"], "kubectl {version}");
        drop(watch);
        let mut managers: Vec<String> =
            kubectl.json(&["get", "crontab", &name, "--show-managed-fields"])["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| format!("{} {}", e["manager"].as_str().unwrap(), e["operation"].as_str().unwrap()))
                .collect();
        managers.sort();
        // kubectl moved the client-side apply's fields to its server-side manager, and keeps
        // the last-applied annotation under a manager of its own.
        assert_eq!(managers, ["kubectl Apply", "kubectl-last-applied Apply"], "kubectl {version}");
    }
    setup.assert_reviewed();
}
