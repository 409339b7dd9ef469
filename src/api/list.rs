//! LIST of a collection: list options (`limit`, `continue`, `resourceVersion`,
//! `resourceVersionMatch`), label and field selectors, and continue tokens.

use base64::Engine;
use http::Response;
use serde_json::{Value, json};

use super::Api;
use super::body::RespBody;
use super::call::Call;
use super::errors;
use super::negotiate::negotiate;
use super::objects;
use super::present;
use super::selectors::{FieldSelector, LabelSelector, field_text};
use crate::core::field::FieldError;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::store::{self, Freshness, ListOptions, Revision, Store, key};

/// Items read per store call when selectors filter what comes back.
const FILTERED_PAGE: usize = 500;

/// The selectors of a list or watch.
pub struct Filter {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn of(call: &Call) -> Result<Filter, ApiError> {
        let labels = LabelSelector::parse(call.query.get("labelSelector").unwrap_or_default())?;
        let fields =
            FieldSelector::parse(call.query.get("fieldSelector").unwrap_or_default(), &supported_fields(call))?;
        Ok(Filter { labels, fields })
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches_object(object)
            && self.fields.matches(|field| match field {
                "metadata.name" => objects::name(object).to_string(),
                "metadata.namespace" => objects::namespace(object).to_string(),
                path => field_text(object, path),
            })
    }
}

/// Field labels a resource supports: name, namespace (namespaced only) and the version's
/// selectable fields.
pub fn supported_fields(call: &Call) -> Vec<String> {
    let mut fields = vec!["metadata.name".to_string()];
    if call.served.definition.namespaced() {
        fields.push("metadata.namespace".to_string());
    }
    fields.extend(call.served.version.selectable_fields.iter().cloned());
    fields
}

/// Parses a resourceVersion parameter.
pub fn parse_revision(text: &str) -> Result<Revision, ApiError> {
    crate::core::strconv::parse_uint(text)
        .map_err(|e| ApiError::bad_request(format!("invalid resource version: {}", invalid_resource_version(text, &e))))
}

/// `resourceVersion: Invalid value: "abc": strconv.ParseUint: ...`, as the storage layer words
/// a `resourceVersion` it cannot read.
pub fn invalid_resource_version(text: &str, why: &str) -> String {
    FieldError::invalid(crate::core::field::Path::new("resourceVersion"), text, why).to_string()
}

/// The integer options of a list or watch, read as Kubernetes reads its `ListOptions` from
/// the query (a refusal is Go's `strconv` text): `timeoutSeconds`, then `limit`.
pub fn list_options(call: &Call) -> Result<(Option<i64>, Option<i64>), ApiError> {
    let int = |name: &str| call.query.get(name).map(crate::core::strconv::parse_int).transpose();
    let timeout = int("timeoutSeconds").map_err(ApiError::bad_request)?;
    let limit = int("limit").map_err(ApiError::bad_request)?;
    Ok((timeout, limit))
}

/// A continue token as Kubernetes encodes it: the list's revision (a signed 64-bit number in
/// Kubernetes' encoding, so larger ones are refused like any other malformed token) and the
/// last key returned, relative to the resource.
#[derive(Debug, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
    /// Ours, not Kubernetes': how many items followed the page that made the token, so that
    /// the next page of the same list (at the same revision) knows its `remainingItemCount`
    /// without counting the rest of the collection again.
    #[serde(default)]
    remaining: Option<u64>,
}

const TOO_OLD_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn encode_continue(revision: Revision, start: &str, remaining: Option<u64>) -> String {
    let mut token = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": start});
    if let Some(remaining) = remaining {
        crate::api::objects::put(&mut token, "remaining", json!(remaining));
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// A decoded continue token: the key to start after (relative to the resource) and the
/// revision to read at (`None`: the newest, which a negative revision asks for).
#[derive(Debug, PartialEq)]
struct Continuation {
    start: String,
    revision: Option<Revision>,
    /// The items that followed the previous page, when its token says.
    remaining: Option<u64>,
}

/// Decodes a continue token with the checks and messages of Kubernetes' storage layer; every
/// failure is a 400 `invalid continue token: continue key is not valid...`.
fn decode_continue(text: &str) -> Result<Continuation, ApiError> {
    let invalid = |why: &str| ApiError::bad_request(format!("invalid continue token: continue key is not valid{why}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).map_err(|e| invalid(&format!(": {e}")))?;
    let token: ContinueToken = serde_json::from_slice(&raw).map_err(|e| invalid(&format!(": {e}")))?;
    if token.v != "meta.k8s.io/v1" {
        return Err(invalid(&format!(": server does not recognize this encoded version {}", token.v)));
    }
    if token.rv == 0 {
        return Err(invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)"));
    }
    if token.start.is_empty() {
        return Err(invalid(": encoded start key empty (version meta.k8s.io/v1)"));
    }
    // A key that is not already in its cleanest form could reach outside the resource.
    let rooted = if token.start.starts_with('/') { token.start.clone() } else { format!("/{}", token.start) };
    if crate::core::paths::clean(&rooted) != rooted {
        return Err(invalid(&format!(": {}", token.start)));
    }
    let start = rooted.get(1..).unwrap_or_default().to_string();
    Ok(Continuation { start, revision: u64::try_from(token.rv).ok(), remaining: token.remaining })
}

/// Where a list starts: the revision to read at and the key to start after.
struct Start {
    revision: Option<Revision>,
    /// Wait for the store to reach this revision first (NotOlderThan semantics).
    at_least: Option<Revision>,
    /// How fresh the latest state must be when no revision is given.
    freshness: Freshness,
    start_after: Option<String>,
    /// What followed the previous page of this list (at `revision`), from its token.
    remaining: Option<u64>,
}

fn start_of(call: &Call) -> Result<Start, ApiError> {
    let rv = call.query.get("resourceVersion").unwrap_or_default();
    let rvm = call.query.get("resourceVersionMatch").unwrap_or_default();
    if let Some(token) = call.query.get("continue").filter(|c| !c.is_empty()) {
        let token = decode_continue(token)?;
        if !rv.is_empty() && rv != "0" {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
        }
        let start_after = format!("{}{}", key_root(call), token.start);
        // A count is only good at the revision it was made at.
        let remaining = token.remaining.filter(|_| token.revision.is_some());
        return Ok(Start {
            revision: token.revision,
            at_least: None,
            freshness: Freshness::Consistent,
            start_after: Some(start_after),
            remaining,
        });
    }
    if call.query.get("sendInitialEvents").is_some() {
        return Err(list_options_invalid("sendInitialEvents", "sendInitialEvents is forbidden for list"));
    }
    match (rv, rvm) {
        ("", "") => Ok(Start {
            revision: None,
            at_least: None,
            freshness: Freshness::Consistent,
            start_after: None,
            remaining: None,
        }),
        ("", _) => Err(list_options_invalid(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (rv, "Exact") => {
            let revision = parse_revision(rv)?;
            if revision == 0 {
                return Err(list_options_invalid(
                    "resourceVersionMatch",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
            Ok(Start {
                revision: Some(revision),
                at_least: None,
                freshness: Freshness::Consistent,
                start_after: None,
                remaining: None,
            })
        }
        (rv, "" | "NotOlderThan") => {
            let revision = parse_revision(rv)?;
            Ok(Start {
                revision: None,
                at_least: (revision > 0).then_some(revision),
                // "0" (any state) and "N" (not older than N) may be answered from a cache.
                freshness: Freshness::NotOlderThan(revision),
                start_after: None,
                remaining: None,
            })
        }
        (_, other) => {
            let error = crate::core::field::FieldError::not_supported(
                crate::core::field::Path::new("resourceVersionMatch"),
                other,
                &["Exact", "NotOlderThan", ""],
            );
            Err(ApiError::invalid(&crate::core::gvr::GroupKind::new("meta.k8s.io", "ListOptions"), "", &[error]))
        }
    }
}

/// A 422 about list options, as Kubernetes words it.
pub fn list_options_invalid(field: &str, message: &str) -> ApiError {
    let error = crate::core::field::FieldError::forbidden(crate::core::field::Path::new(field), message);
    ApiError::invalid(&crate::core::gvr::GroupKind::new("meta.k8s.io", "ListOptions"), "", &[error])
}

/// The key prefix continue tokens are relative to (the resource, across namespaces).
fn key_root(call: &Call) -> String {
    let d = &call.served.definition;
    key::resource_prefix(&d.group, &d.plural)
}

/// How long a read or watch at a revision the store has not reached waits for it.
const TOO_LARGE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits briefly for the store to reach `revision`, as Kubernetes' watch cache does; then
/// answers 504 with `ResourceVersionTooLarge`.
pub async fn wait_for_revision(api: &Api, call: &Call, revision: Revision) -> Result<(), ApiError> {
    if api.store().wait_for_revision(revision, TOO_LARGE_WAIT).await {
        return Ok(());
    }
    let current = api.store().current_revision();
    Err(errors::storage(store::Error::TooLarge { requested: revision, current }, call, ""))
}

pub async fn list(api: &Api, call: &Call) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), true)?;
    let filter = Filter::of(call)?;
    let limit = list_options(call)?.1.unwrap_or(0);
    let limit = usize::try_from(limit).ok().filter(|l| *l > 0);
    let start = start_of(call)?;
    if let Some(revision) = start.at_least {
        wait_for_revision(api, call, revision).await?;
    }
    let prefix = call.prefix();
    let mut items = present::ListItems::new(call, output)?;
    let matches = |object: &Value| filter.matches(object);
    let keep: Option<&(dyn Fn(&Value) -> bool + Sync)> = if filter.is_empty() { None } else { Some(&matches) };
    let mut revision = start.revision;
    let mut start_after = start.start_after;
    let mut continue_from: Option<String> = None;
    // Kubernetes counts what a limit leaves out only when no selector filters the list. The
    // store counts it for a list's first page; later pages take the count of the page before
    // from their token and subtract what they return, instead of counting the rest again.
    let count_remaining = filter.is_empty() && limit.is_some();
    let counted_before = start.remaining.filter(|_| count_remaining);
    let mut remaining = None;
    let page_limit = if filter.is_empty() { limit } else { Some(limit.unwrap_or(FILTERED_PAGE).max(FILTERED_PAGE)) };
    if let Some(expired) = revision.and_then(|r| api.below_floor(call, r)) {
        return Err(if call.query.has("continue") {
            ApiError::expired(TOO_OLD_CONTINUE)
        } else {
            errors::storage(expired, call, "")
        });
    }
    'pages: loop {
        let options = ListOptions {
            revision,
            start_after: start_after.clone(),
            limit: page_limit,
            count_remaining: count_remaining && counted_before.is_none(),
            freshness: start.freshness,
        };
        let page = api.store().list(&prefix, options).await.map_err(|e| match e {
            store::Error::Expired { .. } if call.query.has("continue") => ApiError::expired(TOO_OLD_CONTINUE),
            other => errors::storage(other, call, ""),
        })?;
        request_scope::end(Phase::Store);
        revision = Some(page.revision);
        let count = page.items.len();
        let mut converted = present::convert_page(call, &page.items)?.map(Vec::into_iter);
        for (i, kv) in page.items.into_iter().enumerate() {
            match converted.as_mut().and_then(Iterator::next) {
                Some(object) => items.add_object(object, keep)?,
                None => items.add(call, &kv.value, kv.revision, keep)?,
            };
            if limit.is_some_and(|l| items.len() >= l) {
                if i + 1 < count || page.more {
                    continue_from = Some(kv.key);
                    remaining = match counted_before {
                        Some(before) => Some(before.saturating_sub(items.len() as u64)),
                        None => page.remaining.filter(|_| count_remaining),
                    };
                }
                break 'pages;
            }
            start_after = Some(kv.key);
        }
        request_scope::end(Phase::Encode);
        if !page.more {
            break;
        }
    }
    let revision = revision.unwrap_or_else(|| api.store().current_revision());
    let token = continue_from.map(|k| encode_continue(revision, key::relative_to_resource(&k), remaining));
    let response = items.into_response(call, output, present::list_metadata(revision, token, remaining));
    request_scope::end(Phase::Encode);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "default/x", None);
        let decoded = decode_continue(&token).unwrap();
        assert_eq!(decoded, Continuation { start: "default/x".into(), revision: Some(42), remaining: None });
        let counted = decode_continue(&encode_continue(42, "default/x", Some(7))).unwrap();
        assert_eq!(counted.remaining, Some(7));
    }

    fn token(json: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn crafted_continue_tokens_are_refused_as_kubernetes_refuses_them() {
        let refused = |text: &str| decode_continue(text).map(|c| panic!("accepted {c:?}")).unwrap_err();
        let cases = [
            ("not base64!".to_string(), "continue key is not valid: "),
            (token("{"), "continue key is not valid: "),
            (token(r#"{"v":"meta.k8s.io/v1","rv":18446744073709551615,"start":"a/x"}"#), "continue key is not valid: "),
            (token(r#"{"v":"v2","rv":1,"start":"a/x"}"#), "server does not recognize this encoded version v2"),
            (token(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a/x"}"#), "incorrect encoded start resourceVersion"),
            (token(r#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#), "encoded start key empty"),
            (token(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../x"}"#), "continue key is not valid: ../x"),
            (token(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"a//x"}"#), "continue key is not valid: a//x"),
        ];
        for (text, expected) in cases {
            let error = refused(&text);
            assert_eq!(error.code, 400, "{text}");
            assert!(
                error.message.starts_with("invalid continue token: continue key is not valid"),
                "{}",
                error.message
            );
            assert!(error.message.contains(expected), "{text}: {}", error.message);
        }
    }

    #[test]
    fn a_negative_continue_revision_reads_the_newest_state() {
        let decoded = decode_continue(&token(r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"/a/x"}"#)).unwrap();
        assert_eq!(decoded, Continuation { start: "a/x".into(), revision: None, remaining: None });
    }
}
