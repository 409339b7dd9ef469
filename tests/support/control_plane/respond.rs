//! Response helpers of the control-plane double: JSON bodies, Kubernetes Status errors, and
//! the request attributes of the double's own endpoints.

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use serde_json::{Value, json};

use super::rbac::{Attributes, User};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = UnsyncBoxBody<Bytes, BoxError>;
pub type Response = http::Response<Body>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

pub fn bytes(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response {
    http::Response::builder().status(status).header("content-type", content_type).body(full(body)).unwrap()
}

pub fn json(status: u16, value: &Value) -> Response {
    bytes(status, "application/json", serde_json::to_vec(value).unwrap())
}

/// A `Status` failure as kube-apiserver writes it.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    json(code, &body)
}

pub fn unauthorized() -> Response {
    status(401, "Unauthorized", "Unauthorized", None)
}

pub fn not_found(resource: &str, name: &str) -> Response {
    status(404, "NotFound", &format!("{resource} \"{name}\" not found"), Some(json!({"name": name, "kind": resource})))
}

pub fn path_not_found() -> Response {
    status(404, "NotFound", "the server could not find the requested resource", Some(json!({})))
}

/// RBAC's 403 for the double's own endpoints.
pub fn forbidden(user: &User, attrs: &Attributes) -> Response {
    forbidden_because(user, attrs, "")
}

/// kube-apiserver's 403 for attributes not allowed (`ForbiddenStatusError`): the resource with
/// its subresource, names quoted as Go's `%q` quotes them, then the reason if there is one.
pub fn forbidden_because(user: &User, attrs: &Attributes, reason: &str) -> Response {
    let quote = |s: &str| serde_json::to_string(s).unwrap();
    let because = if reason.is_empty() { String::new() } else { format!(": {reason}") };
    if !attrs.resource_request {
        let message =
            format!("forbidden: User {} cannot {} path {}{because}", quote(&user.name), attrs.verb, quote(&attrs.path));
        return status(403, "Forbidden", &message, Some(json!({})));
    }
    let qualified =
        if attrs.group.is_empty() { attrs.resource.clone() } else { format!("{}.{}", attrs.resource, attrs.group) };
    let subject = if attrs.name.is_empty() { qualified.clone() } else { format!("{qualified} {}", quote(&attrs.name)) };
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {}", quote(&attrs.namespace))
    };
    let message = format!(
        "{subject} is forbidden: User {} cannot {} resource {} in API group {} {scope}{because}",
        quote(&user.name),
        attrs.verb,
        quote(&resource),
        quote(&attrs.group)
    );
    // Go leaves empty fields out of the details.
    let mut details = json!({"kind": attrs.resource});
    for (key, value) in [("group", &attrs.group), ("name", &attrs.name)] {
        if !value.is_empty() {
            details[key] = json!(value);
        }
    }
    status(403, "Forbidden", &message, Some(details))
}

/// Request attributes of a core (`/api/v1/...`) or own-group path, as kube-apiserver's
/// request info would have them: verb from method, name, namespace, list/watch, and the name
/// a `metadata.name=` field selector pins.
pub fn attributes(method: &http::Method, path: &str, query: &[(String, String)]) -> Attributes {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest): (&str, &[&str]) = match segments.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (group, rest),
        _ => {
            let verb = method.as_str().to_ascii_lowercase();
            return Attributes { verb, path: path.to_string(), ..Attributes::default() };
        }
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (ns.to_string(), tail),
        _ => (String::new(), rest),
    };
    let resource = rest.first().copied().unwrap_or_default().to_string();
    let mut name = rest.get(1).copied().unwrap_or_default().to_string();
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let verb = match *method {
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if name.is_empty() => "deletecollection",
        http::Method::DELETE => "delete",
        _ if !name.is_empty() => "get",
        _ if matches!(get("watch"), Some("1" | "true")) => "watch",
        _ => "list",
    };
    if matches!(verb, "list" | "watch") {
        if let Some(pinned) = get("fieldSelector").and_then(|s| s.strip_prefix("metadata.name=")) {
            name = pinned.to_string();
        }
    }
    Attributes {
        resource_request: true,
        verb: verb.into(),
        group: group.into(),
        resource,
        subresource: rest.get(2).copied().unwrap_or_default().into(),
        namespace,
        name,
        path: path.into(),
    }
}
