//! `crd-apiserver backup` and `restore` on the sled backend, end to end: an online backup
//! through a running server's `/backup` while a writer runs (every write acknowledged at or
//! before the backup's revision is in it, none after), refused without credentials; the
//! restore into a new store served by a new server (objects, content, resourceVersions above
//! the backup's, a watch from an old resourceVersion answered 410 Expired); a store in use, a
//! non-empty store and a truncated file refused; a stopped server's store backed up directly;
//! in a cluster, `/backup` authorized by SubjectAccessReview as a non-resource path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::cluster::TestCluster;
use support::control_plane::rbac::{Rule, Subject, User};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer, printed, run_binary};

const CRONTABS: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name},
           "spec": {"cronSpec": "* * * * */5", "image": format!("image-of-{name}")}})
}

/// A backup through the server's `/backup`, as the development admin.
fn backup_through(server: &TestServer, file: &Path) -> Output {
    let pki = &server.pki;
    run_binary(&[
        "backup",
        "--server",
        &format!("https://127.0.0.1:{}", server.port),
        "--certificate-authority",
        pki.serving_ca().to_str().unwrap(),
        "--client-certificate",
        pki.path("admin.crt").to_str().unwrap(),
        "--client-key",
        pki.path("admin.key").to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ])
}

/// The header and the object lines of a backup file.
fn read_backup(file: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
    let header = lines.next().unwrap();
    (header, lines.filter(|l| l["type"] == "object").collect())
}

/// Every CronTab by name, without its resourceVersion.
fn objects(client: &Client) -> BTreeMap<String, Value> {
    let list = client.get(CRONTABS).unwrap().json();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            o["metadata"].as_object_mut().unwrap().remove("resourceVersion");
            (o["metadata"]["name"].as_str().unwrap().to_string(), o)
        })
        .collect()
}

fn rv(value: &Value) -> u64 {
    value["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

#[test]
fn an_online_backup_restores_into_a_new_server_and_old_resource_versions_expire() {
    let mut server = TestServer::start(&[CRONTAB_CRD]);
    let admin = Client::admin(&server);
    for i in 0..30 {
        assert_eq!(admin.send_json("POST", CRONTABS, &crontab(&format!("seed{i}"))).status, 201);
    }
    let old_rv = rv(&admin.get(CRONTABS).unwrap().json());

    // A writer creates and updates while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
    let writer = {
        let (admin, stop, acknowledged) = (admin.clone(), stop.clone(), acknowledged.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("w{i}");
                let created = admin.send_json("POST", CRONTABS, &crontab(&name));
                assert_eq!(created.status, 201, "{}", created.text());
                acknowledged.lock().unwrap().push((name, rv(&created.json())));
                i += 1;
            }
        })
    };
    while acknowledged.lock().unwrap().len() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("crontabs.backup");
    let out = backup_through(&server, &file);
    assert!(out.status.success(), "{}", printed(&out));
    std::thread::sleep(std::time::Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();

    let (header, lines) = read_backup(&file);
    let revision = header["revision"].as_u64().unwrap();
    assert_eq!(header["backend"], "sled");
    assert!(
        header["state"].as_array().unwrap().iter().any(|s| s["key"]
            .as_str()
            .unwrap()
            .starts_with("crd-apiserver/stored-versions/crontabs.stable.example.com")),
        "{header}"
    );
    // The server's own serveddefinitions objects are in it too.
    assert!(lines.iter().any(|l| l["key"].as_str().unwrap().starts_with("/crd-apiserver.io/serveddefinitions/")));
    let in_backup: BTreeMap<String, u64> = lines
        .iter()
        .filter(|l| l["key"].as_str().unwrap().starts_with("/stable.example.com/crontabs/default/"))
        .map(|l| (l["key"].as_str().unwrap().rsplit('/').next().unwrap().to_string(), l["revision"].as_u64().unwrap()))
        .collect();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.iter().any(|(_, r)| *r > revision), "the writer went on after the backup's revision");
    for (name, written) in &acknowledged {
        assert_eq!(
            in_backup.contains_key(name),
            *written <= revision,
            "{name} written at {written}, backup at {revision}"
        );
    }
    let expected: BTreeMap<String, Value> =
        objects(&admin).into_iter().filter(|(name, _)| in_backup.contains_key(name)).collect();
    assert_eq!(expected.len(), in_backup.len());

    // Without credentials the backup is refused, and no file is left.
    let anonymous = run_binary(&[
        "backup",
        "--server",
        &format!("https://127.0.0.1:{}", server.port),
        "--certificate-authority",
        server.pki.serving_ca().to_str().unwrap(),
        "-o",
        work.path().join("anonymous").to_str().unwrap(),
    ]);
    assert!(!anonymous.status.success());
    assert!(
        printed(&anonymous).contains("the server answered 401") || printed(&anonymous).contains("answered 403"),
        "{}",
        printed(&anonymous)
    );
    assert!(!work.path().join("anonymous").exists() && !work.path().join("anonymous.partial").exists());

    // The running server's own store cannot be read or restored into behind its back.
    let data = server.data_dir();
    let locked =
        run_binary(&["backup", "--storage", data.to_str().unwrap(), "-o", work.path().join("x").to_str().unwrap()]);
    assert!(!locked.status.success() && printed(&locked).contains("--server"), "{}", printed(&locked));
    let busy = run_binary(&["restore", file.to_str().unwrap(), "--storage", data.to_str().unwrap(), "--replace"]);
    assert!(!busy.status.success() && printed(&busy).contains("stop the server"), "{}", printed(&busy));

    // Restored into a new store, a new server serves exactly the backup.
    let mut restored = TestServer::prepare(&[CRONTAB_CRD], None);
    let target = restored.data_dir();
    let out = run_binary(&["restore", file.to_str().unwrap(), "--storage", target.to_str().unwrap()]);
    assert!(out.status.success(), "{}", printed(&out));
    assert!(printed(&out).contains(&format!("restored {} objects", lines.len())), "{}", printed(&out));
    restored.spawn(&[]);
    let client = Client::admin(&restored);
    assert_eq!(objects(&client), expected);
    let list = client.get(CRONTABS).unwrap().json();
    for item in list["items"].as_array().unwrap() {
        let name = item["metadata"]["name"].as_str().unwrap();
        assert_eq!(rv(item), in_backup[name], "{name} keeps its resourceVersion");
    }
    // A watch from a resourceVersion of before the restore is told 410 Expired.
    let watch = client.get(&format!("{CRONTABS}?watch=1&resourceVersion={old_rv}&timeoutSeconds=2")).unwrap();
    let first: Value = serde_json::from_str(watch.text().lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ERROR", "{first}");
    assert_eq!(first["object"]["code"], 410, "{first}");
    assert_eq!(first["object"]["reason"], "Expired", "{first}");
    let paged = client.get(&format!("{CRONTABS}?resourceVersion={old_rv}&resourceVersionMatch=Exact")).unwrap();
    assert_eq!(paged.status, 410, "{}", paged.text());
    // New writes go above every revision the old server handed out.
    let newest_acknowledged = acknowledged.iter().map(|(_, r)| *r).max().unwrap();
    let created = client.send_json("POST", CRONTABS, &crontab("after-restore"));
    assert_eq!(created.status, 201, "{}", created.text());
    assert!(rv(&created.json()) > newest_acknowledged + 1_000_000, "{}", rv(&created.json()));
    restored.stop();

    // A store that holds objects is refused unless told.
    let again = run_binary(&["restore", file.to_str().unwrap(), "--storage", target.to_str().unwrap()]);
    assert!(!again.status.success() && printed(&again).contains("not empty"), "{}", printed(&again));

    // A stopped server's store is backed up directly, and a cut copy is refused.
    server.stop();
    let offline = work.path().join("offline.backup");
    let out = run_binary(&["backup", "--storage", data.to_str().unwrap(), "-o", offline.to_str().unwrap()]);
    assert!(out.status.success(), "{}", printed(&out));
    let (header, lines) = read_backup(&offline);
    assert!(header["revision"].as_u64().unwrap() >= newest_acknowledged);
    let crontabs = lines.iter().filter(|l| l["key"].as_str().unwrap().starts_with("/stable.example.com/")).count();
    assert_eq!(crontabs, 30 + acknowledged.len());
    let bytes = std::fs::read(&offline).unwrap();
    let cut = work.path().join("cut.backup");
    std::fs::write(&cut, &bytes[..bytes.len() - 40]).unwrap();
    let fresh = work.path().join("fresh");
    let refused = run_binary(&["restore", cut.to_str().unwrap(), "--storage", fresh.to_str().unwrap()]);
    assert!(!refused.status.success(), "{}", printed(&refused));
    assert!(
        printed(&refused).contains("truncated") && printed(&refused).contains("nothing was restored"),
        "{}",
        printed(&refused)
    );
    assert!(!fresh.exists(), "the store was touched");
}

#[test]
fn in_a_cluster_the_backup_path_is_authorized_by_subject_access_review() {
    let cluster = TestCluster::start(&[CRONTAB_CRD]);
    let work = tempfile::tempdir().unwrap();
    let backup_as = |token: &str| {
        let token_file = work.path().join(format!("{token}.token"));
        std::fs::write(&token_file, token).unwrap();
        let file = work.path().join(format!("{token}.backup"));
        let out = run_binary(&[
            "backup",
            "--server",
            &format!("https://127.0.0.1:{}", cluster.server.port),
            "--certificate-authority",
            cluster.server.pki.serving_ca().to_str().unwrap(),
            "--token-file",
            token_file.to_str().unwrap(),
            "-o",
            file.to_str().unwrap(),
        ]);
        (out, file)
    };
    cluster.plane.add_user("viewer-token", User::new("viewer", &["viewers"]));
    let (refused, file) = backup_as("viewer-token");
    assert!(!refused.status.success());
    assert!(
        printed(&refused).contains("403 Forbidden: forbidden: User \"viewer\" cannot get path \"/backup\""),
        "{}",
        printed(&refused)
    );
    assert!(!file.exists());
    cluster.plane.add_user("operator-token", User::new("operator", &["backup-operators"]));
    cluster.plane.add_rule(Rule::paths(
        "backup",
        vec![Subject::Group("backup-operators".into())],
        &["get"],
        &["/backup"],
    ));
    let (out, file) = backup_as("operator-token");
    assert!(out.status.success(), "{}", printed(&out));
    let (header, _) = read_backup(&file);
    assert_eq!(header["format"], "crd-apiserver-backup");
}
