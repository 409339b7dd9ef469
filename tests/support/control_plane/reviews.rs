//! `SubjectAccessReview` and `TokenReview` as kube-apiserver answers them: the object comes
//! back (201) with the spec and a status. Reviews are answered from the rule table and the
//! token table; each call is counted, and SubjectAccessReview can be made to fail (an outage).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use serde_json::{Value, json};

use super::rbac::{Attributes, User, decide};
use super::respond::{self, Response};
use super::state::{State, lock};

fn user_of(spec: &Value) -> User {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect()).unwrap_or_default()
    };
    User {
        name: spec["user"].as_str().unwrap_or_default().into(),
        uid: spec["uid"].as_str().unwrap_or_default().into(),
        groups: strings(&spec["groups"]),
        extra: spec["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    }
}

fn parse(body: &Bytes, kind: &str) -> Result<Value, Response> {
    let review: Value = serde_json::from_slice(body)
        .map_err(|e| respond::status(400, "BadRequest", &format!("decoding {kind}: {e}"), None))?;
    if review["kind"] != kind {
        return Err(respond::status(400, "BadRequest", &format!("expected a {kind}, got {}", review["kind"]), None));
    }
    Ok(review)
}

pub fn subject_access_review(state: &Arc<State>, body: Bytes) -> Response {
    state.sar_calls.fetch_add(1, Ordering::SeqCst);
    if state.sar_outage.load(Ordering::SeqCst) {
        return respond::status(500, "InternalError", "Internal error occurred: etcdserver: request timed out", None);
    }
    let mut review = match parse(&body, "SubjectAccessReview") {
        Ok(r) => r,
        Err(response) => return response,
    };
    let spec = review["spec"].clone();
    lock(&state.sar_log).push(spec.clone());
    let resource = spec.get("resourceAttributes").is_some();
    if resource == spec.get("nonResourceAttributes").is_some() {
        let message = "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified";
        return respond::status(422, "Invalid", message, None);
    }
    let user = user_of(&spec);
    let attrs = Attributes::from_spec(&spec);
    let rules = lock(&state.rules).clone();
    review["status"] = match decide(&rules, &user, &attrs) {
        Some(binding) => json!({"allowed": true, "reason": format!("RBAC: allowed by binding \"{binding}\"")}),
        None => json!({"allowed": false}),
    };
    review["metadata"] = json!({"creationTimestamp": null});
    respond::json(201, &review)
}

pub fn token_review(state: &Arc<State>, body: Bytes) -> Response {
    state.token_review_calls.fetch_add(1, Ordering::SeqCst);
    let mut review = match parse(&body, "TokenReview") {
        Ok(r) => r,
        Err(response) => return response,
    };
    let token = review["spec"]["token"].as_str().unwrap_or_default().to_string();
    review["status"] = match lock(&state.tokens).get(&token) {
        Some(user) => {
            let mut groups = user.groups.clone();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            json!({"authenticated": true, "user": {"username": user.name, "uid": user.uid, "groups": groups, "extra": user.extra}, "audiences": ["https://kubernetes.default.svc.cluster.local"]})
        }
        None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
    };
    review["metadata"] = json!({"creationTimestamp": null});
    respond::json(201, &review)
}
