//! Pretty printing (right inside the request log): a JSON document answered to a request that
//! asks for indented output is re-indented here, once for every handler and error path.
//!
//! kube-apiserver picks its pretty JSON serializer when the query says `pretty=<true>`, or,
//! without a `pretty` value, when the user agent is a browser or a command-line HTTP tool
//! (`curl`, `Wget`, `Mozilla/5.0`): k8s.io/apiserver `endpoints/handlers/negotiation`'s
//! `isPrettyPrint`. That serializer writes Go's `json.MarshalIndent(obj, "", "  ")` with no
//! newline after it. Streams (watches) are never indented, nor documents sent as written
//! (OpenAPI): only responses marked [`JsonDocument`] by `body::bytes_response` are.

use futures_util::future::BoxFuture;
use http::{Request, Response, header};
use http_body_util::BodyExt;

use super::{Filter, Next, run};
use crate::api::body::{JsonDocument, ReqBody, RespBody, full};
use crate::core::request_info::{Query, parse_go_bool};

#[derive(Clone)]
pub struct PrettyPrint;

impl Filter for PrettyPrint {
    fn call(&self, request: Request<ReqBody>, next: Next) -> BoxFuture<'static, Response<RespBody>> {
        let pretty = wants_pretty(&request);
        Box::pin(async move {
            let response = run(next, request).await;
            if !pretty || response.extensions().get::<JsonDocument>().is_none() {
                return response;
            }
            let (mut parts, body) = response.into_parts();
            // A marked body is whole in memory: collecting it does not wait on anything.
            let text = match body.collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(never) => match never {},
            };
            let document = text.strip_suffix(b"\n").unwrap_or(&text);
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, full(indent(document)))
        })
    }
}

/// Whether kube-apiserver would answer `request` with indented JSON.
fn wants_pretty<B>(request: &Request<B>) -> bool {
    // Go looks at the query only when its raw text mentions `pretty`, and then only at a
    // non-empty first value: one that is not a boolean means "not pretty".
    if let Some(raw) = request.uri().query().filter(|q| q.contains("pretty")) {
        let query = Query::parse(Some(raw));
        if let Some(value) = query.get("pretty").filter(|v| !v.is_empty()) {
            return parse_go_bool(value).unwrap_or(false);
        }
    }
    let agent = request.headers().get(header::USER_AGENT).map(|v| v.as_bytes()).unwrap_or_default();
    [&b"curl"[..], b"Wget", b"Mozilla/5.0"].iter().any(|prefix| agent.starts_with(prefix))
}

/// `compact` (valid JSON) indented as Go's `json.Indent(dst, src, "", "  ")`: one member or
/// element per line, two spaces per level, `": "` after keys, empty objects and arrays kept
/// as `{}` and `[]`. Strings are copied as they are, escapes included.
pub fn indent(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() + compact.len() / 2);
    let mut depth = 0usize;
    // Set after an opening bracket: the line break waits to see whether it closes at once.
    let mut opened = false;
    let mut in_string = false;
    let mut escaped = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    };
    for &byte in compact {
        if in_string {
            out.push(byte);
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        if byte.is_ascii_whitespace() {
            continue;
        }
        if opened {
            opened = false;
            if byte == b'}' || byte == b']' {
                depth = depth.saturating_sub(1);
                out.push(byte);
                continue;
            }
            newline(&mut out, depth);
        }
        match byte {
            b'{' | b'[' => {
                out.push(byte);
                depth += 1;
                opened = true;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(byte);
            }
            b',' => {
                out.push(byte);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b'"' => {
                out.push(byte);
                in_string = true;
            }
            _ => out.push(byte),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indented(text: &str) -> String {
        String::from_utf8(indent(text.as_bytes())).unwrap()
    }

    #[test]
    fn documents_are_indented_as_go_indents_them() {
        let compact = r#"{"kind":"List","items":[{"a":1,"b":[true,null]},{}],"empty":[],"s":"x,{y}: \"z\" \\"}"#;
        let expected = r#"{
  "kind": "List",
  "items": [
    {
      "a": 1,
      "b": [
        true,
        null
      ]
    },
    {}
  ],
  "empty": [],
  "s": "x,{y}: \"z\" \\"
}"#;
        assert_eq!(indented(compact), expected);
        // Whitespace between tokens goes; whitespace inside strings stays.
        assert_eq!(indented("{ \"a b\" : [ 1 , 2 ] }"), "{\n  \"a b\": [\n    1,\n    2\n  ]\n}");
        assert_eq!(indented("\"just a string\""), "\"just a string\"");
    }

    fn request(uri: &str, agent: Option<&str>) -> Request<()> {
        let mut builder = Request::get(uri);
        if let Some(agent) = agent {
            builder = builder.header(header::USER_AGENT, agent);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn pretty_is_asked_for_as_kube_apiserver_reads_it() {
        let cases = [
            ("/apis?pretty=true", None, true),
            ("/apis?pretty=1", Some("kubectl/v1.32"), true),
            ("/apis?pretty=false", Some("curl/8.5.0"), false),
            // A value that is not a boolean is "not pretty", whoever asks.
            ("/apis?pretty=yes", Some("curl/8.5.0"), false),
            // No value: the user agent decides.
            ("/apis?pretty=", Some("curl/8.5.0"), true),
            ("/apis?pretty", Some("kubectl/v1.32"), false),
            ("/apis", Some("curl/8.5.0"), true),
            ("/apis", Some("Wget/1.21"), true),
            ("/apis", Some("Mozilla/5.0 (X11)"), true),
            ("/apis", Some("Mozilla/4.0"), false),
            ("/apis", Some("kubectl/v1.32 (linux/amd64)"), false),
            ("/apis", None, false),
        ];
        for (uri, agent, expected) in cases {
            assert_eq!(wants_pretty(&request(uri, agent)), expected, "{uri} {agent:?}");
        }
    }
}
