//! What an admin meets on the command line and in the README (issue 30 §4): every flag of the
//! client commands described, `backup` and `restore` without the serving replica's flags,
//! `serve --dev` started away from the repository's examples stopping with what to do, and the
//! files the README's commands name shipped (its walkthrough's object applied with kubectl).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod support;

use std::path::{Path, PathBuf};

use support::{CRONTAB_CRD, TestServer, printed, run_binary, stdout};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The flags `command --help` lists, each with its description (empty when it has none).
fn flags(command: &str) -> Vec<(String, String)> {
    let out = run_binary(&[command, "--help"]);
    assert!(out.status.success(), "{}", printed(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with('-') || line.len() - trimmed.len() > 6 {
            continue;
        }
        let name = trimmed.split([' ', ',']).find(|w| w.starts_with("--")).unwrap_or(trimmed).to_string();
        // Beside the flag (short help), or on the next line (long help).
        let description = match trimmed.split_once("  ") {
            Some((_, beside)) if !beside.trim().is_empty() => beside.trim().to_string(),
            _ => lines.get(i + 1).map(|l| l.trim().to_string()).unwrap_or_default(),
        };
        found.push((name, description));
    }
    found
}

#[test]
fn every_flag_of_the_client_commands_is_described() {
    for command in ["backup", "restore", "delete-objects", "takeover", "handback", "migrate-storage", "check"] {
        let listed = flags(command);
        assert!(listed.iter().any(|(name, _)| name == "--help"), "{command}: {listed:?}");
        for (name, description) in &listed {
            assert!(!description.is_empty() && !description.starts_with('-'), "{command} {name} has no description");
        }
    }
}

#[test]
fn backup_and_restore_offer_the_store_flags_only() {
    for command in ["backup", "restore"] {
        let names: Vec<String> = flags(command).into_iter().map(|(name, _)| name).collect();
        for store in ["--storage", "--storage-backend", "--etcd-servers", "--etcd-prefix", "--etcd-keyfile"] {
            assert!(names.iter().any(|n| n == store), "{command} lacks {store}: {names:?}");
        }
        for serving in
            ["--etcd-compaction-interval", "--watch-cache", "--leader-elect", "--leader-elect-lease-duration"]
        {
            assert!(!names.iter().any(|n| n == serving), "{command} offers {serving}, which only a server uses");
        }
    }
    // The server still takes them.
    let names: Vec<String> = flags("serve").into_iter().map(|(name, _)| name).collect();
    assert!(names.iter().any(|n| n == "--leader-elect") && names.iter().any(|n| n == "--watch-cache"));
}

#[test]
fn dev_mode_away_from_the_examples_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(support::binary())
        .current_dir(dir.path())
        .args(["serve", "--dev", "--secure-port", &support::free_port().to_string()])
        .output()
        .unwrap();
    let text = printed(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "--dev serves the definitions in manifests/examples when no --definitions is given, and {} has no \
             manifests/examples directory: run it from the repository's top directory, or give --definitions PATH",
            dir.path().canonicalize().unwrap().display()
        )),
        "{text}"
    );
    // Nothing was written where it was started.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The repository files the README's commands name: `-f FILE`, `--set-file 'KEY=FILE'`,
/// `--definitions FILE`, in its shell blocks (generated files under `certs/` excepted).
fn readme_files() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut files = Vec::new();
    let mut in_block = false;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let file = match pair[0] {
                "-f" | "--definitions" => pair[1].to_string(),
                "--set-file" => pair[1].trim_matches('\'').rsplit('=').next().unwrap_or_default().to_string(),
                _ => continue,
            };
            let generated = file.starts_with("certs/") || file.contains('$') || file.contains('<');
            if !generated && (file.contains('/') || file.ends_with(".yaml")) && !file.starts_with('-') {
                files.push(file);
            }
        }
    }
    files
}

#[test]
fn the_files_the_readme_names_exist_and_its_walkthrough_object_applies() {
    let files = readme_files();
    assert!(files.iter().any(|f| f == "manifests/examples/objects/my-crontab.yaml"), "{files:?}");
    for file in &files {
        assert!(Path::new(&root()).join(file).exists(), "README.md names {file}, which the repository lacks");
    }
    let server = TestServer::start(&[CRONTAB_CRD]);
    let object = root().join("manifests/examples/objects/my-crontab.yaml");
    let applied = server.kubectl_ok(&["apply", "-f", object.to_str().unwrap()]);
    assert_eq!(applied.trim(), "crontab.stable.example.com/my-new-cron-object created");
    let listed = server.kubectl_ok(&["get", "crontabs"]);
    assert!(listed.contains("my-new-cron-object"), "{listed}");
}
