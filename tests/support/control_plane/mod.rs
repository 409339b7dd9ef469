//! A control-plane double for end-to-end tests: one TLS server in the test process that plays
//! kube-aggregator in front of the project's server and kube-apiserver behind it, written from
//! the aggregation contract (what the real ones send and answer), not from what the project
//! accepts.
//!
//! In front: clients (kubectl) authenticate with static bearer tokens or client certificates;
//! `/apis/<g>/<v>/...` of registered APIServices is proxied with the front-proxy client
//! certificate and `X-Remote-*` headers; `/api`, `/apis` (aggregated discovery v2 and v2beta1
//! too) and `/openapi/v2` (JSON or protobuf) are served by merging the backend's, `/openapi/v3`
//! by merging the backend's index and proxying its documents. Behind: the
//! `extension-apiserver-authentication` ConfigMap (get, watch), SubjectAccessReview (from a
//! rule table, counted, with an outage switch), TokenReview, Namespaces, and
//! CustomResourceDefinitions (`crd_api`, with an outage switch); and one pass of the namespace
//! controller on request (`run_namespace_controller`).

pub mod admission;
pub mod aggregator;
pub mod apiservices;
pub mod core_api;
pub mod crd_api;
pub mod custom_resources;
pub mod discovery;
pub mod faults;
pub mod impersonation;
pub mod namespace_controller;
pub mod openapi;
pub mod rbac;
pub mod respond;
pub mod reviews;
pub mod server;
pub mod state;
pub mod stored_api;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine;
use crd_apiserver::cli::pki::{Authority, Leaf, Pem};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;

use aggregator::Backend;
use rbac::{Rule, SERVICE_ACCOUNT, User};
use server::Plane;
use state::{State, lock};

/// The service account token the project's server uses.
pub const SERVER_TOKEN: &str = "crd-apiserver-service-account-token";
/// The front-proxy client certificate's CN, the only allowed name.
pub const PROXY_CN: &str = "front-proxy-client";
/// The name the aggregator checks in the backend's serving certificate.
pub const SERVICE_NAME: &str = "crd-apiserver.crd-apiserver.svc";

pub struct ControlPlane {
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub client_ca: Authority,
    pub front_proxy_ca: Authority,
    pub front_proxy_client: Pem,
    serving_ca: Pem,
    plane: Arc<Plane>,
    runtime: tokio::runtime::Runtime,
}

fn chain(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).map(|c| c.unwrap()).collect()
}

fn identity(pem: &Pem) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    (chain(&pem.cert), PrivateKeyDer::from_pem_slice(pem.key.as_bytes()).unwrap())
}

fn list(items: &[&str]) -> String {
    serde_json::to_string(items).unwrap()
}

impl ControlPlane {
    /// Starts the double with the rules a cluster set up by the manifests has, the server's
    /// service account token, and the usual namespaces.
    pub fn start() -> ControlPlane {
        let dir = tempfile::tempdir().unwrap();
        let serving_ca = Authority::new("control-plane-serving-ca").unwrap();
        let serving = serving_ca
            .issue(&Leaf {
                common_name: "kube-apiserver".into(),
                dns_names: vec!["localhost".into()],
                ips: vec![[127, 0, 0, 1].into()],
                server: true,
                ..Leaf::default()
            })
            .unwrap();
        let client_ca = Authority::new("control-plane-client-ca").unwrap();
        let front_proxy_ca = Authority::new("front-proxy-ca").unwrap();
        let front_proxy_client =
            front_proxy_ca.issue(&Leaf { common_name: PROXY_CN.into(), client: true, ..Leaf::default() }).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in chain(&client_ca.pem.cert) {
            roots.add(cert).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .allow_unauthenticated()
            .build()
            .unwrap();
        let (serving_chain, serving_key) = identity(&serving);
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(serving_chain, serving_key)
            .unwrap();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State::new());
        state.rules.lock().unwrap().extend(rbac::default_rules());
        state.tokens.lock().unwrap().insert(
            SERVER_TOKEN.into(),
            User::new(SERVICE_ACCOUNT, &["system:serviceaccounts", "system:serviceaccounts:crd-apiserver"]),
        );
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            state.create_namespace(ns).unwrap();
        }
        let plane = Arc::new(Plane { state, backend: tokio::sync::RwLock::new(None), port });
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let serving_plane = plane.clone();
        let registering = plane.state.clone();
        runtime.spawn(async move { apiservices::spawn_autoregister(registering) });
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            server::serve(serving_plane, listener, Arc::new(tls)).await;
        });
        let control = ControlPlane {
            port,
            dir,
            client_ca,
            front_proxy_ca,
            front_proxy_client,
            serving_ca: serving_ca.pem.clone(),
            plane,
            runtime,
        };
        control.set_auth_configmap(Some(control.standard_configmap()));
        control
    }

    /// The CA that signed the double's serving certificate (PEM).
    pub fn serving_ca_pem(&self) -> &str {
        &self.serving_ca.cert
    }

    pub fn state(&self) -> &State {
        &self.plane.state
    }

    /// The ConfigMap kube-apiserver (v1.33) writes for this double's CAs.
    pub fn standard_configmap(&self) -> BTreeMap<String, String> {
        [
            ("client-ca-file", self.client_ca.pem.cert.clone()),
            ("requestheader-client-ca-file", self.front_proxy_ca.pem.cert.clone()),
            ("requestheader-allowed-names", list(&[PROXY_CN])),
            ("requestheader-username-headers", list(&["X-Remote-User"])),
            ("requestheader-uid-headers", list(&["X-Remote-Uid"])),
            ("requestheader-group-headers", list(&["X-Remote-Group"])),
            ("requestheader-extra-headers-prefix", list(&["X-Remote-Extra-"])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    pub fn set_auth_configmap(&self, data: Option<BTreeMap<String, String>>) {
        self.state().set_auth_configmap(data);
    }

    /// A user who authenticates at the double with `token`.
    pub fn add_user(&self, token: &str, user: User) {
        lock(&self.state().tokens).insert(token.into(), user);
    }

    pub fn add_rule(&self, rule: Rule) {
        lock(&self.state().rules).push(rule);
    }

    /// What the server's service account needs for `takeover`/`handback` of `plural` in
    /// `group`: bindings `crd-apiserver:takeover` and `crd-apiserver:takeover-freeze` (the
    /// admission policy part, apart so that a test can take it away).
    pub fn grant_takeover(&self, group: &str, plural: &str) {
        let status = format!("{plural}/status");
        let grants: [(&str, &[&str], &str, &[&str]); 5] = [
            (
                "crd-apiserver:takeover",
                &["get", "list", "watch"],
                "apiextensions.k8s.io",
                &["customresourcedefinitions"],
            ),
            (
                "crd-apiserver:takeover",
                &["get", "list", "create", "update", "delete"],
                "apiregistration.k8s.io",
                &["apiservices"],
            ),
            (
                "crd-apiserver:takeover-freeze",
                &["create", "delete"],
                "admissionregistration.k8s.io",
                &["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
            ),
            ("crd-apiserver:takeover", &["get", "list", "create", "update", "delete"], group, &[plural, &status]),
            ("crd-apiserver:takeover", &["create"], "authentication.k8s.io", &["selfsubjectreviews"]),
        ];
        for (binding, verbs, group, resources) in grants {
            let subjects = vec![rbac::Subject::User(SERVICE_ACCOUNT.into())];
            self.add_rule(Rule::resources(binding, subjects, verbs, &[group], resources));
        }
    }

    /// A client certificate of the cluster's client CA for `admin` in `system:masters`, written
    /// as `<dir>/<stem>.crt` and `.key`.
    pub fn write_admin_certificate(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        let leaf = Leaf {
            common_name: "admin".into(),
            organizations: vec!["system:masters".into()],
            client: true,
            ..Leaf::default()
        };
        let pem = self.client_ca.issue(&leaf).unwrap();
        let files = (dir.join(format!("{stem}.crt")), dir.join(format!("{stem}.key")));
        std::fs::write(&files.0, &pem.cert).unwrap();
        std::fs::write(&files.1, &pem.key).unwrap();
        files
    }

    /// Deletes every rule of a binding.
    pub fn remove_binding(&self, binding: &str) {
        lock(&self.state().rules).retain(|r| r.binding != binding);
    }

    /// Points APIServices at the project's server listening on `port`, trusted by `ca_file`.
    pub fn register_backend(&self, port: u16, ca_file: &Path) {
        let ca = chain(&std::fs::read_to_string(ca_file).unwrap());
        let backend = Arc::new(Backend::new(port, SERVICE_NAME, ca, identity(&self.front_proxy_client)));
        *self.plane.backend.blocking_write() = Some(backend);
    }

    /// Points APIServices at a service whose endpoints are the replicas listening on `ports`
    /// (trusted by any of `ca_files`): requests go to ready replicas in turn, and a replica whose
    /// `/readyz` fails (probed every 200 ms) gets none until it is ready again.
    pub fn register_replicas(&self, ports: &[u16], ca_files: &[&Path]) {
        let ca = ca_files.iter().flat_map(|f| chain(&std::fs::read_to_string(f).unwrap())).collect();
        let backend = Arc::new(Backend::replicas(ports, SERVICE_NAME, ca, identity(&self.front_proxy_client)));
        let _entered = self.runtime.enter();
        backend.probe_readiness(std::time::Duration::from_millis(200));
        *self.plane.backend.blocking_write() = Some(backend);
    }

    /// The registered replicas' ports and whether the double counts each as ready.
    pub fn replica_readiness(&self) -> Vec<(u16, bool)> {
        self.plane.backend.blocking_read().as_ref().map(|b| b.readiness()).unwrap_or_default()
    }

    /// Takes the backend out, as kube-aggregator does when its service has no ready endpoint
    /// left (a replica that is terminating): proxied requests are answered 503 until a backend
    /// is registered again.
    pub fn unregister_backend(&self) {
        *self.plane.backend.blocking_write() = None;
    }

    /// The status of every answer the backend gave to a proxied request so far.
    pub fn backend_statuses(&self) -> Vec<u16> {
        lock(&self.state().backend_statuses).clone()
    }

    /// An APIService that sends `group`/`version` to the project's Service.
    pub fn register(&self, group: &str, version: &str) {
        apiservices::register(self.state(), group, version);
    }

    /// Registers `group`/`version` through the Service `service` (in the project's namespace):
    /// the aggregator's requests for it carry `<service>.crd-apiserver.svc` as TLS server name.
    pub fn register_via(&self, group: &str, version: &str, service: &str) {
        apiservices::register_via(self.state(), group, version, service);
    }

    /// `GET /openapi/v2` at the double (JSON), as kube-aggregator answers it after downloading
    /// each APIService's part: the status, the entity tag and the document.
    pub fn openapi_v2(&self, if_none_match: Option<&str>) -> (u16, String, Option<Value>) {
        let backend = self.plane.backend.blocking_read().clone();
        let response =
            self.runtime.block_on(openapi::v2(self.state(), backend.as_deref(), "application/json", if_none_match));
        let status = response.status().as_u16();
        let etag = response.headers().get("etag").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let body = self.runtime.block_on(http_body_util::BodyExt::collect(response.into_body())).unwrap().to_bytes();
        (status, etag, serde_json::from_slice(&body).ok())
    }

    /// Every download of the backend's `/openapi/v2` so far, in order.
    pub fn openapi_v2_downloads(&self) -> Vec<state::V2Download> {
        lock(&self.state().openapi_v2_downloads).clone()
    }

    /// The paths of the backend's `/openapi/v3` index as last downloaded through each Service
    /// (by its TLS server name).
    pub fn openapi_v3_indexes(&self) -> std::collections::HashMap<String, Vec<String>> {
        lock(&self.state().openapi_v3_indexes).clone()
    }

    /// The APIService named `name` as stored (without its status).
    pub fn api_service(&self, name: &str) -> Option<Value> {
        self.state().get_object("apiservices", "", name)
    }

    /// Stores a custom object the double serves itself, as a create would (see
    /// `custom_resources::seed`).
    pub fn seed_custom(&self, group: &str, plural: &str, object: Value) -> Value {
        custom_resources::seed(self.state(), group, plural, object)
    }

    /// The custom objects of a resource the double serves itself.
    pub fn custom_objects(&self, group: &str, plural: &str) -> Vec<Value> {
        custom_resources::objects(self.state(), group, plural)
    }

    /// Makes every list page after the first fail (`fail`) or not. To stop a caller at that
    /// page, hold it (`hold`).
    pub fn set_custom_list_fault(&self, fail: bool) {
        lock(&self.state().objects).custom.fail_continue = fail;
    }

    /// One pass of kube-aggregator's autoregister controller now (it also runs every 100 ms).
    pub fn autoregister(&self) {
        apiservices::autoregister(self.state());
    }

    /// Replaces the front-proxy CA: the ConfigMap carries only the new CA, the proxy uses a new
    /// certificate. Returns the old client certificate.
    pub fn rotate_front_proxy_ca(&mut self) -> Pem {
        let ca = Authority::new("front-proxy-ca-2").unwrap();
        let client = ca.issue(&Leaf { common_name: PROXY_CN.into(), client: true, ..Leaf::default() }).unwrap();
        self.front_proxy_ca = ca;
        let old = std::mem::replace(&mut self.front_proxy_client, client);
        if let Some(backend) = self.plane.backend.blocking_read().clone() {
            let new_identity = identity(&self.front_proxy_client);
            self.runtime.block_on(backend.set_identity(new_identity));
        }
        self.set_auth_configmap(Some(self.standard_configmap()));
        old
    }

    /// Holds the requests with `method` whose path and query contain `path` (after `skip` of
    /// them went through) at the door until `release_held`: the caller is stopped at that step.
    /// Answers the hold's id.
    pub fn hold(&self, method: http::Method, path: &str, skip: usize) -> usize {
        self.state().faults.hold(method, path, skip)
    }

    /// How many requests wait at the hold `id` now.
    pub fn held(&self, id: usize) -> usize {
        self.state().faults.held(id)
    }

    /// Lets the requests of the hold `id` go on (`apply`), or answers them 503 with no effect.
    pub fn release_held(&self, id: usize, apply: bool) {
        self.state().faults.release(id, apply);
    }

    /// Moves the double's resourceVersion (one counter for every object it holds) to `revision`,
    /// as a main apiserver whose etcd other clients also write to: its next write gets the next.
    pub fn set_revision(&self, revision: u64) {
        let mut objects = lock(&self.state().objects);
        assert!(revision >= objects.revision, "a revision never goes back");
        objects.revision = revision;
    }

    /// How many requests with `method` whose path contains `path` came in so far.
    pub fn requests(&self, method: &http::Method, path: &str) -> usize {
        self.state().faults.count(method, path)
    }

    /// While `down`, the double is unreachable as a dead kube-apiserver is: open connections
    /// are closed, new ones reset before the TLS handshake (aggregated requests included).
    pub fn set_down(&self, down: bool) {
        self.state().faults.set_down(down);
    }

    /// While `down`, the CustomResourceDefinition API answers 503 and its open watches end.
    pub fn set_crd_outage(&self, down: bool) {
        self.state().crd_outage.store(down, Ordering::SeqCst);
    }

    /// Creates a CustomResourceDefinition (checked and defaulted as kube-apiserver does, then
    /// established by its controllers); the stored object, or the refusal's message.
    pub fn create_crd(&self, crd: Value) -> Result<Value, String> {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
        crd_api::create(self.state(), crd, false).map_err(|f| f.message)?;
        Ok(crd_api::get(self.state(), &name).unwrap_or_default())
    }

    /// Reads a definition, lets `change` edit it, and updates it at the resourceVersion read
    /// (as `helm upgrade` or `kubectl edit` do).
    pub fn update_crd(&self, name: &str, change: impl FnOnce(&mut Value)) -> Result<Value, String> {
        let mut crd = crd_api::get(self.state(), name).ok_or_else(|| format!("no CustomResourceDefinition {name}"))?;
        change(&mut crd);
        crd_api::update(self.state(), name, crd, false, false).map_err(|f| f.message)
    }

    /// Deletes a definition as `kubectl delete` does (finalized at once).
    pub fn delete_crd(&self, name: &str) -> Result<Value, String> {
        crd_api::delete(self.state(), name, b"").map_err(|f| f.message)
    }

    pub fn crd(&self, name: &str) -> Option<Value> {
        crd_api::get(self.state(), name)
    }

    /// Stores a definition without kube-apiserver's checks (one an older release accepted).
    pub fn put_crd_unchecked(&self, crd: Value) -> Value {
        crd_api::put_unchecked(self.state(), crd)
    }

    /// Compacts CustomResourceDefinition history at the current revision: watches and list pages
    /// from an older resourceVersion answer 410 Expired, as after etcd's compaction.
    pub fn compact_crds(&self) {
        let revision = lock(&self.state().objects).revision;
        self.state().crd_compacted.store(revision, Ordering::SeqCst);
    }

    /// Ends every open CustomResourceDefinition watch (as a restart of the apiserver does);
    /// clients watch again from their last resourceVersion.
    pub fn end_crd_watches(&self) {
        self.state().crd_watch_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// How often CustomResourceDefinition watches get a bookmark (kube-apiserver: a minute).
    pub fn set_crd_bookmark_interval(&self, every: std::time::Duration) {
        let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
        self.state().crd_bookmark_ms.store(ms, Ordering::SeqCst);
    }

    pub fn set_sar_outage(&self, down: bool) {
        self.state().sar_outage.store(down, Ordering::SeqCst);
    }

    pub fn sar_calls(&self) -> usize {
        State::count(&self.state().sar_calls)
    }

    pub fn token_review_calls(&self) -> usize {
        State::count(&self.state().token_review_calls)
    }

    /// Every SubjectAccessReview spec received so far.
    pub fn sar_log(&self) -> Vec<Value> {
        lock(&self.state().sar_log).clone()
    }

    /// Headers of every request proxied to the backend so far.
    pub fn proxied_headers(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.state().proxied).clone()
    }

    /// The TLS server name (`<service>.<namespace>.svc`) and path of every request sent to the
    /// backend so far, the aggregator's own downloads included.
    pub fn proxied_via(&self) -> Vec<(String, String)> {
        lock(&self.state().proxied_via).clone()
    }

    /// `GET /apis` at the double asking for aggregated discovery, as kubectl does; the status
    /// and the document.
    pub fn aggregated_discovery(&self) -> (u16, Value) {
        let backend = self.plane.backend.blocking_read().clone();
        let response =
            self.runtime.block_on(discovery::apis(self.state(), backend.as_deref(), discovery::AGGREGATED_V2, None));
        let status = response.status().as_u16();
        let body = self.runtime.block_on(http_body_util::BodyExt::collect(response.into_body())).unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap())
    }

    /// One pass of the namespace controller over a namespace deleted with
    /// `state().delete_namespace`: deletes the backend's content in it and finalizes it when
    /// nothing is left. Returns how many objects remain.
    pub fn run_namespace_controller(&self, namespace: &str) -> Result<usize, String> {
        let backend = self.plane.backend.blocking_read().clone().ok_or("no backend registered")?;
        self.runtime.block_on(namespace_controller::run(self.state(), &backend, namespace))
    }

    /// Writes a kubeconfig that reaches the double with a bearer token.
    pub fn token_kubeconfig(&self, token: &str) -> PathBuf {
        self.write_kubeconfig(&format!("token-{}", token.len()), &format!("    token: {token}\n"), token)
    }

    /// A kubeconfig for a client certificate from the cluster client CA.
    pub fn cert_kubeconfig(&self, name: &str, groups: &[&str]) -> PathBuf {
        let pem = self
            .client_ca
            .issue(&Leaf {
                common_name: name.into(),
                organizations: groups.iter().map(|g| g.to_string()).collect(),
                client: true,
                ..Leaf::default()
            })
            .unwrap();
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        let user = format!("    client-certificate-data: {}\n    client-key-data: {}\n", b64(&pem.cert), b64(&pem.key));
        self.write_kubeconfig(name, &user, name)
    }

    /// The kubeconfig the project's server uses to reach the double.
    pub fn server_kubeconfig(&self) -> PathBuf {
        self.token_kubeconfig(SERVER_TOKEN)
    }

    fn write_kubeconfig(&self, stem: &str, user: &str, unique: &str) -> PathBuf {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.serving_ca.cert);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {ca}\nusers:\n- name: user\n  user:\n{user}contexts:\n- name: double\n  context:\n    cluster: double\n    user: user\n    namespace: default\ncurrent-context: double\n",
            self.port
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, unique.as_bytes());
        let tag: String = digest.as_ref().iter().take(6).map(|b| format!("{b:02x}")).collect();
        let path = self.dir.path().join(format!("{stem}-{tag}.kubeconfig"));
        std::fs::write(&path, text).unwrap();
        path
    }
}
