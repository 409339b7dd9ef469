//! Request log and audit IDs, as k8s.io/apiserver's `WithAuditInit` and `WithHTTPLogging`.
//!
//! Every request gets an audit ID: the `Audit-ID` header the aggregator sends, or a new UUID;
//! the response echoes it in `Audit-ID` (unless it already has one). At `-v=3` every request
//! gets one line (`line.rs`): when its response starts, or, for a streamed response (a
//! watch), when the stream ends. At every verbosity, a resource request slower than the
//! threshold gets a line with where its time went (the phases the API layer records in the
//! request's `core::request_scope`, which also lends the audit ID to lines written while
//! serving). With both off a request costs a clock read and its task-local scope: nothing is
//! allocated or formatted.

mod line;

use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use http::header::HeaderName;
use http::{HeaderValue, Request, Response};
use http_body::Body;

use super::on_end::on_end;
use super::{Filter, Next};
use crate::api::body::{ReqBody, RespBody};
use crate::core::request_scope;
use crate::core::user::UserInfo;
use crate::logs::verbosity::HTTPLOG;

/// The audit ID header of requests and responses (`Audit-ID`; header names are
/// case-insensitive, HTTP/2 writes them in lower case).
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

#[derive(Clone)]
pub struct RequestLog {
    /// Resource requests at least this slow are logged with their phases.
    slow: Option<Duration>,
}

impl RequestLog {
    /// `slow_threshold` zero logs no slow requests.
    pub fn new(slow_threshold: Duration) -> RequestLog {
        RequestLog { slow: (!slow_threshold.is_zero()).then_some(slow_threshold) }
    }
}

/// The request's audit ID: the one it carries, else a new random (version 4) UUID.
fn audit_id(request: &Request<ReqBody>) -> HeaderValue {
    if let Some(given) = request.headers().get(AUDIT_ID).filter(|v| !v.is_empty()) {
        return given.clone();
    }
    // Audit IDs must be unique, not secret: a per-thread generator seeded from the OS gives
    // 122 random bits without a system call per request.
    let random = uuid::Builder::from_random_bytes(fastrand::u128(..).to_ne_bytes()).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let id = random.hyphenated().encode_lower(&mut text);
    HeaderValue::from_str(id).unwrap_or(HeaderValue::from_static(""))
}

impl Filter for RequestLog {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let started = Instant::now();
        let audit_id = audit_id(&request);
        let every = tracing::enabled!(target: HTTPLOG, tracing::Level::DEBUG);
        let slow = self.slow;
        // Kept only when a line may be written; cloning them counts references.
        let seen = (every || slow.is_some()).then(|| line::Seen::of(&request));
        // The rest of the chain is a boxed future already: this future holds a pointer to it,
        // not the request (a small future stays in the allocator's per-thread cache).
        let inner = (next.0)(request);
        Box::pin(async move {
            let (response, phases, audit_id) = request_scope::scoped(audit_id, started, inner).await;
            finish(response, Logged { audit_id, seen, started, phases, every, slow })
        })
    }
}

/// What the filter knows of a request once its response has started.
struct Logged {
    audit_id: HeaderValue,
    seen: Option<line::Seen>,
    started: Instant,
    phases: request_scope::Phases,
    every: bool,
    slow: Option<Duration>,
}

/// Echoes the audit ID and writes the request's lines, if any.
fn finish(mut response: Response<RespBody>, logged: Logged) -> Response<RespBody> {
    if let http::header::Entry::Vacant(slot) = response.headers_mut().entry(AUDIT_ID) {
        // Each value is new: HTTP/2 would otherwise search HPACK's table for it and then
        // crowd the table's other entries (content types...) out with values never sent
        // again. Kept out of the table, it is sent as a literal.
        let mut echoed = logged.audit_id.clone();
        echoed.set_sensitive(true);
        slot.insert(echoed);
    }
    let Some(seen) = logged.seen else {
        return response;
    };
    let latency = logged.started.elapsed();
    let is_slow = logged.slow.is_some_and(|limit| latency >= limit);
    if !logged.every && !is_slow {
        return response;
    }
    let user = response.extensions().get::<UserInfo>().map(|u| u.name.clone()).unwrap_or_default();
    let line = seen.describe(&logged.audit_id, user, response.status().as_u16());
    if is_slow && line::traced(line.info()) {
        line.write_slow(latency, &logged.phases);
    }
    if !logged.every {
        return response;
    }
    if response.body().size_hint().exact().is_some() {
        line.write(latency);
        return response;
    }
    // A watch is logged when it ends, with its whole duration, as kube-apiserver logs it.
    let started = logged.started;
    response.map(|b| on_end(b, move |_| line.write(started.elapsed())))
}

#[cfg(test)]
mod tests;
