//! Requests Go's HTTP server refuses as malformed before any handler of kube-apiserver runs,
//! refused here with Go's plain-text answers: a path with a malformed percent-escape
//! (`url.ParseRequestURI`), and for HTTP/1.1 a missing, repeated or malformed `Host` header
//! (`net/http`'s `readRequest`). Go writes `400 Bad Request` (with the reason in the status
//! line and the body when it names one) and closes the connection.
//!
//! Owns only these checks and their answers; the transport's size limits are `refusals`'.

use http::{HeaderValue, Request, Response, StatusCode, Version, header};

use crate::api::body::{RespBody, bytes_response};

/// Why a request is malformed, worded as Go's `badRequestError`s (`None`: Go's bare
/// `400 Bad Request`, for errors it does not name).
fn malformation<B>(request: &Request<B>) -> Option<Option<&'static str>> {
    if crate::core::paths::unescape(request.uri().path()).is_err() {
        return Some(None);
    }
    if request.version() != Version::HTTP_11 {
        return None;
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (None, _) => Some(Some("missing required Host header")),
        (Some(_), Some(_)) => Some(None),
        (Some(host), None) if !host.as_bytes().iter().all(|b| valid_host_byte(*b)) => {
            Some(Some("malformed Host header"))
        }
        (Some(_), None) => None,
    }
}

/// The bytes Go's `httpguts.ValidHostHeader` lets through: letters, digits and the
/// punctuation of host names, IPv6 literals, ports and percent-escapes.
fn valid_host_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!$%&()*+,-.:;=[']_~".contains(&byte)
}

/// Go's answer to a malformed request, if this one is.
pub fn refusal<B>(request: &Request<B>) -> Option<Response<RespBody>> {
    let reason = malformation(request)?;
    let text = match reason {
        Some(reason) => format!("400 Bad Request: {reason}"),
        None => "400 Bad Request".to_string(),
    };
    let mut response = bytes_response(StatusCode::BAD_REQUEST, "text/plain; charset=utf-8", text.clone());
    if request.version() < Version::HTTP_2 {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        // Go names the error in the status line too.
        if let Some(phrase) = text.strip_prefix("400 ").map(|p| bytes::Bytes::from(p.to_string()))
            && let Ok(phrase) = hyper::ext::ReasonPhrase::try_from(phrase)
        {
            response.extensions_mut().insert(phrase);
        }
    }
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: Version, path: &str, hosts: &[&str]) -> Request<()> {
        let mut builder = Request::builder().version(version).uri(path);
        for host in hosts {
            builder = builder.header(header::HOST, *host);
        }
        builder.body(()).unwrap()
    }

    fn check(version: Version, path: &str, hosts: &[&str], expected: Option<&str>) {
        let answer = refusal(&request(version, path, hosts)).map(|r| {
            let phrase = r.extensions().get::<hyper::ext::ReasonPhrase>().map(|p| p.as_bytes().to_vec());
            let closes = r.headers().get(header::CONNECTION).is_some_and(|v| v == "close");
            assert_eq!(r.status(), 400);
            assert_eq!(r.headers()[header::CONTENT_TYPE], "text/plain; charset=utf-8");
            assert_eq!(closes, version < Version::HTTP_2, "{path} {hosts:?}");
            let phrase = phrase.map(|p| String::from_utf8(p).unwrap());
            assert_eq!(phrase.is_some(), version < Version::HTTP_2);
            phrase.unwrap_or_default()
        });
        assert_eq!(answer.as_deref(), expected, "{version:?} {path} {hosts:?}");
    }

    #[test]
    fn malformed_requests_are_refused_as_go_refuses_them() {
        let v11 = Version::HTTP_11;
        check(v11, "/apis", &["localhost:6443"], None);
        check(v11, "/apis/g/v1/namespaces/a/things/%41", &["[::1]:6443"], None);
        check(v11, "/apis", &[], Some("Bad Request: missing required Host header"));
        check(v11, "/apis", &["a", "b"], Some("Bad Request"));
        check(v11, "/apis", &["bad host"], Some("Bad Request: malformed Host header"));
        check(v11, "/apis", &["a\"b"], Some("Bad Request: malformed Host header"));
        // An empty Host is a Host header.
        check(v11, "/apis", &[""], None);
        check(v11, "/apis/a%zz", &["localhost"], Some("Bad Request"));
        // HTTP/1.0 needs no Host; HTTP/2 carries its authority elsewhere.
        check(Version::HTTP_10, "/apis", &[], None);
        check(Version::HTTP_2, "/apis", &[], None);
        check(Version::HTTP_2, "/apis/%", &[], Some(""));
    }
}
