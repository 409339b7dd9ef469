//! The `None` strategy: only `apiVersion` changes (the target version's schema then prunes,
//! as Kubernetes' converter does).

use serde_json::Value;

use crate::definitions::Definition;

use super::Error;

/// Converts `object` (of some version of `definition`) to `version`, in place.
pub fn convert(definition: &Definition, object: &mut Value, version: &str) -> Result<(), Error> {
    super::known_version(definition, version)?;
    let Value::Object(map) = object else {
        return Err(Error::Invalid("object is not a JSON object".into()));
    };
    let current = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    if !crate::core::gvr::is_api_version(current, &definition.group, version) {
        map.insert("apiVersion".into(), Value::String(crate::core::gvr::join_api_version(&definition.group, version)));
    }
    Ok(())
}
