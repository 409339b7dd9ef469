//! URL paths of the API, built in one place, and split into segments in one place.

use super::gvr::GroupVersion;

/// The segments of a request path as k8s.io/apiserver splits them: the leading and trailing
/// slashes are trimmed and every other slash separates a segment, so an empty segment (`a//b`)
/// stays a segment of its own and never lets a longer path stand for a shorter one.
pub fn segments(path: &str) -> Vec<&str> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() { Vec::new() } else { trimmed.split('/').collect() }
}

/// A malformed percent-escape in a request path: `%` not followed by two hexadecimal digits.
/// Go's `url.ParseRequestURI` refuses such a request before any handler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadEscape(pub String);

/// The request path with its percent-escapes decoded, as Go's `url.URL.Path` holds it: every
/// `%XX` becomes its byte (`%2F` a slash, which then separates segments as any slash does; `+`
/// stays a plus). Bytes that do not form UTF-8 become U+FFFD: no resource, namespace or name
/// that could be stored is anything but ASCII, so nothing served is conflated by it.
pub fn unescape(path: &str) -> Result<std::borrow::Cow<'_, str>, BadEscape> {
    if !path.contains('%') {
        return Ok(std::borrow::Cow::Borrowed(path));
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte != b'%' {
            decoded.push(byte);
            i += 1;
            continue;
        }
        let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        match (hex(i + 1), hex(i + 2)) {
            (Some(high), Some(low)) => {
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                i += 3;
            }
            // Go names the escape by at most three bytes from the `%`.
            _ => return Err(BadEscape(path.get(i..).unwrap_or_default().chars().take(3).collect())),
        }
    }
    Ok(std::borrow::Cow::Owned(String::from_utf8_lossy(&decoded).into_owned()))
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
    fn escapes_are_decoded_as_go_decodes_paths() {
        let cases = [
            ("/a/b", "/a/b"),
            ("/crontabs/exist%73", "/crontabs/exists"),
            ("/namespaces/de%66ault/x", "/namespaces/default/x"),
            ("/a%2Fb", "/a/b"),
            ("/a%2fb%20c+d", "/a/b c+d"),
            ("/%25", "/%"),
            ("/%ff", "/\u{fffd}"),
            ("/%C3%A9", "/\u{e9}"),
        ];
        for (raw, decoded) in cases {
            assert_eq!(unescape(raw).unwrap(), decoded, "{raw}");
        }
        for (raw, escape) in [("/a%zzb", "%zz"), ("/a%2", "%2"), ("/a%", "%"), ("/%g0", "%g0"), ("/x%4", "%4")] {
            assert_eq!(unescape(raw), Err(BadEscape(escape.to_string())), "{raw}");
        }
    }

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
