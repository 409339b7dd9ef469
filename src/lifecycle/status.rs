//! The `serveddefinitions` objects (`definitions::builtin`): one per served definition, written
//! into the store under the resource's own keys whenever what they show changes, so that get,
//! list, watch and Tables serve them as any stored object. Each shows the definition as served,
//! Kubernetes' CRD status fields (conditions worded as Kubernetes words them, acceptedNames,
//! storedVersions) and what only this server knows: the source it is served from, the storage
//! version, objects per version (older versions as the last migration pass counted them, the
//! storage version as the rest), the migration's progress and the last reload's problems with
//! it (`SourceRefused`, `lastReloadError`). A source refused with no served definition to show
//! it (a new invalid definition, a name clash, a file that cannot be read) has an object of its
//! own, with no spec and `Established` false. `metadata.generation` moves with the spec; a
//! condition's `lastTransitionTime` with its status.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::migrate::progress::Progress;
use crate::definitions::builtin::{GROUP, SERVED_DEFINITION_KIND, SERVED_DEFINITIONS, VERSION};
use crate::definitions::conversion::{Conversion, Endpoint};
use crate::definitions::load::reason;
use crate::definitions::reload_status::ReloadError;
use crate::definitions::{Definition, Version};
use crate::store::{Backend, Error, ListOptions, Store, key};

/// The condition a refused source shows (present only then, as a CRD's `NonStructuralSchema`):
/// its reason is the first problem's (`definitions::load::reason`), its message every problem
/// in full, each naming its file and Kubernetes' field paths.
pub const SOURCE_REFUSED: &str = "SourceRefused";

/// What the status of one definition is made of, besides the definition itself.
#[derive(Debug, Default)]
pub struct Facts<'a> {
    pub stored_versions: &'a [String],
    pub progress: Option<&'a Progress>,
    /// Objects per version they are stored in.
    pub objects_per_version: Option<&'a std::collections::BTreeMap<String, u64>>,
    /// Why the last reload of the definition's file was refused, if it was.
    pub reload_error: Option<&'a str>,
    /// The last reload's problems with the definition, in file order.
    pub problems: &'a [&'a ReloadError],
}

fn object_key(name: &str) -> String {
    key::object_key(GROUP, SERVED_DEFINITIONS, None, name)
}

/// The prefix of every status object.
pub fn prefix() -> String {
    key::resource_prefix(GROUP, SERVED_DEFINITIONS)
}

/// Writes the status object of `definition` if what it shows changed.
pub async fn write(store: &Backend, definition: &Definition, facts: &Facts<'_>) -> Result<(), Error> {
    write_object(store, &definition.name, &|stored| render_text(definition, facts, stored)).await
}

/// Writes the object of a source refused with no served definition to show it (`name`, the
/// entry's name; `problems`, its problems) if what it shows changed.
pub async fn write_unserved(store: &Backend, name: &str, problems: &[&ReloadError]) -> Result<(), Error> {
    write_object(store, name, &|stored| {
        let mut object = render_unserved_kept(name, problems, &Kept::from(stored));
        keep_impact(&mut object, stored.map(|s| &s.fields));
        serde_json::to_vec(&object).map_err(|e| Error::Backend(e.to_string()))
    })
    .await
}

/// A stored status object read for a rewrite: every field but `spec` parsed, `spec` kept as its
/// text. A definition's schemas are most of its object, and the object written over it is
/// compared as text: with thousands of definitions, parsing each schema on every rewrite was
/// most of what the server did after a start (issue 32).
pub struct Stored {
    fields: Value,
    spec: Option<Box<RawValue>>,
}

impl Stored {
    fn read(bytes: &[u8]) -> Option<Stored> {
        let mut parts: BTreeMap<String, Box<RawValue>> = crate::core::nesting::from_slice(bytes).ok()?;
        let spec = parts.remove("spec");
        let mut fields = Map::new();
        for (key, raw) in parts {
            fields.insert(key, crate::core::nesting::from_str(raw.get()).ok()?);
        }
        Some(Stored { fields: Value::Object(fields), spec })
    }

    /// An object as [`Stored::read`] reads its text.
    fn of(object: &Value) -> Option<Stored> {
        Stored::read(&serde_json::to_vec(object).ok()?)
    }
}

/// Renders the text of an object, given the one stored (if any).
type RenderText<'a> = dyn Fn(Option<&Stored>) -> Result<Vec<u8>, Error> + Sync + 'a;

async fn write_object(store: &Backend, name: &str, render: &RenderText<'_>) -> Result<(), Error> {
    let key = object_key(name);
    for _ in 0..4 {
        let current = store.get(&key).await?;
        let stored = current.as_ref().and_then(|c| Stored::read(&c.value));
        let text = render(stored.as_ref())?;
        // Objects are written as this renders them: an unchanged object is the same text.
        if current.as_ref().is_some_and(|c| c.value[..] == text[..]) {
            return Ok(());
        }
        let bytes = Bytes::from(text);
        let written = match current {
            Some(c) => store.update(&key, c.revision, bytes).await,
            None => store.create(&key, bytes).await,
        };
        match written {
            Ok(_) => return Ok(()),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The impact analysis an object shows stays when the controller rewrites it: analyses write
/// it (`update_impact`), whichever replica ran them.
fn keep_impact(object: &mut Value, existing: Option<&Value>) {
    let Some(impact) = existing.and_then(|e| e.pointer("/status/impact")) else { return };
    if let Some(status) = object.get_mut("status") {
        put(status, IMPACT, impact.clone());
    }
}

/// Where the status object shows the last impact analysis of its definition.
const IMPACT: &str = "impact";

/// Sets `status.impact` of `definition`'s status object by compare-and-swap: `change` sees the
/// analysis the object shows now and gives the one to write, or `None` to leave it (then
/// nothing is written). An object not written yet is written with what the store's records
/// say of it. Returns what was written.
pub async fn update_impact(
    store: &Backend,
    definition: &Definition,
    change: &mut (dyn FnMut(Option<&Value>) -> Option<Value> + Send),
) -> Result<Option<Value>, Error> {
    let key = object_key(&definition.name);
    for _ in 0..8 {
        let current = store.get(&key).await?;
        let existing: Option<Value> = current.as_ref().and_then(|c| crate::core::nesting::from_slice(&c.value).ok());
        let Some(impact) = change(existing.as_ref().and_then(|e| e.pointer("/status/impact"))) else {
            return Ok(None);
        };
        let mut object = match existing {
            Some(object) => object,
            None => {
                let stored = super::stored_versions::read(store, &definition.name).await?;
                let facts = Facts { stored_versions: &stored, ..Facts::default() };
                render(definition, &facts, None)
            }
        };
        if let Some(status) = object.get_mut("status") {
            put(status, IMPACT, impact.clone());
        }
        let bytes = Bytes::from(serde_json::to_vec(&object).map_err(|e| Error::Backend(e.to_string()))?);
        let written = match current {
            Some(c) => store.update(&key, c.revision, bytes).await,
            None => store.create(&key, bytes).await,
        };
        match written {
            Ok(_) => return Ok(Some(impact)),
            Err(Error::Conflict { .. } | Error::AlreadyExists(_) | Error::NotFound(_)) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Backend(format!("the status of {} kept changing while its impact was written", definition.name)))
}

/// Removes the status objects of definitions no longer served (`served` says which are).
pub async fn remove_others(store: &Backend, served: &(dyn Fn(&str) -> bool + Sync)) -> Result<(), Error> {
    let prefix = prefix();
    let page = store.list(&prefix, ListOptions::default()).await?;
    for kv in page.items {
        let name = kv.key.strip_prefix(&prefix).unwrap_or_default();
        if !served(name) {
            match store.delete(&kv.key, Some(kv.revision)).await {
                Ok(_) | Err(Error::NotFound(_) | Error::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// What an object keeps from the one it replaces (`existing`, its fields but the spec, and
/// `existing_spec`): its uid, creation time, generation (one more when the spec changed) and
/// conditions' transition times.
struct Kept<'a> {
    existing: Option<&'a Value>,
    existing_spec: Option<&'a str>,
    uid: String,
    created: String,
    now: String,
}

impl<'a> Kept<'a> {
    fn from(stored: Option<&'a Stored>) -> Kept<'a> {
        let existing = stored.map(|s| &s.fields);
        let existing_spec = stored.and_then(|s| s.spec.as_deref()).map(RawValue::get);
        let meta = existing.and_then(|e| e.get("metadata"));
        let text = |field: &str| meta.and_then(|m| m.get(field)).and_then(Value::as_str).map(str::to_string);
        let now = crate::core::time::now_rfc3339();
        match (text("uid"), text("creationTimestamp")) {
            (Some(uid), Some(created)) => Kept { existing, existing_spec, uid, created, now },
            _ => Kept {
                existing: None,
                existing_spec: None,
                uid: uuid::Uuid::new_v4().to_string(),
                created: now.clone(),
                now,
            },
        }
    }

    /// The generation of an object with `spec` (its text): 1 at first, one more whenever the
    /// spec changes.
    fn generation(&self, spec: Option<&str>) -> u64 {
        let Some(existing) = self.existing else { return 1 };
        let was = existing.pointer("/metadata/generation").and_then(Value::as_u64).unwrap_or(1);
        if self.existing_spec == spec { was } else { was + 1 }
    }

    /// A condition, since when the existing object last showed another status for it (the
    /// object's creation for a new object).
    fn condition(&self, kind: &str, status: bool, reason: &str, message: &str) -> Value {
        let status = if status { "True" } else { "False" };
        let previous = self
            .existing
            .and_then(|e| e.pointer("/status/conditions"))
            .and_then(Value::as_array)
            .and_then(|all| all.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)));
        let since = match previous {
            Some(c) if c.get("status").and_then(Value::as_str) == Some(status) => {
                c.get("lastTransitionTime").and_then(Value::as_str).unwrap_or(&self.now)
            }
            Some(_) => &self.now,
            None if self.existing.is_some() => &self.now,
            None => &self.created,
        };
        json!({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    }

    fn metadata(&self, name: &str, generation: u64) -> Value {
        json!({"name": name, "uid": self.uid, "creationTimestamp": self.created, "generation": generation})
    }
}

/// The `NamesAccepted` condition: false with Kubernetes' naming controller's reason and
/// message when one of `problems` is a clash over a name.
fn names_accepted(kept: &Kept<'_>, problems: &[&ReloadError]) -> (bool, Value) {
    let clash = problems.iter().find(|p| reason::is_name_conflict(p.reason));
    match clash {
        Some(clash) => {
            let message = clash.errors.first().map(String::as_str).unwrap_or_default();
            let message = message.strip_prefix("names not accepted: ").unwrap_or(message);
            (false, kept.condition("NamesAccepted", false, clash.reason, message))
        }
        None => (true, kept.condition("NamesAccepted", true, "NoConflicts", "no conflicts found")),
    }
}

/// The `SourceRefused` condition, when there are problems.
fn source_refused(kept: &Kept<'_>, problems: &[&ReloadError]) -> Option<Value> {
    let first = problems.first()?;
    let message: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    Some(kept.condition(SOURCE_REFUSED, true, first.reason, &message.join("\n")))
}

/// The status object of `definition`, replacing `existing`.
pub fn render(definition: &Definition, facts: &Facts<'_>, existing: Option<&Value>) -> Value {
    let stored = existing.and_then(Stored::of);
    let text = render_text(definition, facts, stored.as_ref()).unwrap_or_default();
    crate::core::nesting::from_slice(&text).unwrap_or_default()
}

/// [`render`] as the text written: the schemas' texts put in as they are, never parsed, and the
/// impact analysis `stored` shows kept.
fn render_text(definition: &Definition, facts: &Facts<'_>, stored: Option<&Stored>) -> Result<Vec<u8>, Error> {
    let kept = Kept::from(stored);
    // A changed form whose names clash is not served: the accepted names stay, and Kubernetes
    // says so in NamesAccepted, the definition staying established.
    let (_, names_accepted) = names_accepted(&kept, facts.problems);
    let mut conditions = vec![
        names_accepted,
        kept.condition("Established", true, "InitialNamesAccepted", "the initial names have been accepted"),
    ];
    conditions.extend(source_refused(&kept, facts.problems));
    let mut status = json!({
        "conditions": conditions,
        "acceptedNames": names(definition),
        "storedVersions": facts.stored_versions,
        "storageVersion": definition.storage.name,
        "source": definition.source,
    });
    if let Some(counts) = facts.objects_per_version {
        put(&mut status, "objectsPerVersion", json!(counts));
    }
    if let Some(progress) = facts.progress {
        put(&mut status, "migration", migration(progress, facts.stored_versions));
    }
    if let Some(error) = facts.reload_error {
        put(&mut status, "lastReloadError", json!(error));
    }
    let marker = Marker::new();
    let spec = spec_text(definition, &marker)?;
    let mut object = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": SERVED_DEFINITION_KIND,
        "metadata": kept.metadata(&definition.name, kept.generation(Some(&spec))),
        "spec": marker.at("spec"),
        "status": status,
    });
    keep_impact(&mut object, stored.map(|s| &s.fields));
    let text = serde_json::to_string(&object).map_err(|e| Error::Backend(e.to_string()))?;
    let mut text = marker.replace(text, "spec", &spec).into_bytes();
    // What is written stays in the store's recent history: not the room the text grew into.
    text.shrink_to_fit();
    Ok(text)
}

/// A placeholder for a text put into a rendered object after it is written (`replace`): a
/// string no value of a definition can hold, as it carries a random part.
struct Marker(String);

impl Marker {
    fn new() -> Marker {
        Marker(format!("\u{0}{}:", uuid::Uuid::new_v4().simple()))
    }

    /// The placeholder of `name`, as a value.
    fn at(&self, name: &str) -> Value {
        Value::String(format!("{}{name}", self.0))
    }

    /// `rendered` with the placeholder of `name` replaced by `text` (JSON).
    fn replace(&self, rendered: String, name: &str, text: &str) -> String {
        let written = serde_json::to_string(&self.at(name)).unwrap_or_default();
        rendered.replacen(&written, text, 1)
    }
}

/// The definition's spec as served (CustomResourceDefinitionSpec's fields), as text: each
/// version's schema is its text (`Version::openapi_schema`, what serde_json writes for it).
fn spec_text(definition: &Definition, marker: &Marker) -> Result<String, Error> {
    let schemas: Vec<String> = (0..definition.versions.len()).map(|i| format!("schema{i}")).collect();
    let versions: Vec<Value> = definition
        .versions
        .iter()
        .zip(&schemas)
        .map(|(v, name)| version(v, v.openapi_schema.as_ref().map(|_| marker.at(name))))
        .collect();
    let spec = json!({
        "group": definition.group,
        "names": names(definition),
        "scope": if definition.namespaced() { "Namespaced" } else { "Cluster" },
        "versions": versions,
        "conversion": conversion(&definition.conversion),
    });
    let mut text = serde_json::to_string(&spec).map_err(|e| Error::Backend(e.to_string()))?;
    for (v, name) in definition.versions.iter().zip(&schemas) {
        if let Some(schema) = &v.openapi_schema {
            text = marker.replace(text, name, schema);
        }
    }
    Ok(text)
}

/// The object of a source refused with no served definition to show it: not established, the
/// names refused when they clash, and every problem in `SourceRefused` and `lastReloadError`.
pub fn render_unserved(name: &str, problems: &[&ReloadError], existing: Option<&Value>) -> Value {
    let stored = existing.and_then(Stored::of);
    render_unserved_kept(name, problems, &Kept::from(stored.as_ref()))
}

fn render_unserved_kept(name: &str, problems: &[&ReloadError], kept: &Kept<'_>) -> Value {
    let mut conditions = Vec::new();
    let clash = problems.iter().any(|p| reason::is_name_conflict(p.reason));
    if clash {
        let (_, names_accepted) = names_accepted(kept, problems);
        conditions.push(names_accepted);
        conditions.push(kept.condition("Established", false, "NotAccepted", "not all names are accepted"));
    } else {
        let message = "the definition is not served: its source is refused";
        conditions.push(kept.condition("Established", false, SOURCE_REFUSED, message));
    }
    conditions.extend(source_refused(kept, problems));
    let messages: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    let mut status = json!({"conditions": conditions, "lastReloadError": messages.join("\n")});
    if let Some(first) = problems.first() {
        put(&mut status, "source", json!(first.source));
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": SERVED_DEFINITION_KIND,
        "metadata": kept.metadata(name, kept.generation(None)),
        "status": status,
    })
}

fn put(target: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = target {
        map.insert(key.to_string(), value);
    }
}

fn names(definition: &Definition) -> Value {
    let mut names = json!({"plural": definition.plural, "singular": definition.singular,
                           "kind": definition.kind, "listKind": definition.list_kind});
    if !definition.short_names.is_empty() {
        put(&mut names, "shortNames", json!(definition.short_names));
    }
    if !definition.categories.is_empty() {
        put(&mut names, "categories", json!(definition.categories));
    }
    names
}

fn migration(progress: &Progress, stored_versions: &[String]) -> Value {
    let from: Vec<&String> = stored_versions.iter().filter(|v| **v != progress.storage_version).collect();
    let mut migration = json!({
        "state": progress.state.as_str(),
        "storageVersion": progress.storage_version,
        "fromVersions": from,
        "migratedObjects": progress.migrated,
        "objectsInOlderVersions": progress.found_old,
        "yieldedToWriters": progress.yielded_to_writers,
        "startedAt": progress.started_at,
    });
    if let Some(finished) = &progress.finished_at {
        put(&mut migration, "finishedAt", json!(finished));
    }
    if let Some(error) = &progress.last_error {
        put(&mut migration, "lastError", json!(error));
    }
    migration
}

/// A version as served, `schema` standing for its schema.
fn version(version: &Version, schema: Option<Value>) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), json!(version.name));
    out.insert("served".into(), json!(version.served));
    out.insert("storage".into(), json!(version.storage));
    if version.deprecated {
        out.insert("deprecated".into(), json!(true));
    }
    if let Some(warning) = &version.deprecation_warning {
        out.insert("deprecationWarning".into(), json!(warning));
    }
    if let Some(schema) = schema {
        out.insert("schema".into(), json!({"openAPIV3Schema": schema}));
    }
    let mut subresources = Map::new();
    if version.status_subresource {
        subresources.insert("status".into(), json!({}));
    }
    if let Some(scale) = &version.scale {
        let mut s = json!({"specReplicasPath": scale.spec_replicas_path,
                           "statusReplicasPath": scale.status_replicas_path});
        if let Some(selector) = &scale.label_selector_path {
            put(&mut s, "labelSelectorPath", json!(selector));
        }
        subresources.insert("scale".into(), s);
    }
    if !subresources.is_empty() {
        out.insert("subresources".into(), Value::Object(subresources));
    }
    if !version.printer_columns.is_empty() {
        out.insert("additionalPrinterColumns".into(), json!(version.printer_columns));
    }
    if !version.selectable_fields.is_empty() {
        let fields: Vec<Value> =
            version.selectable_fields.iter().map(|f| json!({"jsonPath": format!(".{f}")})).collect();
        out.insert("selectableFields".into(), Value::Array(fields));
    }
    Value::Object(out)
}

fn conversion(conversion: &Conversion) -> Value {
    match conversion {
        Conversion::None => json!({"strategy": "None"}),
        Conversion::Webhook(hook) => {
            let client_config = match &hook.endpoint {
                Endpoint::Url(url) => json!({"url": url}),
                Endpoint::Service { name, namespace, port, path } => {
                    json!({"service": {"name": name, "namespace": namespace, "port": port, "path": path}})
                }
            };
            json!({"strategy": "Webhook", "webhook": {"clientConfig": client_config,
                   "conversionReviewVersions": [hook.review_version]}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::load::definition_from_value;

    fn definition(description: &str) -> Definition {
        let manifest = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "description": description}}}]}
        });
        definition_from_value(manifest, "defs/things.yaml").unwrap()
    }

    fn problem(reason: &'static str, error: &str) -> ReloadError {
        ReloadError {
            definition: Some("things.example.com".into()),
            source: "defs/things.yaml".into(),
            message: format!("defs/things.yaml: CustomResourceDefinition \"things.example.com\" is invalid: {error}"),
            reason,
            errors: vec![error.into()],
            concerns: Vec::new(),
        }
    }

    fn conditions(object: &Value) -> Vec<(String, String, String)> {
        let all = object.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let text = |c: &Value, f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        all.iter().map(|c| (text(c, "type"), text(c, "status"), text(c, "reason"))).collect()
    }

    fn transition(object: &Value, kind: &str) -> String {
        let all = object.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let found = all.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(kind)).cloned();
        found.and_then(|c| c.get("lastTransitionTime").and_then(Value::as_str).map(str::to_string)).unwrap_or_default()
    }

    /// `object` as if written at another time: every transition time set back.
    fn earlier(mut object: Value) -> Value {
        if let Some(Value::Array(all)) = object.pointer_mut("/status/conditions") {
            for c in all {
                c["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
            }
        }
        object
    }

    /// A schema `depth` objects deep, past serde_json's own recursion limit (128).
    fn deep_definition(depth: usize) -> Definition {
        let mut schema = json!({"type": "string", "description": "leaf \"quoted\" \u{0} é", "maximum": 1.5});
        for _ in 0..depth {
            schema = json!({"type": "object", "properties": {"next": schema}, "description": "a level"});
        }
        let manifest = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}},
                    {"name": "v2", "served": true, "storage": false,
                        "schema": {"openAPIV3Schema": {"type": "object", "description": "the second"}}}]}
        });
        definition_from_value(manifest, "defs/things.yaml").unwrap()
    }

    #[test]
    fn the_text_written_is_what_serde_json_writes_for_the_object_and_reads_back_unchanged() {
        // Deep schemas are loaded on a large stack, as the server loads definitions.
        let checked = std::thread::Builder::new().stack_size(crate::core::nesting::THREAD_STACK_BYTES).spawn(|| {
            for definition in [definition("one"), deep_definition(150)] {
                render_reads_back(&definition);
            }
        });
        checked.unwrap().join().unwrap();
    }

    fn render_reads_back(definition: &Definition) {
        {
            let text = render_text(definition, &Facts::default(), None).unwrap();
            let object: Value = crate::core::nesting::from_slice(&text).unwrap();
            // The schemas put in as text are what serde_json writes for them parsed: the same
            // bytes as an object rendered whole (those written before) and nothing to rewrite.
            assert_eq!(serde_json::to_vec(&object).unwrap(), text);
            for (i, version) in definition.versions.iter().enumerate() {
                let shown = &object["spec"]["versions"][i]["schema"]["openAPIV3Schema"];
                assert!(shown.is_object(), "{i}");
                assert_eq!(Some(shown.clone()), version.openapi_schema_value());
                // A schema deeper than serde_json's default limit is compiled, not dropped.
                assert!(version.schema().is_some(), "{i}");
            }
            let stored = Stored::read(&text).expect("a deep object is read back");
            let again = render_text(definition, &Facts::default(), Some(&stored)).unwrap();
            let again: Value = crate::core::nesting::from_slice(&again).unwrap();
            assert_eq!(again["metadata"], object["metadata"], "the same uid, creation and generation");
            assert_eq!(again["spec"], object["spec"]);
        }
    }

    #[test]
    fn generation_moves_with_the_spec_and_transition_times_with_the_status() {
        let first = render(&definition("one"), &Facts::default(), None);
        assert_eq!(first["metadata"]["generation"], 1);
        assert_eq!(first["status"]["source"], "defs/things.yaml");
        let first = earlier(first);
        let again = render(&definition("one"), &Facts::default(), Some(&first));
        assert_eq!(again, first, "nothing changed: the same object");
        let changed = render(&definition("two"), &Facts::default(), Some(&again));
        assert_eq!(changed["metadata"]["generation"], 2);
        assert_eq!(changed["metadata"]["uid"], first["metadata"]["uid"]);
        assert_eq!(transition(&changed, "Established"), "2020-01-01T00:00:00Z");

        // A refused change: the names clash. Established stays, NamesAccepted and
        // SourceRefused say why from now on.
        let clash = problem(reason::PLURAL_CONFLICT, "names not accepted: \"things\" is already in use");
        let problems = [&clash];
        let facts = Facts { problems: &problems, reload_error: Some(&clash.message), ..Facts::default() };
        let refused = render(&definition("two"), &facts, Some(&changed));
        assert_eq!(refused["metadata"]["generation"], 2);
        assert_eq!(
            conditions(&refused),
            [
                ("NamesAccepted".into(), "False".into(), "PluralConflict".into()),
                ("Established".into(), "True".into(), "InitialNamesAccepted".into()),
                ("SourceRefused".into(), "True".into(), "PluralConflict".into()),
            ]
        );
        assert_eq!(refused["status"]["conditions"][0]["message"], "\"things\" is already in use");
        assert_eq!(refused["status"]["conditions"][2]["message"], json!(clash.message));
        assert_eq!(transition(&refused, "Established"), "2020-01-01T00:00:00Z");
        assert_ne!(transition(&refused, "NamesAccepted"), "2020-01-01T00:00:00Z");
    }

    #[test]
    fn a_source_refused_with_nothing_served_has_an_object_of_its_own() {
        let invalid = problem(reason::INVALID, "spec.versions[0].name: Required value");
        let object = render_unserved("things.example.com", &[&invalid], None);
        assert_eq!(
            conditions(&object),
            [
                ("Established".into(), "False".into(), "SourceRefused".into()),
                ("SourceRefused".into(), "True".into(), "Invalid".into()),
            ]
        );
        assert_eq!(object["status"]["lastReloadError"], json!(invalid.message));
        assert_eq!(object["status"]["source"], "defs/things.yaml");
        assert!(object.get("spec").is_none());
        let clash = problem(reason::KIND_CONFLICT, "names not accepted: \"Thing\" is already in use");
        let object = render_unserved("things.example.com", &[&clash], Some(&object));
        assert_eq!(
            conditions(&object),
            [
                ("NamesAccepted".into(), "False".into(), "KindConflict".into()),
                ("Established".into(), "False".into(), "NotAccepted".into()),
                ("SourceRefused".into(), "True".into(), "KindConflict".into()),
            ]
        );
    }
}
