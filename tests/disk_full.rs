//! A full disk under the store: writes fail with 507 and change nothing, reads and deletions go
//! on (the storage check passes), and once deletions or the file system make room the server
//! takes writes again by itself, without reusing a revision or keeping a refused write anywhere;
//! whoever meets the full disk first, no request waits and SIGTERM ends the server.
//!
//! The store lives on a small tmpfs mounted in a mount namespace of the server's own
//! (`unshare -m`), so the test fills a real file system without touching the machine's; the
//! test reaches that file system through `/proc/<pid>/root`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::http::Client;
use support::{CRONTAB_CRD, TestServer};

const COLLECTION: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs";

fn crontab(name: &str) -> Value {
    json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab", "metadata": {"name": name}, "spec": {"image": name}})
}

fn revision(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

/// Fills the file system holding `path` until a write fails for want of space.
fn fill(path: &PathBuf) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 64 << 10, 4 << 10, 512] {
        let block = vec![0u8; chunk];
        loop {
            match file.write_all(&block) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break,
                Err(e) => panic!("filling the store's file system: {e}"),
            }
        }
    }
    let _ = file.sync_all();
}

fn names(client: &Client) -> Vec<String> {
    let list = client.get(COLLECTION).unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    list.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until `/readyz` answers 200.
fn wait_ready(client: &Client, server: &TestServer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get("/readyz").unwrap().status != 200 {
        assert!(Instant::now() < deadline, "the store did not reopen: {}", server.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates `name` once the store takes writes again; returns the created object.
fn create_when_room(client: &Client, server: &TestServer, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let created = client.send_json("POST", COLLECTION, &crontab(name));
        match created.status {
            201 => return created.json(),
            507 => assert!(Instant::now() < deadline, "writes did not resume: {}", server.log()),
            other => panic!("create answered {other}: {}", created.text()),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_full_disk_refuses_writes_and_the_store_recovers_when_space_returns() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let data = server.data_dir();
    std::fs::create_dir_all(&data).unwrap();
    server.launcher = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=32m tmpfs "$0" && exec "$@""#,
        data.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    server.spawn(&[]);
    let client = Client::admin(&server);
    let filler = PathBuf::from(format!("/proc/{}/root{}/filler", server.pid(), data.display()));

    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let created = client.send_json("POST", COLLECTION, &crontab(&format!("before-{i}")));
        assert_eq!(created.status, 201, "{}", created.text());
        acknowledged.push(revision(&created.json()));
    }
    let last_good = *acknowledged.last().unwrap();
    fill(&filler);

    // sled buffers a little: the disk shows full at the latest by the time its buffer must
    // reach a file. Every write before that is acknowledged and kept.
    let mut kept = names(&client);
    let mut refused = None;
    for i in 0..200 {
        let name = format!("during-{i}");
        let created = client.send_json("POST", COLLECTION, &crontab(&name));
        match created.status {
            201 => kept.push(name),
            507 => {
                refused = Some((name, created.json()));
                break;
            }
            other => panic!("a write to a full disk answered {other}: {}", created.text()),
        }
    }
    let (refused, status) = refused.expect("no write was refused on a full disk");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "InsufficientStorage");
    assert_eq!(status["code"], 507);
    let message = status["message"].as_str().unwrap();
    assert_eq!(
        message,
        "the store's disk is full (No space left on device (os error 28)); writes resume by themselves once space is freed"
    );

    // Later writes fail at once with the same answer; reads go on and show only what was
    // acknowledged; the storage check fails.
    let started = Instant::now();
    let again = client.send_json("POST", COLLECTION, &crontab("while-full"));
    assert_eq!(again.status, 507, "{}", again.text());
    // At once: not after waiting for room (up to the request timeout, 60 s).
    assert!(started.elapsed() < Duration::from_secs(20));
    let update_target = client.get(&format!("{COLLECTION}/before-0")).unwrap();
    assert_eq!(update_target.status, 200);
    let mut changed = update_target.json();
    changed["spec"]["image"] = json!("changed-while-full");
    assert_eq!(client.send_json("PUT", &format!("{COLLECTION}/before-0"), &changed).status, 507);
    assert_eq!(client.get(&format!("{COLLECTION}/before-0")).unwrap().json()["spec"]["image"], "before-0");
    assert_eq!(client.get(&format!("{COLLECTION}/{refused}")).unwrap().status, 404);
    let mut listed = names(&client);
    listed.sort();
    kept.sort();
    assert_eq!(listed, kept);
    // The store stays open for reads and deletions: its check passes, as kube-apiserver's etcd
    // check passes while etcd is out of space; the reserve went to deletions.
    assert_eq!(client.get("/readyz/sled").unwrap().status, 200);
    assert_eq!(client.get("/livez").unwrap().status, 200);
    assert!(server.log().contains("the store's disk is full: released the space reserve"), "{}", server.log());
    assert!(!filler.with_file_name("crd-apiserver.reserve").exists());
    let refused_again = client.send_json("POST", COLLECTION, &crontab("while-full-2"));
    assert_eq!(refused_again.status, 507, "{}", refused_again.text());
    assert_eq!(refused_again.json()["message"], message);
    // Deletions still commit on the full disk, and stay done.
    let deleted = client.request("DELETE", &format!("{COLLECTION}/before-1"), None, None).unwrap();
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    assert_eq!(client.get(&format!("{COLLECTION}/before-1")).unwrap().status, 404);
    kept.retain(|n| n != "before-1");
    let mut listed = names(&client);
    listed.sort();
    assert_eq!(listed, kept);

    // Space returns: the server takes writes again by itself.
    std::fs::remove_file(&filler).unwrap();
    let created = create_when_room(&client, &server, "after");
    let after = revision(&created);
    // The reserve is back for the next time.
    assert_eq!(std::fs::metadata(filler.with_file_name("crd-apiserver.reserve")).unwrap().len(), 8 << 20);
    // No revision is given out twice.
    let last_acknowledged =
        kept.iter().map(|n| revision(&client.get(&format!("{COLLECTION}/{n}")).unwrap().json())).max();
    assert!(after > last_acknowledged.unwrap(), "revision {after} reused after {last_acknowledged:?}");
    assert_eq!(client.get(&format!("{COLLECTION}/{refused}")).unwrap().status, 404);
    assert_eq!(client.get(&format!("{COLLECTION}/before-0")).unwrap().json()["spec"]["image"], "before-0");

    // The watch history since the fault holds what was acknowledged, and nothing refused.
    let watch = client.get(&format!("{COLLECTION}?watch=1&resourceVersion={last_good}&timeoutSeconds=2")).unwrap();
    assert_eq!(watch.status, 200);
    let events: Vec<Value> =
        watch.text().lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    let watched: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap()))
        .collect();
    let mut expected: Vec<(&str, &str)> =
        kept.iter().filter(|n| n.starts_with("during-")).map(|n| ("ADDED", n.as_str())).collect();
    expected.push(("DELETED", "before-1"));
    expected.push(("ADDED", "after"));
    assert_eq!(watched, expected);
    server.stop();
}

#[test]
fn a_first_start_reads_the_free_space_of_the_store_it_makes() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    assert!(!server.data_dir().exists());
    server.spawn(&[]);
    assert!(server.data_dir().join("crd-apiserver.reserve").exists());
    assert!(!server.log().contains("cannot read the store's free space"), "{}", server.log());
}

/// A tmpfs in a mount namespace of its own, kept by a process of the test, that servers
/// started with `nsenter` share: unlike a namespace of the server's own, it outlives a restart.
struct Holder {
    child: std::process::Child,
}

impl Holder {
    fn mount(dir: &std::path::Path, size: &str) -> Holder {
        use std::io::BufRead;
        std::fs::create_dir_all(dir).unwrap();
        let mut child = std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size="$1" tmpfs "$0" && echo mounted && exec sleep 3600"#)
            .arg(dir)
            .arg(size)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "mounted");
        Holder { child }
    }

    /// Runs programs in the holder's mount namespace.
    fn launcher(&self) -> Vec<String> {
        vec!["nsenter".into(), format!("--mount=/proc/{}/ns/mnt", self.child.id()), "--".into()]
    }

    /// `path` as the holder's namespace sees it.
    fn inside(&self, path: &std::path::Path) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root{}", self.child.id(), path.display()))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_server_starts_on_a_full_disk() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let data = server.data_dir();
    let holder = Holder::mount(&data, "32m");
    server.launcher = holder.launcher();
    server.spawn(&[]);
    let client = Client::admin(&server);
    let reserve = holder.inside(&data.join("crd-apiserver.reserve"));
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 8 << 20, "no space reserve");
    for name in ["c0", "c1", "c2"] {
        assert_eq!(client.send_json("POST", COLLECTION, &crontab(name)).status, 201);
    }
    let filler = holder.inside(&data.join("filler"));
    fill(&filler);
    server.stop();

    // The store opens on the reserve's room: reads and deletions work, other writes wait.
    server.spawn(&[]);
    assert!(server.log().contains("released the space reserve to open the store"), "{}", server.log());
    assert!(!reserve.exists());
    assert_eq!(names(&client), ["c0", "c1", "c2"]);
    let refused = client.send_json("POST", COLLECTION, &crontab("c3"));
    assert_eq!(refused.status, 507, "{}", refused.text());
    assert_eq!(client.request("DELETE", &format!("{COLLECTION}/c0"), None, None).unwrap().status, 200);
    assert_eq!(names(&client), ["c1", "c2"]);
    server.stop();

    // Without a reserve and without room the store cannot open: the server starts all the
    // same, says why in its storage check, and opens the store once there is room.
    fill(&holder.inside(&data.join("filler-2")));
    server.spawn_live(&[]);
    let readyz = client.get("/readyz?verbose").unwrap();
    assert_eq!(readyz.status, 500, "{}", readyz.text());
    assert!(readyz.text().contains("[-]sled failed: reason withheld"), "{}", readyz.text());
    let sled = client.get("/readyz/sled").unwrap();
    assert!(sled.text().starts_with("internal server error: the store's disk is full"), "{}", sled.text());
    let list = client.get(COLLECTION).unwrap();
    assert_eq!(list.status, 507, "{}", list.text());
    std::fs::remove_file(&filler).unwrap();
    std::fs::remove_file(holder.inside(&data.join("filler-2"))).unwrap();
    wait_ready(&client, &server);
    assert_eq!(names(&client), ["c1", "c2"]);
    create_when_room(&client, &server, "c3");
    assert_eq!(names(&client), ["c1", "c2", "c3"]);
    assert_eq!(std::fs::metadata(&reserve).unwrap().len(), 8 << 20);
    server.stop();
}

/// How many times in a row the disk is filled: whether sled's own threads or the store's writer
/// meets the full disk first is a race, so one fill proves little.
const FILLS: usize = 8;

/// A CronTab of about `bytes` bytes: big enough that sled keeps its tree nodes in blob files,
/// as it does for objects of a few KiB and more.
fn padded(name: &str, bytes: usize) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name},
        "spec": {"image": name, "cronSpec": "*".repeat(bytes)}
    })
}

/// Creates objects from `writers` threads at once until each is refused; returns the names
/// created and every refusal.
fn fill_with_objects(client: &Client, server: &TestServer, prefix: &str, writers: usize) -> (Vec<String>, Vec<Value>) {
    let results: Vec<(Vec<String>, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                scope.spawn(move || {
                    let mut created = Vec::new();
                    for i in 0.. {
                        let name = format!("{prefix}-{w}-{i}");
                        let answer = client
                            .send(
                                "POST",
                                COLLECTION,
                                "application/json",
                                serde_json::to_vec(&padded(&name, 20_000)).unwrap(),
                            )
                            .unwrap_or_else(|e| panic!("{name}: {e}: {}", server.log()));
                        match answer.status {
                            201 => created.push(name),
                            507 => return (created, answer.json()),
                            other => panic!("{name} answered {other}: {}", answer.text()),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut created = Vec::new();
    let mut refusals = Vec::new();
    for (names, refusal) in results {
        created.extend(names);
        refusals.push(refusal);
    }
    (created, refusals)
}

/// Free bytes of the file system holding `path`.
fn free_bytes(path: &std::path::Path) -> u64 {
    let fs = rustix::fs::statvfs(path).unwrap();
    fs.f_bavail * fs.f_frsize
}

#[test]
fn a_disk_filled_by_writes_again_and_again_refuses_them_and_takes_them_again_after_deletions() {
    let mut server = TestServer::prepare(&[CRONTAB_CRD], None);
    let data = server.data_dir();
    let holder = Holder::mount(&data, "32m");
    server.launcher = holder.launcher();
    let store = holder.inside(&data);
    for fill in 0..FILLS {
        // Each fill on a new store: the race is between sled's threads and the writer as the
        // disk fills.
        for entry in std::fs::read_dir(&store).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() { std::fs::remove_dir_all(path).unwrap() } else { std::fs::remove_file(path).unwrap() }
        }
        server.spawn(&[]);
        // A hang guard: every answer below comes at once or the store is stuck.
        let client = Client::admin(&server).within(Duration::from_secs(30));
        let (mut stored, refusals) = fill_with_objects(&client, &server, &format!("f{fill}"), 4);
        eprintln!("fill {fill}: {} created, {} KiB free", stored.len(), free_bytes(&store) >> 10);
        for refusal in &refusals {
            assert_eq!(refusal["code"], 507, "{refusal}");
            assert_eq!(
                refusal["message"],
                "the store's disk is full (No space left on device (os error 28)); writes resume by themselves once space is freed"
            );
        }
        // Reads and deletions go on: the store's check passes.
        assert_eq!(client.get("/readyz").unwrap().status, 200, "{}", server.log());
        let mut listed = names(&client);
        listed.sort();
        stored.sort();
        assert_eq!(listed, stored, "fill {fill}");
        // Deleting three objects in ten makes room for writes again.
        for (i, name) in stored.iter().enumerate() {
            if i % 10 < 3 {
                let answer = client.request("DELETE", &format!("{COLLECTION}/{name}"), None, None).unwrap();
                assert_eq!(answer.status, 200, "deleting {name} on a full disk: {}", answer.text());
            }
        }
        eprintln!("fill {fill}: deleted, {} KiB free", free_bytes(&store) >> 10);
        let name = format!("f{fill}-after");
        let created = client.send_json("POST", COLLECTION, &padded(&name, 20_000));
        assert_eq!(created.status, 201, "{}", created.text());
        // SIGTERM ends the server (a hang guard waits for it).
        server.stop();
    }
}
