//! Patches built to grow: sequences of JSON-patch operations whose sources and targets are
//! drawn from a few pointers into one object (so that `copy` and `add` feed each other, the
//! shape that once doubled a document into tens of gigabytes), repeated up to past
//! Kubernetes' 10,000-operation limit; and merge patches that nest and repeat a value. The
//! promise checked: an answer below 500, in bounded time and memory (libFuzzer's limits).

use arbitrary::Arbitrary;
use http::Method;
use serde_json::{Value, json};

use crate::server::{Call, Harness};

const OBJECT: &str = "/apis/stable.example.com/v1/namespaces/fuzz/crontabs/base";

/// Where operations point: the object's own fields and places inside what they grow.
const POINTERS: &[&str] = &[
    "/spec",
    "/spec/x",
    "/spec/x/-",
    "/spec/x/0",
    "/spec/x/0/y",
    "/spec/y",
    "/spec/y/-",
    "/metadata/labels",
    "/metadata/labels/a",
    "/metadata/annotations/a",
    "/status",
    "/spec/x/0/y/-",
    "/spec/image",
];

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Kind {
    Add,
    Copy,
    Move,
    Replace,
    Remove,
    Test,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Seed {
    Text(u8),
    List(u8),
    Object(u8),
    Null,
}

impl Seed {
    fn value(self) -> Value {
        match self {
            Seed::Text(n) => json!("a".repeat(usize::from(n))),
            Seed::List(n) => json!(vec!["b"; usize::from(n)]),
            Seed::Object(n) => json!({ "y": vec![usize::from(n); 4], "z": "c" }),
            Seed::Null => Value::Null,
        }
    }
}

#[derive(Debug, Clone, Copy, Arbitrary)]
struct Operation {
    kind: Kind,
    path: u8,
    from: u8,
    seed: Seed,
}

impl Operation {
    fn to_json(self) -> Value {
        let pick = |i: u8| POINTERS[usize::from(i) % POINTERS.len()];
        let op = match self.kind {
            Kind::Add => "add",
            Kind::Copy => "copy",
            Kind::Move => "move",
            Kind::Replace => "replace",
            Kind::Remove => "remove",
            Kind::Test => "test",
        };
        let mut out = json!({"op": op, "path": pick(self.path)});
        match self.kind {
            Kind::Copy | Kind::Move => out["from"] = json!(pick(self.from)),
            Kind::Add | Kind::Replace | Kind::Test => out["value"] = self.seed.value(),
            Kind::Remove => {}
        }
        out
    }
}

/// One amplifying patch.
#[derive(Debug, Clone, Arbitrary)]
pub enum Amplifier {
    /// The operations, then the whole list again `repeat` times (up to 12,000 operations).
    JsonPatch { operations: Vec<Operation>, repeat: u8 },
    /// A merge patch: `seed` nested `depth` levels deep under `spec`, each level holding it
    /// `width` times.
    MergePatch { seed: Seed, depth: u8, width: u8 },
}

impl Amplifier {
    pub fn run(&self, harness: &Harness) {
        let call = match self {
            Amplifier::JsonPatch { operations, repeat } => {
                let mut list: Vec<Value> = operations.iter().take(64).map(|o| o.to_json()).collect();
                let once = list.clone();
                for _ in 0..*repeat {
                    if list.len() >= 12_000 {
                        break;
                    }
                    list.extend(once.iter().cloned());
                }
                Call::new(Method::PATCH, OBJECT).body("application/json-patch+json", Value::Array(list).to_string())
            }
            Amplifier::MergePatch { seed, depth, width } => {
                let mut value = seed.value();
                for _ in 0..(depth % 24) {
                    let level: serde_json::Map<String, Value> =
                        (0..usize::from(*width % 8).max(1)).map(|i| (format!("k{i}"), value.clone())).collect();
                    value = Value::Object(level);
                    if value.to_string().len() > 4 << 20 {
                        break;
                    }
                }
                Call::new(Method::PATCH, OBJECT)
                    .body("application/merge-patch+json", json!({"spec": {"x": value}}).to_string())
            }
        };
        harness.send(&call);
    }
}
