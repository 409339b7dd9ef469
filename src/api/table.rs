//! `Table` responses (`kubectl get`): the Name column, the version's additional printer
//! columns (or the implicit Age column), and cells computed as Kubernetes' table convertor
//! computes them.

use serde_json::{Value, json};

use super::jsonpath::{JsonPath, print_value};
use super::negotiate::MetaVersion;
use crate::core::time::{human_duration, parse_rfc3339};
use crate::definitions::model::{Scale, Version};

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// What rows carry in `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, crate::core::status::ApiError> {
        match value {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => {
                Err(crate::core::status::ApiError::bad_request(format!("unsupported includeObject value: {other}")))
            }
        }
    }
}

struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i32,
    path: Option<JsonPath>,
}

/// Compiled columns of one version.
pub struct Columns(Vec<Column>);

impl Columns {
    pub fn for_version(version: &Version) -> Columns {
        if version.printer_columns.is_empty() {
            return Columns(Self::with_name_and_age(Vec::new()));
        }
        let mut columns = vec![Column {
            name: "Name".into(),
            kind: "string".into(),
            format: "name".into(),
            description: NAME_DESCRIPTION.into(),
            priority: 0,
            path: None,
        }];
        for c in &version.printer_columns {
            columns.push(Column {
                name: c.name.clone(),
                kind: c.type_.clone(),
                format: c.format.clone().unwrap_or_default(),
                description: c.description.clone().filter(|d| !d.is_empty()).unwrap_or_else(|| {
                    format!("Custom resource definition column (in JSONPath format): {}", c.json_path)
                }),
                priority: c.priority.unwrap_or(0),
                path: JsonPath::parse(&c.json_path).ok(),
            });
        }
        Columns(columns)
    }

    /// The columns of the scale subresource (`getScaleColumnsForVersion`): Name, Desired and
    /// Available read from the `Scale`, then Age.
    pub fn for_scale(scale: &Scale) -> Columns {
        let mut columns = Vec::new();
        let integer = |name: &str, description: &str, path: &str| Column {
            name: name.into(),
            kind: "integer".into(),
            format: String::new(),
            description: description.into(),
            priority: 0,
            path: JsonPath::parse(path).ok(),
        };
        if !scale.spec_replicas_path.is_empty() {
            columns.push(integer("Desired", "Number of desired replicas", ".spec.replicas"));
        }
        if !scale.status_replicas_path.is_empty() {
            columns.push(integer("Available", "Number of actual replicas", ".status.replicas"));
        }
        Columns(Self::with_name_and_age(columns))
    }

    /// The implicit Name column, `columns`, then Age.
    fn with_name_and_age(columns: Vec<Column>) -> Vec<Column> {
        let mut all = vec![Column {
            name: "Name".into(),
            kind: "string".into(),
            format: "name".into(),
            description: NAME_DESCRIPTION.into(),
            priority: 0,
            path: None,
        }];
        all.extend(columns);
        all.push(Column {
            name: "Age".into(),
            kind: "date".into(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.into(),
            priority: 0,
            path: JsonPath::parse(".metadata.creationTimestamp").ok(),
        });
        all
    }

    fn definitions(&self) -> Vec<Value> {
        self.0
            .iter()
            .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect()
    }

    fn cells(&self, object: &Value, now: jiff::Timestamp) -> Vec<Value> {
        self.0
            .iter()
            .map(|c| match &c.path {
                None if c.format == "name" => json!(crate::api::objects::name(object)),
                None => Value::Null,
                Some(path) => match path.find(object).first() {
                    None => Value::Null,
                    Some(value) if c.kind == "string" => json!(print_value(value)),
                    Some(value) => cell(&c.kind, value, now),
                },
            })
            .collect()
    }
}

/// A non-string cell (`cellForJSONValue`).
pub fn cell(kind: &str, value: &Value, now: jiff::Timestamp) -> Value {
    match (kind, value) {
        ("integer", Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => json!(i),
            (None, Some(f)) => json!(f as i64),
            _ => Value::Null,
        },
        ("number", Value::Number(n)) => n.as_f64().map(|f| json!(f)).unwrap_or(Value::Null),
        ("boolean", Value::Bool(b)) => json!(b),
        ("string", Value::String(s)) => json!(s),
        ("date", Value::String(s)) => match parse_rfc3339(s) {
            Some(t) => {
                let seconds = now.as_second() - t.as_second();
                json!(human_duration(seconds))
            }
            None => json!("<unknown>"),
        },
        _ => Value::Null,
    }
}

/// The `PartialObjectMetadata` of an object.
pub fn partial_metadata(object: &Value, version: MetaVersion) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": version.api_version(),
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Builds a Table of `objects`. `list_metadata` is the list's metadata (resourceVersion,
/// continue) or empty for a single object.
pub fn build(
    version: MetaVersion,
    columns: &Columns,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
    no_headers: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": columns.cells(o, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => crate::api::objects::put(&mut row, "object", partial_metadata(o, version)),
                IncludeObject::Object => crate::api::objects::put(&mut row, "object", o.clone()),
            }
            row
        })
        .collect();
    let mut table = json!({
        "kind": "Table",
        "apiVersion": version.api_version(),
        "metadata": list_metadata,
        "rows": rows,
    });
    if !no_headers {
        crate::api::objects::put(&mut table, "columnDefinitions", Value::Array(columns.definitions()));
    }
    table
}

/// A Table written row by row, for lists: the bytes serde_json writes for [`build`]'s value,
/// without that value (nor the objects of every row) ever existing at once.
pub struct TableWriter {
    version: MetaVersion,
    columns: Columns,
    include: IncludeObject,
    no_headers: bool,
    now: jiff::Timestamp,
    /// The rows written so far, comma separated.
    rows: Vec<u8>,
    count: usize,
}

impl TableWriter {
    pub fn new(version: MetaVersion, columns: Columns, include: IncludeObject, no_headers: bool) -> TableWriter {
        TableWriter { version, columns, include, no_headers, now: jiff::Timestamp::now(), rows: Vec::new(), count: 0 }
    }

    /// Writes the row of `object`: `{"cells":[...],"object":...}`.
    pub fn push(&mut self, object: &Value) -> serde_json::Result<()> {
        let rows = &mut self.rows;
        if self.count > 0 {
            rows.push(b',');
        }
        self.count += 1;
        rows.extend_from_slice(b"{\"cells\":");
        crate::core::json::to_writer(&mut *rows, &self.columns.cells(object, self.now))?;
        match self.include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                rows.extend_from_slice(b",\"object\":{\"apiVersion\":");
                serde_json::to_writer(&mut *rows, self.version.api_version())?;
                rows.extend_from_slice(b",\"kind\":\"PartialObjectMetadata\",\"metadata\":");
                match object.get("metadata") {
                    Some(metadata) => serde_json::to_writer(&mut *rows, metadata)?,
                    None => rows.extend_from_slice(b"{}"),
                }
                rows.push(b'}');
            }
            IncludeObject::Object => {
                rows.extend_from_slice(b",\"object\":");
                crate::core::json::to_writer(&mut *rows, object)?;
            }
        }
        rows.push(b'}');
        Ok(())
    }

    /// The whole Table, with the list's metadata, in serde_json's member order.
    pub fn finish(self, list_metadata: &Value) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.rows.len() + 4096);
        out.extend_from_slice(b"{\"apiVersion\":");
        serde_json::to_writer(&mut out, self.version.api_version())?;
        if !self.no_headers {
            out.extend_from_slice(b",\"columnDefinitions\":");
            serde_json::to_writer(&mut out, &self.columns.definitions())?;
        }
        out.extend_from_slice(b",\"kind\":\"Table\",\"metadata\":");
        serde_json::to_writer(&mut out, list_metadata)?;
        out.extend_from_slice(b",\"rows\":[");
        out.extend_from_slice(&self.rows);
        out.extend_from_slice(b"]}");
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_columns_read_the_scale() {
        let scale = Scale {
            spec_replicas_path: ".spec.count".into(),
            status_replicas_path: ".status.count".into(),
            label_selector_path: None,
        };
        let columns = Columns::for_scale(&scale);
        let names: Vec<Value> = columns.definitions().iter().map(|d| d["name"].clone()).collect();
        assert_eq!(names, [json!("Name"), json!("Desired"), json!("Available"), json!("Age")]);
        let object =
            json!({"kind": "Scale", "metadata": {"name": "w"}, "spec": {"replicas": 3}, "status": {"replicas": 1}});
        let cells = columns.cells(&object, jiff::Timestamp::now());
        assert_eq!(cells, [json!("w"), json!(3), json!(1), Value::Null]);
    }

    #[test]
    fn written_tables_are_the_built_tables() {
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "shirts.stable.example.com"},
            "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "shirts", "singular": "shirt", "kind": "Shirt"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}});
        let definition = crate::definitions::load::definition_from_value(raw, "test").unwrap();
        let objects = [
            json!({"apiVersion": "stable.example.com/v1", "kind": "Shirt", "metadata": {"name": "a", "resourceVersion": "3"},
                "spec": {"color": "blue \"navy\"", "size": 3}}),
            json!({"apiVersion": "stable.example.com/v1", "kind": "Shirt", "spec": {"size": 1.5}}),
            json!({"apiVersion": "stable.example.com/v1", "kind": "Shirt", "metadata": null}),
        ];
        let list_metadata = json!({"continue": "x", "resourceVersion": "9"});
        for include in [IncludeObject::None, IncludeObject::Metadata, IncludeObject::Object] {
            for no_headers in [false, true] {
                for version in [MetaVersion::V1, MetaVersion::V1beta1] {
                    let columns = || Columns::for_version(&definition.storage);
                    let mut writer = TableWriter::new(version, columns(), include, no_headers);
                    objects.iter().for_each(|o| writer.push(o).unwrap());
                    let written = writer.finish(&list_metadata).unwrap();
                    let built = build(version, &columns(), &objects, list_metadata.clone(), include, no_headers);
                    let built = serde_json::to_vec(&built).unwrap();
                    assert_eq!(String::from_utf8(written).unwrap(), String::from_utf8(built).unwrap());
                }
            }
        }
    }

    #[test]
    fn cells_follow_the_column_type() {
        let now = jiff::Timestamp::now();
        assert_eq!(cell("integer", &json!(42), now), json!(42));
        assert_eq!(cell("integer", &json!(3.25), now), json!(3));
        assert_eq!(cell("integer", &json!(true), now), Value::Null);
        assert_eq!(cell("number", &json!(42), now), json!(42.0));
        assert_eq!(cell("boolean", &json!("true"), now), Value::Null);
        assert_eq!(cell("date", &json!("nonsense"), now), json!("<unknown>"));
        let earlier = crate::core::time::format_rfc3339(now - jiff::SignedDuration::from_secs(12 * 3600 + 1800));
        assert_eq!(cell("date", &json!(earlier), now), json!("12h"));
        let later = crate::core::time::format_rfc3339(now + jiff::SignedDuration::from_secs(3600));
        assert_eq!(cell("date", &json!(later), now), json!("<invalid>"));
    }
}
