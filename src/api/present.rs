//! Stored objects as responses: decoded from the stored bytes, stamped with their
//! resourceVersion, converted to the request version, and rendered as the negotiated view
//! (object, Table or PartialObjectMetadata).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::body::{self, RespBody};
use super::call::{Call, Subresource};
use super::negotiate::{Encoding, Output, View};
use super::objects;
use super::table::{self, Columns, IncludeObject, TableWriter};
use super::verbatim;
use crate::core::nesting;
use crate::core::status::ApiError;
use crate::definitions::registry::Served;
use crate::definitions::{Definition, Version};
use crate::store::Revision;

/// Decodes a stored object and prepares it for the caller's version: coerced and defaulted
/// with the schema of the version it is stored in (defaults are not written back), then
/// converted. Objects that provably need none of it (`verbatim`) are only parsed.
pub fn from_storage(call: &Call, bytes: &[u8], revision: Revision) -> Result<Value, ApiError> {
    from_storage_as(&call.served, bytes, revision)
}

/// [`from_storage`] for the resource and version `served`.
pub fn from_storage_as(served: &Served, bytes: &[u8], revision: Revision) -> Result<Value, ApiError> {
    let mut rendered = Vec::new();
    if verbatim::render(&served.definition, &served.version, bytes, revision, &mut rendered) {
        return nesting::from_slice(&rendered).map_err(not_json);
    }
    read_stored(&served.definition, &served.version, bytes, revision)
}

/// The general read path: every stored object can take it.
pub fn read_stored(
    definition: &Definition,
    version: &Version,
    bytes: &[u8],
    revision: Revision,
) -> Result<Value, ApiError> {
    let mut object: Value = nesting::from_slice(bytes).map_err(not_json)?;
    read_coerce(definition, &mut object);
    objects::set_resource_version(&mut object, revision);
    super::write::convert_to(definition, &mut object, version)?;
    Ok(object)
}

/// A list page read for the call's version in one conversion, when the definition's webhook
/// must convert some of its objects (`None`: each object takes [`ListItems::add`]).
pub fn convert_page(call: &Call, page: &[crate::store::KeyValue]) -> Result<Option<Vec<Value>>, ApiError> {
    let (definition, version) = (&call.served.definition, &call.served.version);
    if !matches!(definition.conversion, crate::definitions::conversion::Conversion::Webhook(_)) {
        return Ok(None);
    }
    // Most pages are read in the version they are stored in: tell that from each object's
    // `apiVersion` alone, without decoding the page twice.
    let desired = format!("{}/{}", definition.group, version.name);
    if page.iter().all(|kv| stored_api_version(&kv.value).as_deref() == Some(desired.as_str())) {
        return Ok(None);
    }
    let mut objects = Vec::with_capacity(page.len());
    for kv in page {
        let mut object: Value = nesting::from_slice(&kv.value).map_err(not_json)?;
        read_coerce(definition, &mut object);
        objects::set_resource_version(&mut object, kv.revision);
        objects.push(object);
    }
    if !crate::conversion::needs_webhook(definition, &objects, &version.name) {
        return Ok(None);
    }
    super::write::convert_all_to(definition, objects, version).map(Some)
}

/// The `apiVersion` of a stored object, read without decoding the rest of it: this server
/// writes objects compact with their keys in order, so it is nearly always the first member,
/// taken off the bytes when it needs no unescaping; otherwise the object is parsed for it.
pub fn stored_api_version(bytes: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    const HEAD: &[u8] = b"{\"apiVersion\":\"";
    if let Some(rest) = bytes.strip_prefix(HEAD)
        && let Some(end) = rest.iter().position(|&b| matches!(b, b'"' | b'\\'))
        && rest.get(end) == Some(&b'"')
        && let Some(Ok(plain)) = rest.get(..end).map(std::str::from_utf8)
    {
        return Some(std::borrow::Cow::Borrowed(plain));
    }
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow, rename = "apiVersion")]
        api_version: Option<std::borrow::Cow<'a, str>>,
    }
    nesting::from_slice::<Head<'_>>(bytes).ok()?.api_version
}

fn not_json(e: serde_json::Error) -> ApiError {
    ApiError::internal(format!("stored object is not JSON: {e}"))
}

/// A stored object as the response to a read, in the negotiated view. A plain JSON object is
/// written from the stored bytes when they provably need no coercion, defaulting or conversion.
pub fn stored_response(
    call: &Call,
    output: Output,
    bytes: &[u8],
    revision: Revision,
) -> Result<Response<RespBody>, ApiError> {
    let (definition, version) = (&call.served.definition, &call.served.version);
    if output == Output::JSON {
        let mut rendered = Vec::new();
        if verbatim::render(definition, version, bytes, revision, &mut rendered) {
            return Ok(body::bytes_response(StatusCode::OK, "application/json", rendered));
        }
        let object = read_stored(definition, version, bytes, revision)?;
        return object_response(call, output, StatusCode::OK, object);
    }
    object_response(call, output, StatusCode::OK, from_storage(call, bytes, revision)?)
}

/// What Kubernetes' storage decoder does to every object it reads: ObjectMeta coercion
/// (dropping ill-typed fields of old objects), pruning, generation 0 repaired to 1, and the
/// stored version's defaults.
pub fn read_coerce(definition: &Definition, object: &mut Value) {
    let stored_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit('/').next())
        .and_then(|v| definition.version(v))
        .unwrap_or(&definition.storage);
    let schema = stored_version.schema().map(std::sync::Arc::as_ref);
    // A stored object's metadata may only be wrong in ways that dropping fixes.
    let _ = crate::schema::coerce(object, schema, true);
    if let Some(meta) = objects::metadata_mut(object)
        && meta.get("generation").and_then(Value::as_i64).unwrap_or(0) == 0
    {
        meta.insert("generation".into(), Value::from(1));
    }
    crate::schema::default(object, schema);
}

/// A single object in the negotiated view.
pub fn object_response(
    call: &Call,
    output: Output,
    status: StatusCode,
    object: Value,
) -> Result<Response<RespBody>, ApiError> {
    let value = match output.view {
        View::Object => object,
        View::Metadata(v) => table::partial_metadata(&object, v),
        View::Table(v) => {
            let include = IncludeObject::parse(call.query.get("includeObject"))?;
            let columns = match call.served.version.scale.as_ref() {
                Some(scale) if call.subresource == Subresource::Scale => Columns::for_scale(scale),
                _ => Columns::for_version(&call.served.version),
            };
            let rv = objects::resource_version(&object).to_string();
            table::build(
                v,
                &columns,
                std::slice::from_ref(&object),
                json!({"resourceVersion": rv}),
                include,
                no_headers(call),
            )
        }
    };
    Ok(body::value_response(status, output.encoding, &value))
}

/// The response to a write: `object` is the stored object in the request version, as
/// `write::stored_to_response` made it from the `stored` bytes written at `revision`. A plain
/// JSON object is the stored bytes with the revision spliced in when they provably read back
/// unchanged (then `object` is what parsing them would give).
pub fn written_response(
    call: &Call,
    output: Output,
    status: StatusCode,
    object: Value,
    stored: &[u8],
    revision: Revision,
) -> Result<Response<RespBody>, ApiError> {
    if output == Output::JSON {
        let mut rendered = Vec::new();
        if verbatim::render(&call.served.definition, &call.served.version, stored, revision, &mut rendered) {
            return Ok(body::bytes_response(status, "application/json", rendered));
        }
    }
    object_response(call, output, status, object)
}

/// The metadata of a list of custom resources, as kube-apiserver writes an unstructured
/// list's: `resourceVersion`, `continue` (the empty string on the last page: the storage layer
/// always sets it) and, when a limit cut the list and no selector filtered it,
/// `remainingItemCount`.
pub fn list_metadata(revision: Revision, continue_token: Option<String>, remaining: Option<u64>) -> Value {
    let mut meta = json!({"resourceVersion": revision.to_string(), "continue": continue_token.unwrap_or_default()});
    if let Some(remaining) = remaining {
        crate::api::objects::put(&mut meta, "remainingItemCount", json!(remaining));
    }
    meta
}

/// The metadata of a typed list (`Table`, `PartialObjectMetadataList`): Kubernetes copies the
/// unstructured list's into a `ListMeta`, whose empty `continue` is omitted.
fn typed_list_metadata(metadata: &Value) -> Value {
    let mut typed = metadata.clone();
    if let Value::Object(map) = &mut typed
        && map.get("continue").is_some_and(|c| c.as_str() == Some(""))
    {
        map.remove("continue");
    }
    typed
}

/// A list in the negotiated view.
pub fn list_response(
    call: &Call,
    output: Output,
    items: Vec<Value>,
    metadata: Value,
) -> Result<Response<RespBody>, ApiError> {
    let value = match output.view {
        View::Object => json!({
            "apiVersion": call.api_version(),
            "kind": call.served.definition.list_kind,
            "metadata": metadata,
            "items": items,
        }),
        View::Metadata(v) => json!({
            "apiVersion": v.api_version(),
            "kind": "PartialObjectMetadataList",
            "metadata": typed_list_metadata(&metadata),
            "items": items.iter().map(|o| table::partial_metadata(o, v)).collect::<Vec<_>>(),
        }),
        View::Table(v) => {
            let include = IncludeObject::parse(call.query.get("includeObject"))?;
            let columns = Columns::for_version(&call.served.version);
            table::build(v, &columns, &items, typed_list_metadata(&metadata), include, no_headers(call))
        }
    };
    Ok(body::value_response(StatusCode::OK, output.encoding, &value))
}

/// The items of a list, gathered as the store returns them. JSON lists and Tables are written
/// as they go (plain lists from the stored bytes where `verbatim` allows); other views keep
/// the objects for the end.
pub struct ListItems {
    gathered: Gathered,
    count: usize,
}

/// Room for what follows the items: `],"kind":...,"metadata":{...}}` with a continue token.
const LIST_TAIL_BYTES: usize = 1024;

enum Gathered {
    /// The JSON text so far: `{"apiVersion":...,"items":[` and the items.
    Json(Vec<u8>),
    Table(Box<TableWriter>),
    Objects(Vec<Value>),
}

impl ListItems {
    pub fn new(call: &Call, output: Output) -> Result<ListItems, ApiError> {
        let gathered = Self::gathering(call, output)?;
        Ok(ListItems { gathered, count: 0 })
    }

    fn gathering(call: &Call, output: Output) -> Result<Gathered, ApiError> {
        let gathered = match (output.view, output.encoding) {
            (View::Object, Encoding::Json) => {
                // Members in the order serde_json writes a map: apiVersion, items, kind, metadata.
                let mut text = b"{\"apiVersion\":".to_vec();
                serde_json::to_writer(&mut text, &call.api_version()).map_err(encoding_error)?;
                text.extend_from_slice(b",\"items\":[");
                Gathered::Json(text)
            }
            // An unknown includeObject is refused after the store answered, as Kubernetes does:
            // that list takes the general path.
            (View::Table(version), Encoding::Json) => match IncludeObject::parse(call.query.get("includeObject")) {
                Ok(include) => {
                    let columns = Columns::for_version(&call.served.version);
                    Gathered::Table(Box::new(TableWriter::new(version, columns, include, no_headers(call))))
                }
                Err(_) => Gathered::Objects(Vec::new()),
            },
            _ => Gathered::Objects(Vec::new()),
        };
        Ok(gathered)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// Makes room for a page of stored objects before it is added, so that a list's JSON text
    /// grows once per page instead of doubling object by object: each doubling of a
    /// megabyte-sized buffer is a copy (mimalloc copies where glibc remapped pages), which
    /// made a list of 2,000 objects a fifth slower. Objects that take the general path (and
    /// gain defaults) may still grow it.
    pub fn reserve_page(&mut self, page: &[crate::store::KeyValue]) {
        if let Gathered::Json(text) = &mut self.gathered {
            let objects: usize = page.iter().map(|kv| kv.value.len() + verbatim::SPLICE_BYTES).sum();
            text.reserve(objects + LIST_TAIL_BYTES);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds a stored object when `keep` accepts it (`keep` is `None` when every object is
    /// kept); returns whether it was added.
    pub fn add(
        &mut self,
        call: &Call,
        bytes: &[u8],
        revision: Revision,
        keep: Option<&(dyn Fn(&Value) -> bool + Sync)>,
    ) -> Result<bool, ApiError> {
        let (definition, version) = (&call.served.definition, &call.served.version);
        let separator = self.count > 0;
        if let Gathered::Json(text) = &mut self.gathered {
            let mark = text.len();
            if separator {
                text.push(b',');
            }
            let start = text.len();
            if verbatim::render(definition, version, bytes, revision, text) {
                let kept = match keep {
                    None => true,
                    Some(keep) => keep(&nesting::from_slice(text.get(start..).unwrap_or_default()).map_err(not_json)?),
                };
                if !kept {
                    text.truncate(mark);
                }
                self.count += usize::from(kept);
                return Ok(kept);
            }
            text.truncate(mark);
        }
        self.add_object(from_storage(call, bytes, revision)?, keep)
    }

    /// Adds an object read already for the call's version (see [`convert_page`]) when `keep`
    /// accepts it.
    pub fn add_object(
        &mut self,
        object: Value,
        keep: Option<&(dyn Fn(&Value) -> bool + Sync)>,
    ) -> Result<bool, ApiError> {
        let separator = self.count > 0;
        if keep.is_some_and(|keep| !keep(&object)) {
            return Ok(false);
        }
        match &mut self.gathered {
            Gathered::Json(text) => {
                if separator {
                    text.push(b',');
                }
                crate::core::json::to_writer(&mut *text, &object).map_err(encoding_error)?;
            }
            Gathered::Table(table) => table.push(&object).map_err(encoding_error)?,
            Gathered::Objects(objects) => objects.push(object),
        }
        self.count += 1;
        Ok(true)
    }

    /// The list response with `metadata` (see [`list_metadata`]).
    pub fn into_response(self, call: &Call, output: Output, metadata: Value) -> Result<Response<RespBody>, ApiError> {
        match self.gathered {
            Gathered::Json(mut text) => {
                text.extend_from_slice(b"],\"kind\":");
                let kind = serde_json::to_writer(&mut text, &call.served.definition.list_kind);
                text.extend_from_slice(b",\"metadata\":");
                let meta = serde_json::to_writer(&mut text, &metadata);
                text.push(b'}');
                kind.and(meta).map_err(encoding_error)?;
                Ok(body::bytes_response(StatusCode::OK, "application/json", text))
            }
            Gathered::Table(table) => {
                let text = table.finish(&typed_list_metadata(&metadata)).map_err(encoding_error)?;
                Ok(body::bytes_response(StatusCode::OK, "application/json", text))
            }
            Gathered::Objects(objects) => list_response(call, output, objects, metadata),
        }
    }
}

fn encoding_error(e: serde_json::Error) -> ApiError {
    ApiError::internal(format!("encoding JSON: {e}"))
}

fn no_headers(call: &Call) -> bool {
    call.query.get("noHeaders").is_some_and(|v| v == "true")
}

#[cfg(test)]
pub(crate) mod tests {
    use http_body_util::BodyExt;
    use serde_json::json;

    use super::*;
    use crate::api::call::Subresource;
    use crate::core::request_info::Query;
    use crate::core::user::UserInfo;
    use crate::definitions::load::definition_from_value;
    use crate::definitions::registry::Served;

    /// A CronTab list call (the watch tests use it too).
    pub(crate) fn call() -> Call {
        let raw = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "crontabs.stable.example.com"},
            "spec": {"group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema":
                    {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                        "image": {"type": "string"}, "replicas": {"type": "integer", "default": 1}}}}}}}]}});
        let definition = std::sync::Arc::new(definition_from_value(raw, "test").unwrap());
        let version = definition.storage.clone();
        Call {
            served: Served::new(definition, version),
            verb: "list".into(),
            namespace: Some("ns".into()),
            name: String::new(),
            subresource: Subresource::None,
            query: Query::parse(None),
            headers: http::HeaderMap::new(),
            user: UserInfo::anonymous(),
        }
    }

    async fn text(response: Response<RespBody>) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    /// Stored objects, some the fast path takes (defaulted already) and some it does not.
    pub(crate) fn stored() -> Vec<Vec<u8>> {
        ["a", "b", "c", "d"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let spec = if i % 2 == 0 { json!({"replicas": 2, "image": "x\"y"}) } else { json!({"image": "z"}) };
                serde_json::to_vec(&json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                    "metadata": {"generation": 1, "name": name, "namespace": "ns", "labels": {"n": name}}, "spec": spec}))
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn api_versions_are_read_from_stored_bytes() {
        let stored = br#"{"kind":"Shirt","spec":{"apiVersion":"x"},"apiVersion":"tests.example.com/v1"}"#;
        assert_eq!(stored_api_version(stored).as_deref(), Some("tests.example.com/v1"));
        let escaped = br#"{"apiVersion":"tests.example.com\/v1"}"#;
        assert_eq!(stored_api_version(escaped).as_deref(), Some("tests.example.com/v1"));
        assert_eq!(stored_api_version(br#"{"kind":"Shirt"}"#), None);
        assert_eq!(stored_api_version(b"not json"), None);
        // As this server stores objects: read off the first member, escaped or not.
        let first = br#"{"apiVersion":"tests.example.com/v2","kind":"Shirt"}"#;
        assert!(matches!(stored_api_version(first), Some(std::borrow::Cow::Borrowed("tests.example.com/v2"))));
        let escaped_first = br#"{"apiVersion":"tests.example.com\/v2","kind":"Shirt"}"#;
        assert_eq!(stored_api_version(escaped_first).as_deref(), Some("tests.example.com/v2"));
    }

    #[tokio::test]
    async fn written_lists_are_the_lists_of_objects() {
        let call = call();
        let metadata = || list_metadata(9, Some("token".into()), Some(3));
        let keep_b_and_c = |o: &Value| matches!(objects::name(o), "b" | "c");
        for keep in [None, Some(&keep_b_and_c as &(dyn Fn(&Value) -> bool + Sync))] {
            let mut items = ListItems::new(&call, Output::JSON).unwrap();
            let mut objects = Vec::new();
            for (i, bytes) in stored().iter().enumerate() {
                items.add(&call, bytes, i as u64 + 1, keep).unwrap();
                let object = read_stored(&call.served.definition, &call.served.version, bytes, i as u64 + 1).unwrap();
                if keep.is_none_or(|keep| keep(&object)) {
                    objects.push(object);
                }
            }
            assert_eq!(items.len(), objects.len());
            let written = text(items.into_response(&call, Output::JSON, metadata()).unwrap()).await;
            let general = text(list_response(&call, Output::JSON, objects, metadata()).unwrap()).await;
            assert_eq!(written, general);
        }
        let empty =
            text(ListItems::new(&call, Output::JSON).unwrap().into_response(&call, Output::JSON, metadata()).unwrap());
        assert_eq!(empty.await, text(list_response(&call, Output::JSON, Vec::new(), metadata()).unwrap()).await);
    }

    #[test]
    fn a_page_is_written_without_growing_the_text() {
        let call = call();
        // Objects the fast path takes, at the longest revisions.
        let fast: Vec<Vec<u8>> = stored().into_iter().step_by(2).collect();
        let page: Vec<crate::store::KeyValue> = (0..500)
            .map(|i| crate::store::KeyValue {
                key: format!("k{i}"),
                revision: u64::MAX - i,
                value: fast[i as usize % fast.len()].clone().into(),
            })
            .collect();
        let mut items = ListItems::new(&call, Output::JSON).unwrap();
        items.reserve_page(&page);
        let Gathered::Json(text) = &items.gathered else { panic!("a JSON list is gathered as text") };
        let reserved = text.capacity();
        for kv in &page {
            assert!(items.add(&call, &kv.value, kv.revision, None).unwrap());
        }
        let Gathered::Json(text) = &items.gathered else { panic!("a JSON list is gathered as text") };
        assert_eq!(text.capacity(), reserved, "the text grew while the page was added");
        assert!(reserved - text.len() >= LIST_TAIL_BYTES / 2, "room is left for the list's tail");
    }

    #[tokio::test]
    async fn written_objects_answer_the_same_either_way() {
        let call = call();
        for (i, bytes) in stored().iter().enumerate() {
            let object: Value = serde_json::from_slice(bytes).unwrap();
            let (stored, encoded) = crate::api::write::into_storage(&call.served, object).unwrap();
            let answer = crate::api::write::stored_to_response(&call, stored, i as u64).unwrap();
            let general = text(object_response(&call, Output::JSON, StatusCode::CREATED, answer.clone()).unwrap());
            let written = written_response(&call, Output::JSON, StatusCode::CREATED, answer, &encoded, i as u64);
            assert_eq!(text(written.unwrap()).await, general.await);
        }
    }

    #[tokio::test]
    async fn single_objects_read_the_same_either_way() {
        let call = call();
        for (i, bytes) in stored().iter().enumerate() {
            let written = text(stored_response(&call, Output::JSON, bytes, i as u64).unwrap()).await;
            let object = read_stored(&call.served.definition, &call.served.version, bytes, i as u64).unwrap();
            let general = text(object_response(&call, Output::JSON, StatusCode::OK, object).unwrap()).await;
            assert_eq!(written, general);
        }
    }
}
