//! The API in process (no TLS, no filters): a sled store in a temporary directory, the given
//! definitions, and requests handed to `Api::serve_resource` with the request info and user
//! the filters would have set. Every answer is checked against the promise the server makes
//! about bad input: a 2xx, or a 4xx `Status` carrying the same code; never a 5xx, but the one
//! kube-apiserver 1.36 gives itself: an apply whose patch does not fit the schema's types
//! (`failed to create typed patch object …`, 500 without a reason, checked against a real one).

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crd_apiserver::api::body::{ReqBody, request_body};
use crd_apiserver::api::{Api, ApiOptions};
use crd_apiserver::core::request_info::{Query, RequestInfo};
use crd_apiserver::core::user::UserInfo;
use crd_apiserver::definitions::{Registry, load};
use crd_apiserver::store::Backend;
use crd_apiserver::store::sled::{SledOptions, SledStore};

pub struct InProcess {
    runtime: tokio::runtime::Runtime,
    api: Api,
    _dir: tempfile::TempDir,
}

/// An answer: its status code and its body (JSON when it is one).
#[derive(Debug)]
pub struct Answer {
    pub code: u16,
    pub body: Value,
    pub text: String,
}

impl InProcess {
    /// Serves the given manifests; each must load.
    pub fn new(manifests: &[&str]) -> InProcess {
        let mut definitions = Vec::new();
        for text in manifests {
            for doc in load::parse_documents(text).unwrap() {
                definitions.push(load::definition_from_value(doc, "test").map_err(|p| p.errors).unwrap());
            }
        }
        let (registry, problems) = Registry::build(definitions);
        assert!(problems.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let options = SledOptions { cache_capacity: 8 << 20, ..SledOptions::default() };
        let store = SledStore::open(dir.path(), options).unwrap();
        let api = Api::new(Backend::Sled(store), registry, ApiOptions::default());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        InProcess { runtime, api, _dir: dir }
    }

    /// Sends a request and checks the promise; `target` is the path and query.
    pub fn send(&self, method: Method, target: &str, content_type: &str, body: impl Into<Bytes>) -> Answer {
        let body: Bytes = body.into();
        let answer = self.runtime.block_on(self.serve(method.clone(), target, content_type, body.clone()));
        let typed_patch_refused = content_type == "application/apply-patch+yaml"
            && answer.code == 500
            && answer.body["message"].as_str().is_some_and(|m| m.starts_with("failed to create typed patch object ("))
            && answer.body.get("reason").is_none();
        assert!(
            answer.code < 500 || typed_patch_refused,
            "{method} {target} ({content_type}) {} answered {}: {}",
            String::from_utf8_lossy(&body),
            answer.code,
            answer.text
        );
        if answer.code >= 400 {
            assert_eq!(answer.body["kind"], json!("Status"), "{method} {target}: {}", answer.text);
            assert_eq!(answer.body["code"], json!(answer.code), "{method} {target}: {}", answer.text);
        }
        answer
    }

    pub fn send_json(&self, method: Method, target: &str, content_type: &str, body: &Value) -> Answer {
        self.send(method, target, content_type, body.to_string())
    }

    /// The status of a request whose body is a stream (a watch), which is dropped unread.
    pub fn status_of_stream(&self, target: &str) -> u16 {
        self.runtime.block_on(async {
            let response = self.api.serve_resource(self.request(Method::GET, target, "", Bytes::new())).await;
            response.status().as_u16()
        })
    }

    fn request(&self, method: Method, target: &str, content_type: &str, body: Bytes) -> Request<ReqBody> {
        let (path, query) = target.split_once('?').map_or((target, None), |(p, q)| (p, Some(q)));
        let mut request = Request::builder()
            .method(method.clone())
            .uri(target)
            .header(header::CONTENT_TYPE, content_type)
            .body(request_body(body))
            .unwrap();
        let info = RequestInfo::parse(&method, path, &Query::parse(query)).unwrap();
        request.extensions_mut().insert(info);
        request.extensions_mut().insert(UserInfo::new("tester", vec!["system:masters".into()]));
        request
    }

    async fn serve(&self, method: Method, target: &str, content_type: &str, body: Bytes) -> Answer {
        let response = self.api.serve_resource(self.request(method, target, content_type, body)).await;
        let code = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Answer { code, body, text }
    }
}
