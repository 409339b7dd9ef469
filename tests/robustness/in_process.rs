//! The API in process (no TLS, no filters): a sled store in a temporary directory, the given
//! definitions, and requests handed to `Api::serve_resource` with the request info and user
//! the filters would have set. Every answer is checked against the promise the server makes
//! about bad input: a 2xx, or a 4xx `Status` carrying the same code; never a 5xx, but the ones
//! kube-apiserver 1.36 gives itself (checked against a real one): an apply whose patch does not
//! fit the schema's types (`failed to create typed patch object …`, 500 without a reason), and a
//! patch that removes `apiVersion`.

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
        // On a thread with the stack the server gives its own: bodies may nest 10,000 deep.
        let answer = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(crd_apiserver::core::nesting::THREAD_STACK_BYTES)
                .spawn_scoped(scope, || {
                    self.runtime.block_on(self.serve(method.clone(), target, content_type, body.clone()))
                })
                .unwrap()
                .join()
                .unwrap()
        });
        assert!(
            answer.code < 500 || kubernetes_answers_5xx_too(content_type, &answer),
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

/// The 5xx kube-apiserver answers too: structured-merge-diff's plain errors for a configuration
/// that does not fit the schema (`failed to create typed patch object ...`), a 500 without a
/// reason; a patch that removes `apiVersion`, its conversion's internal error.
fn kubernetes_answers_5xx_too(content_type: &str, answer: &Answer) -> bool {
    let message = answer.body["message"].as_str().unwrap_or_default();
    answer.code == 500
        && ((content_type == "application/apply-patch+yaml"
            && answer.body.get("reason").is_none()
            && message.starts_with("failed to create typed patch object ("))
            || message == "Internal error occurred: Object 'apiVersion' is missing in 'object has no apiVersion field'")
}
