//! What a request log line says, as kube-apiserver's httplog says it (`verb`, `URI`,
//! `latency`, `userAgent`, `audit-ID`, `srcIP`, `resp`), plus the user and the resource
//! (named as the audit log's `objectRef` names them) and, for slow requests, the phases.
//!
//! Everything here runs only when a line is written: the filter keeps cheap copies of the
//! request's method, URI and user agent (reference-counted, not allocated), and this module
//! parses and formats them afterwards.

use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderValue, Method, Request, Uri, header};

use crate::api::body::ReqBody;
use crate::core::request_info::{Query, RequestInfo};
use crate::core::request_scope::{Phase, Phases};
use crate::logs::GoDuration;
use crate::logs::verbosity::HTTPLOG;
use crate::metrics::labels::RequestLabels;
use crate::server::conn::ConnInfo;

/// The media type of server-side apply, which kube's logs and metrics call `APPLY`.
const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// Audit IDs longer than this are cut in logs (`GetAuditIDTruncated`).
const MAX_AUDIT_ID_IN_LOGS: usize = 64;

/// What the filter keeps of a request for its log lines.
pub struct Seen {
    method: Method,
    uri: Uri,
    user_agent: Option<HeaderValue>,
    apply: bool,
    remote: Option<SocketAddr>,
}

impl Seen {
    pub fn of(request: &Request<ReqBody>) -> Seen {
        let headers = request.headers();
        Seen {
            method: request.method().clone(),
            uri: request.uri().clone(),
            user_agent: headers.get(header::USER_AGENT).cloned(),
            apply: request.method() == Method::PATCH
                && headers.get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes() == APPLY_PATCH.as_bytes()),
            remote: request.extensions().get::<ConnInfo>().map(|c| c.remote),
        }
    }

    /// The request's attributes, parsed again now that a line needs them.
    pub fn describe(self, audit_id: &HeaderValue, user: String, code: u16) -> Line {
        let query = Query::parse(self.uri.query());
        let info = RequestInfo::parse(&self.method, self.uri.path(), &query).unwrap_or_default();
        let verb = normalized_verb(&self.method, &info, self.apply);
        let audit_id = String::from_utf8_lossy(audit_id.as_bytes());
        let audit_id = truncated(&audit_id, MAX_AUDIT_ID_IN_LOGS).to_string();
        Line { seen: self, info, verb, audit_id, user, code }
    }
}

/// The verb as kube-apiserver's logs and metrics write it (`NormalizedVerb`): the HTTP
/// method, with GETs of collections as `LIST`, watches as `WATCH`, apply patches as `APPLY`.
/// The metrics' labels compute it the same way (`MonitorRequest`).
pub fn normalized_verb(method: &Method, info: &RequestInfo, apply: bool) -> &'static str {
    let content_type = apply.then_some(APPLY_PATCH.as_bytes());
    RequestLabels::of(method, info, None, content_type).verb.as_str()
}

/// `text` cut to at most `limit` bytes, on a character boundary.
fn truncated(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

/// The verbs whose slow requests are logged with their phases: those kube-apiserver's
/// handlers trace (get, list, create, update, patch, delete, deletecollection); not watches.
pub fn traced(info: &RequestInfo) -> bool {
    info.is_resource_request
        && matches!(info.verb.as_str(), "get" | "list" | "create" | "update" | "patch" | "delete" | "deletecollection")
}

/// One request's log line, ready to be written.
pub struct Line {
    seen: Seen,
    info: RequestInfo,
    verb: &'static str,
    audit_id: String,
    user: String,
    code: u16,
}

fn some(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

impl Line {
    pub fn info(&self) -> &RequestInfo {
        &self.info
    }

    /// The httplog line (klog level 3).
    pub fn write(&self, latency: Duration) {
        let (seen, info) = (&self.seen, &self.info);
        let uri = seen.uri.path_and_query().map_or(seen.uri.path(), |p| p.as_str());
        tracing::debug!(
            target: HTTPLOG,
            verb = self.verb,
            URI = uri,
            latency = %GoDuration(latency),
            userAgent = seen.user_agent.as_ref().map(|v| String::from_utf8_lossy(v.as_bytes())).as_deref(),
            "audit-ID" = self.audit_id,
            srcIP = seen.remote.map(tracing::field::display),
            resp = u64::from(self.code),
            user = some(&self.user),
            apiGroup = some(&info.api_group),
            apiVersion = some(&info.api_version),
            resource = some(&info.resource),
            subresource = some(&info.subresource),
            namespace = some(&info.namespace),
            name = some(&info.name),
            "HTTP"
        );
    }

    /// The line of a request slower than the threshold (klog level 0, as kube's traces),
    /// with where its time went.
    pub fn write_slow(&self, latency: Duration, phases: &Phases) {
        let (seen, info) = (&self.seen, &self.info);
        let uri = seen.uri.path_and_query().map_or(seen.uri.path(), |p| p.as_str());
        let phase = |p: Phase| tracing::field::display(GoDuration(phases.get(p)));
        tracing::info!(
            verb = self.verb,
            URI = uri,
            latency = %GoDuration(latency),
            "audit-ID" = self.audit_id,
            resp = u64::from(self.code),
            user = some(&self.user),
            apiGroup = some(&info.api_group),
            apiVersion = some(&info.api_version),
            resource = some(&info.resource),
            subresource = some(&info.subresource),
            namespace = some(&info.namespace),
            name = some(&info.name),
            filters = phase(Phase::Filters),
            decode = phase(Phase::Decode),
            admission = phase(Phase::Admission),
            store = phase(Phase::Store),
            encode = phase(Phase::Encode),
            userAgent = seen.user_agent.as_ref().map(|v| String::from_utf8_lossy(v.as_bytes())).as_deref(),
            srcIP = seen.remote.map(tracing::field::display),
            "Slow request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verb(method: Method, target: &str, apply: bool) -> &'static str {
        let uri: Uri = target.parse().unwrap();
        let query = Query::parse(uri.query());
        let info = RequestInfo::parse(&method, uri.path(), &query).unwrap();
        normalized_verb(&method, &info, apply)
    }

    #[test]
    fn verbs_read_as_kube_apiserver_logs_them() {
        let gv = crate::core::gvr::GroupVersion::new("stable.example.com", "v1");
        let crontabs = &crate::core::paths::collection_path(&gv, Some("default"), "crontabs");
        let all_crontabs = &crate::core::paths::collection_path(&gv, None, "crontabs");
        let watch_all = all_crontabs.replace("/v1/", "/v1/watch/");
        assert_eq!(verb(Method::GET, crontabs, false), "LIST");
        assert_eq!(verb(Method::GET, all_crontabs, false), "LIST");
        assert_eq!(verb(Method::GET, &format!("{crontabs}/a"), false), "GET");
        assert_eq!(verb(Method::GET, &format!("{crontabs}?watch=true"), false), "WATCH");
        assert_eq!(verb(Method::GET, &format!("{crontabs}?watch=false"), false), "LIST");
        assert_eq!(verb(Method::GET, &watch_all, false), "WATCH");
        assert_eq!(verb(Method::POST, crontabs, false), "POST");
        assert_eq!(verb(Method::PUT, &format!("{crontabs}/a"), false), "PUT");
        assert_eq!(verb(Method::PATCH, &format!("{crontabs}/a"), false), "PATCH");
        assert_eq!(verb(Method::PATCH, &format!("{crontabs}/a"), true), "APPLY");
        assert_eq!(verb(Method::DELETE, crontabs, false), "DELETE");
        assert_eq!(verb(Method::GET, "/readyz", false), "GET");
        assert_eq!(verb(Method::GET, "/apis", false), "GET");
    }

    #[test]
    fn long_audit_ids_are_cut_for_logs() {
        assert_eq!(truncated("abc", 64), "abc");
        assert_eq!(truncated(&"x".repeat(100), 64).len(), 64);
        assert_eq!(truncated("aé", 2), "a");
    }

    #[test]
    fn only_kubernetes_traced_verbs_are_traced() {
        let info = |method: Method, path: &str| RequestInfo::parse(&method, path, &Query::default()).unwrap();
        let gv = crate::core::gvr::GroupVersion::new("stable.example.com", "v1");
        let crontabs = &crate::core::paths::collection_path(&gv, Some("default"), "crontabs");
        let all_crontabs = &crate::core::paths::collection_path(&gv, None, "crontabs");
        let watch_all = all_crontabs.replace("/v1/", "/v1/watch/");
        assert!(traced(&info(Method::GET, crontabs)));
        assert!(traced(&info(Method::POST, crontabs)));
        assert!(traced(&info(Method::DELETE, crontabs)));
        assert!(!traced(&info(Method::GET, &watch_all)));
        assert!(!traced(&info(Method::GET, "/readyz")));
    }
}
