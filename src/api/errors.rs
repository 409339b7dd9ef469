//! Storage and conversion errors as Kubernetes API errors, for the resource a call addresses
//! (`storage/errors` and `InterpretGetError` & co. in k8s.io/apiserver).

use super::call::Call;
use crate::core::status::ApiError;
use crate::store;

/// The message of an optimistic-concurrency conflict.
pub const OPTIMISTIC_LOCK_MESSAGE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// Maps a storage error about the call's object.
pub fn storage(error: store::Error, call: &Call, name: &str) -> ApiError {
    let resource = call.resource();
    match error {
        store::Error::NotFound(_) => ApiError::not_found(&resource, name),
        store::Error::AlreadyExists(_) => ApiError::already_exists(&resource, name),
        store::Error::Conflict { .. } => ApiError::conflict(&resource, name, OPTIMISTIC_LOCK_MESSAGE),
        store::Error::Expired { requested, oldest } => {
            ApiError::expired(format!("too old resource version: {requested} ({oldest})"))
        }
        store::Error::TooLarge { requested, current } => ApiError::timeout(
            format!("Too large resource version: {requested}, current: {current}"),
            1,
        )
        .with_cause("ResourceVersionTooLarge", "Too large resource version", ""),
        store::Error::Closed => ApiError::service_unavailable("storage is shutting down"),
        store::Error::Backend(message) => ApiError::internal(message),
        store::Error::Unavailable(cause) => ApiError::service_unavailable(format!("storage is unavailable: {cause}")),
        // kube-apiserver answers an etcd call that outlived its deadline with this 504.
        store::Error::Timeout(_) => ApiError::timeout(
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
            0,
        ),
        // kube-apiserver passes etcd's refusal through as an error of unknown reason (500).
        store::Error::RequestTooLarge(message) => ApiError::from_parts(500, String::new(), message, None),
        store::Error::NoSpace(cause) => ApiError::insufficient_storage(format!(
            "the store's disk is full ({cause}); writes resume by themselves once space is freed"
        )),
    }
}

/// Maps a conversion failure.
pub fn conversion(error: crate::conversion::Error) -> ApiError {
    ApiError::internal(error.to_string())
}

/// Maps an admission refusal of a write to the call's resource.
pub fn admission(error: crate::admission::Error, call: &Call, name: &str) -> ApiError {
    use crate::admission::Error;
    match error {
        Error::Denied(d) => ApiError::from_parts(d.code, d.reason, d.message, d.details),
        Error::Internal(message) => ApiError::internal(message),
        Error::BadRequest(message) => ApiError::bad_request(message),
        Error::Forbidden(why) => ApiError::forbidden(&call.resource(), name, &why),
        Error::Policy { code, reason, why } => {
            let forbidden = ApiError::forbidden(&call.resource(), name, &why).with_cause("", &why, "");
            ApiError::from_parts(code, reason, forbidden.message, forbidden.details.map(|d| *d))
        }
        Error::MutationPolicy { reason, message } => {
            // kube-apiserver builds a Forbidden error on the resource and name, then replaces
            // its message (and reason) with the policy's.
            let forbidden = ApiError::forbidden(&call.resource(), name, &message).with_cause("", &message, "");
            ApiError::from_parts(403, reason, message, forbidden.details.map(|d| *d))
        }
        Error::NamespaceNotFound(namespace) => {
            ApiError::not_found(&crate::core::gvr::GroupResource::new("", "namespaces"), &namespace)
        }
    }
}
