//! Request and response bodies: the body types of the whole server, reading a request body
//! under the size limit, and writing responses. `error_response` is the one place where an
//! [`ApiError`] becomes a `Status` on the wire.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};

use super::negotiate::Encoding;
use crate::core::status::{ApiError, Status};

/// Request bodies as the server passes them around.
pub type ReqBody = UnsyncBoxBody<Bytes, BodyError>;
/// Response bodies: whole buffers, or streams for watches.
pub type RespBody = UnsyncBoxBody<Bytes, Infallible>;

/// Marks a response whose body trickles out in small pieces for as long as it lasts (a
/// watch), found in its extensions by the connection, which then seals its TLS records small:
/// a client that stops reading leaves the connection holding only the last of them.
#[derive(Debug, Clone, Copy)]
pub struct Streamed;

/// Marks a response whose body is one whole encoded JSON document (an object, list, Table,
/// `Status` or discovery document), which the pretty-print filter may indent.
#[derive(Debug, Clone, Copy)]
pub struct JsonDocument;

/// An error while reading a request body.
pub type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// Largest request body accepted (Kubernetes' `MaxRequestBodyBytes`).
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// Wraps bytes as a request body (tests, internal calls).
pub fn request_body(bytes: impl Into<Bytes>) -> ReqBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

/// A whole response body.
pub fn full(bytes: impl Into<Bytes>) -> RespBody {
    Full::new(bytes.into()).boxed_unsync()
}

/// Reads a whole request body, refusing more than [`MAX_REQUEST_BYTES`] with 413.
pub async fn read_limited(mut body: ReqBody) -> Result<Bytes, ApiError> {
    let mut buffer = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::bad_request(format!("unable to read request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buffer.len() + data.len() > MAX_REQUEST_BYTES {
                return Err(ApiError::request_entity_too_large(format!(
                    "Request entity too large: limit is {MAX_REQUEST_BYTES}"
                )));
            }
            buffer.extend_from_slice(&data);
        }
    }
    Ok(buffer.freeze())
}

/// A response with a body already encoded in `content_type`. A JSON body (`application/json`,
/// with or without parameters) is an encoded object, list or `Status`: it ends with the newline
/// Kubernetes' JSON serializer writes after every document (Go's `json.Encoder`), added here
/// so that no handler has to. Documents served as written text, which kube-apiserver does not
/// end with a newline (OpenAPI, `/version`), go through [`document_response`] instead.
pub fn bytes_response(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<RespBody> {
    let body = body.into();
    if is_json(content_type) && !body.is_empty() {
        let mut response = with_head(Response::new(newline_terminated(body)), status, content_type);
        response.extensions_mut().insert(JsonDocument);
        return response;
    }
    with_head(Response::new(full(body)), status, content_type)
}

/// A response whose body is sent exactly as given, whatever its type.
pub fn document_response(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<RespBody> {
    with_head(Response::new(full(body)), status, content_type)
}

fn with_head(mut response: Response<RespBody>, status: StatusCode, content_type: &'static str) -> Response<RespBody> {
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `application/json` itself, parameters aside (not `application/jsonl` nor `…+json`).
fn is_json(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// `text` followed by a newline: appended in place when the buffer is this response's alone
/// and has room, else sent as a second frame (shared documents such as discovery's are
/// never copied).
fn newline_terminated(text: Bytes) -> RespBody {
    match text.try_into_mut() {
        Ok(mut owned) if owned.capacity() > owned.len() => {
            owned.extend_from_slice(b"\n");
            full(owned.freeze())
        }
        Ok(owned) => two_frames(owned.freeze()),
        Err(shared) => two_frames(shared),
    }
}

fn two_frames(text: Bytes) -> RespBody {
    TwoFrames { text: Some(text), newline: true }.boxed_unsync()
}

/// A whole text and then its newline, with an exact size (so HTTP/1.1 sends a `Content-Length`).
struct TwoFrames {
    text: Option<Bytes>,
    newline: bool,
}

impl http_body::Body for TwoFrames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        let chunk = match self.text.take() {
            Some(text) => Some(text),
            None if self.newline => {
                self.newline = false;
                Some(Bytes::from_static(b"\n"))
            }
            None => None,
        };
        std::task::Poll::Ready(chunk.map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.text.is_none() && !self.newline
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let left = self.text.as_ref().map_or(0, Bytes::len) + usize::from(self.newline);
        http_body::SizeHint::with_exact(left as u64)
    }
}

/// Encodes a JSON value in the negotiated encoding.
pub fn value_response(status: StatusCode, encoding: Encoding, value: &serde_json::Value) -> Response<RespBody> {
    match encoding {
        Encoding::Yaml => match serde_saphyr::to_string(value) {
            Ok(text) => bytes_response(status, "application/yaml", text),
            Err(e) => error_response(&ApiError::internal(format!("encoding YAML: {e}")), Encoding::Json),
        },
        Encoding::Json => match crate::core::json::to_vec(value) {
            Ok(bytes) => bytes_response(status, "application/json", bytes),
            Err(e) => error_response(&ApiError::internal(format!("encoding JSON: {e}")), Encoding::Json),
        },
    }
}

/// The `Status` body of an error, in the requested encoding.
pub fn error_response(error: &ApiError, encoding: Encoding) -> Response<RespBody> {
    let status = error.to_status();
    status_response(&status, encoding)
}

/// Writes a `Status` object (success or failure) with its own code (200 when it has none), its
/// JSON members in Kubernetes' order (YAML's are sorted, as Kubernetes converts JSON to YAML).
pub fn status_response(status: &Status, encoding: Encoding) -> Response<RespBody> {
    let code = match status.code {
        0 => StatusCode::OK,
        code => StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    };
    if code.is_server_error() {
        // A server-side failure is the admin's to see, whatever the verbosity (the client
        // gets the same text in the Status, and the audit ID in a header).
        let audit_id = crate::core::request_scope::audit_id();
        tracing::error!(
            code = status.code,
            reason = %status.reason,
            "audit-ID" = audit_id,
            "request failed: {}",
            status.message
        );
    }
    let mut response = match encoding {
        Encoding::Json => match crate::core::json::to_vec(status) {
            Ok(bytes) => bytes_response(code, "application/json", bytes),
            Err(e) => error_response(&ApiError::internal(format!("encoding JSON: {e}")), Encoding::Json),
        },
        Encoding::Yaml => value_response(code, encoding, &serde_json::to_value(status).unwrap_or_default()),
    };
    if let Some(seconds) = status.details.as_ref().and_then(|d| d.retry_after_seconds)
        && let Ok(v) = HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

/// Adds `Warning` headers after the response's own, as Kubernetes' recorder writes them
/// (see `api::warnings`).
pub fn add_warnings(response: &mut Response<RespBody>, warnings: &[String]) {
    super::warnings::add(response, warnings);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn oversized_bodies_are_413() {
        let body = request_body(vec![b'x'; MAX_REQUEST_BYTES + 1]);
        let err = read_limited(body).await.unwrap_err();
        assert_eq!(err.code, 413);
        assert_eq!(err.message, "Request entity too large: limit is 3145728");
        assert_eq!(read_limited(request_body("ok")).await.unwrap(), Bytes::from_static(b"ok"));
    }

    async fn whole(response: Response<RespBody>) -> (Option<u64>, Bytes) {
        let body = response.into_body();
        let exact = http_body::Body::size_hint(&body).exact();
        (exact, body.collect().await.unwrap().to_bytes())
    }

    #[tokio::test]
    async fn json_documents_end_with_a_newline_and_documents_as_given() {
        // A buffer of its own with room: the newline is written into it.
        let mut owned = Vec::with_capacity(8);
        owned.extend_from_slice(b"{}");
        assert_eq!(whole(bytes_response(StatusCode::OK, "application/json", owned)).await, (Some(3), "{}\n".into()));
        // A shared document (discovery's): sent as it is, then the newline, with the size known.
        let shared = Bytes::from_static(b"{\"kind\":\"APIGroupList\"}");
        let kept = shared.clone();
        let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let (size, text) = whole(bytes_response(StatusCode::OK, aggregated, shared)).await;
        assert_eq!(
            (size, text),
            (Some(kept.len() as u64 + 1), Bytes::from(format!("{}\n", "{\"kind\":\"APIGroupList\"}")))
        );
        // Not JSON, empty, or a document served as written: untouched.
        for (response, expected) in [
            (bytes_response(StatusCode::OK, "application/yaml", "a: 1\n"), "a: 1\n"),
            (bytes_response(StatusCode::OK, "application/jsonl", "{}"), "{}"),
            (bytes_response(StatusCode::NOT_MODIFIED, "application/json", Bytes::new()), ""),
            (document_response(StatusCode::OK, "application/json", "{}"), "{}"),
        ] {
            assert_eq!(whole(response).await.1, expected);
        }
    }

    #[test]
    fn warnings_are_quoted() {
        let mut response = bytes_response(StatusCode::OK, "application/json", "{}");
        add_warnings(&mut response, &["unknown field \"spec.x\"".to_string()]);
        assert_eq!(response.headers().get(header::WARNING).unwrap(), r#"299 - "unknown field \"spec.x\"""#);
    }
}
