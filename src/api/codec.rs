//! Decoding request bodies (JSON or YAML, by `Content-Type`) into unstructured objects.

use bytes::Bytes;
use serde_json::Value;

use super::negotiate::content_type_essence;
use crate::core::status::ApiError;

/// A decoded request body.
#[derive(Debug)]
pub struct Decoded {
    pub value: Value,
    /// Paths of fields the body holds twice (the last value wins), for `fieldValidation`.
    pub duplicates: Vec<String>,
}

/// Media types accepted for object bodies (create, update).
pub const OBJECT_MEDIA_TYPES: &str = "application/json, application/yaml";

/// Decodes an object body. The body must be a JSON (or YAML) object.
pub fn decode_object(body: &Bytes, content_type: Option<&str>) -> Result<Decoded, ApiError> {
    let tracked = match content_type_essence(content_type).as_str() {
        "" | "application/json" | "*/*" => super::strict::from_json(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?,
        "application/yaml" => {
            let text =
                std::str::from_utf8(body).map_err(|e| ApiError::bad_request(format!("body is not UTF-8: {e}")))?;
            super::strict::from_yaml(text)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {OBJECT_MEDIA_TYPES} (got {other})"
            )));
        }
    };
    let super::strict::Tracked { value, duplicates } = tracked;
    if !value.is_object() {
        return Err(ApiError::bad_request(format!(
            "couldn't get version/kind; json parse error: expected an object, got {}",
            kind_of(&value)
        )));
    }
    Ok(Decoded { value, duplicates })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON value's text, as the `Object 'Kind' is missing in '...'` messages show it.
pub fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_json_and_yaml_objects() {
        let json = decode_object(&Bytes::from_static(br#"{"a":1}"#), Some("application/json")).unwrap();
        assert_eq!(json.value["a"], 1);
        let yaml =
            decode_object(&Bytes::from_static(b"a: 1\nb: yes\n"), Some("application/yaml; charset=utf-8")).unwrap();
        assert_eq!(yaml.value["a"], 1);
    }

    #[test]
    fn numbers_decode_to_the_nearest_float() {
        // The largest float32, written by Go's strconv: one unit in the last place off under
        // serde_json's default fast parser, which made `self.val == 3.40...e+38` rules fail.
        let body = Bytes::from_static(br#"{"f": 3.4028234663852886e+38, "g": 2.2250738585072014e-308}"#);
        let decoded = decode_object(&body, None).unwrap();
        assert_eq!(decoded.value["f"].as_f64(), Some(f64::from(f32::MAX)));
        assert_eq!(decoded.value["g"].as_f64(), Some(f64::MIN_POSITIVE));
        let yaml =
            decode_object(&Bytes::from_static(b"f: 3.4028234663852886e+38\n"), Some("application/yaml")).unwrap();
        assert_eq!(yaml.value["f"].as_f64(), Some(f64::from(f32::MAX)));
    }

    #[test]
    fn refuses_non_objects_and_unknown_types() {
        assert_eq!(decode_object(&Bytes::from_static(b"[1]"), None).unwrap_err().code, 400);
        assert_eq!(decode_object(&Bytes::from_static(b"{"), None).unwrap_err().code, 400);
        assert_eq!(decode_object(&Bytes::from_static(b"{}"), Some("text/plain")).unwrap_err().code, 415);
    }
}
