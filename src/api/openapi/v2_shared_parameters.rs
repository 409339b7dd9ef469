//! The parameters a v2 document writes once, under its top-level `parameters`, and refers to
//! from its paths, as kube-openapi's builder does (builder/parameters.go,
//! `deduplicateParameters`): each under `<name>-<hash>`, the hash being the first six bytes of
//! the FNV-1 64 of the parameter's Go JSON in URL-safe base64, so the names are the ones
//! kube-apiserver's own document gives (kube-aggregator merges `parameters` by name). Every
//! slice kube-aggregator downloads, and the cluster's merged document, then holds each common
//! parameter (`pretty`, `limit`, `watch`, …) once instead of once per path.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The members of `spec.Parameter` in the order Go's encoding/json writes them (its
/// CommonValidations, SimpleSchema, ParamProps): the order the name's hash is taken over.
const GO_PARAMETER_ORDER: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "type",
    "nullable",
    "format",
    "items",
    "collectionFormat",
    "default",
    "example",
    "description",
    "name",
    "in",
    "required",
    "schema",
    "allowEmptyValue",
];

/// A parameter written once under the document's `parameters`.
pub struct SharedParameter {
    /// Its key under `parameters`: `<name>-<hash>`.
    pub key: String,
    /// Its encoding, as the document writes it.
    pub encoded: Vec<u8>,
}

/// `parameter` as kube-openapi shares it, or `None` where kube-apiserver keeps it inline:
/// `name` in path or query, `fieldValidation` and `dryRun` in query (kubectl reads them from
/// the operation), a body whose schema is the kind's own, and any parameter with a member Go's
/// `spec.Parameter` has no field for (its hash could not be Go's).
fn shared(parameter: &Map<String, Value>) -> Option<SharedParameter> {
    let name = parameter.get("name").and_then(Value::as_str).unwrap_or_default();
    let place = parameter.get("in").and_then(Value::as_str).unwrap_or_default();
    let generic_body = parameter
        .get("schema")
        .and_then(|s| s.get("$ref"))
        .and_then(Value::as_str)
        .is_some_and(|r| r.starts_with("#/definitions/io.k8s.apimachinery"));
    let inline = ((place == "query" || place == "path") && name == "name")
        || (place == "query" && (name == "fieldValidation" || name == "dryRun"))
        || (place == "body" && name == "body" && !generic_body);
    if inline || parameter.keys().any(|k| !GO_PARAMETER_ORDER.contains(&k.as_str())) {
        return None;
    }
    let mut go_json = vec![b'{'];
    for member in GO_PARAMETER_ORDER.iter().filter(|k| parameter.contains_key(**k)) {
        if go_json.len() > 1 {
            go_json.push(b',');
        }
        go_json.extend_from_slice(&super::v2::encoded(&Value::String((*member).to_string())));
        go_json.push(b':');
        go_json.extend_from_slice(&super::v2::encoded(&parameter[*member]));
    }
    go_json.push(b'}');
    let hash = fnv1_64(&go_html_escaped(go_json)).to_be_bytes();
    let label = if name.is_empty() { "param" } else { name };
    Some(SharedParameter {
        key: format!("{label}-{}", base64::engine::general_purpose::URL_SAFE.encode(&hash[..6])),
        encoded: super::v2::encoded(&Value::Object(parameter.clone())),
    })
}

/// JSON text with `<`, `>`, `&`, U+2028 and U+2029 escaped as Go's encoding/json writes them
/// (they only occur inside strings, so the text stays the same JSON).
fn go_html_escaped(text: Vec<u8>) -> Vec<u8> {
    let Ok(text) = String::from_utf8(text) else { return Vec::new() };
    text.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
        .into_bytes()
}

/// Go's hash/fnv `New64` (FNV-1, 64 bits).
fn fnv1_64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash: u64, b| hash.wrapping_mul(0x0000_0100_0000_01b3) ^ u64::from(*b))
}

/// Replaces each shared parameter of `parameters` (a path item's or an operation's list) by
/// its reference, and adds it to `out` unless `out` has it.
pub fn share(parameters: &mut Value, out: &mut Vec<SharedParameter>) {
    for parameter in parameters.as_array_mut().into_iter().flatten() {
        let Some(shared) = parameter.as_object().and_then(shared) else { continue };
        *parameter = json!({"$ref": format!("#/parameters/{}", shared.key)});
        if !out.iter().any(|p| p.key == shared.key) {
            out.push(shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(parameter: Value) -> Option<String> {
        shared(parameter.as_object().unwrap()).map(|p| p.key)
    }

    #[test]
    fn keys_are_kube_apiservers() {
        // The keys kube-apiserver v1.36.2's own /openapi/v2 gives these parameters.
        let pretty = json!({"uniqueItems": true, "type": "string", "name": "pretty", "in": "query",
            "description": "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget)."});
        assert_eq!(key(pretty).as_deref(), Some("pretty-tJGM1-ng"));
        let namespace = json!({"uniqueItems": true, "type": "string", "description": "object name and auth scope, such as for teams and projects", "name": "namespace", "in": "path", "required": true});
        assert_eq!(key(namespace).as_deref(), Some("namespace-vgWSWtn3"));
    }

    #[test]
    fn kept_inline_as_kube_apiserver_keeps_them() {
        let query = |name: &str| json!({"uniqueItems": true, "type": "string", "name": name, "in": "query"});
        for name in ["fieldValidation", "dryRun", "name"] {
            assert_eq!(key(query(name)), None, "{name}");
        }
        assert_eq!(key(json!({"type": "string", "name": "name", "in": "path", "required": true})), None);
        let own_body = json!({"name": "body", "in": "body", "required": true,
            "schema": {"$ref": "#/definitions/com.example.stable.v1.CronTab"}});
        assert_eq!(key(own_body), None);
        let patch = json!({"name": "body", "in": "body", "required": true,
            "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
        assert!(key(patch).is_some_and(|k| k.starts_with("body-")));
        assert_eq!(key(json!({"name": "limit", "in": "query", "x-unknown": 1})), None);
    }

    #[test]
    fn shared_once_and_referred_to() {
        let limit = json!({"uniqueItems": true, "type": "integer", "name": "limit", "in": "query"});
        let mut list = json!([limit, {"type": "string", "name": "name", "in": "path", "required": true}]);
        let mut again = json!([limit]);
        let mut out = Vec::new();
        share(&mut list, &mut out);
        share(&mut again, &mut out);
        assert_eq!(out.len(), 1);
        let reference = json!({"$ref": format!("#/parameters/{}", out[0].key)});
        assert_eq!(list[0], reference);
        assert_eq!(list[1]["name"], "name");
        assert_eq!(again[0], reference);
        assert_eq!(serde_json::from_slice::<Value>(&out[0].encoded).unwrap(), limit);
    }
}
