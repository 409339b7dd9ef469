//! `metadata.managedFields` read into per-manager field sets and written back, as
//! k8s.io/apimachinery's managedfields package does: entries are keyed by a manager
//! identifier (the entry's manager, operation, subresource, and apiVersion for updates,
//! as Go JSON), times are kept per manager, and entries are written sorted by operation,
//! time, manager, apiVersion and subresource.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldsv1;
use super::gojson;
use super::set::Set;
use crate::core::time::{format_rfc3339, parse_rfc3339};

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who a set of fields belongs to, as encoded in an entry (without fields and time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    pub manager: String,
    pub operation: Operation,
    /// Empty for appliers: one applier is one manager whatever version it applied.
    pub api_version: String,
    pub subresource: String,
}

impl Manager {
    pub fn new(manager: &str, operation: Operation, api_version: &str, subresource: &str) -> Manager {
        let api_version = if operation == Operation::Apply { "" } else { api_version };
        Manager {
            manager: manager.to_string(),
            operation,
            api_version: api_version.to_string(),
            subresource: subresource.to_string(),
        }
    }

    /// The identifier Kubernetes keys managers by: the entry's JSON without fields and time.
    pub fn identifier(&self) -> String {
        // Field order and omitted empty fields as Go marshals ManagedFieldsEntry.
        let mut out = String::from("{");
        if !self.manager.is_empty() {
            out.push_str("\"manager\":");
            gojson::write_string(&mut out, &self.manager);
            out.push(',');
        }
        out.push_str("\"operation\":\"");
        out.push_str(self.operation.as_str());
        out.push('"');
        if !self.api_version.is_empty() {
            out.push_str(",\"apiVersion\":");
            gojson::write_string(&mut out, &self.api_version);
        }
        if !self.subresource.is_empty() {
            out.push_str(",\"subresource\":");
            gojson::write_string(&mut out, &self.subresource);
        }
        out.push('}');
        out
    }
}

/// The fields one manager owns, at the version it last wrote them.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedSet {
    pub set: Set,
    pub api_version: String,
    pub applied: bool,
}

/// One manager's entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub manager: Manager,
    pub fields: VersionedSet,
    pub time: Option<jiff::Timestamp>,
}

/// Every manager's entry, by identifier.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Managed {
    pub entries: BTreeMap<String, Entry>,
}

/// `metadata.managedFields` that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidManagedFields(pub String);

impl Managed {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads managedFields entries (`DecodeManagedFields`); a later duplicate wins.
    pub fn decode(entries: &[Value]) -> Result<Managed, InvalidManagedFields> {
        let mut managed = Managed::default();
        for (i, entry) in entries.iter().enumerate() {
            let entry = decode_entry(i, entry)?;
            managed.entries.insert(entry.manager.identifier(), entry);
        }
        Ok(managed)
    }

    /// The managedFields entries, sorted as Kubernetes sorts them; none for no managers.
    pub fn encode(&self) -> Vec<Value> {
        let mut entries: Vec<&Entry> = self.entries.values().collect();
        entries.sort_by(|p, q| {
            let op = |e: &Entry| if e.fields.applied { Operation::Apply } else { e.manager.operation };
            let secs = |e: &Entry| e.time.map(|t| t.as_second()).unwrap_or(0);
            op(p)
                .cmp(&op(q))
                .then(secs(p).cmp(&secs(q)))
                .then_with(|| p.manager.manager.cmp(&q.manager.manager))
                .then_with(|| p.fields.api_version.cmp(&q.fields.api_version))
                .then_with(|| p.manager.subresource.cmp(&q.manager.subresource))
        });
        entries.into_iter().map(encode_entry).collect()
    }
}

fn string_field<'a>(entry: &'a Map<String, Value>, name: &str) -> Result<&'a str, InvalidManagedFields> {
    match entry.get(name) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(InvalidManagedFields(format!("{name}: expected a string, got {other}"))),
    }
}

fn decode_entry(i: usize, entry: &Value) -> Result<Entry, InvalidManagedFields> {
    let Value::Object(entry) = entry else {
        return Err(InvalidManagedFields(format!("managed fields entry {i} is not an object")));
    };
    let operation = match string_field(entry, "operation")? {
        "Apply" => Operation::Apply,
        "Update" => Operation::Update,
        _ => return Err(InvalidManagedFields("operation must be `Apply` or `Update`".to_string())),
    };
    let api_version = string_field(entry, "apiVersion")?;
    if api_version.is_empty() {
        return Err(InvalidManagedFields("apiVersion must not be empty".to_string()));
    }
    match string_field(entry, "fieldsType")? {
        "FieldsV1" => {}
        "" => return Err(InvalidManagedFields(format!("missing fieldsType in managed fields entry {i}"))),
        other => return Err(InvalidManagedFields(format!("invalid fieldsType {other:?} in managed fields entry {i}"))),
    }
    let time = match string_field(entry, "time")? {
        "" => None,
        text => Some(parse_rfc3339(text).ok_or_else(|| InvalidManagedFields(format!("invalid time {text:?}")))?),
    };
    let set = match entry.get("fieldsV1") {
        None => Set::new(),
        Some(fields) => fieldsv1::decode(fields)
            .map_err(|e| InvalidManagedFields(format!("error decoding versioned set from entry {i}: {e}")))?,
    };
    let manager =
        Manager::new(string_field(entry, "manager")?, operation, api_version, string_field(entry, "subresource")?);
    Ok(Entry {
        manager,
        fields: VersionedSet { set, api_version: api_version.to_string(), applied: operation == Operation::Apply },
        time,
    })
}

fn encode_entry(entry: &Entry) -> Value {
    let operation = if entry.fields.applied { Operation::Apply } else { entry.manager.operation };
    let fields = fieldsv1::encode(&entry.fields.set);
    let manager = (entry.manager.manager.as_str(), entry.manager.subresource.as_str());
    entry_value(manager, operation, &entry.fields.api_version, fields, entry.time)
}

/// One managedFields entry: `manager`'s name and subresource, `operation`, the `fields`
/// (FieldsV1) at `api_version`, written at `time`.
pub fn entry_value(
    (manager, subresource): (&str, &str),
    operation: Operation,
    api_version: &str,
    fields: Value,
    time: Option<jiff::Timestamp>,
) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    out.insert("fieldsType".into(), Value::String("FieldsV1".into()));
    out.insert("fieldsV1".into(), fields);
    if !manager.is_empty() {
        out.insert("manager".into(), Value::String(manager.to_string()));
    }
    out.insert("operation".into(), Value::String(operation.as_str().into()));
    if !subresource.is_empty() {
        out.insert("subresource".into(), Value::String(subresource.to_string()));
    }
    if let Some(time) = time {
        out.insert("time".into(), Value::String(format_rfc3339(time)));
    }
    Value::Object(out)
}

/// Whether a client asked to clear managedFields: an empty list, or one empty entry.
pub fn is_reset(entries: &[Value]) -> bool {
    match entries {
        [] => true,
        [Value::Object(entry)] => entry.values().all(|v| match v {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            _ => false,
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identifiers_are_go_json() {
        assert_eq!(
            Manager::new("kubectl", Operation::Apply, "a/v1", "").identifier(),
            r#"{"manager":"kubectl","operation":"Apply"}"#
        );
        assert_eq!(
            Manager::new("m<1>", Operation::Update, "a/v1", "status").identifier(),
            r#"{"manager":"m\u003c1\u003e","operation":"Update","apiVersion":"a/v1","subresource":"status"}"#
        );
        assert_eq!(
            Manager::new("", Operation::Update, "a/v1", "").identifier(),
            r#"{"operation":"Update","apiVersion":"a/v1"}"#
        );
    }

    #[test]
    fn decodes_and_encodes_sorted() {
        let entries = vec![
            json!({"manager": "b", "operation": "Update", "apiVersion": "g/v1", "time": "2024-01-02T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:b": {}}}}),
            json!({"manager": "a", "operation": "Update", "apiVersion": "g/v1", "time": "2024-01-03T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:a": {}}}}),
            json!({"manager": "z", "operation": "Apply", "apiVersion": "g/v1", "time": "2024-01-05T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:c": {}}}}),
        ];
        let managed = Managed::decode(&entries).unwrap();
        let out = managed.encode();
        let names: Vec<&str> = out.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(names, ["z", "b", "a"]);
        assert_eq!(out[1], entries[0]);
    }

    #[test]
    fn invalid_entries_are_reported() {
        for (entry, message) in [
            (
                json!({"manager": "a", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}),
                "operation must be `Apply` or `Update`",
            ),
            (json!({"manager": "a", "operation": "Apply", "fieldsType": "FieldsV1"}), "apiVersion must not be empty"),
            (
                json!({"manager": "a", "operation": "Apply", "apiVersion": "v1"}),
                "missing fieldsType in managed fields entry 0",
            ),
            (
                json!({"manager": "a", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}),
                "invalid fieldsType \"FieldsV2\" in managed fields entry 0",
            ),
        ] {
            assert_eq!(Managed::decode(&[entry]).unwrap_err().0, message);
        }
        assert!(Managed::decode(&[json!({"manager": "a", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"x": {}}})]).is_err());
    }

    #[test]
    fn reset_requests() {
        assert!(is_reset(&[]));
        assert!(is_reset(&[json!({})]));
        assert!(!is_reset(&[json!({"manager": "a"})]));
    }
}
