//! Definitions changed while the server runs, seen through kube-aggregator with real kubectl:
//! a definition added, changed (new printer column, new field for `kubectl explain`, new
//! discovery entity tags, OpenAPI v2 and v3, a CEL rule, a selectable field) and removed (404, objects kept, served again when the file comes
//! back); a watch on an unchanged definition going on while the watch of the changed one ends;
//! a ConfigMap volume's `..data` symlink swap; refused updates (the previous definition goes on
//! being served, the log names the file); invalid YAML and half-written files; several
//! replacements within a second, coalesced.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::cluster::TestCluster;
use support::control_plane::ControlPlane;
use support::http::Client;
use support::kubectl::{Kubectl, rows};
use support::stdout;

/// A namespaced definition of `stable.example.com/v1` with a `spec.size` field and `extra`
/// appended to its version (printer columns, say).
fn definition(plural: &str, kind: &str, size_description: &str, extra: &str) -> String {
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
              size: {{type: string, description: {size_description}}}
{extra}"
    )
}

const SIZE_COLUMN: &str = "    additionalPrinterColumns:\n    - {name: Size, type: string, jsonPath: .spec.size}\n";

/// Runs `probe` until it returns `Some`, for at most a minute.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} did not happen in a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Replaces a file at once, as editors and `kubectl cp` do: written beside it, renamed over it.
fn replace(path: &Path, text: &str) {
    let staged = path.with_extension("staged");
    std::fs::write(&staged, text).unwrap();
    std::fs::rename(&staged, path).unwrap();
}

struct Live {
    cluster: TestCluster,
    admin: Kubectl,
    /// The admin's raw client through the double.
    raw: Client,
}

fn start(definitions: &[&str], extra: &[&str]) -> Live {
    let plane = ControlPlane::start();
    let cluster = TestCluster::start_on(plane, definitions, extra);
    cluster.plane.register("stable.example.com", "v1");
    cluster.plane.state().create_namespace("default").ok();
    let kubeconfig = cluster.user("admin", &["system:masters"]);
    let admin = Kubectl::new("kubectl", &kubeconfig, &cluster.server.dir.path().join("admin"));
    let raw = Client::to_plane(&cluster.plane, "admin-token");
    Live { cluster, admin, raw }
}

impl Live {
    fn status(&self, path: &str) -> u16 {
        self.raw.get(path).unwrap().status
    }

    /// Whether the server counts exactly one open watch of `kind`.
    fn one_watch_of(&self, kind: &str) -> bool {
        // Scraped as kube-aggregator would forward an admin's request: the front proxy's
        // certificate and the identity headers.
        let server = &self.cluster.server;
        let proxy = &self.cluster.plane.front_proxy_client;
        let (cert, key) = (server.write("scraper.crt", &proxy.cert), server.write("scraper.key", &proxy.key));
        let scraper = Client::new(server, Some((&cert, &key)))
            .header("X-Remote-User", "system:admin")
            .header("X-Remote-Group", "system:masters");
        let metrics = scraper.get("/metrics").unwrap().text();
        metrics.lines().any(|l| {
            l.starts_with("apiserver_registered_watchers{")
                && l.contains(&format!("kind=\"{kind}\""))
                && l.ends_with(" 1")
        })
    }

    fn log_count(&self, needle: &str) -> usize {
        self.cluster.server.log().matches(needle).count()
    }
}

const WIDGETS: &str = "/apis/stable.example.com/v1/namespaces/default/widgets";
const GADGETS: &str = "/apis/stable.example.com/v1/namespaces/default/gadgets";

#[test]
fn definitions_are_added_changed_and_removed_while_serving() {
    let crontab = definition("crontabs", "CronTab", "How big.", "");
    let widget = definition("widgets", "Widget", "How big.", "");
    let live = start(&[&crontab, &widget], &[]);
    let defs = live.cluster.server.definitions_dir();
    let admin = &live.admin;
    admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: XL}\n",
    );
    let (_, discovery_before) = live.cluster.plane.aggregated_discovery();

    // Watches on both resources.
    let mut crontab_watch = admin.stream(&["get", "crontabs", "-w", "--output-watch-events"]);
    let widget_watch = admin.stream(&["get", "widgets", "-w"]);
    eventually("both watches open", || (live.one_watch_of("Widget") && live.one_watch_of("CronTab")).then_some(()));

    // Added: a new file is served, in discovery and for writes.
    std::fs::write(defs.join("gadgets.yaml"), definition("gadgets", "Gadget", "How big.", "")).unwrap();
    eventually("gadgets served", || (live.status(GADGETS) == 200).then_some(()));
    admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Gadget\nmetadata: {name: g1}\nspec: {size: S}\n",
    );
    assert_eq!(rows(&admin.ok(&["get", "gadgets"]))[1][0], "g1");

    // Changed: the widget's new column and field description apply to the next request.
    replace(&defs.join("01.yaml"), &definition("widgets", "Widget", "Widget size from XS to XL.", SIZE_COLUMN));
    let table = eventually("the new column", || {
        let table = rows(&admin.ok(&["get", "widgets"]));
        (table[0].contains(&"SIZE".to_string())).then_some(table)
    });
    assert_eq!(table[1][..2], ["w1", "XL"]);
    let explained = eventually("explain following", || {
        let text = admin.ok(&["explain", "widgets.spec.size"]);
        text.contains("Widget size from XS to XL.").then_some(text)
    });
    assert!(explained.contains("FIELD: size <string>"), "{explained}");
    let (_, discovery_after) = live.cluster.plane.aggregated_discovery();
    assert!(discovery_after.to_string().contains("gadgets"));
    assert!(!discovery_before.to_string().contains("gadgets"));

    // The watch of the changed definition ended, as Kubernetes ends it (kubectl exits quietly);
    // the watch on the unchanged crontabs goes on and sees a new object.
    let (status, errors) = widget_watch.finish();
    assert!(status.success(), "{errors}");
    admin
        .ok_stdin(&["apply", "-f", "-"], "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: after}\n");
    crontab_watch.expect("the new crontab", |l| l.starts_with("ADDED") && l.contains("after"));

    // Removed: 404 as any unknown resource, the objects stay, and come back with the file.
    std::fs::remove_file(defs.join("gadgets.yaml")).unwrap();
    eventually("gadgets gone", || (live.status(GADGETS) == 404).then_some(()));
    let gone = live.raw.get(&format!("{GADGETS}/g1")).unwrap();
    assert_eq!(gone.json()["reason"], "NotFound", "{}", gone.text());
    let log = live.cluster.server.log();
    assert!(log.contains("no longer serving the definition; its objects stay in the store"), "{log}");
    std::fs::write(defs.join("gadgets.yaml"), definition("gadgets", "Gadget", "How big.", "")).unwrap();
    eventually("gadgets back", || (live.status(&format!("{GADGETS}/g1")) == 200).then_some(()));
    assert_eq!(live.raw.get(&format!("{GADGETS}/g1")).unwrap().json()["spec"]["size"], "S");
    assert_eq!(live.status(WIDGETS), 200);
}

/// The widget definition with a CEL rule on `spec`, `spec.size` selectable, a printer column
/// and a short name.
fn ruled_widget(description: &str) -> String {
    let selectable = "    selectableFields:\n    - {jsonPath: .spec.size}\n";
    definition("widgets", "Widget", description, &format!("{SIZE_COLUMN}{selectable}"))
        .replace("kind: Widget}", "kind: Widget, shortNames: [wd]}")
        .replace(
            "            type: object\n            properties:\n              size:",
            "            type: object\n            x-kubernetes-validations:\n            - {rule: \"!has(self.size) || self.size != 'XXL'\", message: XXL is too big}\n            properties:\n              size:",
        )
}

#[test]
fn discovery_openapi_rules_and_selectable_fields_follow_a_change() {
    let live = start(&[&definition("widgets", "Widget", "How big.", "")], &[]);
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let etag = |accept: &str, path: &str| {
        let response = live.raw.clone().header("Accept", accept).get(path).unwrap();
        assert_eq!(response.status, 200, "{path}");
        response.headers.get("etag").unwrap().to_str().unwrap().to_string()
    };
    let tags = || {
        (
            etag(aggregated, "/apis"),
            etag("application/json", "/openapi/v2"),
            etag("application/json", "/openapi/v3/apis/stable.example.com/v1"),
        )
    };
    let before = tags();
    live.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w0}\nspec: {size: XXL}\n",
    );
    replace(&live.cluster.server.definitions_dir().join("00.yaml"), &ruled_widget("Widget size up to XL."));
    let after = eventually("new entity tags", || {
        let now = tags();
        (now.0 != before.0 && now.1 != before.1 && now.2 != before.2).then_some(now)
    });
    assert_ne!(before, after);
    // Legacy discovery names the short name; both OpenAPI documents the new description.
    let legacy = live.raw.get("/apis/stable.example.com/v1").unwrap().json();
    assert_eq!(legacy["resources"][0]["shortNames"], serde_json::json!(["wd"]), "{legacy}");
    let v2 = live.raw.get("/openapi/v2").unwrap().text();
    assert!(v2.contains("Widget size up to XL."), "the v2 document follows");
    let v3 = live.raw.get("/openapi/v3/apis/stable.example.com/v1").unwrap().text();
    assert!(v3.contains("Widget size up to XL."), "the v3 document follows");

    // The short name, the column, the rule and the selectable field apply to the next request.
    live.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: L}\n",
    );
    assert_eq!(rows(&live.admin.ok(&["get", "wd", "w1"])), [["NAME", "SIZE"], ["w1", "L"]]);
    let refused = live.admin.run(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: XXL}\n",
        &[],
    );
    assert!(!refused.status.success());
    let refused = support::stderr(&refused);
    assert!(refused.contains("The Widget \"w2\" is invalid: spec: Invalid value: XXL is too big"), "{refused}");
    let selected = rows(&live.admin.ok(&["get", "widgets", "--field-selector", "spec.size=XXL", "--no-headers"]));
    assert_eq!(selected.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["w0"]);
}

/// A ConfigMap volume as the kubelet lays it out: the files are symlinks through `..data`,
/// itself a symlink to a timestamped directory, swapped atomically on every update.
struct ConfigMapVolume {
    dir: PathBuf,
    generation: usize,
}

impl ConfigMapVolume {
    fn new(dir: PathBuf, files: &[(&str, &str)]) -> ConfigMapVolume {
        std::fs::create_dir_all(&dir).unwrap();
        let mut volume = ConfigMapVolume { dir, generation: 0 };
        volume.update(files);
        volume
    }

    /// The kubelet's atomic writer: a new timestamped directory, a `..data_tmp` symlink to it
    /// renamed over `..data`, the user-visible symlinks created, the old directory removed.
    fn update(&mut self, files: &[(&str, &str)]) {
        self.generation += 1;
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let stamp = format!("..2026_11_25_10_00_00.{}", self.generation);
        std::fs::create_dir(self.dir.join(&stamp)).unwrap();
        for (name, text) in files {
            std::fs::write(self.dir.join(&stamp).join(name), text).unwrap();
        }
        std::os::unix::fs::symlink(&stamp, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        for (name, _) in files {
            let link = self.dir.join(name);
            if std::fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(Path::new("..data").join(name), &link).unwrap();
            }
        }
        // Names no longer in the ConfigMap lose their symlink.
        for entry in std::fs::read_dir(&self.dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if !name.starts_with("..") && !files.iter().any(|(f, _)| *f == name) {
                std::fs::remove_file(self.dir.join(&name)).unwrap();
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

#[test]
fn a_configmap_volume_swap_and_refused_or_broken_updates() {
    let volume_dir = tempfile::tempdir().unwrap();
    let mut volume = ConfigMapVolume::new(
        volume_dir.path().join("definitions"),
        &[("widgets.yaml", &definition("widgets", "Widget", "How big.", ""))],
    );
    let live = start(&[], &["--definitions", volume.dir.to_str().unwrap()]);
    let admin = &live.admin;
    eventually("widgets served", || (live.status(WIDGETS) == 200).then_some(()));
    admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: M}\n",
    );

    // The swap adds a definition and changes one.
    volume.update(&[
        ("widgets.yaml", &definition("widgets", "Widget", "How big.", SIZE_COLUMN)),
        ("gadgets.yaml", &definition("gadgets", "Gadget", "How big.", "")),
    ]);
    eventually("gadgets served", || (live.status(GADGETS) == 200).then_some(()));
    eventually("the new column", || rows(&admin.ok(&["get", "widgets"]))[0].contains(&"SIZE".into()).then_some(()));

    // A refused update: the scope may not change. The previous widget goes on being served.
    let cluster_scoped =
        definition("widgets", "Widget", "How big.", SIZE_COLUMN).replace("scope: Namespaced", "scope: Cluster");
    volume.update(&[
        ("widgets.yaml", &cluster_scoped),
        ("gadgets.yaml", &definition("gadgets", "Gadget", "How big.", "")),
    ]);
    let refusal = "widgets.yaml: CustomResourceDefinition \\\"widgets.stable.example.com\\\" is invalid: spec.scope: Invalid value: \\\"Cluster\\\": field is immutable";
    eventually("the refusal in the log", || (live.log_count(refusal) > 0).then_some(()));
    assert_eq!(rows(&admin.ok(&["get", "widgets"]))[1][..2], ["w1", "M"]);
    assert_eq!(
        live.status("/apis/stable.example.com/v1/widgets"),
        200,
        "the list of all namespaces, namespaced as before"
    );

    // Invalid YAML and a half-written file: the last good set goes on being served.
    volume.update(&[
        ("widgets.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: [Custom"),
        ("gadgets.yaml", &definition("gadgets", "Gadget", "How big.", "")[..120]),
    ]);
    eventually("the parse error in the log", || {
        (live.log_count("widgets.yaml: not a usable CustomResourceDefinition: cannot parse") > 0).then_some(())
    });
    assert_eq!(live.status(WIDGETS), 200);
    assert_eq!(live.status(GADGETS), 200);

    // A definition removed from the ConfigMap stops being served; its objects stay.
    volume.update(&[("widgets.yaml", &definition("widgets", "Widget", "How big.", SIZE_COLUMN))]);
    eventually("gadgets gone", || (live.status(GADGETS) == 404).then_some(()));
    assert_eq!(rows(&admin.ok(&["get", "widgets"]))[1][..2], ["w1", "M"]);
}

#[test]
fn replacements_within_a_second_are_coalesced() {
    let live = start(&[&definition("widgets", "Widget", "How big.", "")], &[]);
    let file = live.cluster.server.definitions_dir().join("00.yaml");
    let changed = "serving the changed definition";
    for i in 0..8 {
        let description = format!("Size number {i}.");
        replace(&file, &definition("widgets", "Widget", &description, ""));
    }
    eventually("the last replacement served", || {
        let text = stdout(&live.cluster.kubectl(&live.admin.kubeconfig, &["explain", "widgets.spec.size"]));
        text.contains("Size number 7.").then_some(())
    });
    // Eight replacements in a burst make far fewer reloads (one, unless the machine stalled).
    let reloads = live.log_count(changed);
    assert!((1..8).contains(&reloads), "{reloads} reloads for 8 replacements:\n{}", live.cluster.server.log());
}

#[test]
fn a_stored_version_cannot_leave_spec_versions() {
    let v1 = definition("widgets", "Widget", "How big.", "");
    let live = start(&[&v1], &[]);
    let file = live.cluster.server.definitions_dir().join("00.yaml");
    live.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: S}\n",
    );
    // v2 becomes the storage version; v1 stays served.
    let both = v1.replace("    storage: true\n", "    storage: false\n")
        + "  - name: v2\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
    replace(&file, &both);
    live.cluster.plane.register("stable.example.com", "v2");
    eventually("v2 served", || {
        (live.status("/apis/stable.example.com/v2/namespaces/default/widgets") == 200).then_some(())
    });
    // Dropping v1 while objects may be stored in it is refused: v1 goes on being served.
    let only_v2 = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.stable.example.com\nspec:\n  group: stable.example.com\n  scope: Namespaced\n  names: {plural: widgets, kind: Widget}\n  versions:\n  - name: v2\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
    replace(&file, only_v2);
    let refusal = "status.storedVersions[0]: Invalid value: \\\"v1\\\": missing from spec.versions; v1 was previously a storage version";
    eventually("the refusal in the log", || (live.log_count(refusal) > 0).then_some(()));
    assert_eq!(live.status(&format!("{WIDGETS}/w1")), 200);
}

#[test]
fn check_previous_reports_what_a_reload_would_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    let new = dir.path().join("new.yaml");
    std::fs::write(&old, definition("widgets", "Widget", "How big.", "")).unwrap();
    let check = |new_text: &str| {
        std::fs::write(&new, new_text).unwrap();
        let out = std::process::Command::new(support::binary())
            .args(["check", "--previous", old.to_str().unwrap(), new.to_str().unwrap()])
            .output()
            .unwrap();
        (out.status.code(), stdout(&out))
    };
    let (code, text) = check(&definition("widgets", "Widget", "How big.", "").replace("Namespaced", "Cluster"));
    assert_eq!(code, Some(1));
    assert_eq!(
        text.trim(),
        format!(
            "{}: CustomResourceDefinition \"widgets.stable.example.com\" is invalid: spec.scope: Invalid value: \"Cluster\": field is immutable",
            new.display()
        )
    );
    let (code, text) = check(&definition("widgets", "Widget", "How big.", "").replace("name: v1", "name: v2"));
    assert_eq!(code, Some(1));
    assert!(text.contains("status.storedVersions[0]: Invalid value: \"v1\": missing from spec.versions"), "{text}");
    let (code, text) = check(&definition("widgets", "Widget", "Larger.", SIZE_COLUMN));
    assert_eq!((code, text.trim()), (Some(0), format!("{}: widgets.stable.example.com ok", new.display()).as_str()));
}

/// `crd-apiserver delete-objects` on the server's store, as the admin runs it.
fn delete_objects(live: &Live, name: &str, extra: &[&str]) -> (Option<i32>, String) {
    let server = &live.cluster.server;
    let out = std::process::Command::new(support::binary())
        .args(["delete-objects", name, "--storage", server.data_dir().to_str().unwrap()])
        .args(["--definitions", server.definitions_dir().to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    (out.status.code(), format!("{}{}", stdout(&out), support::stderr(&out)))
}

#[test]
fn a_removed_definition_keeps_its_objects_until_the_admin_deletes_them() {
    let mut live = start(
        &[&definition("widgets", "Widget", "How big.", ""), &definition("gadgets", "Gadget", "How big.", "")],
        &[],
    );
    for name in ["g1", "g2"] {
        let object = format!("apiVersion: stable.example.com/v1\nkind: Gadget\nmetadata: {{name: {name}}}\n");
        live.admin.ok_stdin(&["apply", "-f", "-"], &object);
    }
    live.admin
        .ok_stdin(&["apply", "-f", "-"], "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\n");
    // Still defined: refused.
    let (code, text) = delete_objects(&live, "gadgets.stable.example.com", &["--confirm"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("gadgets.stable.example.com is defined in"), "{text}");
    let defs = live.cluster.server.definitions_dir();
    std::fs::remove_file(defs.join("01.yaml")).unwrap();
    eventually("gadgets gone", || (live.status(GADGETS) == 404).then_some(()));
    // The running server holds the store.
    let (code, text) = delete_objects(&live, "gadgets.stable.example.com", &["--confirm"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("stop the server first"), "{text}");
    live.cluster.server.stop();
    // A name the store knows nothing of (mistyped): said, and a failure.
    let (code, text) = delete_objects(&live, "gadget.stable.example.com", &[]);
    assert_eq!(code, Some(1), "{text}");
    assert_eq!(
        text.trim(),
        "error: no definition named gadget.stable.example.com is known here: the store holds no object and no \
         record of it (check the name)"
    );
    let (code, text) = delete_objects(&live, "gadgets.stable.example.com", &[]);
    assert_eq!(
        (code, text.trim()),
        (Some(0), "2 objects of gadgets.stable.example.com would be deleted; add --confirm to delete them")
    );
    let (code, text) = delete_objects(&live, "gadgets.stable.example.com", &["--confirm"]);
    assert_eq!((code, text.trim()), (Some(0), "deleted 2 objects of gadgets.stable.example.com"));
    // Served again, the definition has no objects; the widgets were not touched.
    std::fs::write(defs.join("01.yaml"), definition("gadgets", "Gadget", "How big.", "")).unwrap();
    live.cluster.server.spawn(&[]);
    assert_eq!(live.raw.get(GADGETS).unwrap().json()["items"], serde_json::json!([]));
    assert_eq!(live.raw.get(&format!("{WIDGETS}/w1")).unwrap().status, 200);
}

#[test]
fn a_directory_swapped_whole_is_followed() {
    let live = start(&[&definition("widgets", "Widget", "How big.", "")], &[]);
    let defs = live.cluster.server.definitions_dir();
    let staged = defs.with_extension("new");
    std::fs::create_dir(&staged).unwrap();
    std::fs::write(staged.join("00.yaml"), definition("widgets", "Widget", "How big.", SIZE_COLUMN)).unwrap();
    std::fs::rename(&defs, defs.with_extension("old")).unwrap();
    std::fs::rename(&staged, &defs).unwrap();
    live.admin.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: stable.example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: XS}\n",
    );
    eventually("the new column", || {
        let table = rows(&live.admin.ok(&["get", "widgets"]));
        (table[0].contains(&"SIZE".to_string())).then_some(())
    });
    // The new directory is watched: a file added to it is served.
    std::fs::write(defs.join("gadgets.yaml"), definition("gadgets", "Gadget", "How big.", "")).unwrap();
    eventually("gadgets served", || (live.status(GADGETS) == 200).then_some(()));
}
