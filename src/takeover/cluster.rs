//! The calls a takeover makes on the main apiserver (kube-rs, objects as JSON): get, list a
//! page, create, update, delete, dry-run writes. Every failure names what was asked, so that a
//! missing permission reads as the permission (kube-apiserver's 403 text says which).

use serde_json::Value;

use super::Error;
use crate::core::gvr::GroupVersion;
use crate::core::paths;

/// A client of the main apiserver.
#[derive(Clone)]
pub struct Cluster {
    client: ::kube::Client,
}

/// A path on the main apiserver.
pub fn object_path(group: &str, version: &str, namespace: Option<&str>, plural: &str, name: &str) -> String {
    let collection = paths::collection_path(&GroupVersion::new(group, version), namespace, plural);
    if name.is_empty() { collection } else { format!("{collection}/{name}") }
}

/// The outcome of a call the caller inspects rather than fails on.
pub enum Answer {
    Ok(Value),
    Failed { code: u16, reason: String, message: String },
}

impl Cluster {
    pub fn new(client: ::kube::Client) -> Cluster {
        Cluster { client }
    }

    async fn call(&self, method: http::Method, path: &str, body: Option<&Value>) -> Result<Answer, Error> {
        let bytes = match body {
            Some(b) => serde_json::to_vec(b).map_err(|e| Error::Cluster(format!("encoding {path}: {e}")))?,
            None => Vec::new(),
        };
        let mut request = http::Request::builder().method(method.clone()).uri(path);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(bytes).map_err(|e| Error::Cluster(format!("{method} {path}: {e}")))?;
        match self.client.request::<Value>(request).await {
            Ok(value) => Ok(Answer::Ok(value)),
            Err(::kube::Error::Api(status)) => {
                Ok(Answer::Failed { code: status.code, reason: status.reason.clone(), message: status.message.clone() })
            }
            Err(e) => Err(Error::Cluster(format!(
                "{method} {path}: the main apiserver cannot be reached: {}",
                crate::kube::describe(&e)
            ))),
        }
    }

    fn fail(what: &str, path: &str, answer: Answer) -> Error {
        match answer {
            Answer::Failed { code: 403, message, .. } => Error::Forbidden(format!("{what} ({path}): {message}")),
            Answer::Failed { code, message, .. } => Error::Cluster(format!("{what} ({path}): {code} {message}")),
            Answer::Ok(_) => Error::Cluster(format!("{what} ({path}): unexpected answer")),
        }
    }

    /// The object at `path`; `None` when it does not exist.
    pub async fn get(&self, what: &str, path: &str) -> Result<Option<Value>, Error> {
        match self.call(http::Method::GET, path, None).await? {
            Answer::Ok(v) => Ok(Some(v)),
            Answer::Failed { code: 404, .. } => Ok(None),
            other => Err(Self::fail(what, path, other)),
        }
    }

    /// One page of a list: `limit` items after `continue_token`.
    pub async fn list_page(&self, what: &str, path: &str, limit: usize, token: Option<&str>) -> Result<Value, Error> {
        let full = {
            let mut query = form_urlencoded::Serializer::new(String::new());
            query.append_pair("limit", &limit.to_string());
            if let Some(token) = token {
                query.append_pair("continue", token);
            }
            format!("{path}?{}", query.finish())
        };
        match self.call(http::Method::GET, &full, None).await? {
            Answer::Ok(v) => Ok(v),
            other => Err(Self::fail(what, path, other)),
        }
    }

    /// Creates; the caller inspects the answer (`what` names the step in its own errors).
    pub async fn create(&self, _what: &str, path: &str, body: &Value) -> Result<Answer, Error> {
        self.call(http::Method::POST, path, Some(body)).await
    }

    pub async fn update(&self, what: &str, path: &str, body: &Value) -> Result<Value, Error> {
        match self.call(http::Method::PUT, path, Some(body)).await? {
            Answer::Ok(v) => Ok(v),
            other => Err(Self::fail(what, path, other)),
        }
    }

    /// Creates, or answers the object that is already there.
    pub async fn ensure(&self, what: &str, path: &str, body: &Value) -> Result<(), Error> {
        match self.create(what, path, body).await? {
            Answer::Ok(_) | Answer::Failed { code: 409, .. } => Ok(()),
            other => Err(Self::fail(what, path, other)),
        }
    }

    /// Deletes; an object already gone is fine.
    pub async fn delete(&self, what: &str, path: &str) -> Result<(), Error> {
        match self.call(http::Method::DELETE, path, None).await? {
            Answer::Ok(_) | Answer::Failed { code: 404, .. } => Ok(()),
            other => Err(Self::fail(what, path, other)),
        }
    }

    /// A write with `dryRun=All`: what admission says, nothing stored.
    pub async fn dry_run(&self, method: http::Method, path: &str, body: &Value) -> Result<Answer, Error> {
        self.call(method, &format!("{path}?dryRun=All"), Some(body)).await
    }

    /// Any call, for the caller to inspect.
    pub async fn raw(&self, method: http::Method, path: &str, body: Option<&Value>) -> Result<Answer, Error> {
        self.call(method, path, body).await
    }

    pub fn failure(what: &str, path: &str, answer: Answer) -> Error {
        Self::fail(what, path, answer)
    }
}
