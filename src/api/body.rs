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

/// A response with a body already encoded in `content_type`.
pub fn bytes_response(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<RespBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
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

    #[test]
    fn warnings_are_quoted() {
        let mut response = bytes_response(StatusCode::OK, "application/json", "{}");
        add_warnings(&mut response, &["unknown field \"spec.x\"".to_string()]);
        assert_eq!(response.headers().get(header::WARNING).unwrap(), r#"299 - "unknown field \"spec.x\"""#);
    }
}
