//! Kubernetes API errors: the `Status` object, its reasons and codes, and constructors named
//! after apimachinery's `errors.New*`.
//!
//! Module errors (storage, validation, conversion, authorization) are mapped into [`ApiError`]
//! by the API layer, which knows the resource a request was about; the server writes an
//! `ApiError` as a `Status` body. No other type carries an HTTP status code.

use serde::{Deserialize, Serialize};

use super::field::{self, FieldError};
use super::gvr::{GroupKind, GroupResource};

/// `metav1.Status`, field order as Kubernetes writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub kind: String,
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// 0 (omitted, as Go's `omitempty` omits it) in a Status of success the registry made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub code: u16,
}

fn is_zero(code: &u16) -> bool {
    *code == 0
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusDetails {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    #[serde(rename = "retryAfterSeconds", default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusCause {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// A Kubernetes API error: an HTTP code, a reason, a message and optional details.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub code: u16,
    /// Usually one of Kubernetes' fixed reasons; an admission webhook's denial carries its own.
    pub reason: std::borrow::Cow<'static, str>,
    pub message: String,
    /// Boxed: errors travel in `Result`s on every request path; keep them small.
    pub details: Option<Box<StatusDetails>>,
}

impl ApiError {
    /// An error with any code and reason (prefer the named constructors).
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason: std::borrow::Cow::Borrowed(reason), message: message.into(), details: None }
    }

    /// An error whose reason and details come from elsewhere (a `Status` an admission
    /// webhook answered).
    pub fn from_parts(code: u16, reason: String, message: String, details: Option<StatusDetails>) -> Self {
        ApiError { code, reason: std::borrow::Cow::Owned(reason), message, details: details.map(Box::new) }
    }

    fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(Box::new(details));
        self
    }

    fn resource_details(resource: &GroupResource, name: &str) -> StatusDetails {
        StatusDetails {
            name: name.to_string(),
            group: resource.group.clone(),
            kind: resource.resource.clone(),
            ..StatusDetails::default()
        }
    }

    /// 404 `<resource>.<group> "<name>" not found`
    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(Self::resource_details(resource, name))
    }

    /// 404 for a path this server does not serve.
    pub fn path_not_found() -> Self {
        ApiError::new(404, "NotFound", "the server could not find the requested resource")
            .with_details(StatusDetails::default())
    }

    /// 409 `<resource>.<group> "<name>" already exists`
    pub fn already_exists(resource: &GroupResource, name: &str) -> Self {
        ApiError::new(409, "AlreadyExists", format!("{resource} \"{name}\" already exists"))
            .with_details(Self::resource_details(resource, name))
    }

    /// 409 `Operation cannot be fulfilled on <resource>.<group> "<name>": <why>`
    pub fn conflict(resource: &GroupResource, name: &str, why: &str) -> Self {
        ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {resource} \"{name}\": {why}"))
            .with_details(Self::resource_details(resource, name))
    }

    /// 422 `<Kind>.<group> "<name>" is invalid: <errors>` with one cause per error.
    pub fn invalid(kind: &GroupKind, name: &str, errors: &[FieldError]) -> Self {
        let causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: e.kind.reason().to_string(),
                message: e.body(),
                // Go's nil field.Path prints `<nil>`, and kubectl shows the cause's field.
                field: e.field.to_string(),
            })
            .collect();
        let message = if errors.is_empty() {
            format!("{kind} \"{name}\" is invalid")
        } else {
            format!("{kind} \"{name}\" is invalid: {}", field::aggregate(errors))
        };
        ApiError::new(422, "Invalid", message).with_details(StatusDetails {
            name: name.to_string(),
            group: kind.group.clone(),
            kind: kind.kind.clone(),
            causes,
            ..StatusDetails::default()
        })
    }

    /// 400 with reason BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 with reason Unauthorized.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(401, "Unauthorized", message)
    }

    /// 403 for a resource: `<resource>.<group> "<name>" is forbidden: <why>`.
    pub fn forbidden(resource: &GroupResource, name: &str, why: &str) -> Self {
        let message = if name.is_empty() {
            format!("{resource} is forbidden: {why}")
        } else {
            format!("{resource} {} is forbidden: {why}", field::go_quote(name))
        };
        ApiError::new(403, "Forbidden", message).with_details(Self::resource_details(resource, name))
    }

    /// 403 for a non-resource path: `forbidden: <why>`.
    pub fn forbidden_path(why: &str) -> Self {
        ApiError::new(403, "Forbidden", format!("forbidden: {why}")).with_details(StatusDetails::default())
    }

    /// 405 `<action> is not supported on resources of kind "<resource>.<group>"`
    pub fn method_not_supported(resource: &GroupResource, action: &str) -> Self {
        ApiError::new(405, "MethodNotAllowed", format!("{action} is not supported on resources of kind \"{resource}\""))
            .with_details(StatusDetails {
                group: resource.group.clone(),
                kind: resource.resource.clone(),
                ..StatusDetails::default()
            })
    }

    /// 405 for a path that exists but does not take this HTTP method.
    pub fn method_not_allowed() -> Self {
        ApiError::new(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            .with_details(StatusDetails::default())
    }

    /// 406 when no acceptable media type can be produced.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 410 Gone with reason Expired (too old resource versions and continue tokens).
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 413 with reason RequestEntityTooLarge.
    pub fn request_entity_too_large(message: impl Into<String>) -> Self {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    /// 415 with reason UnsupportedMediaType.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// 429 with reason TooManyRequests.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        ApiError::new(429, "TooManyRequests", message)
            .with_details(StatusDetails { retry_after_seconds: Some(retry_after_seconds), ..StatusDetails::default() })
    }

    /// 500 with reason InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        ApiError::new(500, "InternalError", format!("Internal error occurred: {message}")).with_details(StatusDetails {
            causes: vec![StatusCause { message, ..StatusCause::default() }],
            ..StatusDetails::default()
        })
    }

    /// 500 with no reason and the error's text alone: what kube-apiserver answers for an error
    /// that is not a Status (`ErrorToAPIStatus`'s fallback, `StatusReasonUnknown`), such as the
    /// field manager's plain Go errors.
    pub fn unknown(message: impl Into<String>) -> Self {
        ApiError::new(500, "", message)
    }

    /// 503 with reason ServiceUnavailable.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        ApiError::new(503, "ServiceUnavailable", message)
    }

    /// 507 for a store whose disk is full, as kube-apiserver answers etcd's "no space" alarm;
    /// Kubernetes names no reason for it, so the reason is the code's name. Retry later.
    pub fn insufficient_storage(message: impl Into<String>) -> Self {
        ApiError::new(507, "InsufficientStorage", message)
            .with_details(StatusDetails { retry_after_seconds: Some(1), ..StatusDetails::default() })
    }

    /// 504 with reason Timeout.
    pub fn timeout(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        ApiError::new(504, "Timeout", message)
            .with_details(StatusDetails { retry_after_seconds: Some(retry_after_seconds), ..StatusDetails::default() })
    }

    /// 422 Invalid as Kubernetes answers a JSON patch it cannot apply
    /// (`NewGenericServerResponse`): a fixed message and empty details; what failed is not said.
    pub fn patch_not_applicable() -> Self {
        ApiError::new(422, "Invalid", "the server rejected our request due to an error in our request")
            .with_details(StatusDetails::default())
    }

    /// Adds a cause to the details.
    pub fn with_cause(mut self, reason: &str, message: &str, field: &str) -> Self {
        let details = self.details.get_or_insert_with(Box::default);
        details.causes.push(StatusCause { reason: reason.into(), message: message.into(), field: field.into() });
        self
    }

    /// The `Status` object written for this error.
    pub fn to_status(&self) -> Status {
        Status {
            kind: "Status".to_string(),
            api_version: "v1".to_string(),
            metadata: serde_json::Map::new(),
            status: "Failure".to_string(),
            message: self.message.clone(),
            reason: self.reason.to_string(),
            details: self.details.as_deref().cloned(),
            code: self.code,
        }
    }
}

/// A `Status` of success, as the registry answers the DELETE of an object it removed: no code
/// in the body (the response is a 200).
pub fn success_status(details: Option<StatusDetails>) -> Status {
    Status {
        kind: "Status".to_string(),
        api_version: "v1".to_string(),
        metadata: serde_json::Map::new(),
        status: "Success".to_string(),
        message: String::new(),
        reason: String::new(),
        details,
        code: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::field::Path;

    fn crontabs() -> GroupResource {
        GroupResource::new("stable.example.com", "crontabs")
    }

    #[test]
    fn not_found_matches_kubernetes_bytes() {
        let status = ApiError::not_found(&crontabs(), "x").to_status();
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"crontabs.stable.example.com \"x\" not found","reason":"NotFound","details":{"name":"x","group":"stable.example.com","kind":"crontabs"},"code":404}"#
        );
    }

    #[test]
    fn invalid_lists_every_cause() {
        let errors = vec![
            FieldError::invalid(
                Path::new("spec").child("replicas"),
                15,
                "spec.replicas in body should be less than or equal to 10",
            ),
            FieldError::required(Path::new("spec").child("image"), ""),
        ];
        let err = ApiError::invalid(&GroupKind::new("stable.example.com", "CronTab"), "c", &errors);
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "CronTab.stable.example.com \"c\" is invalid: [spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10, spec.image: Required value]"
        );
        let causes = &err.details.as_ref().unwrap().causes;
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        assert_eq!(causes[0].message, "Invalid value: 15: spec.replicas in body should be less than or equal to 10");
        assert_eq!(causes[1].field, "spec.image");
    }

    #[test]
    fn conflict_wording() {
        let err = ApiError::conflict(
            &crontabs(),
            "c",
            "the object has been modified; please apply your changes to the latest version and try again",
        );
        assert_eq!(
            err.message,
            "Operation cannot be fulfilled on crontabs.stable.example.com \"c\": the object has been modified; please apply your changes to the latest version and try again"
        );
    }
}
