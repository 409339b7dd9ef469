//! URL paths of the API, built in one place, and split into segments in one place.

use super::gvr::GroupVersion;

/// The segments of a request path as k8s.io/apiserver splits them: the leading and trailing
/// slashes are trimmed and every other slash separates a segment, so an empty segment (`a//b`)
/// stays a segment of its own and never lets a longer path stand for a shorter one.
pub fn segments(path: &str) -> Vec<&str> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() { Vec::new() } else { trimmed.split('/').collect() }
}

/// A slash-separated path in its shortest equivalent form, as Go's `path.Clean` gives it: no
/// empty or `.` segments, `..` folded into its parent (never above the root of a rooted path),
/// `.` for an empty result.
pub fn clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." if kept.last().is_some_and(|last| *last != "..") => {
                kept.pop();
            }
            ".." if rooted => {}
            other => kept.push(other),
        }
    }
    match (rooted, kept.is_empty()) {
        (true, _) => format!("/{}", kept.join("/")),
        (false, true) => ".".to_string(),
        (false, false) => kept.join("/"),
    }
}

/// `/apis/<group>`
pub fn group_path(group: &str) -> String {
    format!("/apis/{group}")
}

/// `/apis/<group>/<version>`
pub fn group_version_path(gv: &GroupVersion) -> String {
    format!("/apis/{}/{}", gv.group, gv.version)
}

/// The collection path of a resource: `/apis/<g>/<v>[/namespaces/<ns>]/<plural>`.
pub fn collection_path(gv: &GroupVersion, namespace: Option<&str>, plural: &str) -> String {
    match namespace {
        Some(ns) => format!("/apis/{}/{}/namespaces/{ns}/{plural}", gv.group, gv.version),
        None => format!("/apis/{}/{}/{plural}", gv.group, gv.version),
    }
}

/// The OpenAPI v3 document path of a group version, relative to the server root without the
/// leading slash, as the `/openapi/v3` index keys it: `apis/<g>/<v>`.
pub fn openapi_v3_key(gv: &GroupVersion) -> String {
    format!("apis/{}/{}", gv.group, gv.version)
}

/// Template of a path as OpenAPI documents list it.
pub fn openapi_collection_template(gv: &GroupVersion, namespaced: bool, plural: &str) -> String {
    if namespaced {
        format!("/apis/{}/{}/namespaces/{{namespace}}/{plural}", gv.group, gv.version)
    } else {
        format!("/apis/{}/{}/{plural}", gv.group, gv.version)
    }
}

/// The URL of a group version's OpenAPI v3 document, with its content hash.
pub fn openapi_v3_url(gv: &GroupVersion, hash: &str) -> String {
    format!("/openapi/v3/apis/{}/{}?hash={hash}", gv.group, gv.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_as_go_cleans_them() {
        let cases = [
            ("", "."),
            ("/", "/"),
            ("a/b", "a/b"),
            ("/a//b/", "/a/b"),
            ("/a/./b", "/a/b"),
            ("/a/../b", "/b"),
            ("/../x", "/x"),
            ("../x", "../x"),
            ("a/../..", ".."),
            ("a/..", "."),
        ];
        for (path, clean_form) in cases {
            assert_eq!(clean(path), clean_form, "{path}");
        }
    }
}
