//! Stored objects as responses: decoded from the stored bytes, stamped with their
//! resourceVersion, converted to the request version, and rendered as the negotiated view
//! (object, Table or PartialObjectMetadata).

use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::body::{self, RespBody};
use super::call::{Call, Subresource};
use super::negotiate::{Output, View};
use super::objects;
use super::table::{self, Columns, IncludeObject};
use crate::core::status::ApiError;
use crate::store::Revision;

/// Decodes a stored object and prepares it for the caller's version: coerced and defaulted
/// with the schema of the version it is stored in (defaults are not written back), then
/// converted.
pub fn from_storage(call: &Call, bytes: &[u8], revision: Revision) -> Result<Value, ApiError> {
    let mut object: Value =
        serde_json::from_slice(bytes).map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
    read_coerce(&call.served.definition, &mut object);
    objects::set_resource_version(&mut object, revision);
    super::write::convert_to(&call.served.definition, &mut object, &call.served.version)?;
    Ok(object)
}

/// What Kubernetes' storage decoder does to every object it reads: ObjectMeta coercion
/// (dropping ill-typed fields of old objects), pruning, generation 0 repaired to 1, and the
/// stored version's defaults.
pub fn read_coerce(definition: &crate::definitions::Definition, object: &mut Value) {
    let stored_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.rsplit('/').next())
        .and_then(|v| definition.version(v))
        .unwrap_or(&definition.storage);
    let schema = stored_version.schema.as_deref();
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

/// List metadata: resourceVersion and, when more items exist, the continue token.
pub fn list_metadata(revision: Revision, continue_token: Option<String>) -> Value {
    let mut meta = json!({"resourceVersion": revision.to_string()});
    if let Some(token) = continue_token {
        crate::api::objects::put(&mut meta, "continue", Value::String(token));
    }
    meta
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
            "metadata": metadata,
            "items": items.iter().map(|o| table::partial_metadata(o, v)).collect::<Vec<_>>(),
        }),
        View::Table(v) => {
            let include = IncludeObject::parse(call.query.get("includeObject"))?;
            let columns = Columns::for_version(&call.served.version);
            table::build(v, &columns, &items, metadata, include, no_headers(call))
        }
    };
    Ok(body::value_response(StatusCode::OK, output.encoding, &value))
}

fn no_headers(call: &Call) -> bool {
    call.query.get("noHeaders").is_some_and(|v| v == "true")
}
