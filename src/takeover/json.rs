//! Reading and editing the JSON of objects from the main apiserver without indexing that can
//! panic: a missing field reads as `null`; a field set on the way makes the objects it needs.

use serde_json::{Map, Value};

static NULL: Value = Value::Null;

/// The value at a JSON pointer (`/metadata/name`), or `null`.
pub fn at<'a>(value: &'a Value, pointer: &str) -> &'a Value {
    value.pointer(pointer).unwrap_or(&NULL)
}

/// Sets the field at `path`, making objects on the way (a non-object on the way is replaced).
pub fn set(value: &mut Value, path: &[&str], new: Value) {
    let Some((first, rest)) = path.split_first() else {
        *value = new;
        return;
    };
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    if let Value::Object(map) = value {
        set(map.entry(first.to_string()).or_insert(Value::Null), rest, new);
    }
}

/// Removes the field at `path`, if there.
pub fn remove(value: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut current = value;
    for key in parents {
        match current.get_mut(*key) {
            Some(next) => current = next,
            None => return,
        }
    }
    if let Some(map) = current.as_object_mut() {
        map.remove(*last);
    }
}
