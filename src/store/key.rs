//! Storage keys: `/{group}/{plural}/{namespace}/{name}` for namespaced objects and
//! `/{group}/{plural}/{name}` for cluster-scoped ones. Built here and nowhere else.

/// The key of one object.
pub fn object_key(group: &str, plural: &str, namespace: Option<&str>, name: &str) -> String {
    // Joined by hand: every request builds one, and `format!` costs several times as much.
    let mut key = String::with_capacity(group.len() + plural.len() + namespace.map_or(0, str::len) + name.len() + 4);
    key.push('/');
    key.push_str(group);
    key.push('/');
    key.push_str(plural);
    if let Some(namespace) = namespace {
        key.push('/');
        key.push_str(namespace);
    }
    key.push('/');
    key.push_str(name);
    key
}

/// The prefix of every object of a resource (all namespaces).
pub fn resource_prefix(group: &str, plural: &str) -> String {
    format!("/{group}/{plural}/")
}

/// The prefix of a resource's objects in one namespace.
pub fn namespace_prefix(group: &str, plural: &str, namespace: &str) -> String {
    format!("/{group}/{plural}/{namespace}/")
}

/// The resource prefix (`/{group}/{plural}/`) a key or longer prefix belongs to.
pub fn resource_prefix_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix('/')?;
    let group_end = rest.find('/')? + 1;
    let plural_end = rest.get(group_end..)?.find('/')? + group_end + 1;
    key.get(..=plural_end)
}

/// The part of a key after the resource prefix (`namespace/name` or `name`).
pub fn relative_to_resource(key: &str) -> &str {
    resource_prefix_of(key).and_then(|p| key.get(p.len()..)).unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_prefixes() {
        let key = object_key("stable.example.com", "crontabs", Some("default"), "c");
        assert_eq!(key, "/stable.example.com/crontabs/default/c");
        assert!(key.starts_with(&namespace_prefix("stable.example.com", "crontabs", "default")));
        assert_eq!(resource_prefix_of(&key), Some("/stable.example.com/crontabs/"));
        assert_eq!(resource_prefix_of("/g/p/"), Some("/g/p/"));
        assert_eq!(resource_prefix_of("/g"), None);
        assert_eq!(relative_to_resource(&key), "default/c");
        assert_eq!(object_key("g", "widgets", None, "w"), "/g/widgets/w");
    }
}
