//! House rules checked as a test: every source file says what it owns; the lower layers stay
//! free of HTTP and of the layers above them; URL paths are built in one place.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The text of a file before its unit tests.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

#[test]
fn every_file_has_a_module_header() {
    let missing: Vec<_> = sources(&src())
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().trim_start().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a //! header: {missing:?}");
}

#[test]
fn lower_layers_stay_free_of_http_and_upper_layers() {
    // (module directory, what it must not use)
    let rules: &[(&str, &[&str])] = &[
        (
            "store",
            &["hyper", "http::", "crate::server", "crate::api", "crate::schema", "crate::cel", "crate::definitions"],
        ),
        ("schema", &["hyper", "http::", "crate::server", "crate::api", "crate::store"]),
        ("cel", &["hyper", "http::", "crate::server", "crate::api", "crate::store"]),
        ("definitions", &["hyper", "crate::server", "crate::api", "crate::store"]),
        ("conversion", &["crate::server", "crate::api", "crate::store"]),
        ("fieldmanager", &["hyper", "http::", "crate::server", "crate::api", "crate::store", "crate::definitions"]),
        ("core", &["crate::"]),
        // Metrics are a leaf: everything records into them, they call nothing back.
        (
            "metrics",
            &[
                "hyper",
                "crate::server",
                "crate::api",
                "crate::store",
                "crate::definitions",
                "crate::schema",
                "crate::cel",
                "crate::auth",
                "crate::kube",
                "crate::admission",
                "crate::conversion",
                "crate::cli",
            ],
        ),
        // Authentication decides from headers and certificates; the network is `kube`'s.
        ("auth", &["hyper", "crate::kube", "crate::server", "crate::api", "crate::store"]),
        ("kube", &["crate::server", "crate::api", "crate::store"]),
        // Logs set up the subscriber and its formats; requests are the server's to describe.
        (
            "logs",
            &["hyper::", "http::", "crate::server", "crate::api", "crate::store", "crate::kube", "crate::admission"],
        ),
        // The version lifecycle keeps records in the store and serves nothing itself.
        ("lifecycle", &["hyper::", "crate::server", "crate::cli"]),
        // An impact analysis reads the store and the definitions; it serves nothing itself.
        ("impact", &["hyper::", "crate::server", "crate::cli"]),
        // A takeover drives the store and the main apiserver; it serves nothing itself.
        ("takeover", &["hyper::", "crate::server", "crate::cli"]),
        // Admission decides from attributes and objects; it never serves or stores.
        ("admission", &["hyper::", "crate::server", "crate::api", "crate::store", "crate::kube"]),
    ];
    let mut violations = Vec::new();
    for (module, banned) in rules {
        let dir = src().join(module);
        if !dir.exists() {
            continue;
        }
        for file in sources(&dir) {
            let code = code_of(&file);
            for word in *banned {
                // `core` may refer to itself.
                let hits = code
                    .lines()
                    .filter(|l| l.contains(word) && !(*module == "core" && l.contains("crate::core")))
                    .count();
                if hits > 0 {
                    violations.push(format!("{} uses {word}", file.display()));
                }
            }
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
}

#[test]
fn api_paths_are_built_in_core_paths() {
    let offenders: Vec<_> = sources(&src())
        .into_iter()
        .filter(|p| !p.ends_with("core/paths.rs"))
        .filter(|p| {
            code_of(p)
                .lines()
                .any(|l| !l.trim_start().starts_with("//") && (l.contains("\"/apis/") || l.contains("/apis/{")))
        })
        .collect();
    assert!(offenders.is_empty(), "URL paths built outside core/paths.rs: {offenders:?}");
}

#[test]
fn no_stubs() {
    let stubs: Vec<_> = sources(&src())
        .into_iter()
        .filter(|p| {
            let code = code_of(p);
            code.contains("todo!(") || code.contains("unimplemented!(")
        })
        .collect();
    assert!(stubs.is_empty(), "{stubs:?}");
}
