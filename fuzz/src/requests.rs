//! Fuzzed requests to the served resources: writes (create, update, patches of every type,
//! server-side apply, status and scale, delete options) built by editing valid documents, and
//! reads (get, list, watch, tables, selectors, continue tokens, limits).

use arbitrary::Arbitrary;
use http::Method;
use serde_json::{Value, json};

use crate::json::{Edit, Json, Text, pick};
use crate::server::{Call, Harness, crontab, gadget};

/// Which resource (and subresource) a request addresses.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Target {
    CronTab,
    Gadget,
    GadgetV2,
    GadgetStatus,
    GadgetScale,
}

impl Target {
    fn collection(self) -> &'static str {
        match self {
            Target::CronTab => "/apis/stable.example.com/v1/namespaces/fuzz/crontabs",
            Target::GadgetV2 => "/apis/fuzz.example.com/v2/namespaces/fuzz/gadgets",
            _ => "/apis/fuzz.example.com/v1/namespaces/fuzz/gadgets",
        }
    }

    fn object(self, name: &str) -> String {
        let suffix = match self {
            Target::GadgetStatus => "/status",
            Target::GadgetScale => "/scale",
            _ => "",
        };
        format!("{}/{name}{suffix}", self.collection())
    }

    fn document(self, name: &str) -> Value {
        match self {
            Target::CronTab => crontab(name),
            Target::GadgetScale => json!({
                "apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": name, "namespace": "fuzz"}, "spec": {"replicas": 3}
            }),
            Target::GadgetV2 => {
                let mut g = gadget(name);
                g["apiVersion"] = json!("fuzz.example.com/v2");
                g
            }
            _ => gadget(name),
        }
    }
}

/// What a write does.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Write {
    Create,
    Update,
    JsonPatch,
    MergePatch,
    StrategicMergePatch,
    Apply,
    Delete,
}

/// Query parameters writes and reads understand.
pub const PARAMS: &[&str] = &[
    "fieldManager",
    "fieldValidation",
    "force",
    "resourceVersion",
    "resourceVersionMatch",
    "pretty",
    "gracePeriodSeconds",
    "propagationPolicy",
    "orphanDependents",
    "labelSelector",
    "fieldSelector",
    "continue",
    "limit",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "watch",
    "includeObject",
    "dryRun",
];

pub const PARAM_VALUES: &[&str] = &[
    "Strict",
    "Warn",
    "Ignore",
    "true",
    "false",
    "All",
    "0",
    "1",
    "-1",
    "500",
    "9223372036854775807",
    "99999999999999999999",
    "NotOlderThan",
    "Exact",
    "Object",
    "None",
    "Metadata",
    "kubectl",
    "app=fuzz",
    "app in (fuzz, x),tier!=b",
    "!tier",
    "app notin ()",
    "metadata.name=base",
    "metadata.namespace!=x",
    "spec.color=red",
    "spec.enabled=true",
    "a==b,c!=d",
    "x=",
    "=",
    "(",
    "a in (b",
    "kubectl-client-side-apply",
];

/// One query parameter.
#[derive(Debug, Clone, Arbitrary)]
pub struct Param {
    name: u8,
    value: ParamValue,
}

#[derive(Debug, Clone, Arbitrary)]
enum ParamValue {
    Known(u8),
    Text(Text),
    /// A continue token: base64 of a JSON document.
    Token(Json),
    /// A continue token: base64 of bytes.
    RawToken(Vec<u8>),
}

impl Param {
    fn pair(&self) -> (String, String) {
        let value = match &self.value {
            ParamValue::Known(i) => pick(PARAM_VALUES, *i).to_string(),
            ParamValue::Text(t) => t.text(),
            ParamValue::Token(j) => base64(j.value().to_string().as_bytes()),
            ParamValue::RawToken(b) => base64(b),
        };
        (pick(PARAMS, self.name).to_string(), value)
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn query(params: &[Param], extra: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded_pairs();
    for p in params {
        let (k, v) = p.pair();
        serializer.push((k, v));
    }
    for (k, v) in extra {
        serializer.push((k.to_string(), v.to_string()));
    }
    serializer.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect::<Vec<_>>().join("&")
}

fn form_urlencoded_pairs() -> Vec<(String, String)> {
    Vec::new()
}

fn escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A fuzzed write.
#[derive(Debug, Clone, Arbitrary)]
pub struct WriteInput {
    pub target: Target,
    pub write: Write,
    pub params: Vec<Param>,
    pub edits: Vec<Edit>,
    /// Written for real (to a scratch object, deleted afterwards) rather than as a dry run.
    pub real: bool,
    pub yaml: bool,
}

impl WriteInput {
    pub fn run(&self, harness: &Harness) {
        let params: Vec<Param> = self.params.iter().filter(|p| pick(PARAMS, p.name) != "dryRun").cloned().collect();
        let name = if self.real { "scratch" } else { "base" };
        if self.real {
            let document = match self.target {
                Target::CronTab => crontab(name),
                _ => gadget(name),
            };
            let collection = match self.target {
                Target::CronTab => Target::CronTab,
                _ => Target::Gadget,
            };
            harness
                .send(&Call::new(Method::POST, collection.collection()).body("application/json", document.to_string()));
        }
        let mut extra: Vec<(&str, &str)> = if self.real { vec![] } else { vec![("dryRun", "All")] };
        if !params.iter().any(|p| pick(PARAMS, p.name) == "fieldManager") {
            extra.push(("fieldManager", "fuzz"));
        }
        let q = query(&params, &extra);
        let (method, path, content_type, base) = match self.write {
            Write::Create => {
                (Method::POST, self.target.collection().to_string(), "application/json", self.target.document(name))
            }
            Write::Update => (Method::PUT, self.target.object(name), "application/json", self.target.document(name)),
            Write::JsonPatch => (
                Method::PATCH,
                self.target.object(name),
                "application/json-patch+json",
                json!([{"op": "replace", "path": "/spec/replicas", "value": 3}, {"op": "add", "path": "/metadata/labels/x", "value": "y"}]),
            ),
            Write::MergePatch => (
                Method::PATCH,
                self.target.object(name),
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"x": "y"}}, "spec": {"replicas": 3}}),
            ),
            Write::StrategicMergePatch => (
                Method::PATCH,
                self.target.object(name),
                "application/strategic-merge-patch+json",
                json!({"spec": {"replicas": 3}}),
            ),
            Write::Apply => {
                let mut doc = self.target.document(name);
                if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove("finalizers");
                }
                (Method::PATCH, self.target.object(name), "application/apply-patch+yaml", doc)
            }
            Write::Delete => (
                Method::DELETE,
                self.target.object(name),
                "application/json",
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
            ),
        };
        let document = crate::json::edited(base, &self.edits);
        let (content_type, body) = if self.yaml {
            let ct = if content_type == "application/json" { "application/yaml" } else { content_type };
            (ct, yaml_text(&document))
        } else {
            (content_type, document.to_string())
        };
        let target = if q.is_empty() { path } else { format!("{path}?{q}") };
        harness.send(&Call::new(method, target).body(content_type, body));
        if self.real {
            // Leave the store as it was: drop the finalizer, then delete the scratch object.
            let collection = match self.target {
                Target::CronTab => Target::CronTab,
                _ => Target::Gadget,
            };
            let unfinalize = json!({"metadata": {"finalizers": null}});
            harness.send(
                &Call::new(Method::PATCH, collection.object("scratch"))
                    .body("application/merge-patch+json", unfinalize.to_string()),
            );
            harness.send(&Call::new(Method::DELETE, collection.object("scratch")));
        }
    }
}

/// A flow-style YAML rendering (JSON is YAML), sometimes with YAML-only spellings.
fn yaml_text(document: &Value) -> String {
    document.to_string()
}

/// What a read does.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Read {
    Get,
    List,
    ListAllNamespaces,
    Watch,
    DeleteCollection,
}

pub const ACCEPTS: &[&str] = &[
    "application/json",
    "application/yaml",
    "*/*",
    "application/json;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json",
    "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io",
    "application/vnd.kubernetes.protobuf",
    "application/json;as=Table;g=meta.k8s.io;v=v1;q=0.5, application/yaml;q=0.9",
    "text/html",
];

/// A fuzzed read.
#[derive(Debug, Clone, Arbitrary)]
pub struct ReadInput {
    pub target: Target,
    pub read: Read,
    pub name: Option<Text>,
    pub params: Vec<Param>,
    pub accept: Option<(u8, Option<Text>)>,
}

impl ReadInput {
    pub fn run(&self, harness: &Harness) {
        let mut params: Vec<Param> = self.params.clone();
        let mut extra: Vec<(&str, &str)> = Vec::new();
        if matches!(self.read, Read::DeleteCollection) {
            params.retain(|p| pick(PARAMS, p.name) != "dryRun");
            extra.push(("dryRun", "All"));
        }
        if matches!(self.read, Read::Watch) {
            if !params.iter().any(|p| pick(PARAMS, p.name) == "timeoutSeconds") {
                extra.push(("timeoutSeconds", "1"));
            }
        } else {
            params.retain(|p| pick(PARAMS, p.name) != "watch");
        }
        let name = self.name.as_ref().map(Text::text).unwrap_or_else(|| "base".into());
        let name = escape(&name);
        let (method, path) = match self.read {
            Read::Get => (Method::GET, self.target.object(&name)),
            Read::List => (Method::GET, self.target.collection().to_string()),
            Read::ListAllNamespaces => (Method::GET, self.target.collection().replace("/namespaces/fuzz", "")),
            Read::Watch => (Method::GET, self.target.collection().replacen("/namespaces", "/watch/namespaces", 1)),
            Read::DeleteCollection => (Method::DELETE, self.target.collection().to_string()),
        };
        let q = query(&params, &extra);
        let target = if q.is_empty() { path } else { format!("{path}?{q}") };
        let mut call = Call::new(method, target);
        call.accept = self.accept.as_ref().map(|(i, t)| match t {
            Some(t) => format!("{};{}", pick(ACCEPTS, *i), t.text()),
            None => pick(ACCEPTS, *i).to_string(),
        });
        harness.send(&call);
    }
}
