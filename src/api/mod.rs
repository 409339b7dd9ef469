//! The Kubernetes API of custom resources: discovery, OpenAPI, and the resource endpoints
//! (get, list, watch, create, update, patch, delete, deletecollection), one file per verb.
//!
//! Owns request semantics: negotiation, object metadata rules, list options, watch streams,
//! and turning module errors into Kubernetes `Status` errors. Reads identity and request info
//! from request extensions; never parses credentials and never decides authorization.

pub mod admit;
pub mod apply;
pub mod body;
pub mod call;
pub mod codec;
pub mod continue_token;
pub mod create;
pub mod delete;
pub mod delete_options;
pub mod discovery;
pub mod errors;
pub mod get;
pub mod go_yaml;
pub mod jsonpath;
pub mod list;
pub mod namespaces;
pub mod negotiate;
pub mod objects;
pub mod openapi;
pub mod ownership;
pub mod patch;
pub mod patch_body;
pub mod present;
pub mod replicas;
pub mod scale;
pub mod selectors;
pub mod strict;
pub mod table;
pub mod update;
pub mod verbatim;
mod warnings;
pub mod watch;
pub mod write;

use std::sync::Arc;

use arc_swap::ArcSwap;
use http::{Request, Response, StatusCode, header};

use body::{ReqBody, RespBody};
use discovery::Discovery;
use negotiate::{Encoding, parse_accept, plain_encoding};

use crate::core::request_info::RequestInfo;
use crate::core::request_scope::{self, Phase};
use crate::core::status::ApiError;
use crate::core::user::UserInfo;
use crate::definitions::Registry;
use crate::store::Backend;

/// The registry and every document derived from it, swapped as one.
pub struct Catalog {
    pub registry: Registry,
    pub discovery: Discovery,
    pub openapi: openapi::Documents,
}

impl Catalog {
    /// The catalog of `registry` with the server's own read-only resources added.
    pub fn new(registry: Registry) -> Catalog {
        Catalog::build(registry, None)
    }

    /// [`Catalog::new`] with its OpenAPI v2 documents in the form `--openapi-v2` asks for (the
    /// next catalogs keep it).
    pub fn with_v2_content(registry: Registry, content: openapi::V2Content) -> Catalog {
        let mut catalog = Catalog::build(registry, None);
        catalog.openapi = catalog.openapi.with_v2_content(content);
        catalog
    }

    /// [`Catalog::new`], reusing what `previous` built for every group whose definitions are
    /// the same `Arc`s (a reload that changed one definition encodes only its group's
    /// documents again, plus those listing every group).
    pub fn next(previous: &Catalog, registry: Registry) -> Catalog {
        Catalog::build(registry, Some(previous))
    }

    fn build(registry: Registry, previous: Option<&Catalog>) -> Catalog {
        let registry = registry.with_builtin();
        // Which slice a TLS server name picks, for both kinds of documents.
        let names = Arc::new(openapi::slices::SliceNames::new(registry.groups()));
        let discovery = Discovery::build_named(&registry, previous.map(|p| &p.discovery), names.clone());
        let openapi = openapi::Documents::build_named(&registry, previous.map(|p| &p.openapi), names);
        Catalog { registry, discovery, openapi }
    }
}

/// Tunables of the API.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// Watches without `timeoutSeconds` last a random time between this and twice this.
    pub min_request_timeout: std::time::Duration,
    /// What `/openapi/v2` publishes of the served resources.
    pub openapi_v2: openapi::V2Content,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions { min_request_timeout: std::time::Duration::from_secs(1800), openapi_v2: openapi::V2Content::Full }
    }
}

/// The API: served definitions plus the store.
pub struct Api {
    catalog: ArcSwap<Catalog>,
    /// The same catalog, for the watches that end when their definition changes.
    catalog_changes: tokio::sync::watch::Sender<Arc<Catalog>>,
    store: Backend,
    options: ApiOptions,
    namespaces: Arc<dyn namespaces::Namespaces>,
    admission: Arc<crate::admission::Admission>,
    /// Per resource (its key prefix), the revision below which its resourceVersions are
    /// expired: a resource taken over from the main apiserver (`takeover`) answers the
    /// resourceVersions clients hold from there as Kubernetes answers compacted ones (410).
    floors: ArcSwap<std::collections::HashMap<String, crate::store::Revision>>,
    /// The initial states watches are sending, shared among watches that start alike.
    initial_states: watch::initial::InitialStates,
}

impl Api {
    pub fn new(store: Backend, registry: Registry, options: ApiOptions) -> Api {
        Api::with_namespaces(store, registry, options, Arc::new(namespaces::EveryNamespace))
    }

    /// An API that follows the cluster's namespaces (lifecycle rules and cleanup).
    pub fn with_namespaces(
        store: Backend,
        registry: Registry,
        options: ApiOptions,
        namespaces: Arc<dyn namespaces::Namespaces>,
    ) -> Api {
        let catalog = Arc::new(Catalog::with_v2_content(registry, options.openapi_v2));
        Api {
            catalog: ArcSwap::new(catalog.clone()),
            catalog_changes: tokio::sync::watch::Sender::new(catalog),
            store,
            options,
            namespaces,
            admission: Arc::new(crate::admission::Admission::without_cluster()),
            floors: ArcSwap::default(),
            initial_states: watch::initial::InitialStates::default(),
        }
    }

    /// The initial states watches are sending (`watch::initial`).
    pub(crate) fn initial_states(&self) -> &watch::initial::InitialStates {
        &self.initial_states
    }

    /// The same API admitting writes through `admission` (the cluster's webhooks).
    pub fn with_admission(mut self, admission: Arc<crate::admission::Admission>) -> Api {
        self.admission = admission;
        self
    }

    pub fn admission(&self) -> &crate::admission::Admission {
        &self.admission
    }

    pub fn namespaces(&self) -> &dyn namespaces::Namespaces {
        self.namespaces.as_ref()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// Serves a new set of definitions from now on.
    pub fn replace_registry(&self, registry: Registry) {
        self.replace_catalog(Catalog::next(&self.catalog(), registry));
    }

    /// Serves a catalog built off the request path from now on. Requests in flight finish with
    /// the catalog they started with; watches whose definition is no longer served as it was
    /// end (`watch`), as Kubernetes tears down a changed definition's storage.
    pub fn replace_catalog(&self, catalog: Catalog) {
        let catalog = Arc::new(catalog);
        self.catalog.store(catalog.clone());
        self.catalog_changes.send_replace(catalog);
    }

    /// Follows the catalog: a receiver that sees every replacement.
    pub fn catalog_changes(&self) -> tokio::sync::watch::Receiver<Arc<Catalog>> {
        self.catalog_changes.subscribe()
    }

    /// Sets (`Some`) or clears the revision below which the resource stored under `prefix`
    /// answers resourceVersions as expired.
    pub fn set_floor(&self, prefix: &str, floor: Option<crate::store::Revision>) {
        self.floors.rcu(|floors| {
            let mut floors = std::collections::HashMap::clone(floors);
            match floor {
                Some(floor) => floors.insert(prefix.to_string(), floor),
                None => floors.remove(prefix),
            };
            floors
        });
    }

    /// The `Expired` error for a read of `call`'s resource at `revision`, when the revision is
    /// below the resource's floor.
    pub fn below_floor(&self, call: &call::Call, revision: crate::store::Revision) -> Option<crate::store::Error> {
        let floors = self.floors.load();
        if floors.is_empty() {
            return None;
        }
        let definition = &call.served.definition;
        let floor = *floors.get(&crate::store::key::resource_prefix(&definition.group, &definition.plural))?;
        (revision < floor).then_some(crate::store::Error::Expired { requested: revision, oldest: floor })
    }

    pub fn store(&self) -> &Backend {
        &self.store
    }

    pub fn options(&self) -> &ApiOptions {
        &self.options
    }

    /// Serves a resource request (`/apis/<g>/<v>/...` with a resource).
    pub async fn serve_resource(&self, request: Request<ReqBody>) -> Response<RespBody> {
        // The filters' time ends here; the handlers mark where their phases end.
        request_scope::end(Phase::Filters);
        let encoding = plain_encoding(request.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()));
        let catalog = self.catalog();
        // The filters put them there for this handler; it takes them rather than copy them.
        let (mut parts, request_body) = request.into_parts();
        let user = parts.extensions.remove::<UserInfo>().unwrap_or_else(UserInfo::anonymous);
        let Some(info) = parts.extensions.remove::<RequestInfo>() else {
            return body::error_response(&ApiError::internal("request info missing"), encoding);
        };
        let call = match call::Call::resolve(&catalog, info, parts, user) {
            Ok(c) => c,
            Err(e) => return body::error_response(&e, encoding),
        };
        // Counted under the served resource from here on, whatever the answer (a deadline too).
        crate::metrics::requests::claim(crate::metrics::requests::Route::Resource(call.served.series.clone()));
        let mut response = match call::dispatch(self, &call, request_body).await {
            Ok(r) => r,
            Err(e) => body::error_response(&e, encoding),
        };
        if let Some(warning) = &call.served.version.deprecation_warning {
            // Kubernetes warns of the version before serving the request: first.
            warnings::add_first(&mut response, std::slice::from_ref(warning));
        }
        response
    }

    /// `/api`
    pub fn serve_legacy_root(&self, accept: Option<&str>, if_none_match: Option<&str>) -> Response<RespBody> {
        let catalog = self.catalog();
        match aggregated_version(accept) {
            Some(v) => {
                let doc = if v == "v2" {
                    &catalog.discovery.api_aggregated_v2
                } else {
                    &catalog.discovery.api_aggregated_v2beta1
                };
                crate::metrics::requests::claim(crate::metrics::requests::Route::Discovery(1));
                aggregated_response(doc, v, if_none_match)
            }
            None => document_response(&catalog.discovery.api_versions.body),
        }
    }

    /// `/apis`: the group list, or aggregated discovery when the client asks for it (of one group
    /// when the connection's TLS server name picks it: `Discovery::aggregated_for`).
    pub fn serve_apis(
        &self,
        accept: Option<&str>,
        if_none_match: Option<&str>,
        server_name: Option<&str>,
    ) -> Response<RespBody> {
        let catalog = self.catalog();
        match aggregated_version(accept) {
            Some(v) => {
                let doc = catalog.discovery.aggregated_for(v, server_name);
                // Kubernetes counts aggregated discovery, under its path, as a request.
                crate::metrics::requests::claim(crate::metrics::requests::Route::Discovery(0));
                aggregated_response(doc, v, if_none_match)
            }
            None => {
                let mut response = document_response(&catalog.discovery.group_list.body);
                response.headers_mut().insert(header::VARY, http::HeaderValue::from_static("Accept"));
                response
            }
        }
    }

    /// `/apis/<group>`
    pub fn serve_group(&self, group: &str, encoding: Encoding) -> Response<RespBody> {
        match self.catalog().discovery.group(group) {
            Some(doc) => document_response(&doc.body),
            None => body::error_response(&ApiError::path_not_found(), encoding),
        }
    }

    /// `/apis/<group>/<version>`
    pub fn serve_group_version(&self, group: &str, version: &str, encoding: Encoding) -> Response<RespBody> {
        match self.catalog().discovery.group_version(group, version) {
            Some(doc) => document_response(&doc.body),
            None => body::error_response(&ApiError::path_not_found(), encoding),
        }
    }
}

fn document_response(bytes: &bytes::Bytes) -> Response<RespBody> {
    body::bytes_response(StatusCode::OK, "application/json", bytes.clone())
}

/// The aggregated discovery version the client asks for first, if any.
fn aggregated_version(accept: Option<&str>) -> Option<&'static str> {
    for range in parse_accept(accept?) {
        if range.param("as") == Some("APIGroupDiscoveryList") && range.param("g") == Some("apidiscovery.k8s.io") {
            match range.param("v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => continue,
            }
        }
        if range.param("as").is_none() && matches!(range.essence.as_str(), "application/json" | "*/*" | "application/*")
        {
            return None;
        }
    }
    None
}

fn aggregated_response(doc: &discovery::Document, version: &str, if_none_match: Option<&str>) -> Response<RespBody> {
    let content_type = if version == "v2" {
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    } else {
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    };
    let mut response = if if_none_match.is_some_and(|tag| tag.split(',').any(|t| t.trim() == doc.etag)) {
        let mut r = body::bytes_response(StatusCode::NOT_MODIFIED, content_type, bytes::Bytes::new());
        r.headers_mut().remove(header::CONTENT_TYPE);
        r
    } else {
        body::bytes_response(StatusCode::OK, content_type, doc.body.clone())
    };
    if let Ok(v) = http::HeaderValue::from_str(&doc.etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response.headers_mut().insert(header::VARY, http::HeaderValue::from_static("Accept"));
    response
}
