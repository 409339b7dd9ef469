//! kube-apiserver's own serving of custom resources, for the definitions the double holds
//! (`crd_api`) whose APIService is local: objects in memory under the double's global
//! resourceVersion (so that what a takeover moves has the main apiserver's revisions), get,
//! list (`limit`/`continue` at one resourceVersion: a token whose revision the resource has
//! changed since answers 410, as a compacted one), create, update (compare-and-swap on
//! `metadata.resourceVersion`, uid checked), the `status` subresource, delete (finalizers: a
//! deletionTimestamp first, gone once they are cleared); `dryRun=All` stores nothing. Writes
//! pass the validating admission policies of the shape a takeover creates (`admission`).
//! Also SelfSubjectReview. No watch, no Table, no schema validation, no discovery.

use std::collections::BTreeMap;
use std::ops::Bound;

use base64::Engine;
use bytes::Bytes;
use serde_json::{Value, json};

use super::rbac::{Attributes, User};
use super::respond::{self, Response};
use super::state::{Objects, State, lock};

/// The custom objects of one resource.
#[derive(Default)]
pub struct Collection {
    /// By (namespace, name).
    pub objects: BTreeMap<(String, String), Value>,
    /// The revision of the last change (write or delete): a continue token older than it is
    /// expired.
    pub changed: u64,
}

/// Every resource's objects, and the faults a test injects.
#[derive(Default)]
pub struct Custom {
    /// By (group, plural).
    pub collections: BTreeMap<(String, String), Collection>,
    /// A list page with a continue token fails with a 500 (the main apiserver failing).
    pub fail_continue: bool,
}

/// The definition the double holds for `group`/`plural` that serves `version`: (kind,
/// namespaced, has a status subresource).
fn definition(objects: &Objects, group: &str, version: &str, plural: &str) -> Option<(String, bool, bool)> {
    let crd = objects.crds.values().find(|c| c["spec"]["group"] == group && c["spec"]["names"]["plural"] == plural)?;
    let served = crd["spec"]["versions"].as_array()?.iter().find(|v| v["name"] == version && v["served"] == true)?;
    Some((
        crd["spec"]["names"]["kind"].as_str()?.to_string(),
        crd["spec"]["scope"] == "Namespaced",
        served["subresources"].get("status").is_some(),
    ))
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn not_found(group: &str, plural: &str, name: &str) -> Response {
    respond::status(
        404,
        "NotFound",
        &format!("{plural}.{group} \"{name}\" not found"),
        Some(json!({"name": name, "group": group, "kind": plural})),
    )
}

fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Response {
    respond::status(
        409,
        "Conflict",
        &format!("Operation cannot be fulfilled on {plural}.{group} \"{name}\": {why}"),
        Some(json!({"name": name, "group": group, "kind": plural})),
    )
}

/// Serves `/apis/<g>/<v>/...` of a definition the double holds, and SelfSubjectReviews;
/// `None` for any other path.
pub fn serve(
    state: &State,
    method: &http::Method,
    path: &str,
    query: &[(String, String)],
    attrs: &Attributes,
    user: &User,
    body: &Bytes,
) -> Option<Response> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let ["apis", group, version, ..] = segments.as_slice() else { return None };
    if *group == "authentication.k8s.io" && attrs.resource == "selfsubjectreviews" && method == http::Method::POST {
        return Some(respond::json(
            201,
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {"creationTimestamp": null},
                    "status": {"userInfo": {"username": user.name, "groups": user.groups}}}),
        ));
    }
    if attrs.resource.is_empty() {
        return None;
    }
    let mut objects = lock(&state.objects);
    let (kind, namespaced, status_subresource) = definition(&objects, group, version, &attrs.resource)?;
    let get = |k: &str| query.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let dry_run = get("dryRun") == Some("All");
    let (group, plural) = (group.to_string(), attrs.resource.clone());
    let api_version = format!("{group}/{version}");
    let key = (attrs.namespace.clone(), attrs.name.clone());
    let operation = match attrs.verb.as_str() {
        "create" => "CREATE",
        "update" | "patch" => "UPDATE",
        "delete" | "deletecollection" => "DELETE",
        _ => "",
    };
    if !operation.is_empty()
        && let Err(denied) = super::admission::check(&objects, &group, &plural, operation, user)
    {
        return Some(denied);
    }
    let revision = objects.revision;
    let fail_continue = objects.custom.fail_continue;
    let collection = objects.custom.collections.entry((group.clone(), plural.clone())).or_default();
    let answer = match (attrs.verb.as_str(), attrs.subresource.as_str()) {
        ("get", "" | "status") => match collection.objects.get(&key) {
            Some(o) => respond::json(200, &with_version(o, &api_version)),
            None => not_found(&group, &plural, &attrs.name),
        },
        ("list", "") if objects_fail(get("continue"), fail_continue) => {
            respond::status(500, "InternalError", "the control-plane double was told to fail this page", None)
        }
        ("list", "") => {
            list(collection, &attrs.namespace, get("limit"), get("continue"), revision, &api_version, &kind)
        }
        ("create", "") => {
            let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                return Some(respond::status(400, "BadRequest", "the body is not a JSON object", None));
            };
            let meta = &mut object["metadata"];
            if meta["name"].as_str().unwrap_or_default().is_empty()
                && let Some(prefix) = meta["generateName"].as_str()
            {
                meta["name"] = json!(format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..5]));
            }
            let name = meta["name"].as_str().unwrap_or_default().to_string();
            if namespaced {
                meta["namespace"] = json!(attrs.namespace);
            }
            let key = (attrs.namespace.clone(), name.clone());
            if collection.objects.contains_key(&key) {
                return Some(respond::status(
                    409,
                    "AlreadyExists",
                    &format!("{plural}.{group} \"{name}\" already exists"),
                    Some(json!({"name": name, "group": group, "kind": plural})),
                ));
            }
            meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
            meta["creationTimestamp"] = json!(now());
            meta["generation"] = json!(1);
            if status_subresource && let Some(o) = object.as_object_mut() {
                o.remove("status");
            }
            object["apiVersion"] = json!(api_version);
            object["kind"] = json!(kind);
            if dry_run {
                respond::json(201, &object)
            } else {
                let stored = write(&mut objects, &group, &plural, key, object);
                respond::json(201, &stored)
            }
        }
        ("update", sub @ ("" | "status")) => {
            let Ok(sent) = serde_json::from_slice::<Value>(body) else {
                return Some(respond::status(400, "BadRequest", "the body is not a JSON object", None));
            };
            let Some(current) = collection.objects.get(&key).cloned() else {
                return Some(not_found(&group, &plural, &attrs.name));
            };
            let expected = sent["metadata"]["resourceVersion"].as_str().unwrap_or_default();
            if !expected.is_empty() && expected != current["metadata"]["resourceVersion"] {
                return Some(conflict(
                    &group,
                    &plural,
                    &attrs.name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            let sent_uid = sent["metadata"]["uid"].as_str().unwrap_or_default();
            if !sent_uid.is_empty() && sent_uid != current["metadata"]["uid"] {
                let why = format!(
                    "Precondition failed: UID in precondition: {}, UID in object meta: {sent_uid}",
                    current["metadata"]["uid"].as_str().unwrap_or_default()
                );
                return Some(conflict(&group, &plural, &attrs.name, &why));
            }
            let mut next = if sub == "status" {
                let mut next = current.clone();
                next["status"] = sent["status"].clone();
                next
            } else {
                let mut next = sent.clone();
                if status_subresource {
                    next["status"] = current["status"].clone();
                }
                let spec_changed = sent.get("spec") != current.get("spec");
                let generation = current["metadata"]["generation"].as_i64().unwrap_or(1);
                next["metadata"]["generation"] = json!(generation + i64::from(spec_changed));
                next
            };
            for field in
                ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "namespace", "name"]
            {
                next["metadata"][field] = current["metadata"][field].clone();
            }
            if let Some(meta) = next["metadata"].as_object_mut() {
                meta.retain(|_, v| !v.is_null());
            }
            next["apiVersion"] = json!(api_version);
            let gone = next["metadata"].get("deletionTimestamp").is_some()
                && next["metadata"]["finalizers"].as_array().is_none_or(|f| f.is_empty());
            if dry_run {
                respond::json(200, &next)
            } else if gone {
                let removed = remove(&mut objects, &group, &plural, &key);
                respond::json(200, &removed)
            } else {
                respond::json(200, &write(&mut objects, &group, &plural, key, next))
            }
        }
        ("delete", "") => {
            let Some(mut current) = collection.objects.get(&key).cloned() else {
                return Some(not_found(&group, &plural, &attrs.name));
            };
            if dry_run {
                respond::json(200, &current)
            } else if current["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty()) {
                if current["metadata"].get("deletionTimestamp").is_none() {
                    current["metadata"]["deletionTimestamp"] = json!(now());
                    current["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                    current = write(&mut objects, &group, &plural, key, current);
                }
                respond::json(202, &current)
            } else {
                respond::json(200, &remove(&mut objects, &group, &plural, &key))
            }
        }
        _ => respond::status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        ),
    };
    Some(answer)
}

fn objects_fail(token: Option<&str>, fail: bool) -> bool {
    fail && token.is_some_and(|t| !t.is_empty())
}

/// Stores `object` as a create would (uid, creationTimestamp, generation, resourceVersion),
/// keeping what it already carries of them; returns it.
pub fn seed(state: &State, group: &str, plural: &str, mut object: Value) -> Value {
    let mut objects = lock(&state.objects);
    let meta = &mut object["metadata"];
    if meta["uid"].is_null() {
        meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
    }
    if meta["creationTimestamp"].is_null() {
        meta["creationTimestamp"] = json!(now());
    }
    if meta["generation"].is_null() {
        meta["generation"] = json!(1);
    }
    let key = (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    );
    write(&mut objects, group, plural, key, object)
}

/// The objects of a resource the double serves itself.
pub fn objects(state: &State, group: &str, plural: &str) -> Vec<Value> {
    let objects = lock(&state.objects);
    objects
        .custom
        .collections
        .get(&(group.to_string(), plural.to_string()))
        .map(|c| c.objects.values().cloned().collect())
        .unwrap_or_default()
}

fn with_version(object: &Value, api_version: &str) -> Value {
    let mut object = object.clone();
    object["apiVersion"] = json!(api_version);
    object
}

fn write(objects: &mut Objects, group: &str, plural: &str, key: (String, String), mut object: Value) -> Value {
    objects.revision += 1;
    let revision = objects.revision;
    object["metadata"]["resourceVersion"] = json!(revision.to_string());
    let collection = objects.custom.collections.entry((group.to_string(), plural.to_string())).or_default();
    collection.changed = revision;
    collection.objects.insert(key, object.clone());
    object
}

fn remove(objects: &mut Objects, group: &str, plural: &str, key: &(String, String)) -> Value {
    objects.revision += 1;
    let revision = objects.revision;
    let collection = objects.custom.collections.entry((group.to_string(), plural.to_string())).or_default();
    collection.changed = revision;
    collection.objects.remove(key).unwrap_or(Value::Null)
}

fn list(
    collection: &Collection,
    namespace: &str,
    limit: Option<&str>,
    token: Option<&str>,
    revision: u64,
    api_version: &str,
    kind: &str,
) -> Response {
    let limit = limit.and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
    let (at, after) = match token.filter(|t| !t.is_empty()) {
        Some(token) => {
            let decoded = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(token)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            let Some(decoded) = decoded else {
                return respond::status(400, "BadRequest", "invalid continue token", None);
            };
            let at = decoded["rv"].as_u64().unwrap_or(0);
            if collection.changed > at {
                return respond::status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    None,
                );
            }
            // Kubernetes' token: the key after the resource's prefix, `<ns>/<name>` or `<name>`.
            let start = decoded["start"].as_str().unwrap_or_default();
            let after = match start.split_once('/') {
                Some((ns, name)) => (ns.to_string(), name.to_string()),
                None => (String::new(), start.to_string()),
            };
            (at, Some(after))
        }
        None => (revision, None),
    };
    let range = match &after {
        Some(after) => collection.objects.range((Bound::Excluded(after.clone()), Bound::Unbounded)),
        None => collection.objects.range::<(String, String), _>(..),
    };
    let candidates = range.filter(|((ns, _), _)| namespace.is_empty() || ns == namespace);
    let mut items: Vec<Value> = Vec::new();
    let mut more = false;
    for (_, object) in candidates {
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        items.push(with_version(object, api_version));
    }
    let token = more.then_some(()).and_then(|()| {
        let last = items.last()?;
        let ns = last["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = last["metadata"]["name"].as_str().unwrap_or_default();
        let start = if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") };
        let text = json!({"v": "meta.k8s.io/v1", "rv": at, "start": start}).to_string();
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text))
    });
    respond::json(
        200,
        &json!({"apiVersion": api_version, "kind": format!("{kind}List"),
                "metadata": {"resourceVersion": at.to_string(), "continue": token.unwrap_or_default()},
                "items": items}),
    )
}
