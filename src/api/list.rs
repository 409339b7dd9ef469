//! LIST of a collection: list options (`limit`, `continue`, `resourceVersion`,
//! `resourceVersionMatch`) validated as Kubernetes validates them, label and field selectors,
//! and paging (the continue tokens themselves are `api::continue_token`'s).

use http::Response;
use serde_json::Value;

use super::Api;
use super::body::RespBody;
use super::call::Call;
use super::continue_token;
use super::errors;
use super::negotiate::negotiate;
use super::objects;
use super::present;
use super::selectors::{FieldSelector, LabelSelector, field_text};
use crate::core::field::{FieldError, Path};
use crate::core::gvr::GroupKind;
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

const TOO_OLD_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

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

/// `ValidateListOptions` for a list: every problem in one 422, before anything is read (a
/// continue token included), as kube-apiserver's list handler validates.
fn validate_list_options(call: &Call) -> Result<(), ApiError> {
    let query = &call.query;
    let rv = query.get("resourceVersion").unwrap_or_default();
    let rvm = query.get("resourceVersionMatch").unwrap_or_default();
    let match_path = || Path::new("resourceVersionMatch");
    let mut errors = Vec::new();
    if !rvm.is_empty() {
        if rv.is_empty() {
            errors.push(FieldError::forbidden(
                match_path(),
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if query.get("continue").is_some_and(|c| !c.is_empty()) {
            errors.push(FieldError::forbidden(
                match_path(),
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if rvm != "Exact" && rvm != "NotOlderThan" {
            errors.push(FieldError::not_supported(match_path(), rvm, &["Exact", "NotOlderThan", ""]));
        }
        if rvm == "Exact" && rv == "0" {
            errors.push(FieldError::forbidden(
                match_path(),
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    // Any value is a boolean, so the parameter alone sets the option.
    if query.get("sendInitialEvents").is_some() {
        errors.push(FieldError::forbidden(Path::new("sendInitialEvents"), "sendInitialEvents is forbidden for list"));
    }
    if errors.is_empty() { Ok(()) } else { Err(ApiError::invalid(&list_options_kind(), "", &errors)) }
}

fn start_of(call: &Call) -> Result<Start, ApiError> {
    validate_list_options(call)?;
    let rv = call.query.get("resourceVersion").unwrap_or_default();
    let rvm = call.query.get("resourceVersionMatch").unwrap_or_default();
    if let Some(token) = call.query.get("continue").filter(|c| !c.is_empty()) {
        let token = continue_token::decode(token)?;
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
    // Validated: a match is `Exact` or `NotOlderThan`, and comes with a resourceVersion.
    match (rv, rvm) {
        ("", _) => Ok(Start {
            revision: None,
            at_least: None,
            freshness: Freshness::Consistent,
            start_after: None,
            remaining: None,
        }),
        (rv, "Exact") => Ok(Start {
            revision: Some(parse_revision(rv)?),
            at_least: None,
            freshness: Freshness::Consistent,
            start_after: None,
            remaining: None,
        }),
        (rv, _) => {
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
    }
}

/// What a 422 about list options names, as Kubernetes words it.
pub fn list_options_kind() -> GroupKind {
    GroupKind::new("meta.k8s.io", "ListOptions")
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
        items.reserve_page(&page.items);
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
    let token = continue_from.map(|k| continue_token::encode(revision, key::relative_to_resource(&k), remaining));
    let response = items.into_response(call, output, present::list_metadata(revision, token, remaining));
    request_scope::end(Phase::Encode);
    response
}
