//! The FieldsV1 wire form of a field set, as Kubernetes writes it in `managedFields`: a JSON
//! object whose keys are serialized path elements (`f:name`, `k:{"name":"a"}`, `v:"x"`,
//! `i:0`) and whose values are the sets below them; `"."` marks a node that is itself a
//! member, and a node with nothing below it is a member too (`"f:replicas":{}`).
//!
//! Decoding follows structured-merge-diff's reader: unknown element kinds are skipped, a
//! `null` node reads as `{}`, anything else malformed is an error (the caller then treats the
//! managedFields as invalid).

use serde_json::{Map, Value};

use super::gojson;
use super::path::PathElement;
use super::set::Set;

/// A FieldsV1 document that cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// The serialized form of one path element (`f:spec`, `k:{"port":80,"protocol":"TCP"}`).
pub fn element_key(element: &PathElement) -> String {
    match element {
        PathElement::Field(name) => {
            let mut out = String::with_capacity(name.len() + 2);
            out.push_str("f:");
            out.push_str(name);
            out
        }
        PathElement::Key(fields) => {
            let mut out = String::from("k:{");
            for (i, (name, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                gojson::write_string(&mut out, name);
                out.push(':');
                gojson::write_value(&mut out, value);
            }
            out.push('}');
            out
        }
        PathElement::Value(value) => format!("v:{}", gojson::to_string(value)),
        PathElement::Index(i) => format!("i:{i}"),
    }
}

/// Parses a serialized path element; `Ok(None)` for kinds this reader does not know.
pub fn parse_element(key: &str) -> Result<Option<PathElement>, DecodeError> {
    let bytes = key.as_bytes();
    let (Some(kind), Some(separator)) = (bytes.first(), bytes.get(1)) else {
        return Err(DecodeError("key must be 2 characters long:".to_string()));
    };
    if *separator != b':' {
        return Err(DecodeError(format!("missing colon: {key}")));
    }
    let rest = key.get(2..).unwrap_or_default();
    let element = match kind {
        b'f' => PathElement::Field(rest.to_string()),
        b'v' => PathElement::Value(crate::core::nesting::from_str(rest).map_err(|e| DecodeError(e.to_string()))?),
        b'k' => {
            let fields: Map<String, Value> =
                crate::core::nesting::from_str(rest).map_err(|e| DecodeError(e.to_string()))?;
            PathElement::Key(fields.into_iter().collect())
        }
        b'i' => PathElement::Index(rest.parse().map_err(|e: std::num::ParseIntError| DecodeError(e.to_string()))?),
        _ => return Ok(None),
    };
    Ok(Some(element))
}

/// The FieldsV1 object of a set.
pub fn encode(set: &Set) -> Value {
    Value::Object(encode_node(set, false))
}

fn encode_node(set: &Set, include_self: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let mut members = set.members().peekable();
    let has_children = set.children().next().is_some();
    if include_self && (members.peek().is_some() || has_children) {
        out.insert(".".into(), Value::Object(Map::new()));
    }
    for member in members {
        if set.child(member).is_none() {
            out.insert(element_key(member), Value::Object(Map::new()));
        }
    }
    for (element, child) in set.children() {
        let node = encode_node(child, set.has_member(element));
        out.insert(element_key(element), Value::Object(node));
    }
    out
}

/// Reads a FieldsV1 object.
pub fn decode(fields: &Value) -> Result<Set, DecodeError> {
    match fields {
        Value::Object(map) => Ok(decode_node(map)?.0),
        Value::Null => Ok(Set::new()),
        other => Err(DecodeError(format!("expected an object, got {other}"))),
    }
}

/// A node's set and whether the node itself is a member of its parent.
fn decode_node(map: &Map<String, Value>) -> Result<(Set, bool), DecodeError> {
    let mut set = Set::new();
    let mut is_member = false;
    let mut found_any = false;
    for (key, value) in map {
        if key == "." {
            is_member = true;
            continue;
        }
        let Some(element) = parse_element(key)? else {
            continue;
        };
        let (child, child_is_member) = match value {
            Value::Object(inner) => decode_node(inner)?,
            Value::Null => (Set::new(), true),
            other => return Err(DecodeError(format!("expected an object for {key:?}, got {other}"))),
        };
        found_any = true;
        if child_is_member {
            set.insert_member(element.clone());
        }
        if !child.is_empty() {
            set.add_child(element, child);
        }
    }
    // A node with nothing below it is a member of its parent.
    Ok((set, is_member || !found_any))
}

#[cfg(test)]
mod tests {
    use super::super::path::path_string;
    use super::*;
    use serde_json::json;

    fn round_trip(fields: Value) -> Value {
        encode(&decode(&fields).unwrap())
    }

    #[test]
    fn round_trips_kubernetes_documents() {
        for doc in [
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:replicas": {}}}),
            json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}, "f:name": {}}}}}),
            json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}, "v:5": {}}}}),
            json!({"f:spec": {"f:list": {}}}),
        ] {
            assert_eq!(round_trip(doc.clone()), doc);
        }
    }

    #[test]
    fn members_and_parents() {
        let set = decode(&json!({"f:spec": {".": {}, "f:a": {}}, "f:status": {"f:b": {"f:c": {}}}})).unwrap();
        let paths: Vec<String> = set.paths().iter().map(|p| path_string(p)).collect();
        assert_eq!(paths, [".spec", ".spec.a", ".status.b.c"]);
    }

    #[test]
    fn keys_are_written_as_go_writes_them() {
        let key = PathElement::Key(vec![("name".into(), json!("a<b")), ("port".into(), json!(8080))]);
        assert_eq!(element_key(&key), r#"k:{"name":"a\u003cb","port":8080}"#);
        assert_eq!(element_key(&PathElement::Value(json!(1.0))), "v:1");
        assert_eq!(parse_element(r#"k:{"port":80,"name":"x"}"#).unwrap().unwrap().to_string(), "[name=\"x\",port=80]");
    }

    #[test]
    fn unknown_kinds_are_skipped_and_garbage_is_an_error() {
        let set = decode(&json!({"x:future": {}, "f:a": null})).unwrap();
        assert_eq!(set.paths().len(), 1);
        assert!(decode(&json!({"f": {}})).is_err());
        assert!(decode(&json!({"fa": {}})).is_err());
        assert!(decode(&json!({"f:a": 1})).is_err());
        assert!(decode(&json!({"v:{": {}})).is_err());
        assert!(decode(&json!([])).is_err());
    }
}
