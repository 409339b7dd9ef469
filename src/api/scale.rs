//! The scale subresource: an `autoscaling/v1` `Scale` read from and written into the paths
//! the definition names (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`), shown
//! as a Table with the scale columns when asked.

use http::{Response, StatusCode};
use serde_json::{Map, Value, json};

use super::Api;
use super::admit;
use super::body::{ReqBody, RespBody, read_limited};
use super::call::Call;
use super::codec;
use super::errors;
use super::negotiate::{Output, negotiate};
use super::objects;
use super::ownership;
use super::patch::{PatchType, apply_patch};
use super::update::{self, Committed, read_current};
use super::write::FieldValidation;
use crate::admission::Operation;
use crate::core::field::go_type;
use crate::core::status::ApiError;
use crate::definitions::Scale;

/// The kind a scale body decodes to by default.
const SCALE: codec::Expected<'static> = codec::Expected { group: "autoscaling", version: "v1", kind: "Scale" };

fn scale_paths(call: &Call) -> Result<&Scale, ApiError> {
    call.served.version.scale.as_ref().ok_or_else(|| ApiError::not_found(&call.resource(), &call.name))
}

fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.trim_start_matches('.').split('.').filter(|s| !s.is_empty())
}

fn lookup<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path).try_fold(object, |node, key| node.get(key))
}

/// An int64 at `path` (absent: `None`); other types are an error, as `NestedInt64` reports.
fn nested_int(object: &Value, path: &str) -> Result<Option<i64>, ApiError> {
    match lookup(object, path) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
        Some(other) => Err(ApiError::bad_request(format!(
            "{path} accessor error: {other} is of the type {}, expected int64",
            go_type(other)
        ))),
    }
}

/// The Scale of an object.
fn scale_of(call: &Call, object: &Value) -> Result<Value, ApiError> {
    let paths = scale_paths(call)?;
    let replicas =
        nested_int(object, &paths.spec_replicas_path).map_err(|e| ApiError::internal(e.message))?.ok_or_else(|| {
            ApiError::internal(format!("the spec replicas field {:?} does not exist", paths.spec_replicas_path))
        })?;
    let status_replicas = nested_int(object, &paths.status_replicas_path).ok().flatten().unwrap_or(0);
    let mut status = json!({"replicas": status_replicas});
    if let Some(selector) = paths.label_selector_path.as_deref().and_then(|p| lookup(object, p)).and_then(Value::as_str)
    {
        crate::api::objects::put(&mut status, "selector", json!(selector));
    }
    let meta = objects::metadata(object).cloned().unwrap_or_default();
    let mut scale_meta = Map::new();
    for field in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = meta.get(field) {
            scale_meta.insert(field.into(), v.clone());
        }
    }
    Ok(
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": scale_meta, "spec": {"replicas": replicas}, "status": status}),
    )
}

fn set_path(object: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = segments(path).collect();
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    let mut node = object;
    for part in parents {
        if !node.get(*part).is_some_and(Value::is_object) {
            if let Value::Object(map) = node {
                map.insert((*part).to_string(), json!({}));
            }
        }
        match node.get_mut(*part) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Value::Object(map) = node {
        map.insert((*last).to_string(), value);
    }
}

/// `autoscaling/v1` `Scale` as Kubernetes' Go type writes it: fields in the struct's order,
/// `spec.replicas` omitted when zero, `status.selector` when empty.
#[derive(serde::Serialize)]
struct TypedScale<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: ScaleMeta<'a>,
    spec: ScaleSpec,
    status: ScaleStatus<'a>,
}

/// The `ObjectMeta` fields a Scale carries, in `ObjectMeta`'s order.
#[derive(serde::Serialize)]
struct ScaleMeta<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(rename = "resourceVersion", skip_serializing_if = "str::is_empty")]
    resource_version: &'a str,
    #[serde(rename = "creationTimestamp", skip_serializing_if = "Option::is_none")]
    creation_timestamp: Option<&'a str>,
}

#[derive(serde::Serialize)]
struct ScaleSpec {
    #[serde(skip_serializing_if = "is_zero")]
    replicas: i64,
}

#[derive(serde::Serialize)]
struct ScaleStatus<'a> {
    replicas: i64,
    #[serde(skip_serializing_if = "str::is_empty")]
    selector: &'a str,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The JSON bytes of a Scale made by [`scale_of`].
fn typed_json(scale: &Value) -> serde_json::Result<Vec<u8>> {
    let text = |pointer: &str| scale.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    let number = |pointer: &str| scale.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    serde_json::to_vec(&TypedScale {
        kind: "Scale",
        api_version: "autoscaling/v1",
        metadata: ScaleMeta {
            name: text("/metadata/name"),
            namespace: text("/metadata/namespace"),
            uid: text("/metadata/uid"),
            resource_version: text("/metadata/resourceVersion"),
            creation_timestamp: scale.pointer("/metadata/creationTimestamp").and_then(Value::as_str),
        },
        spec: ScaleSpec { replicas: number("/spec/replicas") },
        status: ScaleStatus { replicas: number("/status/replicas"), selector: text("/status/selector") },
    })
}

/// A Scale in the negotiated view: JSON objects in the Go type's field order.
fn scale_response(call: &Call, output: Output, scale: Value) -> Result<Response<RespBody>, ApiError> {
    if output == Output::JSON {
        let bytes = typed_json(&scale).map_err(|e| ApiError::internal(format!("encoding JSON: {e}")))?;
        return Ok(super::body::bytes_response(StatusCode::OK, "application/json", bytes));
    }
    super::present::object_response(call, output, StatusCode::OK, scale)
}

pub async fn get(api: &Api, call: &Call) -> Result<Response<RespBody>, ApiError> {
    let output = negotiate(call.accept(), false)?;
    let (_, object) = read_current(api, call).await?;
    scale_response(call, output, scale_of(call, &object)?)
}

/// How a scale write computes the new `Scale` from the current one.
enum ScaleWrite<'a> {
    Replace(Value),
    Patch(PatchType, &'a [u8]),
    Apply { config: &'a Value, force: bool },
}

/// Writes the replicas of a `Scale` into the object, and the scale writer's ownership of
/// them into its managedFields.
async fn apply_scale(api: &Api, call: &Call, write: ScaleWrite<'_>) -> Result<Response<RespBody>, ApiError> {
    let options_kind = if matches!(write, ScaleWrite::Replace(_)) { "UpdateOptions" } else { "PatchOptions" };
    let output = negotiate(call.accept(), false)?;
    let dry_run = call.dry_run()?;
    let paths = scale_paths(call)?.clone();
    let conflict = || ApiError::conflict(&call.resource(), &call.name, errors::OPTIMISTIC_LOCK_MESSAGE);
    for _ in 0..5 {
        let (current, old) = read_current(api, call).await?;
        let mut old_scale = scale_of(call, &old).unwrap_or_else(|_| json!({"spec": {}}));
        ownership::scale_managed_fields(call, &old, &mut old_scale)?;
        let (mut scale, applied) = match &write {
            ScaleWrite::Replace(scale) => (scale.clone(), false),
            ScaleWrite::Patch(kind, patch) => {
                (apply_patch(*kind, patch, &old_scale, FieldValidation::of(call)?)?.object, false)
            }
            ScaleWrite::Apply { config, force } => (ownership::apply_scale(call, &old_scale, config, *force)?, true),
        };
        if scale.get("kind").and_then(Value::as_str).is_some_and(|k| k != "Scale") {
            return Err(ApiError::bad_request("the body must be an autoscaling/v1 Scale"));
        }
        // Admission sees the Scale (autoscaling/v1) of the scale subresource, as in Kubernetes;
        // the main resource's webhooks are not asked again when it is written.
        let write = admit::Write { options_kind, ..admit::Write::new(Operation::Update, &call.name, dry_run) };
        let admitting = admit::begin(api, call, write);
        let (mut warnings, _) = admit::mutate(admitting.as_ref(), call, Some(&mut scale), Some(&old_scale)).await?;
        warnings.extend(admit::validate(admitting.as_ref(), call, Some(&scale), Some(&old_scale)).await?);
        let pinned = objects::resource_version(&scale).to_string();
        if !pinned.is_empty() && pinned != objects::resource_version(&old) {
            return Err(conflict());
        }
        let replicas = match scale.pointer("/spec/replicas") {
            Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or(0),
            None | Some(Value::Null) => {
                return Err(ApiError::bad_request(format!(
                    "the spec replicas field {:?} cannot be empty",
                    paths.spec_replicas_path
                )));
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!("invalid spec.replicas: {other}")));
            }
        };
        let mut object = old.clone();
        set_path(&mut object, &paths.spec_replicas_path, json!(replicas));
        ownership::track_scale(call, &old, &old_scale, &mut scale, applied, &mut object)?;
        let main = Call { subresource: super::call::Subresource::None, ..call.clone() };
        match update::commit(api, &main, &current, &old, object, dry_run, None).await {
            Ok((Committed::Written(o) | Committed::Deleted(o) | Committed::Unchanged(o), _)) => {
                let mut response = scale_response(call, output, scale_of(call, &o)?)?;
                super::body::add_warnings(&mut response, &warnings);
                return Ok(response);
            }
            Err(Some(e)) => return Err(e),
            Err(None) if !pinned.is_empty() => return Err(conflict()),
            Err(None) => continue,
        }
    }
    Err(conflict())
}

pub async fn update(api: &Api, call: &Call, body: ReqBody) -> Result<Response<RespBody>, ApiError> {
    ownership::check_options(call, "UpdateOptions", false)?;
    let bytes = read_limited(body).await?;
    let scale = codec::decode_object(&bytes, call.content_type(), SCALE)?.value;
    apply_scale(api, call, ScaleWrite::Replace(scale)).await
}

pub async fn patch(api: &Api, call: &Call, kind: PatchType, patch: &[u8]) -> Result<Response<RespBody>, ApiError> {
    apply_scale(api, call, ScaleWrite::Patch(kind, patch)).await
}

/// Server-side apply of a `Scale`.
pub async fn apply(api: &Api, call: &Call, config: &Value, force: bool) -> Result<Response<RespBody>, ApiError> {
    apply_scale(api, call, ScaleWrite::Apply { config, force }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_written_in_the_order_of_the_go_type() {
        let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"replicas": 3}, "status": {"replicas": 1, "selector": "app=w"}});
        assert_eq!(
            String::from_utf8(typed_json(&scale).unwrap()).unwrap(),
            concat!(
                r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"w","namespace":"ns","uid":"u-1","#,
                r#""resourceVersion":"7","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"replicas":3},"#,
                r#""status":{"replicas":1,"selector":"app=w"}}"#
            )
        );
        // Zero desired replicas and an empty selector are omitted, as omitempty omits them.
        let zero = json!({"metadata": {"name": "z"}, "spec": {"replicas": 0}, "status": {"replicas": 0}});
        assert_eq!(
            String::from_utf8(typed_json(&zero).unwrap()).unwrap(),
            r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"z"},"spec":{},"status":{"replicas":0}}"#
        );
    }

    #[test]
    fn paths_read_and_write() {
        let mut o = json!({"spec": {"replicas": 3}, "status": {"selector": "a=b"}});
        assert_eq!(nested_int(&o, ".spec.replicas").unwrap(), Some(3));
        assert_eq!(nested_int(&o, ".status.replicas").unwrap(), None);
        assert!(nested_int(&json!({"spec": {"replicas": "x"}}), ".spec.replicas").is_err());
        set_path(&mut o, ".spec.replicas", json!(5));
        set_path(&mut o, ".spec.deep.count", json!(1));
        assert_eq!(o["spec"]["replicas"], 5);
        assert_eq!(o["spec"]["deep"]["count"], 1);
    }
}
