//! What a request is about, parsed once from its method, path and query, as Kubernetes'
//! `RequestInfoFactory` parses it: verb, API group and version, namespace, resource, name,
//! subresource.

/// The decoded query string of a request. Keys may repeat; the first value wins for lookups,
/// as Go's `url.Values.Get` does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Query {
        let pairs = raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
        Query(pairs)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    pub fn all(&self, key: &str) -> impl Iterator<Item = &str> {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// Sets `key` to `value`, in place of every value it had.
    pub fn set(&mut self, key: &str, value: String) {
        self.0.retain(|(k, _)| k != key);
        self.0.push((key.to_string(), value));
    }
}

/// Parses a boolean as Go's `strconv.ParseBool`.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The request attributes authorization and routing work from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub is_resource_request: bool,
    /// The path with its percent-escapes decoded (without the query), as Go's `URL.Path`:
    /// what authorization names and routing splits.
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection; for
    /// non-resource requests the lower-cased HTTP method.
    pub verb: String,
    /// `api` or `apis` for resource requests.
    pub api_prefix: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// Path segments from the resource on (`resource/name/subresource/...`).
    pub parts: Vec<String>,
    /// The raw `fieldSelector` and `labelSelector` of a list, watch or deletecollection
    /// (authorization passes them on in SubjectAccessReviews).
    pub field_selector: String,
    pub label_selector: String,
}

impl RequestInfo {
    /// Parses a request the way k8s.io/apiserver does, from the path as received (its escapes
    /// decoded first, as Go's server decodes them before any handler). Errors for a malformed
    /// escape and for `/watch/` or `/proxy/` prefixes without a resource.
    pub fn parse(method: &http::Method, raw_path: &str, query: &Query) -> Result<RequestInfo, String> {
        let path = crate::core::paths::unescape(raw_path)
            .map_err(|e| format!("invalid URL escape {}", crate::core::field::go_quote(&e.0)))?;
        let mut info = RequestInfo {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let segments = crate::core::paths::segments(&path);
        let mut parts: &[&str] = &segments;
        if parts.len() < 3 {
            return Ok(info);
        }
        let prefix = match parts.first().copied() {
            Some(p @ ("api" | "apis")) => p,
            _ => return Ok(info),
        };
        parts = parts.get(1..).unwrap_or_default();
        let mut group = "";
        if prefix == "apis" {
            if parts.len() < 3 {
                return Ok(info);
            }
            group = parts.first().copied().unwrap_or_default();
            parts = parts.get(1..).unwrap_or_default();
        }
        info.is_resource_request = true;
        info.api_prefix = prefix.to_string();
        info.api_group = group.to_string();
        info.api_version = parts.first().copied().unwrap_or_default().to_string();
        parts = parts.get(1..).unwrap_or_default();

        let first = parts.first().copied().unwrap_or_default();
        if first == "watch" || first == "proxy" {
            if parts.len() < 2 {
                return Err(format!("unable to determine kind and namespace from url, {path}"));
            }
            info.verb = first.to_string();
            parts = parts.get(1..).unwrap_or_default();
        } else {
            info.verb = match *method {
                http::Method::POST => "create",
                http::Method::GET | http::Method::HEAD => "get",
                http::Method::PUT => "update",
                http::Method::PATCH => "patch",
                http::Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }

        if parts.first() == Some(&"namespaces") {
            if let Some(ns) = parts.get(1) {
                info.namespace = ns.to_string();
                if parts.len() > 2 && !matches!(parts.get(2), Some(&"status") | Some(&"finalize")) {
                    parts = parts.get(2..).unwrap_or_default();
                }
            }
        }
        info.parts = parts.iter().map(|s| s.to_string()).collect();
        if parts.len() >= 3 && info.verb != "proxy" {
            info.subresource = parts.get(2).copied().unwrap_or_default().to_string();
        }
        if parts.len() >= 2 {
            info.name = parts.get(1).copied().unwrap_or_default().to_string();
        }
        if let Some(resource) = parts.first() {
            info.resource = resource.to_string();
        }

        if info.name.is_empty() && info.verb == "get" {
            // As Kubernetes converts a query boolean: `watch=maybe` watches.
            let watch = query.get("watch").map(super::strconv::query_bool);
            info.verb = if watch == Some(true) { "watch" } else { "list" }.to_string();
            if let Some(name) = query.get("fieldSelector").and_then(exact_name_in_field_selector) {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_string();
        }
        if matches!(info.verb.as_str(), "list" | "watch" | "deletecollection") {
            info.field_selector = query.get("fieldSelector").unwrap_or_default().to_string();
            info.label_selector = query.get("labelSelector").unwrap_or_default().to_string();
        }
        Ok(info)
    }
}

/// The name a field selector pins with `metadata.name=X` (or `==`), when it is a valid path
/// segment, as `RequiresExactMatch("metadata.name")` finds it.
pub fn exact_name_in_field_selector(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (key, value) = term.split_once("==").or_else(|| term.split_once('='))?;
        if key.trim() != "metadata.name" || value.starts_with('=') || key.ends_with('!') {
            return None;
        }
        let value = value.trim();
        let valid = !value.is_empty() && value != "." && value != ".." && !value.contains('/') && !value.contains('%');
        valid.then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[allow(clippy::too_many_arguments)] // The request and every attribute expected of it.
    fn check(method: Method, path: &str, query: &str, verb: &str, ns: &str, resource: &str, name: &str, sub: &str) {
        let q = Query::parse(Some(query));
        let info = RequestInfo::parse(&method, path, &q).unwrap();
        assert!(info.is_resource_request, "{path}");
        assert_eq!(
            (
                info.verb.as_str(),
                info.namespace.as_str(),
                info.resource.as_str(),
                info.name.as_str(),
                info.subresource.as_str()
            ),
            (verb, ns, resource, name, sub),
            "{method} {path}?{query}"
        );
    }

    #[test]
    fn resource_requests() {
        let base = "/apis/stable.example.com/v1";
        check(Method::GET, &format!("{base}/namespaces/default/crontabs"), "", "list", "default", "crontabs", "", "");
        check(Method::GET, &format!("{base}/crontabs"), "watch=1", "watch", "", "crontabs", "", "");
        check(Method::GET, &format!("{base}/crontabs"), "watch=true", "watch", "", "crontabs", "", "");
        check(Method::GET, &format!("{base}/crontabs"), "watch=false", "list", "", "crontabs", "", "");
        check(Method::GET, &format!("{base}/namespaces/a/crontabs/x"), "", "get", "a", "crontabs", "x", "");
        check(
            Method::PUT,
            &format!("{base}/namespaces/a/crontabs/x/status"),
            "",
            "update",
            "a",
            "crontabs",
            "x",
            "status",
        );
        check(Method::POST, &format!("{base}/namespaces/a/crontabs"), "", "create", "a", "crontabs", "", "");
        check(
            Method::DELETE,
            &format!("{base}/namespaces/a/crontabs"),
            "",
            "deletecollection",
            "a",
            "crontabs",
            "",
            "",
        );
        check(Method::DELETE, &format!("{base}/namespaces/a/crontabs/x"), "", "delete", "a", "crontabs", "x", "");
        check(Method::PATCH, &format!("{base}/widgets/w/scale"), "", "patch", "", "widgets", "w", "scale");
        check(
            Method::GET,
            &format!("{base}/namespaces/a/crontabs"),
            "fieldSelector=metadata.name%3Dx",
            "list",
            "a",
            "crontabs",
            "x",
            "",
        );
        check(Method::GET, &format!("{base}/watch/namespaces/a/crontabs"), "", "watch", "a", "crontabs", "", "");
    }

    #[test]
    fn empty_segments_are_segments_as_kubernetes_splits_paths() {
        let base = "/apis/stable.example.com/v1";
        // The empty segment is the resource; `crontabs` becomes a name. Nothing here may
        // stand for the collection `namespaces/bad/crontabs`.
        check(Method::DELETE, &format!("{base}/namespaces/bad//crontabs"), "", "delete", "bad", "", "crontabs", "");
        check(Method::DELETE, &format!("{base}/namespaces//crontabs"), "", "deletecollection", "", "crontabs", "", "");
        check(
            Method::DELETE,
            &format!("{base}/namespaces/a/crontabs//x"),
            "",
            "deletecollection",
            "a",
            "crontabs",
            "",
            "x",
        );
        check(Method::GET, &format!("{base}/namespaces/a/crontabs/"), "", "list", "a", "crontabs", "", "");
        assert_eq!(crate::core::paths::segments("/"), Vec::<&str>::new());
        assert_eq!(crate::core::paths::segments("//a//b/"), vec!["a", "", "b"]);
    }

    #[test]
    fn escaped_segments_are_decoded_before_the_path_is_split() {
        let base = "/apis/stable.example.com/v1";
        check(
            Method::GET,
            &format!("{base}/namespaces/de%66ault/crontabs/exist%73"),
            "",
            "get",
            "default",
            "crontabs",
            "exists",
            "",
        );
        check(Method::GET, &format!("{base}/namespaces/a/cron%74abs"), "", "list", "a", "crontabs", "", "");
        // An escaped slash separates segments, as any slash does once Go decoded the path.
        check(
            Method::PUT,
            &format!("{base}/namespaces/a/crontabs/x%2Fstatus"),
            "",
            "update",
            "a",
            "crontabs",
            "x",
            "status",
        );
        let info = RequestInfo::parse(&Method::GET, "/heal%74hz", &Query::default()).unwrap();
        assert_eq!(info.path, "/healthz");
        assert_eq!(
            RequestInfo::parse(&Method::GET, &format!("{base}/crontabs/a%zz"), &Query::default()),
            Err("invalid URL escape \"%zz\"".to_string())
        );
    }

    #[test]
    fn non_resource_requests() {
        for path in [
            "/apis",
            "/apis/stable.example.com",
            "/apis/stable.example.com/v1",
            "/api",
            "/api/v1",
            "/healthz",
            "/openapi/v2",
        ] {
            let info = RequestInfo::parse(&Method::GET, path, &Query::default()).unwrap();
            assert!(!info.is_resource_request, "{path}");
            assert_eq!(info.verb, "get");
        }
    }

    #[test]
    fn query_keeps_first_value() {
        let q = Query::parse(Some("a=1&a=2&b=x%20y"));
        assert_eq!(q.get("a"), Some("1"));
        assert_eq!(q.get("b"), Some("x y"));
        assert_eq!(q.all("a").count(), 2);
    }
}
