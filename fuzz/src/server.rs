//! The API in process, over a sled store in a throw-away directory (on tmpfs when there is
//! one), serving the fuzzed definitions; and the check every answer must pass.

use std::sync::OnceLock;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crd_apiserver::api::body::request_body;
use crd_apiserver::api::{Api, ApiOptions};
use crd_apiserver::core::request_info::{Query, RequestInfo};
use crd_apiserver::core::user::UserInfo;
use crd_apiserver::definitions::{Registry, load};
use crd_apiserver::store::Backend;
use crd_apiserver::store::sled::{SledOptions, SledStore};

/// One request, as the router would hand it to the API.
#[derive(Clone)]
pub struct Call {
    pub method: Method,
    /// The path and query.
    pub target: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({:?}, accept {:?}): {}",
            self.method,
            self.target,
            self.content_type,
            self.accept,
            String::from_utf8_lossy(&self.body)
        )
    }
}

impl Call {
    pub fn new(method: Method, target: impl Into<String>) -> Call {
        Call { method, target: target.into(), content_type: None, accept: None, body: Vec::new() }
    }

    pub fn body(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Call {
        self.content_type = Some(content_type.to_string());
        self.body = body.into();
        self
    }
}

/// An answer that kept the promise.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

/// The in-process API and the runtime its handlers run on.
pub struct Harness {
    runtime: tokio::runtime::Runtime,
    api: Api,
    _dir: tempfile::TempDir,
}

/// Builds a registry from manifest texts; every definition must load.
pub fn registry(manifests: &[&str]) -> Registry {
    let mut definitions = Vec::new();
    for (i, text) in manifests.iter().enumerate() {
        for doc in load::parse_documents(text).unwrap_or_else(|e| panic!("manifest {i}: {e}")) {
            match load::definition_from_value(doc, "fuzz") {
                Ok(d) => definitions.push(d),
                Err(p) => panic!("manifest {i} does not load: {:?}", p.errors),
            }
        }
    }
    let (registry, problems) = Registry::build(definitions);
    assert!(problems.is_empty(), "{:?}", problems.iter().map(|p| &p.errors).collect::<Vec<_>>());
    registry
}

fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    dir.unwrap_or_else(|e| panic!("temporary directory: {e}"))
}

impl Harness {
    pub fn new(manifests: &[&str]) -> Harness {
        let dir = scratch_dir();
        let options = SledOptions { cache_capacity: 16 << 20, ..SledOptions::default() };
        let store = SledStore::open(dir.path(), options).unwrap_or_else(|e| panic!("store: {e}"));
        let api = Api::new(Backend::Sled(store), registry(manifests), ApiOptions::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("runtime: {e}"));
        Harness { runtime, api, _dir: dir }
    }

    /// The harness of the request targets: CronTab and Gadget served, with one stored object
    /// of each (`fuzz/base`), created through the API.
    pub fn shared() -> &'static Harness {
        static SHARED: OnceLock<Harness> = OnceLock::new();
        SHARED.get_or_init(|| {
            let harness = Harness::new(&[crate::CRONTAB, crate::EVERYTHING]);
            for (path, object) in base_objects() {
                let call = Call::new(Method::POST, path).body("application/json", object.to_string());
                let answer = harness.send(&call);
                assert_eq!(answer.status, StatusCode::CREATED, "{}", String::from_utf8_lossy(&answer.body));
            }
            harness
        })
    }

    /// Sends a call and checks the answer: any status below 500; a 4xx or 5xx carries a
    /// `Status` with the same code. Panics (a finding) otherwise.
    pub fn send(&self, call: &Call) -> Answer {
        let answer = self.runtime.block_on(self.serve(call));
        check(call, &answer);
        answer
    }

    async fn serve(&self, call: &Call) -> Answer {
        let (path, query) = match call.target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (call.target.as_str(), None),
        };
        let mut builder = Request::builder().method(call.method.clone()).uri(&call.target);
        if let Some(ct) = &call.content_type {
            builder = builder.header(header::CONTENT_TYPE, ct.as_str());
        }
        if let Some(accept) = &call.accept {
            builder = builder.header(header::ACCEPT, accept.as_str());
        }
        let Ok(mut request) = builder.body(request_body(call.body.clone())) else {
            // Not a request hyper would have accepted (bad URI or header): nothing to serve.
            return Answer {
                status: StatusCode::BAD_REQUEST,
                body: Bytes::from_static(b"{\"kind\":\"Status\",\"code\":400}"),
            };
        };
        let info = match RequestInfo::parse(&call.method, path, &Query::parse(query)) {
            Ok(info) => info,
            Err(_) => {
                return Answer {
                    status: StatusCode::BAD_REQUEST,
                    body: Bytes::from_static(b"{\"kind\":\"Status\",\"code\":400}"),
                };
            }
        };
        request.extensions_mut().insert(info);
        request.extensions_mut().insert(UserInfo::new("fuzzer", vec!["system:masters".into()]));
        let response = self.api.serve_resource(request).await;
        let status = response.status();
        let watch = response.headers().get(header::TRANSFER_ENCODING).is_some_and(|v| v.as_bytes() == b"chunked");
        let body = if watch || is_watch(call) {
            // A watch streams until its timeout: its status says enough.
            Bytes::new()
        } else {
            match response.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(never) => match never {},
            }
        };
        Answer { status, body }
    }
}

fn is_watch(call: &Call) -> bool {
    call.target.contains("/watch/") || call.target.contains("watch=")
}

/// The 5xx Kubernetes itself answers: a list at a resource version the store has not reached
/// (504 after waiting); an apply over a stored object that does not fit the schema of the
/// version it is compared in (another version's schema let it in), or of a configuration that
/// does not (structured-merge-diff's plain errors); a `resourceVersion` that is not a number on
/// a get, a watch or an object written (the storage layer's plain error); a patch that removes
/// `apiVersion` (the conversion's internal error).
fn kubernetes_answers_5xx_too(code: u16, text: &str) -> bool {
    (code == 504 && text.contains("ResourceVersionTooLarge"))
        || (code == 500
            && ["failed to create typed live object", "failed to create typed patch object", "strconv.ParseUint: parsing"]
                .iter()
                .any(|t| text.contains(t)))
        || (code == 500 && text.contains("Object 'apiVersion' is missing in 'object has no apiVersion field'"))
}

/// The promise: no 5xx; errors are `Status` objects with their own code.
fn check(call: &Call, answer: &Answer) {
    let code = answer.status.as_u16();
    let text = String::from_utf8_lossy(&answer.body);
    assert!(code < 500 || kubernetes_answers_5xx_too(code, &text), "{call:?} answered {code}: {text}");
    if code >= 400 && !answer.body.is_empty() && text.trim_start().starts_with('{') {
        let status: Value = serde_json::from_slice(&answer.body).unwrap_or_else(|e| panic!("{call:?}: {e}: {text}"));
        assert_eq!(status.get("kind"), Some(&json!("Status")), "{call:?}: {text}");
        assert_eq!(status.get("code"), Some(&json!(code)), "{call:?}: {text}");
    }
}

/// The objects every request target starts from, by collection path.
pub fn base_objects() -> Vec<(String, Value)> {
    vec![
        ("/apis/stable.example.com/v1/namespaces/fuzz/crontabs".to_string(), crontab("base")),
        ("/apis/fuzz.example.com/v1/namespaces/fuzz/gadgets".to_string(), gadget("base")),
    ]
}

pub fn crontab(name: &str) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": "fuzz", "labels": {"app": "fuzz"}},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 1}
    })
}

pub fn gadget(name: &str) -> Value {
    json!({
        "apiVersion": "fuzz.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": name, "namespace": "fuzz", "labels": {"app": "fuzz", "tier": "a"},
                     "annotations": {"note": "x"}, "finalizers": ["fuzz.example.com/keep"]},
        "spec": {
            "color": "red", "name": "abc", "formatted": "red-2", "enabled": true, "replicas": 2,
            "maxReplicas": 10, "ratio": 0.5, "quantity": "1Gi", "ip": "10.0.0.1", "cidr": "10.0.0.0/8",
            "link": "https://example.com/a", "version": "1.2.3", "timeout": "1h", "when": "2020-01-01T00:00:00Z",
            "day": "2020-01-01", "uid": "550e8400-e29b-41d4-a716-446655440000", "secret": "aGVsbG8=",
            "mail": "a@b.c", "host": "example.com", "addr": "10.0.0.1", "addr6": "::1", "net": "10.0.0.0/8",
            "mac": "00:11:22:33:44:55", "uri": "https://example.com", "span": "1h", "port": "50%", "choice": "a",
            "tags": ["a", "b"], "atomic": [1, 2], "ports": [{"name": "a", "protocol": "TCP", "port": 80}],
            "labels": {"k": "v"}, "granular": {"a": "x"}, "atomicMap": {"b": 1}, "matrix": [[1.5, 2]],
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": 1}},
            "embedded": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}},
            "free": {"x": 1, "y": [1, {"z": null}]}, "anything": [1, "two", {"three": 3}], "immutable": "fixed"
        },
        "status": {"replicas": 2, "selector": "app=fuzz", "phase": "Ready",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    })
}
