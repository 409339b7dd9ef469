//! `AdmissionReview` (admission.k8s.io v1 and v1beta1): the request sent to a webhook, the
//! call itself, and the checks kube-apiserver makes on the answer (uid, version and kind,
//! patch and patchType), with its error texts.
//!
//! Owns the wire format of one webhook call; which webhooks are called and what their answers
//! mean for the request is `mutating`/`validating`'s.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::hooks::Hook;
use super::{Error, Request};
use crate::core::status::StatusDetails;

/// The `status` of an answer: webhooks rarely set its kind or apiVersion.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub code: u16,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub details: Option<StatusDetails>,
}

/// Why a webhook call did not produce an answer to act on.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The webhook could not be called or answered unusably (`ErrCallingWebhook`): its
    /// failure policy decides. Holds the full `failed calling webhook ...` text.
    Calling(String),
    /// The request is refused whatever the failure policy says.
    Rejected(Error),
}

/// A webhook's usable answer.
#[derive(Debug, Default)]
pub struct Answer {
    pub allowed: bool,
    pub result: Option<Status>,
    /// A decoded JSON patch (mutating webhooks only).
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
}

/// The object being reviewed: what it is, in which version.
pub struct Reviewed<'a> {
    /// The version the webhook's rule matched in.
    pub version: &'a str,
    pub object: Option<&'a Value>,
    pub old: Option<&'a Value>,
}

fn user_info(request: &Request<'_>) -> Value {
    let user = request.user;
    let mut info = Map::new();
    if !user.name.is_empty() {
        info.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        info.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        info.insert("extra".into(), json!(user.extra));
    }
    Value::Object(info)
}

/// The `AdmissionReview` sent for a request, in `review_version` (`v1` or `v1beta1`).
pub fn build(review_version: &str, uid: &str, request: &Request<'_>, reviewed: &Reviewed<'_>) -> Value {
    let body = request_json(uid, request, reviewed);
    json!({"kind": "AdmissionReview", "apiVersion": format!("admission.k8s.io/{review_version}"), "request": body})
}

/// The `AdmissionRequest` of a request (also CEL's `request` variable, whose `object` and
/// `oldObject` are left out).
pub fn request_json(uid: &str, request: &Request<'_>, reviewed: &Reviewed<'_>) -> Value {
    let t = &request.target;
    let (group, version, kind) = request.kind(reviewed.version);
    let (_, request_version, request_kind) = request.kind(request.version);
    let resource_version = |v: &str| json!({"group": t.group, "version": v, "resource": t.resource});
    let mut body = Map::new();
    body.insert("uid".into(), json!(uid));
    body.insert("kind".into(), json!({"group": group, "version": version, "kind": kind}));
    body.insert("resource".into(), resource_version(reviewed.version));
    if !t.subresource.is_empty() {
        body.insert("subResource".into(), json!(t.subresource));
    }
    body.insert("requestKind".into(), json!({"group": group, "version": request_version, "kind": request_kind}));
    body.insert("requestResource".into(), resource_version(request.version));
    if !t.subresource.is_empty() {
        body.insert("requestSubResource".into(), json!(t.subresource));
    }
    if !t.name.is_empty() {
        body.insert("name".into(), json!(t.name));
    }
    if !t.namespace.is_empty() {
        body.insert("namespace".into(), json!(t.namespace));
    }
    body.insert("operation".into(), json!(request.operation.as_str()));
    body.insert("userInfo".into(), user_info(request));
    body.insert("object".into(), reviewed.object.cloned().unwrap_or(Value::Null));
    body.insert("oldObject".into(), reviewed.old.cloned().unwrap_or(Value::Null));
    body.insert("dryRun".into(), json!(request.dry_run));
    body.insert("options".into(), request.options.clone());
    Value::Object(body)
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    patch: Option<String>,
    #[serde(default)]
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<WireResponse>,
}

fn gvk_text(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

/// Checks an answer as `VerifyAdmissionResponse` does; errors are its texts.
fn verify(review_version: &str, uid: &str, mutating: bool, review: WireReview) -> Result<Answer, String> {
    let response = review.response.ok_or("webhook response was absent")?;
    let patch_bytes = response.patch.as_deref().filter(|p| !p.is_empty());
    if review_version == "v1" {
        if response.uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {:?}", response.uid));
        }
        if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}",
                gvk_text(&review.api_version, &review.kind)
            ));
        }
        if mutating {
            match (patch_bytes, response.patch_type.as_deref()) {
                (Some(_), None) => return Err("webhook returned response.patch but not response.patchType".into()),
                (None, Some(_)) => return Err("webhook returned response.patchType but not response.patch".into()),
                (Some(_), Some("")) => return Err("webhook returned invalid response.patchType of \"\"".into()),
                _ => {}
            }
        } else if patch_bytes.is_some() {
            return Err("validating webhook may not return response.patch".into());
        } else if response.patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    let mut answer =
        Answer { allowed: response.allowed, result: response.status, patch: None, warnings: response.warnings };
    if let (true, Some(text)) = (mutating, patch_bytes) {
        let patch_type = response.patch_type.as_deref().unwrap_or("JSONPatch");
        if patch_type != "JSONPatch" {
            return Err(format!("unsupported patch type {patch_type:?}"));
        }
        let raw = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?;
        let patch: json_patch::Patch = crate::core::nesting::from_slice(&raw)
            .map_err(|e| format!("received undecodable patch in webhook response: {e}"))?;
        answer.patch = Some(patch);
    }
    Ok(answer)
}

/// The message of a non-2xx answer, as client-go's REST client words it.
fn http_error(code: u16, body: &[u8]) -> String {
    if let Ok(status) = serde_json::from_slice::<Status>(body)
        && !status.message.is_empty()
    {
        return status.message;
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        format!("the server responded with the status code {code} but did not return more information")
    } else {
        format!("an error on the server ({text:?}) has prevented the request from succeeding")
    }
}

/// Calls a webhook with the review of a request and checks its answer.
pub async fn call(
    hook: &Hook,
    mutating: bool,
    request: &Request<'_>,
    reviewed: &Reviewed<'_>,
) -> Result<Answer, CallError> {
    let calling = |why: String| CallError::Calling(format!("failed calling webhook {:?}: {why}", hook.name));
    hook.check_dry_run(request.dry_run)?;
    let Some(review_version) =
        hook.review_versions.iter().find(|v| matches!(v.as_str(), "v1" | "v1beta1")).map(String::as_str)
    else {
        return Err(calling(
            "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)"
                .into(),
        ));
    };
    let (client, uri) = hook.client.as_ref().map_err(|e| calling(format!("could not get REST client: {e}")))?;
    let uid = uuid::Uuid::new_v4().to_string();
    let body = serde_json::to_vec(&build(review_version, &uid, request, reviewed))
        .map_err(|e| calling(format!("could not create admission objects: {e}")))?;
    let (code, bytes) =
        client.post(uri, body, hook.timeout).await.map_err(|e| calling(format!("failed to call webhook: {e}")))?;
    if !(200..300).contains(&code) {
        return Err(calling(format!("failed to call webhook: {}", http_error(code, &bytes))));
    }
    let review: WireReview = crate::core::nesting::from_slice(&bytes)
        .map_err(|e| calling(format!("failed to call webhook: couldn't get version/kind; json parse error: {e}")))?;
    verify(review_version, &uid, mutating, review)
        .map_err(|e| calling(format!("received invalid webhook response: {e}")))
}

/// The error of a denial (`ToStatusErr`): the webhook's status with a code of at least 400
/// and the message prefixed with who denied it.
pub fn denial(hook_name: &str, result: Option<Status>) -> Error {
    let denied_by = format!("admission webhook {hook_name:?} denied the request");
    let (code, reason, message, details) = match result {
        Some(s) => (s.code, s.reason, s.message, s.details),
        None => (0, String::new(), String::new(), None),
    };
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    Error::Denied(Box::new(super::Denial { code: code.max(400), reason, message, details }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(value: Value) -> WireReview {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn answers_are_checked_as_kubernetes_checks_them() {
        let ok = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}});
        assert!(verify("v1", "u", false, review(ok.clone())).unwrap().allowed);
        assert_eq!(verify("v1", "other", false, review(ok)).unwrap_err(), "expected response.uid=\"other\", got \"u\"");
        let wrong_kind = json!({"apiVersion": "v1", "kind": "Status", "response": {"uid": "u", "allowed": true}});
        assert_eq!(
            verify("v1", "u", false, review(wrong_kind)).unwrap_err(),
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got /v1, Kind=Status"
        );
        assert_eq!(verify("v1", "u", false, review(json!({}))).unwrap_err(), "webhook response was absent");
        let patch = base64::engine::general_purpose::STANDARD.encode(r#"[{"op":"add","path":"/a","value":1}]"#);
        let no_type = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true, "patch": patch}});
        assert_eq!(
            verify("v1", "u", true, review(no_type.clone())).unwrap_err(),
            "webhook returned response.patch but not response.patchType"
        );
        assert_eq!(
            verify("v1", "u", false, review(no_type.clone())).unwrap_err(),
            "validating webhook may not return response.patch"
        );
        // v1beta1 answers are not checked for uid or kind, and a patch is a JSON patch.
        let beta = json!({"response": {"allowed": true, "patch": patch}});
        assert!(verify("v1beta1", "u", true, review(beta)).unwrap().patch.is_some());
    }

    #[test]
    fn denials_read_as_kubernetes_words_them() {
        let status = |code, reason: &str, message: &str| Status {
            message: message.into(),
            reason: reason.into(),
            details: None,
            code,
        };
        let Error::Denied(d) = denial("deny.example.com", Some(status(0, "", "image bad"))) else { panic!() };
        let (code, message) = (d.code, d.message);
        assert_eq!(
            (code, message.as_str()),
            (400, "admission webhook \"deny.example.com\" denied the request: image bad")
        );
        let Error::Denied(d) = denial("d", Some(status(403, "Forbidden", ""))) else { panic!() };
        let (code, message, reason) = (d.code, d.message, d.reason);
        assert_eq!(
            (code, reason.as_str(), message.as_str()),
            (403, "Forbidden", "admission webhook \"d\" denied the request: Forbidden")
        );
        let Error::Denied(d) = denial("d", None) else { panic!() };
        assert_eq!(d.message, "admission webhook \"d\" denied the request without explanation");
    }
}
