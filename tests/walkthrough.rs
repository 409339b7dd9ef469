//! The walkthrough of the Kubernetes documentation's CustomResourceDefinition page, driven
//! with real kubectl against the real server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use support::{CRONTAB_CRD, SHIRT_CRD, TENANT_CRD, TestServer, stderr, stdout, table};

const MY_CRONTAB: &str = r#"apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
"#;

#[test]
fn crontab_walkthrough() {
    let server = TestServer::start(&[CRONTAB_CRD, SHIRT_CRD, TENANT_CRD]);

    // kubectl api-resources lists every served resource with its short names.
    let resources = table(&server.kubectl_ok(&["api-resources", "--no-headers"]));
    let crontabs = resources.iter().find(|r| r[0] == "crontabs").expect("crontabs listed");
    assert_eq!(crontabs[1..], ["ct", "stable.example.com/v1", "true", "CronTab"]);
    let tenants = resources.iter().find(|r| r[0] == "tenants").expect("tenants listed");
    assert_eq!(tenants[1..], ["tn", "platform.example.com/v1", "false", "Tenant"]);
    assert!(resources.iter().any(|r| r[0] == "shirts"));

    let file = server.write("my-crontab.yaml", MY_CRONTAB);
    let file = file.to_str().unwrap();
    assert_eq!(
        server.kubectl_ok(&["apply", "-f", file]).trim(),
        "crontab.stable.example.com/my-new-cron-object created"
    );

    // Plural, singular and short name all reach the resource; the default columns are NAME, AGE.
    for name in ["crontab", "ct", "crontabs"] {
        let rows = table(&server.kubectl_ok(&["get", name]));
        assert_eq!(rows[0], ["NAME", "AGE"], "kubectl get {name}");
        assert_eq!(rows[1][0], "my-new-cron-object");
        assert!(rows[1][1].ends_with('s'), "age like 0s: {:?}", rows[1]);
    }

    // The server fills in the system fields.
    let yaml = server.kubectl_ok(&["get", "ct", "-o", "yaml"]);
    for expected in [
        "kind: List",
        "- apiVersion: stable.example.com/v1",
        "kind: CronTab",
        "generation: 1",
        "name: my-new-cron-object",
        "namespace: default",
        "cronSpec: '* * * * */5'",
        "image: my-awesome-cron-image",
        "kubectl.kubernetes.io/last-applied-configuration",
    ] {
        assert!(yaml.contains(expected), "missing {expected:?} in\n{yaml}");
    }
    let object: serde_json::Value =
        serde_json::from_str(&server.kubectl_ok(&["get", "ct", "my-new-cron-object", "-o", "json"])).unwrap();
    let meta = &object["metadata"];
    assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let first_rv: u64 = meta["resourceVersion"].as_str().unwrap().parse().unwrap();

    // apply again after an edit: a merge patch; generation and resourceVersion move on.
    server.write("my-crontab.yaml", &MY_CRONTAB.replace("my-awesome-cron-image", "my-awesome-cron-image:v2"));
    assert_eq!(
        server.kubectl_ok(&["apply", "-f", file]).trim(),
        "crontab.stable.example.com/my-new-cron-object configured"
    );
    let image = server.kubectl_ok(&[
        "get",
        "ct",
        "my-new-cron-object",
        "-o",
        "jsonpath={.spec.image} {.metadata.generation} {.metadata.resourceVersion}",
    ]);
    let parts: Vec<&str> = image.split(' ').collect();
    assert_eq!(parts[..2], ["my-awesome-cron-image:v2", "2"]);
    assert!(parts[2].parse::<u64>().unwrap() > first_rv);
    // Applying the same file again changes nothing.
    assert_eq!(
        server.kubectl_ok(&["apply", "-f", file]).trim(),
        "crontab.stable.example.com/my-new-cron-object unchanged"
    );

    // JSON patch and merge patch work; strategic merge patch is refused as for any custom resource.
    server.kubectl_ok(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/spec/replicas","value":3}]"#,
    ]);
    server.kubectl_ok(&[
        "patch",
        "ct",
        "my-new-cron-object",
        "--type=merge",
        "-p",
        r#"{"spec":{"cronSpec":"0 * * * *"}}"#,
    ]);
    let spec =
        server.kubectl_ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.replicas} {.spec.cronSpec}"]);
    assert_eq!(spec, "3 0 * * * *");
    let strategic =
        server.kubectl(&["patch", "ct", "my-new-cron-object", "--type=strategic", "-p", r#"{"spec":{"replicas":4}}"#]);
    assert!(!strategic.status.success());
    assert!(
        stderr(&strategic).contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{}",
        stderr(&strategic)
    );

    // replace sends the whole object back with its resourceVersion.
    let current = server.kubectl_ok(&["get", "ct", "my-new-cron-object", "-o", "yaml"]);
    let replaced = current.replace("replicas: 3", "replicas: 7");
    let out = server.kubectl_stdin(&["replace", "-f", "-"], &replaced);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "crontab.stable.example.com/my-new-cron-object replaced");
    assert_eq!(server.kubectl_ok(&["get", "ct", "my-new-cron-object", "-o", "jsonpath={.spec.replicas}"]), "7");
    // A stale resourceVersion is a conflict.
    let stale = server.kubectl_stdin(&["replace", "-f", "-"], &current);
    assert!(
        stderr(&stale)
            .contains("the object has been modified; please apply your changes to the latest version and try again"),
        "{}",
        stderr(&stale)
    );

    // Labels and selectors.
    server.kubectl_ok(&["label", "ct", "my-new-cron-object", "tier=batch"]);
    assert_eq!(table(&server.kubectl_ok(&["get", "ct", "-l", "tier=batch", "--no-headers"])).len(), 1);
    assert!(server.kubectl_ok(&["get", "ct", "-l", "tier=web", "--no-headers"]).trim().is_empty());

    // Deleting, then reading what is gone.
    assert_eq!(
        server.kubectl_ok(&["delete", "-f", file]).trim(),
        "crontab.stable.example.com \"my-new-cron-object\" deleted"
    );
    let missing = server.kubectl(&["get", "crontabs", "my-new-cron-object"]);
    assert_eq!(
        stderr(&missing).trim(),
        "Error from server (NotFound): crontabs.stable.example.com \"my-new-cron-object\" not found"
    );
    let missing = server.kubectl(&["get", "crontabs", "x"]);
    assert_eq!(stderr(&missing).trim(), "Error from server (NotFound): crontabs.stable.example.com \"x\" not found");
    // Replacing an object that is gone is NotFound too, as kubectl words a failed replace.
    let gone = server.kubectl_stdin(&["replace", "-f", "-"], &replaced);
    assert_eq!(
        stderr(&gone).trim(),
        "Error from server (NotFound): error when replacing \"STDIN\": crontabs.stable.example.com \"my-new-cron-object\" not found"
    );
    assert_eq!(stderr(&server.kubectl(&["get", "ct"])).trim(), "No resources found in default namespace.");
}

#[test]
fn cluster_scoped_resources() {
    let server = TestServer::start(&[TENANT_CRD]);
    let tenant = "apiVersion: platform.example.com/v1\nkind: Tenant\nmetadata:\n  name: acme\nspec:\n  owner: alice\n  quotaGiB: 50\n";
    let file = server.write("tenant.yaml", tenant);
    assert_eq!(
        server.kubectl_ok(&["create", "-f", file.to_str().unwrap()]).trim(),
        "tenant.platform.example.com/acme created"
    );
    let rows = table(&server.kubectl_ok(&["get", "tenants"]));
    assert_eq!(rows[0], ["NAME", "OWNER", "QUOTA", "PHASE", "AGE"]);
    assert_eq!(rows[1][..3], ["acme", "alice", "50"]);
    let namespace = server.kubectl_ok(&["get", "tn", "acme", "-o", "jsonpath={.metadata.namespace}"]);
    assert_eq!(namespace, "", "cluster-scoped objects have no namespace");
    assert!(server.kubectl_ok(&["delete", "tenant", "acme"]).contains("deleted"));
}

#[test]
fn generate_name_and_namespaces() {
    let server = TestServer::start(&[CRONTAB_CRD]);
    let generated = "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  generateName: nightly-\nspec:\n  cronSpec: '0 0 * * *'\n";
    let name = server.kubectl_stdin(&["create", "-n", "team-a", "-f", "-", "-o", "name"], generated);
    assert!(name.status.success(), "{}", stderr(&name));
    let name = stdout(&name);
    assert!(
        name.trim().starts_with("crontab.stable.example.com/nightly-")
            && name.trim().len() == "crontab.stable.example.com/nightly-".len() + 5,
        "{name}"
    );
    assert!(server.kubectl_ok(&["get", "ct", "-n", "team-b", "--no-headers"]).trim().is_empty());
    let all = table(&server.kubectl_ok(&["get", "ct", "-A", "--no-headers"]));
    assert_eq!(all.len(), 1);
    assert_eq!(all[0][0], "team-a");
}
