//! Group, version, kind and resource names, as Kubernetes' `schema` package spells them.

use std::fmt;

/// An API group and version, e.g. `stable.example.com/v1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    pub group: String,
    pub version: String,
}

impl GroupVersion {
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        GroupVersion { group: group.into(), version: version.into() }
    }

    /// Parses an `apiVersion` value: `group/version`, or `version` for the core group.
    pub fn parse_api_version(api_version: &str) -> Option<GroupVersion> {
        match api_version.split_once('/') {
            Some((group, version)) if !group.is_empty() && !version.is_empty() && !version.contains('/') => {
                Some(GroupVersion::new(group, version))
            }
            None if !api_version.is_empty() => Some(GroupVersion::new("", api_version)),
            _ => None,
        }
    }

    /// The `apiVersion` string of objects in this group version.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { join_api_version(&self.group, &self.version) }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// `group/version`, the `apiVersion` of a named group's objects. Joined by hand: every write
/// builds a few, and `format!` costs several times as much.
pub fn join_api_version(group: &str, version: &str) -> String {
    let mut api_version = String::with_capacity(group.len() + 1 + version.len());
    api_version.push_str(group);
    api_version.push('/');
    api_version.push_str(version);
    api_version
}

/// Whether `api_version` is `group/version` (a named group), without building that string.
pub fn is_api_version(api_version: &str, group: &str, version: &str) -> bool {
    api_version.strip_prefix(group).and_then(|rest| rest.strip_prefix('/')) == Some(version)
}

/// A group and resource (plural), e.g. `crontabs.stable.example.com`: the "qualified resource"
/// that Kubernetes error messages name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        GroupResource { group: group.into(), resource: resource.into() }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { f.write_str(&self.resource) } else { write!(f, "{}.{}", self.resource, self.group) }
    }
}

/// A group and kind, e.g. `CronTab.stable.example.com`, as 422 messages name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupKind {
    pub group: String,
    pub kind: String,
}

impl GroupKind {
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        GroupKind { group: group.into(), kind: kind.into() }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() { f.write_str(&self.kind) } else { write!(f, "{}.{}", self.kind, self.group) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_api_versions() {
        let gv = GroupVersion::parse_api_version("stable.example.com/v1").unwrap();
        assert_eq!((gv.group.as_str(), gv.version.as_str()), ("stable.example.com", "v1"));
        assert_eq!(GroupVersion::parse_api_version("v1").unwrap().group, "");
        assert!(GroupVersion::parse_api_version("").is_none());
        assert!(GroupVersion::parse_api_version("a/b/c").is_none());
        assert!(GroupVersion::parse_api_version("/v1").is_none());
    }

    #[test]
    fn joins_and_matches_api_versions_of_named_groups() {
        assert_eq!(join_api_version("stable.example.com", "v1"), "stable.example.com/v1");
        assert!(is_api_version("stable.example.com/v1", "stable.example.com", "v1"));
        for other in
            ["stable.example.com/v2", "stable.example.com/v1/x", "stable.example.comv1", "example.com/v1", "v1", ""]
        {
            assert!(!is_api_version(other, "stable.example.com", "v1"), "{other}");
        }
    }

    #[test]
    fn qualified_names_render_like_kubernetes() {
        assert_eq!(GroupResource::new("stable.example.com", "crontabs").to_string(), "crontabs.stable.example.com");
        assert_eq!(GroupKind::new("stable.example.com", "CronTab").to_string(), "CronTab.stable.example.com");
    }
}
