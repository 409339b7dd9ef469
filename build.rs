//! Build facts for `/version`, as Kubernetes' version info carries them: the git commit, whether
//! the tree had uncommitted changes, and the build date. A build outside a git checkout (a
//! source tarball) leaves the commit and tree state empty, as Kubernetes' own builds do.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// A Unix time as `2006-01-02T15:04:05Z` (UTC), the format of Kubernetes' `buildDate`.
fn rfc3339(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3_600, rest % 3_600 / 60, rest % 60)
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
    println!("cargo:rustc-env=CRD_APISERVER_BUILD_DATE={}", rfc3339(now));
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
