//! Real kubectl through the control-plane double, as users reach the server in a cluster:
//! kube-aggregator in front, every request authorized by SubjectAccessReview for a user who is
//! not in system:masters. Every command a user runs against custom resources, with its output:
//! reads (tables, wide, YAML, watches, categories, explain, label and field selectors), writes
//! (client-side and server-side apply, diff, edit, patch, label, annotate, scale, wait), deletion
//! (finalizers, collections), the metadata-only list the garbage collector makes, and older and
//! newer kubectl releases.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cluster::TestCluster;
use support::http::Client;
use support::{SHIRT_CRD, stderr, stdout, table};

/// The seeds' CronTab with everything the seeds show on it in one definition: the `all`
/// category, the printer columns (plus a wide one), the status and scale subresources; and
/// descriptions for `kubectl explain` to print.
const CRONTAB_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A job run on a cron schedule.
        properties:
          spec:
            type: object
            description: When and what to run.
            properties:
              cronSpec:
                type: string
                description: The cron schedule.
              image:
                type: string
              replicas:
                type: integer
                description: How many jobs run at once.
          status:
            type: object
            properties:
              replicas: {type: integer}
              labelSelector: {type: string}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    additionalPrinterColumns:
    - {name: Spec, type: string, description: The cron spec defining the interval a CronJob is run, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, description: The number of jobs launched by the CronJob, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    - {name: Image, type: string, priority: 1, jsonPath: .spec.image}
"#;

/// The seeds' `my-crontab.yaml`, with replicas as in the scale example.
const MY_CRONTAB: &str = r#"apiVersion: "stable.example.com/v1"
kind: CronTab
metadata:
  name: my-new-cron-object
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
  replicas: 3
"#;

/// The seeds' `shirt-resources.yaml`.
const SHIRTS: &str = "apiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example1\nspec:\n  color: blue\n  size: S\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example2\nspec:\n  color: blue\n  size: M\n---\napiVersion: stable.example.com/v1\nkind: Shirt\nmetadata:\n  name: example3\nspec:\n  color: green\n  size: M\n";

/// A cluster serving the CronTab and the Shirt, and carol, who may do anything with them by
/// RBAC (answered by SubjectAccessReview) but is no cluster admin.
struct Setup {
    cluster: TestCluster,
    carol: Kubectl,
}

fn setup() -> Setup {
    let cluster = TestCluster::start(&[CRONTAB_CRD, SHIRT_CRD]);
    cluster.grant("carol", &["*"], "stable.example.com", &["*"], None);
    cluster.plane.state().create_namespace("shop").unwrap();
    let kubeconfig = cluster.user("carol", &["developers"]);
    let carol = Kubectl::new("kubectl", &kubeconfig, &cluster.server.dir.path().join("carol"));
    Setup { cluster, carol }
}

impl Setup {
    /// Creates the seeds' objects: `my-new-cron-object` and the three shirts.
    fn seeded(self) -> Setup {
        self.carol.ok_stdin(&["apply", "-f", "-"], MY_CRONTAB);
        self.carol.ok_stdin(&["apply", "-f", "-"], SHIRTS);
        self
    }

    /// Every review the server asked about carol was answered by RBAC, never by a group.
    fn assert_reviewed(&self) {
        let reviews: Vec<Value> = self.cluster.plane.sar_log().into_iter().filter(|s| s["user"] == "carol").collect();
        assert!(!reviews.is_empty(), "no SubjectAccessReview for carol");
        for review in &reviews {
            assert_eq!(review["groups"], serde_json::json!(["developers", "system:authenticated"]));
        }
    }
}

/// One kubectl binary with one user's kubeconfig and its own home (discovery cache).
struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

impl Kubectl {
    fn new(binary: impl Into<PathBuf>, kubeconfig: &Path, home: &Path) -> Kubectl {
        std::fs::create_dir_all(home).unwrap();
        Kubectl { binary: binary.into(), kubeconfig: kubeconfig.to_path_buf(), home: home.to_path_buf() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBE_EDITOR")
            .current_dir(&self.home)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }

    fn run(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        use std::io::Write;
        let mut command = self.command(args);
        command.envs(env.iter().copied());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary.display()));
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    }

    fn out(&self, args: &[&str]) -> Output {
        self.run(args, "", &[])
    }

    fn ok(&self, args: &[&str]) -> String {
        self.ok_stdin(args, "")
    }

    fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run(args, stdin, &[]);
        assert!(out.status.success(), "{} {args:?} failed: {}", self.binary.display(), stderr(&out));
        stdout(&out)
    }

    /// The error kubectl printed, for a command that must fail.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.out(args);
        assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
        stderr(&out).trim().to_string()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    /// A long-running kubectl (`get -w`, `wait`) whose output lines arrive on a channel.
    fn stream(&self, args: &[&str]) -> Stream {
        let mut child = self.command(args).spawn().unwrap();
        let (sender, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Stream { child, lines, seen: Vec::new() }
    }
}

struct Stream {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Stream {
    /// Waits for a line that satisfies `wanted`; returns it.
    fn expect(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {what}; lines so far: {:#?}", self.seen),
            }
        }
    }

    /// Waits for the process to end by itself; returns its status and what it wrote on stderr.
    fn finish(mut self) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
                return (status, err);
            }
            assert!(Instant::now() < deadline, "kubectl did not finish; output: {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A printed table's lines, split on runs of two spaces or more (cells may hold spaces).
fn rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect())
        .collect()
}

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
    carol.ok(&["patch", "shirt", "example3", "--type=merge", "-p", r#"{"spec":{"color":"red"}}"#]);
    let changed = watch.expect("example3 changed", |l| l.starts_with("example3 ") && l.contains("red"));
    assert_eq!(table(&changed), [["example3", "red", "M"]]);
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
    let wait =
        carol.stream(&["wait", "crontab/my-new-cron-object", "--for=jsonpath={.spec.replicas}=5", "--timeout=20s"]);
    assert_eq!(
        carol.ok(&["scale", "crontab", "my-new-cron-object", "--replicas=5"]).trim(),
        "crontab.stable.example.com/my-new-cron-object scaled"
    );
    let mut wait = wait;
    assert_eq!(wait.expect("the condition", |_| true), "crontab.stable.example.com/my-new-cron-object condition met");
    let (status, _) = wait.finish();
    assert!(status.success());
    let out = carol.out(&["wait", "crontab/my-new-cron-object", "--for=jsonpath={.spec.replicas}=6", "--timeout=1s"]);
    assert!(!out.status.success());
    assert_eq!(stderr(&out).trim(), "error: timed out waiting for the condition on crontabs/my-new-cron-object");
}

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

/// What client-go's metadata client asks for (the garbage collector and the namespace
/// controller use it).
const METADATA_ACCEPT: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

#[test]
fn the_garbage_collectors_metadata_list() {
    let setup = setup().seeded();
    setup.cluster.plane.add_user(
        "gc-token",
        support::control_plane::rbac::User::new(
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
            "Operation cannot be fulfilled on shirts.stable.example.com \"example1\": Precondition failed: UID in \
             precondition: 0000, UID in object meta: {uid}"
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

/// The Google Cloud CLI's kubectl releases beside the `kubectl` on the PATH.
fn release(version: &str) -> PathBuf {
    let which = Command::new("sh").args(["-c", "readlink -f \"$(command -v kubectl)\""]).output().unwrap();
    let resolved = PathBuf::from(stdout(&which).trim());
    let binary = resolved.parent().unwrap_or(Path::new("/")).join(format!("kubectl.{version}"));
    assert!(
        binary.is_file(),
        "kubectl {version} is needed at {} (beside the Google Cloud CLI's kubectl, {}); install the Google Cloud CLI's kubectl component",
        binary.display(),
        resolved.display()
    );
    binary
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
