//! A small deterministic generator of hostile request bodies (fixed seeds, so every run sends
//! the same requests): valid documents with random edits at paths named after the fields the
//! server and the CronTab give meaning to, values of every JSON type and edge size, deep
//! nesting, and raw bytes that are not JSON at all.

use serde_json::{Map, Value, json};

/// SplitMix64: tiny, fast and well distributed; reproducible from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const KEYS: &[&str] = &[
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
    "generation",
    "cronSpec",
    "image",
    "replicas",
    "manager",
    "operation",
    "fieldsType",
    "fieldsV1",
    "f:spec",
    "f:replicas",
    "f:metadata",
    ".",
    "op",
    "path",
    "value",
    "from",
    "x",
    "",
    "apiGroup",
];

const TEXTS: &[&str] = &[
    "stable.example.com/v1",
    "CronTab",
    "v1",
    "default",
    "crontab",
    "* * * * */5",
    "Apply",
    "Update",
    "FieldsV1",
    "add",
    "remove",
    "replace",
    "move",
    "copy",
    "test",
    "/spec/replicas",
    "/metadata/labels/a",
    "/spec",
    "/",
    "",
    "~",
    "0",
    "-1",
    "9223372036854775807",
    "18446744073709551616",
    "1e400",
    "NaN",
    "2020-01-01T00:00:00Z",
    "-",
    "a=b",
    "é",
    "\u{0}",
    "\u{FFFF}",
    "k:{\"a\":1}",
    "v:1",
    "i:-1",
];

fn text(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => rng.pick(TEXTS).repeat(rng.below(300)),
        1 => (0..rng.below(20)).map(|_| char::from_u32(rng.next() as u32 % 0x11_0000).unwrap_or('?')).collect(),
        _ => rng.pick(TEXTS).to_string(),
    }
}

/// A random JSON value; `depth` bounds the nesting of plain generation.
pub fn value(rng: &mut Rng, depth: usize) -> Value {
    let kinds = if depth == 0 { 6 } else { 9 };
    match rng.below(kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.chance(50)),
        2 => json!(rng.next() as i64),
        3 => json!([0, 1, -1, i64::MAX, i64::MIN][rng.below(5)]),
        4 => json!(f64::from_bits(rng.next()).clamp(-1e300, 1e300)),
        5 => Value::String(text(rng)),
        6 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
        7 => {
            let mut map = Map::new();
            for _ in 0..rng.below(4) {
                map.insert(rng.pick(KEYS).to_string(), value(rng, depth - 1));
            }
            Value::Object(map)
        }
        _ => nested(rng.below(300), value(rng, 0)),
    }
}

/// `inner` under `depth` levels of alternating arrays and objects.
pub fn nested(depth: usize, inner: Value) -> Value {
    (0..depth).fold(inner, |v, level| if level % 2 == 0 { json!([v]) } else { json!({"x": v}) })
}

/// Sets a random value at a random path of `doc` (creating objects), or removes one.
pub fn edit(rng: &mut Rng, doc: &mut Value) {
    let mut here = doc;
    for _ in 0..rng.below(4) {
        if !here.is_object() && !matches!(here, Value::Array(a) if !a.is_empty()) {
            *here = json!({});
        }
        here = match here {
            Value::Array(items) => {
                let i = rng.below(items.len());
                &mut items[i]
            }
            Value::Object(map) => map.entry(rng.pick(KEYS).to_string()).or_insert(Value::Null),
            _ => unreachable!(),
        };
    }
    if rng.chance(15) {
        if let Value::Object(map) = here {
            let key = rng.pick(KEYS);
            map.remove(key);
            return;
        }
    }
    *here = value(rng, 3);
}

/// A body: a base document with edits (as JSON or YAML text), or bytes that are not JSON.
pub fn body(rng: &mut Rng, base: &Value) -> Vec<u8> {
    match rng.below(10) {
        0 => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
        1 => {
            let mut text = base.to_string().into_bytes();
            text.truncate(rng.below(text.len() + 1));
            text
        }
        _ => {
            let mut doc = base.clone();
            for _ in 0..=rng.below(3) {
                edit(rng, &mut doc);
            }
            doc.to_string().into_bytes()
        }
    }
}
