//! Fuzzed CEL rules: expressions assembled from tokens of the CEL grammar and the Kubernetes
//! libraries (or any text), attached to a node of a schema that has every CEL type, compiled
//! as a definition loads, then evaluated over edited objects, with and without an old object.

use arbitrary::Arbitrary;
use serde_json::{Value, json};

use crate::json::{Edit, Text, pick};

pub const TOKENS: &[&str] = &[
    "self",
    "oldSelf",
    ".",
    "spec",
    "i",
    "n",
    "d",
    "s",
    "b",
    "l",
    "m",
    "o",
    "ls",
    "lo",
    "ios",
    "q",
    "ts",
    "du",
    "free",
    "name",
    "x",
    "+",
    "-",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "!",
    "?",
    ":",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "size",
    "has",
    "in",
    "0",
    "1",
    "2",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "1u",
    "18446744073709551615u",
    "0u",
    "2.5",
    "1e308",
    "-1e308",
    "0.0",
    "'a'",
    "\"b\"",
    "''",
    "'%s %d %f %e %x %o %b'",
    "r'\\d+'",
    "b'\\xff'",
    "true",
    "false",
    "null",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
    "'1h'",
    "'-2562047h'",
    "'2562047h47m16.854775807s'",
    "'2020-01-01T00:00:00Z'",
    "'9999-12-31T23:59:59Z'",
    "'0001-01-01T00:00:00Z'",
    "quantity",
    "'1Ti'",
    "'9223372036854775807'",
    "'1e100'",
    "isQuantity",
    "add",
    "sub",
    "asInteger",
    "asApproximateFloat",
    "isInteger",
    "compareTo",
    "isLessThan",
    "isGreaterThan",
    "sign",
    "ip",
    "'10.0.0.1'",
    "'::1'",
    "cidr",
    "'10.0.0.0/8'",
    "isIP",
    "isCIDR",
    "family",
    "isLoopback",
    "containsIP",
    "containsCIDR",
    "masked",
    "prefixLength",
    "url",
    "'https://a/b?c=d'",
    "isURL",
    "getHost",
    "getPort",
    "getQuery",
    "getEscapedPath",
    "getScheme",
    "semver",
    "isSemver",
    "'1.2.3'",
    "major",
    "minor",
    "patch",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "format",
    "reverse",
    "strings.quote",
    "matches",
    "find",
    "findAll",
    "startsWith",
    "endsWith",
    "contains",
    "isSorted",
    "sum",
    "min",
    "max",
    "lists.range",
    "slice",
    "flatten",
    "distinct",
    "sort",
    "sortBy",
    "first",
    "last",
    "optional.of",
    "optional.none()",
    "?.",
    ".?",
    "orValue",
    "hasValue",
    "value",
    "or",
    "getField",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "math.greatest",
    "math.least",
    "base64.encode",
    "base64.decode",
    "getMilliseconds",
    "getHours",
    "getFullYear",
    "getDayOfWeek",
    "'UTC'",
    "'America/New_York'",
    "'+01:00'",
    "format.dns1123Label()",
    "format.named",
    "validate",
    "'dns1123Label'",
    "authorizer",
    "1000000",
    "100000000",
];

/// An expression: tokens of the grammar, or any text.
#[derive(Debug, Clone, Arbitrary)]
pub enum Expr {
    Tokens(Vec<u8>),
    Text(String),
}

impl Expr {
    pub fn text(&self) -> String {
        match self {
            Expr::Tokens(t) => {
                let words: Vec<&str> = t.iter().map(|i| pick(TOKENS, *i)).collect();
                words.join(" ").replace(" . ", ".").replace(" (", "(")
            }
            Expr::Text(s) => s.clone(),
        }
    }
}

/// Where in the schema the rule sits.
pub const PLACES: &[&str] =
    &["", "spec", "spec.ls", "spec.m", "spec.lo", "spec.i", "spec.s", "spec.free", "spec.ios", "spec.o"];

#[derive(Debug, Clone, Arbitrary)]
pub struct RuleInput {
    pub rule: Expr,
    pub message_expression: Option<Expr>,
    pub field_path: Option<Text>,
    pub place: u8,
    pub edits: Vec<Edit>,
    pub old_edits: Option<Vec<Edit>>,
}

/// The schema the rules are checked against: every type CEL sees in a structural schema.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "i": {"type": "integer"},
                    "n": {"type": "number"},
                    "d": {"type": "string", "format": "duration"},
                    "ts": {"type": "string", "format": "date-time"},
                    "s": {"type": "string", "maxLength": 1024},
                    "q": {"type": "string", "maxLength": 64},
                    "b": {"type": "boolean"},
                    "by": {"type": "string", "format": "byte"},
                    "l": {"type": "array", "maxItems": 100, "items": {"type": "integer"}},
                    "ls": {"type": "array", "maxItems": 100, "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 64}},
                    "lo": {"type": "array", "maxItems": 50, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                           "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 16}, "v": {"type": "integer"}}}},
                    "m": {"type": "object", "maxProperties": 20, "additionalProperties": {"type": "string", "maxLength": 64}},
                    "o": {"type": "object", "properties": {"x": {"type": "integer"}, "name": {"type": "string"}}},
                    "ios": {"x-kubernetes-int-or-string": true},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "du": {"type": "string", "maxLength": 32},
                    "name": {"type": "string", "maxLength": 253},
                    "x": {"type": "number", "format": "double"}
                }
            }
        }
    })
}

impl RuleInput {
    /// The definition manifest carrying the rule.
    pub fn manifest(&self) -> Value {
        let mut schema = schema();
        let mut rule = json!({"rule": self.rule.text()});
        if let Some(m) = &self.message_expression {
            rule["messageExpression"] = json!(m.text());
        }
        if let Some(f) = &self.field_path {
            rule["fieldPath"] = json!(f.text());
        }
        let place = pick(PLACES, self.place);
        let mut node = &mut schema;
        for part in place.split('.').filter(|p| !p.is_empty()) {
            node = &mut node["properties"][part];
        }
        if node.get("type").and_then(Value::as_str) == Some("array") && place == "spec.lo" {
            node = &mut node["items"];
        }
        node["x-kubernetes-validations"] = json!([rule]);
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "rules.fuzz.example.com"},
            "spec": {
                "group": "fuzz.example.com",
                "scope": "Namespaced",
                "names": {"plural": "rules", "singular": "rule", "kind": "Rule"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}]
            }
        })
    }

    /// The object the rule is evaluated over.
    pub fn object(edits: &[Edit]) -> Value {
        let base = json!({
            "apiVersion": "fuzz.example.com/v1", "kind": "Rule",
            "metadata": {"name": "r", "namespace": "fuzz"},
            "spec": {
                "i": 3, "n": 1.5, "d": "1h", "ts": "2020-01-01T00:00:00Z", "s": "hello-world", "q": "1Gi", "b": true,
                "by": "aGVsbG8=", "l": [3, 1, 2], "ls": ["a", "b"], "lo": [{"name": "a", "v": 1}, {"name": "b"}],
                "m": {"k": "v"}, "o": {"x": 1, "name": "n"}, "ios": "50%", "free": {"x": [1, {"y": "z"}]},
                "du": "10.0.0.1", "name": "abc", "x": 0.25
            }
        });
        crate::json::edited(base, edits)
    }
}
