//! Writing through kube-aggregator with real kubectl, as a user authorized by
//! SubjectAccessReview: client-side apply (last-applied), diff, edit, server-side apply with
//! conflicts and --force-conflicts, patch (json, merge; strategic refused as Kubernetes
//! refuses it), label, annotate, the status and scale subresources, deletion held by a
//! finalizer, and collections deleted by namespace and by label.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use serde_json::Value;
use support::kubectl::{MY_CRONTAB, SHIRTS, rows, setup};
use support::{stderr, stdout, table};

#[test]
fn client_side_apply_diff_and_edit() {
    let setup = setup();
    let carol = &setup.carol;
    let file = carol.home.join("my-crontab.yaml");
    std::fs::write(&file, MY_CRONTAB).unwrap();
    let file = file.to_str().unwrap();
    assert_eq!(carol.ok(&["apply", "-f", file]).trim(), "crontab.stable.example.com/my-new-cron-object created");
    let object = carol.json(&["get", "ct", "my-new-cron-object"]);
    let last_applied: Value = serde_json::from_str(
        object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(
        last_applied,
        serde_json::json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"annotations": {}, "name": "my-new-cron-object", "namespace": "default"}, "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 3}})
    );
    assert_eq!(carol.ok(&["apply", "-f", file]).trim(), "crontab.stable.example.com/my-new-cron-object unchanged");

    // diff: nothing to say, then the change the file would make (exit code 1).
    assert_eq!(carol.ok(&["diff", "-f", file]), "");
    std::fs::write(file, MY_CRONTAB.replace("  replicas: 3\n", "")).unwrap();
    let diff = carol.out(&["diff", "-f", file]);
    assert_eq!(diff.status.code(), Some(1), "{}", stderr(&diff));
    let diff_text = stdout(&diff);
    let changed_lines: Vec<&str> = diff_text
        .lines()
        .filter(|l| l.starts_with(['-', '+']) && !l.starts_with("---") && !l.starts_with("+++"))
        .collect();
    assert_eq!(changed_lines, ["-  generation: 1", "+  generation: 2", "-  replicas: 3"], "{diff_text}");
    // The dry run stored nothing.
    assert_eq!(carol.ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.replicas}"]), "3");
    // Applying the file drops the field it no longer names.
    assert_eq!(carol.ok(&["apply", "-f", file]).trim(), "crontab.stable.example.com/my-new-cron-object configured");
    assert_eq!(
        carol.ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec}"]),
        r#"{"cronSpec":"* * * * */5","image":"my-awesome-cron-image"}"#
    );

    // edit, with an editor that changes the image.
    let editor = carol.home.join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/image: my-awesome-cron-image/image: edited-image/' \"$1\"\n")
        .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let edited =
        carol.run(&["edit", "crontab", "my-new-cron-object"], "", &[("KUBE_EDITOR", editor.to_str().unwrap())]);
    assert!(edited.status.success(), "{}", stderr(&edited));
    assert_eq!(stdout(&edited).trim(), "crontab.stable.example.com/my-new-cron-object edited");
    assert_eq!(carol.ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.image}"]), "edited-image");
    // An edit that changes nothing is said so.
    let noop = carol.run(&["edit", "crontab", "my-new-cron-object"], "", &[("KUBE_EDITOR", "true")]);
    assert!(noop.status.success(), "{}", stderr(&noop));
    assert_eq!(stderr(&noop).trim(), "Edit cancelled, no changes made.");
    let managers: Vec<String> =
        carol.json(&["get", "ct", "my-new-cron-object", "--show-managed-fields"])["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| format!("{} {}", e["manager"].as_str().unwrap(), e["operation"].as_str().unwrap()))
            .collect();
    assert_eq!(managers, ["kubectl-client-side-apply Update", "kubectl-edit Update"]);
    setup.assert_reviewed();
}

#[test]
fn server_side_apply_conflicts_and_forcing() {
    let setup = setup();
    let carol = &setup.carol;
    let applied = |spec: &str| MY_CRONTAB.replace("  image: my-awesome-cron-image\n  replicas: 3\n", spec);
    assert_eq!(
        carol.ok_stdin(&["apply", "--server-side", "-f", "-"], &applied("  image: my-awesome-cron-image\n")).trim(),
        "crontab.stable.example.com/my-new-cron-object serverside-applied"
    );
    // Someone else takes the image.
    carol.ok(&["patch", "crontab", "my-new-cron-object", "--type=merge", "-p", r#"{"spec":{"image":"patched"}}"#]);
    let out = carol.run(&["apply", "--server-side", "-f", "-"], &applied("  image: mine\n"), &[]);
    assert!(!out.status.success());
    let error = stderr(&out);
    assert!(
        error.starts_with(
            "error: Apply failed with 1 conflict: conflict with \"kubectl-patch\" using stable.example.com/v1: .spec.image\n"
        ),
        "{error}"
    );
    assert!(error.contains("--force-conflicts"), "kubectl explains the ways out: {error}");
    assert_eq!(carol.ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.image}"]), "patched");
    assert_eq!(
        carol.ok_stdin(&["apply", "--server-side", "--force-conflicts", "-f", "-"], &applied("  image: mine\n")).trim(),
        "crontab.stable.example.com/my-new-cron-object serverside-applied"
    );
    let object = carol.json(&["get", "ct", "my-new-cron-object", "--show-managed-fields"]);
    assert_eq!(object["spec"]["image"], "mine");
    let fields: Vec<(String, Value)> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["manager"].as_str().unwrap().to_string(), e["fieldsV1"].clone()))
        .collect();
    assert_eq!(
        fields,
        [("kubectl".to_string(), serde_json::json!({"f:spec": {"f:cronSpec": {}, "f:image": {}}}))],
        "the forced apply took the image from kubectl-patch, who had nothing else"
    );
    // A server-side dry run changes nothing.
    carol.ok_stdin(&["apply", "--server-side", "--dry-run=server", "-f", "-"], &applied("  image: dry\n"));
    assert_eq!(carol.ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.image}"]), "mine");
}

#[test]
fn patch_label_annotate_and_scale() {
    let setup = setup().seeded();
    let carol = &setup.carol;
    let get = |path: &str| carol.ok(&["get", "ct", "my-new-cron-object", "-o", &format!("jsonpath={path}")]);

    assert_eq!(
        carol
            .ok(&[
                "patch",
                "ct",
                "my-new-cron-object",
                "--type=json",
                "-p",
                r#"[{"op":"replace","path":"/spec/replicas","value":4}]"#
            ])
            .trim(),
        "crontab.stable.example.com/my-new-cron-object patched"
    );
    carol.ok(&["patch", "ct", "my-new-cron-object", "--type=merge", "-p", r#"{"spec":{"cronSpec":"0 * * * *"}}"#]);
    assert_eq!(get("{.spec.replicas} {.spec.cronSpec}"), "4 0 * * * *");
    assert_eq!(
        carol.fails(&["patch", "ct", "my-new-cron-object", "--type=strategic", "-p", r#"{"spec":{"replicas":1}}"#]),
        "error: application/strategic-merge-patch+json is not supported by stable.example.com/v1, Kind=CronTab: \
         the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    // kubectl's default patch type for a custom resource is a strategic merge: refused alike.
    assert!(
        carol
            .fails(&["patch", "ct", "my-new-cron-object", "-p", r#"{"spec":{"replicas":1}}"#])
            .contains("application/strategic-merge-patch+json is not supported by stable.example.com/v1, Kind=CronTab")
    );
    assert_eq!(
        carol.fails(&[
            "patch",
            "ct",
            "my-new-cron-object",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/spec/nothing"}]"#
        ]),
        "The request is invalid: the server rejected our request due to an error in our request"
    );

    assert_eq!(
        carol.ok(&["label", "ct", "my-new-cron-object", "tier=batch"]).trim(),
        "crontab.stable.example.com/my-new-cron-object labeled"
    );
    assert_eq!(
        carol.fails(&["label", "ct", "my-new-cron-object", "tier=web"]),
        "error: 'tier' already has a value (batch), and --overwrite is false"
    );
    carol.ok(&["label", "ct", "my-new-cron-object", "tier=web", "--overwrite"]);
    assert_eq!(get("{.metadata.labels}"), r#"{"tier":"web"}"#);
    assert_eq!(
        carol.ok(&["label", "ct", "my-new-cron-object", "tier-"]).trim(),
        "crontab.stable.example.com/my-new-cron-object unlabeled"
    );
    assert_eq!(
        carol.ok(&["annotate", "ct", "my-new-cron-object", "owner=team-a", "note=nightly run"]).trim(),
        "crontab.stable.example.com/my-new-cron-object annotated"
    );
    assert_eq!(get("{.metadata.annotations.owner}/{.metadata.annotations.note}"), "team-a/nightly run");

    // scale, through the scale subresource; a stale --current-replicas is refused.
    assert_eq!(
        carol.ok(&["scale", "crontabs/my-new-cron-object", "--replicas=5"]).trim(),
        "crontab.stable.example.com/my-new-cron-object scaled"
    );
    assert_eq!(get("{.spec.replicas}"), "5");
    assert_eq!(
        carol.fails(&["scale", "ct", "my-new-cron-object", "--current-replicas=2", "--replicas=1"]),
        "error: Expected replicas to be 2, was 5"
    );
    assert_eq!(get("{.spec.replicas}"), "5");
    // The status subresource changes status only; the scale shows it, as a table too.
    assert_eq!(
        carol
            .ok(&[
                "patch",
                "ct",
                "my-new-cron-object",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"spec":{"replicas":9},"status":{"replicas":2,"labelSelector":"app=cron"}}"#,
            ])
            .trim(),
        "crontab.stable.example.com/my-new-cron-object patched"
    );
    assert_eq!(get("{.spec.replicas} {.status.replicas}"), "5 2");
    let scale = rows(&carol.ok(&["get", "ct", "my-new-cron-object", "--subresource=scale"]));
    assert_eq!(scale[0], ["NAME", "DESIRED", "AVAILABLE", "AGE"]);
    assert_eq!(scale[1][..3], ["my-new-cron-object", "5", "2"]);
    let scale = carol.json(&["get", "ct", "my-new-cron-object", "--subresource=scale"]);
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["status"], serde_json::json!({"replicas": 2, "selector": "app=cron"}));
    // A resource without the scale subresource cannot be scaled.
    assert_eq!(
        carol.fails(&["scale", "shirt", "example1", "--replicas=2"]),
        "Error from server (NotFound): shirts.stable.example.com \"example1\" not found"
    );
    setup.assert_reviewed();
}

#[test]
fn deletion_waits_for_finalizers_and_deletes_collections() {
    let setup = setup().seeded();
    let carol = &setup.carol;
    let held = MY_CRONTAB
        .replace("metadata:\n", "metadata:\n  finalizers:\n  - stable.example.com/finalizer\n")
        .replace("my-new-cron-object", "held");
    carol.ok_stdin(&["apply", "-f", "-"], &held);

    // kubectl waits for the deletion to finish; meanwhile the object is there, being deleted.
    let mut deleting = carol.stream(&["delete", "crontab", "held", "--timeout=30s"]);
    assert_eq!(deleting.expect("the deletion", |_| true), "crontab.stable.example.com \"held\" deleted");
    let object = carol.json(&["get", "crontab", "held"]);
    assert!(object["metadata"]["deletionTimestamp"].as_str().unwrap().ends_with('Z'), "{object}");
    assert_eq!(object["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(object["metadata"]["finalizers"], serde_json::json!(["stable.example.com/finalizer"]));
    assert!(carol.ok(&["get", "ct", "held", "--no-headers"]).starts_with("held "));
    // Only removals are allowed now.
    let added = carol.fails(&[
        "patch",
        "ct",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["stable.example.com/finalizer","stable.example.com/more"]}}"#,
    ]);
    assert!(
        added.contains("no new finalizers can be added if the object is being deleted, found new finalizers []string{\"stable.example.com/more\"}"),
        "{added}"
    );
    carol.ok(&["patch", "ct", "held", "--type=json", "-p", r#"[{"op":"remove","path":"/metadata/finalizers"}]"#]);
    let (status, error) = deleting.finish();
    assert!(status.success(), "{error}");
    assert_eq!(
        carol.fails(&["get", "crontab", "held"]),
        "Error from server (NotFound): crontabs.stable.example.com \"held\" not found"
    );

    // delete --all in one namespace leaves the others alone.
    carol.ok_stdin(&["apply", "-n", "shop", "-f", "-"], SHIRTS);
    let deleted = carol.ok(&["delete", "shirts", "--all", "-n", "shop"]);
    assert_eq!(
        deleted.lines().collect::<Vec<_>>(),
        [
            "shirt.stable.example.com \"example1\" deleted",
            "shirt.stable.example.com \"example2\" deleted",
            "shirt.stable.example.com \"example3\" deleted"
        ]
    );
    assert_eq!(stderr(&carol.out(&["get", "shirts", "-n", "shop"])).trim(), "No resources found in shop namespace.");
    assert_eq!(table(&carol.ok(&["get", "shirts", "--no-headers"])).len(), 3);
    // Selected by label.
    carol.ok(&["label", "shirt", "example2", "retired=true"]);
    assert_eq!(
        carol.ok(&["delete", "shirts", "-l", "retired"]).trim(),
        "shirt.stable.example.com \"example2\" deleted"
    );
    let left: Vec<String> =
        table(&carol.ok(&["get", "shirts", "--no-headers"])).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(left, ["example1", "example3"]);
    setup.assert_reviewed();
}
