//! Admission webhooks for tests, written from Kubernetes' AdmissionReview contract: one HTTPS
//! server (its own CA) whose paths behave differently — `/allow`, `/deny-bad-image` (denies
//! `spec.image: bad` with 403 and a message), `/label` (JSON patch adding a label), `/break`
//! (a patch that breaks the schema), `/flip` (toggles `spec.flip`), `/slow` (answers after
//! 3 s), `/hang` (never answers), `/garbage` (not JSON), `/v1beta1` (answers in v1beta1 without uid checks) — plus a
//! raw listener that answers HTTP/1.0 without Content-Length. Every review received is kept.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use crd_apiserver::cli::pki::{Authority, Leaf};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One review a webhook received: the path and the AdmissionReview.
pub type Received = (String, Value);

pub struct AdmissionWebhooks {
    /// `https://127.0.0.1:<port>`: append a path.
    pub base: String,
    /// An HTTP/1.0 endpoint answering allowed without Content-Length.
    pub http10_url: String,
    pub ca_pem: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    _runtime: tokio::runtime::Runtime,
}

fn patch_answer(uid: &Value, operations: Value) -> Value {
    let patch = base64::engine::general_purpose::STANDARD.encode(operations.to_string());
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}})
}

fn allowed(uid: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, "allowed": true}})
}

/// The answer of a path to a review.
async fn answer(path: &str, review: &Value) -> Result<Value, &'static str> {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let object = &request["object"];
    Ok(match path {
        "/allow" => allowed(&uid),
        "/warn" => json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": true, "warnings": ["the webhook has seen this"]}}),
        "/deny-bad-image" if object["spec"]["image"] == "bad" => {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "spec.image: \"bad\" is not allowed"}}})
        }
        "/deny-bad-image" => allowed(&uid),
        "/label" if object["metadata"].get("labels").is_some() => {
            patch_answer(&uid, json!([{"op": "add", "path": "/metadata/labels/mutated-by", "value": "webhook"}]))
        }
        "/label" => {
            patch_answer(&uid, json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "webhook"}}]))
        }
        "/break" => patch_answer(&uid, json!([{"op": "add", "path": "/spec/replicas", "value": "many"}])),
        "/flip" => {
            let next = if object["spec"]["flip"] == "a" { "b" } else { "a" };
            patch_answer(&uid, json!([{"op": "add", "path": "/spec/flip", "value": next}]))
        }
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            allowed(&uid)
        }
        // Never answers: a webhook past any timeout, however slow the machine.
        "/hang" => std::future::pending().await,
        "/garbage" => return Err("this is not an AdmissionReview"),
        "/v1beta1" => json!({"response": {"allowed": true}}),
        _ => return Err("unknown path"),
    })
}

fn tls_config() -> (rustls::ServerConfig, String) {
    let ca = Authority::new("admission-webhook-ca").unwrap();
    let leaf = ca
        .issue(&Leaf {
            common_name: "admission-webhook".into(),
            dns_names: vec!["localhost".into()],
            ips: vec![[127, 0, 0, 1].into()],
            server: true,
            ..Leaf::default()
        })
        .unwrap();
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(leaf.cert.as_bytes()).map(|c| c.unwrap()).collect();
    let key = PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    (tls, ca.pem.cert)
}

fn listener() -> (std::net::TcpListener, u16) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Answers one HTTP/1.0 exchange: reads the request, writes an allowed review with no
/// Content-Length, and closes the connection.
async fn http10_exchange(
    mut stream: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    received: Arc<Mutex<Vec<Received>>>,
) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let review = loop {
        let Ok(n) = stream.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buffer).to_string();
        let Some(end) = text.find("\r\n\r\n") else { continue };
        let length: usize = text[..end]
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
            .unwrap_or(0);
        if buffer.len() >= end + 4 + length {
            break serde_json::from_slice::<Value>(&buffer[end + 4..end + 4 + length]).unwrap_or(Value::Null);
        }
    };
    let body = allowed(&review["request"]["uid"]).to_string();
    received.lock().unwrap().push(("/http10".into(), review));
    let response = format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}");
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

impl AdmissionWebhooks {
    pub fn start() -> AdmissionWebhooks {
        let (mut tls, ca_pem) = tls_config();
        let raw_tls = Arc::new(tls.clone());
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let received: Arc<Mutex<Vec<Received>>> = Arc::default();
        let (main, port) = listener();
        let (raw, raw_port) = listener();
        let log = received.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(main).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (acceptor, log) = (acceptor.clone(), log.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let log = log.clone();
                        async move {
                            let path = request.uri().path().to_string();
                            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            log.lock().unwrap().push((path.clone(), review.clone()));
                            let bytes = match answer(&path, &review).await {
                                Ok(value) => serde_json::to_vec(&value).unwrap(),
                                Err(text) => text.as_bytes().to_vec(),
                            };
                            let mut response = http::Response::new(Full::new(Bytes::from(bytes)));
                            response
                                .headers_mut()
                                .insert("content-type", http::HeaderValue::from_static("application/json"));
                            Ok::<_, Infallible>(response)
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let log = received.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(raw).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(raw_tls);
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let (acceptor, log) = (acceptor.clone(), log.clone());
                tokio::spawn(async move {
                    if let Ok(stream) = acceptor.accept(tcp).await {
                        http10_exchange(stream, log).await;
                    }
                });
            }
        });
        AdmissionWebhooks {
            base: format!("https://127.0.0.1:{port}"),
            http10_url: format!("https://127.0.0.1:{raw_port}/http10"),
            ca_pem,
            received,
            _runtime: runtime,
        }
    }

    /// The base64 `caBundle` trusting these webhooks.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    /// Reviews received on a path so far.
    pub fn reviews(&self, path: &str) -> Vec<Value> {
        self.received.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, r)| r.clone()).collect()
    }

    /// A webhook entry calling `path` for the CronTabs of `stable.example.com`.
    pub fn hook(&self, name: &str, path: &str, operations: &[&str]) -> Value {
        json!({
            "name": name,
            "clientConfig": {"url": format!("{}{path}", self.base), "caBundle": self.ca_bundle()},
            "rules": [{"operations": operations, "apiGroups": ["stable.example.com"], "apiVersions": ["v1"], "resources": ["crontabs"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        })
    }
}
