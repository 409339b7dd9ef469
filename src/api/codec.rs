//! Decoding request bodies (JSON or YAML, by `Content-Type`) into unstructured objects, and
//! refusing them in kube-apiserver's words: its serializer's errors (Go's JSON and YAML texts),
//! wrapped as the create and update handlers wrap them (`transformDecodeError`).

use bytes::Bytes;
use serde_json::Value;

use super::negotiate::content_type_essence;
use super::strict::{self, JsonError, Tracked};
use crate::core::field::go_quote;
use crate::core::status::ApiError;

/// A decoded request body.
#[derive(Debug)]
pub struct Decoded {
    pub value: Value,
    /// Paths of fields the body holds twice (the last value wins), for `fieldValidation`.
    pub duplicates: Vec<String>,
}

/// Media types a custom resource endpoint names in its 415 and 406 answers: kube-apiserver's
/// serializers for custom resources, protobuf included (it serves only the Status, Table and
/// metadata views in it).
pub const OBJECT_MEDIA_TYPES: &str = "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The kind an endpoint takes, as the decoder's defaults (`CronTab` in `stable.example.com/v1`;
/// `Scale` in `autoscaling/v1`).
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
}

/// How the serializer refused a body, and what it had read of the body's kind by then.
enum Refusal {
    /// Before it knew a kind (syntax, the kind's own fields, no kind at all).
    Unrecognized(String),
    /// After: the kind and version it read, with the endpoint's filling in what is missing.
    Undecodable { kind: String, version: String, message: String },
}

/// Decodes an object body. The body must hold an object with a `kind`; the rest of its type
/// (`apiVersion`, the kind itself) is the write path's to check.
pub fn decode_object(body: &Bytes, content_type: Option<&str>, expected: Expected<'_>) -> Result<Decoded, ApiError> {
    let decoded = match content_type_essence(content_type).as_str() {
        "" | "application/json" | "*/*" => decode_json(body, expected),
        "application/yaml" => decode_yaml(body, expected),
        _ => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {OBJECT_MEDIA_TYPES}"
            )));
        }
    };
    decoded.map_err(|refusal| match refusal {
        Refusal::Unrecognized(message) => ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {message} ({})",
            expected.kind,
            summarize(body)
        )),
        Refusal::Undecodable { kind, version, message } => ApiError::bad_request(format!(
            "{kind} in version {} cannot be handled as a {}: {message}",
            go_quote(&version),
            expected.kind
        )),
    })
}

fn decode_json(body: &[u8], expected: Expected<'_>) -> Result<Decoded, Refusal> {
    let parsed = strict::from_json(body).map_err(|e| match e {
        JsonError::Syntax(text) => {
            Refusal::Unrecognized(format!("couldn't get version/kind; json parse error: {text}"))
        }
    })?;
    let (kind, version) = interpret(&parsed.tracked.value, expected)?;
    if let Some(number) = parsed.overflowing_number {
        return Err(Refusal::Undecodable { kind, version, message: strict::number_error(&number) });
    }
    with_kind(parsed.tracked, body)
}

fn decode_yaml(body: &[u8], expected: Expected<'_>) -> Result<Decoded, Refusal> {
    // The serializer's own YAML-to-JSON step: its refusal is go-yaml's text alone.
    let text =
        std::str::from_utf8(body).map_err(|_| Refusal::Unrecognized("yaml: invalid leading UTF-8 octet".into()))?;
    let tracked = super::go_yaml::first_document(text).map_err(Refusal::Unrecognized)?;
    interpret(&tracked.value, expected)?;
    with_kind(tracked, body)
}

/// What the serializer reads first (`SimpleMetaFactory.Interpret`: `apiVersion` and `kind`
/// into a Go struct), with the endpoint's defaults for what is missing
/// (`gvkWithDefaults`): the kind and version a later refusal names.
fn interpret(value: &Value, expected: Expected<'_>) -> Result<(String, String), Refusal> {
    let read = read_type_meta(value).map_err(Refusal::Unrecognized)?;
    let kind = if read.kind.is_empty() { expected.kind } else { &read.kind };
    let version = match (read.group.as_str(), read.version.as_str()) {
        ("", "") => expected.version,
        (group, "") if group == expected.group => expected.version,
        (_, version) => version,
    };
    Ok((kind.to_string(), version.to_string()))
}

/// A body's `apiVersion` (split into group and version) and `kind`, as read by
/// `SimpleMetaFactory.Interpret`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TypeMeta {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// Reads `apiVersion` and `kind` as Kubernetes' serializers first do: into a Go struct (keys
/// matched without regard to case; a value that is not a string refused), the version parsed
/// as a group/version. A refusal is Go's text.
pub fn read_type_meta(value: &Value) -> Result<TypeMeta, String> {
    let map = match value {
        Value::Object(map) => map,
        Value::Null => return Ok(TypeMeta::default()),
        other => {
            return Err(format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type struct {{ APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string \"json:\\\"kind,omitempty\\\"\" }}",
                json_type(other)
            ));
        }
    };
    let mut api_version = "";
    let mut kind = "";
    for (key, field) in map {
        let (name, slot) = if key.eq_ignore_ascii_case("apiVersion") {
            ("apiVersion", &mut api_version)
        } else if key.eq_ignore_ascii_case("kind") {
            ("kind", &mut kind)
        } else {
            continue;
        };
        match field {
            Value::String(text) if key == name || slot.is_empty() => *slot = text,
            Value::String(_) | Value::Null => {}
            other => {
                return Err(format!(
                    "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{name} of type string",
                    json_type(other)
                ));
            }
        }
    }
    let (group, version) = match api_version.matches('/').count() {
        0 => ("", api_version),
        1 => api_version.split_once('/').unwrap_or_default(),
        _ => return Err(format!("unexpected GroupVersion string: {api_version}")),
    };
    Ok(TypeMeta { group: group.to_string(), version: version.to_string(), kind: kind.to_string() })
}

/// The decoded object, which must name its kind (a string `kind`, as the unstructured object
/// reads it).
fn with_kind(tracked: Tracked, body: &[u8]) -> Result<Decoded, Refusal> {
    let Tracked { value, duplicates } = tracked;
    let has_kind = value.get("kind").and_then(Value::as_str).is_some_and(|k| !k.is_empty());
    if !has_kind {
        return Err(Refusal::Unrecognized(format!(
            "Object 'Kind' is missing in '{}'",
            crate::core::json_syntax::lossy(body)
        )));
    }
    Ok(Decoded { value, duplicates })
}

/// A JSON value's type as Go's `UnmarshalTypeError` names it.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The start of a body, as the handlers quote it in a refusal (`summarizeData`): the text of
/// an object's first 30 bytes, the hexadecimal of anything else's.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let start = body.get(..MAX).unwrap_or(body);
    let more = if body.len() > MAX { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", crate::core::json_syntax::lossy(start)),
        Some(_) => {
            let hex: String = start.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

/// A JSON value's text, as the `Object 'Kind' is missing in '...'` messages show it.
pub fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests;
