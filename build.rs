//! Build facts for `/version`, as Kubernetes' version info carries them: the git commit, whether
//! the tree had uncommitted changes, and the build date. A build outside a git checkout (a
//! source tarball) leaves the commit and tree state empty, as Kubernetes' own builds do.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_default();
    let tree_state = match git(&["status", "--porcelain", "--untracked-files=no"]) {
        _ if commit.is_empty() => String::new(),
        Some(changes) if changes.is_empty() => "clean".to_string(),
        Some(_) => "dirty".to_string(),
        None => String::new(),
    };
    // SOURCE_DATE_EPOCH makes the date reproducible; otherwise it is the time of this build.
    let now = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    });
    println!("cargo:rustc-env=CRD_APISERVER_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=CRD_APISERVER_GIT_TREE_STATE={tree_state}");
    // Seconds since 1970: the server formats them (`core::time`, as it stamps objects).
    println!("cargo:rustc-env=CRD_APISERVER_BUILD_EPOCH={now}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit, a staged change, or an edited source file changes what is reported.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        for path in ["HEAD", "index", "refs"] {
            println!("cargo:rerun-if-changed={dir}/{path}");
        }
    }
    for path in ["src", "Cargo.toml", "build.rs"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
