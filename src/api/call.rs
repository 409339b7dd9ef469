//! One resource request, resolved against the registry: which resource and version, where
//! (namespace, name, subresource), with which query and headers. Dispatches to the verb's
//! handler.

use http::header;
use http::request::Parts;
use http::{HeaderMap, Response};

use super::Api;
use super::body::{ReqBody, RespBody};
use crate::core::gvr::GroupResource;
use crate::core::request_info::{Query, RequestInfo};
use crate::core::status::ApiError;
use crate::core::user::UserInfo;
use crate::definitions::registry::Served;
use crate::store::key;

/// The subresource a request addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    None,
    Status,
    Scale,
}

/// A resolved resource request.
#[derive(Debug, Clone)]
pub struct Call {
    pub served: Served,
    pub verb: String,
    /// The namespace of the path; `None` for cluster-scoped resources and for lists across
    /// all namespaces.
    pub namespace: Option<String>,
    /// The object name; empty for collections.
    pub name: String,
    pub subresource: Subresource,
    pub query: Query,
    pub headers: HeaderMap,
    pub user: UserInfo,
}

impl Call {
    /// Resolves a request as Kubernetes' CRD handler routes it: unknown resources, unserved
    /// versions and namespaced paths to cluster-scoped resources are not found.
    pub fn resolve(
        catalog: &super::Catalog,
        info: RequestInfo,
        parts: Parts,
        user: UserInfo,
    ) -> Result<Call, ApiError> {
        let served = catalog
            .registry
            .lookup(&info.api_group, &info.api_version, &info.resource)
            .cloned()
            .ok_or_else(ApiError::path_not_found)?;
        let definition = &served.definition;
        if !definition.namespaced() && !info.namespace.is_empty() {
            return Err(ApiError::path_not_found());
        }
        let subresource = match info.subresource.as_str() {
            "" => Subresource::None,
            "status" if served.version.status_subresource => Subresource::Status,
            "scale" if served.version.scale.is_some() => Subresource::Scale,
            _ => {
                return Err(ApiError::not_found(&GroupResource::new(&info.api_group, &info.resource), &info.name));
            }
        };
        let collection_verb = matches!(info.verb.as_str(), "list" | "watch" | "deletecollection");
        // Only lists and watches may span namespaces; Kubernetes hands every other request
        // without a namespace (deletecollection too) to its not-found delegate.
        if definition.namespaced() && info.namespace.is_empty() && !matches!(info.verb.as_str(), "list" | "watch") {
            return Err(ApiError::path_not_found());
        }
        if info.parts.len() > 3 {
            return Err(ApiError::path_not_found());
        }
        let mut query = Query::parse(parts.uri.query());
        if info.verb == "watch"
            && let Some(path_name) = info.parts.get(1)
        {
            pin_watch_to_name(&mut query, path_name)?;
        }
        // A list or watch pinned to a name by a field selector is still a collection request.
        let name = if collection_verb { String::new() } else { info.name };
        Ok(Call {
            served,
            verb: info.verb,
            namespace: (!info.namespace.is_empty()).then_some(info.namespace),
            name,
            subresource,
            query,
            headers: parts.headers,
            user,
        })
    }

    pub fn resource(&self) -> GroupResource {
        self.served.definition.group_resource()
    }

    /// The kind bodies sent to this endpoint decode to by default.
    pub fn expected(&self) -> super::codec::Expected<'_> {
        let d = &self.served.definition;
        super::codec::Expected { group: &d.group, version: &self.served.version.name, kind: &d.kind }
    }

    /// The storage key of the addressed object.
    pub fn key(&self) -> String {
        let d = &self.served.definition;
        key::object_key(&d.group, &d.plural, self.namespace.as_deref(), &self.name)
    }

    /// The storage key of another object in the same place.
    pub fn key_of(&self, name: &str) -> String {
        let d = &self.served.definition;
        key::object_key(&d.group, &d.plural, self.namespace.as_deref(), name)
    }

    /// The storage prefix of the addressed collection.
    pub fn prefix(&self) -> String {
        let d = &self.served.definition;
        match &self.namespace {
            Some(ns) => key::namespace_prefix(&d.group, &d.plural, ns),
            None => key::resource_prefix(&d.group, &d.plural),
        }
    }

    pub fn header(&self, name: header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn accept(&self) -> Option<&str> {
        self.header(header::ACCEPT)
    }

    pub fn content_type(&self) -> Option<&str> {
        self.header(header::CONTENT_TYPE)
    }

    /// `dryRun=All`; any other value is refused as Kubernetes refuses it.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        let values: Vec<&str> = self.query.all("dryRun").collect();
        match values.as_slice() {
            [] => Ok(false),
            ["All"] => Ok(true),
            other => Err(ApiError::bad_request(format!(
                "Invalid dryRun value {:?}: supported values: \"All\"",
                other.join(",")
            ))),
        }
    }

    /// The request version's `apiVersion`.
    pub fn api_version(&self) -> String {
        crate::core::gvr::join_api_version(&self.served.definition.group, &self.served.version.name)
    }
}

/// Runs the handler of the call's verb.
pub async fn dispatch(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    // The server writes its own resources itself; Kubernetes has no handler for any other verb
    // of a read-only resource, so they answer as an unknown method does.
    if call.served.definition.read_only && !matches!(call.verb.as_str(), "get" | "list" | "watch") {
        return Err(ApiError::method_not_allowed());
    }
    // Each handler's future is boxed: unboxed, every request's future would be as large as
    // the largest handler's (16 KB measured, 5-6 KB each), and moved whole into its box twice.
    match (call.verb.as_str(), call.subresource) {
        ("get", _) => Box::pin(super::get::get(api, call)).await,
        ("list", Subresource::None) => Box::pin(super::list::list(api, call)).await,
        ("watch", Subresource::None) => Box::pin(super::watch::watch(api, call)).await,
        ("create", Subresource::None) => Box::pin(super::create::create(api, call, body)).await,
        ("update", _) => Box::pin(super::update::update(api, call, body)).await,
        ("patch", _) => Box::pin(super::patch::patch(api, call, body)).await,
        ("delete", Subresource::None) => Box::pin(super::delete::delete(api, call, body)).await,
        ("deletecollection", Subresource::None) => Box::pin(super::delete::delete_collection(api, call, body)).await,
        (verb, _) => Err(ApiError::method_not_supported(&call.resource(), verb)),
    }
}

/// The legacy `/watch/…/NAME` path watches the one object: its field selector becomes
/// `metadata.name=NAME`; one that pins another name (or selects anything else) is refused, as
/// kube-apiserver's list handler refuses it.
fn pin_watch_to_name(query: &mut Query, name: &str) -> Result<(), ApiError> {
    let selector = query.get("fieldSelector").unwrap_or_default();
    if selector.is_empty() {
        let escaped = name.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\=");
        query.set("fieldSelector", format!("metadata.name={escaped}"));
        return Ok(());
    }
    if crate::core::request_info::exact_name_in_field_selector(selector).as_deref() == Some(name) {
        return Ok(());
    }
    Err(ApiError::bad_request("fieldSelector metadata.name doesn't match requested name"))
}
