//! The `apiextensions.k8s.io/v1` CustomResourceDefinition API of the double, as kube-apiserver
//! serves it: a cluster-scoped resource with the `status` subresource; get, list (label and
//! field selectors, `limit`/`continue` at one resourceVersion, `resourceVersion` with `Exact`),
//! watch (`watch`), create, update (compare-and-swap on `metadata.resourceVersion`, which an
//! update must carry), patch (JSON merge and strategic merge, which are the same for this type,
//! and JSON patch), delete (the cleanup finalizer and the Terminating condition first, then the
//! finalizer controller's pass) and deletecollection; Tables for kubectl. Writes go through
//! `strategy` (defaults, checks, status) and share the double's global resourceVersion and
//! event log. Objects of the definitions are not served here.
//!
//! `set_crd_outage` on the control plane makes every request answer 503 and ends the watches;
//! `compact_crds` makes older resourceVersions expire (410), `end_crd_watches` ends watches.

pub mod strategy;
pub mod watch;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine;
use bytes::Bytes;
use crd_apiserver::api::selectors::{FieldSelector, LabelSelector};
use serde_json::{Value, json};

use super::rbac::Attributes;
use super::respond::{self, Response};
use super::state::{Event, Objects, State, lock};
use strategy::Failure;

pub const GROUP: &str = "apiextensions.k8s.io";
pub const RESOURCE: &str = "customresourcedefinitions";
pub const API_VERSION: &str = "apiextensions.k8s.io/v1";
/// The finalizer kube-apiserver puts on a definition being deleted until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The request's query, as the handlers read it.
pub struct Query<'a>(pub &'a [(String, String)]);

impl Query<'_> {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }

    /// The label and field selectors (field: `metadata.name` only, as for every resource).
    pub fn selectors(&self) -> Result<Selection, Failure> {
        let labels = LabelSelector::parse(self.get("labelSelector").unwrap_or_default())
            .map_err(|e| Failure::bad_request(e.message))?;
        let fields =
            FieldSelector::parse(self.get("fieldSelector").unwrap_or_default(), &["metadata.name".to_string()])
                .map_err(|e| Failure::bad_request(e.message))?;
        Ok(Selection { labels, fields })
    }
}

/// Which definitions a list or watch selects.
pub struct Selection {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selection {
    pub fn matches(&self, crd: &Value) -> bool {
        self.labels.matches_object(crd)
            && self.fields.matches(|field| match field {
                "metadata.name" => crd["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                _ => String::new(),
            })
    }

    fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

/// Serves a request to `/apis/apiextensions.k8s.io/v1/customresourcedefinitions...` whose
/// attributes were authorized.
pub fn serve(
    state: &Arc<State>,
    attrs: &Attributes,
    query: &[(String, String)],
    accept: &str,
    content_type: &str,
    body: Bytes,
) -> Response {
    if state.crd_outage.load(Ordering::SeqCst) {
        return respond::status(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
            None,
        );
    }
    if attrs.resource != RESOURCE || !matches!(attrs.subresource.as_str(), "" | "status") {
        return respond::path_not_found();
    }
    let query = Query(query);
    let status = attrs.subresource == "status";
    let result = match attrs.verb.as_str() {
        "get" => get(state, &attrs.name).ok_or_else(|| Failure::not_found(&attrs.name)),
        "list" if !status => return list(state, &query, accept),
        "watch" if !status => return watch::serve(state, &query),
        "create" if !status => decode(&body).and_then(|crd| create(state, crd, query.dry_run())),
        "update" => decode(&body).and_then(|crd| update(state, &attrs.name, crd, status, query.dry_run())),
        "patch" => patch(state, &attrs.name, content_type, &body, status, query.dry_run()),
        "delete" if !status => delete(state, &attrs.name, &body),
        "deletecollection" if !status => return delete_collection(state, &query),
        _ => {
            return respond::status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                Some(json!({})),
            );
        }
    };
    match result {
        Ok(crd) if attrs.verb == "create" => respond::json(201, &crd),
        Ok(crd) if attrs.verb == "get" && accept.contains("as=Table") => {
            let revision = crd["metadata"]["resourceVersion"].clone();
            respond::json(200, &table(&json!({"metadata": {"resourceVersion": revision}, "items": [crd]})))
        }
        Ok(crd) => respond::json(200, &crd),
        Err(failure) => failure.response(),
    }
}

fn decode(body: &[u8]) -> Result<Value, Failure> {
    let value: Value = serde_json::from_slice(body)
        .or_else(|_| serde_saphyr::from_slice::<Value>(body))
        .map_err(|e| Failure::bad_request(format!("the body of the request could not be decoded: {e}")))?;
    if !value.is_object() {
        return Err(Failure::bad_request("the body of the request is not an object"));
    }
    let (api_version, kind) =
        (value["apiVersion"].as_str().unwrap_or_default(), value["kind"].as_str().unwrap_or_default());
    if (!api_version.is_empty() && api_version != API_VERSION)
        || (!kind.is_empty() && kind != "CustomResourceDefinition")
    {
        return Err(Failure::bad_request(format!(
            "the API version in the data ({api_version}) does not match the expected API version ({API_VERSION})"
        )));
    }
    Ok(value)
}

pub fn get(state: &State, name: &str) -> Option<Value> {
    lock(&state.objects).crds.get(name).cloned()
}

/// Writes a definition (or, with `None`, deletes it) under the lock: a new resourceVersion, the
/// event with the previous object.
fn record(state: &State, objects: &mut Objects, name: &str, next: Option<Value>) -> Value {
    objects.revision += 1;
    let previous = objects.crds.get(name).cloned();
    let (kind, mut object) = match (next, &previous) {
        (Some(next), Some(_)) => ("MODIFIED", next),
        (Some(next), None) => ("ADDED", next),
        (None, Some(previous)) => ("DELETED", previous.clone()),
        (None, None) => return Value::Null,
    };
    object["metadata"]["resourceVersion"] = json!(objects.revision.to_string());
    if kind == "DELETED" {
        objects.crds.remove(name);
    } else {
        objects.crds.insert(name.to_string(), object.clone());
    }
    let event = Event { revision: objects.revision, resource: RESOURCE, kind, object: object.clone(), previous };
    objects.log.push(event.clone());
    let _ = state.events.send(event);
    object
}

fn with_type_meta(mut crd: Value) -> Value {
    crd["apiVersion"] = json!(API_VERSION);
    crd["kind"] = json!("CustomResourceDefinition");
    if !crd["metadata"].is_object() {
        crd["metadata"] = json!({});
    }
    crd
}

/// The controllers' status pass after a write (naming, establishing), as its own write.
fn run_controllers(state: &State, objects: &mut Objects, name: &str) {
    if let Some(next) = objects.crds.get(name).and_then(strategy::controllers_status) {
        record(state, objects, name, Some(next));
    }
}

/// `POST`: the created definition as the create answered it (before the controllers' status).
pub fn create(state: &State, crd: Value, dry_run: bool) -> Result<Value, Failure> {
    let mut crd = with_type_meta(crd);
    strategy::default(&mut crd);
    strategy::prepare_for_create(&mut crd);
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(Failure::invalid(
            "",
            &[strategy::FieldError { field: "metadata.name".into(), kind: strategy::ErrorKind::Required }],
        ));
    }
    let errors = strategy::validate(&crd);
    if !errors.is_empty() {
        return Err(Failure::invalid(&name, &errors));
    }
    let mut objects = lock(&state.objects);
    if objects.crds.contains_key(&name) {
        return Err(Failure::already_exists(&name));
    }
    if dry_run {
        return Ok(crd);
    }
    let created = record(state, &mut objects, &name, Some(crd));
    run_controllers(state, &mut objects, &name);
    Ok(created)
}

/// Stores a definition as it is (defaults and the controllers' status applied, nothing
/// checked): one that an older kube-apiserver accepted and that later checks would refuse,
/// which a cluster keeps serving.
pub fn put_unchecked(state: &State, crd: Value) -> Value {
    let mut crd = with_type_meta(crd);
    strategy::default(&mut crd);
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut objects = lock(&state.objects);
    match objects.crds.get(&name).cloned() {
        Some(old) => {
            let _ = strategy::prepare_for_update(&old, &mut crd);
        }
        None => strategy::prepare_for_create(&mut crd),
    }
    record(state, &mut objects, &name, Some(crd));
    run_controllers(state, &mut objects, &name);
    objects.crds.get(&name).cloned().unwrap_or_default()
}

/// `PUT` of a definition or (`status`) of its status.
pub fn update(state: &State, name: &str, sent: Value, status: bool, dry_run: bool) -> Result<Value, Failure> {
    let sent = with_type_meta(sent);
    let sent_name = sent["metadata"]["name"].as_str().unwrap_or_default();
    if sent_name != name {
        return Err(Failure::bad_request(format!(
            "the name of the object ({sent_name}) does not match the name on the URL ({name})"
        )));
    }
    let expected = sent["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
    let mut objects = lock(&state.objects);
    let current = objects.crds.get(name).cloned().ok_or_else(|| Failure::not_found(name))?;
    if expected.is_empty() {
        // The strategy does not allow unconditional updates.
        let error = strategy::FieldError {
            field: "metadata.resourceVersion".into(),
            kind: strategy::ErrorKind::Invalid("0x0".into(), "must be specified for an update".into()),
        };
        return Err(Failure::invalid(name, &[error]));
    }
    if expected != current["metadata"]["resourceVersion"].as_str().unwrap_or_default() {
        return Err(Failure::conflict(name));
    }
    let (mut next, errors) = if status {
        strategy::prepare_for_status_update(&current, &sent)
    } else {
        let mut next = sent;
        strategy::default(&mut next);
        let errors = strategy::prepare_for_update(&current, &mut next);
        (next, errors)
    };
    if !errors.is_empty() {
        return Err(Failure::invalid(name, &errors));
    }
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    // An update that changes nothing is not written (no new resourceVersion, no event).
    if next == current || dry_run {
        return Ok(next);
    }
    let deleting = next["metadata"].get("deletionTimestamp").is_some();
    let finalized = next["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty);
    if deleting && finalized {
        return Ok(record(state, &mut objects, name, None));
    }
    let stored = record(state, &mut objects, name, Some(next));
    run_controllers(state, &mut objects, name);
    Ok(stored)
}

/// `PATCH`: the patch applied to the current object, then an update at its resourceVersion
/// (a patch that names another resourceVersion conflicts).
pub fn patch(
    state: &State,
    name: &str,
    content_type: &str,
    body: &[u8],
    status: bool,
    dry_run: bool,
) -> Result<Value, Failure> {
    let current = get(state, name).ok_or_else(|| Failure::not_found(name))?;
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let mut patched = current.clone();
    match media {
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body).map_err(|e| Failure::bad_request(e.to_string()))?;
            json_patch::merge(&mut patched, &patch);
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch =
                serde_json::from_slice(body).map_err(|e| Failure::bad_request(e.to_string()))?;
            json_patch::patch(&mut patched, &patch).map_err(|e| Failure {
                code: 422,
                reason: "Invalid",
                message: e.to_string(),
                details: json!({}),
            })?;
        }
        _ => {
            return Err(Failure {
                code: 415,
                reason: "UnsupportedMediaType",
                message: format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (the double does not serve {media})"
                ),
                details: json!({}),
            });
        }
    }
    if patched["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
        return Err(Failure::conflict(name));
    }
    patched["metadata"]["name"] = json!(name);
    update(state, name, patched, status, dry_run)
}

/// `DELETE`: the first marks the definition deleted (deletionTimestamp, the cleanup finalizer,
/// Terminating) and answers it; the finalizer controller's pass follows (`finalize`).
/// Preconditions (uid, resourceVersion) in the body's DeleteOptions are checked.
pub fn delete(state: &State, name: &str, body: &[u8]) -> Result<Value, Failure> {
    let options: Value = if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or_default() };
    let marked = {
        let mut objects = lock(&state.objects);
        let current = objects.crds.get(name).cloned().ok_or_else(|| Failure::not_found(name))?;
        let preconditions = &options["preconditions"];
        for (key, field) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
            if let Some(wanted) = preconditions[key].as_str()
                && wanted != current["metadata"][key]
            {
                return Err(Failure {
                    code: 409,
                    reason: "Conflict",
                    message: format!(
                        "Operation cannot be fulfilled on {RESOURCE}.{GROUP} \"{name}\": Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {}",
                        current["metadata"][key].as_str().unwrap_or_default()
                    ),
                    details: json!({"name": name, "group": GROUP, "kind": RESOURCE}),
                });
            }
        }
        if options["dryRun"].as_array().is_some_and(|d| d.iter().any(|v| v == "All")) {
            return Ok(current);
        }
        let mut next = current.clone();
        strategy::mark_deleted(&mut next);
        if next == current { current } else { record(state, &mut objects, name, Some(next)) }
    };
    finalize(state, name);
    Ok(marked)
}

/// The finalizer controller's pass over a deleted definition: its objects are deleted (the
/// double serves none here), then the cleanup finalizer goes, and with the last finalizer the
/// definition.
pub fn finalize(state: &State, name: &str) {
    let mut objects = lock(&state.objects);
    let Some(current) = objects.crds.get(name).cloned() else { return };
    if current["metadata"].get("deletionTimestamp").is_none() {
        return;
    }
    let mut next = current;
    if let Some(finalizers) = next["metadata"]["finalizers"].as_array_mut() {
        finalizers.retain(|f| f != CLEANUP_FINALIZER);
    }
    if next["metadata"]["finalizers"].as_array().is_none_or(Vec::is_empty) {
        record(state, &mut objects, name, None);
    } else {
        record(state, &mut objects, name, Some(next));
    }
}

fn delete_collection(state: &State, query: &Query<'_>) -> Response {
    let selection = match query.selectors() {
        Ok(selection) => selection,
        Err(failure) => return failure.response(),
    };
    let names: Vec<String> = lock(&state.objects)
        .crds
        .values()
        .filter(|c| selection.matches(c))
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    let items: Vec<Value> = names.iter().filter_map(|name| delete(state, name, b"").ok()).collect();
    let revision = lock(&state.objects).revision;
    respond::json(
        200,
        &json!({"kind": "CustomResourceDefinitionList", "apiVersion": API_VERSION, "metadata": {"resourceVersion": revision.to_string()}, "items": items}),
    )
}

/// The definitions as they were at `revision`, from the event log.
pub fn snapshot(objects: &Objects, revision: u64) -> BTreeMap<String, Value> {
    let mut crds = BTreeMap::new();
    for event in objects.log.iter().filter(|e| e.resource == RESOURCE && e.revision <= revision) {
        let name = event.object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if event.kind == "DELETED" {
            crds.remove(&name);
        } else {
            crds.insert(name, event.object.clone());
        }
    }
    crds
}

/// A continue token as kube-apiserver writes one: the list's revision and the key to go on
/// from.
fn continue_token(revision: u64, after: &str) -> String {
    let inner = json!({"v": "meta.k8s.io/v1", "rv": revision, "start": format!("{after}\u{0}")});
    base64::engine::general_purpose::STANDARD.encode(inner.to_string())
}

fn parse_continue(token: &str) -> Result<(u64, String), Failure> {
    let invalid = |why: &str| Failure::bad_request(format!("continue key is not valid: {why}"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(token)
        .map_err(|_| invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let inner: Value = serde_json::from_slice(&bytes)
        .map_err(|_| invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let revision = inner["rv"]
        .as_u64()
        .ok_or_else(|| invalid("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    Ok((revision, inner["start"].as_str().unwrap_or_default().to_string()))
}

/// `GET` of the collection: a `CustomResourceDefinitionList` (or a Table for kubectl).
fn list(state: &State, query: &Query<'_>, accept: &str) -> Response {
    match list_page(state, query) {
        Ok(list) if accept.contains("as=Table") => respond::json(200, &table(&list)),
        Ok(list) => respond::json(200, &list),
        Err(failure) => failure.response(),
    }
}

pub fn list_page(state: &State, query: &Query<'_>) -> Result<Value, Failure> {
    let selection = query.selectors()?;
    let objects = lock(&state.objects);
    let (revision, start) = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => parse_continue(token)?,
        None => match (query.get("resourceVersionMatch"), query.get("resourceVersion")) {
            (Some("Exact"), Some(rv)) => {
                let rv =
                    rv.parse::<u64>().map_err(|_| Failure::bad_request(format!("invalid resource version: {rv}")))?;
                (rv, String::new())
            }
            _ => (objects.revision, String::new()),
        },
    };
    let compacted = state.crd_compacted.load(Ordering::SeqCst);
    if revision < compacted {
        let message = if query.get("continue").is_some_and(|c| !c.is_empty()) {
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.".to_string()
        } else {
            format!("too old resource version: {revision} ({compacted})")
        };
        return Err(Failure { code: 410, reason: "Expired", message, details: json!({}) });
    }
    let all = if revision == objects.revision { objects.crds.clone() } else { snapshot(&objects, revision) };
    drop(objects);
    let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
    let selected: Vec<(String, Value)> = all
        .into_iter()
        .filter(|(name, _)| start.is_empty() || name.as_str() >= start.as_str())
        .filter(|(_, c)| selection.matches(c))
        .collect();
    let take = limit.unwrap_or(selected.len()).min(selected.len());
    let rest = selected.len() - take;
    let last = selected.get(take.wrapping_sub(1)).map(|(name, _)| name.clone()).unwrap_or_default();
    let items: Vec<Value> = selected.into_iter().take(take).map(|(_, crd)| crd).collect();
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if rest > 0 {
        metadata["continue"] = json!(continue_token(revision, &last));
        if selection.is_empty() {
            metadata["remainingItemCount"] = json!(rest);
        }
    }
    Ok(json!({"kind": "CustomResourceDefinitionList", "apiVersion": API_VERSION, "metadata": metadata, "items": items}))
}

/// A list as the Table kube-apiserver's default table convertor gives for this type.
fn table(list: &Value) -> Value {
    let rows: Vec<Value> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|crd| {
            let meta = crd["metadata"].clone();
            json!({"cells": [meta["name"], meta["creationTimestamp"]], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}})
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list["metadata"],
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", "priority": 0},
            {"name": "Created At", "type": "date", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata", "priority": 0},
        ],
        "rows": rows,
    })
}
