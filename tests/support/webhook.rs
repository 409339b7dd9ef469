//! A conversion webhook for tests, written from Kubernetes' ConversionReview contract: an
//! HTTPS server (its own CA) that converts `tests.example.com` Shirts between v1 (`spec.color`)
//! and v1beta1 (`spec.hue`), counts its calls, and can be switched to failing answers.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use crd_apiserver::cli::pki::{Authority, Leaf};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

#[derive(Default)]
pub struct Counters {
    pub calls: AtomicUsize,
    pub objects: AtomicUsize,
    /// Answer with a failed result.
    pub failing: AtomicBool,
    /// Answer new connections as an HTTP/1.0 server does: no Content-Length, the body ends
    /// when the connection closes.
    pub http10: AtomicBool,
    /// Answers given as HTTP/1.0.
    pub http10_answers: AtomicUsize,
    /// Refuse (a failed result) every review holding an object of this `spec.color`.
    pub refused_color: std::sync::Mutex<Option<String>>,
    /// While set, requests are held unanswered until [`Counters::release`].
    pub holding: AtomicBool,
    released: tokio::sync::Notify,
    /// Requests that came in while held.
    pub held: AtomicUsize,
}

impl Counters {
    /// Holds every request from now on, unanswered.
    pub fn hold(&self) {
        self.holding.store(true, Ordering::SeqCst);
    }

    /// Answers the held requests, and the next ones at once.
    pub fn release(&self) {
        self.holding.store(false, Ordering::SeqCst);
        self.released.notify_waiters();
    }

    async fn wait_while_held(&self) {
        let mut counted = false;
        loop {
            let released = self.released.notified();
            if !self.holding.load(Ordering::SeqCst) {
                return;
            }
            if !counted {
                counted = true;
                self.held.fetch_add(1, Ordering::SeqCst);
            }
            released.await;
        }
    }
}

/// One HTTP/1.0 exchange: reads the request (headers and Content-Length body), writes the
/// conversion with no Content-Length, and closes.
async fn http10_exchange<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut stream: S, counters: &Counters) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
    let body = convert(&review, counters).to_string();
    counters.http10_answers.fetch_add(1, Ordering::SeqCst);
    let response = format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{body}");
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

pub struct Webhook {
    pub url: String,
    /// PEM of the CA that signed the webhook's serving certificate.
    pub ca_pem: String,
    pub counters: Arc<Counters>,
    _runtime: tokio::runtime::Runtime,
}

/// Renames one field of an object's spec.
fn rename(object: &mut Value, from: &str, to: &str) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(value) = spec.remove(from)
    {
        spec.insert(to.to_string(), value);
    }
}

fn convert(review: &Value, counters: &Counters) -> Value {
    let request = &review["request"];
    let uid = request["uid"].clone();
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default().to_string();
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    counters.calls.fetch_add(1, Ordering::SeqCst);
    counters.objects.fetch_add(objects.len(), Ordering::SeqCst);
    if counters.failing.load(Ordering::SeqCst) {
        return json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Failure", "message": "the converter is down for maintenance"}}});
    }
    let refused = counters.refused_color.lock().unwrap().clone();
    if let Some(color) = refused
        && objects.iter().any(|o| o["spec"]["color"] == json!(color))
    {
        return json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": uid, "result": {"status": "Failure", "message": format!("cannot convert the color {color}")}}});
    }
    let converted: Vec<Value> = objects
        .into_iter()
        .map(|mut object| {
            if desired.ends_with("/v1beta1") {
                rename(&mut object, "color", "hue");
            } else {
                rename(&mut object, "hue", "color");
            }
            object["apiVersion"] = json!(desired);
            object
        })
        .collect();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": uid, "result": {"status": "Success"}, "convertedObjects": converted}})
}

impl Webhook {
    pub fn start() -> Webhook {
        let ca = Authority::new("webhook-ca").unwrap();
        let leaf = ca
            .issue(&Leaf {
                common_name: "webhook".into(),
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
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        // HTTP/1.0 answers go out on connections that did not agree on HTTP/2.
        let mut http1_tls = tls.clone();
        http1_tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let counters = Arc::new(Counters::default());
        let served = counters.clone();
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
            let http1_acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(http1_tls));
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let counters = served.clone();
                if counters.http10.load(Ordering::SeqCst) {
                    let acceptor = http1_acceptor.clone();
                    tokio::spawn(async move {
                        if let Ok(stream) = acceptor.accept(tcp).await {
                            http10_exchange(stream, &counters).await;
                        }
                    });
                    continue;
                }
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let counters = counters.clone();
                        async move {
                            counters.wait_while_held().await;
                            let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            let answer = serde_json::to_vec(&convert(&review, &counters)).unwrap();
                            let mut response = http::Response::new(Full::new(Bytes::from(answer)));
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
        Webhook { url: format!("https://127.0.0.1:{port}/convert"), ca_pem: ca.pem.cert, counters, _runtime: runtime }
    }

    /// The Shirt definition of Kubernetes' selectable-fields test, converted by this webhook.
    pub fn shirt_definition(&self) -> String {
        use base64::Engine;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        format!(
            r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: shirts.tests.example.com
spec:
  group: tests.example.com
  scope: Cluster
  names: {{plural: shirts, singular: shirt, kind: Shirt, listKind: ShirtList}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1, v1beta1]
      clientConfig:
        url: {url}
        caBundle: {ca}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: [{{jsonPath: .spec.color}}, {{jsonPath: .spec.size}}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {{type: string}}
              size: {{type: string, enum: [S, M, L, XL]}}
  - name: v1beta1
    served: true
    storage: false
    selectableFields: [{{jsonPath: .spec.hue}}, {{jsonPath: .spec.size}}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              hue: {{type: string}}
              size: {{type: string, enum: [S, M, L, XL]}}
"#,
            url = self.url
        )
    }
}
