//! Structured fuzz input: JSON values whose keys and strings come mostly from dictionaries of
//! names and texts the server gives meaning to, and edits that set or remove them at paths in
//! a valid base document, so that mutations get past decoding into every later step.

use arbitrary::Arbitrary;
use serde_json::{Map, Value};

/// Object keys the server and the fuzzed definitions give meaning to.
pub const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "generateName",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "cronSpec",
    "image",
    "replicas",
    "color",
    "formatted",
    "enabled",
    "maxReplicas",
    "ratio",
    "quantity",
    "ip",
    "cidr",
    "link",
    "version",
    "timeout",
    "when",
    "day",
    "uid",
    "secret",
    "mail",
    "host",
    "addr",
    "addr6",
    "net",
    "mac",
    "uri",
    "span",
    "port",
    "choice",
    "tags",
    "atomic",
    "ports",
    "protocol",
    "granular",
    "a",
    "b",
    "atomicMap",
    "matrix",
    "template",
    "embedded",
    "data",
    "free",
    "anything",
    "immutable",
    "selector",
    "phase",
    "conditions",
    "type",
    "lastTransitionTime",
    "manager",
    "operation",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
    "f:metadata",
    "f:spec",
    "f:status",
    "f:replicas",
    "f:labels",
    "f:ports",
    "f:name",
    "f:tags",
    ".",
    "k:{\"name\":\"a\",\"protocol\":\"TCP\"}",
    "k:{\"name\":\"a\"}",
    "v:\"x\"",
    "v:1",
    "i:0",
    "f:",
    "k:",
    "v:",
    "op",
    "path",
    "value",
    "from",
    "propagationPolicy",
    "gracePeriodSeconds",
    "orphanDependents",
    "dryRun",
    "preconditions",
    "x",
    "",
    "apiGroup",
    "controller",
    "blockOwnerDeletion",
];

/// Strings the server and the fuzzed definitions give meaning to.
pub const TEXTS: &[&str] = &[
    "stable.example.com/v1",
    "CronTab",
    "fuzz.example.com/v1",
    "fuzz.example.com/v2",
    "Gadget",
    "v1",
    "meta.k8s.io/v1",
    "DeleteOptions",
    "Scale",
    "autoscaling/v1",
    "fuzz",
    "base",
    "scratch",
    "default",
    "red",
    "forbidden",
    "abc",
    "x-",
    "a-b-c",
    "1Ti",
    "1.5Gi",
    "100m",
    "1e3",
    "0.1",
    "10%",
    "80",
    "1.2.3",
    "v1.2.3-rc.1+b",
    "10.0.0.1",
    "::1",
    "::ffff:1.2.3.4",
    "10.0.0.0/8",
    "fe80::/10",
    "https://a.example/b?c=d#e",
    "http://[::1]:80/",
    "2020-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
    "0001-01-01T00:00:00Z",
    "2020-02-30",
    "1h30m",
    "-2562047h47m16.854775808s",
    "2562047h47m16.854775807s",
    "1ns",
    "00:11:22:33:44:55",
    "550e8400-e29b-41d4-a716-446655440000",
    "aGVsbG8=",
    "a@b.c",
    "%s-%d",
    "FieldsV1",
    "Apply",
    "Update",
    "add",
    "remove",
    "replace",
    "move",
    "copy",
    "test",
    "/spec",
    "/spec/replicas",
    "/spec/ports/0",
    "/spec/ports/-",
    "/spec/tags/1",
    "/metadata/labels/a~1b",
    "/metadata/managedFields",
    "/status",
    "/",
    "",
    "~",
    "~2",
    "0",
    "-1",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1e308",
    "Background",
    "Orphan",
    "Foreground",
    "TCP",
    "UDP",
    "Ready",
    "True",
    "status",
    "scale",
    "kubectl",
    "a=b",
    "app in (x,y)",
    "!a",
    "spec.color=red",
    "metadata.name!=x",
    "\u{0}",
    "é",
    "\u{10FFFF}",
    "\u{FEFF}",
];

/// A key: from the dictionary (most often) or any string.
#[derive(Debug, Clone, Arbitrary)]
pub enum Key {
    Known(u8),
    Index(u8),
    Any(String),
}

impl Key {
    pub fn text(&self) -> String {
        match self {
            Key::Known(i) => pick(KEYS, *i).to_string(),
            Key::Index(i) => i.to_string(),
            Key::Any(s) => s.clone(),
        }
    }
}

/// A string: from the dictionary (most often) or any string.
#[derive(Debug, Clone, Arbitrary)]
pub enum Text {
    Known(u8),
    Long(u8, u16),
    Any(String),
}

impl Text {
    pub fn text(&self) -> String {
        match self {
            Text::Known(i) => pick(TEXTS, *i).to_string(),
            Text::Long(i, n) => pick(TEXTS, *i).repeat(usize::from(*n % 4096)),
            Text::Any(s) => s.clone(),
        }
    }
}

pub fn pick<'a>(list: &[&'a str], i: u8) -> &'a str {
    list.get(usize::from(i) % list.len().max(1)).copied().unwrap_or_default()
}

/// A JSON value. `Nest` wraps its value in many objects and arrays, to reach depth limits.
#[derive(Debug, Clone, Arbitrary)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Small(i8),
    Float(f64),
    Text(Text),
    Array(Vec<Json>),
    Object(Vec<(Key, Json)>),
    Nest(u8, Box<Json>),
}

impl Json {
    pub fn value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Int(i) => Value::from(*i),
            Json::Uint(u) => Value::from(*u),
            Json::Small(i) => Value::from(*i),
            Json::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
            Json::Text(t) => Value::String(t.text()),
            Json::Array(items) => Value::Array(items.iter().map(Json::value).collect()),
            Json::Object(fields) => Value::Object(fields.iter().map(|(k, v)| (k.text(), v.value())).collect()),
            Json::Nest(depth, inner) => {
                let mut value = inner.value();
                for level in 0..usize::from(*depth) {
                    value = if level % 2 == 0 { Value::Array(vec![value]) } else { single("x", value) };
                }
                value
            }
        }
    }
}

fn single(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_string(), value);
    Value::Object(map)
}

/// Sets (or removes) the value at a path of a document, creating objects on the way.
#[derive(Debug, Clone, Arbitrary)]
pub struct Edit {
    pub path: Vec<Key>,
    pub value: Option<Json>,
}

impl Edit {
    pub fn apply(&self, document: &mut Value) {
        let Some((last, parents)) = self.path.split_last() else {
            if let Some(v) = &self.value {
                *document = v.value();
            }
            return;
        };
        let mut here = document;
        for key in parents {
            here = child(here, key);
        }
        match (here, &self.value) {
            (Value::Array(items), value) => {
                let index = match last {
                    Key::Index(i) => usize::from(*i),
                    other => other.text().len(),
                };
                match value {
                    Some(v) if index < items.len() => {
                        if let Some(slot) = items.get_mut(index) {
                            *slot = v.value();
                        }
                    }
                    Some(v) => items.push(v.value()),
                    None if index < items.len() => {
                        items.remove(index);
                    }
                    None => {}
                }
            }
            (here, Some(v)) => {
                if !here.is_object() {
                    *here = Value::Object(Map::new());
                }
                if let Value::Object(map) = here {
                    map.insert(last.text(), v.value());
                }
            }
            (Value::Object(map), None) => {
                map.remove(&last.text());
            }
            (_, None) => {}
        }
    }
}

/// The child at `key`, created as an object when missing (arrays are indexed modulo length).
fn child<'v>(here: &'v mut Value, key: &Key) -> &'v mut Value {
    let nonempty_array = matches!(here, Value::Array(items) if !items.is_empty());
    if !nonempty_array && !here.is_object() {
        *here = Value::Object(Map::new());
    }
    match here {
        Value::Array(items) => {
            let index = match key {
                Key::Index(i) => usize::from(*i),
                other => other.text().len(),
            } % items.len();
            &mut items[index]
        }
        Value::Object(map) => map.entry(key.text()).or_insert(Value::Null),
        _ => unreachable!("made an object above"),
    }
}

/// Applies every edit in order.
pub fn edited(mut base: Value, edits: &[Edit]) -> Value {
    for edit in edits {
        edit.apply(&mut base);
    }
    base
}
